"""Where migrated messages go: the v2 store, the quarantine.

SQLite is a single-writer file, so the driver writes it, streaming: the decoded messages
were written by the executors' Python workers as a bounded number of Parquet files (at most
:data:`~waku_legacy.migrate.message_files.MAX_MESSAGE_FILES`), each sorted by message hash,
with small row groups, and the copies to drop (:mod:`.dedup`) as hash-sorted files of their own;
the driver merges them (k-way on Arrow batches, one row group per file in memory at a time,
so its memory does not grow with the number of messages) into one stream in hash order, which
is also the cheapest order for SQLite's primary-key B-tree (several times faster than
interleaved sorted runs), leaves the copies out, and inserts it in batches (one transaction
each; ``store:batch:<n>`` fault point after each commit), the rows made from the Arrow
columns as the store's own ``insert_messages`` makes them.
PostgreSQL accepts parallel writers, so a Spark task per step-1 file writes that file's kept
rows (read with pyarrow, the copies to drop in that file left out) with binary COPY
(``waku_legacy.store.pg_load``: into an empty store, bare tables whose indexes are built once
at the end and which then replace the empty ones; otherwise staged, then INSERT ... ON
CONFLICT DO NOTHING).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from waku_legacy.faults import FaultHook, no_fault
from waku_legacy.migrate.dedup import DUPLICATE_COLUMNS, file_copies, part_files, part_of
from waku_legacy.migrate.message_files import merge_by_hash
from waku_legacy.migrate.work_files import parquet_batches
from waku_legacy.store.pg_load import STORE_COLUMNS as LOAD_COLUMNS

if TYPE_CHECKING:
    from pyspark.accumulators import Accumulator
    from pyspark.sql import DataFrame, SparkSession

    from waku_legacy.store.sqlite import SqliteMessageStore

__all__ = [
    "STORE_COLUMNS",
    "driver_writes_store",
    "iter_file_kept_batches",
    "iter_kept_batches",
    "write_postgres_store",
    "write_quarantine",
    "write_sqlite_store",
]

STORE_COLUMNS = list(LOAD_COLUMNS)  # the store rows' columns, in this order
READ_BATCH = 4096


def driver_writes_store(store_url: str | None) -> bool:
    """The store at ``store_url`` is written by the driver's one writer (SQLite; a
    PostgreSQL store is written by the executors, no store by nobody)."""
    from waku_legacy.store import is_postgres_url

    return bool(store_url) and not is_postgres_url(store_url or "")


def _kept_batches(path: Path, columns: list[str]) -> Iterator[pa.RecordBatch]:
    """The file's ``columns`` of its rows that are not quarantined, a batch at a time."""
    for batch in parquet_batches(path, READ_BATCH, [*columns, "quarantined"]):
        kept = batch.filter(pc.invert(batch.column("quarantined")))
        if kept.num_rows:
            yield kept.select(columns)


def _duplicates(directory: Path) -> Iterator[tuple[bytes, str, str]]:
    """The copies to drop (:func:`~waku_legacy.migrate.dedup.copies_to_drop`), in hash
    order: the buckets' files, each hash-sorted, merged."""
    files = part_files(directory)
    streams = [parquet_batches(p, READ_BATCH, list(DUPLICATE_COLUMNS)) for p in files]
    for table in merge_by_hash(streams):
        columns = [table.column(c).to_pylist() for c in DUPLICATE_COLUMNS]
        yield from zip(*columns, strict=True)


def _without_duplicates(
    tables: Iterator[pa.Table], duplicates: Iterator[tuple[bytes, str, str]]
) -> Iterator[pa.Table]:
    """Hash-ordered ``tables`` (store columns, source, location) without the ``duplicates``
    (hash-ordered too), so this holds only the copies to drop of one table's hashes."""
    pending = next(duplicates, None)
    here: list[tuple[bytes, str, str]] = []
    for table in tables:
        last = table.column(0)[-1].as_py()
        while pending is not None and pending[0] <= last:
            here.append(pending)
            pending = next(duplicates, None)
        if here:
            hashes = pa.array([d[0] for d in here], pa.binary())
            found = pc.indices_nonzero(pc.is_in(table.column(0), value_set=hashes))
            drop = set(here)
            identity = zip(*(table.column(c).take(found).to_pylist() for c in DUPLICATE_COLUMNS),
                           strict=True)  # fmt: skip
            dropped = [i for i, key in zip(found.to_pylist(), identity, strict=True) if key in drop]
            if dropped:
                keep = np.ones(table.num_rows, dtype=bool)
                keep[dropped] = False
                table = table.filter(pa.array(keep))
            # a hash equal to the last one may continue in the next table
            here = [d for d in here if d[0] == last]
        yield table.select(STORE_COLUMNS)


def iter_kept_batches(messages_dir: str | Path, duplicates_dir: str | Path) -> Iterator[pa.Table]:
    """The kept messages' store columns (STORE_COLUMNS), in message-hash order, as Arrow
    tables: step 1's hash-sorted files merged, the quarantined rows and the duplicate copies
    (``duplicates_dir``) left out."""
    files = part_files(Path(messages_dir))
    duplicates = _duplicates(Path(duplicates_dir))
    first = next(duplicates, None)
    if first is None:  # nothing to drop: no identity columns needed
        return merge_by_hash([_kept_batches(f, STORE_COLUMNS) for f in files])
    columns = [*STORE_COLUMNS, "source", "location"]
    merged = merge_by_hash([_kept_batches(f, columns) for f in files])
    return _without_duplicates(merged, itertools.chain([first], duplicates))


def _chunks(tables: Iterator[pa.Table], rows: int) -> Iterator[pa.Table]:
    """``tables`` cut into tables of ``rows`` rows (the last one shorter)."""
    held: list[pa.Table] = []
    count = 0
    for table in tables:
        held.append(table)
        count += table.num_rows
        while count >= rows:
            joined = pa.concat_tables(held)
            yield joined.slice(0, rows)
            held, count = [joined.slice(rows)], count - rows
    if count:
        yield pa.concat_tables(held)


def _store_parameters(chunk: pa.Table) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]:
    """A chunk of store rows as the SQLite store's ``Message`` and ``v1_envelopes`` rows
    (topics as their UTF-8 bytes, what the store makes of a StoredMessage's text)."""
    columns = []
    for name in STORE_COLUMNS[:7]:
        column = chunk.column(name)
        if pa.types.is_string(column.type):
            column = column.cast(pa.binary())
        columns.append(column.to_pylist())
    messages = list(zip(*columns, strict=True))
    v1 = chunk.filter(pc.is_valid(chunk.column("envelope")))
    columns = [v1.column(c).to_pylist() for c in (STORE_COLUMNS[0], *STORE_COLUMNS[7:])]
    envelopes = list(zip(*columns, strict=True))
    return messages, envelopes


def write_sqlite_store(
    store: SqliteMessageStore,
    tables: Iterator[pa.Table],
    *,
    batch_size: int = 20_000,
    fault: FaultHook = no_fault,
    progress: Callable[[int], None] | None = None,
) -> int:
    """Insert the store rows of ``tables`` (STORE_COLUMNS) in transactions of
    ``batch_size`` rows; returns how many were new."""
    inserted = 0
    with store.bulk_load():
        for number, chunk in enumerate(_chunks(tables, batch_size)):
            messages, envelopes = _store_parameters(chunk)
            inserted += store.insert_rows(messages, envelopes)
            fault(f"store:batch:{number}")
            if progress is not None:
                progress(chunk.num_rows)
    return inserted


def _file_duplicates(duplicates_dir: Path, part: int) -> Iterator[tuple[bytes, str, str]]:
    """The copies to drop that are in step 1's file ``part``, in hash order."""
    copies = file_copies(duplicates_dir, part, DUPLICATE_COLUMNS)
    copies = copies.take(pc.sort_indices(copies, [(c, "ascending") for c in DUPLICATE_COLUMNS]))
    return zip(*(copies.column(c).to_pylist() for c in DUPLICATE_COLUMNS), strict=True)


def iter_file_kept_batches(messages_file: Path, duplicates_dir: Path) -> Iterator[pa.Table]:
    """One of step 1's files' kept messages (STORE_COLUMNS, in hash order): its quarantined
    rows and the duplicate copies in it left out."""
    duplicates = _file_duplicates(Path(duplicates_dir), part_of(Path(messages_file)))
    first = next(duplicates, None)
    if first is None:
        return (pa.Table.from_batches([b]) for b in _kept_batches(messages_file, STORE_COLUMNS))
    batches = _kept_batches(messages_file, [*STORE_COLUMNS, "source", "location"])
    tables = (pa.Table.from_batches([b]) for b in batches)
    return _without_duplicates(tables, itertools.chain([first], duplicates))


def write_postgres_store(
    spark: SparkSession,
    messages_dir: Path,
    duplicates_dir: Path,
    url: str,
    *,
    fault: FaultHook = no_fault,
    rows_written: Accumulator[int] | None = None,
) -> int:
    """Step 1's files' kept messages, each file written by a Spark task of its own with
    binary COPY (:mod:`waku_legacy.store.pg_load`; its rows read with pyarrow where the task
    runs, never by the JVM), the indexes of a first load built after them; returns the new
    rows. Each task adds the rows it sent to ``rows_written``. ``fault`` runs in the
    executors (a picklable hook, e.g. ``fault_from_env``)."""
    from waku_legacy.migrate.spark import run_per_file
    from waku_legacy.store.pg_load import finish_load, load_arrow, prepare_load

    def load(path: Path) -> Iterator[int]:
        tables = iter_file_kept_batches(path, duplicates_dir)
        sent, new = load_arrow(
            url, (b for t in tables for b in t.to_batches()), fault=fault, first_load=first_load
        )
        if rows_written is not None:
            rows_written.add(sent)
        yield new

    first_load = prepare_load(url)
    # an RDD job: the tasks take file numbers and return counts (no SQL engine needed)
    inserted: int = sum(run_per_file(spark, part_files(Path(messages_dir)), load))
    # A retried task's rows were copied twice into a first load: finish_load removes the
    # repeats and says how many of the writers' "new" they were.
    return inserted - finish_load(url)


def write_quarantine(messages: DataFrame, directory: str) -> dict[str, int]:
    """Quarantined records as JSON lines (source, kind, location, reason, data as hex) in
    ``directory``; returns the count per kind of reason."""
    from pyspark.sql import functions as F

    quarantined = messages.filter(F.col("quarantined"))
    # Reasons carry details (offsets, hashes) after the first ": "; count by what precedes.
    kind = F.substring_index(F.col("reason"), ": ", 1).alias("what")
    counts = {r["what"]: r["count"] for r in quarantined.groupBy(kind).count().collect()}
    (
        quarantined.select("source", "kind", "location", "reason", F.hex("data").alias("data_hex"))
        .orderBy("source", "location")
        .coalesce(1)
        .write.mode("overwrite")
        .json(directory)
    )
    return counts
