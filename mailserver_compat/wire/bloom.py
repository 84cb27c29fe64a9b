"""The 64-byte Waku v1 bloom filter of topics, bit-compatible with status-go.

A topic sets (at most) three of the 512 bits: for ``j`` in 0..2 the bit index is
``topic[j]``, plus 256 when bit ``j`` of ``topic[3]`` is set. status-go's ``TopicToBloom``
then *assigns* ``b[index // 8] = 1 << (index % 8)`` instead of OR-ing, so when two of the
three indexes fall into the same byte only the later one survives. Blooms built here do
the same, or status-go nodes would disagree with us about which envelopes match.

Matching (``BloomFilterMatch``): a sample matches a filter when every bit set in the
sample is set in the filter; no filter at all matches everything.
"""

from __future__ import annotations

from collections.abc import Iterable

from waku_legacy.errors import DecodeError
from waku_legacy.identity.topics import V1_TOPIC_SIZE

__all__ = [
    "BLOOM_SIZE",
    "FULL_BLOOM",
    "BloomError",
    "bloom_matches",
    "check_bloom",
    "is_full_bloom",
    "topic_to_bloom",
    "topics_to_bloom",
]

BLOOM_SIZE = 64
FULL_BLOOM = b"\xff" * BLOOM_SIZE


class BloomError(DecodeError):
    """A bloom filter or topic of the wrong length."""


def check_bloom(bloom: bytes, what: str = "bloom filter") -> bytes:
    """Return ``bloom`` if it is 64 bytes, else raise :class:`BloomError`."""
    if not isinstance(bloom, bytes | bytearray):
        raise BloomError(what, f"expected bytes, got {type(bloom).__name__}")
    if len(bloom) != BLOOM_SIZE:
        raise BloomError(what, f"must be {BLOOM_SIZE} bytes, got {len(bloom)}")
    return bytes(bloom)


def topic_to_bloom(topic: bytes) -> bytes:
    """64-byte bloom of one 4-byte topic, with status-go's assign-not-OR quirk."""
    if not isinstance(topic, bytes | bytearray) or len(topic) != V1_TOPIC_SIZE:
        size = len(topic) if isinstance(topic, bytes | bytearray) else type(topic).__name__
        raise BloomError("topic", f"a v1 topic is {V1_TOPIC_SIZE} bytes, got {size}")
    bloom = bytearray(BLOOM_SIZE)
    for j in range(3):
        index = topic[j] + (256 if topic[3] & (1 << j) else 0)
        bloom[index // 8] = 1 << (index % 8)
    return bytes(bloom)


def topics_to_bloom(topics: Iterable[bytes]) -> bytes:
    """OR of the topics' blooms (how status-go clients build a request's bloom)."""
    combined = 0
    for topic in topics:
        combined |= int.from_bytes(topic_to_bloom(topic), "big")
    return combined.to_bytes(BLOOM_SIZE, "big")


def bloom_matches(filter_bloom: bytes | None, topic_bloom: bytes) -> bool:
    """Does ``topic_bloom`` match ``filter_bloom``? ``None`` as filter matches all."""
    sample = int.from_bytes(check_bloom(topic_bloom, "sample bloom"), "big")
    if filter_bloom is None:
        return True
    mask = int.from_bytes(check_bloom(filter_bloom), "big")
    return sample & ~mask == 0


def is_full_bloom(bloom: bytes | None) -> bool:
    """status-go's ``IsFullNode``: no bloom, or all 512 bits set."""
    return bloom is None or bytes(bloom) == FULL_BLOOM
