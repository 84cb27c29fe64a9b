"""secp256k1 keys, recoverable signatures and raw ECDH (coincurve underneath).

Conventions follow status-go / go-ethereum: a recoverable signature is 65 bytes
``r || s || v`` with ``v`` in {0, 1}; public keys are 65-byte uncompressed
(``0x04 || X || Y``) unless said otherwise; ECDH yields the raw 32-byte X coordinate
(coincurve's own ``ecdh`` hashes the point, which RLPx and v1 ECIES do not want).
"""

from __future__ import annotations

import os

import coincurve

from waku_legacy.errors import CryptoError, SignatureError

__all__ = [
    "PrivateKey",
    "compress_public_key",
    "ecdh_raw_x",
    "generate_private_key",
    "private_key_from_bytes",
    "public_key_of",
    "recover_public_key",
    "sign_recoverable",
    "sign_rfc6979",
    "uncompressed_public_key",
    "verify_rfc6979",
]

PrivateKey = coincurve.PrivateKey
SECP256K1_N = 0xFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFEBAAEDCE6AF48A03BBFD25E8CD0364141


def private_key_from_bytes(secret: bytes) -> coincurve.PrivateKey:
    if len(secret) != 32:
        raise CryptoError(f"a secp256k1 private key is 32 bytes, got {len(secret)}")
    value = int.from_bytes(secret, "big")
    if not 0 < value < SECP256K1_N:
        raise CryptoError("secp256k1 private key out of range (must be 1..n-1)")
    return coincurve.PrivateKey(secret)


def generate_private_key() -> coincurve.PrivateKey:
    return coincurve.PrivateKey(os.urandom(32))


def public_key_of(key: coincurve.PrivateKey) -> bytes:
    """65-byte uncompressed public key."""
    return key.public_key.format(compressed=False)


def _parse_public_key(data: bytes) -> coincurve.PublicKey:
    if len(data) == 64:  # bare X || Y, as RLPx and enode URLs carry it
        data = b"\x04" + data
    try:
        return coincurve.PublicKey(data)
    except Exception as exc:  # coincurve raises ValueError or TypeError variously
        raise CryptoError(f"not a valid secp256k1 public key ({len(data)} bytes)") from exc


def uncompressed_public_key(data: bytes) -> bytes:
    """Normalise a 33-, 64- or 65-byte public key to 65-byte uncompressed form."""
    return _parse_public_key(data).format(compressed=False)


def compress_public_key(data: bytes) -> bytes:
    """Normalise a 33-, 64- or 65-byte public key to 33-byte compressed form."""
    return _parse_public_key(data).format(compressed=True)


def sign_recoverable(digest: bytes, key: coincurve.PrivateKey) -> bytes:
    """Sign a 32-byte digest: 65 bytes ``r || s || v``, v in {0, 1} (RFC 6979 nonce)."""
    if len(digest) != 32:
        raise SignatureError(f"can only sign a 32-byte digest, got {len(digest)} bytes")
    return key.sign_recoverable(digest, hasher=None)


def recover_public_key(digest: bytes, signature: bytes) -> bytes:
    """Recover the 65-byte uncompressed signer key from a 65-byte recoverable signature."""
    if len(signature) != 65:
        raise SignatureError(f"a recoverable signature is 65 bytes, got {len(signature)}")
    if len(digest) != 32:
        raise SignatureError(f"signed digest must be 32 bytes, got {len(digest)}")
    v = signature[64]
    if v >= 27:  # tolerate the Ethereum 27/28 convention on input
        signature = signature[:64] + bytes([v - 27])
    elif v > 3:
        raise SignatureError(f"recovery id {v} is not 0-3 (or 27-30)")
    try:
        return coincurve.PublicKey.from_signature_and_message(
            signature, digest, hasher=None
        ).format(compressed=False)
    except Exception as exc:
        raise SignatureError("signature does not recover to a public key") from exc


def sign_rfc6979(digest: bytes, key: coincurve.PrivateKey) -> bytes:
    """Deterministic (RFC 6979) 64-byte ``r || s`` signature with low s."""
    return sign_recoverable(digest, key)[:64]


def verify_rfc6979(digest: bytes, signature: bytes, public_key: bytes) -> bool:
    """Check a 64-byte ``r || s`` signature over a 32-byte digest."""
    if len(signature) != 64 or len(digest) != 32:
        return False
    pub = _parse_public_key(public_key)
    try:
        der = coincurve.ecdsa.cdata_to_der(coincurve.ecdsa.deserialize_compact(signature))
    except Exception:
        return False
    return pub.verify(der, digest, hasher=None)


def ecdh_raw_x(key: coincurve.PrivateKey, public_key: bytes) -> bytes:
    """The raw 32-byte X coordinate of ``key * public_key`` (no hashing)."""
    point = _parse_public_key(public_key).multiply(key.secret)
    return point.format(compressed=False)[1:33]
