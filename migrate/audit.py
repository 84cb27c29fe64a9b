"""Audit a community's published archives against the sources (issue 14, read-only).

The sources are read in plain Python on the driver with the migration's own readers
(:func:`~waku_legacy.migrate.sources.plan_source`, :func:`~waku_legacy.migrate.sources.read_task`),
decoded per record with :func:`~waku_legacy.migrate.decode.decode_record` and deduplicated by
``dedup_key`` as the migration does (v1 envelope first, then source rank, then location).
The community's channel messages are decrypted into archive messages by the migration's
:func:`~waku_legacy.migrate.archives.archive_fields` (what does not decrypt is never archived
and is only counted), and :func:`~waku_legacy.archive.topics.apply_archive_topics` says which
copies the archives should hold and with which hash ("channel", "universal", "both").

Every archive of the community's folder (``data`` + ``index``) is decoded and compared with
those copies, hash by hash: in both, missing (the sources have it, no archive does), extra
(only in the archives: its probable origin is "live v2 traffic" when the ``--store`` holds
it, "source NAME" when a source holds it on another topic, else "unknown"), duplicated
inside the archives. Windows are the archives' own; a message no archive window covers is
put in the 7-day window the builder would plan for it (:mod:`waku_legacy.archive.partition`:
from the last archive end, or from the first archive's start, or from the oldest message).
Archives that do not decode, overlap another window, or break the index rules are listed.

Counts are of messages, not copies (issue 34, :mod:`waku_legacy.archive.copies`): in "both"
each channel message has two copies, and a message is in both when any of its copies is
archived, missing when none is; the copies are counted beside them (``copies_*``), the lists
(``missing``, ``extra``, ``duplicates``) name copies, each with the message it is a copy of.
The JSON document is version 2 (version 1 counted copies under the message keys).
"""

from __future__ import annotations

import bisect
import dataclasses
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from waku_legacy.archive import defaults
from waku_legacy.archive.copies import describe_modes, message_keys, tally
from waku_legacy.archive.encode import Flavour, IndexEntry
from waku_legacy.archive.layout import community_folder
from waku_legacy.archive.message import AnyArchiveMessage, ArchiveMessage
from waku_legacy.archive.partition import WEEK_SECONDS, window_start
from waku_legacy.archive.topics import ArchiveTopics, apply_archive_topics
from waku_legacy.errors import ConfigError, WakuLegacyError
from waku_legacy.identity.topics import CommunityId, chat_topic, v1_topic_to_content_topic
from waku_legacy.migrate.archives import archive_hash

if TYPE_CHECKING:
    from waku_legacy.archive.repair import MissingMessage
    from waku_legacy.identity.topic_mapping import TopicMapping
    from waku_legacy.migrate.config import SourceConfig
    from waku_legacy.migrate.progress import SparkProgress

__all__ = [
    "AuditRequest",
    "audit_community",
    "audit_missing",
    "channel_mapping",
    "community_folder",
    "raw_records",
    "render_audit_table",
    "with_published_archive_topics",
]

UNKNOWN = "unknown"
LIVE_V2 = "live v2 traffic"
WORST_WINDOWS = 10
VERSION = 2  # 2: message counts are messages, copies_* count copies (issue 34)
# a message's fate is the best of its copies': in both when any copy is archived
FATES = ("both", "missing", "extra")
_NANOS = 1_000_000_000
DEFAULT_ARCHIVE_TOPICS = ArchiveTopics(defaults.ARCHIVE_TOPICS)
DEFAULT_FLAVOUR = Flavour(defaults.FLAVOUR)


@dataclass(frozen=True, slots=True)
class AuditRequest:
    """What to audit: one community, its channels, its sources and its archive folder."""

    community: CommunityId
    channels: tuple[str, ...]
    sources: Sequence[SourceConfig]
    archive_dir: Path  # the folder holding ``0x<id>/data`` and ``0x<id>/index``
    origin: str  # how the archives were given (magnet link, .torrent, folder), for the report
    work_dir: str  # scratch for sources that save pages (store-rest)
    pubsub_topic: str  # the community's shard: the message hashes depend on it
    # of windows without archive; None: read from the archives (with_published_archive_topics)
    archive_topics: ArchiveTopics | None = None
    flavour: Flavour = DEFAULT_FLAVOUR
    store_url: str | None = None  # a v2 store: its messages count as live v2 traffic
    keep_messages: bool = False  # keep each expected copy whole (a repair archives them)
    # (from, to) -> the mode an archived window was written in (with_published_archive_topics)
    window_topics: tuple[tuple[int, int, ArchiveTopics], ...] = ()

    def topics_at(self, timestamp: int) -> ArchiveTopics:
        """The mode of the archived window holding ``timestamp``, else ``archive_topics``."""
        for start, end, mode in self.window_topics:
            if start <= timestamp < end:
                return mode
        return self.new_window_topics()

    def new_window_topics(self) -> ArchiveTopics:
        """The mode of a window without archive (what the builder writes now)."""
        return self.archive_topics or DEFAULT_ARCHIVE_TOPICS


@dataclass(slots=True)
class _Expected:
    """One copy the archives should hold."""

    hash: bytes
    original: bytes  # the hash of the message it is a copy of
    channel: str
    timestamp: int  # seconds, as archived
    timestamp_ns: int
    sources: set[str]
    message: AnyArchiveMessage | None = None  # with ``keep_messages``


@dataclass(slots=True)
class _SourceScan:
    expected: dict[bytes, _Expected] = field(default_factory=dict)  # archive hash -> copy
    elsewhere: dict[bytes, str] = field(default_factory=dict)  # hash on another topic -> source
    undecryptable: Counter[str] = field(default_factory=Counter)  # reason -> messages
    records: int = 0


@dataclass(slots=True)
class _ScannedArchive:
    entry: IndexEntry
    messages: list[ArchiveMessage]
    problems: list[str]


# -- the sources -----------------------------------------------------------------------------


def channel_mapping(request: AuditRequest) -> TopicMapping:
    """The topic mapping of the audited community's channels only (the repair reads the
    same sources with it for the link's clock evidence)."""
    from waku_legacy.identity.topic_mapping import ChannelRoute, TopicMapping

    cid = str(request.community)
    routes = {
        v1_topic_to_content_topic(chat_topic(request.community.channel_chat_id(uuid))):
            ChannelRoute(cid, uuid, request.pubsub_topic)
        for uuid in request.channels
    }  # fmt: skip
    return TopicMapping(request.pubsub_topic, routes)


def raw_records(source: SourceConfig, request: AuditRequest) -> Iterator[dict[str, Any]]:
    """Every RAW record of ``source``; a store-rest URL is asked for the channels only."""
    from waku_legacy.migrate.config import SourceKind
    from waku_legacy.migrate.sources import plan_source, read_task

    if source.kind is SourceKind.STORE_REST and source.url:
        source = dataclasses.replace(
            source, content_topics=tuple(channel_mapping(request).routes), partitions=None,
            state_file=None,
        )  # fmt: skip
    for task in plan_source(source, 1, str(Path(request.work_dir) / "audit")):
        for batch in read_task(task):
            yield from batch.to_pylist()


def _archive_hash(row: dict[str, Any]) -> bytes:
    """The hash an archive gives a stored row (:func:`archive_hash`)."""
    return archive_hash(row["message_hash"], row["db_key"])


def _kept_rows(
    request: AuditRequest, scan: _SourceScan, progress: SparkProgress
) -> dict[bytes, tuple[dict[str, Any], set[str]]]:
    """The community's channel messages after dedup (dedup_key -> kept row, its sources);
    hashes on other topics go to ``scan.elsewhere``."""
    from waku_legacy.migrate.decode import decode_record

    mapping = channel_mapping(request)
    cid = str(request.community)
    kept: dict[bytes, tuple[dict[str, Any], set[str]]] = {}
    for source in request.sources:
        with progress.bar(f"audit: read {source.name}", unit="rec") as bar:
            for raw in raw_records(source, request):
                scan.records += 1
                bar.update(1)
                _keep(decode_record(raw, mapping), cid, scan, kept)
    return kept


def _keep(
    row: dict[str, Any],
    cid: str,
    scan: _SourceScan,
    kept: dict[bytes, tuple[dict[str, Any], set[str]]],
) -> None:
    """One decoded record into ``kept`` (the migration's dedup) or ``scan.elsewhere``."""
    if row["quarantined"]:
        return
    if row["community"] != cid:
        scan.elsewhere.setdefault(_archive_hash(row), row["source"])
        return
    key = bytes(row["dedup_key"])
    previous = kept.get(key)
    if previous is None:
        kept[key] = (row, {row["source"]})
        return
    previous[1].add(row["source"])
    if _preference(row) < _preference(previous[0]):
        kept[key] = (row, previous[1])


def _preference(row: dict[str, Any]) -> tuple[bool, int, str, str]:
    """The migration's dedup order (:mod:`waku_legacy.migrate.dedup`): lowest wins."""
    return (row["from_v2"], row["rank"], row["source"], row["location"])


def read_sources(
    request: AuditRequest, progress: SparkProgress, archived: set[bytes] | None = None
) -> _SourceScan:
    """The copies the archives should hold, from every source.

    A message whose every copy the archives hold (``archived``: their hashes) is counted
    without decrypting it: its copies' hashes and timestamps come from the stored row, as
    :func:`~waku_legacy.migrate.archives.archive_fields` computes them. Only the others are
    decrypted, to tell a missing message (the builder would have archived it) from one that
    does not decrypt (it never would), and to keep it whole for a repair. Decryption is
    most of an audit's work, so a complete community audits at the speed of reading it.
    """
    from waku_legacy.identity.topics import symmetric_key_for_chat

    scan = _SourceScan()
    keys = {
        content_topic: symmetric_key_for_chat(request.community.channel_chat_id(route.channel))
        for content_topic, route in channel_mapping(request).routes.items()
    }
    channel_topics = [chat_topic(request.community.channel_chat_id(c)) for c in request.channels]
    for row, sources in _kept_rows(request, scan, progress).values():
        copies = _copies(request, channel_topics, _stored_form(row))
        if archived is None or any(bytes(c.hash) not in archived for c in copies):
            decrypted = _decrypted_form(row, keys[row["content_topic"]], scan)
            if decrypted is None:
                continue
            copies = _copies(request, channel_topics, decrypted)
            kept_whole = request.keep_messages
        else:
            kept_whole = False  # archived: a repair never needs it
        original = bytes(copies[0].hash)  # each mode's first copy keeps the original hash
        for copy in copies:
            digest = bytes(copy.hash)
            scan.expected[digest] = _Expected(
                digest, original, row["channel"], copy.timestamp, row["timestamp"],
                set(sources), copy if kept_whole else None,
            )  # fmt: skip
    return scan


def _stored_form(row: dict[str, Any]) -> ArchiveMessage:
    """The archived message's hash, topic and timestamp, read off the stored row (no
    payload: enough to name its copies)."""
    from waku_legacy.identity.topics import v1_topic_from_content_topic

    return ArchiveMessage(
        timestamp=row["timestamp"] // _NANOS, hash=_archive_hash(row),
        topic=v1_topic_from_content_topic(row["content_topic"]), payload=b"",
    )  # fmt: skip


def _decrypted_form(
    row: dict[str, Any], symmetric_key: bytes, scan: _SourceScan
) -> ArchiveMessage | None:
    """The archived message whole (as the builder makes it), or None when it does not
    decrypt (counted by reason: the builder never archives it)."""
    from waku_legacy.migrate.archives import archive_fields

    fields = archive_fields(
        message_hash=row["message_hash"], content_topic=row["content_topic"],
        payload=row["payload"], version=row["version"], timestamp_ns=row["timestamp"],
        db_key=row["db_key"], symmetric_key=symmetric_key,
    )  # fmt: skip
    if not fields["ok"]:
        scan.undecryptable[fields["reason"]] += 1
        return None
    return ArchiveMessage(
        timestamp=fields["timestamp"], hash=fields["hash"], topic=fields["topic"],
        payload=fields["payload"], sig=fields["sig"], padding=fields["padding"],
    )  # fmt: skip


def _copies(
    request: AuditRequest, channel_topics: Sequence[bytes], message: ArchiveMessage
) -> Sequence[AnyArchiveMessage]:
    """The copies ``archive_topics`` makes of ``message`` (:mod:`waku_legacy.archive.topics`)."""
    mode = request.topics_at(message.timestamp)
    copies, _ = apply_archive_topics([message], channel_topics, request.community, mode)
    return copies


# -- the archives ----------------------------------------------------------------------------


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


def _scan_one(data: Path, entry: IndexEntry, flavour: Flavour) -> _ScannedArchive:
    """One archive decoded and checked as ``archive verify`` checks it (duplicated hashes
    aside: the audit counts those itself)."""
    from waku_legacy.archive.data_files import read_archive_bytes
    from waku_legacy.archive.encode import decode_archive
    from waku_legacy.archive.verify import check_archive_contents

    what = f"archive {entry.archive_id}"
    try:
        archive = decode_archive(read_archive_bytes(data, entry), flavour=flavour, what=what)
    except WakuLegacyError as exc:
        return _ScannedArchive(entry, [], [f"does not decode: {exc}"])
    scanned = _ScannedArchive(entry, list(archive.messages), [])
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
) -> tuple[list[_ScannedArchive], list[dict[str, str]]]:
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


# -- the comparison --------------------------------------------------------------------------


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

    def __init__(self, archives: Sequence[_ScannedArchive], oldest: int | None) -> None:
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
    scan: _SourceScan,
    archives: Sequence[_ScannedArchive],
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


def _compare_missing(scan: _SourceScan, archived: set[bytes], result: _Comparison) -> None:
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


def _window_problems(archives: Sequence[_ScannedArchive], result: _Comparison) -> None:
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
    scan: _SourceScan,
    archives: Sequence[_ScannedArchive],
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


def audit_community(request: AuditRequest, progress: SparkProgress | None = None) -> dict[str, Any]:
    """Audit the community's archives against its sources: the contract's JSON document.
    ``progress``: a bar per source and for the archives on a terminal, log lines otherwise."""
    return _audit(request, progress)[0]


def audit_missing(
    request: AuditRequest, progress: SparkProgress | None = None
) -> tuple[dict[str, Any], list[MissingMessage]]:
    """The audit's document and its missing copies whole, each with the window it was
    reported in (what :func:`~waku_legacy.archive.repair.repair_archives` archives)."""
    from waku_legacy.archive.repair import MissingMessage

    request = with_published_archive_topics(request, request.archive_topics)
    document, scan = _audit(dataclasses.replace(request, keep_messages=True), progress)
    ends = {w["start"]: w["end"] for w in document["windows"]}
    missing = []
    for item in document["missing"]:
        message = scan.expected[bytes.fromhex(item["hash"][2:])].message
        assert message is not None
        missing.append(MissingMessage(item["window"], ends[item["window"]], message))
    return document, missing


def _audit(
    request: AuditRequest, progress: SparkProgress | None
) -> tuple[dict[str, Any], _SourceScan]:
    from waku_legacy.migrate.progress import SparkProgress

    progress = progress or SparkProgress(enabled=False)
    if not request.window_topics:
        request = with_published_archive_topics(request, request.archive_topics)
    archives, store_problems = scan_archives(
        request.archive_dir, request.community, request.flavour, progress
    )
    scan = read_sources(request, progress, {bytes(m.hash) for a in archives for m in a.messages})
    progress.log(
        f"sources: {len({c.original for c in scan.expected.values()})} message(s), "
        f"{len(scan.expected)} archive cop(ies) expected, from {scan.records} record(s)"
        + (f"; {sum(scan.undecryptable.values())} channel message(s) do not decrypt"
           if scan.undecryptable else "")
    )  # fmt: skip
    oldest = min((c.timestamp for c in scan.expected.values()), default=None)
    result = _Comparison(_Windows(archives, oldest))
    result.problems.extend(store_problems)
    archived = _compare_archived(request, scan, archives, result)
    _compare_missing(scan, archived, result)
    _window_problems(archives, result)
    return _document(request, scan, archives, result), scan


# -- the terminal table ----------------------------------------------------------------------


def _day(seconds: int) -> str:
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%d")


def _row(cells: Sequence[object], widths: Sequence[int]) -> str:
    padded = (
        str(cell).rjust(width) if column else str(cell).ljust(width)
        for column, (cell, width) in enumerate(zip(cells, widths, strict=True))
    )
    return "  ".join(padded).rstrip()


WINDOW_COLUMNS = ("both", "missing", "extra", "duplicates", "copies_missing")
WINDOW_WIDTHS = (42, 6, 8, 6, 10, 14)


def _window_lines(window: dict[str, Any]) -> list[str]:
    name = f"{_day(window['start'])} .. {_day(window['end'])} ({window['archive_topics']})"
    lines = [_row((name, *(window[k] for k in WINDOW_COLUMNS)), WINDOW_WIDTHS)]
    for channel in window["channels"]:
        cells = (f"  {channel['channel']}", *(channel[k] for k in WINDOW_COLUMNS))
        lines.append(_row(cells, WINDOW_WIDTHS))
    lines += [f"  ! {problem}" for problem in window["problems"]]
    return lines


def render_audit_table(document: dict[str, Any]) -> str:
    """The audit for a terminal: totals first, then the worst windows, then the lists."""
    totals = document["totals"]
    verdict = "COMPLETE" if document["complete"] else "INCOMPLETE"
    lines = [
        f"audit of {document['community']}: {verdict}",
        f"archives: {document['archives']['origin']} ({document['archives']['count']} "
        f"archive(s)); sources: {', '.join(document['sources'])}",
        f"archive topics: {document['archive_topics']}; counts are messages (one per original "
        "message hash), copies_* count archived copies (two per channel message in 'both')",
        "",
        "totals",
        *(f"  {name.replace('_', ' '):<24}{value:>10}" for name, value in totals.items()),
    ]
    by_start = {w["start"]: w for w in document["windows"]}
    if document["worst_windows"]:
        header = ("window (UTC, archive topics)", *(k.replace("_", " ") for k in WINDOW_COLUMNS))
        lines += ["", "worst windows (most missing first)", _row(header, WINDOW_WIDTHS)]
        for start in document["worst_windows"]:
            lines += _window_lines(by_start[start])
    shown = set(document["worst_windows"])
    other = [w for w in document["windows"] if w["start"] not in shown and w["problems"]]
    if other:
        lines += ["", "other windows with problems"]
        for window in other:
            lines += _window_lines(window)
    lines += _list_lines(document)
    return "\n".join(lines)


def _list_lines(document: dict[str, Any]) -> list[str]:
    lines: list[str] = []
    if document["extra"]:
        origins = Counter(e["probable_origin"] for e in document["extra"])
        lines += ["", "extra messages by probable origin"]
        lines += [f"  {origin}: {n}" for origin, n in sorted(origins.items())]
    if document["duplicates"]:
        lines += ["", "copies duplicated inside the archives"]
        lines += [f"  {d['hash']}: {d['copies']} copies in {', '.join(d['archive_ids'])}"
                  for d in document["duplicates"][:WORST_WINDOWS]]  # fmt: skip
    if document["archive_problems"]:
        lines += ["", "archive problems"]
        lines += [f"  {p['archive_id']}: {p['problem']}" for p in document["archive_problems"]]
    return lines
