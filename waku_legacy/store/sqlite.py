"""The v2 store on SQLite, in nwaku's schema (the embedded default).

nwaku's table, unchanged, so that an nwaku node can be pointed at the file::

    CREATE TABLE Message (messageHash BLOB PRIMARY KEY, pubsubTopic BLOB NOT NULL,
                          contentTopic BLOB NOT NULL, payload BLOB, version INTEGER NOT NULL,
                          timestamp INTEGER NOT NULL, meta BLOB) WITHOUT ROWID;
    CREATE INDEX i_ts ON Message (timestamp);

Topics are stored as their UTF-8 bytes (BLOB), like nwaku. Beside it, a table of ours
keeps the original Waku v1 envelope of every message that came from one, with its
status-go DB key so that v1 clients can be served with status-go's cursor semantics::

    CREATE TABLE v1_envelopes (messageHash BLOB PRIMARY KEY, envelope BLOB NOT NULL,
                               dbKey BLOB) WITHOUT ROWID;   -- + an index on dbKey

Crash safety: WAL journal, every batch is one transaction (a kill loses at most the batch in
flight, never leaves half of one); inserts are ``INSERT OR IGNORE`` so a rerun after a kill
completes the job without duplicates. ``synchronous=NORMAL`` in WAL mode survives process
kills; pass ``?synchronous=FULL`` in the URL for power-loss durability of the last batch.
"""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

from waku_legacy.store.reconnect import Reconnect
from waku_legacy.store.sql import Dialect, Row, SqlMessageStore
from waku_legacy.store.types import StoredMessage, StoreError, StoreUnavailable

__all__ = ["SCHEMA", "SqliteMessageStore", "is_unavailable_error"]

TABLES = (
    "CREATE TABLE IF NOT EXISTS Message ("
    " messageHash BLOB PRIMARY KEY NOT NULL,"
    " pubsubTopic BLOB NOT NULL,"
    " contentTopic BLOB NOT NULL,"
    " payload BLOB,"
    " version INTEGER NOT NULL,"
    " timestamp INTEGER NOT NULL,"
    " meta BLOB"
    ") WITHOUT ROWID",
    # Ours: the original v1 envelopes.
    "CREATE TABLE IF NOT EXISTS v1_envelopes ("
    " messageHash BLOB PRIMARY KEY NOT NULL,"
    " envelope BLOB NOT NULL,"
    " dbKey BLOB"
    ") WITHOUT ROWID",
)
INDEXES = {
    "i_ts": "CREATE INDEX IF NOT EXISTS i_ts ON Message (timestamp)",
    # Topic filters in time order (nwaku keeps a similar one).
    "i_query": "CREATE INDEX IF NOT EXISTS i_query ON Message (contentTopic, pubsubTopic, "
    "timestamp, messageHash)",
    # Ours: every filter shape reads its page in (timestamp, hash) order from an index, so
    # no query scans or sorts more than a page (a pubsub topic alone, or a content topic
    # without one, scanned the time index or sorted the topic's messages: 0.5 s at 200k).
    "i_pubsub": "CREATE INDEX IF NOT EXISTS i_pubsub ON Message (pubsubTopic, timestamp)",
    "i_content": "CREATE INDEX IF NOT EXISTS i_content ON Message (contentTopic, timestamp)",
    "i_v1_dbkey": "CREATE INDEX IF NOT EXISTS i_v1_dbkey ON v1_envelopes (dbKey)",
}
SCHEMA = (*TABLES, *INDEXES.values())

_INSERT_MESSAGE = (
    "INSERT OR IGNORE INTO Message (messageHash, pubsubTopic, contentTopic, payload, version,"
    " timestamp, meta) VALUES (?, ?, ?, ?, ?, ?, ?)"
)
_INSERT_ENVELOPE = (
    "INSERT OR IGNORE INTO v1_envelopes (messageHash, envelope, dbKey) VALUES (?, ?, ?)"
)


def _hash_only_message(row: Row) -> StoredMessage:
    """A hash-only query's row (``includeData`` false): hash, timestamp, pubsub topic."""
    h, timestamp, pubsub = row
    return StoredMessage(
        bytes(h), bytes(pubsub).decode("utf-8", "replace"), "", b"", 0, int(timestamp)
    )


def _row_to_message(row: Row) -> StoredMessage:
    h, pubsub, content, payload, version, timestamp, meta = row
    return StoredMessage(
        bytes(h),
        bytes(pubsub).decode("utf-8", "replace"),
        bytes(content).decode("utf-8", "replace"),
        bytes(payload or b""),
        int(version),
        int(timestamp),
        None if meta is None else bytes(meta),
    )


def _in_list(column: str, values: Sequence[object]) -> tuple[str, list[object]]:
    return f"{column} IN ({', '.join('?' * len(values))})", list(values)


SQLITE = Dialect(
    placeholder="?",
    messages="Message",
    cursor_lookup="Message",
    hash_value=bytes,
    topic_value=str.encode,
    row_hash=bytes,
    message=_row_to_message,
    hash_only=_hash_only_message,
    # the rows as sqlite3 reads them: BLOBs are bytes (topics their UTF-8), INTEGERs ints
    wire=None,
    hash_bytes=bytes,
    in_list=_in_list,
    key_slice="substr(dbKey, 37, 4)",
    max_in_list=500,  # SQLite's host-parameter limit is 32766 (999 before 3.32)
)


# SQLite errors that say the file cannot be used now (another process holds the lock past
# busy_timeout, the file or its folder went away, the disk fails or is full), as opposed to
# a wrong statement (or a write refused on a read-only connection: "readonly database").
# The connection is re-opened on the next call.
_UNAVAILABLE = (
    "database is locked",
    "unable to open database file",
    "disk i/o error",
    "database or disk is full",
)


def is_unavailable_error(exc: BaseException) -> bool:
    """Whether ``exc`` (an sqlite3 error) means the store file cannot be used now."""
    if isinstance(exc, sqlite3.ProgrammingError):
        return "closed database" in str(exc)
    text = str(exc).lower()
    return isinstance(exc, sqlite3.OperationalError) and any(m in text for m in _UNAVAILABLE)


class SqliteMessageStore(SqlMessageStore):
    """One connection to the file. An error saying the file cannot be used now
    (:func:`is_unavailable_error`) closes it and raises :class:`StoreUnavailable`; the next
    call opens the file again when ``reconnect`` allows (a busy lock is waited for
    ``busy_timeout`` ms first, as SQLite does)."""

    dialect = SQLITE

    def __init__(
        self,
        path: str | Path,
        *,
        synchronous: str = "NORMAL",
        mmap_size: int = 0,
        busy_timeout: int = 30000,
        reconnect: Reconnect | None = None,
    ) -> None:
        self.path = Path(path)
        self.url = f"sqlite:///{self.path}"
        if synchronous.upper() not in ("OFF", "NORMAL", "FULL", "EXTRA"):
            raise StoreError(f"synchronous must be OFF, NORMAL, FULL or EXTRA, not {synchronous!r}")
        self.synchronous = synchronous.upper()
        self.mmap_size = mmap_size
        self.busy_timeout = busy_timeout
        self.reconnect = reconnect or Reconnect()
        self._read_only = False
        self._conn: sqlite3.Connection | None = None
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            db = self._open()
            db.execute("BEGIN IMMEDIATE")
            for statement in SCHEMA:
                db.execute(statement)
            db.execute("COMMIT")
        except (sqlite3.Error, OSError) as exc:
            self._drop()
            error = StoreUnavailable if is_unavailable_error(exc) else StoreError
            raise error(f"cannot open the SQLite store {self.path}: {exc}") from exc

    # -- the connection -----------------------------------------------------------------------

    def _open(self) -> sqlite3.Connection:
        db = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
        self._conn = db
        db.execute("PRAGMA journal_mode=WAL")
        db.execute(f"PRAGMA synchronous={self.synchronous}")
        if self.mmap_size > 0:  # read through memory-mapped I/O (no pread per page)
            db.execute(f"PRAGMA mmap_size={int(self.mmap_size)}")
        db.execute(f"PRAGMA busy_timeout={int(self.busy_timeout)}")
        if self._read_only:
            db.execute("PRAGMA query_only=ON")
        return db

    @property
    def _db(self) -> sqlite3.Connection:
        """The open connection, or the file opened again (when the schedule allows)."""
        db = self._conn
        if db is not None:
            return db
        if not self.reconnect.may_connect():
            raise StoreUnavailable(
                f"the SQLite store {self.path} is unavailable ({self.reconnect.reason}); "
                f"next attempt in {self.reconnect.retry_in():.1f} s"
            )
        try:
            if not self.path.exists():  # never create an empty store in place of a lost one
                raise sqlite3.OperationalError("unable to open database file (it is gone)")
            db = self._open()
            db.execute("SELECT 1 FROM Message LIMIT 1").fetchall()
        except sqlite3.Error as exc:
            self._drop()
            self.reconnect.connect_failed(str(exc))
            raise StoreUnavailable(f"the SQLite store {self.path} is unavailable: {exc}") from exc
        self.reconnect.connected()
        return db

    def _drop(self) -> None:
        db, self._conn = self._conn, None
        if db is not None:
            with contextlib.suppress(sqlite3.Error):
                db.close()

    def _unavailable(self, exc: sqlite3.Error) -> StoreUnavailable:
        """The error to raise after ``exc``. A lock held past ``busy_timeout`` keeps the
        connection (the file is fine; the next write waits for the lock again); anything
        else drops it and the file is opened again on the reconnect schedule."""
        if "locked" in str(exc).lower():
            db = self._conn
            if db is not None and db.in_transaction:
                with contextlib.suppress(sqlite3.Error):
                    db.execute("ROLLBACK")
        else:
            self._drop()
            self.reconnect.connect_failed(str(exc))
        return StoreUnavailable(f"the SQLite store {self.path} is unavailable: {exc}")

    # -- writing ---------------------------------------------------------------------------

    def insert_messages(
        self, rows: Iterable[StoredMessage | tuple[Any, ...]], *, batch_size: int = 5000
    ) -> int:
        inserted = 0
        messages: list[tuple[Any, ...]] = []
        envelopes: list[tuple[Any, ...]] = []
        for row in rows:
            h, pubsub, content, payload, version, timestamp, meta, *rest = row
            messages.append(
                (bytes(h), pubsub.encode(), content.encode(), payload, version, timestamp, meta)
            )
            envelope = rest[0] if rest else None
            if envelope is not None:
                envelopes.append((bytes(h), envelope, rest[1] if len(rest) > 1 else None))
            if len(messages) >= batch_size:
                inserted += self._write_batch(messages, envelopes)
                messages, envelopes = [], []
        if messages:
            inserted += self._write_batch(messages, envelopes)
        return inserted

    def insert_rows(
        self, messages: list[tuple[Any, ...]], envelopes: list[tuple[Any, ...]]
    ) -> int:
        """One transaction of rows already in the tables' column types, what
        :meth:`insert_messages` makes of its rows: ``messages`` as (hash, pubsub topic and
        content topic as UTF-8 bytes, payload, version, timestamp, meta), ``envelopes`` as
        (hash, envelope, DB key). Idempotent; returns how many messages were new."""
        return self._write_batch(messages, envelopes)

    def _write_batch(
        self, messages: list[tuple[Any, ...]], envelopes: list[tuple[Any, ...]]
    ) -> int:
        db = self._db
        try:
            db.execute("BEGIN IMMEDIATE")
            before = db.total_changes
            db.executemany(_INSERT_MESSAGE, messages)
            new = db.total_changes - before
            if envelopes:
                db.executemany(_INSERT_ENVELOPE, envelopes)
            db.execute("COMMIT")
        except sqlite3.Error as exc:
            if is_unavailable_error(exc):
                raise self._unavailable(exc) from exc
            if db.in_transaction:
                db.execute("ROLLBACK")
            raise StoreError(
                f"writing {len(messages)} messages to {self.path} failed: {exc}"
            ) from exc
        return new

    # -- reading ---------------------------------------------------------------------------

    def _fetch(self, sql: str, params: Sequence[object]) -> Sequence[Row]:
        try:
            return self._db.execute(sql, params).fetchall()
        except sqlite3.Error as exc:
            if is_unavailable_error(exc):
                raise self._unavailable(exc) from exc
            raise

    @contextlib.contextmanager
    def bulk_load(self) -> Iterator[None]:
        """Into an empty store, load without the secondary indexes and build them at the
        end (random-order index maintenance costs SQLite several times the insert itself).
        A kill inside leaves the tables consistent; the next open rebuilds the indexes."""
        empty = self._db.execute("SELECT 1 FROM Message LIMIT 1").fetchone() is None
        self._db.execute("PRAGMA cache_size=-131072")
        # Fewer, larger checkpoints while loading (the WAL may grow to ~200 MB).
        self._db.execute("PRAGMA wal_autocheckpoint=50000")
        if empty:
            for name in INDEXES:
                self._db.execute(f"DROP INDEX IF EXISTS {name}")
        try:
            yield
        finally:
            if empty:
                for statement in INDEXES.values():
                    self._db.execute(statement)
            self._db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            self._db.execute("PRAGMA wal_autocheckpoint=1000")
            self._db.execute("PRAGMA cache_size=-2000")

    def make_read_only(self) -> None:
        """Refuse every write on this connection from now on (a reader process)."""
        self._read_only = True  # and on a connection opened again
        self._db.execute("PRAGMA query_only=ON")

    def close(self) -> None:
        self._drop()
