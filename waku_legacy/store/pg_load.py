"""Bulk load of the v2 store on PostgreSQL (nwaku's schema, :mod:`waku_legacy.store.postgres`),
for parallel writers (one per Spark partition, or per process).

Each writer opens its own connection (:func:`connect_loader`) and calls :func:`load_rows`:
rows go by binary ``COPY`` into a session-private staging table, then one
``INSERT … SELECT … ON CONFLICT DO NOTHING`` per real table (``messages``,
``messages_lookup``, ``v1_envelopes``), one transaction per batch, with
``synchronous_commit`` off for that transaction only. Hex encoding of hashes, payloads and
meta (nwaku's columns) is done by the server (``encode(…, 'hex')``) from the staged
``bytea``, so the client sends raw bytes and does no per-value formatting.

The staging table is ``TEMP``: like an ``UNLOGGED`` table it writes no WAL, and unlike one
it is private to its session (parallel writers never share it) and disappears with the
session, so a writer killed with ``kill -9`` mid-``COPY`` leaves nothing behind: its open
transaction is rolled back by the server, every earlier batch is committed whole, and a
rerun inserts exactly the missing rows (``ON CONFLICT DO NOTHING`` on nwaku's primary
keys). ``synchronous_commit = off`` can lose the last commits only if the *server* crashes;
a rerun writes them again.

Around a load, the driver calls :func:`prepare_load` (tables created; when ``messages`` is
empty, the secondary indexes are dropped so the first load maintains only the primary keys)
and :func:`finish_load` (every index of the schema created again, ``ANALYZE``). A run killed
between the two leaves the indexes missing, which the rerun's :func:`finish_load` (or any
:class:`~waku_legacy.store.postgres.PostgresMessageStore` opening the store) builds.

Fault points (:mod:`waku_legacy.faults`): ``store:copy:<n>`` inside the ``COPY`` of batch
``n`` (half of its rows sent), ``store:batch:<n>`` after batch ``n`` is committed.
"""

from __future__ import annotations

import functools
import itertools
import re
from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING, Any

from waku_legacy.faults import FaultHook, no_fault
from waku_legacy.store.postgres import SCHEMA
from waku_legacy.store.types import StoreError

if TYPE_CHECKING:
    import psycopg
    import pyarrow as pa

__all__ = [
    "LOAD_BATCH",
    "STORE_COLUMNS",
    "connect_loader",
    "finish_load",
    "load_arrow",
    "load_rows",
    "prepare_load",
    "secondary_indexes",
]

# The rows a load takes, in this order (the migration's store columns).
STORE_COLUMNS = (
    "message_hash", "pubsub_topic", "content_topic", "payload", "version",
    "timestamp", "meta", "envelope", "db_key",
)  # fmt: skip
_STAGE_TYPES = ("bytea", "text", "text", "bytea", "int4", "int8", "bytea", "bytea", "bytea")
LOAD_BATCH = 50_000  # rows per transaction (about 40 MB staged at ~800 bytes a row)

_STAGE = "waku_store_stage"
_CREATE_STAGE = (
    f"CREATE TEMP TABLE IF NOT EXISTS {_STAGE} (h bytea, pubsub text, content text, "
    "payload bytea, version int4, ts int8, meta bytea, envelope bytea, dbkey bytea) "
    "ON COMMIT DELETE ROWS"
)
# ORDER BY h: each batch enters the primary-key B-trees in key order (hex sorts as bytes).
_INSERTS = (
    "INSERT INTO messages (messageHash, pubsubTopic, contentTopic, payload, version, timestamp,"
    f" meta) SELECT encode(h, 'hex'), pubsub, content, encode(payload, 'hex'), version, ts,"
    f" encode(meta, 'hex') FROM {_STAGE} ORDER BY h ON CONFLICT DO NOTHING",
    "INSERT INTO messages_lookup (timestamp, messageHash)"
    f" SELECT ts, encode(h, 'hex') FROM {_STAGE} ORDER BY h ON CONFLICT DO NOTHING",
    "INSERT INTO v1_envelopes (messageHash, envelope, dbKey)"
    f" SELECT encode(h, 'hex'), envelope, dbkey FROM {_STAGE} WHERE envelope IS NOT NULL"
    " ORDER BY h ON CONFLICT DO NOTHING",
)
_COPY_MESSAGES = (
    "COPY messages (messageHash, pubsubTopic, contentTopic, payload, version, timestamp, meta)"
    " FROM STDIN (FORMAT BINARY)"
)
_COPY_LOOKUP = "COPY messages_lookup (timestamp, messageHash) FROM STDIN (FORMAT BINARY)"
_COPY_ENVELOPES = "COPY v1_envelopes (messageHash, envelope, dbKey) FROM STDIN (FORMAT BINARY)"
_INDEX_NAME = re.compile(r"CREATE INDEX IF NOT EXISTS (\w+) ")
_LOCK = "SELECT pg_advisory_xact_lock(7377656)"  # the store's schema lock (postgres.py)


def secondary_indexes() -> list[str]:
    """The schema's indexes beyond the primary keys and unique constraints (those stay:
    ``ON CONFLICT`` needs them)."""
    return [m.group(1) for s in SCHEMA if (m := _INDEX_NAME.match(s))]


def connect_loader(url: str, *, connect_timeout: int = 10) -> psycopg.Connection[Any]:
    """A connection for one writer; tables are not created here (see :func:`prepare_load`)."""
    import psycopg

    try:
        conn = psycopg.connect(url, connect_timeout=connect_timeout)
        # Room for a batch in the session's temp buffers (settable before any temp table use).
        conn.execute("SET temp_buffers = '128MB'")
        conn.commit()
    except psycopg.Error as exc:
        raise StoreError(f"cannot open the PostgreSQL store: {exc}") from exc
    return conn


def prepare_load(url: str) -> bool:
    """Before the writers start: the tables exist; if ``messages`` is empty, its secondary
    indexes are dropped (built by :func:`finish_load`). Returns whether it was empty."""
    import psycopg

    with connect_loader(url) as conn:
        try:
            with conn.transaction():
                conn.execute(_LOCK)
                for statement in SCHEMA:
                    if statement.startswith("CREATE TABLE"):
                        conn.execute(statement)
                empty = conn.execute("SELECT NOT EXISTS (SELECT 1 FROM messages)").fetchone()
                if empty and empty[0]:
                    for name in secondary_indexes():
                        conn.execute(f"DROP INDEX IF EXISTS {name}")
        except psycopg.Error as exc:
            raise StoreError(f"preparing the PostgreSQL store load failed: {exc}") from exc
    return bool(empty and empty[0])


def finish_load(url: str) -> None:
    """After the writers: every index of the schema present, the planner's statistics fresh."""
    import psycopg

    with connect_loader(url) as conn:
        try:
            with conn.transaction():
                conn.execute(_LOCK)
                conn.execute("SET LOCAL maintenance_work_mem = '256MB'")
                for statement in SCHEMA:
                    conn.execute(statement)
            conn.autocommit = True
            conn.execute("ANALYZE messages, messages_lookup, v1_envelopes")
        except psycopg.Error as exc:
            raise StoreError(f"finishing the PostgreSQL store load failed: {exc}") from exc


def load_rows(
    conn: psycopg.Connection[Any],
    rows: Iterable[tuple[Any, ...]],
    *,
    batch_size: int = LOAD_BATCH,
    fault: FaultHook = no_fault,
    first_load: bool = False,
) -> tuple[int, int]:
    """Write ``rows`` (:data:`STORE_COLUMNS` order; bytes for the binary columns, ``envelope``
    and ``db_key`` may be None) in batches of ``batch_size``; returns (rows sent, new
    messages).

    ``first_load`` (what :func:`prepare_load` returned: the store was empty): each batch is
    copied straight into the real tables, about twice as fast as staging it, since nothing
    can conflict but another writer's copy of the same message; a batch that does conflict
    is rolled back and staged, and so is every later batch."""
    import psycopg

    sent = new = 0
    iterator = iter(rows)
    half = max(1, batch_size // 2)
    try:
        conn.execute(_CREATE_STAGE)
        conn.commit()
        for number in itertools.count():
            batch = list(itertools.islice(iterator, batch_size))
            if not batch:
                break
            midway = functools.partial(fault, f"store:copy:{number}")
            if first_load:
                try:
                    with conn.transaction(), conn.cursor() as cur:
                        _copy_into_tables(cur, batch, midway, half)
                    new += len(batch)
                except psycopg.errors.UniqueViolation:
                    first_load = False
            if not first_load:
                with conn.transaction(), conn.cursor() as cur:
                    new += _stage_and_insert(cur, batch, midway, half)
            sent += len(batch)
            fault(f"store:batch:{number}")
    except psycopg.Error as exc:
        raise StoreError(f"loading the PostgreSQL store failed: {exc}") from exc
    return sent, new


def _stage_and_insert(
    cur: psycopg.Cursor[Any], batch: list[tuple[Any, ...]], midway: Callable[[], None], half: int
) -> int:
    """One batch through the staging table (in the caller's transaction); new messages."""
    cur.execute("SET LOCAL synchronous_commit = off")
    with cur.copy(f"COPY {_STAGE} FROM STDIN (FORMAT BINARY)") as copy:
        copy.set_types(list(_STAGE_TYPES))
        for count, row in enumerate(batch, 1):
            copy.write_row(row)
            if count == half:
                midway()
    cur.execute(_INSERTS[0])
    new = max(cur.rowcount, 0)
    cur.execute(_INSERTS[1])
    cur.execute(_INSERTS[2])
    return new


def _copy_into_tables(
    cur: psycopg.Cursor[Any], batch: list[tuple[Any, ...]], midway: Callable[[], None], half: int
) -> None:
    """One batch copied straight into the three tables (in the caller's transaction),
    hashes, payloads and meta as nwaku's lowercase hex."""
    cur.execute("SET LOCAL synchronous_commit = off")
    with cur.copy(_COPY_MESSAGES) as copy:
        copy.set_types(["varchar", "varchar", "varchar", "varchar", "int4", "int8", "varchar"])
        for count, (h, pubsub, content, payload, version, ts, meta, *_) in enumerate(batch, 1):
            copy.write_row(
                (h.hex(), pubsub, content, payload.hex(), version, ts,
                 None if meta is None else meta.hex())
            )  # fmt: skip
            if count == half:
                midway()
    with cur.copy(_COPY_LOOKUP) as copy:
        copy.set_types(["int8", "varchar"])
        for row in batch:
            copy.write_row((row[5], row[0].hex()))
    with cur.copy(_COPY_ENVELOPES) as copy:
        copy.set_types(["varchar", "bytea", "bytea"])
        for row in batch:
            if row[7] is not None:
                copy.write_row((row[0].hex(), row[7], row[8]))


def arrow_rows(batches: Iterable[pa.RecordBatch]) -> Iterator[tuple[Any, ...]]:
    """Rows of Arrow batches holding :data:`STORE_COLUMNS` (any order, others ignored)."""
    for batch in batches:
        if batch.num_rows:
            columns = [batch.column(c).to_pylist() for c in STORE_COLUMNS]
            yield from zip(*columns, strict=True)


def load_arrow(
    url: str,
    batches: Iterable[pa.RecordBatch],
    *,
    batch_size: int = LOAD_BATCH,
    fault: FaultHook = no_fault,
    first_load: bool = False,
) -> tuple[int, int]:
    """One writer's whole load (a Spark partition's Arrow batches): (rows sent, new)."""
    with connect_loader(url) as conn:
        rows = arrow_rows(batches)
        return load_rows(conn, rows, batch_size=batch_size, fault=fault, first_load=first_load)
