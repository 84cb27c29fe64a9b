"""What the store's tests share: the rows a query should return, by a plain filter and sort."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any


def expected_hashes(
    rows: Iterable[Any],
    *,
    pubsub: str | None = None,
    topics: Sequence[str] = (),
    start: int | None = None,
    end: int | None = None,
    hashes: Sequence[bytes] = (),
    ascending: bool = True,
) -> list[bytes]:
    """The message hashes of ``rows`` a store query with these filters returns, in
    (timestamp, hash) order: the model both the store and its protocol are checked against."""
    sel = [
        r
        for r in rows
        if (pubsub is None or r.pubsub_topic == pubsub)
        and (not topics or r.content_topic in topics)
        and (not hashes or r.message_hash in hashes)
        and (start is None or r.timestamp >= start)
        and (end is None or r.timestamp <= end)
    ]
    sel.sort(key=lambda r: (r.timestamp, r.message_hash), reverse=not ascending)
    return [r.message_hash for r in sel]
