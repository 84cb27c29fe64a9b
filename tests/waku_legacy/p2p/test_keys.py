"""Issue 36: the node key's peer id without py-libp2p (waku_legacy.p2p.keys), checked
against py-libp2p (an independent implementation, installed for the tests only) and against
the derivation written out by hand from the peer-ids spec: the identity multihash (0x00,
length) of the ``PublicKey`` protobuf (field 1 = 2, secp256k1; field 2 = the 33-byte
compressed point), in base58btc."""

from __future__ import annotations

import base58
import coincurve
from libp2p.crypto.secp256k1 import Secp256k1PrivateKey
from libp2p.peer.id import ID

from tests.p2p_pylibp2p.keys import libp2p_key_pair
from waku_legacy.p2p.keys import KeyPair, ephemeral_key_pair, peer_id_of


def by_hand(key: coincurve.PrivateKey) -> str:
    point = key.public_key.format(compressed=True)
    protobuf = bytes([0x08, 0x02, 0x12, len(point)]) + point  # 37 bytes: <= 42, no hashing
    return base58.b58encode(bytes([0x00, len(protobuf)]) + protobuf).decode()


def test_peer_ids_equal_py_libp2p_and_the_spec_derivation() -> None:
    keys = [coincurve.PrivateKey(bytes(31) + b"\x01"), coincurve.PrivateKey(b"\x42" * 32)]
    keys += [ephemeral_key_pair().private_key for _ in range(50)]
    for key in keys:
        ours = peer_id_of(KeyPair(key))
        theirs = ID.from_pubkey(Secp256k1PrivateKey(key).get_public_key()).to_base58()
        assert ours == theirs == by_hand(key)
        assert ours.startswith("16Uiu2")
        assert KeyPair(key).public_key == Secp256k1PrivateKey(key).get_public_key().serialize()


def test_the_generator_point_key() -> None:
    """Private key 1: the public key is secp256k1's generator G (SEC 2, 2.4.1), compressed
    0279BE667E...; its peer id written out from that constant, with no key library."""
    g = bytes.fromhex("0279BE667EF9DCBBAC55A06295CE870B07029BFCDB2DCE28D959F2815B16F81798")
    protobuf = b"\x08\x02\x12\x21" + g
    expected = base58.b58encode(b"\x00\x25" + protobuf).decode()
    pair = KeyPair(coincurve.PrivateKey(bytes(31) + b"\x01"))
    assert pair.public_key == protobuf
    assert peer_id_of(pair) == expected


def test_the_test_peer_uses_the_same_key() -> None:
    pair = ephemeral_key_pair()
    converted = libp2p_key_pair(pair)
    assert ID.from_pubkey(converted.public_key).to_base58() == pair.peer_id
