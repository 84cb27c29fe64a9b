"""The migration run: sources -> decode -> dedup -> v2 store, quarantine, archives, report.

The decoded messages are written once as Parquet in the work directory by the Python
workers that read and decoded them (one pass over the sources, no shuffle), the copies that
are duplicates found from their keys alone (:mod:`.dedup`), and everything after reads
those. Steps over those files that need no query engine (step 1, the dedup, the PostgreSQL
store) are Python tasks in RDD jobs that take file or task numbers and return counts; the
archives and the quarantine are DataFrame transforms whose per-record logic lives in plain
functions (:mod:`.archives`) applied to Arrow batches with ``mapInArrow``. Nothing is
collected on the driver except counts and per-window metadata.

Rerunning is safe at any point: store inserts are idempotent, the archive store repairs an
interrupted append and skips windows already archived, and the work directory is rewritten.
"""

from __future__ import annotations

import os
import resource
import shutil
import threading
import time
from collections import defaultdict
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from waku_legacy.community_config import load_community_key
from waku_legacy.errors import WakuLegacyError
from waku_legacy.faults import FaultHook, no_fault
from waku_legacy.identity.topic_mapping import TopicMapping
from waku_legacy.migrate.config import MigrateConfig
from waku_legacy.migrate.dedup import CHANNELS_DIR, DUPLICATES_DIR, KEYS_DIR, MESSAGES_DIR
from waku_legacy.migrate.progress import SparkProgress
from waku_legacy.migrate.report import RunReport, SourceReport, WeekRow, write_report_json
from waku_legacy.migrate.sinks import driver_writes_store
from waku_legacy.migrate.steps import MigrationError, spark_failure, timed_step

if TYPE_CHECKING:
    from coincurve import PrivateKey
    from pyspark.sql import SparkSession

    from waku_legacy.migrate.sources import Task

__all__ = ["MigrationError", "run_migration", "start_spark"]


def start_spark(config: MigrateConfig) -> tuple[SparkSession, float]:
    """The SparkSession for ``config`` and how long the JVM took to start (seconds)."""
    from waku_legacy.migrate.spark import spark_session

    started = time.monotonic()
    session = spark_session(
        config.spark.master,
        app_name="waku-legacy-migrate",
        shuffle_partitions=config.spark.shuffle_partitions,
        conf=dict(config.spark.conf),
        # executor traces (a task's Python traceback, its Java frames) go here, not to the
        # terminal; a failed step's one line names the file
        log_file=Path(config.output.work_dir) / "spark.log",
    )
    return session, time.monotonic() - started


def _peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


@dataclass(slots=True)
class _Run:
    """What the steps of one run share: their inputs, the report they fill, their timings."""

    config: MigrateConfig
    spark: SparkSession
    progress: SparkProgress
    fault: FaultHook
    now: int
    mapping: TopicMapping
    work: Path
    report: RunReport
    timing: dict[str, float] = field(default_factory=dict)
    weeks: dict[tuple[str, str, str], WeekRow] = field(default_factory=dict)
    #: the rows step 1 wrote again for the archives (community channels, not quarantined)
    channel_rows: int = 0
    #: step 1 decrypts those rows itself (the archives are not beside the driver's writer)
    decrypt_in_step_1: bool = False
    #: the tasks that decrypt the channel rows decode them for the readable step too
    decode_readable: bool = False
    #: they did: the readable step's events are in the work directory's READABLE_DIR
    readable_decoded: bool = False

    def step(self, name: str, doing: str) -> AbstractContextManager[None]:
        """Time the block as ``timing[name]``; a failure says ``<doing> failed: …``."""
        return timed_step(self.timing, name, doing)


def run_migration(
    config: MigrateConfig,
    *,
    spark: SparkSession | None = None,
    fault: FaultHook = no_fault,
    progress: SparkProgress | None = None,
    archives: bool = True,
    store_batch_size: int = 20_000,
) -> RunReport:
    """Run the whole migration described by ``config``; returns the report."""
    progress = progress or SparkProgress(enabled=False)
    run_started = time.monotonic()
    jvm_seconds = 0.0
    if spark is None:
        progress.log(f"starting Spark ({config.spark.master})")
        # the JVM's start is seconds of silence otherwise (more on a loaded host)
        with progress.bar("start Spark", total=1, unit="jvm") as started:
            spark, jvm_seconds = start_spark(config)
            started.update(1)
    pipeline_started = time.monotonic()
    run = _prepare(config, spark, progress, fault)
    # With a SQLite store the archives run beside its one writer, on the cores it leaves
    # idle, and decrypt there; otherwise they would be the run's last step, and the rows'
    # decryption is cheaper where step 1 already holds them.
    run.decrypt_in_step_1 = archives and not driver_writes_store(config.output.store)
    run.decode_readable = bool(
        archives and config.pipeline.readable and config.output.store and config.communities
    )
    run.timing["jvm_start"] = jvm_seconds
    keys = {str(c.id): load_community_key(c) for c in config.communities}

    with run.step("read_decode_dedup", "reading and decoding the sources"):
        tasks, counts = _read_decode_dedup(run)
    with run.step("count", "counting the messages"):
        _count(run, counts, tasks)
    with run.step("quarantine", "writing the quarantine"):
        _quarantine(run)
    _store_beside_archives(run, keys, archives, store_batch_size)
    if config.pipeline.readable and config.output.store and config.communities:
        with run.step("readable", "indexing the readable history"):
            _readable(run)

    run.report.weeks = sorted(run.weeks.values(), key=lambda w: (w.week, w.community, w.source))
    run.report.totals = _totals(run.report)
    run.timing["pipeline"] = time.monotonic() - pipeline_started
    run.timing["total"] = time.monotonic() - run_started
    run.timing["driver_peak_rss_mb"] = round(_peak_rss_mb(), 1)
    run.report.timing = {k: round(v, 3) for k, v in run.timing.items()}
    if config.output.report:
        Path(config.output.report).parent.mkdir(parents=True, exist_ok=True)
        write_report_json(config.output.report, run.report)
    return run.report


def _prepare(
    config: MigrateConfig, spark: SparkSession, progress: SparkProgress, fault: FaultHook
) -> _Run:
    """The run's clock, topic mapping, work directory and empty report."""
    now = config.pipeline.now if config.pipeline.now is not None else int(time.time())
    work = Path(config.output.work_dir)
    work.mkdir(parents=True, exist_ok=True)
    return _Run(
        config=config, spark=spark, progress=progress, fault=fault, now=now,
        mapping=TopicMapping.build(config.pipeline.default_pubsub_topic, config.communities),
        work=work, report=RunReport(config=config.origin, master=config.spark.master, now=now),
    )  # fmt: skip


def _read_decode_dedup(run: _Run) -> tuple[list[Task], list[dict[str, Any]]]:
    """Step 1: read, decode, deduplicate: one pass over the sources, each task's decoded
    rows sorted and written as Parquet in the work directory by the Python worker that
    decoded them, their keys in bucket files beside (:mod:`.message_files`; the rows never
    enter the JVM), then each bucket's copies to drop found and written by a task of its
    own (:mod:`.dedup`). Returns the read tasks and the rows' counts per group."""
    from waku_legacy.migrate.dedup import write_duplicate_files
    from waku_legacy.migrate.message_files import write_message_files
    from waku_legacy.migrate.sources import plan_sources

    spark, work = run.spark, run.work
    tasks = plan_sources(spark, run.config.sources, work_dir=str(work))
    keys = _channel_keys(run.config) if run.decrypt_in_step_1 else None
    readable_dir = _readable_dir(run) if keys is not None and run.decode_readable else None
    # the rows each write task wrote, as the tasks end (their stages count only a row each)
    rows = spark.sparkContext.accumulator(0)
    with run.progress.spark_step(
        spark, "read, decode, deduplicate", records_from=lambda: rows.value
    ):
        started = time.monotonic()
        buckets = write_message_files(
            spark, tasks, run.mapping, work / MESSAGES_DIR, work / KEYS_DIR, work / CHANNELS_DIR,
            rows_written=rows, channel_keys=keys, readable_dir=readable_dir,
        )  # fmt: skip
        run.readable_decoded = readable_dir is not None
        run.timing["read_decode_dedup.files"] = time.monotonic() - started
        counts = write_duplicate_files(spark, work / KEYS_DIR, work / DUPLICATES_DIR, buckets)
    return tasks, counts


def _readable_dir(run: _Run) -> Path:
    from waku_legacy.migrate.readable import READABLE_DIR

    return run.work / READABLE_DIR


def _channel_keys(config: MigrateConfig) -> dict[str, bytes]:
    """The symmetric key of every configured community channel, by content topic."""
    return {topic: key for c in config.communities for topic, key in c.channel_keys().items()}


def _count(run: _Run, counts: list[dict[str, Any]], tasks: list[Task]) -> None:
    """Step 2: counts per source, community and week, and the shard mapping's, from the
    groups' counts step 1 returned (every row, and the duplicate copies among them)."""
    summed: dict[tuple[Any, ...], int] = defaultdict(int)
    per_topic: dict[tuple[Any, ...], int] = defaultdict(int)
    for g in counts:
        n, topic = g["count"], (g["pubsub_topic"], g["community"], g["channel"])
        if g["duplicate"]:  # never quarantined: moved from the kept messages to the duplicates
            summed[g["source"], g["community"], g["week"], False, False] -= n
            summed[g["source"], g["community"], g["week"], False, True] += n
            per_topic[topic] -= n
            continue
        summed[g["source"], g["community"], g["week"], g["quarantined"], False] += n
        if not g["quarantined"]:
            per_topic[topic] += n
            run.channel_rows += n if g["community"] is not None else 0
    counts_by_group = {k: n for k, n in summed.items() if n}
    tasks_per_source: dict[str, int] = defaultdict(int)
    for task in tasks:
        tasks_per_source[task["source"]] += 1
    sources = {
        s.name: SourceReport(s.name, str(s.kind), s.location, tasks_per_source[s.name])
        for s in run.config.sources
    }
    for (source_name, community, week_name, quarantined, duplicate), n in counts_by_group.items():
        source = sources[source_name]
        key = (week_name, source_name, community or "")
        week = run.weeks.setdefault(key, WeekRow(*key))
        source.records += n
        if quarantined:
            source.quarantined += n
            week.quarantined += n
        elif duplicate:
            source.duplicates += n
            week.duplicates += n
        else:
            source.messages += n
            week.messages += n
    run.report.sources = list(sources.values())
    run.report.mapping = _mapping_rows(run.mapping, {k: n for k, n in per_topic.items() if n})


def _kept_rows(run: _Run) -> int:
    """The messages the store receives (neither quarantined nor a duplicate copy)."""
    return sum(s.messages for s in run.report.sources)


def _decoded_rows(run: _Run) -> int:
    """The rows of step 1's output (every decoded record): what the later Spark steps read."""
    return sum(s.records for s in run.report.sources)


def _mapping_rows(
    mapping: TopicMapping, counts: dict[tuple[Any, ...], int]
) -> list[dict[str, Any]]:
    """The report's shard mapping: kept messages per pubsub topic, community and channel
    (``counts``: (pubsub topic, community, channel) -> messages)."""
    routes = {(r.community, r.channel): ct for ct, r in mapping.routes.items()}
    return sorted(
        (
            {
                "pubsub_topic": pubsub_topic,
                "community": community or "",
                "channel": channel or "",
                "content_topic": routes.get((community, channel), "*"),
                "messages": n,
            }
            for (pubsub_topic, community, channel), n in counts.items()
        ),
        key=lambda m: (m["community"] == "", m["community"], m["channel"], m["pubsub_topic"]),
    )


def _quarantine(run: _Run) -> None:
    """Step 3: the quarantined records as JSON lines (the folder removed when none)."""
    from waku_legacy.migrate.dedup import read_messages
    from waku_legacy.migrate.sinks import write_quarantine

    quarantined = sum(s.quarantined for s in run.report.sources)
    quarantine_dir = run.config.output.quarantine_dir
    if quarantined:
        # Spark jobs over every decoded row (a mailserver full of junk makes this long)
        with run.progress.spark_step(run.spark, "quarantine", records_total=_decoded_rows(run)):
            reasons = write_quarantine(read_messages(run.spark, run.work), quarantine_dir)
    else:
        shutil.rmtree(quarantine_dir, ignore_errors=True)
        reasons = {}
    run.report.quarantine = {"count": quarantined, "path": quarantine_dir, "reasons": reasons}


def _store_beside_archives(
    run: _Run,
    keys: dict[str, PrivateKey | None],
    archives: bool,
    batch_size: int,
) -> None:
    """Steps 4 and 5 side by side: the driver writes the store (one core: SQLite is one
    writer) in a thread while the executors decrypt and encode the archives; each archive
    link is published only once the store is complete (its clock reads the store). A
    failure of either is raised once both have stopped, the store's first."""
    errors: list[BaseException] = []

    def write_store() -> None:
        try:
            cpu = time.thread_time()
            with run.step("store", "writing the store"):
                _store(run, batch_size)
            run.timing["store.thread_cpu"] = time.thread_time() - cpu
        except BaseException as exc:  # re-raised in the caller's thread
            errors.append(exc)

    writer = threading.Thread(target=write_store, name="store-writer", daemon=True)

    def store_written() -> None:
        writer.join()
        if errors:
            raise errors[0]

    from waku_legacy.migrate.spark import local_jvm_yields

    # a SQLite store is written by this process: where the executors share its cores (local
    # mode), they yield to it while it writes
    writes = driver_writes_store(run.config.output.store)
    beside = local_jvm_yields(run.spark) if writes else nullcontext()
    with beside:
        writer.start()
        try:
            with run.step("archives", "building the archives"):
                if archives:
                    _archives(run, keys, store_written)
        finally:
            writer.join()
    store_written()


def _readable(run: _Run) -> None:
    """Step 6: the communities' channel messages, decrypted, decoded and folded into the
    store's own ``history_*`` tables (:mod:`waku_legacy.history`); a rerun adds nothing
    twice. When this run's store received every row it holds, the events the decrypting
    tasks decoded (:mod:`.readable`) are folded in as they would be read back from the
    store; otherwise (a store holding older rows too), or for a channel only a description
    in the store names, the rows are read back from the store and decoded here."""
    from waku_legacy.history.index import HistoryIndex
    from waku_legacy.history.sources import Predecoded, archive_windows, index_from_store
    from waku_legacy.migrate.readable import ReadableEvents

    config = run.config
    windows = {
        str(c.id): archive_windows(config.output.archive_dir, c.id, config.pipeline.flavour)
        for c in config.communities
    }  # each message's provenance names the archive holding it
    predecoded: Predecoded | None = None
    only_this_run = run.report.store.get("inserted") == run.report.store.get("total")
    if run.readable_decoded and only_this_run:
        predecoded = ReadableEvents(_readable_dir(run), run.work / DUPLICATES_DIR)
    run.report.store["readable_from"] = "decrypting tasks" if predecoded else "store"
    with HistoryIndex.open(config.output.store) as index:
        counts = index_from_store(config.output.store, config.communities, index,
                                  windows=windows, workers=os.cpu_count() or 1,
                                  predecoded=predecoded)  # fmt: skip
    run.report.store["readable"] = counts.to_json()


def _store(run: _Run, batch_size: int) -> None:
    """Step 4: the kept messages into the v2 store (none configured: nothing)."""
    from waku_legacy.migrate.sinks import (
        iter_kept_batches,
        write_postgres_store,
        write_sqlite_store,
    )
    from waku_legacy.store import is_postgres_url, open_store

    url = run.config.output.store
    if not url:
        return
    if is_postgres_url(url):
        sent = run.spark.sparkContext.accumulator(0)  # rows each task sent, as it ends
        try:
            with run.progress.spark_step(
                run.spark, "store (PostgreSQL)", records_total=_kept_rows(run),
                records_from=lambda: sent.value,
            ):  # fmt: skip
                inserted = write_postgres_store(
                    run.spark, run.work / MESSAGES_DIR, run.work / DUPLICATES_DIR, url,
                    rows_written=sent,
                )  # fmt: skip
        except Exception as exc:
            raise spark_failure("writing the PostgreSQL store", exc) from exc
    else:
        from waku_legacy.store.sqlite import SqliteMessageStore

        with (
            open_store(url) as store,
            run.progress.bar("store", total=_kept_rows(run), unit="msg") as bar,
        ):
            assert isinstance(store, SqliteMessageStore)  # every URL but PostgreSQL's
            inserted = write_sqlite_store(
                store, iter_kept_batches(run.work / MESSAGES_DIR, run.work / DUPLICATES_DIR),
                batch_size=batch_size, fault=run.fault, progress=bar.update,
            )  # fmt: skip
    with open_store(url) as store:
        run.report.store = {
            "url": _display_url(url),
            "inserted": inserted,
            "total": store.count(),
            "envelopes": store.count_envelopes(),
        }


def _archives(
    run: _Run,
    keys: dict[str, PrivateKey | None],
    store_written: Callable[[], None],
) -> None:
    """Step 5: the archives, one community at a time; their late messages join the weeks.
    ``store_written`` returns once the store is complete (called before a link is made)."""
    from waku_legacy.migrate.archive_jobs import ARCHIVE_ROWS_DIR, decrypt_channel_files
    from waku_legacy.migrate.archives import build_archives

    config = run.config
    # step 1 wrote the channels' rows apart, as archive rows when it decrypted them
    rows_dir, duplicates_dir = run.work / CHANNELS_DIR, run.work / DUPLICATES_DIR
    if not run.decrypt_in_step_1:  # decrypted here, beside the driver's store writer
        with (
            run.step("archives.decrypt", "decrypting the channel messages"),
            run.progress.spark_step(run.spark, "decrypt channels", records_total=run.channel_rows),
        ):
            decrypt_channel_files(
                run.spark, rows_dir, duplicates_dir, run.work / ARCHIVE_ROWS_DIR,
                _channel_keys(config), beside_driver_writer=True,
                readable_dir=_readable_dir(run) if run.decode_readable else None,
            )  # fmt: skip
        run.readable_decoded = run.decode_readable
        rows_dir = run.work / ARCHIVE_ROWS_DIR
    for community in config.communities:
        try:
            with run.progress.spark_step(
                run.spark, f"archives {str(community.id)[:10]}…", records_total=run.channel_rows
            ):
                result = build_archives(
                    run.spark, community, rows_dir=rows_dir, duplicates_dir=duplicates_dir,
                    archive_dir=config.output.archive_dir,
                    torrent_dir=config.output.torrent_dir,
                    work_dir=str(run.work), now=run.now, flavour=config.pipeline.flavour,
                    fault=run.fault, community_key=keys[str(community.id)],
                    logos_storage_url=config.logos_storage_url,
                    store_url=config.output.store,  # also read for used link clocks
                    store_written=store_written,
                )  # fmt: skip
        except WakuLegacyError:
            raise
        except Exception as exc:
            raise spark_failure(f"archiving community {community.id}", exc) from exc
        run.report.communities.append(result.to_json())
        for late in result.late_by_week:
            key = (late["week"], late["source"], str(community.id))
            run.weeks.setdefault(key, WeekRow(*key)).late += late["late"]


def _totals(report: RunReport) -> dict[str, int]:
    return {
        "records": sum(s.records for s in report.sources),
        "messages": sum(s.messages for s in report.sources),
        "duplicates": sum(s.duplicates for s in report.sources),
        "quarantined": sum(s.quarantined for s in report.sources),
        "late": sum(c["late"] for c in report.communities),
        "archives_added": sum(c["archives_added"] for c in report.communities),
    }


def _display_url(url: str) -> str:
    if url.startswith(("postgresql://", "postgres://")):
        from waku_legacy.store.dsn import redact_dsn

        return redact_dsn(url)
    return url
