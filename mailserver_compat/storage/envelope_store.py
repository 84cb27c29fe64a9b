"""Where the v1 mailserver reads history from: one query interface, several backends.

:class:`EnvelopeStore` is what the mailserver
(:mod:`~waku_legacy.mailserver_compat.server.core`) needs: one page of envelopes sent in
``[lower, upper]`` (seconds, inclusive) that match the request's
topics (or, without topics, its bloom), at most ``limit`` of them, resuming after a
36-byte cursor, and the cursor of the next page. Paging follows status-go's
``processRequestInBundles``: when a page reaches ``limit`` its next cursor is the last
envelope's cursor (even if nothing follows: the client then gets one empty last page);
a page short of the limit ends with an empty cursor.

Every query's work is bounded by ``max_scan``: a backend examines at most that many stored
rows (matching or not) and, when it stops there, answers the rows found so far with the
cursor of the last row examined (a partial page, ``StorePage.partial``), so a client that
follows cursors, as status-go's does, simply continues. Without the bound a bloom-only
request over a sparse topic read the whole table for one page.

Order is the backend's status-go order: ascending DB key for LevelDB (status-go's default
backend), the in-memory store and the v2 store; descending ``id`` for status-go's
PostgreSQL backend (``ORDER BY id DESC``, ``id < cursor``), exactly what a status-go
mailserver on that database answered.

Backends: :class:`MemoryEnvelopeStore` (tests, dumps), :class:`LevelDBSource` and
:class:`LegacyPostgresSource` (the legacy mailserver databases, via
:mod:`~waku_legacy.mailserver_compat.storage`), :class:`V2StoreSource` (the v2 store: messages
that came from v1 envelopes are served as those original envelopes, messages that started on
v2 as the envelopes the v1<->v2 bridge built for them).
:func:`open_envelope_store` picks one from a URL.
"""

from __future__ import annotations

import bisect
import contextlib
import dataclasses
import heapq
import threading
from collections.abc import Generator, Iterable, Iterator, Sequence
from dataclasses import KW_ONLY, dataclass, field
from typing import Protocol

from waku_legacy.errors import ConfigError, WakuLegacyError
from waku_legacy.identity.topics import is_v1_content_topic, v1_topic_to_content_topic
from waku_legacy.mailserver_compat.wire.bloom import bloom_matches, topic_to_bloom
from waku_legacy.mailserver_compat.wire.cursor import (
    CURSOR_SIZE,
    DB_KEY_SIZE,
    check_cursor,
    db_key_bound,
    db_key_for,
)
from waku_legacy.mailserver_compat.wire.envelope import Envelope
from waku_legacy.store import MessageStore, StoredMessage, StoreQuery, V1EnvelopeQuery

__all__ = [
    "EnvelopeQuery",
    "EnvelopeStore",
    "LegacyPostgresSource",
    "LevelDBSource",
    "MemoryEnvelopeStore",
    "StorePage",
    "TopicFilter",
    "V2StoreSource",
    "open_envelope_store",
]

_NANOS = 10**9
_AFTER_CURSOR = b"\xff\xff\xff\xff\x00"  # every 40-byte key starting with a cursor sorts below


@dataclass(frozen=True, slots=True)
class StorePage:
    """``envelopes``: ``(db_key, envelope_rlp)`` in the store's order; ``next_cursor``
    empty when the query is exhausted; ``partial``: the scan bound ended the page early."""

    envelopes: list[tuple[bytes, bytes]] = field(default_factory=list)
    next_cursor: bytes = b""
    partial: bool = False


@dataclass(frozen=True, slots=True)
class EnvelopeQuery:
    """One page request to an envelope store: envelopes sent in ``[lower, upper]`` (seconds,
    inclusive) that match ``topics`` (when non-empty, instead of ``bloom``; neither: every
    envelope), at most ``limit`` of them, resuming after a 36-byte ``cursor``, at most
    ``max_scan`` rows examined (None: no bound)."""

    lower: int
    upper: int
    _: KW_ONLY
    limit: int
    topics: Sequence[bytes] = ()
    bloom: bytes | None = None
    cursor: bytes = b""
    max_scan: int | None = None

    def check(self) -> None:
        """Refuse a malformed cursor (every backend calls this first)."""
        check_cursor(self.cursor)


class EnvelopeStore(Protocol):
    def query(self, query: EnvelopeQuery) -> StorePage:
        """One page of ``query`` (see :class:`EnvelopeQuery`)."""
        ...


class TopicFilter:
    """status-go's envelope selection: topics beat the bloom; results cached per topic."""

    __slots__ = ("_bloom", "_cache", "_topics")

    def __init__(self, topics: Sequence[bytes] = (), bloom: bytes | None = None) -> None:
        self._topics = frozenset(topics) if topics else None
        self._bloom = None if self._topics is not None else bloom
        self._cache: dict[bytes, bool] = {}

    def __call__(self, topic: bytes) -> bool:
        if self._topics is not None:
            return topic in self._topics
        if self._bloom is None:
            return True
        hit = self._cache.get(topic)
        if hit is None:
            hit = self._cache[topic] = bloom_matches(self._bloom, topic_to_bloom(topic))
        return hit


def _topic_of(key: bytes, envelope_rlp: bytes) -> bytes:
    if len(key) == DB_KEY_SIZE:
        return key[CURSOR_SIZE:]
    return Envelope.decode(envelope_rlp).topic  # old 36-byte keys carry no topic


def _before(key: bytes) -> bytes:
    """The cursor after which a query resumes at ``key`` (a second's first key)."""
    second = int.from_bytes(key[:4], "big")
    return (second - 1).to_bytes(4, "big") + b"\xff" * (CURSOR_SIZE - 4)


def page_from(
    rows: Iterable[tuple[bytes, bytes | None]],
    wanted: TopicFilter,
    limit: int,
    max_scan: int | None = None,
) -> StorePage:
    """Take up to ``limit`` matching rows from an ordered row stream (status-go paging),
    examining at most ``max_scan`` rows (then a partial page ending at the last one). A
    row ``(key, None)`` is a source's scan bound: the page ends there, partial, with a
    cursor that resumes at ``key``; a row ``(key, b"")`` is a watermark, skipped."""
    page: list[tuple[bytes, bytes]] = []
    scanned = 0
    for key, value in rows:
        if not value:
            if value is None:  # a source's scan bound: nothing at or after ``key`` was read
                return StorePage(page, _before(key), partial=True)
            continue  # a source's watermark (nothing below ``key`` is still to come)
        scanned += 1
        if wanted(_topic_of(key, value)):
            page.append((key, value))
            if len(page) >= limit:
                return StorePage(page, key[:CURSOR_SIZE])
        if max_scan is not None and scanned >= max_scan:
            return StorePage(page, key[:CURSOR_SIZE], partial=True)
    return StorePage(page, b"")


def page_of(rows: Iterable[tuple[bytes, bytes | None]], query: EnvelopeQuery) -> StorePage:
    """:func:`page_from` with the selection, limit and scan bound of ``query``."""
    return page_from(rows, TopicFilter(query.topics, query.bloom), query.limit, query.max_scan)


def _close(rows: Iterator[object]) -> None:
    """Close a row stream that a generator serves (it holds a database iterator open),
    even when its source types it as a plain Iterator."""
    close = getattr(rows, "close", None)
    if close is not None:
        close()


def _upper_bound(upper: int) -> bytes:
    return db_key_bound(upper + 1)


class MemoryEnvelopeStore:
    """Envelopes in a sorted in-memory list, LevelDB semantics (ascending DB key)."""

    def __init__(self, envelopes: Iterable[bytes] = ()) -> None:
        self._keys: list[bytes] = []
        self._values: dict[bytes, bytes] = {}
        self.add_many(envelopes)

    def __len__(self) -> int:
        return len(self._keys)

    def add(self, envelope_rlp: bytes) -> bytes:
        """Store an envelope under its DB key (idempotent); returns the key."""
        key = db_key_for(Envelope.decode(envelope_rlp)).encode()
        if key not in self._values:
            bisect.insort(self._keys, key)
            self._values[key] = bytes(envelope_rlp)
        return key

    def add_many(self, envelopes: Iterable[bytes]) -> int:
        fresh = []
        for raw in envelopes:
            key = db_key_for(Envelope.decode(raw)).encode()
            if key not in self._values:
                self._values[key] = bytes(raw)
                fresh.append(key)
        if fresh:
            self._keys = sorted([*self._keys, *fresh])
        return len(fresh)

    def scan(self, start: bytes, stop: bytes) -> Iterator[tuple[bytes, bytes]]:
        keys, values = self._keys, self._values
        for index in range(bisect.bisect_left(keys, start), len(keys)):
            key = keys[index]
            if key >= stop:
                return
            yield key, values[key]

    def query(self, query: EnvelopeQuery) -> StorePage:
        query.check()
        start = db_key_bound(query.lower)
        if query.cursor:
            start = max(start, query.cursor + _AFTER_CURSOR)
        rows = self.scan(start, _upper_bound(query.upper))
        return page_of(rows, query)


class LevelDBSource:
    """A status-go LevelDB mailserver database (ascending, resume after the cursor)."""

    def __init__(self, path: str) -> None:
        from waku_legacy.mailserver_compat.storage.leveldb import LevelDBEnvelopeStore

        self.db = LevelDBEnvelopeStore(path)

    def query(self, query: EnvelopeQuery) -> StorePage:
        query.check()
        rows = self.db.query(query.lower, query.upper, cursor=query.cursor or None)
        try:
            return page_of(rows, query)
        finally:
            _close(rows)

    def close(self) -> None:
        self.db.close()


class LegacyPostgresSource:
    """status-go's PostgreSQL mailserver database, served in its own order (newest first,
    ``id < cursor``) with its SQL-side topic/bloom filtering."""

    def __init__(self, dsn: str) -> None:
        from waku_legacy.mailserver_compat.storage.postgres import PostgresEnvelopeStore

        self.db = PostgresEnvelopeStore(dsn)

    def query(self, query: EnvelopeQuery) -> StorePage:
        query.check()
        cursor, topics, limit = query.cursor or None, query.topics, query.limit
        # status-go's upper DB key is NewDBKey(upper + 1, ...) compared with id <= upper.
        lower_key, upper_key = db_key_bound(query.lower), _upper_bound(query.upper)
        # The scan bound: the max_scan-th id of the range (newest first); rows below it are
        # left for the next page.
        boundary = None
        if query.max_scan is not None:
            boundary = self.db.scan_boundary(
                lower_key, upper_key, cursor=cursor, max_scan=query.max_scan
            )
        rows = self.db.query(
            max(lower_key, boundary) if boundary is not None else lower_key,
            upper_key,
            cursor=cursor,
            bloom=None if topics else query.bloom,
            topics=list(topics) or None,
            limit=limit,
        )
        if len(rows) >= limit:
            return StorePage(rows, rows[-1][0][:CURSOR_SIZE])
        if boundary is not None:
            return StorePage(rows, boundary[:CURSOR_SIZE], partial=True)
        return StorePage(rows, b"")

    def close(self) -> None:
        self.db.close()


class V2StoreSource:
    """The v2 message store, as a v1 mailserver's history, ascending by DB key.

    Two kinds of stored message reach v1 clients:

    - messages that came from v1 envelopes (``/waku/1/…/rfc26`` content topics) are kept
      with their original envelope and status-go DB key, and are served as those envelopes;
    - messages that started on v2 (an rfc26 content topic, payload version 1, no original
      envelope) are served as the envelope the v1<->v2 bridge posted for them
      (:func:`~waku_legacy.mailserver_compat.wire.convert.bridged_history_envelope`), so a v1
      member sees the same conversation as a v2 member. Other v2 messages (other content
      topics, payload versions 0 and 2) mean nothing to a v1 node and are left out.

    Both streams are merged by DB key. The v2-origin stream reads the store's messages in
    (timestamp, hash) order and sorts each second's envelopes by DB key; with ``max_scan``
    it reads about that many stored messages (always whole seconds) and the page then ends,
    partial, with a cursor after the last second it read completely.
    """

    def __init__(self, store: MessageStore, *, batch: int = 2000, cache_size: int = 4096) -> None:
        self.store = store
        self.batch = batch
        self.cache_size = cache_size
        self._cache: dict[bytes, tuple[bytes, bytes] | None] = {}
        self._lock = threading.Lock()

    def _rows(
        self, lower_key: bytes, upper_key: bytes, topics: Sequence[bytes], cursor: bytes
    ) -> Generator[tuple[bytes, bytes]]:
        query = V1EnvelopeQuery(
            lower_key, upper_key, topics=topics, cursor=cursor or None, limit=self.batch
        )
        while True:
            rows = self.store.query_v1_envelopes(query)
            yield from rows
            if len(rows) < self.batch:
                return
            query = dataclasses.replace(query, cursor=rows[-1][0][:CURSOR_SIZE])

    def _needs_lookup(self, message: StoredMessage) -> bool:
        """Could ``message`` have come from an envelope (so the envelope table must say)?
        Only a v1-visible message stamped on a whole second (sent time * 10**9) can."""
        from waku_legacy.mailserver_compat.wire.convert import PAYLOAD_VERSION_WAKU1

        return (
            message.version == PAYLOAD_VERSION_WAKU1
            and message.timestamp % _NANOS == 0
            and is_v1_content_topic(message.content_topic)
        )

    def _bridged(
        self, message: StoredMessage, has_envelope: bool | None
    ) -> tuple[bytes, bytes] | None:
        """``(db_key, envelope)`` of a v2-origin message, None for one v1 cannot see or one
        that came from an envelope (the other stream serves it). ``has_envelope``: what the
        page's lookup said (None: not looked up, e.g. cached then, evicted since)."""
        from waku_legacy.mailserver_compat.wire.convert import (
            PAYLOAD_VERSION_WAKU1,
            bridged_history_envelope,
        )

        digest = bytes(message.message_hash)
        with self._lock:
            if digest in self._cache:
                return self._cache[digest]
        row: tuple[bytes, bytes] | None = None
        if has_envelope is None and self._needs_lookup(message):
            has_envelope = self.store.get_envelope(digest) is not None
        if (
            message.version == PAYLOAD_VERSION_WAKU1
            and is_v1_content_topic(message.content_topic)
            and not has_envelope
        ):
            try:
                envelope = bridged_history_envelope(
                    content_topic=message.content_topic,
                    payload=message.payload,
                    version=message.version,
                    timestamp=message.timestamp,
                )
            except WakuLegacyError:
                envelope = None
            if envelope is not None:
                row = (db_key_for(envelope).encode(), envelope.encode())
        with self._lock:  # the bridge queries one source from several threads
            if len(self._cache) >= self.cache_size:
                self._cache.pop(next(iter(self._cache)))
            self._cache[digest] = row
        return row

    def _v2_origin(
        self,
        start_key: bytes,
        upper_key: bytes,
        topics: Sequence[bytes],
        max_scan: int | None,
        batch: int,
    ) -> Generator[tuple[bytes, bytes | None]]:
        """v2-origin envelopes with keys in ``[start_key, upper_key]`` in DB-key order;
        ends with ``(db_key_bound(s), None)`` when the scan bound stopped it before second
        ``s``."""
        first = int.from_bytes(start_key[:4], "big")
        last = int.from_bytes(upper_key[:4], "big")
        second: int | None = None
        group: list[tuple[bytes, bytes]] = []
        examined = 0

        def flush() -> Iterator[tuple[bytes, bytes | None]]:
            group.sort()
            for key, raw in group:
                if start_key <= key <= upper_key:
                    yield key, raw
            group.clear()
            if second is not None:
                # A watermark: this second is done, so the merge can pass it without this
                # stream reading ahead (a second holding only v1-origin rows yields nothing).
                yield second.to_bytes(4, "big") + b"\xff" * (DB_KEY_SIZE - 4), b""

        query = StoreQuery(
            content_topics=[v1_topic_to_content_topic(t) for t in topics],
            start_time=first * _NANOS,
            end_time=last * _NANOS + _NANOS - 1,
            ascending=True,
            limit=batch,
        )
        while True:
            page = self.store.query(query)
            # One envelope-table lookup per store page, not one per message.
            with self._lock:
                unknown = [
                    bytes(m.message_hash) for m in page.messages
                    if bytes(m.message_hash) not in self._cache and self._needs_lookup(m)
                ]  # fmt: skip
            with_envelope = self.store.get_envelopes(unknown) if unknown else {}
            looked_up = set(unknown)
            for message in page.messages:
                sent = message.timestamp // _NANOS
                if sent != second:
                    yield from flush()
                    if max_scan is not None and examined >= max_scan and second is not None:
                        yield db_key_bound(sent), None
                        return
                    second = sent
                examined += 1
                digest = bytes(message.message_hash)
                row = self._bridged(
                    message, (digest in with_envelope) if digest in looked_up else None
                )
                if row is not None:
                    group.append(row)
            if page.cursor is None:
                break
            query = dataclasses.replace(query, cursor=page.cursor)
        yield from flush()

    def query(self, query: EnvelopeQuery) -> StorePage:
        query.check()
        upper, cursor = query.upper, query.cursor
        # The store's upper key bound is inclusive: the last key of second ``upper``.
        upper_key = (
            b"\xff" * DB_KEY_SIZE
            if upper >= 0xFFFFFFFF
            else upper.to_bytes(4, "big") + b"\xff" * (DB_KEY_SIZE - 4)
        )
        lower_key = db_key_bound(query.lower)
        start_key = max(lower_key, cursor + _AFTER_CURSOR) if cursor else lower_key
        topic_list = list(query.topics)
        original = self._rows(lower_key, upper_key, topic_list, cursor)
        # Store reads sized to the page: this stream only has to keep up with it.
        batch = max(16, min(self.batch, query.limit))
        bridged = self._v2_origin(start_key, upper_key, topic_list, query.max_scan, batch)
        merged = heapq.merge(original, bridged, key=lambda row: row[0])
        with contextlib.closing(original), contextlib.closing(bridged):
            return page_of(merged, query)

    def close(self) -> None:
        self.store.close()


def _path_of(url: str, scheme: str) -> str:
    rest = url[len(scheme) + 1 :]
    if rest.startswith("//"):
        rest = rest[2:]
        if not rest.startswith("/"):
            raise ConfigError(f"store URL {url!r}: use {scheme}:///absolute/path or {scheme}:path")
    if not rest:
        raise ConfigError(f"store URL {url!r} names no path")
    return rest


def open_envelope_store(url: str) -> EnvelopeStore:
    """Open the history a v1 mailserver serves.

    - ``leveldb:PATH`` (or ``leveldb:///abs/path``): a status-go LevelDB mailserver DB;
    - ``mailserver+postgresql://…``: a status-go PostgreSQL mailserver DB;
    - ``dump:PATH``: an envelope dump file, loaded into memory;
    - ``memory:``: an empty in-memory store;
    - anything else (``sqlite:…``, ``postgresql://…``, a file path): the v2 store.
    """
    url = url.strip()
    if url == "memory:":
        return MemoryEnvelopeStore()
    if url.startswith("leveldb:"):
        return LevelDBSource(_path_of(url, "leveldb"))
    if url.startswith(("mailserver+postgresql://", "mailserver+postgres://")):
        return LegacyPostgresSource(url[len("mailserver+") :])
    if url.startswith("dump:"):
        from waku_legacy.mailserver_compat.storage.dump import read_dump

        return MemoryEnvelopeStore(read_dump(_path_of(url, "dump")))
    from waku_legacy.store import open_store

    return V2StoreSource(open_store(url))
