"""Bulk load of the v2 store on PostgreSQL (nwaku's schema, :mod:`waku_legacy.store.postgres`),
for parallel writers (one per Spark partition, or per process).

The driver calls :func:`prepare_load`, then each writer opens its own connection
(:func:`connect_loader`) and calls :func:`load_rows` (or :func:`load_arrow`), then the driver
calls :func:`finish_load`. Two ways in, chosen by :func:`prepare_load`:

- **First load** (the store's three tables empty): the rows go by binary ``COPY`` into bare
  copies of the tables in a schema of their own, ``waku_store_load``, with no index at all,
  not even the primary keys (a random-order B-tree insert per row and per key costs several
  times the sort that builds the same index afterwards). :func:`finish_load` then builds the
  keys by sort (``CREATE UNIQUE INDEX``; rows a second writer or a retried Spark task sent
  twice are deleted first, keeping one, if a key's build meets them), every other index of
  the schema, from two connections at once, ``ANALYZE``, and then, in one transaction, moves
  the finished tables in place of the store's empty ones (``ALTER TABLE … SET SCHEMA``). A
  reader of the store (the bridge) sees the empty store until that commit and the whole
  store after it, never a table without its keys. A run killed before the commit leaves
  the store empty; the rerun's :func:`prepare_load` drops the unfinished schema and loads
  again from the start.
- **Into a store that holds rows** (a rerun after a finished load, a second source): each
  batch goes by binary ``COPY`` into a session-private ``TEMP`` staging table (no WAL, gone
  with its session when a writer is killed), then one ``INSERT … SELECT … ON CONFLICT DO
  NOTHING`` per real table, the hex of nwaku's columns made by the server
  (``encode(…, 'hex')``). Idempotent: a rerun inserts exactly the missing rows.

Each batch is one transaction with ``synchronous_commit`` off (a *server* crash can lose
the last commits; a rerun writes them again); a writer killed with ``kill -9`` mid-``COPY``
loses only its open transaction. One load at a time per store: a second run's
:func:`prepare_load` drops a first load's unfinished schema under it (its writers then fail).

Fault points (:mod:`waku_legacy.faults`): ``store:copy:<n>`` inside the ``COPY`` of batch
``n`` (half of its rows sent), ``store:batch:<n>`` after batch ``n`` is committed;
in :func:`finish_load` of a first load ``store:index:<name>`` before each index is built and
``store:swap`` inside the transaction that moves the tables in, before its commit.
"""

from __future__ import annotations

import functools
import itertools
import queue
import re
import threading
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
    "LOAD_SCHEMA",
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
LOAD_SCHEMA = "waku_store_load"  # a first load's tables until they are finished
_TABLES = ("messages", "messages_lookup", "v1_envelopes")
# Each table's keys, as "CREATE UNIQUE INDEX" statements and constraint kinds, recorded by
# prepare_load before it drops them (so they are rebuilt exactly as the schema makes them).
_KEYS = f"{LOAD_SCHEMA}.load_keys"
_BUILD_CONNECTIONS = 2  # index builds at once (each also uses the server's parallel workers)
_MAINTENANCE_MEM = "512MB"  # per build connection (the default 64 MB sorts 1M keys on disk)

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
# The columns a load writes, per table: the COPYs of a first load and its merge name them
_COLUMNS = {
    "messages": "messageHash, pubsubTopic, contentTopic, payload, version, timestamp, meta",
    "messages_lookup": "timestamp, messageHash",
    "v1_envelopes": "messageHash, envelope, dbKey",
}
_COPY_MESSAGES, _COPY_LOOKUP, _COPY_ENVELOPES = (
    f"COPY {LOAD_SCHEMA}.{t} ({_COLUMNS[t]}) FROM STDIN (FORMAT BINARY)" for t in _TABLES
)
# one row when any of the store's tables holds one (they are empty: a first load)
_ANY_ROW = " UNION ALL ".join(f"(SELECT 1 FROM {t} LIMIT 1)" for t in _TABLES)
# Rows a key's build found twice (two writers, a retried task): all but the first copied in
# (lowest ctid) deleted, per key column list. v1_envelopes by hash first: a dbKey names one
# envelope and so one message hash, so its repeats are repeats of the whole row.
_DEDUP = {
    "messages": ("messageHash, timestamp",),
    "messages_lookup": ("messageHash, timestamp",),
    "v1_envelopes": ("messageHash", "dbKey"),
}
_INDEX_NAME = re.compile(r"CREATE INDEX IF NOT EXISTS (\w+) ON (\w+) ")
_LOCK = "SELECT pg_advisory_xact_lock(7377656)"  # the store's schema lock (postgres.py)


def secondary_indexes() -> list[str]:
    """The schema's indexes beyond the primary keys and unique constraints."""
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
    """Before the writers start: the store's tables exist; if all three are empty, a first
    load's bare tables are made afresh in :data:`LOAD_SCHEMA` (an unfinished one of a killed
    run dropped). Returns whether it is a first load (pass it to the writers)."""
    import psycopg

    with connect_loader(url) as conn:
        try:
            with conn.transaction():
                conn.execute(_LOCK)
                for statement in SCHEMA:
                    if statement.startswith("CREATE TABLE"):
                        conn.execute(statement)
                conn.execute(f"DROP SCHEMA IF EXISTS {LOAD_SCHEMA} CASCADE")
                found = conn.execute(_ANY_ROW).fetchone()
                first = found is None
                if first:
                    try:
                        with conn.transaction():
                            _create_bare_tables(conn)
                    except psycopg.errors.InsufficientPrivilege:
                        first = False  # no right to make a schema: staged, slower, the same
        except psycopg.Error as exc:
            raise StoreError(f"preparing the PostgreSQL store load failed: {exc}") from exc
    return first


def _create_bare_tables(conn: psycopg.Connection[Any]) -> None:
    """The schema's tables in :data:`LOAD_SCHEMA` (same columns, NOT NULL kept), their keys
    recorded in ``load_keys`` and dropped (in the caller's transaction)."""
    conn.execute(f"CREATE SCHEMA {LOAD_SCHEMA}")
    conn.execute(f"SET LOCAL search_path = {LOAD_SCHEMA}")
    for statement in SCHEMA:
        if statement.startswith("CREATE TABLE"):
            conn.execute(statement)
    conn.execute(
        f"CREATE TABLE {_KEYS} AS SELECT c.conrelid::regclass::text AS tablename, c.conname,"
        " c.contype, pg_get_indexdef(c.conindid) AS indexdef FROM pg_constraint c"
        f" WHERE c.connamespace = '{LOAD_SCHEMA}'::regnamespace AND c.contype IN ('p', 'u')"
    )
    for table, name in conn.execute(f"SELECT tablename, conname FROM {_KEYS}").fetchall():
        conn.execute(f'ALTER TABLE {table} DROP CONSTRAINT "{name}"')


def finish_load(url: str, *, fault: FaultHook = no_fault) -> int:
    """After the writers: every index of the schema present, the planner's statistics fresh;
    a first load's tables finished and moved into the store (see the module's text).
    Returns how many messages the writers counted as new that the store did not take (rows
    sent twice in a first load; 0 otherwise)."""
    import psycopg

    try:
        with connect_loader(url) as conn:
            conn.autocommit = True
            loading = conn.execute("SELECT to_regclass(%s) IS NOT NULL", (_KEYS,)).fetchone()
            if loading and loading[0]:
                return _finish_first_load(conn, url, fault)
            with conn.transaction():
                conn.execute(_LOCK)
                conn.execute(f"SET LOCAL maintenance_work_mem = '{_MAINTENANCE_MEM}'")
                for statement in SCHEMA:
                    conn.execute(statement)
            conn.execute("ANALYZE " + ", ".join(_TABLES))
            return 0
    except psycopg.Error as exc:
        raise StoreError(f"finishing the PostgreSQL store load failed: {exc}") from exc


def _finish_first_load(conn: psycopg.Connection[Any], url: str, fault: FaultHook) -> int:
    keys = conn.execute(
        f"SELECT tablename, conname, contype, indexdef FROM {_KEYS} ORDER BY tablename, conname"
    ).fetchall()
    # One list for both connections: the keys first (the messages table's first), then the
    # other indexes, the widest first. A repeat a key's build meets is deleted whenever it
    # is met; an index of that table built before then just holds the deleted rows as dead.
    builds = [(t, n, d, True) for t, n, _, d in sorted(keys, key=lambda k: k[0] != "messages")]
    others = [(m.group(2), m.group(1), s, False) for s in SCHEMA if (m := _INDEX_NAME.match(s))]
    builds += sorted(others, key=lambda o: -len(o[2]))
    removed = _build_all(url, builds, fault)
    conn.execute(f"SET search_path = {LOAD_SCHEMA}")
    with conn.transaction():
        for table, name, kind, _ in keys:
            constraint = "PRIMARY KEY" if kind == "p" else "UNIQUE"
            conn.execute(
                f'ALTER TABLE {table} ADD CONSTRAINT "{name}" {constraint} USING INDEX "{name}"'
            )
    conn.execute("ANALYZE " + ", ".join(_TABLES))
    conn.execute("RESET search_path")
    target = conn.execute("SELECT current_schema()").fetchone()
    assert target is not None
    with conn.transaction():
        conn.execute(_LOCK)
        conn.execute(f"LOCK TABLE {', '.join(_TABLES)} IN ACCESS EXCLUSIVE MODE")
        found = conn.execute(_ANY_ROW).fetchone()
        if found is None:  # still empty: the finished tables take the empty ones' place
            conn.execute(f"DROP TABLE {', '.join(_TABLES)}")
            for table in _TABLES:
                conn.execute(f'ALTER TABLE {LOAD_SCHEMA}.{table} SET SCHEMA "{target[0]}"')
        else:  # someone wrote meanwhile (the bridge): merged as a rerun would be
            removed += _merge_into_store(conn)
        conn.execute(f"DROP SCHEMA {LOAD_SCHEMA} CASCADE")
        fault("store:swap")
    return removed


def _merge_into_store(conn: psycopg.Connection[Any]) -> int:
    """The finished first load's rows inserted into the store's non-empty tables
    (``ON CONFLICT DO NOTHING``); returns its messages the store already held."""
    already = 0
    for table in _TABLES:
        cur = conn.execute(
            f"INSERT INTO {table} ({_COLUMNS[table]}) SELECT {_COLUMNS[table]}"
            f" FROM {LOAD_SCHEMA}.{table} ORDER BY messageHash ON CONFLICT DO NOTHING"
        )
        if table == "messages":
            total = conn.execute(f"SELECT count(*) FROM {LOAD_SCHEMA}.messages").fetchone()
            already = (total[0] if total else 0) - max(cur.rowcount, 0)
    return already


def _build_all(url: str, builds: list[tuple[str, str, str, bool]], fault: FaultHook) -> int:
    """Run the index ``builds`` ((table, name, statement, unique)) in :data:`LOAD_SCHEMA`
    from up to :data:`_BUILD_CONNECTIONS` connections at once, each taking the next from
    the list; a unique build that meets repeated rows deletes them and builds again.
    Returns the ``messages`` rows deleted so."""
    import psycopg

    work: queue.SimpleQueue[tuple[str, str, str, bool]] = queue.SimpleQueue()
    for build in builds:
        work.put(build)
    errors: list[BaseException] = []
    removed = [0]
    table_locks = {t: threading.Lock() for t in _TABLES}

    def builder() -> None:
        try:
            with psycopg.connect(url, autocommit=True) as conn:
                conn.execute(f"SET search_path = {LOAD_SCHEMA}")
                conn.execute(f"SET maintenance_work_mem = '{_MAINTENANCE_MEM}'")
                while not errors:
                    try:
                        table, name, statement, unique = work.get_nowait()
                    except queue.Empty:
                        return
                    fault(f"store:index:{name}")
                    try:
                        conn.execute(statement)
                    except psycopg.errors.UniqueViolation:
                        if not unique:
                            raise
                        with table_locks[table]:  # one de-duplication per table at a time
                            deleted = _deduplicate(conn, table)
                        if table == "messages":
                            removed[0] += deleted
                        conn.execute(statement)
        except BaseException as exc:  # re-raised in the caller's thread
            errors.append(exc)

    threads = [threading.Thread(target=builder, daemon=True)
               for _ in range(min(_BUILD_CONNECTIONS, len(builds)))]  # fmt: skip
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if errors:
        raise errors[0]
    return removed[0]


def _deduplicate(conn: psycopg.Connection[Any], table: str) -> int:
    """Rows of ``table`` repeating an earlier one's key deleted (the lowest ctid kept, as
    ``ON CONFLICT DO NOTHING`` keeps the first); returns how many."""
    deleted = 0
    for columns in _DEDUP[table]:
        match = " AND ".join(f"a.{c} = b.{c}" for c in columns.split(", "))
        cur = conn.execute(
            f"DELETE FROM {table} a USING {table} b WHERE {match} AND a.ctid > b.ctid"
        )
        deleted += max(cur.rowcount, 0)
    return deleted


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

    ``first_load`` (what :func:`prepare_load` returned): each batch is copied straight into
    the first load's bare tables, every row counted as new (repeats are removed, and
    reported, by :func:`finish_load`); otherwise staged and inserted."""
    import psycopg

    sent = new = 0
    iterator = iter(rows)
    half = max(1, batch_size // 2)
    try:
        if not first_load:
            conn.execute(_CREATE_STAGE)
            conn.commit()
        for number in itertools.count():
            batch = list(itertools.islice(iterator, batch_size))
            if not batch:
                break
            midway = functools.partial(fault, f"store:copy:{number}")
            with conn.transaction(), conn.cursor() as cur:
                if first_load:
                    _copy_into_tables(cur, batch, midway, half)
                    new += len(batch)
                else:
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
    """One batch copied straight into the first load's three bare tables (in the caller's
    transaction), hashes, payloads and meta as nwaku's lowercase hex."""
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
