"""Step 1's files: each Spark task's decoded rows sorted by message hash and written as
Parquet by the Python worker that decoded them, with their key columns in one file per
dedup bucket and the community channels' rows again, beside.

The JVM never holds a decoded row. It used to receive every row from the worker as Arrow,
turn it into its own rows, sort them and write them again (one and a half times the
decode's own time, for rows that never needed the JVM); here pyarrow sorts and writes each
task's rows where they were decoded, and the duplicate copies are found from the small key
files (:data:`~waku_legacy.migrate.dedup.KEY_COLUMNS`, :mod:`.dedup`).

A task holds at most :data:`RUN_BYTES` of decoded rows: past that, its hash-sorted runs are
spilled to local temporary files and merged into its one output file (one row group per run
in memory), so a worker's memory does not grow with its share of the data. Quarantined
records (no message hash) follow the sorted rows in their input order. Each file is written
under a dot-name (which Spark and the driver's merge skip) and renamed when complete, so a
killed or retried task leaves either nothing or a whole file; equal hashes keep the order
the task read them in (a stable sort, a stable merge), so a rerun writes the same rows.
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from waku_legacy.faults import task_fault
from waku_legacy.migrate.dedup import (
    KEY_COLUMNS,
    KEY_SCHEMA,
    key_buckets,
    key_file,
    part_file,
    part_files,
)
from waku_legacy.migrate.records import MESSAGE_SCHEMA
from waku_legacy.migrate.spark import temporaries_swept_on_failure
from waku_legacy.migrate.work_files import ParquetFileWriter, empty_directory, parquet_batches

if TYPE_CHECKING:
    from pyspark.accumulators import Accumulator
    from pyspark.sql import SparkSession

    from waku_legacy.identity.topic_mapping import TopicMapping
    from waku_legacy.migrate.sources import Task

__all__ = [
    "MAX_MESSAGE_FILES",
    "RUN_BYTES",
    "hash_sorted",
    "merge_by_hash",
    "write_message_file",
    "write_message_files",
]

#: the driver merges one file per partition, one batch of each at a time: this bounds its
#: memory whatever the data size (more read tasks than this share files)
MAX_MESSAGE_FILES = 64
#: decoded rows a task sorts in memory before it spills a run
RUN_BYTES = 256 * 1024 * 1024
MERGE_BATCH_ROWS = 4096


def hash_sorted(table: pa.Table) -> pa.Table:
    """``table`` (no null message hash) in message-hash order; equal hashes keep their
    order (Arrow's sort is stable)."""
    if table.num_rows < 2:
        return table
    return table.take(pc.sort_indices(table, [("message_hash", "ascending")]))


def merge_by_hash(streams: list[Iterator[pa.RecordBatch]]) -> Iterator[pa.Table]:
    """Hash-sorted batch ``streams`` (message_hash first, no nulls) merged into hash-sorted
    tables, vectorized: each round takes from every stream's current batch the rows up to
    the smallest last hash among them (the whole batch of the stream that has it) and sorts
    them together. Equal hashes keep the streams' order (a stable sort), as a row-wise merge
    does. Memory: one batch per stream."""
    heads = [(b, s) for s in streams if (b := next(s, None)) is not None]
    while heads:
        bound = min(b.column(0)[-1].as_py() for b, _ in heads)
        parts, rest = [], []
        for batch, stream in heads:
            hashes = batch.column(0)
            if hashes[0].as_py() <= bound:
                taken = pc.sum(pc.less_equal(hashes, pa.scalar(bound, pa.binary()))).as_py()
                parts.append(batch.slice(0, taken))
                batch = batch.slice(taken)
            if not batch.num_rows:
                batch = next(stream, None)
            if batch is not None:
                rest.append((batch, stream))
        heads = rest
        table = pa.Table.from_batches(parts)
        if len(parts) > 1:
            table = hash_sorted(table)
        yield table


class _Runs:
    """A task's decoded rows: hash-sorted runs of at most ``run_bytes`` each (the first
    kept in memory while it is the only one, later ones spilled to ``spill_dir``), and the
    quarantined rows apart (spilled with each run too)."""

    def __init__(self, spill_dir: Path, run_bytes: int) -> None:
        self.spill_dir = spill_dir
        self.run_bytes = run_bytes
        self.held: list[pa.RecordBatch] = []
        self.held_bytes = 0
        self.sorted_files: list[Path] = []
        self.quarantined_files: list[Path] = []

    def add(self, batch: pa.RecordBatch) -> None:
        self.held.append(batch)
        self.held_bytes += batch.nbytes
        if self.held_bytes >= self.run_bytes:
            self._spill()

    def _split(self) -> tuple[pa.Table, pa.Table]:
        """What is held, as its sorted rows and its quarantined rows."""
        table = pa.Table.from_batches(self.held, MESSAGE_SCHEMA)
        self.held, self.held_bytes = [], 0
        if not table.column("message_hash").null_count:  # the usual case: no copy
            return hash_sorted(table), table.slice(0, 0)
        hashed = pc.is_valid(table.column("message_hash"))
        return hash_sorted(table.filter(hashed)), table.filter(pc.invert(hashed))

    def _spill(self) -> None:
        rows, quarantined = self._split()
        number = len(self.sorted_files)
        spills = ((rows, self.sorted_files, "run"), (quarantined, self.quarantined_files, "bad"))
        for table, files, kind in spills:
            path = self.spill_dir / f"{kind}-{number:05d}.parquet"
            pq.write_table(table, path, row_group_size=MERGE_BATCH_ROWS)
            files.append(path)

    def sorted_then_quarantined(self) -> Iterator[pa.Table]:
        """Every row: the hash-sorted ones merged, then the quarantined ones."""
        if not self.sorted_files:  # one run, still in memory
            rows, quarantined = self._split()
            yield rows
            yield quarantined
            return
        if self.held:
            self._spill()
        streams = [parquet_batches(p, MERGE_BATCH_ROWS) for p in self.sorted_files]
        yield from merge_by_hash(streams)
        for path in self.quarantined_files:
            yield pq.read_table(path)


def write_message_file(
    batches: Iterable[pa.RecordBatch],
    messages_path: Path,
    key_paths: Sequence[Path],
    *,
    channels_path: Path | None = None,
    channel_keys: dict[str, bytes] | None = None,
    readable_path: Path | None = None,
    run_bytes: int = RUN_BYTES,
) -> int:
    """Decoded MESSAGE ``batches`` -> ``messages_path`` (every row: the hashed ones in
    message-hash order, then the quarantined ones) and their KEY_COLUMNS in ``key_paths``,
    one file per bucket (:func:`~waku_legacy.migrate.dedup.key_buckets`), and the rows of
    community channels (not quarantined) again in ``channels_path`` when given (the
    archives read those, a small share of the rows; with ``channel_keys``, every channel's
    key by content topic, decrypted: CHANNEL_ARCHIVE_SCHEMA rows; with ``readable_path``
    too, their decoded events there: :mod:`.readable`), every file written whole
    or not at all; returns the rows. Holds at most about ``run_bytes`` of
    rows (more are sorted in runs spilled to a temporary directory and merged)."""
    from waku_legacy.migrate.archives import CHANNEL_ARCHIVE_SCHEMA, channel_archive_rows
    from waku_legacy.migrate.readable import READABLE_SCHEMA, readable_rows

    messages = ParquetFileWriter(messages_path, MESSAGE_SCHEMA)
    key_writers = [ParquetFileWriter(p, KEY_SCHEMA) for p in key_paths]
    channel_schema = MESSAGE_SCHEMA if channel_keys is None else CHANNEL_ARCHIVE_SCHEMA
    channels = None if channels_path is None else ParquetFileWriter(channels_path, channel_schema)
    readable = None
    if channels is not None and channel_keys is not None and readable_path is not None:
        readable = ParquetFileWriter(readable_path, READABLE_SCHEMA)
    # committed in reverse: the messages file last, its presence says the task is done
    writers = [messages, *key_writers, *(w for w in (channels, readable) if w is not None)]
    try:
        with tempfile.TemporaryDirectory(prefix="waku-legacy-runs-") as spill_dir:
            runs = _Runs(Path(spill_dir), run_bytes)
            for batch in batches:
                if batch.num_rows:
                    runs.add(batch)
            for table in runs.sorted_then_quarantined():
                messages.write(table)
                _write_keys(table.select(list(KEY_COLUMNS)), key_writers)
                if channels is not None:
                    in_channel = pc.and_not(
                        pc.is_valid(table.column("community")), table.column("quarantined")
                    )
                    rows = table.filter(in_channel)
                    if channel_keys is not None:
                        archived = channel_archive_rows(rows, channel_keys)
                        if readable is not None:
                            readable.write(readable_rows(rows, archived, channel_keys))
                        rows = archived
                    channels.write(rows)
        task_fault("write:messages")
        for writer in reversed(writers):
            writer.commit()
    except BaseException:
        for writer in writers:
            writer.abort()
        raise
    return messages.rows


def _write_keys(keys: pa.Table, writers: list[ParquetFileWriter]) -> None:
    """Each row of ``keys`` to the writer of its bucket, in order."""
    if len(writers) == 1:
        writers[0].write(keys)
        return
    buckets = key_buckets(keys.column("dedup_key"), len(writers))
    order = np.argsort(buckets, kind="stable")
    grouped = keys.take(pa.array(order))
    start = 0
    for bucket, count in enumerate(np.bincount(buckets, minlength=len(writers))):
        writers[bucket].write(grouped.slice(start, int(count)))
        start += int(count)


def write_message_files(
    spark: SparkSession,
    tasks: list[Task],
    mapping: TopicMapping,
    messages_dir: Path,
    keys_dir: Path,
    channels_dir: Path,
    rows_written: Accumulator[int] | None = None,
    channel_keys: dict[str, bytes] | None = None,
    readable_dir: Path | None = None,
) -> int:
    """Step 1's read, decode and write: the read ``tasks`` in at most MAX_MESSAGE_FILES
    Spark partitions, each partition's decoded rows written by its Python worker as
    ``part-<n>.parquet`` in ``messages_dir``, their keys in one file per bucket in
    ``keys_dir`` (:func:`write_message_file`; as many buckets as partitions) and the
    channels' rows in ``channels_dir`` (decrypted with ``channel_keys`` when given, and then
    decoded into ``readable_dir`` when given); the directories are emptied first; each task adds
    its rows to ``rows_written``. Returns the number of buckets."""
    from waku_legacy.migrate.sources import read_task

    for directory in (messages_dir, keys_dir, channels_dir, readable_dir):
        if directory is not None:
            empty_directory(directory)
    files = max(1, min(len(tasks), MAX_MESSAGE_FILES))

    def write(batches: Iterable[pa.RecordBatch], part: int) -> int:
        keys = [key_file(keys_dir, part, bucket) for bucket in range(files)]
        return write_message_file(
            batches, part_file(messages_dir, part), keys,
            channels_path=part_file(channels_dir, part), channel_keys=channel_keys,
            readable_path=None if readable_dir is None else part_file(readable_dir, part),
        )  # fmt: skip

    def write_partition(part: int, task_ids: Iterable[int]) -> Iterator[int]:
        decoded = (b for i in list(task_ids) for b in read_task(tasks[i], mapping))
        rows = write(decoded, part)
        if rows_written is not None:
            rows_written.add(rows)
        yield rows

    # An RDD job, not a DataFrame one: the tasks take numbers and return counts, and the
    # SQL engine's first use (planning, code generation, Arrow) costs a fresh JVM about two
    # seconds more than the plain Python job, on the run's critical path.
    # ``parallelize`` splits the numbers as ``spark.range`` does: partition i holds
    # [i * n // files, (i + 1) * n // files).
    job = spark.sparkContext.parallelize(range(len(tasks)), files)
    with temporaries_swept_on_failure(spark, (messages_dir, keys_dir, channels_dir, readable_dir)):
        job.mapPartitionsWithIndex(write_partition).collect()
    if not part_files(messages_dir):  # no task: readers need the schema
        write([], 0)
    return files
