"""Waku v1 envelope RLP codec: hand-derived bytes, round trips and bad input."""

from __future__ import annotations

import pytest
import rlp
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.helpers import reference_keccak256
from waku_legacy.errors import DecodeError, LimitExceeded
from waku_legacy.mailserver_compat.wire.envelope import (
    Envelope,
    EnvelopeError,
    EnvelopeTooLarge,
    decode_many,
    encode_many,
)

# [expiry=0x01020304, ttl=50, topic=deadbeef, data=0102, nonce=0], written out by hand:
# 15 payload bytes -> short list prefix 0xc0 + 15 = 0xcf
#   84 01 02 03 04   expiry, 4-byte string
#   32               ttl 50 < 0x80: the byte itself
#   84 de ad be ef   topic
#   82 01 02         data
#   80               nonce 0 = empty string
TINY = Envelope(
    expiry=0x01020304, ttl=50, topic=bytes.fromhex("deadbeef"), data=b"\x01\x02", nonce=0
)
TINY_RLP = bytes.fromhex("cf84010203043284deadbeef82010280")


envelopes = st.builds(
    Envelope,
    expiry=st.integers(0, 2**32 - 1),
    ttl=st.integers(0, 2**32 - 1),
    topic=st.binary(min_size=4, max_size=4),
    data=st.binary(max_size=600),
    nonce=st.integers(0, 2**64 - 1),
)


def test_tiny_envelope_encodes_to_hand_derived_bytes() -> None:
    assert TINY.encode() == TINY_RLP
    assert Envelope.decode(TINY_RLP) == TINY


def test_hash_is_keccak_of_the_rlp() -> None:
    assert TINY.hash() == reference_keccak256(TINY_RLP)


def test_sent_time_is_expiry_minus_ttl() -> None:
    assert TINY.sent_time == 0x01020304 - 50
    # status-go computes it in uint32: a ttl larger than expiry wraps around
    assert Envelope(expiry=10, ttl=11, topic=b"abcd", data=b"", nonce=0).sent_time == 2**32 - 1


def test_large_nonce_and_long_data_hand_derived() -> None:
    env = Envelope(expiry=1, ttl=1, topic=b"\x00\x00\x00\x00", data=b"\xaa" * 60, nonce=2**64 - 1)
    # data of 60 bytes needs the long-string form b8 3c; nonce is 8 bytes of ff.
    payload = b"\x01" + b"\x01" + b"\x84\x00\x00\x00\x00" + b"\xb8\x3c" + b"\xaa" * 60
    payload += b"\x88" + b"\xff" * 8
    assert len(payload) == 78
    assert env.encode() == b"\xf8\x4e" + payload


@given(envelopes)
def test_round_trip(envelope: Envelope) -> None:
    raw = envelope.encode()
    assert Envelope.decode(raw) == envelope
    assert envelope.hash() == reference_keccak256(raw)


@given(st.lists(envelopes, max_size=5))
def test_many_round_trip(items: list[Envelope]) -> None:
    assert decode_many(encode_many(items)) == items


@pytest.mark.parametrize(
    ("raw", "needle"),
    [
        (b"", "empty"),
        (rlp.encode(b"not a list"), "must be an RLP list"),
        (rlp.encode([1, 2, b"abcd", b""]), "5 items"),
        (rlp.encode([1, 2, b"abcd", b"", 0, b"extra"]), "5 items"),
        (rlp.encode([1, 2, b"abc", b"", 0]), "topic must be 4 bytes"),
        (rlp.encode([1, 2, b"abcde", b"", 0]), "topic must be 4 bytes"),
        (rlp.encode([1, 2, [b"a", b"b"], b"", 0]), "topic must be an RLP string"),
        (rlp.encode([1, 2, b"abcd", [b"x"], 0]), "data must be an RLP string"),
        (rlp.encode([[1], 2, b"abcd", b"", 0]), "expiry must be an integer"),
        (rlp.encode([2**32, 2, b"abcd", b"", 0]), "expiry is 5 bytes wide"),
        (rlp.encode([1, 2**32, b"abcd", b"", 0]), "ttl is 5 bytes wide"),
        (rlp.encode([1, 2, b"abcd", b"", 2**64]), "nonce is 9 bytes wide"),
        (rlp.encode([b"\x00\x01", 2, b"abcd", b"", 0]), "leading zero"),
        (rlp.encode([b"\x00", 2, b"abcd", b"", 0]), "leading zero"),
        (TINY_RLP + b"\x00", "superfluous"),
        (b"\xcf\x84\x01\x02", "not valid RLP"),
    ],
)
def test_bad_envelopes_raise_envelope_error(raw: bytes, needle: str) -> None:
    with pytest.raises(EnvelopeError, match="malformed envelope") as info:
        Envelope.decode(raw)
    assert needle in str(info.value)


def test_every_truncation_is_rejected() -> None:
    raw = Envelope(expiry=7, ttl=9, topic=b"wxyz", data=b"q" * 100, nonce=99).encode()
    for cut in range(len(raw)):
        with pytest.raises(EnvelopeError):
            Envelope.decode(raw[:cut])


def test_size_limit_is_enforced_at_decode() -> None:
    raw = Envelope(expiry=1, ttl=1, topic=b"abcd", data=b"x" * 1000, nonce=0).encode()
    with pytest.raises(EnvelopeTooLarge) as info:
        Envelope.decode(raw, max_size=999)
    assert isinstance(info.value, LimitExceeded)
    # f9 03f6 | 01 | 01 | 84 abcd | b9 03e8 + 1000 | 80  = 1014 bytes
    assert "1014 bytes is over the 999-byte limit" in str(info.value)


def test_deeply_nested_lists_do_not_escape_as_recursion_error() -> None:
    depth = 100_000
    raw = b""
    inner = b"\xc0"
    # build [[[...]]] with long-list prefixes where needed
    raw = inner
    for _ in range(depth):
        n = len(raw)
        if n < 56:
            raw = bytes([0xC0 + n]) + raw
        else:
            length = n.to_bytes((n.bit_length() + 7) // 8, "big")
            raw = bytes([0xF7 + len(length)]) + length + raw
    with pytest.raises(EnvelopeError):
        Envelope.decode(raw, max_size=len(raw))


def test_decode_many_names_the_bad_envelope() -> None:
    raw = rlp.encode([TINY.to_rlp_item(), [1, 2, b"abc", b"", 0]])
    with pytest.raises(EnvelopeError, match=r"malformed envelope #1: topic"):
        decode_many(raw)
    with pytest.raises(EnvelopeError, match="must be an RLP list"):
        decode_many(rlp.encode(b"a string, not a list"))
    with pytest.raises(EnvelopeTooLarge, match="3 envelopes is over the limit of 2"):
        decode_many(encode_many([TINY] * 3), max_count=2)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"expiry": -1},
        {"ttl": 2**32},
        {"nonce": 2**64},
        {"topic": b"abc"},
        {"data": "text"},
        {"expiry": True},
    ],
)
def test_constructor_validates(kwargs: dict[str, object]) -> None:
    fields: dict[str, object] = {"expiry": 1, "ttl": 1, "topic": b"abcd", "data": b"", "nonce": 0}
    fields.update(kwargs)
    with pytest.raises(EnvelopeError):
        Envelope(**fields)  # type: ignore[arg-type]


@settings(max_examples=300)
@given(st.binary(max_size=200))
def test_random_bytes_decode_or_raise_typed_error(raw: bytes) -> None:
    try:
        envelope = Envelope.decode(raw)
    except DecodeError as exc:
        assert "malformed envelope" in str(exc)
    else:
        assert envelope.encode() == raw


@given(envelopes, st.data())
def test_mutated_envelopes_decode_or_raise_typed_error(
    envelope: Envelope, data: st.DataObject
) -> None:
    raw = bytearray(envelope.encode())
    index = data.draw(st.integers(0, len(raw) - 1))
    raw[index] = data.draw(st.integers(0, 255))
    try:
        decoded = Envelope.decode(bytes(raw))
    except EnvelopeError:
        return
    assert decoded.encode() == bytes(raw)
