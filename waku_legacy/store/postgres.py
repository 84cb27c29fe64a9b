"""The v2 store on PostgreSQL, in nwaku's schema.

nwaku's tables (its postgres driver, schema version 7+)::

    CREATE TABLE messages (messageHash VARCHAR NOT NULL, pubsubTopic VARCHAR NOT NULL,
        contentTopic VARCHAR NOT NULL, payload VARCHAR, version INTEGER NOT NULL,
        timestamp BIGINT NOT NULL, meta VARCHAR,
        CONSTRAINT messageIndex PRIMARY KEY (messageHash, timestamp));
    CREATE TABLE messages_lookup (timestamp BIGINT NOT NULL, messageHash VARCHAR NOT NULL,
        CONSTRAINT messageIndexLookupTable PRIMARY KEY (messageHash, timestamp));

``messageHash``, ``payload`` and ``meta`` hold lowercase hex without ``0x`` (nwaku's
``toHex``); topics are plain text. nwaku partitions ``messages`` by time range (hourly
partitions it creates as messages arrive); this store keeps one unpartitioned table, which
nwaku reads the same way but will not prune by dropping partitions. Use nwaku itself (or
``ALTER TABLE ... ATTACH PARTITION``) if partition-based retention is wanted.

Beside them, ``v1_envelopes (messageHash VARCHAR PRIMARY KEY, envelope BYTEA NOT NULL,
dbKey BYTEA UNIQUE)`` keeps the original Waku v1 envelopes. Inserts are batched, one
transaction per batch, ``ON CONFLICT DO NOTHING``: reruns are idempotent and parallel writers
(one per Spark partition) never conflict.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable, Sequence
from typing import Any, TypeVar

from waku_legacy.store.reconnect import Reconnect
from waku_legacy.store.sql import COLUMNS, Dialect, Row, SqlMessageStore
from waku_legacy.store.types import StoredMessage, StoreError, StoreUnavailable, WireMessage

__all__ = ["SCHEMA", "PostgresMessageStore", "is_connection_error"]

T = TypeVar("T")

SCHEMA = (
    "CREATE TABLE IF NOT EXISTS messages ("
    " messageHash VARCHAR NOT NULL,"
    " pubsubTopic VARCHAR NOT NULL,"
    " contentTopic VARCHAR NOT NULL,"
    " payload VARCHAR,"
    " version INTEGER NOT NULL,"
    " timestamp BIGINT NOT NULL,"
    " meta VARCHAR,"
    " CONSTRAINT messageIndex PRIMARY KEY (messageHash, timestamp))",
    "CREATE TABLE IF NOT EXISTS messages_lookup ("
    " timestamp BIGINT NOT NULL,"
    " messageHash VARCHAR NOT NULL,"
    " CONSTRAINT messageIndexLookupTable PRIMARY KEY (messageHash, timestamp))",
    "CREATE INDEX IF NOT EXISTS idx_messages_timestamp ON messages (timestamp)",
    "CREATE INDEX IF NOT EXISTS idx_query_pubsubtopic ON messages (pubsubTopic)",
    "CREATE INDEX IF NOT EXISTS idx_query_contenttopic ON messages (contentTopic)",
    "CREATE INDEX IF NOT EXISTS idx_messages_lookup_timestamp ON messages_lookup (timestamp)",
    # Ours: every filter shape reads its page in (timestamp, hash) order from an index (a
    # popular topic would otherwise be collected and sorted whole for each page).
    "CREATE INDEX IF NOT EXISTS idx_pubsub_time ON messages (pubsubTopic, timestamp, messageHash)",
    "CREATE INDEX IF NOT EXISTS idx_content_time ON messages "
    "(contentTopic, timestamp, messageHash)",
    "CREATE INDEX IF NOT EXISTS idx_content_pubsub_time ON messages "
    "(contentTopic, pubsubTopic, timestamp, messageHash)",
    "CREATE TABLE IF NOT EXISTS v1_envelopes ("
    " messageHash VARCHAR PRIMARY KEY,"
    " envelope BYTEA NOT NULL,"
    " dbKey BYTEA UNIQUE)",
)


def _hash_only_message(row: Row) -> StoredMessage:
    """A hash-only query's row (``includeData`` false): hash, timestamp, pubsub topic."""
    h, timestamp, pubsub = row
    return StoredMessage(bytes.fromhex(h), pubsub, "", b"", 0, int(timestamp))


def _row_to_message(row: Row) -> StoredMessage:
    h, pubsub, content, payload, version, timestamp, meta = row
    return StoredMessage(
        bytes.fromhex(h),
        pubsub,
        content,
        bytes.fromhex(payload or ""),
        int(version),
        int(timestamp),
        None if meta is None else bytes.fromhex(meta),
    )


def _row_to_wire(row: Row) -> WireMessage:
    h, pubsub, content, payload, version, timestamp, meta = row
    return (
        bytes.fromhex(h), pubsub, content, bytes.fromhex(payload or ""), int(version),
        int(timestamp), None if meta is None else bytes.fromhex(meta),
    )  # fmt: skip


def _hex(message_hash: bytes) -> str:
    return bytes(message_hash).hex()  # nwaku's column: lowercase hex without 0x


def _any_of(column: str, values: Sequence[object]) -> tuple[str, list[object]]:
    """``column = %s`` for one value, else ``= ANY`` of an array parameter."""
    if len(values) == 1:
        return f"{column} = %s", [values[0]]
    return f"{column} = ANY(%s)", [list(values)]


POSTGRES = Dialect(
    placeholder="%s",
    messages="messages",
    cursor_lookup="messages_lookup",  # nwaku's (messageHash, timestamp) table
    hash_value=_hex,
    topic_value=str,
    row_hash=str,  # hex text sorts as the bytes do
    message=_row_to_message,
    hash_only=_hash_only_message,
    wire=_row_to_wire,
    hash_bytes=bytes.fromhex,
    in_list=_any_of,
    key_slice="substring(dbKey from 37 for 4)",
    max_in_list=None,
)


# SQLSTATEs that mean the session is gone or the server cannot take one, not that a
# statement was wrong: class 08 (connection exception), 57P01 admin shutdown
# (pg_terminate_backend, a fast stop), 57P02 crash shutdown, 57P03 cannot connect now
# (starting, stopping, recovering), 57P05 idle session timeout, 53300 too many connections.
_CONNECTION_SQLSTATES = frozenset({"57P01", "57P02", "57P03", "57P05", "53300"})


def is_connection_error(exc: BaseException, conn: Any = None) -> bool:
    """Whether ``exc`` (a psycopg error) means the connection or the server is gone, as
    opposed to an error of the statement (which is not worth a reconnect)."""
    import psycopg

    if conn is not None and (conn.closed or conn.broken):
        return True
    if isinstance(exc, psycopg.InterfaceError):
        return True  # "the connection is closed"
    if not isinstance(exc, psycopg.OperationalError):
        return False
    state = exc.sqlstate
    # None: the client library's own failure (connection refused, server closed the
    # connection unexpectedly, consuming input failed)
    return state is None or state.startswith("08") or state in _CONNECTION_SQLSTATES


class PostgresMessageStore(SqlMessageStore):
    """One connection. A lost connection (:func:`is_connection_error`) is dropped and the
    call that met it raises :class:`StoreUnavailable`, after one immediate retry on a new
    connection when the old one had been working (a terminated session costs nothing
    more); later calls open a new one when ``reconnect`` allows (its backoff is shared by
    every connection to the store)."""

    dialect = POSTGRES

    def __init__(
        self, dsn: str, *, connect_timeout: int = 10, reconnect: Reconnect | None = None
    ) -> None:
        import psycopg

        self.url = dsn
        self.connect_timeout = connect_timeout
        self.reconnect = reconnect or Reconnect()
        self._read_only = False
        self._conn: psycopg.Connection[Any] | None = None
        try:
            conn = self._connection()
            with conn.transaction():
                # Serialise schema creation between parallel writers opening at once.
                conn.execute("SELECT pg_advisory_xact_lock(7377656)")
                for statement in SCHEMA:
                    conn.execute(statement)
        except StoreUnavailable as exc:
            raise StoreUnavailable(f"cannot open the PostgreSQL store: {exc}") from exc
        except psycopg.Error as exc:
            if is_connection_error(exc, self._conn):
                self._drop()
                raise StoreUnavailable(f"cannot open the PostgreSQL store: {exc}") from exc
            raise StoreError(f"cannot open the PostgreSQL store: {exc}") from exc

    # -- the connection -----------------------------------------------------------------------

    def _connection(self) -> Any:
        """The open connection, or a new one (when the reconnect schedule allows)."""
        conn = self._conn
        if conn is not None and not conn.closed:
            return conn
        if not self.reconnect.may_connect():
            raise StoreUnavailable(
                f"the PostgreSQL store is unreachable ({self.reconnect.reason}); next "
                f"attempt in {self.reconnect.retry_in():.1f} s"
            )
        import psycopg

        try:
            conn = psycopg.connect(self.url, **self._connect_options())
            if self._read_only:
                conn.execute("SET SESSION CHARACTERISTICS AS TRANSACTION READ ONLY")
                conn.commit()
        except psycopg.Error as exc:
            reason = _one_line(exc)
            self.reconnect.connect_failed(reason)
            raise StoreUnavailable(f"the PostgreSQL store is unreachable: {reason}") from exc
        self._conn = conn
        self.reconnect.connected()
        return conn

    def _connect_options(self) -> dict[str, Any]:
        """libpq options: the connect timeout, and TCP keepalives unless the URL sets them,
        so that a server that vanished from the network (no FIN, no RST) is noticed in about
        30 s instead of the kernel's two hours (libpq ignores them on a Unix socket)."""
        from psycopg.conninfo import conninfo_to_dict

        given = conninfo_to_dict(self.url)
        options: dict[str, Any] = {"connect_timeout": self.connect_timeout}
        for name, value in (("keepalives", 1), ("keepalives_idle", 15),
                            ("keepalives_interval", 5), ("keepalives_count", 3)):  # fmt: skip
            if name not in given:
                options[name] = value
        return options

    def _drop(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            with contextlib.suppress(Exception):
                conn.close()

    def _run(self, work: Callable[[Any], T]) -> T:
        """``work(connection)``; a lost connection is replaced once at once if it had been
        working, else :class:`StoreUnavailable`. Other database errors are raised as they
        are (the read transaction rolled back)."""
        import psycopg

        for attempt in (1, 2):
            fresh = self._conn is None or self._conn.closed
            conn = self._connection()
            try:
                return work(conn)
            except psycopg.Error as exc:
                if not is_connection_error(exc, conn):
                    if not conn.closed and conn.info.transaction_status != 0:
                        with contextlib.suppress(psycopg.Error):
                            conn.rollback()
                    raise
                self._drop()
                if fresh or attempt == 2:
                    raise StoreUnavailable(
                        f"the PostgreSQL connection was lost: {_one_line(exc)}"
                    ) from exc
        raise AssertionError("unreachable")

    def insert_messages(
        self, rows: Iterable[StoredMessage | tuple[Any, ...]], *, batch_size: int = 5000
    ) -> int:
        inserted = 0
        batch: list[tuple[Any, ...]] = []
        for row in rows:
            batch.append(tuple(row))
            if len(batch) >= batch_size:
                inserted += self._write_batch(batch)
                batch = []
        if batch:
            inserted += self._write_batch(batch)
        return inserted

    def _write_batch(self, batch: list[tuple[Any, ...]]) -> int:
        import psycopg

        messages = []
        lookups = []
        envelopes = []
        for h, pubsub, content, payload, version, timestamp, meta, *rest in batch:
            hx = bytes(h).hex()
            messages.append(
                (
                    hx,
                    pubsub,
                    content,
                    bytes(payload).hex(),
                    version,
                    timestamp,
                    None if meta is None else bytes(meta).hex(),
                )
            )
            lookups.append((timestamp, hx))
            if rest and rest[0] is not None:
                envelopes.append((hx, bytes(rest[0]), rest[1] if len(rest) > 1 else None))

        def write(conn: Any) -> int:
            with conn.transaction(), conn.cursor() as cur:
                # A temporary table and one INSERT ... SELECT tells us how many rows were new.
                cur.execute(
                    "CREATE TEMP TABLE IF NOT EXISTS messages_load (LIKE messages) "
                    "ON COMMIT DELETE ROWS"
                )
                with cur.copy(f"COPY messages_load ({COLUMNS}) FROM STDIN") as copy:
                    for m in messages:
                        copy.write_row(m)
                cur.execute(
                    f"INSERT INTO messages ({COLUMNS}) SELECT {COLUMNS} FROM messages_load "
                    "ON CONFLICT DO NOTHING"
                )
                new = cur.rowcount
                cur.executemany(
                    "INSERT INTO messages_lookup (timestamp, messageHash) VALUES (%s, %s) "
                    "ON CONFLICT DO NOTHING",
                    lookups,
                )
                if envelopes:
                    cur.executemany(
                        "INSERT INTO v1_envelopes (messageHash, envelope, dbKey) "
                        "VALUES (%s, %s, %s) ON CONFLICT DO NOTHING",
                        envelopes,
                    )
            return int(new)

        try:
            new = self._run(write)
        except StoreUnavailable:
            raise
        except psycopg.Error as exc:
            raise StoreError(f"writing {len(batch)} messages failed: {exc}") from exc
        return max(new, 0)

    def _fetch(self, sql: str, params: Sequence[object]) -> Sequence[Row]:
        return self._run(lambda conn: conn.execute(sql, params).fetchall())

    def _end_read(self) -> None:
        conn = self._conn
        if conn is not None and not conn.closed:
            with contextlib.suppress(Exception):  # a lost connection ends its reads too
                conn.rollback()  # end the read transaction

    def make_read_only(self) -> None:
        """Refuse every write on this connection from now on (a reader process)."""
        self._read_only = True  # and on every connection opened after a loss

        def read_only(conn: Any) -> None:
            conn.execute("SET SESSION CHARACTERISTICS AS TRANSACTION READ ONLY")
            conn.commit()

        self._run(read_only)

    def close(self) -> None:
        self._drop()


def _one_line(exc: BaseException) -> str:
    """A driver error's first line (psycopg appends server detail lines)."""
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__
