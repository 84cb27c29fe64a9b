"""Symmetric crypto of Waku v1 payloads and Status public chats.

AES-256-GCM with a 12-byte random nonce appended after ``ciphertext || tag`` (status-go),
and the PBKDF2 key derivation status-go uses for public chats and the mailserver request
key (65356 iterations, not 65536: a long-standing status-go constant).
"""

from __future__ import annotations

import functools
import hashlib
import os

from Crypto.Cipher import AES

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


def _check_key(key: bytes) -> None:
    if len(key) != 32:
        raise CryptoError(f"AES-256-GCM key must be 32 bytes, got {len(key)}")


def aes_gcm_encrypt(key: bytes, plaintext: bytes, *, nonce: bytes | None = None) -> bytes:
    """``ciphertext || tag(16) || nonce(12)``."""
    _check_key(key)
    nonce = nonce if nonce is not None else os.urandom(GCM_NONCE_SIZE)
    cipher = AES.new(key, AES.MODE_GCM, nonce=nonce)
    body, tag = cipher.encrypt_and_digest(plaintext)
    return body + tag + nonce


def aes_gcm_decrypt(key: bytes, data: bytes) -> bytes:
    _check_key(key)
    if len(data) < GCM_NONCE_SIZE + GCM_TAG_SIZE:
        raise CryptoError(
            f"AES-GCM data too short: {len(data)} bytes, "
            f"need at least {GCM_NONCE_SIZE + GCM_TAG_SIZE}"
        )
    nonce = data[-GCM_NONCE_SIZE:]
    tag = data[-GCM_NONCE_SIZE - GCM_TAG_SIZE : -GCM_NONCE_SIZE]
    body = data[: -GCM_NONCE_SIZE - GCM_TAG_SIZE]
    cipher = AES.new(key, AES.MODE_GCM, nonce=nonce)
    try:
        return cipher.decrypt_and_verify(body, tag)
    except ValueError as exc:
        raise CryptoError("AES-GCM authentication failed (wrong key or corrupted data)") from exc
