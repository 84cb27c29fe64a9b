"""libp2p identity keys as they travel in the Noise handshake and identify (sans-IO).

A public key is the protobuf ``PublicKey { KeyType Type = 1; bytes Data = 2; }``
(libp2p specs, ``peer-ids/peer-ids.md``): secp256k1 (type 2) is the 33-byte compressed
point (nwaku, go-waku, this bridge), Ed25519 (type 1) the 32 raw bytes (js-libp2p's
default), RSA (0) and ECDSA (3) PKIX DER. The peer id is the multihash of those protobuf
bytes: ``identity`` when they are at most 42 bytes, else SHA-256; written in base58btc.
Signatures: secp256k1 and ECDSA sign SHA-256 of the message (DER), Ed25519 the message, RSA
PKCS#1 v1.5 with SHA-256.

:func:`decode_public_key` parses the key itself, so whatever a peer's key bytes make a parser
raise is a typed refusal here: :class:`~waku_legacy.errors.DecodeError` for bytes that are no
key, :class:`UnsupportedKey` for a key of a kind or size we do not accept (an ECDSA curve
other than P-256/384/521, which are go-libp2p's, or an algorithm ``cryptography`` does not
know; an RSA key out of the bounds below)."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

import base58
import coincurve
from cryptography.exceptions import InvalidSignature, UnsupportedAlgorithm
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, padding, rsa

from waku_legacy.errors import DecodeError
from waku_legacy.proto.wire import iter_fields, len_field

__all__ = [
    "KEY_TYPES",
    "RSA_MAX_BITS",
    "RSA_MAX_EXPONENT",
    "RSA_MIN_BITS",
    "PeerKey",
    "UnsupportedKey",
    "decode_public_key",
    "encode_public_key",
    "peer_id",
]

KEY_TYPES = {0: "RSA", 1: "Ed25519", 2: "Secp256k1", 3: "ECDSA"}
_MAX_KEY_BYTES = 2048  # an RSA-8192 PKIX key is ~1.1 kB

# RSA identity keys: the strictest of what go-, rust- and js-libp2p accept, which every real
# peer's key (2048-4096 bits, e = 65537) meets. Modulus 2048..8192 bits: go-libp2p's
# MinRsaKeyBits 2048 and maxRsaKeyBits 8192 (core/crypto/rsa_common.go), rust-libp2p's ring
# RSA_PKCS1_2048_8192_SHA256, js-libp2p's MAX_RSA_KEY_SIZE 8192. Public exponent odd and
# 3..2^31-1: Go's crypto/rsa refuses e < 2 and e > 2^31-1, ring e < 3, even e and e > 2^33-1.
# Why it matters: verifying costs a squaring per exponent bit, so a 3071-bit exponent made
# one handshake cost 11x a secp256k1 one (issue 37).
RSA_MIN_BITS = 2048
RSA_MAX_BITS = 8192
RSA_MAX_EXPONENT = 2**31 - 1
#: ECDSA curves go-libp2p's x509 parsing accepts
_ECDSA_CURVES = ("secp256r1", "secp384r1", "secp521r1")


class UnsupportedKey(DecodeError):
    """A well-formed identity key of a kind or size the listener does not accept."""

    def __init__(self, reason: str) -> None:
        super().__init__("libp2p public key", reason)
        self.args = (f"libp2p public key not accepted: {reason}",)


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
        except (InvalidSignature, UnsupportedAlgorithm, ValueError, TypeError):
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
    _check_key(key_type, data)
    return PeerKey(key_type, data, bytes(encoded))


def _check_key(key_type: int, data: bytes) -> None:
    """Raise DecodeError for ``data`` that is not a key of ``key_type``, UnsupportedKey for
    one we do not accept (see the module docstring and the RSA bounds above)."""
    name = KEY_TYPES[key_type]
    try:
        if key_type == 2:
            coincurve.PublicKey(data)
            return
        if key_type == 1:
            ed25519.Ed25519PublicKey.from_public_bytes(data)
            return
        public = serialization.load_der_public_key(data)
    except UnsupportedAlgorithm as exc:
        raise UnsupportedKey(f"{name}: {exc}") from None
    except (ValueError, TypeError) as exc:  # what the parsers raise for bytes that are no key
        raise DecodeError("libp2p public key", f"{name}: {exc}") from None
    if key_type == 0:
        if not isinstance(public, rsa.RSAPublicKey):
            raise UnsupportedKey(f"an RSA key that holds a {type(public).__name__}")
        bits, exponent = public.key_size, public.public_numbers().e
        if not RSA_MIN_BITS <= bits <= RSA_MAX_BITS:
            raise UnsupportedKey(
                f"an RSA modulus of {bits} bits (accepted: {RSA_MIN_BITS}..{RSA_MAX_BITS})"
            )
        if exponent < 3 or exponent > RSA_MAX_EXPONENT or not exponent & 1:
            raise UnsupportedKey(
                f"an RSA public exponent of {exponent.bit_length()} bits"
                f"{'' if exponent & 1 else ', even'} (accepted: odd, 3..2^31-1)"
            )
        return
    if not isinstance(public, ec.EllipticCurvePublicKey):
        raise UnsupportedKey(f"an ECDSA key that holds a {type(public).__name__}")
    if public.curve.name not in _ECDSA_CURVES:
        raise UnsupportedKey(f"ECDSA on {public.curve.name} (accepted: P-256, P-384, P-521)")


def peer_id(encoded_key: bytes) -> str:
    """The base58btc peer id of a ``PublicKey`` protobuf."""
    if len(encoded_key) <= 42:
        multihash = b"\x00" + bytes((len(encoded_key),)) + encoded_key
    else:
        multihash = b"\x12\x20" + hashlib.sha256(encoded_key).digest()
    return base58.b58encode(multihash).decode()
