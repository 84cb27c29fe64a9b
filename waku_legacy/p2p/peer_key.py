"""libp2p identity keys as they travel in the Noise handshake and identify (sans-IO).

A public key is the protobuf ``PublicKey { KeyType Type = 1; bytes Data = 2; }``
(libp2p specs, ``peer-ids/peer-ids.md``): secp256k1 (type 2) is the 33-byte compressed
point (nwaku, go-waku, this bridge), Ed25519 (type 1) the 32 raw bytes (js-libp2p's
default), RSA (0) and ECDSA (3) PKIX DER. The peer id is the multihash of those protobuf
bytes: ``identity`` when they are at most 42 bytes, else SHA-256; written in base58btc.
Signatures: secp256k1 and ECDSA sign SHA-256 of the message (DER), Ed25519 the message, RSA
PKCS#1 v1.5 with SHA-256."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

import base58
import coincurve
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, padding, rsa

from waku_legacy.errors import DecodeError
from waku_legacy.proto.wire import iter_fields, len_field

__all__ = ["KEY_TYPES", "PeerKey", "decode_public_key", "encode_public_key", "peer_id"]

KEY_TYPES = {0: "RSA", 1: "Ed25519", 2: "Secp256k1", 3: "ECDSA"}
_MAX_KEY_BYTES = 2048  # an RSA-8192 PKIX key is ~1.1 kB


@dataclass(frozen=True, slots=True)
class PeerKey:
    key_type: int
    data: bytes
    #: the protobuf bytes the peer sent (what its peer id hashes)
    encoded: bytes

    def verify(self, signature: bytes, message: bytes) -> bool:
        try:
            if self.key_type == 2:
                return bool(coincurve.PublicKey(self.data).verify(signature, message))
            if self.key_type == 1:
                ed25519.Ed25519PublicKey.from_public_bytes(self.data).verify(signature, message)
                return True
            public = serialization.load_der_public_key(self.data)
            if self.key_type == 0 and isinstance(public, rsa.RSAPublicKey):
                public.verify(signature, message, padding.PKCS1v15(), hashes.SHA256())
                return True
            if self.key_type == 3 and isinstance(public, ec.EllipticCurvePublicKey):
                public.verify(signature, message, ec.ECDSA(hashes.SHA256()))
                return True
            return False
        except (InvalidSignature, ValueError, TypeError):
            return False

    @property
    def peer_id(self) -> str:
        return peer_id(self.encoded)


def encode_public_key(key_type: int, data: bytes) -> bytes:
    """The ``PublicKey`` protobuf (the type is written even when 0, as every libp2p does)."""
    return bytes((0x08, key_type)) + len_field(2, data)


def decode_public_key(encoded: bytes) -> PeerKey:
    if len(encoded) > _MAX_KEY_BYTES:
        raise DecodeError("libp2p public key", f"{len(encoded)} bytes")
    key_type, data = 0, b""
    for field in iter_fields(encoded, "libp2p public key"):
        if field.number == 1 and isinstance(field.value, int):
            key_type = field.value
        elif field.number == 2 and isinstance(field.value, bytes):
            data = field.value
    if key_type not in KEY_TYPES or not data:
        raise DecodeError("libp2p public key", f"key type {key_type} with {len(data)} bytes")
    return PeerKey(key_type, data, bytes(encoded))


def peer_id(encoded_key: bytes) -> str:
    """The base58btc peer id of a ``PublicKey`` protobuf."""
    if len(encoded_key) <= 42:
        multihash = b"\x00" + bytes((len(encoded_key),)) + encoded_key
    else:
        multihash = b"\x12\x20" + hashlib.sha256(encoded_key).digest()
    return base58.b58encode(multihash).decode()
