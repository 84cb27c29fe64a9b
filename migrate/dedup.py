"""Deduplication across sources: one message per ``dedup_key`` (see :mod:`.decode`).

Which copy is kept does not depend on partitioning or input order: a v1 envelope before a v2
record (it carries the original envelope bytes v1 clients are served), then the source that
comes first in the config, then the record's location. Every other copy is marked
``duplicate`` and counted against its own source. Quarantined records have a key of their
own (derived from their provenance), so they are never anyone's duplicate.

The decision needs only the keys (KEY_COLUMNS), and not the JVM: step 1's Python workers
write each row's keys into one of ``buckets`` key files by its ``dedup_key``
(:func:`key_buckets`; every copy of a message in the same bucket), and one Spark task per
bucket (:func:`write_duplicate_files`) reads that bucket's files, finds the copies to drop
(:func:`copies_to_drop`) and writes them, hash-sorted, as one file of the duplicates
directory, and returns the bucket's counts per group (:func:`group_counts`) for the report.
:func:`mark_duplicates` flags the copies in the full rows. A record is identified by its
source and location (unique per record: the provenance quarantine keys are derived from
too).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from waku_legacy.migrate.records import MESSAGE_SCHEMA
from waku_legacy.migrate.spark import temporaries_swept_on_failure
from waku_legacy.migrate.work_files import empty_directory, write_parquet_file

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

__all__ = [
    "CHANNELS_DIR",
    "COPY_SCHEMA",
    "COUNT_COLUMNS",
    "COUNT_SCHEMA",
    "DUPLICATES_DIR",
    "DUPLICATE_COLUMNS",
    "GROUP_COLUMNS",
    "KEYS_DIR",
    "KEY_COLUMNS",
    "KEY_SCHEMA",
    "MESSAGES_DIR",
    "PART_COLUMN",
    "copies_to_drop",
    "file_copies",
    "group_counts",
    "key_buckets",
    "key_file",
    "mark_duplicates",
    "part_file",
    "part_files",
    "part_of",
    "read_messages",
    "write_duplicate_files",
]

#: step 1's output in the work directory: every decoded row (without the flag), the
#: community channels' rows again (what the archives read), their KEY_COLUMNS in bucket
#: files, and the :func:`copies_to_drop` of each bucket
MESSAGES_DIR = "messages"
CHANNELS_DIR = "channels"
KEYS_DIR = "keys"
DUPLICATES_DIR = "duplicates"

#: what :func:`copies_to_drop` returns of each copy to drop: which record it is (the
#: message hash first: the driver's store stream is in hash order, and so are these), then
#: the groups it is counted in
DUPLICATE_COLUMNS = ("message_hash", "source", "location")
COUNT_COLUMNS = ("community", "week", "pubsub_topic", "channel")
#: what it reads of each MESSAGE row
KEY_COLUMNS = ("dedup_key", "from_v2", "rank", "quarantined", *DUPLICATE_COLUMNS, *COUNT_COLUMNS)
KEY_SCHEMA = pa.schema([MESSAGE_SCHEMA.field(c) for c in KEY_COLUMNS])
#: which of step 1's files (its partition) a copy to drop is in: the PostgreSQL store is
#: written by one task per file, each leaving out only the copies in its own file
PART_COLUMN = "part"
COPY_SCHEMA = pa.schema(
    [*(MESSAGE_SCHEMA.field(c) for c in (*DUPLICATE_COLUMNS, *COUNT_COLUMNS)),
     (PART_COLUMN, pa.int32())]
)  # fmt: skip
#: the report's groups: every row counted once, a duplicate copy also with duplicate=True
GROUP_COLUMNS = ("source", *COUNT_COLUMNS, "quarantined")
COUNT_SCHEMA = pa.schema(
    [*(MESSAGE_SCHEMA.field(c) for c in GROUP_COLUMNS), ("duplicate", pa.bool_()),
     ("count", pa.int64())]
)  # fmt: skip
#: the copy kept of a key is the first in this order
_KEEP_ORDER = [(c, "ascending") for c in ("dedup_key", "from_v2", "rank", "source", "location")]


def key_buckets(dedup_keys: pa.Array | pa.ChunkedArray, buckets: int) -> np.ndarray:
    """The bucket (0 .. ``buckets`` - 1) of each key: its first two bytes modulo
    ``buckets`` (the keys are SHA-256 hashes, so the buckets are even)."""
    if isinstance(dedup_keys, pa.ChunkedArray):
        dedup_keys = dedup_keys.combine_chunks()
    prefix = pc.cast(pc.binary_slice(dedup_keys, 0, 2), pa.binary(2))
    values = np.frombuffer(prefix.buffers()[1], dtype=">u2")
    return values[prefix.offset : prefix.offset + len(prefix)] % buckets


def part_file(directory: Path, part: int) -> Path:
    """The file of step-1 partition (or dedup bucket) ``part`` in ``directory``: the
    messages, channels and duplicates folders hold one per partition or bucket."""
    return directory / f"part-{part:05d}.parquet"


def part_files(directory: Path) -> list[Path]:
    """Every :func:`part_file` in ``directory``, in part order (a file still being written
    has a dot-name, so it is not among them)."""
    return sorted(directory.glob("part-*.parquet"))


def key_file(keys_dir: Path, part: int, bucket: int) -> Path:
    """The key file of step 1's partition ``part`` for ``bucket``."""
    return keys_dir / f"part-{part:05d}-{bucket:05d}.parquet"


def part_of(path: Path) -> int:
    """The step-1 partition of a :func:`part_file` or :func:`key_file`."""
    return int(path.name.split("-")[1].split(".")[0])


def file_copies(duplicates_dir: Path, part: int, columns: Iterable[str]) -> pa.Table:
    """The ``columns`` of the copies to drop that are in step 1's file ``part``: every
    bucket's file of ``duplicates_dir`` read for that part's rows (memory for that file's
    copies only)."""
    columns = list(columns)
    tables = [
        pq.read_table(p, columns=columns, filters=[(PART_COLUMN, "=", part)])
        for p in part_files(duplicates_dir)
    ]
    if not tables:
        return COPY_SCHEMA.empty_table().select(columns)
    return pa.concat_tables(tables)


def _bucket_keys(keys_dir: Path, bucket: int) -> pa.Table:
    """Every key file of ``bucket``, their rows with the partition they came from."""
    tables = []
    for path in sorted(keys_dir.glob(f"part-*-{bucket:05d}.parquet")):
        keys = pq.read_table(path, schema=KEY_SCHEMA)
        tables.append(keys.append_column(PART_COLUMN, pa.repeat(part_of(path), keys.num_rows)
                                         .cast(pa.int32())))  # fmt: skip
    if not tables:
        return KEY_SCHEMA.append(pa.field(PART_COLUMN, pa.int32())).empty_table()
    return pa.concat_tables(tables)


def copies_to_drop(keys: pa.Table) -> pa.Table:
    """KEY_COLUMNS rows (every copy of each of their keys among them) -> COPY_SCHEMA rows
    of every copy that is not the one kept, in (message_hash, source, location) order.
    Only keys that occur more than once are sorted. ``part`` is the rows' PART_COLUMN
    when they have one (:func:`dedup_bucket`'s do), else null."""
    if PART_COLUMN not in keys.column_names:
        keys = keys.append_column(PART_COLUMN, pa.nulls(keys.num_rows, pa.int32()))
    counts = keys.group_by("dedup_key").aggregate([([], "count_all")])
    repeated = counts.filter(pc.greater(counts.column("count_all"), 1)).column("dedup_key")
    if not len(repeated):
        return COPY_SCHEMA.empty_table()
    candidates = keys.filter(pc.is_in(keys.column("dedup_key"), value_set=repeated))
    ordered = candidates.take(pc.sort_indices(candidates, _KEEP_ORDER))
    key = ordered.column("dedup_key").combine_chunks()
    later = np.zeros(len(key), dtype=bool)  # not the first row of its key
    if len(key) > 1:
        later[1:] = pc.equal(key.slice(1), key.slice(0, len(key) - 1)).to_numpy(
            zero_copy_only=False
        )
    quarantined = ordered.column("quarantined").to_numpy(zero_copy_only=False)
    copies = ordered.filter(pa.array(later & ~quarantined)).select(COPY_SCHEMA.names)
    order = [(c, "ascending") for c in DUPLICATE_COLUMNS]
    return copies.take(pc.sort_indices(copies, order)).cast(COPY_SCHEMA)


def group_counts(keys: pa.Table, copies: pa.Table) -> pa.Table:
    """COUNT_SCHEMA rows: the rows of ``keys`` per group (``duplicate`` False) and the
    ``copies`` among them per group (``duplicate`` True, never quarantined)."""
    every = keys.group_by(list(GROUP_COLUMNS)).aggregate([([], "count_all")])
    copies = copies.append_column("quarantined", pa.repeat(False, copies.num_rows))
    dropped = copies.group_by(list(GROUP_COLUMNS)).aggregate([([], "count_all")])
    parts = []
    for table, duplicate in ((every, False), (dropped, True)):
        columns = [table.column(c) for c in GROUP_COLUMNS]
        flag = pa.repeat(duplicate, table.num_rows)
        parts.append(pa.table([*columns, flag, table.column("count_all")], schema=COUNT_SCHEMA))
    return pa.concat_tables(parts)


def dedup_bucket(keys_dir: Path, duplicates_dir: Path, bucket: int) -> pa.Table:
    """One bucket's copies to drop written as ``part-<bucket>.parquet`` in
    ``duplicates_dir`` (whole or not at all); returns its :func:`group_counts`."""
    keys = _bucket_keys(keys_dir, bucket)
    copies = copies_to_drop(keys)
    write_parquet_file(part_file(duplicates_dir, bucket), copies)
    return group_counts(keys, copies)


def write_duplicate_files(
    spark: SparkSession, keys_dir: Path, duplicates_dir: Path, buckets: int
) -> list[dict[str, object]]:
    """The copies to drop of every bucket, one Spark task each (:func:`dedup_bucket`),
    written in ``duplicates_dir`` (emptied first); returns the counts per group (the
    COUNT_SCHEMA rows of every bucket, as dicts)."""
    empty_directory(duplicates_dir)

    def run(numbers: Iterable[int]) -> Iterator[dict[str, object]]:
        for bucket in numbers:
            yield from dedup_bucket(keys_dir, duplicates_dir, bucket).to_pylist()

    # an RDD job: no SQL engine needed to hand numbers out and counts back
    job = spark.sparkContext.parallelize(range(buckets), buckets).mapPartitions(run)
    with temporaries_swept_on_failure(spark, [duplicates_dir]):
        return job.collect()


def mark_duplicates(messages: DataFrame, duplicates: DataFrame) -> DataFrame:
    """MESSAGE rows and :func:`copies_to_drop` of them -> the rows plus a boolean
    ``duplicate`` column (a broadcast join while the copies are few)."""
    from pyspark.sql import functions as F

    flags = duplicates.select("source", "location", F.lit(True).alias("flag"))
    return (
        messages.join(flags, ["source", "location"], "left")
        .withColumn("duplicate", F.coalesce(F.col("flag"), F.lit(False)))
        .drop("flag")
    )


def read_messages(
    spark: SparkSession,
    work_dir: str | Path,
    rows_dir: str = MESSAGES_DIR,
    schema: pa.Schema = MESSAGE_SCHEMA,
) -> DataFrame:
    """Step 1's output in ``work_dir``: every decoded MESSAGE row (``rows_dir``
    CHANNELS_DIR: the community channels' rows only, in ``schema``: MESSAGE rows or, when
    step 1 decrypted them, CHANNEL_ARCHIVE rows) with its ``duplicate`` flag."""
    from waku_legacy.migrate.records import spark_ddl

    work = Path(work_dir)
    # the schemas given, not inferred: inferring one is a Spark job, which waits for a free
    # task slot (behind the PostgreSQL store's tasks, for the archives)
    rows = spark.read.schema(spark_ddl(schema)).parquet(str(work / rows_dir))
    copies = spark.read.schema(spark_ddl(COPY_SCHEMA)).parquet(str(work / DUPLICATES_DIR))
    return mark_duplicates(rows, copies)
