"""The v2 store's queries as SQL, once for both backends: a :class:`Dialect` says how a
backend spells what differs (placeholders, table names, how hashes and topics are stored,
lists of values); :func:`select_page` and :func:`v1_envelopes_select` build and run the same
statements on either.

Paging (nwaku's): rows ordered by (timestamp, message hash), the cursor a message hash,
exclusive; one ordered read of at most a page per content topic, merged here (an
``IN``/``ANY`` list over several topics would make the database collect and sort every
message of those topics).
"""

from __future__ import annotations

import abc
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar, cast

from waku_legacy.store.types import (
    CursorNotFound,
    MessageStore,
    QueryPage,
    StoredMessage,
    StoreQuery,
    V1EnvelopeQuery,
    WireMessage,
    WirePage,
)

__all__ = ["COLUMNS", "Dialect", "Fetch", "SqlMessageStore", "select_page", "v1_envelopes_select"]

COLUMNS = "messageHash, pubsubTopic, contentTopic, payload, version, timestamp, meta"
# A hash-only page's columns: the store protocol answers every hash with its pubsub topic.
HASH_ONLY_COLUMNS = "messageHash, timestamp, pubsubTopic"
_TIMESTAMP_AT = COLUMNS.split(", ").index("timestamp")

T = TypeVar("T")
Row = Sequence[Any]
# Runs one statement with its parameters and returns every row.
Fetch = Callable[[str, Sequence[object]], Sequence[Row]]


@dataclass(frozen=True, slots=True)
class Dialect:
    """What one backend's SQL and columns look like."""

    placeholder: str  # one parameter: "?" or "%s"
    messages: str  # nwaku's message table
    cursor_lookup: str  # the table a cursor's timestamp is read from
    hash_value: Callable[[bytes], object]  # a message hash (any bytes-like) as the column holds it
    topic_value: Callable[[str], object]  # a topic as the column holds it
    row_hash: Callable[[Any], Any]  # a row's hash column, comparable in hash order
    hash_bytes: Callable[[Any], bytes]  # a row's hash column as the hash
    message: Callable[[Row], StoredMessage]  # a row of COLUMNS
    hash_only: Callable[[Row], StoredMessage]  # a row of HASH_ONLY_COLUMNS, includeData off
    # a row of COLUMNS as a WireMessage (None: the row is one as it is read)
    wire: Callable[[Row], WireMessage] | None
    in_list: Callable[[str, Sequence[object]], tuple[str, list[object]]]  # column IN values
    key_slice: str  # the 4-byte topic inside a v1 DB key (bytes 37..40)
    max_in_list: int | None  # the most values one list parameter takes (None: no limit)


class SqlMessageStore(MessageStore):
    """The reading half of a store, the same SQL on every backend; a backend gives its
    :class:`Dialect`, runs statements (:meth:`_fetch`) and ends a read (:meth:`_end_read`)."""

    dialect: Dialect

    @abc.abstractmethod
    def _fetch(self, sql: str, params: Sequence[object]) -> Sequence[Row]:
        """Every row of one statement."""

    def _end_read(self) -> None:
        """Called after each read (PostgreSQL ends its read transaction)."""

    def _read(self, sql: str, params: Sequence[object]) -> Sequence[Row]:
        rows = self._fetch(sql, params)
        self._end_read()
        return rows

    def _page_read(self, select: Callable[[Dialect, Fetch, StoreQuery], T], query: StoreQuery) -> T:
        """``select`` run as one read (ended also when the cursor is not found)."""
        try:
            result = select(self.dialect, self._fetch, query)
        except CursorNotFound:
            self._end_read()
            raise
        self._end_read()
        return result

    def query(self, query: StoreQuery) -> QueryPage:
        return self._page_read(select_page, query)

    def query_wire(self, query: StoreQuery) -> WirePage:
        if not query.include_data:  # hash-only rows are not WireMessages: the objects' fields
            return super().query_wire(query)
        rows = self._page_read(select_rows, query)
        wire = self.dialect.wire
        page, last = chronological_page(
            cast(list[WireMessage], rows[: query.limit])
            if wire is None
            else [wire(r) for r in rows[: query.limit]],
            more=len(rows) > query.limit,
            ascending=query.ascending,
        )
        return WirePage(page, None if last is None else bytes(last[0]))

    def get_message(self, message_hash: bytes) -> StoredMessage | None:
        d = self.dialect
        rows = self._read(
            f"SELECT {COLUMNS} FROM {d.messages} WHERE messageHash = {d.placeholder}",
            [d.hash_value(message_hash)],
        )
        return d.message(rows[0]) if rows else None

    def get_envelope(self, message_hash: bytes) -> bytes | None:
        d = self.dialect
        rows = self._read(
            f"SELECT envelope FROM v1_envelopes WHERE messageHash = {d.placeholder}",
            [d.hash_value(message_hash)],
        )
        return bytes(rows[0][0]) if rows else None

    def get_envelopes(self, message_hashes: Sequence[bytes]) -> dict[bytes, bytes]:
        d = self.dialect
        wanted = list(dict.fromkeys(d.hash_value(h) for h in message_hashes))
        step = d.max_in_list or max(len(wanted), 1)
        found: dict[bytes, bytes] = {}
        for at in range(0, len(wanted), step):
            clause, values = d.in_list("messageHash", wanted[at : at + step])
            rows = self._fetch(
                f"SELECT messageHash, envelope FROM v1_envelopes WHERE {clause}", values
            )
            found.update((d.hash_bytes(h), bytes(e)) for h, e in rows)
        if wanted:
            self._end_read()
        return found

    def query_v1_envelopes(self, query: V1EnvelopeQuery) -> list[tuple[bytes, bytes]]:
        sql, params = v1_envelopes_select(self.dialect, query)
        return [(bytes(k), bytes(e)) for k, e in self._read(sql, params)]

    def count(self) -> int:
        return int(self._read(f"SELECT count(*) FROM {self.dialect.messages}", [])[0][0])

    def pubsub_topics(self, limit: int = 1024) -> list[str]:
        """The store's pubsub topics (at most ``limit``), by a skip scan over the pubsub
        index: one indexed lookup per topic, not a pass over every message."""
        d = self.dialect
        found: list[str] = []
        rows = self._fetch(f"SELECT min(pubsubTopic) FROM {d.messages}", [])
        while rows and rows[0][0] is not None and len(found) < limit:
            value = rows[0][0]
            found.append(bytes(value).decode("utf-8", "replace") if not isinstance(value, str)
                         else value)  # fmt: skip
            rows = self._fetch(
                f"SELECT min(pubsubTopic) FROM {d.messages} WHERE pubsubTopic > {d.placeholder}",
                [value],
            )
        self._end_read()
        return found

    def count_envelopes(self) -> int:
        return int(self._read("SELECT count(*) FROM v1_envelopes", [])[0][0])

    def ping(self) -> None:
        """Read one row's worth of the message table: raises when the store is unreachable."""
        self._read(f"SELECT 1 FROM {self.dialect.messages} LIMIT 1", [])


def select_page(dialect: Dialect, fetch: Fetch, query: StoreQuery) -> QueryPage:
    """One page of ``query``: timestamps in ns, inclusive; without ``include_data`` only
    ``message_hash``, ``pubsub_topic`` and ``timestamp`` are meaningful in the returned
    rows. Raises :class:`InvalidQuery` and
    :class:`CursorNotFound`."""
    rows = select_rows(dialect, fetch, query)
    message = dialect.message if query.include_data else dialect.hash_only
    return page_of_rows(rows, limit=query.limit, ascending=query.ascending, message=message)


def select_rows(dialect: Dialect, fetch: Fetch, query: StoreQuery) -> list[Row]:
    """The rows of :func:`select_page`, in query order, at most one more than a page (it
    tells whether a next page exists): of ``COLUMNS`` with ``include_data``, else of
    ``HASH_ONLY_COLUMNS``."""
    query.check()
    where, args = _filters(dialect, fetch, query)
    order = "ASC" if query.ascending else "DESC"
    # Several reads (hashes only) are merged, then the page's rows are read by hash.
    groups = content_topic_reads(query.content_topics, query.hashes)
    merged = len(groups) > 1
    whole = query.include_data and not merged
    columns = COLUMNS if whole else HASH_ONLY_COLUMNS
    ts_at = _TIMESTAMP_AT if whole else 1
    rows: list[Row] = []
    for group in groups:
        clauses, values = list(where), list(args)
        if group:
            clause, group_values = dialect.in_list(
                "contentTopic", [dialect.topic_value(t) for t in group]
            )
            clauses.append(clause)
            values += group_values
        sql = f"SELECT {columns} FROM {dialect.messages}"
        if clauses:
            sql += " WHERE " + " AND ".join(clauses)
        sql += f" ORDER BY timestamp {order}, messageHash {order} LIMIT {dialect.placeholder}"
        rows += fetch(sql, [*values, query.limit + 1])
    if merged:
        row_hash = dialect.row_hash
        rows.sort(key=lambda r: (r[ts_at], row_hash(r[0])), reverse=not query.ascending)
        del rows[query.limit + 1 :]  # one more than a page tells whether a next page exists
        if query.include_data and rows:
            clause, values = dialect.in_list("messageHash", [r[0] for r in rows])
            found = {
                row_hash(r[0]): r
                for r in fetch(f"SELECT {COLUMNS} FROM {dialect.messages} WHERE {clause}", values)
            }
            rows = [found[row_hash(r[0])] for r in rows if row_hash(r[0]) in found]
    return rows


def _filters(dialect: Dialect, fetch: Fetch, query: StoreQuery) -> tuple[list[str], list[object]]:
    """The WHERE clauses every read of a page shares, and their parameters."""
    p = dialect.placeholder
    where: list[str] = []
    args: list[object] = []
    if query.cursor is not None:
        cursor = dialect.hash_value(query.cursor)
        found = fetch(
            f"SELECT timestamp FROM {dialect.cursor_lookup} WHERE messageHash = {p}", [cursor]
        )
        if not found:
            raise CursorNotFound(f"cursor 0x{query.cursor.hex()} is not a stored message")
        comp = ">" if query.ascending else "<"
        where.append(f"(timestamp, messageHash) {comp} ({p}, {p})")
        args += [found[0][0], cursor]
    if query.pubsub_topic is not None:
        where.append(f"pubsubTopic = {p}")
        args.append(dialect.topic_value(query.pubsub_topic))
    if query.hashes:
        clause, values = dialect.in_list(
            "messageHash", [dialect.hash_value(h) for h in query.hashes]
        )
        where.append(clause)
        args += values
    if query.start_time is not None:
        where.append(f"timestamp >= {p}")
        args.append(query.start_time)
    if query.end_time is not None:
        where.append(f"timestamp <= {p}")
        args.append(query.end_time)
    return where, args


def content_topic_reads(content_topics: Sequence[str], hashes: Sequence[bytes]) -> list[list[str]]:
    """The content topics of each indexed read a page takes (``[[]]``: one read, no topic
    filter): one ordered read of at most a page per content topic keeps a page's work
    bounded. With ``hashes`` the hashes bound the work already, so the topics go in one
    read."""
    if not content_topics:
        return [[]]
    topics = list(dict.fromkeys(content_topics))
    return [topics] if hashes else [[t] for t in topics]


def page_of_rows(
    rows: Sequence[Row], *, limit: int, ascending: bool, message: Callable[[Row], StoredMessage]
) -> QueryPage:
    """The page of ``limit + 1``-or-fewer rows in query order: messages chronological, the
    cursor the last one's hash when more follow (nwaku's paging)."""
    page, last = chronological_page(
        [message(r) for r in rows[:limit]], more=len(rows) > limit, ascending=ascending
    )
    return QueryPage(page, None if last is None else last.message_hash)


def chronological_page(page: list[T], *, more: bool, ascending: bool) -> tuple[list[T], T | None]:
    """A page's messages in query order (``more``: further ones follow) -> the same list in
    chronological order, and its last message in query order when more follow, whose hash
    is nwaku's cursor: the paging rule of :func:`page_of_rows` and ``query_wire`` alike."""
    last = page[-1] if more else None
    if not ascending:
        page.reverse()
    return page, last


def v1_envelopes_select(dialect: Dialect, query: V1EnvelopeQuery) -> tuple[str, list[object]]:
    """The statement of :meth:`MessageStore.query_v1_envelopes` and its parameters."""
    p = dialect.placeholder
    low, high, high_inclusive = _envelope_cursor_bounds(query)
    where = [f"dbKey >= {p}", f"dbKey <= {p}" if high_inclusive else f"dbKey < {p}"]
    args: list[object] = [low, high]
    if query.topics:
        clause, values = dialect.in_list(dialect.key_slice, [bytes(t) for t in query.topics])
        where.append(clause)
        args += values
    order = "DESC" if query.descending else "ASC"
    args.append(query.limit)
    sql = (
        f"SELECT dbKey, envelope FROM v1_envelopes WHERE {' AND '.join(where)} "
        f"ORDER BY dbKey {order} LIMIT {p}"
    )
    return sql, args


def _envelope_cursor_bounds(query: V1EnvelopeQuery) -> tuple[bytes, bytes, bool]:
    """DB-key bounds after applying a 36-byte cursor: ``(low, high, high_inclusive)``."""
    query.check()
    cursor = query.cursor
    low, high, high_inclusive = bytes(query.lower_key), bytes(query.upper_key), True
    if cursor:
        if query.descending:
            if cursor <= high:
                high, high_inclusive = bytes(cursor), False
        else:
            # Keys starting with the cursor sort below cursor || ff ff ff ff 00.
            low = max(low, bytes(cursor) + b"\xff\xff\xff\xff\x00")
    return low, high, high_inclusive
