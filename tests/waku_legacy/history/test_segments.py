"""Segmented payloads, split as status-go's segmentMessage splits them, joined and decoded."""

from __future__ import annotations

import pytest
from Crypto.Hash import keccak

from tests.waku_legacy.history import status_messages as sm
from waku_legacy.errors import DecodeError
from waku_legacy.history.decode import decode_application
from waku_legacy.history.events import ChatMessageEvent, ReactionEvent, Undecodable
from waku_legacy.history.segments import SegmentJoiner, read_segment
from waku_legacy.proto import chat_message_pb2, segment_message_pb2

PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 40  # ~10 KB


def _hash(data: bytes) -> bytes:
    return keccak.new(data=data, digest_bits=256).digest()


def split(payload: bytes, size: int, parity: int = 0) -> list[bytes]:
    """status-go's segmentMessage: ceil(len / size) data segments of ``size`` bytes (the last
    shorter), each a SegmentMessage with the whole payload's keccak256; ``parity`` stand-in
    parity segments (their bytes are not Reed-Solomon here: joining never reads them)."""
    whole = _hash(payload)
    count = -(-len(payload) // size)
    out = [
        segment_message_pb2.SegmentMessage(
            entire_message_hash=whole, index=i, segments_count=count,
            payload=payload[i * size : (i + 1) * size],
        ).SerializeToString()
        for i in range(count)
    ]  # fmt: skip
    out += [
        segment_message_pb2.SegmentMessage(
            entire_message_hash=whole, parity_segment_index=j, parity_segments_count=parity,
            payload=b"\x00" * size,
        ).SerializeToString()
        for j in range(parity)
    ]  # fmt: skip
    return out


def _image_message() -> bytes:
    image = chat_message_pb2.ImageMessage(payload=PNG, format=1)
    app = sm.application(sm.ALICE, 1, sm.chat(text="", content_type=7, image=image))
    return sm.wrapped(app)


def test_segments_are_undecodable_alone_and_decode_joined() -> None:
    whole = _image_message()
    pieces = split(whole, 3000, parity=1)
    assert len(pieces) == 5  # 4 data + 1 parity
    joiner = SegmentJoiner()
    joined = None
    for number, piece in enumerate(reversed(pieces)):  # any order
        event = decode_application(piece, sm.NODE.hex, sm.facts(), sm.COMMUNITY_ID)
        assert isinstance(event, Undecodable) and event.reason == "segment", event
        assert ("0x" + _hash(whole).hex()) in event.detail
        segment = read_segment(piece, max_size=1 << 20)
        assert segment is not None
        result = joiner.add(segment, sm.NODE.hex)
        if number < len(pieces) - 1:
            assert result is None
        else:
            joined = result
    assert joined == whole
    event = decode_application(joined, sm.NODE.hex, sm.facts(), sm.COMMUNITY_ID)
    assert isinstance(event, ChatMessageEvent) and event.image == PNG
    assert joiner.pending == 0
    # a copy of a segment after the join: ErrMessageSegmentsAlreadyCompleted
    again = read_segment(pieces[0], max_size=1 << 20)
    assert again is not None and joiner.add(again, sm.NODE.hex) is None


def test_a_missing_data_segment_leaves_the_set_unjoined() -> None:
    pieces = split(_image_message(), 3000, parity=2)
    joiner = SegmentJoiner()
    for piece in pieces[1:]:  # data segment 0 lost; parity cannot restore it here
        segment = read_segment(piece, max_size=1 << 20)
        assert segment is not None and joiner.add(segment, sm.NODE.hex) is None
    assert joiner.pending == 1


def test_segments_of_another_signer_are_another_set() -> None:
    pieces = split(_image_message(), 5000)
    joiner = SegmentJoiner()
    first, second = (read_segment(p, max_size=1 << 20) for p in pieces[:2])
    assert first is not None and second is not None
    assert joiner.add(first, sm.NODE.hex) is None
    assert joiner.add(second, sm.BOB.hex) is None
    assert joiner.pending == 2


def test_a_set_that_hashes_wrong_is_a_typed_error() -> None:
    whole = _image_message()
    pieces = split(whole, 5000)
    forged = segment_message_pb2.SegmentMessage()
    forged.ParseFromString(pieces[1])
    forged.payload = b"x" + forged.payload[1:]
    joiner = SegmentJoiner()
    for piece in (pieces[0], forged.SerializeToString(), *pieces[2:]):
        segment = read_segment(piece, max_size=1 << 20)
        assert segment is not None
        try:
            joiner.add(segment, sm.NODE.hex)
        except DecodeError as exc:
            assert "keccak256" in str(exc)
            break
    else:
        pytest.fail("a forged segment joined")
    assert joiner.pending == 0


def test_the_joiner_is_bounded() -> None:
    joiner = SegmentJoiner(max_pending=3)
    for n in range(10):
        segment = read_segment(split(bytes([n]) * 100, 60)[0], max_size=1 << 20)
        assert segment is not None and joiner.add(segment, sm.NODE.hex) is None
    assert (joiner.pending, joiner.dropped) == (3, 7)


@pytest.mark.parametrize(
    "message",
    [
        segment_message_pb2.SegmentMessage(
            entire_message_hash=b"h" * 32, segments_count=1, payload=b"x"
        ),
        segment_message_pb2.SegmentMessage(
            entire_message_hash=b"h" * 31, segments_count=2, payload=b"x"
        ),
        segment_message_pb2.SegmentMessage(
            entire_message_hash=b"h" * 32, index=2, segments_count=2, payload=b"x"
        ),
        segment_message_pb2.SegmentMessage(entire_message_hash=b"h" * 32, segments_count=2),
        segment_message_pb2.SegmentMessage(
            entire_message_hash=b"h" * 32, segments_count=5000, payload=b"x"
        ),
    ],
)
def test_what_is_no_segment(message: segment_message_pb2.SegmentMessage) -> None:
    assert read_segment(message.SerializeToString(), max_size=1 << 20) is None


def test_a_bare_application_message_is_decoded_not_held_as_a_segment() -> None:
    # its type (22) parses as segments_count and its 65-byte signature as the hash: status-go
    # (since 2023-11) would take it for a segment; here a hash must be 32 bytes, and decoding
    # it as what it is comes first anyway
    app = sm.application(sm.BOB, 22, sm.reaction("0x" + "cd" * 32, 1))
    parsed = segment_message_pb2.SegmentMessage()
    parsed.ParseFromString(app)
    assert parsed.segments_count == 22 and len(parsed.entire_message_hash) == 65
    assert read_segment(app, max_size=1 << 20) is None
    event = decode_application(sm.wrapped(app, bare=True), sm.NODE.hex, sm.facts(), sm.COMMUNITY_ID)
    assert isinstance(event, ReactionEvent)
