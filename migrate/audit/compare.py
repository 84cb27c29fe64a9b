"""The comparison of an audit (:func:`compare`): the archives' copies against the copies
the sources say they should hold, hash by hash: in both, missing (the sources have it, no
archive does), extra (only in the archives: its probable origin is "live v2 traffic" when the
``--store`` holds it, "source NAME" when a source holds it on another topic, else
"unknown"), duplicated inside the archives. Windows are the archives' own; a message no
archive window covers is put in the 7-day window the builder would plan for it
(:mod:`waku_legacy.archive.partition`: from the last archive end, or from the first archive's
start, or from the oldest message). Archives that do not decode, overlap another window, or
break the index rules are listed.

Counts are of messages, not copies (issue 34, :mod:`waku_legacy.archive.copies`): in "both"
each channel message has two copies, and a message is in both when any of its copies is
archived, missing when none is; the copies are counted beside them (``copies_*``), the lists
(``missing``, ``extra``, ``duplicates``) name copies, each with the message it is a copy of.
The JSON document is version 2 (version 1 counted copies under the message keys).
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from waku_legacy.archive.copies import describe_modes, message_keys, tally
from waku_legacy.archive.partition import WEEK_SECONDS, window_start
from waku_legacy.identity.topics import chat_topic
from waku_legacy.migrate.audit.archives import ScannedArchive
from waku_legacy.migrate.audit.request import AuditRequest
from waku_legacy.migrate.audit.sources import SourceScan

__all__ = ["VERSION", "WORST_WINDOWS", "compare"]

UNKNOWN = "unknown"
LIVE_V2 = "live v2 traffic"
WORST_WINDOWS = 10
VERSION = 2  # 2: message counts are messages, copies_* count copies (issue 34)
# a message's fate is the best of its copies': in both when any copy is archived
FATES = ("both", "missing", "extra")


@dataclass(slots=True)
class _Window:
    start: int
    end: int
    archive_ids: list[str] = field(default_factory=list)
    # (message, fate of one of its copies, channel): counted by message and by copy
    fates: list[tuple[bytes, str, str]] = field(default_factory=list)
    # (message, channel, surplus copies) of a copy held more than once
    doubled: list[tuple[bytes, str, int]] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    archive_topics: str = ""  # the mode it was (or would be) written in

    def add(self, message: bytes, fate: str, channel: str) -> None:
        self.fates.append((message, fate, channel))

    def counts(self, channel: str | None = None) -> dict[str, int]:
        """Messages by their best fate, duplicated messages, and the copies beside them."""
        counted = tally(((m, f) for m, f, c in self.fates if channel in (None, c)), FATES)
        doubled = [(m, n) for m, c, n in self.doubled if channel in (None, c)]
        return {
            **{fate: counted.messages[fate] for fate in FATES},
            "duplicates": len({m for m, _ in doubled}),
            "copies_archived": counted.copies["both"] + counted.copies["extra"],
            "copies_missing": counted.copies["missing"],
        }

    def to_json(self) -> dict[str, Any]:
        channels = sorted({c for _, _, c in self.fates} | {c for _, c, _ in self.doubled})
        return {
            "start": self.start, "end": self.end, "archive_ids": self.archive_ids,
            "archive_topics": self.archive_topics, **self.counts(),
            "channels": [{"channel": name, **self.counts(name)} for name in channels],
            "problems": self.problems,
        }  # fmt: skip


class _Windows:
    """The archives' windows, and the builder's 7-day week for a time no archive covers."""

    def __init__(self, archives: Sequence[ScannedArchive], oldest: int | None) -> None:
        self.by_start: dict[int, _Window] = {}
        for archive in archives:
            entry = archive.entry
            window = self.by_start.setdefault(
                entry.window_from, _Window(entry.window_from, entry.window_to)
            )
            window.archive_ids.append(entry.archive_id)
        self.covered = sorted((w.start, w.end) for w in self.by_start.values())
        self.starts = [start for start, _ in self.covered]
        self.first = self.covered[0][0] if self.covered else None
        self.last_end = max((end for _, end in self.covered), default=None)
        self.oldest = oldest

    def of(self, timestamp: int) -> _Window:
        # the last archive window starting at or before the time, if it covers it
        at = bisect.bisect_right(self.starts, timestamp) - 1
        if at >= 0 and timestamp < self.covered[at][1]:
            return self.by_start[self.covered[at][0]]
        anchor = window_start(self.oldest, self.last_end)
        if self.last_end is None or timestamp < self.last_end:
            anchor = self.first if self.first is not None else self.oldest
        assert anchor is not None
        start = anchor + (timestamp - anchor) // WEEK_SECONDS * WEEK_SECONDS
        return self.by_start.setdefault(start, _Window(start, start + WEEK_SECONDS))


def _store_hashes(url: str | None, hashes: Sequence[bytes]) -> set[bytes]:
    """Which of ``hashes`` the v2 store at ``url`` holds."""
    if not url or not hashes:
        return set()
    from waku_legacy.store import open_store
    from waku_legacy.store.types import StoreQuery

    found: set[bytes] = set()
    with open_store(url) as store:
        for first in range(0, len(hashes), 100):
            chunk = hashes[first : first + 100]
            page = store.query(StoreQuery(hashes=chunk, limit=len(chunk), include_data=False))
            found.update(bytes(m.message_hash) for m in page.messages)
    return found


def _channel_of_topic(request: AuditRequest) -> dict[bytes, str]:
    return {chat_topic(request.community.channel_chat_id(c)): c for c in request.channels}


@dataclass(slots=True)
class _Comparison:
    """The running totals and lists of one audit."""

    windows: _Windows
    fates: list[tuple[bytes, str]] = field(default_factory=list)  # (message, a copy's fate)
    doubled: dict[bytes, int] = field(default_factory=dict)  # message -> surplus copies
    copies_archived: int = 0
    windows_without_archive: int = 0
    missing: list[dict[str, Any]] = field(default_factory=list)
    extra: list[dict[str, Any]] = field(default_factory=list)
    duplicates: list[dict[str, Any]] = field(default_factory=list)
    problems: list[dict[str, str]] = field(default_factory=list)

    def add(self, window: _Window, message: bytes, fate: str, channel: str) -> None:
        window.add(message, fate, channel)
        self.fates.append((message, fate))


def _compare_archived(
    request: AuditRequest,
    scan: SourceScan,
    archives: Sequence[ScannedArchive],
    result: _Comparison,
) -> set[bytes]:
    """Both, extra and duplicates from the archives' side; returns the hashes archived."""
    holders: dict[bytes, list[str]] = {}
    window_of: dict[bytes, _Window] = {}
    topic_of: dict[bytes, bytes] = {}
    for archive in archives:
        window = result.windows.by_start[archive.entry.window_from]
        for message in archive.messages:
            holders.setdefault(message.hash, []).append(archive.entry.archive_id)
            window_of.setdefault(message.hash, window)
            topic_of.setdefault(message.hash, message.topic)
    extra = [h for h in holders if h not in scan.expected]
    live = _store_hashes(request.store_url, extra)
    channels = _channel_of_topic(request)
    originals = {digest: copy.original for digest, copy in scan.expected.items()}
    message_of = message_keys(((h, topic_of[h]) for h in holders), request.community, originals)
    for digest, ids in holders.items():
        window = window_of[digest]
        key = message_of[digest]
        expected = scan.expected.get(digest)
        channel = expected.channel if expected else channels.get(topic_of[digest], UNKNOWN)
        if len(ids) > 1:
            window.doubled.append((key, channel, len(ids) - 1))
            result.doubled[key] = result.doubled.get(key, 0) + len(ids) - 1
            result.duplicates.append({
                "hash": "0x" + digest.hex(), "message": "0x" + key.hex(),
                "window": window.start, "copies": len(ids), "archive_ids": sorted(set(ids)),
            })  # fmt: skip
        if expected is not None:
            result.add(window, key, "both", channel)
            continue
        result.add(window, key, "extra", channel)
        origin = scan.elsewhere.get(digest)
        result.extra.append({
            "hash": "0x" + digest.hex(), "message": "0x" + key.hex(),
            "window": window.start, "channel": channel,
            "probable_origin": LIVE_V2 if digest in live
            else f"source {origin}" if origin else UNKNOWN,
        })  # fmt: skip
    result.copies_archived = len(holders)
    return set(holders)


def _compare_missing(scan: SourceScan, archived: set[bytes], result: _Comparison) -> None:
    for copy in sorted(scan.expected.values(), key=lambda c: (c.timestamp, c.hash)):
        if copy.hash in archived:
            continue
        window = result.windows.of(copy.timestamp)
        result.add(window, copy.original, "missing", copy.channel)
        result.missing.append({
            "hash": "0x" + copy.hash.hex(), "message": "0x" + copy.original.hex(),
            "window": window.start, "channel": copy.channel,
            "timestamp_ns": copy.timestamp_ns, "sources": sorted(copy.sources),
        })  # fmt: skip


def _window_problems(archives: Sequence[ScannedArchive], result: _Comparison) -> None:
    """Windows with traffic and no archive; bad archives, on their window and in the list."""
    for archive in archives:
        window = result.windows.by_start[archive.entry.window_from]
        for problem in archive.problems:
            result.problems.append({"archive_id": archive.entry.archive_id, "problem": problem})
            window.problems.append(f"archive {archive.entry.archive_id}: {problem}")
    for window in result.windows.by_start.values():
        if not window.archive_ids:
            traffic = window.counts()["missing"]
            window.problems.insert(0, f"no archive for a window with {traffic} messages")
            result.windows_without_archive += 1


def _document(
    request: AuditRequest,
    scan: SourceScan,
    archives: Sequence[ScannedArchive],
    result: _Comparison,
) -> dict[str, Any]:
    """The audit's JSON document (version 2: messages, and copies named as copies)."""
    windows = sorted(result.windows.by_start.values(), key=lambda w: w.start)
    for window in windows:
        window.archive_topics = str(request.topics_at(window.start))
    bad = {p["archive_id"] for p in result.problems}
    counted = tally(result.fates, FATES)
    counts = {
        "source_messages": len({copy.original for copy in scan.expected.values()}),
        "archived_messages": counted.messages["both"] + counted.messages["extra"],
        **{fate: counted.messages[fate] for fate in FATES},
        "duplicates": len(result.doubled),
        "copies_expected": len(scan.expected), "copies_archived": result.copies_archived,
        "copies_missing": counted.copies["missing"], "copies_extra": counted.copies["extra"],
        "copies_duplicated": sum(result.doubled.values()),
        "windows": len(windows), "windows_without_archive": result.windows_without_archive,
        "bad_archives": len(bad),
    }  # fmt: skip
    window_counts = {w.start: w.counts() for w in windows}
    worst = sorted(
        (w.start for w in windows if window_counts[w.start]["copies_missing"]),
        key=lambda s: (-window_counts[s]["missing"], -window_counts[s]["copies_missing"], s),
    )
    found = [mode for _, _, mode in request.window_topics]
    return {
        "version": VERSION,
        "community": str(request.community),
        "archive_topics": describe_modes(found) if found else str(request.new_window_topics()),
        "archives": {
            "origin": request.origin,
            "count": len(archives),
            "index_entries": len(archives),
        },
        "sources": [s.name for s in request.sources],
        "totals": counts,
        # a message with one copy archived is not missing, but its other copy is
        "complete": not (counts["copies_missing"] or counts["windows_without_archive"] or bad),
        "windows": [w.to_json() for w in windows],
        "worst_windows": worst[:WORST_WINDOWS],
        "missing": result.missing,
        "extra": result.extra,
        "duplicates": result.duplicates,
        "archive_problems": result.problems,
    }


def compare(
    request: AuditRequest,
    scan: SourceScan,
    archives: Sequence[ScannedArchive],
    store_problems: Sequence[dict[str, str]],
) -> dict[str, Any]:
    """The audit's JSON document: scan (what the archives should hold) against
    archives, with the folder's own problems (``store_problems``: the index)."""
    oldest = min((c.timestamp for c in scan.expected.values()), default=None)
    result = _Comparison(_Windows(archives, oldest))
    result.problems.extend(store_problems)
    archived = _compare_archived(request, scan, archives, result)
    _compare_missing(scan, archived, result)
    _window_problems(archives, result)
    return _document(request, scan, archives, result)
