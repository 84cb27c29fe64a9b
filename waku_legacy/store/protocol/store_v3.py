"""13/WAKU2-STORE v3 (``/vac/waku/store-query/3.0.0``): request decoding and response
encoding, as nwaku's ``waku/waku_store/rpc_codec.nim`` and ``common.nim`` (7d1c6ab) do it.

Request (``StoreQueryRequest``, proto/store_v3.proto): ``request_id`` is required (nwaku:
``MissingRequiredField request_id``); ``include_data`` false unless set;
``pagination_forward`` false (BACKWARD, newest first) unless set; ``pagination_limit``
absent or 0 means 20, over 100 means 100; a time given bounds the query as is (even 0 or
negative); hashes and the cursor are copied into 32 bytes as nwaku's ``copyFrom`` does
(a shorter value is zero-padded, a longer one cut), so an empty cursor is the all-zero
cursor nwaku refuses.

Response (``StoreQueryResponse``): ``request_id`` is always written, even when empty (nwaku's
decoder requires the field); ``status_code``/``status_desc``; one ``WakuMessageKeyValue``
per message with its hash and pubsub topic, and the message when ``include_data`` was
asked (nwaku leaves the pubsub topic out of hash-only answers; we send it, as the issue
asks: a client learns where each hash lives without a second query); ``pagination_cursor``
when more messages follow. A message's ``payload`` and ``content_topic`` are written even
when empty (nwaku's ``WakuMessage.decode`` requires both fields).
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass

from waku_legacy.errors import DecodeError
from waku_legacy.proto import store_v3_pb2, waku_message_pb2
from waku_legacy.proto.codec import parse_message
from waku_legacy.proto.wire import CONTINUED_PAIRS, encode_varint, iter_fields
from waku_legacy.proto.wire import SMALL_VARINTS as _SMALL
from waku_legacy.store.query import clamp_page_size
from waku_legacy.store.types import HASH_SIZE, StoredMessage, StoreQuery, WireMessage

__all__ = [
    "MAX_HASHES_PER_REQUEST",
    "MAX_REQUEST_SIZE",
    "STORE_V3_CODEC",
    "StatusCode",
    "StoreRequestRefused",
    "V3Request",
    "decode_request",
    "encode_response",
    "waku_message_of",
]

STORE_V3_CODEC = "/vac/waku/store-query/3.0.0"
# The largest request frame we read: 1000 hashes take 34 KB, ten long topics a few more.
MAX_REQUEST_SIZE = 64 * 1024
# Hashes one request may look up (nwaku has no cap; js-waku sends every hash it wants in one
# request, so a hash-only page of 100 and more is fetched at once): primary-key lookups in
# one SQL list, bounded by this.
MAX_HASHES_PER_REQUEST = 1000


class StatusCode(enum.IntEnum):
    """nwaku's ``StatusCode`` (``waku_store/common.nim``)."""

    SUCCESS = 200
    BAD_RESPONSE = 300
    BAD_REQUEST = 400
    TOO_MANY_REQUESTS = 429
    SERVICE_UNAVAILABLE = 503


class StoreRequestRefused(DecodeError):
    """A request that decodes but that this node will not run (over our own limits);
    ``request_id``: the refused request's, to echo."""

    request_id = ""


@dataclass(frozen=True, slots=True)
class V3Request:
    request_id: str
    query: StoreQuery


def _has_field(data: bytes, number: int) -> bool:
    """Whether the top level of (already parsed, so well-formed) ``data`` holds field
    ``number``: proto3 cannot tell an absent string from an empty one."""
    try:
        return any(f.number == number for f in iter_fields(data, "store v3 request"))
    except DecodeError:  # groups: the parser accepted them; no field is hidden inside
        return False


def has_request_id(data: bytes) -> bool:
    """Whether field 1 (both protocols' ``request_id``) is at the top level of ``data``."""
    try:
        return _has_field(data, 1)
    except IndexError:  # cannot happen after a successful parse; absent if it did
        return False


def _hash32(raw: bytes) -> bytes:
    """nwaku's ``copyFrom`` into a 32-byte hash: zero-padded or cut."""
    return bytes(raw[:HASH_SIZE]).ljust(HASH_SIZE, b"\x00")


def decode_request(body: bytes) -> V3Request:
    """``body`` as a store query; raises :class:`DecodeError` (nwaku answers 400
    ``decoding rpc failed: …``) or :class:`StoreRequestRefused` (ours: 400 ``BAD_REQUEST``)."""
    msg = parse_message(
        store_v3_pb2.StoreQueryRequest, body, "store v3 request", max_size=MAX_REQUEST_SIZE
    )
    if not msg.request_id and not has_request_id(bytes(body)):
        raise DecodeError("store v3 request", "MissingRequiredField request_id")
    if len(msg.message_hashes) > MAX_HASHES_PER_REQUEST:
        refused = StoreRequestRefused(
            "store v3 request",
            f"{len(msg.message_hashes)} message hashes in one query; at most "
            f"{MAX_HASHES_PER_REQUEST}",
        )
        refused.request_id = msg.request_id
        raise refused
    query = StoreQuery(
        pubsub_topic=msg.pubsub_topic if msg.HasField("pubsub_topic") else None,
        content_topics=tuple(dict.fromkeys(msg.content_topics)),
        start_time=msg.time_start if msg.HasField("time_start") else None,
        end_time=msg.time_end if msg.HasField("time_end") else None,
        hashes=tuple(_hash32(h) for h in msg.message_hashes),
        cursor=_hash32(msg.pagination_cursor) if msg.HasField("pagination_cursor") else None,
        ascending=msg.pagination_forward,
        limit=clamp_page_size(msg.pagination_limit if msg.HasField("pagination_limit") else 0),
        include_data=msg.include_data,
    )
    return V3Request(msg.request_id, query)


def request_cursor(body: bytes) -> bytes | None:
    """The cursor ``body`` continues from (as :func:`decode_request` reads it: the last
    ``pagination_cursor``, padded or cut to 32 bytes): None for a first page or for bytes
    that do not parse. A listener uses it only to let a client's next page through its
    rate limit, on its event loop, before the request is judged by :func:`decode_request`
    on a worker thread: so it is the same parser's reading without the diagnosis around it
    (about 1 us; walking the fields in Python took 20 us of the loop's time per request)."""
    if len(body) > MAX_REQUEST_SIZE:
        return None
    try:
        msg = store_v3_pb2.StoreQueryRequest.FromString(body)
        if not msg.HasField("pagination_cursor"):
            return None
        return _hash32(msg.pagination_cursor)
    except Exception:  # whatever the parser raises: judged later, not here
        return None


def waku_message_of(m: StoredMessage) -> waku_message_pb2.WakuMessage:
    """A stored message as the 14/WAKU2-MESSAGE protobuf (version and timestamp always
    set, as nwaku writes them; meta only when there is one)."""
    out = waku_message_pb2.WakuMessage(
        payload=m.payload, content_topic=m.content_topic, version=m.version, timestamp=m.timestamp
    )
    if m.meta:
        out.meta = m.meta
    return out


_U64 = (1 << 64) - 1


def waku_message_bytes(m: StoredMessage) -> bytes:
    """A stored message as 14/WAKU2-MESSAGE bytes, written by hand (the page's hot loop):
    ``payload`` and ``content_topic`` even when empty (nwaku's decoder,
    ``waku_core/message/codec.nim``, requires both), ``version`` and ``timestamp`` always
    (as nwaku writes them), ``meta`` when there is one. Equal to what
    :func:`waku_message_of` serializes, apart from those always-written fields."""
    payload = m.payload
    size = len(payload)
    ts = m.timestamp
    version = m.version
    out = b"".join(
        (
            b"\x0a", _SMALL[size] if size < 16384 else encode_varint(size), payload,
            _text_field(_CONTENT_TOPIC_FIELDS, b"\x12", m.content_topic),
            _VERSION_FIELDS[version] if version < 256 else b"\x18" + encode_varint(version),
            b"\x50", encode_varint(((ts << 1) ^ (ts >> 63)) & _U64),
        )
    )  # fmt: skip
    if m.meta:
        out += b"\x5a" + encode_varint(len(m.meta)) + m.meta
    return out


#: a page's topics repeat: their fields are made once (bounded: cleared when full)
_CONTENT_TOPIC_FIELDS: dict[str | bytes, bytes] = {}
_PUBSUB_TOPIC_FIELDS: dict[str | bytes, bytes] = {}
_VERSION_FIELDS = tuple(b"\x18" + _SMALL[v] for v in range(256))


def _text_field(cache: dict[str | bytes, bytes], tag: bytes, text: str | bytes) -> bytes:
    """``tag``, length and UTF-8 of ``text`` (always written, even empty). ``text`` may be
    the stored UTF-8 bytes: bytes that are not UTF-8 are written as their text with U+FFFD
    for each bad sequence, as decoding the row to a :class:`StoredMessage` gives."""
    found = cache.get(text)
    if found is None:
        raw = text.encode() if isinstance(text, str) else text.decode("utf-8", "replace").encode()
        found = tag + encode_varint(len(raw)) + raw
        if len(cache) >= 4096:
            cache.clear()
        cache[text] = found
    return found


def length_delimited(number: int, payload: bytes) -> bytes:
    """One length-delimited protobuf field."""
    return encode_varint(number << 3 | 2) + encode_varint(len(payload)) + payload


def encode_response(
    request_id: str,
    status: StatusCode | int,
    description: str,
    messages: Sequence[StoredMessage] | Sequence[WireMessage] = (),
    *,
    include_data: bool = False,
    cursor: bytes | None = None,
) -> bytes:
    """One ``StoreQueryResponse`` (see the module notes for what each entry holds);
    ``messages`` as :class:`StoredMessage` or as the store's :data:`WireMessage` rows."""
    out = store_v3_pb2.StoreQueryResponse(status_code=int(status), status_desc=description)
    if cursor is not None:
        out.pagination_cursor = cursor
    # proto3 leaves an empty request id out; nwaku's decoder requires the field
    parts = [length_delimited(1, request_id.encode()), out.SerializeToString()]
    if include_data:
        _write_entries(parts, messages)
        return b"".join(parts)
    for m in messages:  # WakuMessageKeyValue{message_hash=1, message=2, pubsub_topic=3}
        key = m[0]
        entry = b"\x0a" + _SMALL[len(key)] + key
        if m[1]:
            entry += _text_field(_PUBSUB_TOPIC_FIELDS, b"\x1a", m[1])
        size = len(entry)
        parts += (b"\xa2\x01", _SMALL[size] if size < 16384 else encode_varint(size), entry)
    return b"".join(parts)


#: timestamps whose zigzag varint takes 9 bytes (2**55 ns is 2001-02-21: every real one)
_TS_LOW, _TS_HIGH = 1 << 55, 1 << 62
#: (content topic, version) -> their two fields, which follow each other in a message
_CONTENT_VERSION_FIELDS: dict[tuple[str | bytes, int], bytes] = {}


def _write_entries(
    parts: list[bytes], messages: Sequence[StoredMessage] | Sequence[WireMessage]
) -> None:
    """A page's ``WakuMessageKeyValue`` entries with their messages (``messages`` field 20),
    appended to ``parts`` as pieces, joined once by the caller: the page's hot loop. The
    sizes are added up instead of joining each message and then its entry (two copies
    and two joins per message), the 9-byte timestamp varint comes from the 14-bit table
    inline, and the topic fields from caches. The bytes are :func:`waku_message_bytes`'s
    inside the entry that :func:`encode_response` always wrote (the tests compare both
    against the generated protobuf classes)."""
    small, pairs = _SMALL, CONTINUED_PAIRS
    pubsub_fields, cv_fields = _PUBSUB_TOPIC_FIELDS, _CONTENT_VERSION_FIELDS
    for m in messages:
        # a StoredMessage's first seven fields are a WireMessage
        key, pubsub, content, payload, version, ts, meta = m[:7]
        psf = pubsub_fields.get(pubsub) or _text_field(pubsub_fields, b"\x1a", pubsub)
        cvf = cv_fields.get((content, version))
        if cvf is None:
            cvf = _content_version_fields(content, version)
        if payload is None:  # a NULL payload column: written empty, as nwaku requires
            payload = b""
        size = len(payload)
        if _TS_LOW <= ts < _TS_HIGH and not meta and size < 16000 and len(cvf) < 300:
            # zigzag(ts) = ts << 1 here: 8 continued bytes from 4 table pairs, then v >> 56
            v = ts << 1
            sv = small[size]
            kv = small[len(key)]
            msize = 11 + len(sv) + size + len(cvf)
            mv = small[msize]
            esize = 2 + len(kv) + len(key) + len(mv) + msize + len(psf)
            parts += (
                b"\xa2\x01", small[esize] if esize < 16384 else encode_varint(esize),
                b"\x0a", kv, key, b"\x12", mv, b"\x0a", sv, payload, cvf,
                b"\x50", pairs[v & 0x3FFF], pairs[(v >> 14) & 0x3FFF],
                pairs[(v >> 28) & 0x3FFF], pairs[(v >> 42) & 0x3FFF], small[v >> 56], psf,
            )  # fmt: skip
            continue
        tsv = encode_varint(((ts << 1) ^ (ts >> 63)) & _U64)
        mf = b"\x5a" + encode_varint(len(meta)) + meta if meta else b""
        sv = small[size] if size < 16384 else encode_varint(size)
        msize = 2 + len(sv) + size + len(cvf) + len(tsv) + len(mf)
        mv = small[msize] if msize < 16384 else encode_varint(msize)
        kv = small[len(key)]
        esize = 2 + len(kv) + len(key) + len(mv) + msize + len(psf)
        parts += (
            b"\xa2\x01", small[esize] if esize < 16384 else encode_varint(esize),
            b"\x0a", kv, key, b"\x12", mv, b"\x0a", sv, payload, cvf,
            b"\x50", tsv, mf, psf,
        )  # fmt: skip


def _content_version_fields(content: str | bytes, version: int) -> bytes:
    found = _text_field(_CONTENT_TOPIC_FIELDS, b"\x12", content) + (
        _VERSION_FIELDS[version] if version < 256 else b"\x18" + encode_varint(version)
    )
    if len(_CONTENT_VERSION_FIELDS) >= 4096:
        _CONTENT_VERSION_FIELDS.clear()
    _CONTENT_VERSION_FIELDS[(content, version)] = found
    return found


def too_many_requests() -> bytes:
    """nwaku's answer to a request over the rate limit (``protocol.nim``: request id
    ``N/A``, the request is not read)."""
    return encode_response("N/A", StatusCode.TOO_MANY_REQUESTS, "TOO_MANY_REQUESTS")
