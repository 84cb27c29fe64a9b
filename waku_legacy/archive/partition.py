"""Which archives to build: status-go's 7-day partition rules, as pure functions.

status-go (``protocol/communities/manager_archive_file.go``, createHistoryArchiveTorrent):

- Windows start at the last archive end date or, when none is recorded, at the oldest message;
  they advance in 7-day steps; the last one is clamped to ``now``; a window holds the messages
  with ``from <= timestamp < to`` (seconds); windows without messages are skipped.
- Inside a window, messages are cut into chunks whose ``len(payload) + len(sig)`` sum stays at
  or below 30,000,000 bytes; each chunk is its own archive with the window's from/to. A message
  that alone exceeds the limit is dropped (and a window holding only such messages still yields
  one empty archive, as status-go does).
- Afterwards the recorded end date is the end of the last window (``now``), or the start when
  the start is not before ``now``.

Messages are ordered by (timestamp, hash) so that any input order gives the same archives;
duplicate hashes are kept once (status-go's message table is keyed by hash).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Generic, Protocol, TypeVar

from waku_legacy.errors import ConfigError

__all__ = [
    "MAX_ARCHIVE_BYTES",
    "WEEK_SECONDS",
    "ArchivePlan",
    "PlannedArchive",
    "Window",
    "plan_archives",
    "plan_windows",
    "split_by_size",
    "window_index",
    "window_start",
]

WEEK_SECONDS = 7 * 24 * 60 * 60
MAX_ARCHIVE_BYTES = 30_000_000


class _Plannable(Protocol):
    @property
    def timestamp(self) -> int: ...
    @property
    def hash(self) -> bytes: ...
    @property
    def payload(self) -> bytes: ...
    @property
    def sig(self) -> bytes: ...


T = TypeVar("T", bound=_Plannable)


@dataclass(frozen=True, slots=True, order=True)
class Window:
    """Half-open time range ``[start, end)`` in seconds."""

    start: int
    end: int

    def contains(self, timestamp: int) -> bool:
        return self.start <= timestamp < self.end


def window_start(oldest_timestamp: int | None, last_end: int | None) -> int | None:
    """Where the next windows start: the last archive end, else the oldest message."""
    if last_end:  # status-go treats a stored 0 as "none"
        return last_end
    return oldest_timestamp


def plan_windows(start: int, now: int, *, partition: int = WEEK_SECONDS) -> list[Window]:
    """All windows from ``start`` to ``now``: ``partition``-second steps, the last clamped."""
    if partition <= 0:
        raise ConfigError(f"archive partition must be positive seconds, got {partition}")
    windows = []
    lower = start
    while lower < now:
        upper = min(lower + partition, now)
        windows.append(Window(lower, upper))
        lower = upper
    return windows


def window_index(timestamp: int, start: int, now: int, partition: int = WEEK_SECONDS) -> int | None:
    """Index in ``plan_windows(start, now)`` of the window holding ``timestamp``, or None.

    Lets a distributed job assign messages to windows without building the window list.
    """
    if timestamp < start or timestamp >= now:
        return None
    return (timestamp - start) // partition


def split_by_size(
    sizes: Sequence[int], *, max_bytes: int = MAX_ARCHIVE_BYTES
) -> tuple[list[list[int]], list[int]]:
    """Cut positions ``0..len(sizes)-1`` into archives by status-go's size rule.

    Returns (chunks of positions, dropped positions). A non-empty input always yields at least
    one chunk, possibly empty when every message was dropped (status-go does the same).
    """
    chunks: list[list[int]] = []
    dropped: list[int] = []
    current: list[int] = []
    current_size = 0
    for position, size in enumerate(sizes):
        if size > max_bytes:
            dropped.append(position)
            continue
        if current_size + size > max_bytes:
            chunks.append(current)
            current = []
            current_size = 0
        current.append(position)
        current_size += size
    if sizes:
        chunks.append(current)
    return chunks, dropped


@dataclass(frozen=True, slots=True)
class PlannedArchive(Generic[T]):
    """One archive to encode: its window and its messages in (timestamp, hash) order."""

    window: Window
    part: int  # 0-based chunk number inside the window (several when over the size limit)
    messages: tuple[T, ...]

    @property
    def window_from(self) -> int:
        return self.window.start

    @property
    def window_to(self) -> int:
        return self.window.end


@dataclass(slots=True)
class ArchivePlan(Generic[T]):
    archives: list[PlannedArchive[T]] = field(default_factory=list)
    start: int | None = None  # where the windows started
    new_last_end: int | None = None  # the end date to record after these archives
    archived_messages: int = 0
    late: int = 0  # before the last archive end: their window is already archived
    future: int = 0  # at or after ``now``: left for a later run
    duplicates: int = 0  # same hash seen more than once (kept once)
    oversize: int = 0  # over the per-archive limit on their own (dropped, as status-go does)
    windows: int = 0  # windows considered, empty ones included


def _message_size(message: _Plannable) -> int:
    return len(message.payload) + len(message.sig)


def _tiebreak(message: _Plannable) -> tuple[object, ...]:
    # Full content order, so that which copy of a duplicated hash is kept does not depend on
    # the input order.
    return (
        message.timestamp,
        bytes(getattr(message, "topic", b"")),
        bytes(message.payload),
        bytes(message.sig),
        bytes(getattr(message, "padding", b"")),
        getattr(message, "third_party_id", getattr(message, "thirdPartyId", "")),
    )


def plan_archives(
    messages: Iterable[T],
    *,
    last_end: int | None,
    now: int,
    partition: int = WEEK_SECONDS,
    max_archive_bytes: int = MAX_ARCHIVE_BYTES,
) -> ArchivePlan[T]:
    """Plan the archives status-go would create for ``messages`` at time ``now`` (seconds).

    ``messages`` are archive-flavour messages (:class:`ArchiveMessage` or the generated
    ``status_archive_pb2.WakuMessage``) in any order; ``last_end`` is the end of the last
    archive already built (None or 0 when there is none).
    """
    plan: ArchivePlan[T] = ArchivePlan()
    unique: dict[bytes, T] = {}
    for message in messages:
        key = bytes(message.hash)
        kept = unique.get(key)
        if kept is None:
            unique[key] = message
            continue
        plan.duplicates += 1
        if _tiebreak(message) < _tiebreak(kept):
            unique[key] = message
    if not unique:
        # status-go with a recorded end still walks (empty) windows up to now and records now;
        # without one it has no start and records nothing
        if last_end:
            plan.start = last_end
            plan.new_last_end = max(last_end, now)
            plan.windows = len(plan_windows(last_end, now, partition=partition))
        return plan

    oldest = min(m.timestamp for m in unique.values())
    start = window_start(oldest, last_end)
    assert start is not None
    plan.start = start
    plan.new_last_end = max(start, now)
    windows = plan_windows(start, now, partition=partition)
    plan.windows = len(windows)

    per_window: dict[int, list[T]] = {}
    for message in unique.values():
        ts = message.timestamp
        if ts < start:
            plan.late += 1
            continue
        index = window_index(ts, start, now, partition)
        if index is None:
            plan.future += 1
            continue
        per_window.setdefault(index, []).append(message)

    for index in sorted(per_window):
        window = windows[index]
        in_window = per_window[index]
        in_window.sort(key=lambda m: (m.timestamp, bytes(m.hash)))
        chunks, dropped = split_by_size(
            [_message_size(m) for m in in_window], max_bytes=max_archive_bytes
        )
        plan.oversize += len(dropped)
        for part, positions in enumerate(chunks):
            chosen = tuple(in_window[p] for p in positions)
            plan.archived_messages += len(chosen)
            plan.archives.append(PlannedArchive(window, part, chosen))
    return plan
