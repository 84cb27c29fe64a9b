"""The libp2p identity: a secp256k1 node key file, as nwaku's ``--nodekey``.

The file holds the 32-byte private key as 64 hex digits (the same format as the bridge's v1
``node_key_file``, :mod:`waku_legacy.crypto.key_file`); it is created on first use with mode
0600 through :func:`waku_legacy.durable.write_atomic`, and a file that does not hold a key is
refused with a :class:`~waku_legacy.errors.ConfigError` naming it (never replaced). The peer
id is the libp2p one of the secp256k1 public key (``16Uiu2…``), as nwaku derives it.
"""

from __future__ import annotations

import os

import coincurve
from libp2p.crypto.keys import KeyPair
from libp2p.crypto.secp256k1 import Secp256k1PrivateKey
from libp2p.peer.id import ID

from waku_legacy.crypto.key_file import load_node_key, load_or_create_node_key
from waku_legacy.crypto.secp256k1 import generate_private_key

__all__ = ["ephemeral_key_pair", "key_pair_of", "load_key_pair", "peer_id_of"]


def key_pair_of(key: coincurve.PrivateKey) -> KeyPair:
    private = Secp256k1PrivateKey(key)
    return KeyPair(private, private.get_public_key())


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
    return ID.from_pubkey(pair.public_key).to_base58()
