"""What a v2 store query returns, nwaku's way: the one implementation of the query semantics
that every front end (the REST API, the store protocol over libp2p) calls.

:func:`run_query` is nwaku's ``WakuArchive.findMessages`` (``waku/waku_archive/archive.nim``
at nwaku 7d1c6ab) over a :class:`~waku_legacy.store.types.MessageStore`: with a cursor, an
all-zero cursor and more than :data:`MAX_CONTENT_TOPICS` content topics are refused, a
cursor the store does not hold is the driver's ``cursor not found``; page sizes are the
caller's (nwaku clamps them to 1..100 before, see :func:`clamp_page_size`). A refusal is
a :class:`StoreQueryError` whose text is nwaku's ``$ArchiveError`` (``INVALID_QUERY: …`` /
``DRIVER_ERROR: …``), so each front end wraps it the way nwaku does (REST: 500
``error in handleSelfStoreRequest: BAD_RESPONSE: archive error: …``; store v3: 300
``BAD_RESPONSE: archive error: …``; legacy store: ``INVALID_CURSOR``).

Front ends may bound the work more than nwaku: ``topics_always_capped`` applies the
content-topic cap to queries without a cursor too (nwaku checks it only with a cursor; the
libp2p listener caps it always, since the store reads one indexed page per content topic).
"""

from __future__ import annotations

import enum

from waku_legacy.errors import WakuLegacyError
from waku_legacy.store.types import (
    DEFAULT_PAGE_SIZE,
    MAX_PAGE_SIZE,
    CursorNotFound,
    MessageStore,
    QueryPage,
    StoreQuery,
    WirePage,
)

__all__ = [
    "MAX_CONTENT_TOPICS",
    "StoreQueryError",
    "StoreQueryErrorKind",
    "clamp_page_size",
    "run_query",
    "run_wire_query",
]

MAX_CONTENT_TOPICS = 10  # nwaku waku_archive/archive.nim MaxContentTopicsPerQuery


class StoreQueryErrorKind(enum.Enum):
    """nwaku's ``ArchiveErrorKind`` (``waku_archive/common.nim``)."""

    DRIVER_ERROR = "DRIVER_ERROR"
    INVALID_QUERY = "INVALID_QUERY"


class StoreQueryError(WakuLegacyError):
    """A store query the archive refuses: nwaku's ``ArchiveError``, worded as its
    ``$ArchiveError`` (``"INVALID_QUERY: too many content topics"``)."""

    def __init__(self, kind: StoreQueryErrorKind, cause: str) -> None:
        self.kind = kind
        self.cause = cause
        super().__init__(f"{kind.value}: {cause}")


ZERO_CURSOR = "all zeroes cursor hash"
TOO_MANY_TOPICS = "too many content topics"
CURSOR_NOT_FOUND = "cursor not found"


def clamp_page_size(requested: int | None) -> int:
    """nwaku's page size: absent or 0 -> 20, above 100 -> 100 (an unsigned request)."""
    if not requested or requested <= 0:
        return DEFAULT_PAGE_SIZE
    return min(requested, MAX_PAGE_SIZE)


def check_query(query: StoreQuery, *, topics_always_capped: bool = False) -> None:
    """nwaku's archive checks before the driver runs (raises :class:`StoreQueryError`)."""
    if query.cursor is not None and query.cursor == bytes(32):
        raise StoreQueryError(StoreQueryErrorKind.INVALID_QUERY, ZERO_CURSOR)
    capped = topics_always_capped or query.cursor is not None
    if capped and len(query.content_topics) > MAX_CONTENT_TOPICS:
        raise StoreQueryError(StoreQueryErrorKind.INVALID_QUERY, TOO_MANY_TOPICS)


def run_query(
    store: MessageStore, query: StoreQuery, *, topics_always_capped: bool = False
) -> QueryPage:
    """One page of ``query`` as nwaku's archive answers it (raises :class:`StoreQueryError`
    for what nwaku refuses; :class:`~waku_legacy.store.types.InvalidQuery` and other
    :class:`~waku_legacy.store.types.StoreError` come from the store as they are)."""
    check_query(query, topics_always_capped=topics_always_capped)
    try:
        return store.query(query)
    except CursorNotFound:
        raise StoreQueryError(StoreQueryErrorKind.DRIVER_ERROR, CURSOR_NOT_FOUND) from None


def run_wire_query(
    store: MessageStore, query: StoreQuery, *, topics_always_capped: bool = False
) -> WirePage:
    """:func:`run_query` with the messages as the store's wire rows
    (:meth:`~waku_legacy.store.types.MessageStore.query_wire`: what a protobuf answer is
    written from, with no object per message)."""
    check_query(query, topics_always_capped=topics_always_capped)
    try:
        return store.query_wire(query)
    except CursorNotFound:
        raise StoreQueryError(StoreQueryErrorKind.DRIVER_ERROR, CURSOR_NOT_FOUND) from None
