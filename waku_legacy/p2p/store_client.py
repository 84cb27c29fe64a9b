"""A store v3 client over libp2p (``/vac/waku/store-query/3.0.0``), built on the protocol's
published protobufs (:mod:`waku_legacy.proto.store_v3_pb2`, ``proto/store_v3.proto``) and
not on the server's codec, so that tests of the bridge check one against the other.

:func:`query_pages` follows ``pagination_cursor`` page by page on one connection.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from google.protobuf.message import DecodeError as ProtobufDecodeError

from waku_legacy.errors import DecodeError
from waku_legacy.proto import store_v3_pb2

__all__ = [
    "STORE_V3_CODEC",
    "StoreQueryArgs",
    "build_request",
    "decode_response",
    "query_pages",
]

STORE_V3_CODEC = "/vac/waku/store-query/3.0.0"


class RequestClient(Protocol):
    """A connection that sends one request on a new stream and returns the response
    (:class:`~waku_legacy.p2p.transport.native_client.NativeClient`; py-libp2p's in the tests)."""

    async def request(self, protocol: str, body: bytes) -> bytes: ...


@dataclass(frozen=True)
class StoreQueryArgs:
    pubsub_topic: str | None = None
    content_topics: Sequence[str] = ()
    time_start: int | None = None
    time_end: int | None = None
    message_hashes: Sequence[bytes] = ()
    include_data: bool = True
    forward: bool = True
    page_size: int | None = None
    cursor: bytes | None = None
    request_id: str = field(default_factory=lambda: str(uuid.uuid4()))


def build_request(args: StoreQueryArgs, cursor: bytes | None = None) -> bytes:
    request = store_v3_pb2.StoreQueryRequest(
        request_id=args.request_id,
        include_data=args.include_data,
        content_topics=list(args.content_topics),
        message_hashes=list(args.message_hashes),
        pagination_forward=args.forward,
    )
    if args.pubsub_topic is not None:
        request.pubsub_topic = args.pubsub_topic
    if args.time_start is not None:
        request.time_start = args.time_start
    if args.time_end is not None:
        request.time_end = args.time_end
    if args.page_size is not None:
        request.pagination_limit = args.page_size
    cursor = cursor if cursor is not None else args.cursor
    if cursor is not None:
        request.pagination_cursor = cursor
    body: bytes = request.SerializeToString()
    return body


def decode_response(body: bytes) -> store_v3_pb2.StoreQueryResponse:
    response = store_v3_pb2.StoreQueryResponse()
    try:
        response.ParseFromString(body)
    except ProtobufDecodeError as exc:
        raise DecodeError("StoreQueryResponse", str(exc)) from None
    return response


async def query_pages(
    client: RequestClient, args: StoreQueryArgs, *, max_pages: int = 1
) -> AsyncIterator[store_v3_pb2.StoreQueryResponse]:
    """Each page's response; the next page is asked with the previous page's cursor, until
    a page has none, its status is not 200, or ``max_pages`` were read."""
    cursor = args.cursor
    for _ in range(max_pages):
        response = decode_response(
            await client.request(STORE_V3_CODEC, build_request(args, cursor))
        )
        yield response
        if response.status_code != 200 or not response.HasField("pagination_cursor"):
            return
        cursor = response.pagination_cursor
