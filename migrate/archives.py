"""Community history archives from the migrated messages, encoded in parallel on Spark.

Per configured community, from its channels' rows that step 1 wrote apart (as archive rows:
decrypted with their channel's symmetric key, signers recovered, turned into
archive-flavour messages by :func:`channel_archive_rows`, in step 1 itself or in a job of
its own beside the driver's store writer; see :mod:`.archive_jobs`):

1. (executors) The rows are counted: archivable, undecryptable per reason (those are still
   stored), and from ``now`` on (future).
2. (driver) The archive store is repaired if a previous run was interrupted, and the recorded
   end of the last archive read (:mod:`waku_legacy.archive.data_files`).
3. (executors) Messages before that end which no existing archive holds are *late*: counted
   and reported (never silently dropped; they are in the v2 store). Existing archives are read
   in parallel to know which hashes they hold.
4. (executors) Messages from that end (or the oldest message) up to ``now`` are grouped by
   7-day window; each window is planned and encoded independently with the archive module's
   own :func:`~waku_legacy.archive.plan_archives` / :class:`~waku_legacy.archive.EncodedArchive`
   (a window's plan does not depend on other windows), and written to a scratch file.
5. (driver) Windows are appended in order, one :func:`~waku_legacy.archive.append_archives`
   call per window, then the end date is recorded and the torrent and signed magnet-link
   message are refreshed by :func:`~waku_legacy.archive.build.build_community_archives`
   (given no further messages). Driver memory is bounded by one window's archives.

The result is byte-identical to handing all messages to ``build_community_archives`` at once
(a test checks it), and a crash anywhere is finished by the next run (the archive store's
repair, plus appends skipping windows already in the index).
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from waku_legacy.archive import defaults
from waku_legacy.errors import WakuLegacyError
from waku_legacy.faults import FaultHook, no_fault
from waku_legacy.migrate.steps import timed_step

if TYPE_CHECKING:
    from coincurve import PrivateKey
    from pyspark.sql import DataFrame, SparkSession

    from waku_legacy.archive import (
        ArchiveIndex,
        EncodedArchive,
        IndexEntry,
    )
    from waku_legacy.archive.build import BuildReport
    from waku_legacy.archive.clock import ClockEvidence
    from waku_legacy.archive.layout import CommunityLayout
    from waku_legacy.archive.logos_storage import LogosStorageClient
    from waku_legacy.community_config import CommunityConfig

__all__ = [
    "ARCHIVE_SCHEMA",
    "CHANNEL_ARCHIVE_SCHEMA",
    "CHANNEL_ROW_COLUMNS",
    "ENCODE_COLUMNS",
    "CommunityResult",
    "archive_batch",
    "archive_fields",
    "archive_hash",
    "build_archives",
    "channel_archive_rows",
    "encode_window",
]

ARCHIVE_SCHEMA = pa.schema(
    [
        ("hash", pa.binary()),
        ("timestamp", pa.int64()),  # seconds
        ("topic", pa.binary()),
        ("sig", pa.binary()),
        ("payload", pa.binary()),
        ("padding", pa.binary()),
        ("ok", pa.bool_()),
        ("reason", pa.string()),
        ("week", pa.string()),
        ("source", pa.string()),
    ]
)
#: what step 1 writes of the community channels' rows when it decrypts them itself
#: (:func:`channel_archive_rows`): ARCHIVE rows with their community and location (which,
#: with the source, says whether the row is a duplicate copy)
CHANNEL_ARCHIVE_SCHEMA = pa.schema(
    [*ARCHIVE_SCHEMA, ("community", pa.string()), ("location", pa.string())]
)
WINDOW_RESULT_SCHEMA = pa.schema(
    [
        ("window", pa.int64()),
        ("window_from", pa.int64()),
        ("window_to", pa.int64()),
        ("parts", pa.int32()),
        ("messages", pa.int64()),
        ("duplicates", pa.int64()),
        ("oversize", pa.int64()),
        ("path", pa.string()),
    ]
)
_NANOS = 1_000_000_000


@dataclass(slots=True)
class CommunityResult:
    community: str
    name: str | None
    shard: int
    pubsub_topic: str
    channels: int
    archive_topics: str = ""  # the mode its archives are written in (the reports say it)
    messages: int = 0  # channel messages in the v2 store after dedup
    archivable: int = 0  # decrypted into archive messages
    undecryptable: int = 0
    undecryptable_reasons: dict[str, int] = field(default_factory=dict)
    previous_end: int | None = None
    start: int | None = None
    last_end: int | None = None
    already_archived: int = 0
    late: int = 0
    late_by_week: list[dict[str, Any]] = field(default_factory=list)  # week, source, late
    future: int = 0
    archived_now: int = 0
    windows: int = 0
    archives_added: int = 0
    archive_ids: list[str] = field(default_factory=list)
    total_archives: int = 0
    oversize: int = 0
    info_hash: str | None = None
    magnet_uri: str | None = None
    torrent_path: str | None = None
    magnet_message_paths: list[str] = field(default_factory=list)
    backend: str = "torrent"  # or "logos-storage" (issue 12)
    archive_link: str | None = None  # the magnet link or the Logos Storage index CID
    logos_storage: dict[str, Any] | None = None  # uploads (LogosStoragePublish.to_json())
    # the archive-link message's clock and why (waku_legacy.archive.clock.ClockChoice.to_json)
    archive_link_clock: dict[str, Any] | None = None
    seconds: float = 0.0
    timing: dict[str, float] = field(default_factory=dict)  # seconds per step of the build

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


# -- executors: pure per-record and per-window functions ------------------------------------


def archive_hash(message_hash: bytes, db_key: bytes | None) -> bytes:
    """The hash an archive gives a stored message: v1-era messages are identified by their
    envelope hash (the DB key's middle part), messages that only ever existed on v2 by their
    deterministic hash."""
    return bytes(db_key[4:36]) if db_key is not None else bytes(message_hash)


def archive_fields(
    *,
    message_hash: bytes,
    content_topic: str,
    payload: bytes,
    version: int,
    timestamp_ns: int,
    db_key: bytes | None,
    symmetric_key: bytes,
) -> dict[str, Any]:
    """One stored channel message -> the archive message's fields (``ok``) or a reason."""
    from waku_legacy.crypto.payload import decode_payload
    from waku_legacy.identity.topics import v1_topic_from_content_topic
    from waku_legacy.mailserver_compat.wire.convert import archive_message

    if version != 1:
        return {"ok": False, "reason": f"payload version {version} is not 26/WAKU-PAYLOAD"}
    try:
        decoded = decode_payload(payload, symmetric_key=symmetric_key)
        message = archive_message(
            message_hash=archive_hash(message_hash, db_key),
            topic=v1_topic_from_content_topic(content_topic),
            timestamp=timestamp_ns // _NANOS,
            decoded=decoded,
        )
    except WakuLegacyError as exc:
        reason = type(exc).__name__
        return {"ok": False, "reason": f"{reason}: {str(exc)[:120]}"}
    return {
        "ok": True,
        "reason": None,
        "hash": message.hash,
        "timestamp": message.timestamp,
        "topic": message.topic,
        "sig": message.sig,
        "payload": message.payload,
        "padding": message.padding,
    }


_DECRYPT_INPUTS = ("message_hash", "content_topic", "payload", "version", "timestamp", "db_key")
#: what :func:`channel_archive_rows` reads of a MESSAGE row
CHANNEL_ROW_COLUMNS = (*_DECRYPT_INPUTS, "week", "source", "community", "location")
#: what :func:`encode_window` reads of an archive row (besides its ``window``)
ENCODE_COLUMNS = ("hash", "timestamp", "topic", "sig", "payload", "padding")
_DECRYPTED_NAMES = tuple(n for n in ARCHIVE_SCHEMA.names if n not in ("week", "source"))


def archive_batch(batch: pa.RecordBatch, keys: dict[str, bytes]) -> pa.RecordBatch:
    """Stored message rows (one community's channels) -> ARCHIVE rows. Only the columns the
    work reads become Python values; week and source pass through as Arrow arrays."""
    out: dict[str, list[Any]] = {name: [] for name in _DECRYPTED_NAMES}
    appenders = [(name, out[name].append) for name in _DECRYPTED_NAMES]
    columns = [batch.column(c).to_pylist() for c in _DECRYPT_INPUTS]
    for message_hash, content_topic, payload, version, timestamp, db_key in zip(
        *columns, strict=True
    ):
        fields = archive_fields(
            message_hash=message_hash, content_topic=content_topic, payload=payload,
            version=version, timestamp_ns=timestamp, db_key=db_key,
            symmetric_key=keys[content_topic],
        )  # fmt: skip
        fields.setdefault("timestamp", timestamp // _NANOS)
        for name, append in appenders:
            append(fields.get(name))
    arrays = [pa.array(out[f.name], f.type) for f in ARCHIVE_SCHEMA if f.name in out]
    arrays += [batch.column("week").cast(pa.string()), batch.column("source").cast(pa.string())]
    return pa.RecordBatch.from_arrays(arrays, schema=ARCHIVE_SCHEMA)


def channel_archive_rows(rows: pa.Table, keys: dict[str, bytes]) -> pa.Table:
    """Community channels' MESSAGE rows (any communities; ``keys``: the symmetric key of
    every channel's content topic) -> CHANNEL_ARCHIVE_SCHEMA rows, row for row."""
    tables = []
    for batch in rows.to_batches():
        if batch.num_rows:
            archived = pa.Table.from_batches([archive_batch(batch, keys)])
            tables.append(
                archived.append_column("community", batch.column("community"))
                .append_column("location", batch.column("location"))
            )
    return pa.concat_tables(tables) if tables else CHANNEL_ARCHIVE_SCHEMA.empty_table()


def encode_window(
    table: pa.Table,
    *,
    start: int,
    now: int,
    partition: int,
    topics: tuple[bytes, ...],
    flavour: str,
    scratch_dir: str,
    community: str = "",
    archive_topics: str = defaults.ARCHIVE_TOPICS,
) -> pa.Table:
    """Plan and encode one window's archives (the archive module's rules) into a scratch
    file; return one metadata row. The file holds the parts back to back, each preceded by
    its 8-byte big-endian length and message count. ``topics`` are the channel topics;
    ``archive_topics`` relabels as :func:`~waku_legacy.archive.topics.apply_archive_topics`."""
    from waku_legacy.archive import ArchiveMessage
    from waku_legacy.archive.canonical import canonical_archives

    rows = table.to_pylist()
    window = rows[0]["window"]
    window_from = start + window * partition
    window_to = min(window_from + partition, now)
    messages = [
        ArchiveMessage(
            timestamp=r["timestamp"],
            hash=r["hash"],
            topic=r["topic"],
            payload=r["payload"],
            sig=r["sig"] or b"",
            padding=r["padding"] or b"",
        )
        for r in rows
    ]
    # the archives' bytes as every other writer makes them (one window: starts at its from)
    archives = canonical_archives(
        messages, topics, community, archive_topics, last_end=window_from, now=window_to,
        flavour=flavour, partition=partition,
    )  # fmt: skip
    plan = archives.plan
    if plan.late or plan.future or plan.windows != 1:
        raise WakuLegacyError(
            f"window {window_from}..{window_to} planned into {plan.windows} windows "
            f"({plan.late} late, {plan.future} future): inconsistent window assignment"
        )
    path = Path(scratch_dir) / f"window-{window:06d}.bin"
    count = _write_window_file(path, archives.encoded)
    return pa.Table.from_pylist(
        [
            {
                "window": window,
                "window_from": window_from,
                "window_to": window_to,
                "parts": len(plan.archives),
                "messages": count,
                "duplicates": plan.duplicates,
                "oversize": plan.oversize,
                "path": str(path),
            }
        ],
        schema=WINDOW_RESULT_SCHEMA,
    )


def _write_window_file(path: Path, encoded: Sequence[EncodedArchive]) -> int:
    """Write ``encoded`` into ``path`` (read back by :func:`read_window_file`): each part
    preceded by its 8-byte big-endian length and message count. Returns the messages."""
    from waku_legacy.durable import write_atomic

    chunks: list[bytes] = []
    count = 0
    for archive in encoded:
        chunks += [
            len(archive.data).to_bytes(8, "big"),
            archive.message_count.to_bytes(8, "big"),
            archive.data,
        ]
        count += archive.message_count
    # A task run twice (retry, speculation) replaces the file whole: never half of one.
    write_atomic(path, b"".join(chunks), step="archive-window", tmp=path.with_suffix(".tmp"))
    return count


def read_window_file(
    path: str, window_from: int, window_to: int, topics: tuple[bytes, ...], flavour: str
) -> list[EncodedArchive]:
    """The archives :func:`encode_window` wrote to ``path``, with the window's metadata."""
    from waku_legacy.archive import EncodedArchive, Flavour

    parts = []
    with open(path, "rb") as fh:
        while header := fh.read(16):
            length = int.from_bytes(header[:8], "big")
            count = int.from_bytes(header[8:], "big")
            data = fh.read(length)
            if len(data) != length:
                raise WakuLegacyError(f"scratch archive file {path} is truncated")
            parts.append(
                EncodedArchive(window_from, window_to, topics, data, count, Flavour.parse(flavour))
            )
    return parts


def _archived_hashes_batches(
    batches: Iterator[pa.RecordBatch],
    archive_dir: str,
    community: str,
    entries: list[IndexEntry],
    flavour: str,
) -> Iterator[pa.RecordBatch]:
    from waku_legacy.archive import read_archive

    for batch in batches:
        for number in batch.column(0).to_pylist():
            decoded = read_archive(archive_dir, community, entries[number], flavour=flavour)
            hashes = [bytes(m.hash) for m in decoded.messages]
            yield pa.RecordBatch.from_arrays([pa.array(hashes, pa.binary())], names=["hash"])


# -- driver: one community ---------------------------------------------------------------------


@dataclass(slots=True)
class _CommunityRun:
    """What the steps of one community's archive build share."""

    spark: SparkSession
    community: CommunityConfig
    archive_dir: str
    torrent_dir: str
    work_dir: str
    rows_dir: Path  # the CHANNEL_ARCHIVE files (:mod:`.archive_jobs`)
    duplicates_dir: Path
    now: int
    flavour: str
    partition: int
    fault: FaultHook  # the run's hook, steps prefixed with archive:<community>:
    layout: CommunityLayout
    result: CommunityResult
    topics: tuple[bytes, ...]  # the channel topics, sorted

    @property
    def cid(self) -> str:
        return str(self.community.id)

    @property
    def scratch(self) -> Path:
        """Where the executors write the encoded windows (see :func:`encode_window`)."""
        return Path(self.work_dir) / "archive-windows" / self.cid

    def step(self, name: str, doing: str) -> AbstractContextManager[None]:
        """Time the block as ``result.timing[name]``; a failure names the community and
        ``doing``."""
        return timed_step(self.result.timing, name, f"archiving community {self.cid} ({doing})")


def build_archives(
    spark: SparkSession,
    community: CommunityConfig,
    *,
    rows_dir: Path,
    duplicates_dir: Path,
    archive_dir: str,
    torrent_dir: str,
    work_dir: str,
    now: int,
    flavour: str = defaults.FLAVOUR,
    partition: int | None = None,
    fault: FaultHook = no_fault,
    community_key: PrivateKey | None = None,
    logos_storage_url: str | None = None,
    store_url: str | None = None,
    store_written: Callable[[], None] = lambda: None,
) -> CommunityResult:
    """Archive one community's channel messages: its rows in the CHANNEL_ARCHIVE files of
    ``rows_dir`` (one per step-1 partition, :mod:`.archive_jobs`), the duplicate copies
    among them (``duplicates_dir``) left out.

    ``store_url``: the output v2 store, also read for the archive-link clocks the community
    already used (it may hold links and descriptions earlier runs or the bridge stored).
    ``store_written``: returns once that store is complete (it may be written meanwhile);
    called before the link is made."""
    from waku_legacy.archive import WEEK_SECONDS
    from waku_legacy.archive.layout import CommunityLayout

    started = time.monotonic()
    cid = str(community.id)
    run = _CommunityRun(
        spark=spark, community=community, archive_dir=archive_dir, torrent_dir=torrent_dir,
        work_dir=work_dir, rows_dir=Path(rows_dir), duplicates_dir=Path(duplicates_dir),
        now=now, flavour=flavour, partition=partition or WEEK_SECONDS,
        fault=lambda step: fault(f"archive:{cid}:{step}"),
        layout=CommunityLayout.of(archive_dir, community.id, torrent_dir),
        result=CommunityResult(
            community=cid, name=community.name, shard=community.shard,
            pubsub_topic=community.pubsub_topic, channels=len(community.channels),
            archive_topics=str(community.archive_topics),
        ),
        topics=tuple(sorted(community.channel_topics())),
    )  # fmt: skip
    with run.step("repair", "repairing the archive store"):
        index = _repair(run)
    with run.step("count", "counting the archivable messages"):
        start = _count_archivable(run)
    with run.step("late", "finding late messages"):
        _count_late(run, index)
    with run.step("encode", "encoding the windows"):
        windows = _encode_windows(run, start)
    with run.step("append", "appending the archives"):
        _append_windows(run, windows, start)
    with run.step("wait_store", "waiting for the store"):
        store_written()
    with run.step("link", "publishing the archive link"):
        _publish_link(run, community_key, logos_storage_url, store_url)
    run.result.seconds = time.monotonic() - started
    return run.result


def _repair(run: _CommunityRun) -> ArchiveIndex:
    """Step 2: the archive store repaired (an interrupted append), its index, and the
    recorded end of the last archive."""
    from waku_legacy.archive.data_files import recorded_last_end, repair_archive_data

    run.layout.root.mkdir(parents=True, exist_ok=True)
    status = repair_archive_data(run.layout, run.flavour, fault=run.fault)
    run.result.previous_end = recorded_last_end(run.layout, status.index)
    return status.index


ARCHIVE_TASK_NICENESS = 10


def raise_niceness(niceness: int) -> None:
    """This process's niceness raised to ``niceness`` (never lowered: an unprivileged
    process cannot take it back; not permitted: the priority is kept)."""
    import os

    try:
        current = os.nice(0)
        if current < niceness:
            os.nice(niceness - current)
    except OSError:
        pass


def yield_cpu_to_driver() -> None:
    """Lower this worker's CPU priority (niceness ARCHIVE_TASK_NICENESS). The decryption
    runs beside the driver's one SQLite writer, which is the run's critical path (the
    archives finish first and wait for it); where executors share the driver's cores (local
    mode), this lets the writer run first and the archive tasks take what it leaves. A
    process's niceness only rises, so the worker keeps it for the rest of its life."""
    raise_niceness(ARCHIVE_TASK_NICENESS)


def _count_archivable(run: _CommunityRun) -> int | None:
    """Step 1's counts (archivable, undecryptable per reason, future); returns where the
    new archives start: the recorded end, else the oldest archivable message (None:
    nowhere)."""
    from waku_legacy.migrate.archive_jobs import count_archivable

    result = run.result
    counts = count_archivable(run.spark, run.rows_dir, run.duplicates_dir, run.cid, run.now)
    result.archivable = counts.archivable
    result.undecryptable = sum(counts.undecryptable.values())
    result.undecryptable_reasons = dict(sorted(counts.undecryptable.items()))
    result.messages = result.archivable + result.undecryptable
    previous_end = result.previous_end
    if result.archivable == 0:
        result.start = previous_end
    else:
        result.start = previous_end if previous_end else counts.oldest
        result.future = counts.future
    return result.start


def _good_rows(run: _CommunityRun) -> DataFrame:
    """The community's archivable rows (duplicate copies left out) as a DataFrame."""
    from pyspark.sql import functions as F

    from waku_legacy.migrate.dedup import read_messages

    rows = read_messages(run.spark, run.work_dir, run.rows_dir.name, CHANNEL_ARCHIVE_SCHEMA)
    return rows.filter((F.col("community") == run.cid) & ~F.col("duplicate") & F.col("ok"))


def _count_late(run: _CommunityRun, index: ArchiveIndex) -> None:
    """Step 3: messages before the recorded end that no existing archive holds (late), per
    week and source, and those an archive already holds (only when archives exist: the
    SQL engine's join against the archives' hashes)."""
    from pyspark.sql import functions as F

    result = run.result
    previous_end = result.previous_end
    if not (previous_end and result.archivable):
        return
    before = _good_rows(run).filter(F.col("timestamp") < previous_end)
    entries = list(index.entries)
    if entries and before.limit(1).count():
        archive_dir, cid, flavour = run.archive_dir, run.cid, run.flavour
        numbers = run.spark.range(0, len(entries), 1, numPartitions=min(len(entries), 64))
        held = numbers.mapInArrow(
            lambda it: _archived_hashes_batches(it, archive_dir, cid, entries, flavour),
            "hash BINARY",
        )
        late_rows = before.join(held, "hash", "left_anti")
    else:
        late_rows = before
    for row in sorted(late_rows.groupBy("week", "source").count().collect()):
        result.late_by_week.append(
            {"week": row["week"], "source": row["source"], "late": row["count"]}
        )
    result.late = sum(r["late"] for r in result.late_by_week)
    result.already_archived = before.count() - result.late


def _encode_windows(run: _CommunityRun, start: int | None) -> list[dict[str, Any]]:
    """Step 4: the messages from ``start`` up to ``now``, by window, planned and encoded on
    the executors into scratch files; one metadata row per window, in window order."""
    from waku_legacy.migrate.archive_jobs import encode_windows

    shutil.rmtree(run.scratch, ignore_errors=True)
    run.scratch.mkdir(parents=True, exist_ok=True)
    if start is None or not run.result.archivable:
        return []
    # Plain values only: the function is pickled to the executors.
    now, partition, topics, flavour, cid = run.now, run.partition, run.topics, run.flavour, run.cid
    scratch_dir, archive_topics = str(run.scratch), run.community.archive_topics

    def encode(table: pa.Table) -> dict[str, Any]:
        row: dict[str, Any] = encode_window(
            table, start=start, now=now, partition=partition, topics=topics, flavour=flavour,
            scratch_dir=scratch_dir, community=cid, archive_topics=archive_topics,
        ).to_pylist()[0]  # fmt: skip
        return row

    return encode_windows(
        run.spark, run.rows_dir, run.duplicates_dir, cid, start=start, now=now,
        partition=partition, encode=encode,
    )  # fmt: skip


def _append_windows(
    run: _CommunityRun, windows: list[dict[str, Any]], start: int | None
) -> None:
    """Step 5: the windows appended in order, one at a time (bounded memory), then the end
    date recorded and the scratch files removed."""
    from waku_legacy.archive.canonical import canonical_metadata_topics
    from waku_legacy.archive.data_files import append_archives, write_last_end

    result = run.result
    metadata_topics = canonical_metadata_topics(
        run.topics, run.cid, run.community.archive_topics
    )  # issue 12: "channel" | "universal" | "both"
    for row in windows:
        encoded = read_window_file(
            row["path"], row["window_from"], row["window_to"], metadata_topics, run.flavour
        )
        appended = append_archives(
            run.archive_dir, run.community.id, encoded, flavour=run.flavour, fault=run.fault
        )
        result.archives_added += len(appended.added)
        result.archive_ids.extend(appended.archive_ids)
        if appended.added:
            result.archived_now += row["messages"]
        result.oversize += row["oversize"]
        result.windows += 1
    if result.archivable and start is not None:
        write_last_end(run.layout, max(start, run.now), fault=run.fault)
    shutil.rmtree(run.scratch, ignore_errors=True)


def _publish_link(
    run: _CommunityRun,
    community_key: PrivateKey | None,
    logos_storage_url: str | None,
    store_url: str | None,
) -> None:
    """Step 5, end: the torrent (or Logos Storage index) and the signed archive-link message,
    whose clock is above every clock the community already used (description field 9,
    earlier archive-link messages in the sources), else the run's clock (now, in ms)."""
    from waku_legacy.archive.build import build_community_archives
    from waku_legacy.archive.clock import ClockChoice, ClockEvidence, choose_link_clock
    from waku_legacy.community_config import load_operator_key

    community = run.community
    evidence = (
        link_clock_evidence(run.spark, run.work_dir, community, store_url)
        if community_key is not None
        else ClockEvidence()
    )
    if community_key is not None:  # the link message files another tool or run wrote
        from waku_legacy.archive.build import written_link_evidence

        evidence = evidence.merge(written_link_evidence(run.layout))
    previous_link = _current_link(run.layout, community)
    logos_storage = _logos_storage_client(community, logos_storage_url)

    def write_message(archive_link: str | None) -> tuple[ClockChoice, BuildReport]:
        choice = choose_link_clock(
            evidence, base=run.now * 1000, base_reason="run clock (now)",
            archive_link=archive_link, minimum=community.min_link_clock,
        )  # fmt: skip
        return choice, build_community_archives(
            run.archive_dir, run.torrent_dir, community.id, run.topics, [],
            now=run.now, flavour=run.flavour, community_key=community_key,
            pubsub_topic=community.pubsub_topic, clock_ms=choice.clock, fault=run.fault,
            # issue 12: -memberUpdate and/or -magnetlinks; payload signed by the operator key
            archive_link_chats=community.archive_link_chats,
            payload_signer=load_operator_key(community) if community_key is not None else None,
            logos_storage=logos_storage,  # issue 12: None = the torrent back end
            archive_topics=community.archive_topics,
        )  # fmt: skip

    choice, report = write_message(previous_link)
    link = report.archive_link  # the magnet link or the Logos Storage index CID
    if community_key is not None and link not in (None, previous_link):
        # a new link: a found message naming the old one no longer counts as "the same link"
        final = choose_link_clock(
            evidence, base=run.now * 1000, base_reason="run clock (now)", archive_link=link,
            minimum=community.min_link_clock,
        )  # fmt: skip
        if final.clock != choice.clock:
            choice, report = write_message(link)
    result = run.result
    if community_key is not None and link:
        result.archive_link_clock = choice.to_json()
    result.last_end = report.last_end
    result.total_archives = report.total_archives
    result.info_hash = report.info_hash
    result.magnet_uri = report.magnet_uri
    result.torrent_path = report.torrent_path
    result.magnet_message_paths = report.magnet_message_paths
    result.backend, result.archive_link = report.backend, report.archive_link
    result.logos_storage = report.logos_storage


def _logos_storage_client(community: CommunityConfig, url: str | None) -> LogosStorageClient | None:
    """The community's Logos Storage node client, or None for the torrent back end."""
    from waku_legacy.archive.logos_storage import client_for

    return client_for(community.backend, url, f"community {community.id}")


def _current_link(layout: CommunityLayout, community: CommunityConfig) -> str | None:
    """The archive link of what is already built: the torrent's magnet link, or the Logos
    Storage index CID (None when there is none yet)."""
    from waku_legacy.archive.logos_storage import LOGOS_STORAGE, recorded_index_cid
    from waku_legacy.archive.torrent import load_torrent

    if community.backend == LOGOS_STORAGE:
        return recorded_index_cid(layout)
    try:
        return load_torrent(layout.torrent).magnet_uri
    except (OSError, WakuLegacyError):
        return None


def link_clock_evidence(
    spark: SparkSession, work_dir: str, community: CommunityConfig, store_url: str | None = None
) -> ClockEvidence:
    """The archive-link clocks ``community`` already used, from the migrated messages.

    Reads the run's decoded messages (step 1's output in the work dir: every source, store-rest
    nodes included) on the community's own chat and its two archive-link chats, and the
    output store's (``store_url``) newest on those topics, and hands them to
    :mod:`waku_legacy.archive.clock` (signatures checked there).
    """
    from pyspark.sql import functions as F

    from waku_legacy.archive.clock import (
        ClockEvidence,
        evidence_topics,
        read_evidence,
        read_store_evidence,
    )
    from waku_legacy.migrate.dedup import MESSAGES_DIR, read_messages

    evidence = ClockEvidence()
    if (Path(work_dir) / MESSAGES_DIR).exists():
        topics = list(evidence_topics(community.id))
        rows = (
            read_messages(spark, work_dir)
            .filter(
                ~F.col("quarantined") & ~F.col("duplicate") & F.col("content_topic").isin(topics)
            )
            .select("content_topic", "payload", "version")
            .collect()
        )
        evidence = read_evidence(rows, community.id)
    if store_url:
        from waku_legacy.store import open_store

        with open_store(store_url) as store:
            evidence = evidence.merge(read_store_evidence(store, community.id))
    return evidence
