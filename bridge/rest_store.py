"""nwaku's REST store API over the local v2 store: parameter parsing and page building.

Sans-IO: :func:`parse_v3_query` / :func:`parse_legacy_query` turn query parameters into a
typed query or raise :class:`RestError` (HTTP status + reason); :func:`run_v3_query` /
:func:`run_legacy_query` answer one page from a :class:`MessageStore` as JSON bytes (they run
on a store reader thread).

``GET /store/v3/messages`` follows nwaku (``waku_api/rest/store/handlers.nim``,
``waku_archive/archive.nim``, ``waku_store/common.nim``):

- ``includeData`` (Nim ``parseBool``: true/yes/on/1, false/no/off/0) defaults to **false**;
- ``pageSize``: empty or 0 -> 20; above 100 -> 100 (nwaku clamps, it does not refuse);
- ``ascending``: ``true`` (default) or ``false``; order is always (timestamp, hash) and every
  page lists its messages in chronological order, whatever the direction; the cursor is the
  hash of the last message of the page in query order, exclusive, present only when more
  follow;
- ``startTime``/``endTime``: inclusive, ns; values <= 0 mean "no bound" (nwaku);
- ``cursor``/``hashes``: ``0x`` hex (emitted), bare hex or base64 (read);
- at most 10 content topics; an all-zero cursor is refused.

Where nwaku is lax, this server answers 400 with a reason instead of guessing: an
``ascending`` that is neither ``true`` nor ``false`` (nwaku reads it as false), a negative
or non-integer ``pageSize`` (nwaku wraps negatives to 2^64 - n), a page size beyond int64
(nwaku: parse error, also 400), a cursor that is no stored message, a pubsub topic that is
not a Waku v2 topic (``/waku/2/rs/<cluster>/<shard>`` or a named ``/waku/2/<name>/<enc>``)
and a content topic that is not ``/<app>/<version>/<name>/<encoding>`` (23/WAKU2-TOPICS).
``peerAddr`` is accepted and ignored: this node IS the store (nwaku without ``peerAddr``
answers from its own store too); a value that is not a multiaddr is still a 400.

``GET /store/v1/messages`` is nwaku's legacy API: messages as ``{payload, contentTopic,
version, timestamp, ephemeral, meta?}``, cursor ``{pubsubTopic, senderTime, storeTime,
digest: {data: base64}}`` with ``digest = sha256(contentTopic || payload)``; the cursor is
used only when ``pubsubTopic``, ``senderTime``, ``storeTime`` and ``digest`` are all given.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
import threading
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from waku_legacy.errors import DecodeError, InvalidTopic, WakuLegacyError
from waku_legacy.identity.message_hash import store_v2_digest
from waku_legacy.identity.shards import NamespacedContentTopic, parse_pubsub_topic
from waku_legacy.store import (
    DEFAULT_PAGE_SIZE,
    MAX_PAGE_SIZE,
    CursorNotFound,
    InvalidQuery,
    MessageStore,
)
from waku_legacy.store.rest_json import (
    parse_hash,
    parse_hashes,
    response_json_bytes,
)
from waku_legacy.store.types import StoredMessage, StoreError

__all__ = [
    "MAX_CONTENT_TOPICS",
    "LegacyCursorCache",
    "LegacyQuery",
    "RestError",
    "V3Query",
    "parse_legacy_query",
    "parse_v3_query",
    "run_legacy_query",
    "run_v3_query",
]

MAX_CONTENT_TOPICS = 10  # nwaku MaxContentTopicsPerQuery
_I64_MAX = (1 << 63) - 1
_INT = re.compile(r"[+-]?[0-9]+")
_TRUE = {"y", "yes", "true", "1", "on"}
_FALSE = {"n", "no", "false", "0", "off"}
_MULTIADDR = re.compile(r"/(ip4|ip6|dns|dns4|dns6|dnsaddr)/[^/]+(/[a-z0-9-]+/[^/]+)*")
_NAMED_PUBSUB = re.compile(r"/waku/2/[^/\s]+(/[^/\s]+)+")
# Messages at one timestamp searched for a legacy cursor this server did not hand out
# recently (cursors it did are found by hash, see LegacyCursorCache): a forged cursor costs
# at most this many rows.
LEGACY_CURSOR_SCAN = 500
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


class Params(Protocol):
    def getall(self, key: str, default: Any = ...) -> list[str]: ...
    def __contains__(self, key: object) -> bool: ...


class RestError(WakuLegacyError):
    """An HTTP error answer: ``status`` and a reason for the client."""

    def __init__(self, status: int, reason: str, headers: Mapping[str, str] | None = None) -> None:
        super().__init__(reason)
        self.status = status
        self.reason = reason
        self.headers = dict(headers or {})


def _bad(reason: str) -> RestError:
    return RestError(400, reason)


def _one(params: Params | Mapping[str, str], key: str) -> str | None:
    """The single value of ``key`` ("" counts as absent, as in nwaku); repeats are refused."""
    if hasattr(params, "getall"):
        values = params.getall(key, [])  # type: ignore[union-attr]
    else:
        values = [params[key]] if key in params else []
    if len(values) > 1:
        raise _bad(f"query parameter '{key}' is given {len(values)} times")
    if not values or values[0] == "":
        return None
    return values[0]


def _int64(key: str, text: str) -> int:
    text = text.strip()
    if _INT.fullmatch(text) is None:
        raise _bad(f"'{key}' must be an integer, got {text[:40]!r}")
    if len(text) > 25 or not -_I64_MAX - 1 <= int(text) <= _I64_MAX:
        raise _bad(f"'{key}' {text[:40]} does not fit a 64-bit integer")
    return int(text)


def _time(key: str, text: str | None) -> int | None:
    if text is None:
        return None
    value = _int64(key, text)
    return value if value > 0 else None  # nwaku: only positive times bound the query


def _page_size(text: str | None) -> int:
    if text is None:
        return DEFAULT_PAGE_SIZE
    value = _int64("pageSize", text)
    if value < 0:
        raise _bad(f"'pageSize' must not be negative, got {value}")
    if value == 0:
        return DEFAULT_PAGE_SIZE
    return min(value, MAX_PAGE_SIZE)


def _ascending(text: str | None) -> bool:
    if text is None:
        return True
    if text in ("true", "false"):
        return text == "true"
    raise _bad(f"'ascending' must be 'true' or 'false', got {text[:40]!r}")


def _include_data(text: str | None) -> bool:
    if text is None:
        return False
    lowered = text.strip().lower()
    if lowered in _TRUE:
        return True
    if lowered in _FALSE:
        return False
    raise _bad(f"'includeData' must be true or false, got {text[:40]!r}")


def _check_characters(kind: str, text: str) -> None:
    """Control characters (NUL above all: PostgreSQL text cannot hold it) and text that is
    not UTF-8 are refused here, the same for every store backend."""
    bad = _CONTROL.search(text)
    if bad is not None:
        raise _bad(f"{kind} {text[:80]!r} holds the control character {bad.group()!r}")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise _bad(f"{kind} {text[:80]!r} is not valid UTF-8") from None


def check_pubsub_topic(text: str) -> str:
    """A Waku v2 pubsub topic: a static shard (canonical) or a named ``/waku/2/…`` topic."""
    _check_characters("pubsub topic", text)
    if text.startswith("/waku/2/rs/"):
        try:
            parse_pubsub_topic(text)
        except InvalidTopic as exc:
            raise _bad(f"unknown pubsub topic: {exc.reason}") from None
        return text
    if len(text) > 1024 or _NAMED_PUBSUB.fullmatch(text) is None:
        raise _bad(
            f"unknown pubsub topic {text[:80]!r}: expected /waku/2/rs/<cluster>/<shard> "
            "or a named /waku/2/<name>/<encoding> topic"
        )
    return text


def check_content_topic(text: str) -> str:
    _check_characters("content topic", text)
    try:
        NamespacedContentTopic.parse(text)
    except InvalidTopic as exc:
        raise _bad(f"unknown content topic: {exc.reason}") from None
    return text


def _content_topics(text: str | None) -> tuple[str, ...]:
    if text is None:
        return ()
    topics = [t for t in text.split(",") if t != ""]
    if len(topics) > MAX_CONTENT_TOPICS:
        raise _bad(f"too many content topics: {len(topics)}, at most {MAX_CONTENT_TOPICS}")
    return tuple(check_content_topic(t) for t in dict.fromkeys(topics))


def _peer_addr(text: str | None) -> None:
    if text is not None and _MULTIADDR.fullmatch(text) is None:
        raise _bad(f"'peerAddr' {text[:80]!r} is not a multiaddr (/ip4/…/tcp/…/p2p/…)")


@dataclass(frozen=True, slots=True)
class V3Query:
    pubsub_topic: str | None = None
    content_topics: tuple[str, ...] = ()
    start_time: int | None = None
    end_time: int | None = None
    hashes: tuple[bytes, ...] = ()
    cursor: bytes | None = None
    ascending: bool = True
    page_size: int = DEFAULT_PAGE_SIZE
    include_data: bool = False


def parse_v3_query(params: Params | Mapping[str, str]) -> V3Query:
    """Query parameters of ``GET /store/v3/messages`` (raises :class:`RestError`)."""
    _peer_addr(_one(params, "peerAddr"))
    pubsub = _one(params, "pubsubTopic")
    cursor_text = _one(params, "cursor")
    hashes_text = _one(params, "hashes")
    try:
        cursor = None if cursor_text is None else parse_hash(cursor_text, "cursor")
        hashes = () if hashes_text is None else tuple(parse_hashes(hashes_text, "hashes"))
    except DecodeError as exc:  # RestJsonError, LimitExceeded (over 100 hashes), ...
        raise _bad(str(exc)) from None
    if cursor is not None and cursor == bytes(32):
        raise _bad("malformed cursor: all zeroes cursor hash")
    return V3Query(
        pubsub_topic=None if pubsub is None else check_pubsub_topic(pubsub),
        content_topics=_content_topics(_one(params, "contentTopics")),
        start_time=_time("startTime", _one(params, "startTime")),
        end_time=_time("endTime", _one(params, "endTime")),
        hashes=hashes,
        cursor=cursor,
        ascending=_ascending(_one(params, "ascending")),
        page_size=_page_size(_one(params, "pageSize")),
        include_data=_include_data(_one(params, "includeData")),
    )


def _dumps(obj: Any) -> bytes:
    return json.dumps(obj, separators=(",", ":")).encode()


def run_v3_query(
    store: MessageStore,
    query: V3Query,
    request_id: str,
    *,
    cursor_out: list[bytes | None] | None = None,
) -> bytes:
    """One page as nwaku's ``StoreQueryResponse`` JSON (runs on a store thread); the page's
    cursor (None when no more follow) is appended to ``cursor_out`` when given."""
    try:
        page = store.query(
            pubsub_topic=query.pubsub_topic,
            content_topics=query.content_topics,
            start_time=query.start_time,
            end_time=query.end_time,
            hashes=query.hashes,
            cursor=query.cursor,
            ascending=query.ascending,
            limit=query.page_size,
            include_data=query.include_data,
        )
    except CursorNotFound as exc:
        raise _bad(f"malformed cursor: {exc}") from None
    if cursor_out is not None:
        cursor_out.append(page.cursor)
    return response_json_bytes(
        request_id, page.messages, include_data=query.include_data, cursor=page.cursor
    )


# -- the legacy API (store v2-beta4 shapes) ----------------------------------------------------


@dataclass(frozen=True, slots=True)
class LegacyCursor:
    pubsub_topic: str
    sender_time: int
    store_time: int
    digest: bytes


@dataclass(frozen=True, slots=True)
class LegacyQuery:
    pubsub_topic: str | None = None
    content_topics: tuple[str, ...] = ()
    start_time: int | None = None
    end_time: int | None = None
    cursor: LegacyCursor | None = None
    ascending: bool = True
    page_size: int = DEFAULT_PAGE_SIZE


def _digest(text: str) -> bytes:
    b64 = text.replace(" ", "+").replace("-", "+").replace("_", "/")
    b64 += "=" * (-len(b64) % 4)
    try:
        raw = base64.b64decode(b64, validate=True)
    except (binascii.Error, ValueError):
        raise _bad(f"'digest' {text[:60]!r} is not base64") from None
    if len(raw) != 32:
        raise _bad(f"'digest' must be 32 bytes, got {len(raw)}")
    return raw


def parse_legacy_query(params: Params | Mapping[str, str]) -> LegacyQuery:
    """Query parameters of ``GET /store/v1/messages`` (raises :class:`RestError`)."""
    _peer_addr(_one(params, "peerAddr"))
    pubsub_text = _one(params, "pubsubTopic")
    pubsub = None if pubsub_text is None else check_pubsub_topic(pubsub_text)
    sender = _time("senderTime", _one(params, "senderTime"))
    stored = _time("storeTime", _one(params, "storeTime"))
    digest_text = _one(params, "digest")
    digest = None if digest_text is None else _digest(digest_text)
    cursor = None
    if pubsub is not None and sender is not None and stored is not None and digest is not None:
        cursor = LegacyCursor(pubsub, sender, stored, digest)
    return LegacyQuery(
        pubsub_topic=pubsub,
        content_topics=_content_topics(_one(params, "contentTopics")),
        start_time=_time("startTime", _one(params, "startTime")),
        end_time=_time("endTime", _one(params, "endTime")),
        cursor=cursor,
        ascending=_ascending(_one(params, "ascending")),
        page_size=_page_size(_one(params, "pageSize")),
    )


class LegacyCursorCache:
    """Legacy cursors this server handed out recently -> the message hash each names, so
    that paging finds its place with one primary-key lookup (bounded; thread-safe: pages
    are answered on the store's reader threads)."""

    def __init__(self, capacity: int = 100_000) -> None:
        self.capacity = capacity
        self._items: OrderedDict[tuple[str, int, bytes], bytes] = OrderedDict()
        self._lock = threading.Lock()

    def put(self, key: tuple[str, int, bytes], message_hash: bytes) -> None:
        with self._lock:
            self._items[key] = message_hash
            self._items.move_to_end(key)
            while len(self._items) > self.capacity:
                self._items.popitem(last=False)

    def get(self, key: tuple[str, int, bytes]) -> bytes | None:
        with self._lock:
            return self._items.get(key)


def _legacy_key(cursor: LegacyCursor) -> tuple[str, int, bytes]:
    return (cursor.pubsub_topic, cursor.sender_time, cursor.digest)


def _find_legacy_cursor(
    store: MessageStore, cursor: LegacyCursor, known: LegacyCursorCache | None = None
) -> bytes:
    """The hash of the message a legacy cursor names (pubsub topic, time, digest).

    A cursor this server handed out is found by its hash; any other is searched for among
    at most :data:`LEGACY_CURSOR_SCAN` messages with its pubsub topic and time (a forged
    cursor must not make the server read thousands of rows)."""
    remembered = None if known is None else known.get(_legacy_key(cursor))
    if remembered is not None:
        m = store.get_message(remembered)
        if (
            m is not None
            and m.pubsub_topic == cursor.pubsub_topic
            and m.timestamp == cursor.sender_time
        ):
            return m.message_hash
    after: bytes | None = None
    scanned = 0
    while scanned < LEGACY_CURSOR_SCAN:
        page = store.query(
            pubsub_topic=cursor.pubsub_topic, start_time=cursor.sender_time,
            end_time=cursor.sender_time, cursor=after,
            limit=min(MAX_PAGE_SIZE, LEGACY_CURSOR_SCAN - scanned),
        )  # fmt: skip
        for m in page.messages:
            if store_v2_digest(m.content_topic, m.payload) == cursor.digest:
                return m.message_hash
        scanned += len(page.messages)
        if page.cursor is None:
            raise _bad(
                "cursor not found: no stored message has this pubsubTopic, senderTime and digest"
            )
        after = page.cursor
    raise _bad(
        f"cursor not found among the first {LEGACY_CURSOR_SCAN} messages with this "
        "pubsubTopic and senderTime; page with cursors this server returned"
    )


def legacy_message_json(m: StoredMessage) -> dict[str, Any]:
    out: dict[str, Any] = {
        "payload": base64.b64encode(m.payload).decode("ascii"),
        "contentTopic": m.content_topic,
        "version": m.version,
        "timestamp": m.timestamp,
        "ephemeral": False,
    }
    if m.meta:
        out["meta"] = base64.b64encode(m.meta).decode("ascii")
    return out


def run_legacy_query(
    store: MessageStore,
    query: LegacyQuery,
    known: LegacyCursorCache | None = None,
    *,
    cursor_out: list[LegacyCursor | None] | None = None,
) -> bytes:
    """One legacy page as JSON; its cursor is remembered in ``known`` and appended to
    ``cursor_out`` (None when no more follow)."""
    cursor_hash = None
    if query.cursor is not None:
        cursor_hash = _find_legacy_cursor(store, query.cursor, known)
    page = store.query(
        pubsub_topic=query.pubsub_topic, content_topics=query.content_topics,
        start_time=query.start_time, end_time=query.end_time, cursor=cursor_hash,
        ascending=query.ascending, limit=query.page_size,
    )  # fmt: skip
    out: dict[str, Any] = {"messages": [legacy_message_json(m) for m in page.messages]}
    next_cursor = None
    if page.cursor is not None:
        last = next(m for m in page.messages if m.message_hash == page.cursor)
        digest = store_v2_digest(last.content_topic, last.payload)
        next_cursor = LegacyCursor(last.pubsub_topic, last.timestamp, last.timestamp, digest)
        if known is not None:
            known.put(_legacy_key(next_cursor), last.message_hash)
        out["cursor"] = {
            "pubsubTopic": last.pubsub_topic,
            "senderTime": last.timestamp,
            "storeTime": last.timestamp,
            "digest": {"data": base64.b64encode(digest).decode()},
        }
    if cursor_out is not None:
        cursor_out.append(next_cursor)
    return _dumps(out)


def store_error_status(exc: BaseException) -> RestError:
    """The answer for a store failure while serving (never the exception text of a driver)."""
    if isinstance(exc, RestError):
        return exc
    if isinstance(exc, InvalidQuery):  # refused by the store itself, the same on every backend
        return RestError(400, str(exc))
    if isinstance(exc, StoreError):
        return RestError(503, "the store cannot answer right now; retry later")
    return RestError(500, "internal error")
