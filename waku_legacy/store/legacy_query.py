"""Legacy store queries (13/WAKU2-STORE v2-beta4 semantics) over the v2 store: the one
implementation the legacy REST API (``GET /store/v1/messages``) and the legacy store
protocol (``/vac/waku/store/2.0.0-beta4``) share.

A legacy cursor names a message by ``(pubsub topic, sender time, store time, digest)``
with ``digest = sha256(content_topic || payload)``; the v2 store pages by message hash, so
:func:`find_legacy_cursor` turns the cursor into the hash of the message it names. A cursor
this process handed out is found with one primary-key lookup (:class:`LegacyCursorCache`);
any other is searched for among at most :data:`LEGACY_CURSOR_SCAN` messages at its pubsub
topic and time, so a forged cursor costs a bounded read. :func:`run_legacy_page` answers one
page and gives the next page's cursor (``store time`` = the message's timestamp, as this
store keeps no separate receive time).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass, field

from waku_legacy.identity.message_hash import store_v2_digest
from waku_legacy.store.query import StoreQueryError, StoreQueryErrorKind
from waku_legacy.store.types import (
    DEFAULT_PAGE_SIZE,
    MAX_PAGE_SIZE,
    MessageStore,
    StoredMessage,
    StoreQuery,
)

__all__ = [
    "LEGACY_CURSOR_SCAN",
    "LegacyCursor",
    "LegacyCursorCache",
    "LegacyCursorNotFound",
    "LegacyPage",
    "LegacyQuery",
    "find_legacy_cursor",
    "legacy_cursor_of",
    "run_legacy_page",
]

# Messages at one timestamp searched for a legacy cursor this process did not hand out
# recently (cursors it did are found by hash, see LegacyCursorCache): a forged cursor costs
# at most this many rows.
LEGACY_CURSOR_SCAN = 500


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


@dataclass(frozen=True, slots=True)
class LegacyPage:
    """One legacy page: messages in chronological order, the next page's cursor (None
    when no more follow)."""

    messages: list[StoredMessage] = field(default_factory=list)
    cursor: LegacyCursor | None = None


class LegacyCursorNotFound(StoreQueryError):
    """A legacy cursor that names no stored message (or none within the bounded search)."""

    def __init__(self, reason: str) -> None:
        super().__init__(StoreQueryErrorKind.DRIVER_ERROR, reason)


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


def legacy_key(cursor: LegacyCursor) -> tuple[str, int, bytes]:
    return (cursor.pubsub_topic, cursor.sender_time, cursor.digest)


def find_legacy_cursor(
    store: MessageStore, cursor: LegacyCursor, known: LegacyCursorCache | None = None
) -> bytes:
    """The hash of the message a legacy cursor names (pubsub topic, time, digest), or
    :class:`LegacyCursorNotFound`.

    A cursor this server handed out is found by its hash; any other is searched for among
    at most :data:`LEGACY_CURSOR_SCAN` messages with its pubsub topic and time (a forged
    cursor must not make the server read thousands of rows)."""
    remembered = None if known is None else known.get(legacy_key(cursor))
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
            StoreQuery(
                pubsub_topic=cursor.pubsub_topic, start_time=cursor.sender_time,
                end_time=cursor.sender_time, cursor=after,
                limit=min(MAX_PAGE_SIZE, LEGACY_CURSOR_SCAN - scanned),
            )
        )  # fmt: skip
        for m in page.messages:
            if store_v2_digest(m.content_topic, m.payload) == cursor.digest:
                return m.message_hash
        scanned += len(page.messages)
        if page.cursor is None:
            raise LegacyCursorNotFound(
                "cursor not found: no stored message has this pubsubTopic, senderTime and digest"
            )
        after = page.cursor
    raise LegacyCursorNotFound(
        f"cursor not found among the first {LEGACY_CURSOR_SCAN} messages with this "
        "pubsubTopic and senderTime; page with cursors this server returned"
    )


def legacy_cursor_of(m: StoredMessage) -> LegacyCursor:
    """The legacy cursor naming ``m`` (store time = its timestamp)."""
    digest = store_v2_digest(m.content_topic, m.payload)
    return LegacyCursor(m.pubsub_topic, m.timestamp, m.timestamp, digest)


def run_legacy_page(
    store: MessageStore, query: LegacyQuery, known: LegacyCursorCache | None = None
) -> LegacyPage:
    """One legacy page; its cursor is remembered in ``known``. Raises
    :class:`LegacyCursorNotFound` for a cursor that names no stored message."""
    cursor_hash = None
    if query.cursor is not None:
        cursor_hash = find_legacy_cursor(store, query.cursor, known)
    page = store.query(
        StoreQuery(
            pubsub_topic=query.pubsub_topic, content_topics=query.content_topics,
            start_time=query.start_time, end_time=query.end_time, cursor=cursor_hash,
            ascending=query.ascending, limit=query.page_size,
        )
    )  # fmt: skip
    next_cursor = None
    if page.cursor is not None:
        last = next(m for m in page.messages if m.message_hash == page.cursor)
        next_cursor = legacy_cursor_of(last)
        if known is not None:
            known.put(legacy_key(next_cursor), last.message_hash)
    return LegacyPage(page.messages, next_cursor)
