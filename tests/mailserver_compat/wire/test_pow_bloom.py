"""Waku v1 PoW and the 64-byte topic bloom filter (status-go's assign quirk)."""

from __future__ import annotations

import pytest
import rlp
from hypothesis import given
from hypothesis import strategies as st

from tests.helpers import reference_keccak256
from waku_legacy.mailserver_compat.wire.bloom import (
    BLOOM_SIZE,
    FULL_BLOOM,
    BloomError,
    bloom_matches,
    is_full_bloom,
    topic_to_bloom,
    topics_to_bloom,
)
from waku_legacy.mailserver_compat.wire.envelope import Envelope
from waku_legacy.mailserver_compat.wire.pow import (
    PowError,
    _PrefixedKeccak,
    leading_zero_bits,
    pow_of,
    required_leading_zero_bits,
    seal,
)

topics = st.binary(min_size=4, max_size=4)


def _zero_bits_by_string(digest: bytes) -> int:
    bits = "".join(f"{byte:08b}" for byte in digest)
    return len(bits) - len(bits.lstrip("0"))


# -- bloom ----------------------------------------------------------------------------


def test_bloom_assigns_instead_of_or_hand_derived() -> None:
    # topic 00 01 02 00: bit indexes 0, 1, 2, all in byte 0. status-go assigns
    # b[0] = 1<<0, then 1<<1, then 1<<2: only 0x04 survives (OR would give 0x07).
    bloom = topic_to_bloom(bytes([0x00, 0x01, 0x02, 0x00]))
    assert bloom == b"\x04" + bytes(63)


def test_bloom_high_bits_hand_derived() -> None:
    # topic ff 00 10 07: topic[3] = 0b111 adds 256 to all three indexes:
    #   255 + 256 = 511 -> byte 63, bit 7 -> 0x80
    #     0 + 256 = 256 -> byte 32, bit 0 -> 0x01
    #    16 + 256 = 272 -> byte 34, bit 0 -> 0x01
    expected = bytearray(64)
    expected[63] = 0x80
    expected[32] = 0x01
    expected[34] = 0x01
    assert topic_to_bloom(bytes([0xFF, 0x00, 0x10, 0x07])) == bytes(expected)


def test_bloom_partial_high_bit_hand_derived() -> None:
    # topic 08 09 0a 02: only bit 1 of topic[3] set -> indexes 8, 9+256=265, 10
    #   8 -> byte 1 bit 0; 265 -> byte 33 bit 1; 10 -> byte 1 bit 2 (overwrites byte 1!)
    expected = bytearray(64)
    expected[33] = 0x02
    expected[1] = 0x04
    assert topic_to_bloom(bytes([0x08, 0x09, 0x0A, 0x02])) == bytes(expected)


def test_topics_to_bloom_is_or_of_each() -> None:
    a, b = bytes([0, 1, 2, 0]), bytes([0xFF, 0, 0x10, 7])
    combined = topics_to_bloom([a, b])
    assert combined == bytes(
        x | y for x, y in zip(topic_to_bloom(a), topic_to_bloom(b), strict=True)
    )
    assert topics_to_bloom([]) == bytes(64)


@given(topics, st.lists(topics, max_size=8))
def test_a_topic_matches_a_bloom_that_includes_it(topic: bytes, others: list[bytes]) -> None:
    topic_bloom = topic_to_bloom(topic)
    assert len(topic_bloom) == BLOOM_SIZE
    assert 1 <= bin(int.from_bytes(topic_bloom, "big")).count("1") <= 3
    assert bloom_matches(topics_to_bloom([topic, *others]), topic_bloom)
    assert bloom_matches(FULL_BLOOM, topic_bloom)
    assert bloom_matches(None, topic_bloom)


def test_bloom_match_rule() -> None:
    sample = topic_to_bloom(bytes([0xFF, 0x00, 0x10, 0x07]))
    assert not bloom_matches(bytes(64), sample)
    almost = bytearray(sample)
    almost[63] = 0
    assert not bloom_matches(bytes(almost), sample)
    assert is_full_bloom(FULL_BLOOM) and is_full_bloom(None) and not is_full_bloom(sample)


@pytest.mark.parametrize("bad", [b"", b"abc", b"abcde"])
def test_topic_length_checked(bad: bytes) -> None:
    with pytest.raises(BloomError, match="malformed topic: a v1 topic is 4 bytes"):
        topic_to_bloom(bad)


@pytest.mark.parametrize("bad", [b"", bytes(63), bytes(65)])
def test_bloom_length_checked(bad: bytes) -> None:
    with pytest.raises(BloomError, match="must be 64 bytes"):
        bloom_matches(bad, bytes(64))
    with pytest.raises(BloomError, match="must be 64 bytes"):
        bloom_matches(None, bad)


# -- PoW ------------------------------------------------------------------------------


def test_pow_hand_derived() -> None:
    env = Envelope(
        expiry=0x01020304, ttl=50, topic=bytes.fromhex("deadbeef"), data=b"\x01\x02", nonce=7
    )
    # rlp([expiry, ttl, topic, data]) written by hand: ce 8401020304 32 84deadbeef 820102
    prefix = bytes.fromhex("ce84010203043284deadbeef820102")
    assert env.rlp_without_nonce() == prefix
    digest = reference_keccak256(prefix + bytes.fromhex("0000000000000007"))
    zeros = _zero_bits_by_string(digest)
    assert pow_of(env) == 2.0**zeros / len(prefix) / 50
    assert leading_zero_bits(digest) == zeros


def test_pow_zero_ttl_proves_no_work() -> None:
    # Go's float64 division gives +Inf, which let a ttl-0 envelope pass any PoW requirement
    # without work (issue 10 item 2): a zero lifetime proves nothing.
    for nonce in range(64):
        envelope = Envelope(expiry=1, ttl=0, topic=b"abcd", data=b"x" * 100, nonce=nonce)
        assert pow_of(envelope) == 0.0
    assert pow_of(Envelope(expiry=10, ttl=5, topic=b"abcd", data=b"", nonce=0)) > 0
    with pytest.raises(PowError, match="zero TTL"):
        seal(100, 0, b"abcd", b"data", 0.001)


def test_leading_zero_bits() -> None:
    assert leading_zero_bits(bytes(32)) == 256
    assert leading_zero_bits(b"\x80" + bytes(31)) == 0
    assert leading_zero_bits(b"\x00\x01" + bytes(30)) == 15


def test_required_bits() -> None:
    assert required_leading_zero_bits(0.0, 100, 10) == 1  # status-go's minimum of 1
    assert required_leading_zero_bits(1.0, 128, 8) == 10  # 2**10 = 1024
    assert required_leading_zero_bits(1.0, 129, 8) == 11


@pytest.mark.parametrize("target", [0.01, 0.2, 1.0])
def test_seal_finds_the_first_nonce_reaching_the_target(target: float) -> None:
    env = seal(1_700_000_050, 50, b"\x01\x02\x03\x04", b"hello world" * 3, target)
    assert pow_of(env) >= target
    # independent check: no smaller nonce reaches it (hashing whole preimages)
    prefix = rlp.encode([env.expiry, env.ttl, env.topic, env.data])
    for nonce in range(env.nonce):
        zeros = _zero_bits_by_string(reference_keccak256(prefix + nonce.to_bytes(8, "big")))
        assert 2.0**zeros / len(prefix) / env.ttl < target


def test_seal_large_data_and_zero_target() -> None:
    data = bytes(range(256)) * 400  # 100 KiB: the per-nonce cost must not grow with it
    env = seal(1000, 10, b"abcd", data, 0.0001)
    assert pow_of(env) >= 0.0001
    assert seal(1000, 10, b"abcd", data, 0).nonce == 0


def test_seal_gives_up_with_a_typed_error() -> None:
    with pytest.raises(PowError, match="not reached in 10 nonces"):
        seal(1000, 50, b"abcd", b"x" * 100, 1e9, max_iterations=10)
    with pytest.raises(PowError, match="unreachable"):
        seal(1000, 50, b"abcd", b"x", 1e80)


@given(st.binary(max_size=400), st.integers(0, 2**64 - 1))
def test_prefixed_keccak_matches_plain_keccak(prefix: bytes, nonce: int) -> None:
    suffix = nonce.to_bytes(8, "big")
    fast = _PrefixedKeccak(prefix)
    slow = _PrefixedKeccak(prefix)
    slow._fast = False
    expected = reference_keccak256(prefix + suffix)
    assert fast.digest_with(suffix) == slow.digest_with(suffix) == expected
    assert fast.digest_with(suffix) == expected  # state reusable
