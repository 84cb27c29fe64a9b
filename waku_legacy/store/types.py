"""What the v2 store holds and answers: rows, query pages, errors, the store interface."""

from __future__ import annotations

import abc
import contextlib
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import KW_ONLY, dataclass, field
from typing import NamedTuple

from waku_legacy.errors import WakuLegacyError

__all__ = [
    "DEFAULT_PAGE_SIZE",
    "MAX_PAGE_SIZE",
    "CursorNotFound",
    "InvalidQuery",
    "MessageStore",
    "QueryPage",
    "StoreError",
    "StoreQuery",
    "StoreUnavailable",
    "StoredMessage",
    "V1EnvelopeQuery",
    "WireMessage",
    "WirePage",
]

DEFAULT_PAGE_SIZE = 20
MAX_PAGE_SIZE = 100
HASH_SIZE = 32
V1_CURSOR_SIZE = 36  # a status-go DB key without its topic: sent time + envelope hash


class StoreError(WakuLegacyError):
    """The v2 store cannot be opened, written or queried as asked."""


class StoreUnavailable(StoreError):
    """The store cannot be reached now (connection lost, server down, file locked or
    gone), as opposed to a query it refused: worth retrying later. The connection was
    dropped; a later call opens a new one (:mod:`waku_legacy.store.reconnect`)."""


class CursorNotFound(StoreError):
    """A query cursor (a message hash) that the store does not hold."""


class InvalidQuery(StoreError):
    """A query no backend can answer as asked (a topic no store can hold, a bad limit or
    hash): refused the same way by every backend, before it reaches the database."""


def _check_topic(kind: str, topic: str) -> None:
    """Refuse a topic no store can hold (PostgreSQL text cannot hold NUL)."""
    reason = None
    if "\x00" in topic:
        reason = "holds a NUL character"
    else:
        try:
            topic.encode("utf-8")
        except UnicodeEncodeError:
            reason = "is not encodable as UTF-8"
    if reason is not None:
        raise InvalidQuery(f"the {kind} {topic[:80]!r} {reason}")


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


#: A message as a store protocol answer writes it, in :class:`StoredMessage`'s first seven
#: fields' order: (hash, pubsub topic, content topic, payload, version, timestamp, meta).
#: The topics may be their stored UTF-8 bytes (not decoded: the protobuf answer writes
#: bytes) and the payload None (an SQL NULL); an SQL backend hands its rows over as they
#: are read, without an object per message.
WireMessage = tuple[bytes, str | bytes, str | bytes, bytes | None, int, int, bytes | None]


@dataclass(frozen=True, slots=True)
class WirePage:
    """:class:`QueryPage` with each message a :data:`WireMessage`."""

    messages: Sequence[WireMessage] = ()
    cursor: bytes | None = None


@dataclass(frozen=True, slots=True)
class StoreQuery:
    """One page request to the v2 store, nwaku's way: pages ordered by (timestamp, message
    hash); times in ns, inclusive; the cursor is a message hash, exclusive; without
    ``include_data`` only ``message_hash``, ``pubsub_topic`` and ``timestamp`` are
    meaningful in the returned rows.

    Any sequence is accepted for the topics and hashes (kept as tuples). A query no backend
    can answer (a topic no store can hold, a bad page size or hash) is refused by
    :meth:`check` when a store runs it."""

    pubsub_topic: str | None = None
    content_topics: Sequence[str] = ()
    start_time: int | None = None
    end_time: int | None = None
    hashes: Sequence[bytes] = ()
    cursor: bytes | None = None
    ascending: bool = True
    limit: int = DEFAULT_PAGE_SIZE
    include_data: bool = True

    def __post_init__(self) -> None:
        # A frozen value: tuples, whatever sequences the caller handed in (converted only
        # when they are not: a query is built for every page served; the backends read
        # each hash as bytes once, as they put it in the SQL).
        if type(self.content_topics) is not tuple:
            object.__setattr__(self, "content_topics", tuple(self.content_topics))
        if type(self.hashes) is not tuple:
            object.__setattr__(self, "hashes", tuple(self.hashes))
        if self.cursor is not None and type(self.cursor) is not bytes:
            object.__setattr__(self, "cursor", bytes(self.cursor))

    def check(self) -> None:
        """Refuse (:class:`InvalidQuery`) what no backend can answer; every backend calls
        this first, so SQLite and PostgreSQL refuse the same queries with the same error."""
        cursor = self.cursor
        if cursor is not None and len(cursor) != HASH_SIZE:
            raise InvalidQuery(
                f"a store cursor is a {HASH_SIZE}-byte message hash, got {len(cursor)}"
            )
        if cursor is not None and cursor == bytes(HASH_SIZE):
            raise InvalidQuery("an all-zero store cursor is not a message hash")
        if self.limit < 1:
            raise InvalidQuery(f"page size must be at least 1, got {self.limit}")
        for h in self.hashes:
            if len(h) != HASH_SIZE:
                raise InvalidQuery(f"a message hash is {HASH_SIZE} bytes, got {len(h)}")
        if self.pubsub_topic is not None:
            _check_topic("pubsub topic", self.pubsub_topic)
        for topic in self.content_topics:
            _check_topic("content topic", topic)


@dataclass(frozen=True, slots=True)
class V1EnvelopeQuery:
    """Stored v1 envelopes by status-go DB key: keys in ``[lower_key, upper_key]``, in
    DB-key order (ascending, or ``descending``), resuming strictly after (before, when
    descending) a 36-byte ``cursor``; ``topics`` filters on the key's 4-byte topic."""

    lower_key: bytes
    upper_key: bytes
    _: KW_ONLY
    topics: Sequence[bytes] = ()
    cursor: bytes | None = None
    limit: int = 1000
    descending: bool = False

    def check(self) -> None:
        """Refuse a cursor that is not a 36-byte v1 cursor (:class:`StoreError`)."""
        if self.cursor is not None and len(self.cursor) != V1_CURSOR_SIZE:
            raise StoreError(f"a v1 cursor is 36 bytes, got {len(self.cursor)}")


class MessageStore(abc.ABC):
    """A v2 message store in nwaku's schema (SQLite or PostgreSQL)."""

    url: str

    @abc.abstractmethod
    def insert_messages(
        self, rows: Iterable[StoredMessage | tuple[object, ...]], *, batch_size: int = 5000
    ) -> int:
        """Insert rows idempotently (existing hashes are left alone), committing every
        ``batch_size`` rows; returns how many rows were new."""

    @abc.abstractmethod
    def query(self, query: StoreQuery) -> QueryPage:
        """One page of ``query`` (see :class:`StoreQuery`); raises :class:`CursorNotFound`
        for a cursor that is no stored message."""

    def query_wire(self, query: StoreQuery) -> WirePage:
        """:meth:`query`'s page with each message a :data:`WireMessage` (for the store
        protocol's answer; a backend overrides it to skip building per-message objects)."""
        page = self.query(query)
        return WirePage([m[:7] for m in page.messages], page.cursor)

    def newest(self, content_topic: str, limit: int) -> list[StoredMessage]:
        """The newest ``limit`` messages of ``content_topic`` (for layers that read the
        store without building queries: the archive's clock evidence)."""
        query = StoreQuery(content_topics=[content_topic], ascending=False, limit=limit)
        return self.query(query).messages

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
    def query_v1_envelopes(self, query: V1EnvelopeQuery) -> list[tuple[bytes, bytes]]:
        """``(db_key, envelope)`` of the stored v1 envelopes ``query`` selects."""

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

    def ping(self) -> None:
        """Check that the store answers (raises :class:`StoreUnavailable` when not)."""
        self.count()

    @abc.abstractmethod
    def close(self) -> None: ...

    def make_read_only(self) -> None:
        """Refuse every write on this connection from now on (the bridge's worker
        processes only read). Stores that cannot say so keep writing."""
        return None  # the SQL stores override it

    def __enter__(self) -> MessageStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
