"""py-libp2p's key pair of one of ours (the same secp256k1 key)."""

from __future__ import annotations

from libp2p.crypto.keys import KeyPair
from libp2p.crypto.secp256k1 import Secp256k1PrivateKey

from waku_legacy.p2p.keys import KeyPair as NodeKeyPair

__all__ = ["libp2p_key_pair"]


def libp2p_key_pair(pair: KeyPair | NodeKeyPair) -> KeyPair:
    if isinstance(pair, KeyPair):
        return pair
    private = Secp256k1PrivateKey(pair.private_key)
    return KeyPair(private, private.get_public_key())
