"""26/WAKU-PAYLOAD: layout and padding by hand, encryption round trips, bad input."""

from __future__ import annotations

import random

import coincurve
import pytest
from Crypto.Cipher import AES
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.helpers import reference_keccak256
from waku_legacy.crypto.payload import (
    DecodedPayload,
    PayloadError,
    PayloadTooLarge,
    build_plaintext,
    decode_payload,
    encode_payload,
    parse_plaintext,
    status_go_padding_size,
)
from waku_legacy.crypto.secp256k1 import public_key_of
from waku_legacy.crypto.symmetric import aes_gcm_encrypt
from waku_legacy.errors import CryptoError, DecodeError, LimitExceeded, SignatureError

SYM_KEY = bytes(range(32))
SIGNER = coincurve.PrivateKey(b"\x11" * 32)
RECIPIENT = coincurve.PrivateKey(b"\x22" * 32)


def _seeded(seed: int):
    rng = random.Random(seed)
    return lambda n: bytes(rng.getrandbits(8) for _ in range(n))


def test_unsigned_plaintext_hand_derived() -> None:
    # flags = 0x01 (1-byte size field), size 02, payload "hi", padding aa bb
    assert build_plaintext(b"hi", padding=b"\xaa\xbb") == bytes.fromhex("01026869aabb")
    assert parse_plaintext(bytes.fromhex("01026869aabb")) == DecodedPayload(
        payload=b"hi", padding=b"\xaa\xbb", signature=None, signer=None
    )


def test_size_field_widths_hand_derived() -> None:
    assert build_plaintext(b"", padding=b"")[:2] == b"\x01\x00"
    assert build_plaintext(b"x" * 255, padding=b"")[:2] == b"\x01\xff"
    # 256 bytes: 2-byte little-endian size 00 01, flags 0x02
    assert build_plaintext(b"x" * 256, padding=b"")[:3] == b"\x02\x00\x01"
    # 70000 = 0x011170: 3-byte field 70 11 01, flags 0x03
    assert build_plaintext(b"x" * 70000, padding=b"")[:4] == b"\x03\x70\x11\x01"


def test_signed_plaintext_hand_derived() -> None:
    plaintext = build_plaintext(b"hi", sign_with=SIGNER, padding=b"\xaa\xbb")
    body = bytes.fromhex("05026869aabb")  # flags 0x01 | 0x04 (signed) set before hashing
    assert plaintext[:6] == body and len(plaintext) == 6 + 65
    signature = plaintext[6:]
    assert signature[64] in (0, 1)
    recovered = coincurve.PublicKey.from_signature_and_message(
        signature, reference_keccak256(body), hasher=None
    )
    assert recovered.format(compressed=False) == public_key_of(SIGNER)
    decoded = parse_plaintext(plaintext)
    assert decoded.payload == b"hi" and decoded.padding == b"\xaa\xbb"
    assert decoded.signature == signature and decoded.signer == public_key_of(SIGNER)


@pytest.mark.parametrize(
    ("payload_size", "signed", "padding_size"),
    [
        (2, False, 252),  # 1 + 1 + 2 = 4 -> 252 to 256
        (2, True, 187),  # 4 + 65 = 69 -> 187 to 256
        (254, False, 256),  # 1 + 1 + 254 = 256: status-go still adds a full block
        (256, False, 253),  # 1 + 2 + 256 = 259 -> 253 to 512
        (0, False, 254),
    ],
)
def test_status_go_padding_hand_derived(payload_size: int, signed: bool, padding_size: int) -> None:
    assert status_go_padding_size(payload_size, signed=signed) == padding_size
    plaintext = build_plaintext(b"p" * payload_size, sign_with=SIGNER if signed else None)
    assert len(plaintext) % 256 == 0
    assert len(parse_plaintext(plaintext).padding) == padding_size


def test_symmetric_layout_matches_independent_aes_gcm() -> None:
    source = _seeded(1)
    data = encode_payload(b"hi", symmetric_key=SYM_KEY, padding=b"\xaa\xbb", random_source=source)
    nonce = _seeded(1)(12)
    assert data[-12:] == nonce
    cipher = AES.new(SYM_KEY, AES.MODE_GCM, nonce=nonce)
    assert cipher.decrypt_and_verify(data[:-28], data[-28:-12]) == bytes.fromhex("01026869aabb")


def test_seeded_random_source_is_reproducible() -> None:
    one = encode_payload(
        b"x", sign_with=SIGNER, public_key=public_key_of(RECIPIENT), random_source=_seeded(5)
    )
    two = encode_payload(
        b"x", sign_with=SIGNER, public_key=public_key_of(RECIPIENT), random_source=_seeded(5)
    )
    assert one == two


@settings(max_examples=40, deadline=None)
@given(st.binary(max_size=700), st.booleans(), st.one_of(st.none(), st.binary(max_size=40)))
def test_symmetric_round_trip(payload: bytes, signed: bool, padding: bytes | None) -> None:
    data = encode_payload(
        payload, sign_with=SIGNER if signed else None, symmetric_key=SYM_KEY, padding=padding
    )
    decoded = decode_payload(data, symmetric_key=SYM_KEY)
    assert decoded.payload == payload
    assert decoded.signer == (public_key_of(SIGNER) if signed else None)
    if padding is not None:
        assert decoded.padding == padding


@settings(max_examples=25, deadline=None)
@given(st.binary(max_size=700), st.booleans())
def test_asymmetric_round_trip(payload: bytes, signed: bool) -> None:
    for key_form in (public_key_of(RECIPIENT), RECIPIENT.public_key.format(compressed=True)):
        data = encode_payload(payload, sign_with=SIGNER if signed else None, public_key=key_form)
        decoded = decode_payload(data, private_key=RECIPIENT)
        assert decoded.payload == payload
        assert decoded.signer == (public_key_of(SIGNER) if signed else None)


def test_both_keys_tries_private_then_symmetric() -> None:
    sym = encode_payload(b"s", symmetric_key=SYM_KEY)
    asym = encode_payload(b"a", public_key=public_key_of(RECIPIENT))
    assert decode_payload(sym, symmetric_key=SYM_KEY, private_key=RECIPIENT).payload == b"s"
    assert decode_payload(asym, symmetric_key=SYM_KEY, private_key=RECIPIENT).payload == b"a"


def test_wrong_key_is_a_crypto_error() -> None:
    data = encode_payload(b"secret", symmetric_key=SYM_KEY)
    with pytest.raises(CryptoError, match="cannot decrypt"):
        decode_payload(data, symmetric_key=bytes(32))
    with pytest.raises(CryptoError, match="private key"):
        decode_payload(data, private_key=RECIPIENT)
    with pytest.raises(CryptoError):
        decode_payload(data[:-1], symmetric_key=SYM_KEY)  # truncated
    with pytest.raises(CryptoError):
        decode_payload(b"", symmetric_key=SYM_KEY)


def test_key_arguments_are_checked() -> None:
    with pytest.raises(TypeError):
        encode_payload(b"x")
    with pytest.raises(TypeError):
        encode_payload(b"x", symmetric_key=SYM_KEY, public_key=public_key_of(RECIPIENT))
    with pytest.raises(TypeError):
        decode_payload(b"x" * 40)
    with pytest.raises(CryptoError, match="32 bytes"):
        encode_payload(b"x", symmetric_key=b"short")
    with pytest.raises(CryptoError, match="public key"):
        encode_payload(b"x", public_key=b"\x04" + bytes(64))


def _sealed(plaintext: bytes) -> bytes:
    return aes_gcm_encrypt(SYM_KEY, plaintext)


@pytest.mark.parametrize(
    ("plaintext", "needle"),
    [
        (b"", "empty plaintext"),
        (b"\x01", "size field does not fit"),
        (b"\x03\x01\x00", "3-byte size field does not fit"),
        (b"\x01\x05abc", "size field says 5 payload bytes but only 3 follow"),
        (b"\x02\xff\xff" + b"x" * 10, "size field says 65535"),
        (b"\x05" + b"\x00" * 65, "too short for the flags"),
    ],
)
def test_malformed_plaintexts_raise_payload_error(plaintext: bytes, needle: str) -> None:
    with pytest.raises(PayloadError, match="malformed payload") as info:
        decode_payload(_sealed(plaintext), symmetric_key=SYM_KEY)
    assert needle in str(info.value)


def test_bad_signatures_raise_signature_error() -> None:
    good = build_plaintext(b"hello", sign_with=SIGNER, padding=b"")
    with pytest.raises(SignatureError, match="recovery id 27"):
        parse_plaintext(good[:-1] + b"\x1b")
    zero_sig = good[:-65] + bytes(65)
    with pytest.raises(SignatureError):
        decode_payload(_sealed(zero_sig), symmetric_key=SYM_KEY)


def test_tampered_signed_payload_recovers_another_signer() -> None:
    good = build_plaintext(b"hello", sign_with=SIGNER, padding=b"")
    tampered = good[:2] + b"j" + good[3:]
    try:
        signer = parse_plaintext(tampered).signer
    except SignatureError:
        return
    assert signer != public_key_of(SIGNER)


def test_size_limits() -> None:
    with pytest.raises(PayloadTooLarge) as info:
        decode_payload(b"x" * 101, symmetric_key=SYM_KEY, max_size=100)
    assert isinstance(info.value, LimitExceeded)
    with pytest.raises(PayloadTooLarge, match="16777215-byte limit"):
        build_plaintext(bytes(1 << 24), padding=b"")


@settings(max_examples=200)
@given(st.binary(max_size=300))
def test_random_plaintexts_parse_or_raise_typed_errors(plaintext: bytes) -> None:
    try:
        decoded = parse_plaintext(plaintext)
    except (DecodeError, CryptoError):
        return
    assert len(decoded.payload) + len(decoded.padding) < len(plaintext)


@settings(max_examples=100)
@given(st.binary(max_size=300))
def test_random_data_fields_raise_crypto_error(data: bytes) -> None:
    with pytest.raises(CryptoError):
        decode_payload(data, symmetric_key=SYM_KEY, private_key=RECIPIENT)
