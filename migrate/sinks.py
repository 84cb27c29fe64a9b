"""Where migrated messages go: the v2 store, the quarantine.

SQLite is a single-writer file, so the driver writes it, streaming: the deduplicated
messages were written by the executors as a fixed number of Parquet files (at most
:data:`~waku_legacy.migrate.pipeline.MAX_MESSAGE_FILES`), each sorted by message hash, with
small row groups; the driver merges them (k-way, one row group per file in memory at a time,
so its memory does not grow with the number of messages) into one stream in hash order, which
is also the cheapest order for SQLite's primary-key B-tree (several times faster than
interleaved sorted runs), and inserts it in batches (one transaction each;
``store:batch:<n>`` fault point after each commit).
PostgreSQL accepts parallel writers, so each executor writes its own partition with binary
COPY (``waku_legacy.store.pg_load``: into an empty store, bare tables whose indexes are built
once at the end and which then replace the empty ones; otherwise staged, then INSERT ... ON
CONFLICT DO NOTHING).
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from waku_legacy.faults import FaultHook, no_fault
from waku_legacy.store.pg_load import STORE_COLUMNS as LOAD_COLUMNS

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from waku_legacy.store.types import MessageStore

__all__ = [
    "STORE_COLUMNS",
    "iter_kept_sorted",
    "write_postgres_store",
    "write_quarantine",
    "write_sqlite_store",
]

STORE_COLUMNS = list(LOAD_COLUMNS)  # the store rows' columns, in this order
READ_BATCH = 4096


def _kept_rows(path: Path) -> Iterator[tuple[Any, ...]]:
    # pre_buffer=False: with pre-buffering a reader keeps every row group it read cached
    # until it is closed, so its memory grows with the file; without, one row group.
    parquet = pq.ParquetFile(path, pre_buffer=False)
    columns = [*STORE_COLUMNS, "quarantined", "duplicate"]
    for batch in parquet.iter_batches(batch_size=READ_BATCH, columns=columns, use_threads=False):
        keep = pc.and_(pc.invert(batch.column("quarantined")), pc.invert(batch.column("duplicate")))
        kept = batch.filter(keep)
        if kept.num_rows:
            yield from zip(*(kept.column(c).to_pylist() for c in STORE_COLUMNS), strict=True)


def iter_kept_sorted(messages_dir: str | Path) -> Iterator[tuple[Any, ...]]:
    """Store rows (STORE_COLUMNS order) of the kept messages, in message-hash order."""
    files = sorted(Path(messages_dir).glob("part-*.parquet"))
    return heapq.merge(*(_kept_rows(f) for f in files), key=lambda row: row[0])


def write_sqlite_store(
    store: MessageStore,
    rows: Iterator[tuple[Any, ...]],
    *,
    batch_size: int = 20_000,
    fault: FaultHook = no_fault,
    progress: Callable[[int], None] | None = None,
) -> int:
    """Insert ``rows`` in batches; returns how many were new."""
    inserted = 0
    with store.bulk_load():
        for number in itertools.count():
            chunk = list(itertools.islice(rows, batch_size))
            if not chunk:
                break
            inserted += store.insert_messages(chunk, batch_size=batch_size)
            fault(f"store:batch:{number}")
            if progress is not None:
                progress(len(chunk))
    return inserted


def write_postgres_store(kept: DataFrame, url: str, *, fault: FaultHook = no_fault) -> int:
    """Each partition of ``kept`` (STORE_COLUMNS) written by its executor with binary COPY
    (:mod:`waku_legacy.store.pg_load`), the indexes of a first load built after it; returns
    the new rows. ``fault`` runs in the executors (a picklable hook, e.g. ``fault_from_env``)."""
    from waku_legacy.store.pg_load import finish_load, load_arrow, prepare_load

    def write(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        _, new = load_arrow(url, batches, fault=fault, first_load=first_load)
        yield pa.RecordBatch.from_pydict({"inserted": [new]})

    first_load = prepare_load(url)
    result = kept.select(*STORE_COLUMNS).mapInArrow(write, "inserted BIGINT").collect()
    # A retried task's rows were copied twice into a first load: finish_load removes the
    # repeats and says how many of the writers' "new" they were.
    repeated = finish_load(url)
    return int(sum(r["inserted"] for r in result)) - repeated


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
