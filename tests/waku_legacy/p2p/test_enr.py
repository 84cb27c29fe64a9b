"""ENR (EIP-778) with Waku's fields (31/WAKU2-ENR): the EIP's own vector byte for byte, a
record an nwaku fleet node published decoded and its content re-encoded to the bytes it
signed, and the record the bridge's listener announces."""

from __future__ import annotations

import coincurve
import pytest
import rlp
from multiaddr import Multiaddr

from waku_legacy.crypto.keccak import keccak256
from waku_legacy.crypto.secp256k1 import verify_rfc6979
from waku_legacy.errors import DecodeError, LimitExceeded
from waku_legacy.p2p.enr import (
    STORE,
    decode_enr,
    decode_multiaddrs,
    decode_relay_shards,
    encode_enr,
    encode_multiaddrs,
    enr_of_listener,
    relay_shards_field,
    waku_enr,
)

# EIP-778 "Test Vectors"
EIP_KEY = "b71c71a67e1177ad4e901695e1b4b9ee17ae16c6668d313eac2f96dbcda3f291"
EIP_RECORD = (
    "enr:-IS4QHCYrYZbAKWCBRlAy5zzaDZXJBGkcnh4MHcBFZntXNFrdvJjX04jRzjzCBOonrkTfj499SZuOh8R33Ls8R"
    "Rcy5wBgmlkgnY0gmlwhH8AAAGJc2VjcDI1NmsxoQPKY0yuDUmstAHYpMa2_oxVtw0RW_QAdpzBQA8yWM0xOIN1ZHC"
    "Cdl8"
)
# A Waku sandbox fleet node's record as nwaku publishes it (nwaku
# waku/factory/networks_config.nim, TheWakuNetworkConf bootstrap nodes).
NWAKU_RECORD = (
    "enr:-QESuED0qW1BCmF-oH_ARGPr97Nv767bl_43uoy70vrbah3EaCAdK3Q0iRQ6wkSTTpdrg_dU_NC2ydO8leSlRp"
    "BX4pxiAYJpZIJ2NIJpcIRA4VDAim11bHRpYWRkcnO4XAArNiZub2RlLTAxLmRvLWFtczMud2FrdS5zYW5kYm94LnN"
    "0YXR1cy5pbQZ2XwAtNiZub2RlLTAxLmRvLWFtczMud2FrdS5zYW5kYm94LnN0YXR1cy5pbQYfQN4DgnJzkwABCAAAA"
    "AEAAgADAAQABQAGAAeJc2VjcDI1NmsxoQOTd-h5owwj-cx7xrmbvQKU8CV3Fomfdvcv1MBc-67T5oN0Y3CCdl-DdWR"
    "wgiMohXdha3UyDw"
)


def test_eip778_vector_byte_for_byte() -> None:
    key = coincurve.PrivateKey(bytes.fromhex(EIP_KEY))
    assert encode_enr(key, 1, {"ip": bytes([127, 0, 0, 1]), "udp": 30303}) == EIP_RECORD
    record = decode_enr(EIP_RECORD)
    assert record.seq == 1 and record.pairs["udp"] == (30303).to_bytes(2, "big")
    assert record.public_key == key.public_key.format(compressed=True)


def test_nwaku_record_fields_and_content_encoding() -> None:
    record = decode_enr(NWAKU_RECORD)  # signature verified with its own key
    multiaddrs = [str(Multiaddr(m)) for m in decode_multiaddrs(record.pairs["multiaddrs"])]
    assert multiaddrs == [
        "/dns4/node-01.do-ams3.waku.sandbox.status.im/tcp/30303",
        "/dns4/node-01.do-ams3.waku.sandbox.status.im/tcp/8000/wss",
    ]
    assert decode_relay_shards("rs", record.pairs["rs"]) == (1, list(range(8)))
    assert record.pairs["waku2"] == b"\x0f"  # relay, store, filter, lightpush
    # our field encoders give nwaku's bytes, and our content encoding is what it signed
    assert relay_shards_field(1, range(8)) == ("rs", record.pairs["rs"])
    assert (
        encode_multiaddrs([Multiaddr(m).to_bytes() for m in multiaddrs])
        == (record.pairs["multiaddrs"])
    )
    content = [record.seq]
    for key in sorted(record.pairs):
        value = record.pairs[key]
        if key in ("tcp", "udp"):
            content += [key.encode(), int.from_bytes(value, "big")]
        else:
            content += [key.encode(), value]
    digest = keccak256(rlp.encode(content))
    assert verify_rfc6979(digest, record.signature, record.public_key)


def test_waku_record_roundtrip_and_limits() -> None:
    key = coincurve.PrivateKey()
    ws = Multiaddr("/dns4/bridge.example.org/tcp/443/wss").to_bytes()
    text = waku_enr(key, 7, ip="203.0.113.7", tcp=60000, multiaddrs=[ws], cluster_id=16,
                    shards=[128, 32])  # fmt: skip
    record = decode_enr(text)
    assert record.seq == 7 and record.pairs["ip"] == bytes([203, 0, 113, 7])
    assert int.from_bytes(record.pairs["tcp"], "big") == 60000
    assert record.pairs["waku2"] == bytes([STORE])
    assert decode_relay_shards("rs", record.pairs["rs"]) == (16, [128, 32])
    assert decode_multiaddrs(record.pairs["multiaddrs"]) == [ws]
    many = list(range(100, 300))  # 64 shards or more: the bit vector
    name, value = relay_shards_field(16, many)
    assert name == "rsv" and decode_relay_shards(name, value) == (16, many)
    with pytest.raises(LimitExceeded):
        waku_enr(key, 1, ip=None, tcp=None, multiaddrs=[ws] * 10, cluster_id=16, shards=[1])
    tampered = text[:-3] + ("A" if text[-3] != "A" else "B") + text[-2:]
    for bad in ("enode://x", "enr:!!!", tampered):
        with pytest.raises(DecodeError):
            decode_enr(bad)


def test_listener_record() -> None:
    key = coincurve.PrivateKey()
    peer = "/p2p/16Uiu2HAmPLe7Mzm8TsYUubgCAW1aJoeFScxrLj8ppHFivPo97bUZ"
    addrs = ["/ip4/203.0.113.7/tcp/60000" + peer, "/ip4/203.0.113.7/tcp/8000/ws" + peer]
    record = decode_enr(enr_of_listener(key, 3, addrs, cluster_id=16, shards=[128]) or "")
    assert record.pairs["ip"] == bytes([203, 0, 113, 7])
    assert [str(Multiaddr(m)) for m in decode_multiaddrs(record.pairs["multiaddrs"])] == [
        "/ip4/203.0.113.7/tcp/8000/ws"
    ]
    wildcard = ["/ip4/0.0.0.0/tcp/60000" + peer, "/ip4/0.0.0.0/tcp/8000/ws" + peer]
    assert enr_of_listener(key, 3, wildcard, cluster_id=16, shards=[128]) is None
