"""26/WAKU-PAYLOAD: the envelope data field, as status-go builds and opens it.

Plaintext layout::

    flags (1) || payload size (flags & 3 bytes, little-endian) || payload || padding
              || [signature (65): r || s || v, v in {0, 1}]

Flag ``0x04`` marks a signed message; the signature covers keccak256 of everything before
it, with that flag already set. The plaintext is then encrypted with AES-256-GCM
(``ciphertext || tag || nonce(12)``) or go-ethereum ECIES.

Padding (status-go ``appendPadding``): unless the caller gives padding, random bytes are
added so that ``flags + size field + payload (+ 65 when signed)`` reaches the next multiple
of 256; a plaintext that is already a multiple still gets a full 256 bytes. Explicit
padding is used exactly as given (``padding=b""`` means none, which status-go cannot
produce but reads fine). ``random_source`` supplies every random byte (padding, GCM nonce,
ECIES ephemeral key and IV), so a seeded source gives reproducible output.

Parsing follows status-go's ``ValidateAndParse``: a size-field length of 0 means an empty
payload and everything up to the signature is padding; flag bits above 0x07 are ignored; a
size field that claims more bytes than the plaintext holds is an error. A signature whose
recovery id is above 3 is rejected, as go-ethereum's ``SigToPub`` does (the shared
recovery helper would otherwise accept the 27/28 convention).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass

import coincurve

from waku_legacy.crypto import ecies
from waku_legacy.crypto.keccak import keccak256
from waku_legacy.crypto.secp256k1 import (
    private_key_from_bytes,
    recover_public_key,
    sign_recoverable,
)
from waku_legacy.crypto.symmetric import GCM_NONCE_SIZE, aes_gcm_decrypt, aes_gcm_encrypt
from waku_legacy.errors import CryptoError, DecodeError, LimitExceeded, SignatureError
from waku_legacy.limits import MAX_MESSAGE_SIZE

__all__ = [
    "FLAG_SIGNED",
    "MAX_PAYLOAD_SIZE",
    "PADDING_BLOCK",
    "SIGNATURE_SIZE",
    "SIZE_MASK",
    "DecodedPayload",
    "PayloadError",
    "PayloadTooLarge",
    "build_plaintext",
    "decode_payload",
    "encode_payload",
    "parse_plaintext",
    "status_go_padding_size",
]

SIZE_MASK = 0x03
FLAG_SIGNED = 0x04
SIGNATURE_SIZE = 65
PADDING_BLOCK = 256
# The size field is at most 3 bytes (flags & 3); a 4-byte field would set the signed flag.
MAX_PAYLOAD_SIZE = (1 << 24) - 1

RandomSource = Callable[[int], bytes]


class PayloadError(DecodeError):
    """A decrypted 26/WAKU-PAYLOAD plaintext that does not parse."""


class PayloadTooLarge(PayloadError, LimitExceeded):
    """A payload or data field over its size limit."""


@dataclass(frozen=True)
class DecodedPayload:
    """An opened 26/WAKU-PAYLOAD. ``signer`` is the 65-byte uncompressed key, if signed."""

    payload: bytes
    padding: bytes
    signature: bytes | None
    signer: bytes | None


def _size_field_length(payload_size: int) -> int:
    length = 1
    while payload_size >= 256:
        payload_size //= 256
        length += 1
    return length


def status_go_padding_size(payload_size: int, *, signed: bool) -> int:
    """How many random padding bytes status-go appends (1..256)."""
    raw_size = 1 + _size_field_length(payload_size) + payload_size
    if signed:
        raw_size += SIGNATURE_SIZE
    return PADDING_BLOCK - raw_size % PADDING_BLOCK


def build_plaintext(
    payload: bytes,
    *,
    sign_with: coincurve.PrivateKey | None = None,
    padding: bytes | None = None,
    random_source: RandomSource = os.urandom,
) -> bytes:
    """The unencrypted data field: flags, size, payload, padding and optional signature."""
    if len(payload) > MAX_PAYLOAD_SIZE:
        raise PayloadTooLarge(
            "payload", f"{len(payload)} bytes is over the {MAX_PAYLOAD_SIZE}-byte limit"
        )
    field_length = _size_field_length(len(payload))
    if padding is None:
        padding = random_source(status_go_padding_size(len(payload), signed=sign_with is not None))
    flags = field_length | (FLAG_SIGNED if sign_with is not None else 0)
    body = b"".join(
        (bytes([flags]), len(payload).to_bytes(field_length, "little"), payload, padding)
    )
    if sign_with is None:
        return body
    return body + sign_recoverable(keccak256(body), sign_with)


def parse_plaintext(plaintext: bytes) -> DecodedPayload:
    """Split a decrypted data field and recover its signer (``SignatureError`` if bad)."""
    what = "payload"
    if not plaintext:
        raise PayloadError(what, "empty plaintext (no flags byte)")
    flags = plaintext[0]
    end = len(plaintext)
    signature = signer = None
    if flags & FLAG_SIGNED:
        end -= SIGNATURE_SIZE
        if end <= 1:
            raise PayloadError(
                what,
                f"flagged as signed but only {len(plaintext)} bytes, too short for the flags, "
                f"a size field and a {SIGNATURE_SIZE}-byte signature",
            )
        signature = plaintext[end:]
        if signature[64] > 3:
            raise SignatureError(f"payload signature recovery id {signature[64]} is not 0-3")
        signer = recover_public_key(keccak256(plaintext[:end]), signature)
    field_length = flags & SIZE_MASK
    start = 1
    payload_size = 0
    if field_length:
        if end < start + field_length:
            raise PayloadError(
                what,
                f"the {field_length}-byte size field does not fit in {end - start} bytes",
                offset=start,
            )
        payload_size = int.from_bytes(plaintext[start : start + field_length], "little")
        start += field_length
        if start + payload_size > end:
            raise PayloadError(
                what,
                f"size field says {payload_size} payload bytes but only {end - start} follow",
                offset=1,
            )
    return DecodedPayload(
        payload=plaintext[start : start + payload_size],
        padding=plaintext[start + payload_size : end],
        signature=signature,
        signer=signer,
    )


def _ephemeral_key(random_source: RandomSource) -> coincurve.PrivateKey:
    for _ in range(16):  # a random 32-byte string is out of range with probability ~2^-128
        try:
            return private_key_from_bytes(random_source(32))
        except CryptoError:
            continue
    raise CryptoError("random source did not produce a valid secp256k1 key")


def encode_payload(
    payload: bytes,
    *,
    sign_with: coincurve.PrivateKey | None = None,
    symmetric_key: bytes | None = None,
    public_key: bytes | None = None,
    padding: bytes | None = None,
    random_source: RandomSource = os.urandom,
) -> bytes:
    """Build, sign (optionally) and encrypt a data field; exactly one key must be given."""
    if (symmetric_key is None) == (public_key is None):
        raise TypeError("encode_payload needs exactly one of symmetric_key or public_key")
    plaintext = build_plaintext(
        payload, sign_with=sign_with, padding=padding, random_source=random_source
    )
    if symmetric_key is not None:
        return aes_gcm_encrypt(symmetric_key, plaintext, nonce=random_source(GCM_NONCE_SIZE))
    assert public_key is not None
    return ecies.encrypt(
        public_key,
        plaintext,
        ephemeral_key=_ephemeral_key(random_source),
        iv=random_source(16),
    )


def decode_payload(
    data: bytes,
    *,
    symmetric_key: bytes | None = None,
    private_key: coincurve.PrivateKey | None = None,
    max_size: int = MAX_MESSAGE_SIZE,
) -> DecodedPayload:
    """Decrypt and parse a data field.

    With both keys, the private key is tried first, then the symmetric key (the order of
    status-go's mailserver). ``CryptoError`` when no key opens it, ``PayloadError`` when the
    plaintext is malformed, ``SignatureError`` when the signature does not recover.
    """
    if symmetric_key is None and private_key is None:
        raise TypeError("decode_payload needs a symmetric_key or a private_key")
    if not isinstance(data, bytes | bytearray | memoryview):
        raise PayloadError("payload", f"expected bytes, got {type(data).__name__}")
    if len(data) > max_size:
        raise PayloadTooLarge("payload", f"{len(data)} bytes is over the {max_size}-byte limit")
    data = bytes(data)
    failures = []
    if private_key is not None:
        try:
            return parse_plaintext(ecies.decrypt(private_key, data))
        except SignatureError:
            raise
        except CryptoError as exc:
            failures.append(f"private key: {exc}")
    if symmetric_key is not None:
        try:
            return parse_plaintext(aes_gcm_decrypt(symmetric_key, data))
        except SignatureError:
            raise
        except CryptoError as exc:
            failures.append(f"symmetric key: {exc}")
    raise CryptoError("cannot decrypt the payload with the given key(s): " + "; ".join(failures))
