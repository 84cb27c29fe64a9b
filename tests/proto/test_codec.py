"""proto/codec.py: untrusted protobuf bytes become typed errors, never library ones."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from waku_legacy.errors import DecodeError, LimitExceeded
from waku_legacy.proto import status_archive_pb2, store_v3_pb2, waku_message_pb2
from waku_legacy.proto.codec import (
    ProtobufDecodeError,
    ProtobufTooLarge,
    parse_message,
    try_parse_message,
    unknown_field_path,
)

KINDS = [
    waku_message_pb2.WakuMessage,
    store_v3_pb2.StoreQueryResponse,
    status_archive_pb2.WakuMessageArchive,
    status_archive_pb2.WakuMessageArchiveIndex,
]


def test_valid_message_parses() -> None:
    message = waku_message_pb2.WakuMessage(payload=b"p", content_topic="/a/1/b/c", version=1)
    parsed = parse_message(
        waku_message_pb2.WakuMessage, message.SerializeToString(), "msg", max_size=100, strict=True
    )
    assert parsed == message


@pytest.mark.parametrize(
    ("data", "needle"),
    [
        (b"\x12\x02\xff\xfe", "bad UTF-8"),  # content_topic (string) with invalid UTF-8
        (b"\x0a\x05ab", "corrupt"),  # truncated length-delimited payload
        (b"\xff\xff\xff", "corrupt"),
    ],
)
def test_broken_bytes(data: bytes, needle: str) -> None:
    with pytest.raises(
        ProtobufDecodeError, match=r"malformed msg: not a valid waku\.message\.v1\.WakuMessage"
    ) as info:
        parse_message(waku_message_pb2.WakuMessage, data, "msg", max_size=100)
    assert needle in str(info.value)


def test_unknown_fields_only_refused_when_strict() -> None:
    data = b"\x08\x01"  # field 1 (bytes payload) sent as a varint: kept as unknown
    assert parse_message(waku_message_pb2.WakuMessage, data, "msg", max_size=10) is not None
    with pytest.raises(ProtobufDecodeError, match=r"unknown field <field 1, wire type 0>"):
        parse_message(waku_message_pb2.WakuMessage, data, "msg", max_size=10, strict=True)


def test_unknown_fields_found_in_nested_messages_and_maps() -> None:
    inner = status_archive_pb2.WakuMessageArchiveIndexMetadata(version=1).SerializeToString()
    inner += b"\xa2\x06\x01x"  # field 100, length-delimited
    entry = b"\x0a\x04" + b"0xab" + b"\x12" + bytes([len(inner)]) + inner
    data = b"\x0a" + bytes([len(entry)]) + entry
    with pytest.raises(ProtobufDecodeError, match=r"archives\['0xab'\]\.<field 100"):
        parse_message(
            status_archive_pb2.WakuMessageArchiveIndex, data, "index", max_size=100, strict=True
        )
    archive = status_archive_pb2.WakuMessageArchive()
    archive.messages.add(topic=b"abcd")
    archive.messages.add(topic=b"efgh")
    message = archive.messages[1].SerializeToString() + b"\x08\x01"
    data = archive.SerializeToString() + b"\x1a" + bytes([len(message)]) + message
    parsed = parse_message(status_archive_pb2.WakuMessageArchive, data, "archive", max_size=100)
    assert unknown_field_path(parsed) == "messages[2].<field 1, wire type 0>"


def test_size_limit_and_types() -> None:
    with pytest.raises(ProtobufTooLarge, match="11 bytes is over the 10-byte limit") as info:
        parse_message(waku_message_pb2.WakuMessage, bytes(11), "msg", max_size=10)
    assert isinstance(info.value, LimitExceeded)
    with pytest.raises(ProtobufDecodeError, match="expected bytes"):
        parse_message(waku_message_pb2.WakuMessage, "text", "msg", max_size=10)  # type: ignore[arg-type]


def test_deeply_nested_groups_are_a_typed_error() -> None:
    # 200 nested unknown groups (field 1, wire types 3/4): over protobuf's depth limit
    data = b"\x0b" * 200 + b"\x0c" * 200
    with pytest.raises(ProtobufDecodeError, match=r"not a valid protobuf\.WakuMessageArchive"):
        parse_message(status_archive_pb2.WakuMessageArchive, data, "archive", max_size=10_000)


@settings(max_examples=200)
@given(st.sampled_from(KINDS), st.binary(max_size=200), st.booleans())
def test_random_bytes(kind: type, data: bytes, strict: bool) -> None:
    try:
        parse_message(kind, data, "input", max_size=1000, strict=strict)
    except DecodeError:
        pass


def test_try_parse_message_is_parse_message_without_the_error() -> None:
    message = waku_message_pb2.WakuMessage(payload=b"p", content_topic="/a/1/b/c", version=1)
    data = message.SerializeToString()
    assert try_parse_message(waku_message_pb2.WakuMessage, data, max_size=100) == message
    assert try_parse_message(waku_message_pb2.WakuMessage, bytearray(data), max_size=100) == message
    for broken in (
        b"\x12\x02\xff\xfe",
        b"\x0a\x05ab",
        b"\xff\xff\xff",
        b"\x0b" * 200 + b"\x0c" * 200,
    ):
        assert (
            try_parse_message(status_archive_pb2.WakuMessageArchive, broken, max_size=10_000)
            is None
        )
    assert try_parse_message(waku_message_pb2.WakuMessage, bytes(11), max_size=10) is None
    assert try_parse_message(waku_message_pb2.WakuMessage, "text", max_size=10) is None  # type: ignore[arg-type]


@settings(max_examples=300)
@given(st.sampled_from(KINDS), st.binary(max_size=200), st.integers(min_value=0, max_value=250))
def test_try_parse_message_agrees_with_parse_message(kind: type, data: bytes, limit: int) -> None:
    try:
        expected = parse_message(kind, data, "input", max_size=limit)
    except DecodeError:
        expected = None
    assert try_parse_message(kind, data, max_size=limit) == expected


def test_parsing_leaves_other_threads_warnings_alone() -> None:
    """Parsing changes no process-wide warning filter: while a thread parses, an ordinary
    warning elsewhere stays a warning (a catch_warnings() + simplefilter("error") around
    each parse turned thousands of them into exceptions)."""
    import threading
    import warnings

    from waku_legacy.proto import waku_message_pb2 as pb
    from waku_legacy.proto.codec import parse_message

    data = pb.WakuMessage(payload=b"x" * 50, content_topic="/a/1/b/proto").SerializeToString()
    stop = threading.Event()

    def parse() -> None:
        while not stop.is_set():
            parse_message(pb.WakuMessage, data, "m", max_size=1000)

    raised = 0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        thread = threading.Thread(target=parse)
        thread.start()
        try:
            for _ in range(50_000):
                try:
                    warnings.warn("an ordinary warning", UserWarning, stacklevel=1)
                except UserWarning:
                    raised += 1
        finally:
            stop.set()
            thread.join()
    assert raised == 0
