"""Ethereum Node Records (EIP-778, "v4" identity) with the Waku fields (31/WAKU2-ENR), sans-IO.

nwaku's ``/debug/v1/info`` gives its ``enrUri`` and operators paste it where Status (go-waku)
and js-waku take a store node. A record is ``rlp([signature, seq, k1, v1, k2, v2, …])`` with
the keys sorted and unique, at most 300 bytes; the signature is the 64-byte ``r || s`` of
``keccak256(rlp([seq, k1, v1, …]))`` by the node key; the text form is ``enr:`` and
unpadded URL-safe base64. Keys used here: ``id`` = ``v4``, ``secp256k1`` (33-byte
compressed key), ``ip`` (4 bytes), ``tcp`` (big-endian integer), and Waku's (nwaku
``waku/waku_enr``):

- ``multiaddrs``: each multiaddr's binary form (without ``/p2p/…``) behind its length as a
  2-byte big-endian integer, concatenated (addresses ``ip``/``tcp`` cannot say: WebSocket,
  DNS);
- ``waku2``: one byte of capabilities, bit 0 relay, 1 store, 2 filter, 3 lightpush, 4 sync;
- ``rs``: cluster id (2 bytes BE), shard count (1 byte), each shard (2 bytes BE) — or, for
  64 shards or more, ``rsv``: cluster id and a 128-byte bit vector (shard ``n`` is bit
  ``n % 8`` of byte ``n // 8``).
"""

from __future__ import annotations

import base64
import ipaddress
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import coincurve
import rlp

from waku_legacy.crypto.keccak import keccak256
from waku_legacy.crypto.secp256k1 import sign_rfc6979, verify_rfc6979
from waku_legacy.errors import DecodeError, LimitExceeded

__all__ = [
    "MAX_RECORD_SIZE",
    "STORE",
    "Enr",
    "decode_enr",
    "decode_multiaddrs",
    "decode_relay_shards",
    "encode_enr",
    "encode_multiaddrs",
    "enr_of_listener",
    "relay_shards_field",
    "waku_enr",
]

MAX_RECORD_SIZE = 300  # EIP-778
RELAY, STORE, FILTER, LIGHTPUSH, SYNC = 1, 2, 4, 8, 16  # waku2 capability bits
_RS_MAX = 64  # nwaku: 64 shards or more go in the bit vector

Value = bytes | int


@dataclass(frozen=True)
class Enr:
    seq: int
    pairs: dict[str, bytes]  # raw values as the record holds them
    signature: bytes

    @property
    def public_key(self) -> bytes:
        return self.pairs.get("secp256k1", b"")


def _content(seq: int, pairs: Mapping[str, Value]) -> list[object]:
    items: list[object] = [seq]
    for key in sorted(pairs):
        items += [key.encode("ascii"), pairs[key]]
    return items


def encode_enr(key: coincurve.PrivateKey, seq: int, pairs: Mapping[str, Value]) -> str:
    """The signed record's text form; ``id`` and ``secp256k1`` are added."""
    full: dict[str, Value] = {
        **pairs, "id": b"v4", "secp256k1": key.public_key.format(compressed=True)
    }  # fmt: skip
    content = _content(seq, full)
    signature = sign_rfc6979(keccak256(rlp.encode(content)), key)
    record = rlp.encode([signature, *content])
    if len(record) > MAX_RECORD_SIZE:
        raise LimitExceeded("ENR", f"{len(record)} bytes, over {MAX_RECORD_SIZE}")
    return "enr:" + base64.urlsafe_b64encode(record).decode("ascii").rstrip("=")


def decode_enr(text: str) -> Enr:
    """Parse and verify a ``v4`` record."""
    if not text.startswith("enr:"):
        raise DecodeError("ENR", "does not start with 'enr:'")
    body = text[4:]
    try:
        record = base64.urlsafe_b64decode(body + "=" * (-len(body) % 4))
        items = rlp.decode(record)
    except Exception as exc:  # binascii.Error, rlp's DecodingError
        raise DecodeError("ENR", f"not base64url RLP: {exc}") from None
    if len(record) > MAX_RECORD_SIZE:
        raise LimitExceeded("ENR", f"{len(record)} bytes, over {MAX_RECORD_SIZE}")
    if not isinstance(items, list) or len(items) < 2 or len(items) % 2:
        raise DecodeError("ENR", "not a list of signature, seq and key/value pairs")
    if not all(isinstance(item, bytes) for item in items):
        raise DecodeError("ENR", "a nested list where bytes belong")
    signature, seq_bytes, rest = items[0], items[1], items[2:]
    keys = [k.decode("ascii", "replace") for k in rest[0::2]]
    if keys != sorted(set(keys)):
        raise DecodeError("ENR", "keys not sorted and unique")
    pairs = dict(zip(keys, rest[1::2], strict=True))
    if pairs.get("id") != b"v4":
        raise DecodeError("ENR", f"identity scheme {pairs.get('id')!r}, not v4")
    digest = keccak256(rlp.encode([seq_bytes, *rest]))
    try:
        valid = verify_rfc6979(digest, signature, pairs.get("secp256k1", b""))
    except Exception:
        valid = False
    if not valid:
        raise DecodeError("ENR", "signature does not verify with its secp256k1 key")
    return Enr(int.from_bytes(seq_bytes, "big"), pairs, signature)


def encode_multiaddrs(binary: Sequence[bytes]) -> bytes:
    """The ``multiaddrs`` value from multiaddrs in binary form."""
    return b"".join(len(m).to_bytes(2, "big") + m for m in binary)


def decode_multiaddrs(value: bytes) -> list[bytes]:
    out, at = [], 0
    while at < len(value):
        if at + 2 > len(value):
            raise DecodeError("ENR multiaddrs", "truncated length", offset=at)
        size = int.from_bytes(value[at : at + 2], "big")
        if size == 0 or at + 2 + size > len(value):
            raise DecodeError("ENR multiaddrs", f"bad length {size}", offset=at)
        out.append(value[at + 2 : at + 2 + size])
        at += 2 + size
    return out


def relay_shards_field(cluster_id: int, shards: Sequence[int]) -> tuple[str, bytes]:
    """``("rs", …)`` or, for 64 shards or more, ``("rsv", …)``."""
    ordered = list(dict.fromkeys(shards))
    if any(not 0 <= s <= 1023 for s in ordered):
        raise DecodeError("relay shards", "a shard outside 0..1023")
    head = cluster_id.to_bytes(2, "big")
    if len(ordered) < _RS_MAX:
        return "rs", head + bytes([len(ordered)]) + b"".join(s.to_bytes(2, "big") for s in ordered)
    vector = bytearray(128)
    for shard in ordered:
        vector[shard // 8] |= 1 << (shard % 8)
    return "rsv", head + bytes(vector)


def decode_relay_shards(key: str, value: bytes) -> tuple[int, list[int]]:
    if key == "rs":
        if len(value) < 3 or len(value) != 3 + 2 * value[2]:
            raise DecodeError("ENR rs", f"{len(value)} bytes do not match the shard count")
        shards = [int.from_bytes(value[3 + 2 * i : 5 + 2 * i], "big") for i in range(value[2])]
        return int.from_bytes(value[:2], "big"), shards
    if key == "rsv":
        if len(value) != 130:
            raise DecodeError("ENR rsv", f"{len(value)} bytes, not 130")
        bits = [8 * i + j for i in range(128) for j in range(8) if value[2 + i] >> j & 1]
        return int.from_bytes(value[:2], "big"), bits
    raise DecodeError("ENR", f"{key!r} is not a relay shards key")


def waku_enr(
    key: coincurve.PrivateKey,
    seq: int,
    *,
    ip: str | None,
    tcp: int | None,
    multiaddrs: Sequence[bytes] = (),
    cluster_id: int,
    shards: Sequence[int],
    capabilities: int = STORE,
) -> str:
    """A Waku node's record: ``ip``/``tcp`` when given (IPv4), ``multiaddrs``, ``waku2``,
    and the relay shards."""
    pairs: dict[str, Value] = {"waku2": bytes([capabilities])}
    if ip is not None and tcp is not None:
        pairs["ip"] = ipaddress.IPv4Address(ip).packed
        pairs["tcp"] = tcp
    if multiaddrs:
        pairs["multiaddrs"] = encode_multiaddrs(multiaddrs)
    if shards:
        name, value = relay_shards_field(cluster_id, shards)
        pairs[name] = value
    return encode_enr(key, seq, pairs)


def enr_of_listener(
    key: coincurve.PrivateKey,
    seq: int,
    multiaddrs: Sequence[str],
    *,
    cluster_id: int,
    shards: Sequence[int],
) -> str | None:
    """The store node's record from its announced multiaddrs: the first plain
    ``/ip4/…/tcp/…`` that is not a wildcard gives ``ip``/``tcp``, every other dialable one
    (WebSocket, DNS) goes in ``multiaddrs``. None when nothing is dialable (a wildcard
    listener without ``announce``) or the record would be over 300 bytes."""
    from multiaddr import Multiaddr

    ip = tcp = None
    extra: list[bytes] = []
    for text in multiaddrs:
        address = Multiaddr(text.split("/p2p/")[0])
        names = [p.name for p in address.protocols()]
        if names[0] == "ip4" and address.value_for_protocol("ip4") == "0.0.0.0":
            continue
        if names == ["ip4", "tcp"] and ip is None:
            ip, tcp = address.value_for_protocol("ip4"), int(address.value_for_protocol("tcp"))
        else:
            extra.append(address.to_bytes())
    if ip is None and not extra:
        return None
    try:
        return waku_enr(
            key, seq, ip=ip, tcp=tcp, multiaddrs=extra, cluster_id=cluster_id, shards=shards
        )
    except LimitExceeded:
        return None
