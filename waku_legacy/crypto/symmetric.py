"""Symmetric crypto of Waku v1 payloads and Status public chats.

AES-256-GCM with a 12-byte random nonce appended after ``ciphertext || tag`` (status-go),
and the PBKDF2 key derivation status-go uses for public chats and the mailserver request
key (65356 iterations, not 65536: a long-standing status-go constant).

The AEAD is ``cryptography``'s (OpenSSL; already the libp2p Noise's): a migration opens
every community message, and pycryptodome built a new GCM object per message (about
50 us of the ~110 us a message cost, against ~1 us here with the key's context reused).
"""

from __future__ import annotations

import functools
import hashlib
import os

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from waku_legacy.errors import CryptoError

__all__ = [
    "GCM_NONCE_SIZE",
    "GCM_TAG_SIZE",
    "PBKDF2_ITERATIONS",
    "aes_gcm_decrypt",
    "aes_gcm_encrypt",
    "key_from_password",
]

GCM_NONCE_SIZE = 12
GCM_TAG_SIZE = 16
PBKDF2_ITERATIONS = 65356


@functools.lru_cache(maxsize=4096)
def key_from_password(password: str) -> bytes:
    """32-byte key: PBKDF2-HMAC-SHA256(password, empty salt, 65356 iterations).

    Cached (bounded): the passwords are chat ids, derived again for every magnet-link
    message checked and every envelope opened, and one derivation costs ~20 ms of CPU.
    """
    return hashlib.pbkdf2_hmac("sha256", password.encode("utf-8"), b"", PBKDF2_ITERATIONS, 32)


@functools.lru_cache(maxsize=1024)
def _aead(key: bytes) -> AESGCM:
    """The key's AES-GCM context (its key schedule), cached (bounded): a community's few
    channel keys open every one of its messages."""
    if len(key) != 32:
        raise CryptoError(f"AES-256-GCM key must be 32 bytes, got {len(key)}")
    return AESGCM(key)


def aes_gcm_encrypt(key: bytes, plaintext: bytes, *, nonce: bytes | None = None) -> bytes:
    """``ciphertext || tag(16) || nonce(12)``."""
    nonce = nonce if nonce is not None else os.urandom(GCM_NONCE_SIZE)
    if len(nonce) != GCM_NONCE_SIZE:
        raise CryptoError(f"AES-GCM nonce must be {GCM_NONCE_SIZE} bytes, got {len(nonce)}")
    return _aead(bytes(key)).encrypt(nonce, plaintext, None) + nonce


def aes_gcm_decrypt(key: bytes, data: bytes) -> bytes:
    aead = _aead(bytes(key))
    if len(data) < GCM_NONCE_SIZE + GCM_TAG_SIZE:
        raise CryptoError(
            f"AES-GCM data too short: {len(data)} bytes, "
            f"need at least {GCM_NONCE_SIZE + GCM_TAG_SIZE}"
        )
    nonce = data[-GCM_NONCE_SIZE:]
    try:
        return aead.decrypt(nonce, data[:-GCM_NONCE_SIZE], None)
    except InvalidTag as exc:
        raise CryptoError("AES-GCM authentication failed (wrong key or corrupted data)") from exc
