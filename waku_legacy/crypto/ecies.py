"""ECIES as go-ethereum implements it (crypto/ecies), used by Waku v1 asymmetric payloads
and by the RLPx handshake.

Ciphertext layout: ``R (65-byte uncompressed ephemeral key) || IV (16) || AES-128-CTR
ciphertext || HMAC-SHA256 tag (32)``. Keys: NIST SP 800-56 concatenation KDF with SHA-256
over the raw ECDH X coordinate, ``ke = K[:16]``, ``km = sha256(K[16:32])``; the tag covers
``IV || ciphertext || shared_mac_data`` (RLPx passes the 2-byte size prefix there).
"""

from __future__ import annotations

import hashlib
import hmac
import os

import coincurve
from Crypto.Cipher import AES

from waku_legacy.crypto.secp256k1 import ecdh_raw_x, generate_private_key, public_key_of
from waku_legacy.errors import CryptoError

__all__ = ["OVERHEAD", "decrypt", "encrypt"]

OVERHEAD = 65 + 16 + 32


def _kdf(shared_x: bytes) -> tuple[bytes, bytes]:
    # One round of the concat KDF is enough for 32 bytes of key material.
    material = hashlib.sha256(b"\x00\x00\x00\x01" + shared_x).digest()
    return material[:16], hashlib.sha256(material[16:32]).digest()


def encrypt(
    public_key: bytes,
    plaintext: bytes,
    shared_mac_data: bytes = b"",
    *,
    ephemeral_key: coincurve.PrivateKey | None = None,
    iv: bytes | None = None,
) -> bytes:
    ephemeral = ephemeral_key or generate_private_key()
    iv = iv if iv is not None else os.urandom(16)
    ke, km = _kdf(ecdh_raw_x(ephemeral, public_key))
    body = AES.new(ke, AES.MODE_CTR, nonce=b"", initial_value=iv).encrypt(plaintext)
    tag = hmac.new(km, iv + body + shared_mac_data, hashlib.sha256).digest()
    return public_key_of(ephemeral) + iv + body + tag


def decrypt(
    private_key: coincurve.PrivateKey, ciphertext: bytes, shared_mac_data: bytes = b""
) -> bytes:
    if len(ciphertext) < OVERHEAD:
        raise CryptoError(
            f"ECIES ciphertext too short: {len(ciphertext)} bytes, need at least {OVERHEAD}"
        )
    if ciphertext[0] != 0x04:
        raise CryptoError("ECIES ciphertext does not start with an uncompressed public key")
    ephemeral_pub, iv = ciphertext[:65], ciphertext[65:81]
    body, tag = ciphertext[81:-32], ciphertext[-32:]
    ke, km = _kdf(ecdh_raw_x(private_key, ephemeral_pub))
    expected = hmac.new(km, iv + body + shared_mac_data, hashlib.sha256).digest()
    if not hmac.compare_digest(expected, tag):
        raise CryptoError("ECIES authentication failed (wrong key or corrupted ciphertext)")
    return AES.new(ke, AES.MODE_CTR, nonce=b"", initial_value=iv).decrypt(body)
