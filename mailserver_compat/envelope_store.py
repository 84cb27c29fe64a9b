"""Where the v1 mailserver reads history from: one query interface, several backends.

:class:`EnvelopeStore` is what :mod:`~waku_legacy.mailserver_compat.mailserver` needs: one
page of envelopes sent in ``[lower, upper]`` (seconds, inclusive) that match the request's
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
that came from v1 envelopes are served as those original envelopes).
:func:`open_envelope_store` picks one from a URL.
"""

from __future__ import annotations

import bisect
import contextlib
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from waku_legacy.errors import ConfigError
from waku_legacy.mailserver_compat.bloom import bloom_matches, topic_to_bloom
from waku_legacy.mailserver_compat.cursor import (
    CURSOR_SIZE,
    DB_KEY_SIZE,
    check_cursor,
    db_key_bound,
    db_key_for,
)
from waku_legacy.mailserver_compat.envelope import Envelope

__all__ = [
    "EnvelopeStore",
    "LegacyPostgresSource",
    "LevelDBSource",
    "MemoryEnvelopeStore",
    "StorePage",
    "TopicFilter",
    "V2StoreSource",
    "open_envelope_store",
]

_AFTER_CURSOR = b"\xff\xff\xff\xff\x00"  # every 40-byte key starting with a cursor sorts below


@dataclass(frozen=True, slots=True)
class StorePage:
    """``envelopes``: ``(db_key, envelope_rlp)`` in the store's order; ``next_cursor``
    empty when the query is exhausted; ``partial``: the scan bound ended the page early."""

    envelopes: list[tuple[bytes, bytes]] = field(default_factory=list)
    next_cursor: bytes = b""
    partial: bool = False


class EnvelopeStore(Protocol):
    def query(
        self,
        lower: int,
        upper: int,
        *,
        topics: Sequence[bytes] = (),
        bloom: bytes | None = None,
        limit: int,
        cursor: bytes = b"",
        max_scan: int | None = None,
    ) -> StorePage:
        """One page; ``topics`` (when non-empty) filter instead of ``bloom``; neither
        means every envelope; at most ``max_scan`` rows examined (None: no bound)."""
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


def page_from(
    rows: Iterable[tuple[bytes, bytes]],
    wanted: TopicFilter,
    limit: int,
    max_scan: int | None = None,
) -> StorePage:
    """Take up to ``limit`` matching rows from an ordered row stream (status-go paging),
    examining at most ``max_scan`` rows (then a partial page ending at the last one)."""
    page: list[tuple[bytes, bytes]] = []
    scanned = 0
    for key, value in rows:
        scanned += 1
        if wanted(_topic_of(key, value)):
            page.append((key, value))
            if len(page) >= limit:
                return StorePage(page, key[:CURSOR_SIZE])
        if max_scan is not None and scanned >= max_scan:
            return StorePage(page, key[:CURSOR_SIZE], partial=True)
    return StorePage(page, b"")


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

    def query(
        self,
        lower: int,
        upper: int,
        *,
        topics: Sequence[bytes] = (),
        bloom: bytes | None = None,
        limit: int,
        cursor: bytes = b"",
        max_scan: int | None = None,
    ) -> StorePage:
        check_cursor(cursor)
        start = db_key_bound(lower)
        if cursor:
            start = max(start, cursor + _AFTER_CURSOR)
        rows = self.scan(start, _upper_bound(upper))
        return page_from(rows, TopicFilter(topics, bloom), limit, max_scan)


class LevelDBSource:
    """A status-go LevelDB mailserver database (ascending, resume after the cursor)."""

    def __init__(self, path: str) -> None:
        from waku_legacy.mailserver_compat.storage.leveldb import LevelDBEnvelopeStore

        self.db = LevelDBEnvelopeStore(path)

    def query(
        self,
        lower: int,
        upper: int,
        *,
        topics: Sequence[bytes] = (),
        bloom: bytes | None = None,
        limit: int,
        cursor: bytes = b"",
        max_scan: int | None = None,
    ) -> StorePage:
        check_cursor(cursor)
        with contextlib.closing(self.db.query(lower, upper, cursor=cursor or None)) as rows:
            return page_from(rows, TopicFilter(topics, bloom), limit, max_scan)

    def close(self) -> None:
        self.db.close()


class LegacyPostgresSource:
    """status-go's PostgreSQL mailserver database, served in its own order (newest first,
    ``id < cursor``) with its SQL-side topic/bloom filtering."""

    def __init__(self, dsn: str) -> None:
        from waku_legacy.mailserver_compat.storage.postgres import PostgresEnvelopeStore

        self.db = PostgresEnvelopeStore(dsn)

    def query(
        self,
        lower: int,
        upper: int,
        *,
        topics: Sequence[bytes] = (),
        bloom: bytes | None = None,
        limit: int,
        cursor: bytes = b"",
        max_scan: int | None = None,
    ) -> StorePage:
        check_cursor(cursor)
        # status-go's upper DB key is NewDBKey(upper + 1, ...) compared with id <= upper.
        lower_key, upper_key = db_key_bound(lower), _upper_bound(upper)
        # The scan bound: the max_scan-th id of the range (newest first); rows below it are
        # left for the next page.
        boundary = None
        if max_scan is not None:
            boundary = self.db.scan_boundary(
                lower_key, upper_key, cursor=cursor or None, max_scan=max_scan
            )
        rows = self.db.query(
            max(lower_key, boundary) if boundary is not None else lower_key,
            upper_key,
            cursor=cursor or None,
            bloom=None if topics else bloom,
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
    """The v2 message store: messages that came from v1 envelopes (``/waku/1/…/rfc26``
    content topics) are kept with their original envelope and status-go DB key, and are
    served back as those envelopes, ascending by DB key."""

    def __init__(self, store: object, *, batch: int = 2000) -> None:
        self.store = store
        self.batch = batch

    def _rows(
        self, lower_key: bytes, upper_key: bytes, topics: Sequence[bytes], cursor: bytes
    ) -> Iterator[tuple[bytes, bytes]]:
        while True:
            rows = self.store.query_v1_envelopes(  # type: ignore[attr-defined]
                lower_key, upper_key, topics=topics, cursor=cursor or None, limit=self.batch
            )
            yield from rows
            if len(rows) < self.batch:
                return
            cursor = rows[-1][0][:CURSOR_SIZE]

    def query(
        self,
        lower: int,
        upper: int,
        *,
        topics: Sequence[bytes] = (),
        bloom: bytes | None = None,
        limit: int,
        cursor: bytes = b"",
        max_scan: int | None = None,
    ) -> StorePage:
        check_cursor(cursor)
        # The store's upper key bound is inclusive: the last key of second ``upper``.
        upper_key = (
            b"\xff" * DB_KEY_SIZE
            if upper >= 0xFFFFFFFF
            else upper.to_bytes(4, "big") + b"\xff" * (DB_KEY_SIZE - 4)
        )
        rows = self._rows(db_key_bound(lower), upper_key, list(topics), cursor)
        with contextlib.closing(rows):
            return page_from(rows, TopicFilter(topics, bloom), limit, max_scan)

    def close(self) -> None:
        self.store.close()  # type: ignore[attr-defined]


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
