"""The archives' side of an audit: every archive of the community's folder (``data`` +
``index``) decoded and checked as ``archive verify`` checks it, plus overlapping windows
(:func:`scan_archives`); and the archive-topics mode each archived window was written in,
read from the archives themselves (:func:`with_published_archive_topics`)."""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from waku_legacy.archive.encode import Flavour, IndexEntry
from waku_legacy.archive.message import ArchiveMessage
from waku_legacy.archive.topics import ArchiveTopics
from waku_legacy.errors import ConfigError, WakuLegacyError
from waku_legacy.identity.topics import CommunityId
from waku_legacy.migrate.audit.request import DEFAULT_ARCHIVE_TOPICS, AuditRequest

if TYPE_CHECKING:
    from waku_legacy.migrate.progress import SparkProgress

__all__ = [
    "ScannedArchive",
    "published_archive_topics",
    "scan_archives",
    "with_published_archive_topics",
]


@dataclass(slots=True)
class ScannedArchive:
    entry: IndexEntry
    messages: list[ArchiveMessage]
    problems: list[str]


def published_archive_topics(
    archive_dir: Path, community: CommunityId, flavour: Flavour
) -> list[tuple[int, int, ArchiveTopics, str]]:
    """(from, to, mode, archive id) of every archive in the folder whose mode can be read:
    from its index metadata's topics, else from its messages' topics
    (:func:`~waku_legacy.archive.topics.archive_topics_of`). No folder or index: []."""
    from waku_legacy.archive.data_files import inspect_archive_data, read_archive_bytes
    from waku_legacy.archive.encode import decode_archive
    from waku_legacy.archive.layout import CommunityLayout
    from waku_legacy.archive.topics import archive_topics_of

    layout = CommunityLayout.of(archive_dir, community)
    if not layout.index.exists():
        return []
    try:
        entries = inspect_archive_data(layout, flavour).index.entries
    except WakuLegacyError:
        return []  # the audit reports an unreadable index
    out = []
    for entry in sorted(entries, key=lambda e: e.offset):
        message_topics: list[bytes] = []
        if not entry.content_topics:
            try:
                archive = decode_archive(read_archive_bytes(layout.data, entry), flavour=flavour)
            except WakuLegacyError:
                continue  # reported as a bad archive
            message_topics = [bytes(m.topic) for m in archive.messages]
        mode = archive_topics_of(entry.content_topics, community, message_topics)
        if mode is not None:
            out.append((entry.window_from, entry.window_to, mode, entry.archive_id))
    return out


def with_published_archive_topics(
    request: AuditRequest, explicit: ArchiveTopics | None
) -> AuditRequest:
    """``request`` with the mode of the published archives: each archived window keeps the
    mode it was written in (what the builder wrote there), and windows without archive take
    the newest archive's (what the builder writes now); without archives, ``explicit`` or
    the default. An ``explicit`` mode the archives contradict is a ConfigError: audited in
    another mode, half of the archive would look "extra" and a repair would append copies
    no current client imports."""
    if request.window_topics:
        return request  # already read
    published = published_archive_topics(request.archive_dir, request.community, request.flavour)
    if not published:
        mode = explicit if explicit is not None else DEFAULT_ARCHIVE_TOPICS
        return dataclasses.replace(request, archive_topics=mode, window_topics=())
    modes = Counter(str(mode) for _, _, mode, _ in published)
    if explicit is not None and set(modes) != {str(explicit)}:
        found = ", ".join(f"{n} archive(s) {mode!r}" for mode, n in sorted(modes.items()))
        raise ConfigError(
            f"audit: --archive-topics {explicit} contradicts the published archives of "
            f"{request.community} ({found}, read from their metadata topics: '-memberUpdate' "
            "alone is 'universal', with the channel topics 'both', without it 'channel'); "
            "leave --archive-topics out to audit them in their own mode"
        )
    newest = max(published, key=lambda p: (p[0], p[1]))[2]
    windows = {(start, end): mode for start, end, mode, _ in published}
    return dataclasses.replace(
        request, archive_topics=newest,
        window_topics=tuple((s, e, m) for (s, e), m in sorted(windows.items())),
    )  # fmt: skip


def _unique(messages: Iterable[ArchiveMessage]) -> list[ArchiveMessage]:
    seen: set[bytes] = set()
    out = []
    for message in messages:
        if message.hash not in seen:
            seen.add(message.hash)
            out.append(message)
    return out


def _scan_one(data: Path, entry: IndexEntry, flavour: Flavour) -> ScannedArchive:
    """One archive decoded and checked as ``archive verify`` checks it (duplicated hashes
    aside: the audit counts those itself)."""
    from waku_legacy.archive.data_files import read_archive_bytes
    from waku_legacy.archive.encode import decode_archive
    from waku_legacy.archive.verify import check_archive_contents

    what = f"archive {entry.archive_id}"
    try:
        archive = decode_archive(read_archive_bytes(data, entry), flavour=flavour, what=what)
    except WakuLegacyError as exc:
        return ScannedArchive(entry, [], [f"does not decode: {exc}"])
    scanned = ScannedArchive(entry, list(archive.messages), [])
    unique = dataclasses.replace(archive, messages=_unique(archive.messages))
    try:
        check_archive_contents(what, entry, unique, set())
    except WakuLegacyError as exc:
        scanned.problems.append(getattr(exc, "reason", None) or str(exc))
    if entry.padding:
        with open(data, "rb") as handle:
            handle.seek(entry.offset + entry.archive_length)
            if handle.read(entry.padding).strip(b"\0"):
                scanned.problems.append("the padding after the archive is not zeros")
    return scanned


def _overlaps(entries: Sequence[IndexEntry]) -> dict[str, str]:
    """archive id -> the problem, for archives whose window overlaps the window of an archive
    appended before them (lower offset): the later one broke the rule. Parts of one window
    (same from and to) do not overlap. Quadratic in windows: a community has hundreds."""
    out: dict[str, str] = {}
    earlier: list[tuple[int, int]] = []
    for entry in sorted(entries, key=lambda e: e.offset):
        window = (entry.window_from, entry.window_to)
        for other in earlier:
            if other != window and other[0] < window[1] and window[0] < other[1]:
                out[entry.archive_id] = (
                    f"window {window[0]}..{window[1]} overlaps an earlier archive's "
                    f"{other[0]}..{other[1]}"
                )
                break
        if window not in earlier:
            earlier.append(window)
    return out


def scan_archives(
    archive_dir: Path, community: CommunityId, flavour: Flavour, progress: SparkProgress
) -> tuple[list[ScannedArchive], list[dict[str, str]]]:
    """Every archive of the folder (decoded, checked) and the store-wide problems (index)."""
    from waku_legacy.archive.data_files import inspect_archive_data
    from waku_legacy.archive.layout import CommunityLayout

    layout = CommunityLayout.of(archive_dir, community)
    try:
        status = inspect_archive_data(layout, flavour)
    except WakuLegacyError as exc:
        return [], [{"archive_id": "index", "problem": getattr(exc, "reason", None) or str(exc)}]
    store_problems = []
    if status.torn_tail:
        store_problems.append(
            {"archive_id": "index",
             "problem": f"data has {status.torn_tail} bytes the index does not account for"}
        )  # fmt: skip
    entries = status.index.entries
    overlaps = _overlaps(entries)
    scanned = []
    with progress.bar("audit: decode archives", total=len(entries), unit="archive") as bar:
        for entry in entries:
            archive = _scan_one(layout.data, entry, flavour)
            if entry.archive_id in overlaps:
                archive.problems.append(overlaps[entry.archive_id])
            scanned.append(archive)
            bar.update(1)
    return scanned, store_problems
