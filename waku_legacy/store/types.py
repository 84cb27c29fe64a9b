"""What the v2 store holds and answers: rows, query pages, errors, the store interface."""

from __future__ import annotations

import abc
import contextlib
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import NamedTuple, TypeVar

from waku_legacy.errors import WakuLegacyError

__all__ = [
    "DEFAULT_PAGE_SIZE",
    "MAX_PAGE_SIZE",
    "CursorNotFound",
    "InvalidQuery",
    "MessageStore",
    "QueryPage",
    "StoreError",
    "StoredMessage",
]

R = TypeVar("R")  # a database row

DEFAULT_PAGE_SIZE = 20
MAX_PAGE_SIZE = 100
HASH_SIZE = 32


class StoreError(WakuLegacyError):
    """The v2 store cannot be opened, written or queried as asked."""


class CursorNotFound(StoreError):
    """A query cursor (a message hash) that the store does not hold."""


class InvalidQuery(StoreError):
    """A query no backend can answer as asked (a topic no store can hold, a bad limit or
    hash): refused the same way by every backend, before it reaches the database."""


def _bad_topic_reason(topic: str) -> str | None:
    """Why ``topic`` cannot be a stored topic (None when it can be)."""
    if "\x00" in topic:
        return "holds a NUL character"
    try:
        topic.encode("utf-8")
    except UnicodeEncodeError:
        return "is not encodable as UTF-8"
    return None


class StoredMessage(NamedTuple):
    """One v2 message as the store keeps it (nwaku's columns), plus, for a message that
    came from a Waku v1 envelope, the original envelope bytes and its status-go DB key.

    A NamedTuple so that plain tuples in this field order are accepted too (the migration
    streams millions of rows; building objects per row would cost more than the insert).
    """

    message_hash: bytes
    pubsub_topic: str
    content_topic: str
    payload: bytes
    version: int
    timestamp: int
    meta: bytes | None = None
    envelope: bytes | None = None
    db_key: bytes | None = None


@dataclass(frozen=True, slots=True)
class QueryPage:
    """One page of a store query, nwaku's way: messages always in chronological order
    ((timestamp, hash) ascending) whatever the direction; ``cursor`` is the hash of the
    last message of the page in query order, set only when more messages follow."""

    messages: list[StoredMessage] = field(default_factory=list)
    cursor: bytes | None = None


class MessageStore(abc.ABC):
    """A v2 message store in nwaku's schema (SQLite or PostgreSQL)."""

    url: str

    @abc.abstractmethod
    def insert_messages(
        self, rows: Iterable[StoredMessage | tuple], *, batch_size: int = 5000
    ) -> int:
        """Insert rows idempotently (existing hashes are left alone), committing every
        ``batch_size`` rows; returns how many rows were new."""

    @abc.abstractmethod
    def query(
        self,
        *,
        pubsub_topic: str | None = None,
        content_topics: Sequence[str] = (),
        start_time: int | None = None,
        end_time: int | None = None,
        hashes: Sequence[bytes] = (),
        cursor: bytes | None = None,
        ascending: bool = True,
        limit: int = DEFAULT_PAGE_SIZE,
        include_data: bool = True,
    ) -> QueryPage:
        """One page ordered by (timestamp, message hash); times in ns, inclusive; the
        cursor is a message hash, exclusive. Without ``include_data`` only
        ``message_hash`` is meaningful in the returned rows."""

    @abc.abstractmethod
    def get_message(self, message_hash: bytes) -> StoredMessage | None: ...

    @abc.abstractmethod
    def get_envelope(self, message_hash: bytes) -> bytes | None:
        """The original v1 envelope bytes of a message that came from one."""

    @abc.abstractmethod
    def get_envelopes(self, message_hashes: Sequence[bytes]) -> dict[bytes, bytes]:
        """The original v1 envelopes of those of ``message_hashes`` that came from one, in
        one query (callers pass a page's hashes, at most a few thousand)."""

    @abc.abstractmethod
    def query_v1_envelopes(
        self,
        lower_key: bytes,
        upper_key: bytes,
        *,
        topics: Sequence[bytes] = (),
        cursor: bytes | None = None,
        limit: int = 1000,
        descending: bool = False,
    ) -> list[tuple[bytes, bytes]]:
        """``(db_key, envelope)`` of stored v1 envelopes with status-go DB keys in
        ``[lower_key, upper_key]``, in DB-key order (ascending, or descending), resuming
        strictly after (before, when descending) a 36-byte cursor; ``topics`` filters on
        the key's 4-byte topic."""

    @contextlib.contextmanager
    def bulk_load(self) -> Iterator[None]:
        """A hint that many inserts follow (the migration's load). Stores may defer index
        maintenance inside it; queries stay correct after it ends, and a store killed inside
        it is repaired when next opened."""
        yield

    @abc.abstractmethod
    def count(self) -> int: ...

    @abc.abstractmethod
    def count_envelopes(self) -> int: ...

    @abc.abstractmethod
    def close(self) -> None: ...

    def __enter__(self) -> MessageStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def check_query(
    *,
    cursor: bytes | None,
    limit: int,
    hashes: Sequence[bytes],
    pubsub_topic: str | None = None,
    content_topics: Sequence[str] = (),
) -> None:
    """Refuse (:class:`InvalidQuery`) what no backend can answer; every backend calls this
    first, so SQLite and PostgreSQL refuse the same queries with the same error."""
    if cursor is not None and len(cursor) != HASH_SIZE:
        raise InvalidQuery(
            f"a store cursor is a {HASH_SIZE}-byte message hash, got {len(cursor)}"
        )
    if cursor is not None and cursor == bytes(HASH_SIZE):
        raise InvalidQuery("an all-zero store cursor is not a message hash")
    if limit < 1:
        raise InvalidQuery(f"page size must be at least 1, got {limit}")
    for h in hashes:
        if len(h) != HASH_SIZE:
            raise InvalidQuery(f"a message hash is {HASH_SIZE} bytes, got {len(h)}")
    for kind, topic in (
        *((("pubsub topic", pubsub_topic),) if pubsub_topic is not None else ()),
        *(("content topic", t) for t in content_topics),
    ):
        reason = _bad_topic_reason(topic)
        if reason is not None:
            raise InvalidQuery(f"the {kind} {topic[:80]!r} {reason}")


def content_topic_reads(content_topics: Sequence[str], hashes: Sequence[bytes]) -> list[list[str]]:
    """The content topics of each indexed read a page takes (``[[]]``: one read, no topic
    filter). One ordered read of at most a page per content topic, merged by
    :func:`merge_reads`, keeps a page's work bounded: an ``IN``/``ANY`` list would make the
    database collect and sort every message of the topics. With ``hashes`` the hashes bound
    the work already, so the topics go in one read."""
    if not content_topics:
        return [[]]
    topics = list(dict.fromkeys(content_topics))
    return [topics] if hashes else [[t] for t in topics]


def merge_reads(
    rows: list[R], *, ascending: bool, limit: int, sort_key: Callable[[R], object]
) -> list[R]:
    """Rows of several ordered reads in query order, cut to ``limit + 1`` (one more than a
    page tells whether a next page exists)."""
    rows.sort(key=sort_key, reverse=not ascending)
    del rows[limit + 1 :]
    return rows


def page_of_rows(
    rows: Sequence[R], *, limit: int, ascending: bool, message: Callable[[R], StoredMessage]
) -> QueryPage:
    """The page of ``limit + 1``-or-fewer rows in query order: messages chronological, the
    cursor the last one's hash when more follow (nwaku's paging)."""
    page = [message(r) for r in rows[:limit]]
    next_cursor = page[-1].message_hash if len(rows) > limit else None
    if not ascending:
        page.reverse()
    return QueryPage(page, next_cursor)


def envelope_cursor_bounds(
    lower_key: bytes, upper_key: bytes, cursor: bytes | None, descending: bool
) -> tuple[bytes, bytes, bool]:
    """DB-key bounds after applying a 36-byte cursor: ``(low, high, high_inclusive)``."""
    if cursor is not None and len(cursor) != 36:
        raise StoreError(f"a v1 cursor is 36 bytes, got {len(cursor)}")
    low, high, high_inclusive = bytes(lower_key), bytes(upper_key), True
    if cursor:
        if descending:
            if cursor <= high:
                high, high_inclusive = bytes(cursor), False
        else:
            # Keys starting with the cursor sort below cursor || ff ff ff ff 00.
            low = max(low, bytes(cursor) + b"\xff\xff\xff\xff\x00")
    return low, high, high_inclusive
