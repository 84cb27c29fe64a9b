"""The archives' Spark jobs: Python tasks over step 1's channel files, no SQL engine.

Step 1 wrote the community channels' rows again, one file per partition
(:data:`~waku_legacy.migrate.dedup.CHANNELS_DIR`): as CHANNEL_ARCHIVE rows when it decrypted
them itself, else as MESSAGE rows, which :func:`decrypt_channel_files` turns into
CHANNEL_ARCHIVE files (:data:`ARCHIVE_ROWS_DIR`) beside the driver's store writer. Every
task reads whole files with pyarrow, leaves out the duplicate copies in them (the dedup's
copies of that file's partition) and returns small results, so no row passes through the
JVM but the encoded windows' shuffle:

- :func:`count_archivable`: one community's rows per (ok, reason), its oldest archivable
  message, and those from ``now`` on (future);
- :func:`encode_windows`: the map side cuts each file's archivable rows in [start, now) by
  7-day window and hands Spark's shuffle one Arrow table per file and window, keyed by the
  window; the reduce side takes its windows in order, one at a time, and encodes each
  (:func:`~waku_legacy.migrate.archives.encode_window`).

In a fresh JVM the SQL engine's first planning costs seconds of driver CPU (3-4 s measured
beside the PostgreSQL store's tasks), and its jobs send every row through the JVM and back;
these jobs do neither.
"""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from waku_legacy.migrate.archives import (
    CHANNEL_ARCHIVE_SCHEMA,
    CHANNEL_ROW_COLUMNS,
    ENCODE_COLUMNS,
    channel_archive_rows,
    raise_niceness,
    yield_cpu_to_driver,
)
from waku_legacy.migrate.dedup import file_copies, part_files, part_of
from waku_legacy.migrate.spark import run_per_file, temporaries_swept_on_failure
from waku_legacy.migrate.work_files import ParquetFileWriter, empty_directory, parquet_batches

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = [
    "ARCHIVE_ROWS_DIR",
    "ArchivableCounts",
    "count_archivable",
    "decrypt_channel_files",
    "encode_windows",
    "kept_channel_batches",
    "window_tables",
]

#: where :func:`decrypt_channel_files` writes the CHANNEL_ARCHIVE rows it makes of step 1's
#: MESSAGE-row channel files
ARCHIVE_ROWS_DIR = "archive-rows"
_READ_BATCH = 4096
#: a map task's held rows before it hands their windows to the shuffle
_FRAGMENT_BYTES = 64 * 1024 * 1024
#: the niceness of the decrypting tasks beside the driver's writer when they also decode the
#: readable events (else :func:`~.archives.yield_cpu_to_driver`'s 10). Their work is then the
#: larger side of the store step, and at 10 (CFS weight 110 against a nice-0 process's 1024)
#: any other load on the machine starves them: the 1M bench's decrypt job took 30-36 s
#: beside a 22-30 s store at load 2.4-4.3, 18-20 s beside 20-22 s when idle. At 4 (weight
#: 423) two tasks beside the writer still leave it a whole core of two (2 x 1024 / (1024 +
#: 2 x 423) > 1) and take 4 times the share they took of other processes' time.
READABLE_TASK_NICENESS = 4


def _identities(source: pa.Array | pa.ChunkedArray, location: pa.Array | pa.ChunkedArray) -> Any:
    """One string per record (its source and location: unique per record)."""
    return pc.binary_join_element_wise(source, location, "\x1f")


def _copy_identities(duplicates_dir: Path, part: int) -> pa.Array:
    """The identities (:func:`_identities`) of the copies to drop in step 1's file ``part``."""
    copies = file_copies(duplicates_dir, part, ("source", "location"))
    return pa.array(_identities(copies.column("source"), copies.column("location")))


def kept_channel_batches(
    path: Path, duplicates_dir: Path, columns: Iterable[str], community: str | None = None
) -> Iterator[pa.RecordBatch]:
    """The ``columns`` of the rows of one of step 1's channel files (or
    :func:`decrypt_channel_files`'s) that are not duplicate copies, only ``community``'s
    when given, a batch at a time."""
    columns = list(columns)
    copies = _copy_identities(duplicates_dir, part_of(path))
    read = list(dict.fromkeys([*columns, "source", "location", "community"]))
    for batch in parquet_batches(path, _READ_BATCH, read):
        keep = None
        if community is not None:
            keep = pc.equal(batch.column("community"), community)
        if len(copies):
            fresh = pc.invert(
                pc.is_in(_identities(batch.column("source"), batch.column("location")),
                         value_set=copies)
            )  # fmt: skip
            keep = fresh if keep is None else pc.and_(keep, fresh)
        kept = batch if keep is None else batch.filter(keep)
        if kept.num_rows:
            yield kept.select(columns)


def decrypt_channel_files(
    spark: SparkSession,
    channels_dir: Path,
    duplicates_dir: Path,
    out_dir: Path,
    keys: dict[str, bytes],
    *,
    beside_driver_writer: bool = False,
    readable_dir: Path | None = None,
) -> int:
    """Step 1's MESSAGE-row channel files as CHANNEL_ARCHIVE files in ``out_dir`` (emptied
    first; one per file, the same name), their duplicate copies left out; ``keys``: every
    channel's symmetric key by content topic; ``readable_dir``: their decoded events
    there too (:mod:`.readable`). Returns the rows written. With
    ``beside_driver_writer`` the tasks yield the CPU to the driver's writer (less when they
    decode too: :data:`READABLE_TASK_NICENESS`)."""
    from waku_legacy.migrate.readable import READABLE_SCHEMA, readable_rows

    empty_directory(out_dir)
    if readable_dir is not None:
        empty_directory(readable_dir)

    def decrypt(path: Path) -> Iterator[int]:
        if beside_driver_writer and readable_dir is not None:
            raise_niceness(READABLE_TASK_NICENESS)
        elif beside_driver_writer:
            yield_cpu_to_driver()
        writer = ParquetFileWriter(out_dir / path.name, CHANNEL_ARCHIVE_SCHEMA)
        readable = None
        if readable_dir is not None:
            readable = ParquetFileWriter(readable_dir / path.name, READABLE_SCHEMA)
        writers = [w for w in (writer, readable) if w is not None]
        columns = (*CHANNEL_ROW_COLUMNS, "pubsub_topic") if readable else CHANNEL_ROW_COLUMNS
        try:
            for batch in kept_channel_batches(path, duplicates_dir, columns):
                rows = pa.Table.from_batches([batch])
                archived = channel_archive_rows(rows, keys)
                writer.write(archived)
                if readable is not None:
                    readable.write(readable_rows(rows, archived, keys))
            for done in reversed(writers):
                done.commit()
        except BaseException:
            for failed in writers:
                failed.abort()
            raise
        yield writer.rows

    with temporaries_swept_on_failure(spark, (out_dir, readable_dir)):
        return sum(run_per_file(spark, part_files(channels_dir), decrypt))


@dataclass(slots=True)
class ArchivableCounts:
    """One community's CHANNEL_ARCHIVE rows (duplicate copies left out), counted."""

    archivable: int = 0
    undecryptable: dict[str, int] = field(default_factory=dict)  # per reason
    oldest: int | None = None  # the oldest archivable message's timestamp (seconds)
    future: int = 0  # archivable messages at or after ``now``

    def add(self, other: ArchivableCounts) -> None:
        self.archivable += other.archivable
        for reason, n in other.undecryptable.items():
            self.undecryptable[reason] = self.undecryptable.get(reason, 0) + n
        if other.oldest is not None:
            self.oldest = other.oldest if self.oldest is None else min(self.oldest, other.oldest)
        self.future += other.future


def _count_batch(batch: pa.RecordBatch, now: int) -> ArchivableCounts:
    ok = batch.column("ok")
    good = batch.column("timestamp").filter(ok)
    counts = ArchivableCounts(archivable=len(good))
    if len(good):
        counts.oldest = pc.min(good).as_py()
        counts.future = pc.sum(pc.greater_equal(good, now)).as_py() or 0
    bad = batch.column("reason").filter(pc.invert(ok)).to_pylist()
    counts.undecryptable = dict(Counter(str(reason) for reason in bad))
    return counts


def count_archivable(
    spark: SparkSession, rows_dir: Path, duplicates_dir: Path, community: str, now: int
) -> ArchivableCounts:
    """:class:`ArchivableCounts` of ``community``'s rows in the CHANNEL_ARCHIVE files of
    ``rows_dir``, a task per file."""

    def count(path: Path) -> Iterator[ArchivableCounts]:
        total = ArchivableCounts()
        columns = ("ok", "reason", "timestamp")
        for batch in kept_channel_batches(path, duplicates_dir, columns, community):
            total.add(_count_batch(batch, now))
        yield total

    result = ArchivableCounts()
    for counts in run_per_file(spark, part_files(rows_dir), count):
        result.add(counts)
    return result


def _ipc_bytes(table: pa.Table) -> bytes:
    """``table`` as an Arrow IPC stream: only its own rows (pickling a slice of a table
    would send every buffer it shares with the whole)."""
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    return bytes(sink.getvalue())


def _ipc_table(data: bytes) -> pa.Table:
    return pa.ipc.open_stream(data).read_all()


def window_tables(
    batches: Iterable[pa.RecordBatch], *, start: int, now: int, partition: int
) -> Iterator[tuple[int, pa.Table]]:
    """Archive rows (ENCODE_COLUMNS and ``ok``) -> (window, its archivable rows in [start,
    now) with a ``window`` column), a table per window of every :data:`_FRAGMENT_BYTES` of
    rows held. Window ``w`` holds ``start + w * partition`` <= timestamp < the next."""
    held: list[pa.Table] = []
    size = 0

    def flush() -> Iterator[tuple[int, pa.Table]]:
        table = pa.concat_tables(held)
        table = table.take(pc.sort_indices(table, [("window", "ascending")]))
        windows = table.column("window").to_numpy()
        edges = [0, *(np.flatnonzero(np.diff(windows)) + 1).tolist(), len(windows)]
        for begin, end in itertools.pairwise(edges):
            yield int(windows[begin]), table.slice(begin, end - begin)

    for batch in batches:
        timestamp = batch.column("timestamp")
        in_range = pc.and_(
            batch.column("ok"),
            pc.and_(pc.greater_equal(timestamp, start), pc.less(timestamp, now)),
        )
        rows = pa.Table.from_batches([batch.filter(in_range).select(list(ENCODE_COLUMNS))])
        if not rows.num_rows:
            continue
        # integer division: every timestamp here is at or after start
        window = pc.divide(pc.subtract(rows.column("timestamp"), start), partition)
        held.append(rows.append_column("window", window))
        size += rows.nbytes
        if size >= _FRAGMENT_BYTES:
            yield from flush()
            held, size = [], 0
    if held:
        yield from flush()


def encode_windows(
    spark: SparkSession,
    rows_dir: Path,
    duplicates_dir: Path,
    community: str,
    *,
    start: int,
    now: int,
    partition: int,
    encode: Callable[[pa.Table], dict[str, Any]],
) -> list[dict[str, Any]]:
    """``community``'s archivable rows in [start, now) of the CHANNEL_ARCHIVE files in
    ``rows_dir``, by window, each window's rows handed to ``encode`` (on an executor, the
    window's rows together, one window in memory at a time); returns what it returned, in
    window order."""
    files = part_files(rows_dir)
    if not files or now <= start:
        return []
    windows = -(-(now - start) // partition)
    partitions = max(1, min(windows, max(len(files), spark.sparkContext.defaultParallelism)))

    def cut(numbers: Iterable[int]) -> Iterator[tuple[int, bytes]]:
        for number in numbers:
            batches = kept_channel_batches(files[number], duplicates_dir,
                                           (*ENCODE_COLUMNS, "ok"), community)  # fmt: skip
            for window, table in window_tables(batches, start=start, now=now,
                                               partition=partition):  # fmt: skip
                yield window, _ipc_bytes(table)

    def encode_partition(records: Iterable[tuple[int, bytes]]) -> Iterator[dict[str, Any]]:
        for _, fragments in itertools.groupby(records, key=lambda record: record[0]):
            yield encode(pa.concat_tables([_ipc_table(data) for _, data in fragments]))

    numbers = spark.sparkContext.parallelize(range(len(files)), len(files))
    by_window = numbers.mapPartitions(cut).repartitionAndSortWithinPartitions(
        partitions, partitionFunc=lambda window: window
    )
    return sorted(by_window.mapPartitions(encode_partition).collect(), key=lambda r: r["window"])
