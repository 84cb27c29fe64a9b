"""The libp2p identity: a secp256k1 node key file, as nwaku's ``--nodekey``.

The file holds the 32-byte private key as 64 hex digits (the same format as the bridge's v1
``node_key_file``, :mod:`waku_legacy.crypto.key_file`); it is created on first use with mode
0600 through :func:`waku_legacy.durable.write_atomic`, and a file that does not hold a key is
refused with a :class:`~waku_legacy.errors.ConfigError` naming it (never replaced). The peer
id is the libp2p one of the secp256k1 public key (``16Uiu2…``), as nwaku derives it: the
identity multihash of the ``PublicKey`` protobuf (type 2, the 33-byte compressed point),
base58btc (:func:`waku_legacy.p2p.codec.peer_key.peer_id`). No libp2p library is involved.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import coincurve

from waku_legacy.crypto.key_file import load_node_key, load_or_create_node_key
from waku_legacy.crypto.secp256k1 import generate_private_key
from waku_legacy.p2p.codec.peer_key import encode_public_key, peer_id

__all__ = ["KeyPair", "ephemeral_key_pair", "key_pair_of", "load_key_pair", "peer_id_of"]

SECP256K1 = 2  # libp2p's KeyType


@dataclass(frozen=True)
class KeyPair:
    """A secp256k1 libp2p identity: the private key and what a peer sees of it."""

    private_key: coincurve.PrivateKey

    @property
    def public_key(self) -> bytes:
        """The libp2p ``PublicKey`` protobuf (secp256k1, compressed point)."""
        return encode_public_key(SECP256K1, self.private_key.public_key.format(compressed=True))

    @property
    def peer_id(self) -> str:
        return peer_id(self.public_key)


def key_pair_of(key: coincurve.PrivateKey) -> KeyPair:
    return KeyPair(key)


def load_key_pair(path: str | os.PathLike[str], *, create: bool = True) -> tuple[KeyPair, bool]:
    """The key pair in ``path`` and whether it was just created (``create=False``: the file
    must exist)."""
    if create:
        key, created = load_or_create_node_key(path)
        return key_pair_of(key), created
    return key_pair_of(load_node_key(path)), False


def ephemeral_key_pair() -> KeyPair:
    """A fresh identity for a client that needs none of its own."""
    return key_pair_of(generate_private_key())


def peer_id_of(pair: KeyPair) -> str:
    return pair.peer_id
