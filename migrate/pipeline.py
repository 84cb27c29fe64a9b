"""The migration run: sources -> decode -> dedup -> v2 store, quarantine, archives, report.

Every stage is a DataFrame -> DataFrame transform whose per-record logic lives in plain
functions (:mod:`.decode`, :mod:`.archives`) applied to Arrow batches with ``mapInArrow``;
nothing is collected on the driver except counts and per-window metadata. The deduplicated
messages are written once as Parquet in the work directory (one pass over the sources) and
everything after reads that.

Rerunning is safe at any point: store inserts are idempotent, the archive store repairs an
interrupted append and skips windows already archived, and the work directory is rewritten.
"""

from __future__ import annotations

import resource
import shutil
import time
from collections import defaultdict
from pathlib import Path
from typing import TYPE_CHECKING, Any

from waku_legacy.errors import ConfigError, WakuLegacyError
from waku_legacy.faults import FaultHook, no_fault
from waku_legacy.identity.topic_mapping import TopicMapping
from waku_legacy.migrate.config import MigrateConfig
from waku_legacy.migrate.progress import Progress
from waku_legacy.migrate.records import MESSAGE_SCHEMA, spark_ddl
from waku_legacy.migrate.report import RunReport, SourceReport, WeekRow

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

__all__ = ["MigrationError", "run_migration", "start_spark"]

PARQUET_ROW_GROUP_BYTES = 4 * 1024 * 1024
MAX_MESSAGE_FILES = 64


class MigrationError(WakuLegacyError):
    """A migration step that failed (the message says which, and why)."""


def start_spark(config: MigrateConfig) -> tuple[SparkSession, float]:
    """The SparkSession for ``config`` and how long the JVM took to start (seconds)."""
    from waku_legacy.migrate.spark import spark_session

    started = time.monotonic()
    session = spark_session(
        config.spark.master,
        app_name="waku-legacy-migrate",
        shuffle_partitions=config.spark.shuffle_partitions,
        conf=dict(config.spark.conf),
    )
    return session, time.monotonic() - started


def _spark_failure(step: str, exc: Exception) -> MigrationError:
    """Turn a Spark failure (a Python error in a task, a JVM error) into one clear line."""
    text = str(exc)
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    ours = [ln for ln in lines if "waku_legacy" in ln and "Error" in ln and ": " in ln]
    errors = [ln for ln in lines if ("Error: " in ln or "Exception: " in ln) and "File " not in ln]
    detail = (ours or errors or lines or [type(exc).__name__])[-1]
    return MigrationError(f"{step} failed: {detail[:500]}")


def _community_key(path: str | None) -> Any:
    if not path:
        return None
    from waku_legacy.crypto.key_file import load_node_key

    try:
        return load_node_key(path)
    except ConfigError as exc:
        raise ConfigError(f"community key_file: {exc}") from exc


def _peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def decode_and_deduplicate(raw: DataFrame, mapping: TopicMapping, partitions: int) -> DataFrame:
    """RAW -> MESSAGE rows with a ``duplicate`` flag (the pipeline's core transform), in
    exactly ``partitions`` partitions (by dedup key)."""
    from waku_legacy.migrate.decode import decode_batches
    from waku_legacy.migrate.dedup import deduplicate

    decoded = raw.mapInArrow(lambda it: decode_batches(it, mapping), spark_ddl(MESSAGE_SCHEMA))
    # An explicit count (adaptive execution does not change it): the driver merges one file
    # per partition, so this bounds its memory whatever the data size.
    return deduplicate(decoded.repartition(partitions, "dedup_key"))


def message_partitions(config: MigrateConfig, spark: SparkSession) -> int:
    wanted = config.spark.shuffle_partitions or 2 * spark.sparkContext.defaultParallelism
    return max(1, min(wanted, MAX_MESSAGE_FILES))


def run_migration(
    config: MigrateConfig,
    *,
    spark: SparkSession | None = None,
    fault: FaultHook = no_fault,
    progress: Progress | None = None,
    archives: bool = True,
    store_batch_size: int = 20_000,
) -> RunReport:
    """Run the whole migration described by ``config``; returns the report."""
    from pyspark.sql import functions as F

    from waku_legacy.migrate.archives import build_archives
    from waku_legacy.migrate.sinks import (
        iter_kept_sorted,
        write_postgres_store,
        write_quarantine,
        write_sqlite_store,
    )
    from waku_legacy.migrate.sources import read_sources

    progress = progress or Progress(enabled=False)
    timing: dict[str, float] = {}
    run_started = time.monotonic()
    jvm_seconds = 0.0
    if spark is None:
        progress.log(f"starting Spark ({config.spark.master})")
        spark, jvm_seconds = start_spark(config)
    timing["jvm_start"] = jvm_seconds
    pipeline_started = time.monotonic()
    now = config.pipeline.now if config.pipeline.now is not None else int(time.time())
    mapping = TopicMapping.build(config.pipeline.default_pubsub_topic, config.communities)
    keys = {str(c.id): _community_key(c.key_file) for c in config.communities}
    work = Path(config.output.work_dir)
    work.mkdir(parents=True, exist_ok=True)
    messages_dir = work / "messages"
    report = RunReport(config=config.origin, master=config.spark.master, now=now)

    # 1. read, decode, deduplicate: one pass over the sources, written once.
    step = time.monotonic()
    try:
        raw, tasks = read_sources(spark, config.sources, work_dir=str(work))
        with progress.spark_step(spark, "read, decode, deduplicate"):
            ranked = decode_and_deduplicate(raw, mapping, message_partitions(config, spark))
            # Small row groups: the driver streams these files back (store write) and holds
            # one decoded row group per file at a time, so this bounds its memory.
            (
                ranked.sortWithinPartitions("message_hash")
                .write.mode("overwrite")
                .option("parquet.block.size", str(PARQUET_ROW_GROUP_BYTES))
                .parquet(str(messages_dir))
            )
    except WakuLegacyError:
        raise
    except Exception as exc:
        raise _spark_failure("reading and decoding the sources", exc) from exc
    timing["read_decode_dedup"] = time.monotonic() - step
    messages = spark.read.parquet(str(messages_dir))

    # 2. counts per source, community, week.
    step = time.monotonic()
    with progress.spark_step(spark, "count"):
        counts = (
            messages.groupBy("source", "community", "week", "quarantined", "duplicate")
            .count()
            .collect()
        )
        mapping_counts = (
            messages.filter(~F.col("quarantined") & ~F.col("duplicate"))
            .groupBy("pubsub_topic", "community", "channel")
            .count()
            .collect()
        )
    tasks_per_source: dict[str, int] = defaultdict(int)
    for task in tasks:
        tasks_per_source[task["source"]] += 1
    sources = {
        s.name: SourceReport(s.name, str(s.kind), s.location, tasks_per_source[s.name])
        for s in config.sources
    }
    weeks: dict[tuple[str, str, str], WeekRow] = {}
    for row in counts:
        source = sources[row["source"]]
        key = (row["week"], row["source"], row["community"] or "")
        week = weeks.setdefault(key, WeekRow(*key))
        n = row["count"]
        source.records += n
        if row["quarantined"]:
            source.quarantined += n
            week.quarantined += n
        elif row["duplicate"]:
            source.duplicates += n
            week.duplicates += n
        else:
            source.messages += n
            week.messages += n
    report.sources = list(sources.values())
    routes = {(r.community, r.channel): ct for ct, r in mapping.routes.items()}
    report.mapping = sorted(
        (
            {
                "pubsub_topic": r["pubsub_topic"],
                "community": r["community"] or "",
                "channel": r["channel"] or "",
                "content_topic": routes.get((r["community"], r["channel"]), "*"),
                "messages": r["count"],
            }
            for r in mapping_counts
        ),
        key=lambda m: (m["community"] == "", m["community"], m["channel"], m["pubsub_topic"]),
    )
    timing["count"] = time.monotonic() - step

    # 3. quarantine.
    quarantined = sum(s.quarantined for s in report.sources)
    quarantine_dir = config.output.quarantine_dir
    if quarantined:
        reasons = write_quarantine(messages, quarantine_dir)
    else:
        shutil.rmtree(quarantine_dir, ignore_errors=True)
        reasons = {}
    report.quarantine = {"count": quarantined, "path": quarantine_dir, "reasons": reasons}

    # 4. the v2 store.
    step = time.monotonic()
    kept_total = sum(s.messages for s in report.sources)
    if config.output.store:
        from waku_legacy.store import is_postgres_url, open_store

        url = config.output.store
        if is_postgres_url(url):
            kept = messages.filter(~F.col("quarantined") & ~F.col("duplicate"))
            try:
                with progress.spark_step(spark, "store (PostgreSQL)"):
                    inserted = write_postgres_store(kept, url)
            except Exception as exc:
                raise _spark_failure("writing the PostgreSQL store", exc) from exc
        else:
            with (
                open_store(url) as store,
                progress.bar("store", total=kept_total, unit="msg") as bar,
            ):
                inserted = write_sqlite_store(
                    store, iter_kept_sorted(messages_dir), batch_size=store_batch_size,
                    fault=fault, progress=bar.update,
                )  # fmt: skip
        with open_store(url) as store:
            report.store = {
                "url": _display_url(url),
                "inserted": inserted,
                "total": store.count(),
                "envelopes": store.count_envelopes(),
            }
    timing["store"] = time.monotonic() - step

    # 5. archives, one community at a time.
    step = time.monotonic()
    if archives and config.communities:
        kept_channels = messages.filter(
            ~F.col("quarantined") & ~F.col("duplicate") & F.col("community").isNotNull()
        )
        for community in config.communities:
            try:
                with progress.spark_step(spark, f"archives {str(community.id)[:10]}…"):
                    result = build_archives(
                        spark, kept_channels, community,
                        archive_dir=config.output.archive_dir,
                        torrent_dir=config.output.torrent_dir,
                        work_dir=str(work), now=now, flavour=config.pipeline.flavour,
                        fault=fault, community_key=keys[str(community.id)],
                        logos_storage_url=config.logos_storage_url,
                        store_url=config.output.store,  # also read for used link clocks
                    )  # fmt: skip
            except WakuLegacyError:
                raise
            except Exception as exc:
                raise _spark_failure(f"archiving community {community.id}", exc) from exc
            report.communities.append(result.to_json())
            for late in result.late_by_week:
                key = (late["week"], late["source"], str(community.id))
                weeks.setdefault(key, WeekRow(*key)).late += late["late"]
    timing["archives"] = time.monotonic() - step
    report.weeks = sorted(weeks.values(), key=lambda w: (w.week, w.community, w.source))

    report.totals = {
        "records": sum(s.records for s in report.sources),
        "messages": kept_total,
        "duplicates": sum(s.duplicates for s in report.sources),
        "quarantined": quarantined,
        "late": sum(c["late"] for c in report.communities),
        "archives_added": sum(c["archives_added"] for c in report.communities),
    }
    timing["pipeline"] = time.monotonic() - pipeline_started
    timing["total"] = time.monotonic() - run_started
    timing["driver_peak_rss_mb"] = round(_peak_rss_mb(), 1)
    report.timing = {k: round(v, 3) for k, v in timing.items()}
    if config.output.report:
        import json

        from waku_legacy.durable import write_atomic

        Path(config.output.report).parent.mkdir(parents=True, exist_ok=True)
        write_atomic(
            Path(config.output.report),
            (json.dumps(report.to_json(), indent=2) + "\n").encode(),
            step="report",
        )
    return report


def _display_url(url: str) -> str:
    if url.startswith(("postgresql://", "postgres://")):
        from waku_legacy.store.dsn import redact_dsn

        return redact_dsn(url)
    return url
