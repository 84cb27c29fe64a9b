"""Legacy 13/WAKU2-STORE (``/vac/waku/store/2.0.0-beta4``): ``HistoryRPC`` decoding and
encoding as nwaku's ``waku/waku_store_legacy`` (``rpc.nim``, ``rpc_codec.nim``,
``common.nim``, ``protocol.nim``) and ``waku_archive_legacy/archive.nim`` do it (7d1c6ab).

- ``HistoryRPC{request_id=1, query=2, response=3}``; ``request_id`` is required and a body
  that does not decode, or holds no query, gets an empty reply (nwaku writes a zero-length
  frame); the request id is echoed in every other reply.
- ``PagingInfo.direction`` absent is BACKWARD (proto3's 0, nwaku's
  ``default(PagingDirection)``); page size absent or 0 is 20, over 100 is 100.
- A cursor (``Index{digest, receiver_time, sender_time, pubsub_topic}``) with an empty
  pubsub topic, a zero sender or receiver time or an all-zero digest is refused
  (``checkHistCursor``), and so is more than 10 content topics (the legacy archive's
  check, with or without a cursor); every refusal, a cursor that names no stored message
  included, is ``INVALID_CURSOR`` (``toRPC`` maps every BAD_REQUEST to it).
- ``HistoryResponse{messages=2, paging_info=3, error=4}``: the paging info holds only the
  next cursor, present when more messages follow; ``error`` is always written, NONE
  included (nwaku's decoder requires the field).
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass

from waku_legacy.errors import DecodeError
from waku_legacy.proto import store_v2beta4_pb2
from waku_legacy.proto.codec import parse_message
from waku_legacy.proto.wire import encode_varint
from waku_legacy.store.legacy_query import LegacyCursor, LegacyQuery
from waku_legacy.store.protocol.store_v3 import (
    MAX_REQUEST_SIZE,
    has_request_id,
    length_delimited,
    waku_message_bytes,
)
from waku_legacy.store.query import MAX_CONTENT_TOPICS, clamp_page_size
from waku_legacy.store.types import HASH_SIZE, StoredMessage

__all__ = [
    "LEGACY_STORE_CODEC",
    "HistoryError",
    "LegacyRefused",
    "LegacyRequest",
    "decode_history_rpc",
    "encode_history_response",
]

LEGACY_STORE_CODEC = "/vac/waku/store/2.0.0-beta4"

_PB = store_v2beta4_pb2


class HistoryError(enum.IntEnum):
    """``HistoryResponse.Error`` (nwaku's ``HistoryResponseErrorRPC``)."""

    NONE = 0
    INVALID_CURSOR = 1
    TOO_MANY_REQUESTS = 429
    SERVICE_UNAVAILABLE = 503


class LegacyRefused(DecodeError):
    """A legacy query nwaku answers with ``INVALID_CURSOR`` before reading the store
    (``request_id``: the refused request's, to echo)."""

    request_id = ""


@dataclass(frozen=True, slots=True)
class LegacyRequest:
    request_id: str
    query: LegacyQuery


def _cursor_of(index: store_v2beta4_pb2.Index) -> LegacyCursor:
    """nwaku's ``checkHistCursor`` (common.nim), then the cursor."""
    what = "legacy store cursor"
    if not index.pubsub_topic:
        raise LegacyRefused(what, "empty pubsubTopic")
    if index.sender_time == 0:
        raise LegacyRefused(what, "invalid senderTime")
    if index.receiver_time == 0:
        raise LegacyRefused(what, "invalid storeTime")
    if not any(index.digest):
        raise LegacyRefused(what, "empty digest")
    if len(index.digest) != HASH_SIZE:
        raise LegacyRefused(what, f"a digest is {HASH_SIZE} bytes, got {len(index.digest)}")
    return LegacyCursor(
        index.pubsub_topic, index.sender_time, index.receiver_time, bytes(index.digest)
    )


def decode_history_rpc(body: bytes) -> LegacyRequest:
    """``body`` as a legacy query. Raises :class:`DecodeError` for what nwaku answers with
    an empty reply, :class:`LegacyRefused` for what it answers ``INVALID_CURSOR``."""
    rpc = parse_message(_PB.HistoryRPC, body, "legacy store request", max_size=MAX_REQUEST_SIZE)
    if not rpc.request_id and not has_request_id(bytes(body)):
        raise DecodeError("legacy store request", "MissingRequiredField request_id")
    if not rpc.HasField("query"):
        raise DecodeError("legacy store request", "empty query rpc")
    try:
        query = _query_of(rpc.query)
    except LegacyRefused as exc:
        exc.request_id = rpc.request_id
        raise
    return LegacyRequest(rpc.request_id, query)


def _query_of(q: store_v2beta4_pb2.HistoryQuery) -> LegacyQuery:
    topics = tuple(dict.fromkeys(f.content_topic for f in q.content_filters))
    if len(topics) > MAX_CONTENT_TOPICS:
        raise LegacyRefused("legacy store request", "too many content topics")
    paging = q.paging_info
    cursor = _cursor_of(paging.cursor) if paging.HasField("cursor") else None
    return LegacyQuery(
        pubsub_topic=q.pubsub_topic or None,
        content_topics=topics,
        start_time=q.start_time if q.HasField("start_time") else None,
        end_time=q.end_time if q.HasField("end_time") else None,
        cursor=cursor,
        ascending=paging.direction == _PB.PagingInfo.FORWARD,
        page_size=clamp_page_size(paging.page_size),
    )


def encode_history_response(
    request_id: str,
    messages: Sequence[StoredMessage] = (),
    cursor: LegacyCursor | None = None,
    error: HistoryError = HistoryError.NONE,
) -> bytes:
    """``HistoryRPC{request_id, response}`` (see the module notes)."""
    response = _PB.HistoryResponse()
    if cursor is not None:
        index = response.paging_info.cursor
        index.digest = cursor.digest
        index.receiver_time = cursor.store_time
        index.sender_time = cursor.sender_time
        index.pubsub_topic = cursor.pubsub_topic
    # error = 4 (varint), written even when NONE
    inner = b"".join(length_delimited(2, waku_message_bytes(m)) for m in messages)
    inner += response.SerializeToString() + b"\x20" + encode_varint(int(error))
    return length_delimited(1, request_id.encode()) + length_delimited(3, inner)


def too_many_requests() -> bytes:
    """nwaku's reply to a request over the rate limit (request id ``N/A``)."""
    return encode_history_response("N/A", error=HistoryError.TOO_MANY_REQUESTS)
