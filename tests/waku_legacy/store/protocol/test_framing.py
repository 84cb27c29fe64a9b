"""Unsigned-varint length-prefixed frames (nim-libp2p readLp/writeLp, it-length-prefixed)."""

from __future__ import annotations

import pytest

from waku_legacy.errors import DecodeError, LimitExceeded
from waku_legacy.store.protocol import FrameError, FrameReader, FrameTooLarge, encode_frame


def test_encode_frame_prefixes_the_length_as_an_unsigned_varint() -> None:
    # multiformats unsigned-varint examples: 1 -> 01, 127 -> 7f, 128 -> 80 01, 300 -> ac 02,
    # 16384 -> 80 80 01
    assert encode_frame(b"") == b"\x00"
    assert encode_frame(b"a") == b"\x01a"
    assert encode_frame(b"x" * 127)[:1] == b"\x7f"
    assert encode_frame(b"x" * 128)[:2] == b"\x80\x01"
    assert encode_frame(b"x" * 300)[:2] == b"\xac\x02"
    assert encode_frame(b"x" * 16384)[:3] == b"\x80\x80\x01"
    assert encode_frame(b"x" * 300)[2:] == b"x" * 300


@pytest.mark.parametrize("size", [0, 1, 127, 128, 300, 16384, 70000])
def test_frames_fed_a_byte_at_a_time_come_back_whole(size: int) -> None:
    body = bytes(i % 251 for i in range(size))
    stream = encode_frame(body) + encode_frame(b"second")
    reader = FrameReader(100_000)
    got: list[bytes] = []
    for i in range(len(stream)):
        got += reader.feed(stream[i : i + 1])
    assert got == [body, b"second"]
    assert reader.buffered == 0
    reader.finish()


def test_several_frames_in_one_feed_and_split_prefixes() -> None:
    stream = encode_frame(b"a" * 200) + encode_frame(b"") + encode_frame(b"bc")
    reader = FrameReader(1000)
    assert reader.feed(stream[:1]) == []  # half of a two-byte prefix
    assert reader.feed(stream[1:50]) == []
    assert reader.feed(stream[50:]) == [b"a" * 200, b"", b"bc"]


def test_oversize_is_refused_from_the_prefix_before_the_body_arrives() -> None:
    reader = FrameReader(1024)
    with pytest.raises(FrameTooLarge) as caught:
        reader.feed(encode_frame(b"x" * 1025)[:2])  # only the prefix
    assert isinstance(caught.value, LimitExceeded) and isinstance(caught.value, DecodeError)
    assert "1025" in str(caught.value) and "1024" in str(caught.value)
    assert reader.buffered <= 2
    with pytest.raises(FrameTooLarge):  # the reader stays failed
        reader.feed(b"x")
    assert FrameReader(1024).feed(encode_frame(b"x" * 1024)) == [b"x" * 1024]


def test_a_huge_declared_length_is_refused_without_buffering() -> None:
    reader = FrameReader(64 * 1024)
    with pytest.raises(FrameTooLarge):
        reader.feed(b"\xff\xff\xff\xff\x0f")  # 2^32 - 1


@pytest.mark.parametrize(
    ("prefix", "reason"),
    [
        (b"\x80" * 9 + b"\x01", "longer than 9 bytes"),
        (b"\xff" * 12, "longer than 9 bytes"),
        (b"\x81\x00", "not minimally encoded"),
        (b"\x80\x80\x00", "not minimally encoded"),
    ],
)
def test_malformed_prefixes_are_refused(prefix: bytes, reason: str) -> None:
    reader = FrameReader(1 << 40)
    with pytest.raises(FrameError, match=reason):
        reader.feed(prefix)


@pytest.mark.parametrize("cut", [b"\x80", b"\x05abc", b"\x80\x01" + b"y" * 10])
def test_a_stream_ending_inside_a_frame_is_an_error(cut: bytes) -> None:
    reader = FrameReader(1000)
    assert reader.feed(cut) == []
    with pytest.raises(FrameError, match="stream ended"):
        reader.finish()
