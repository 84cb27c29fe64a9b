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

from collections.abc import Iterable, Sequence
from typing import Any

from waku_legacy.store.types import (
    DEFAULT_PAGE_SIZE,
    CursorNotFound,
    MessageStore,
    QueryPage,
    StoredMessage,
    StoreError,
    check_query,
    content_topic_reads,
    envelope_cursor_bounds,
    merge_reads,
    page_of_rows,
)

__all__ = ["SCHEMA", "PostgresMessageStore"]

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

_COLUMNS = "messageHash, pubsubTopic, contentTopic, payload, version, timestamp, meta"


def _hash_only_message(row: Sequence[Any]) -> StoredMessage:
    """A hash-only query's row (``includeData`` false): the hash, nothing else."""
    return StoredMessage(bytes.fromhex(row[0]), "", "", b"", 0, 0)


def _row_to_message(row: Sequence[Any]) -> StoredMessage:
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


class PostgresMessageStore(MessageStore):
    def __init__(self, dsn: str, *, connect_timeout: int = 10) -> None:
        import psycopg

        self.url = dsn
        try:
            self._conn = psycopg.connect(dsn, connect_timeout=connect_timeout)
            with self._conn.transaction():
                # Serialise schema creation between parallel writers opening at once.
                self._conn.execute("SELECT pg_advisory_xact_lock(7377656)")
                for statement in SCHEMA:
                    self._conn.execute(statement)
        except psycopg.Error as exc:
            raise StoreError(f"cannot open the PostgreSQL store: {exc}") from exc

    def insert_messages(
        self, rows: Iterable[StoredMessage | tuple], *, batch_size: int = 5000
    ) -> int:
        inserted = 0
        batch: list[tuple] = []
        for row in rows:
            batch.append(tuple(row))
            if len(batch) >= batch_size:
                inserted += self._write_batch(batch)
                batch = []
        if batch:
            inserted += self._write_batch(batch)
        return inserted

    def _write_batch(self, batch: list[tuple]) -> int:
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
        try:
            with self._conn.transaction(), self._conn.cursor() as cur:
                # A temporary table and one INSERT ... SELECT tells us how many rows were new.
                cur.execute(
                    "CREATE TEMP TABLE IF NOT EXISTS messages_load (LIKE messages) "
                    "ON COMMIT DELETE ROWS"
                )
                with cur.copy(f"COPY messages_load ({_COLUMNS}) FROM STDIN") as copy:
                    for m in messages:
                        copy.write_row(m)
                cur.execute(
                    f"INSERT INTO messages ({_COLUMNS}) SELECT {_COLUMNS} FROM messages_load "
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
        except psycopg.Error as exc:
            raise StoreError(f"writing {len(batch)} messages failed: {exc}") from exc
        return max(new, 0)

    def query(
        self,
        *,
        pubsub_topic: str | None = None,
        content_topics: Sequence[str] = (),
        start_time: int | None = None,
        end_time: int | None = None,
        hashes: Sequence[bytes] = (),
        cursor: bytes | None = None,
        ascending: bool = True,
        limit: int = DEFAULT_PAGE_SIZE,
        include_data: bool = True,
    ) -> QueryPage:
        check_query(
            cursor=cursor, limit=limit, hashes=hashes,
            pubsub_topic=pubsub_topic, content_topics=content_topics,
        )  # fmt: skip
        where: list[str] = []
        args: list[Any] = []
        if cursor is not None:
            found = self._conn.execute(
                "SELECT timestamp FROM messages_lookup WHERE messageHash = %s",
                (bytes(cursor).hex(),),
            ).fetchone()
            if found is None:
                self._conn.rollback()
                raise CursorNotFound(f"cursor 0x{bytes(cursor).hex()} is not a stored message")
            comp = ">" if ascending else "<"
            where.append(f"(timestamp, messageHash) {comp} (%s, %s)")
            args += [found[0], bytes(cursor).hex()]
        if pubsub_topic is not None:
            where.append("pubsubTopic = %s")
            args.append(pubsub_topic)
        if hashes:
            where.append("messageHash = ANY(%s)")
            args.append([bytes(h).hex() for h in hashes])
        if start_time is not None:
            where.append("timestamp >= %s")
            args.append(start_time)
        if end_time is not None:
            where.append("timestamp <= %s")
            args.append(end_time)
        order = "ASC" if ascending else "DESC"
        groups = content_topic_reads(content_topics, hashes)
        merged = len(groups) > 1
        columns = _COLUMNS if include_data and not merged else "messageHash, timestamp"
        ts_at = 5 if include_data and not merged else 1
        rows: list[Any] = []
        for group in groups:
            clauses, values = list(where), list(args)
            if len(group) == 1:
                clauses.append("contentTopic = %s")
                values.append(group[0])
            elif group:
                clauses.append("contentTopic = ANY(%s)")
                values.append(group)
            sql = f"SELECT {columns} FROM messages"
            if clauses:
                sql += " WHERE " + " AND ".join(clauses)
            sql += f" ORDER BY timestamp {order}, messageHash {order} LIMIT %s"
            rows += self._conn.execute(sql, [*values, limit + 1]).fetchall()
        if merged:
            rows = merge_reads(
                rows, ascending=ascending, limit=limit,
                sort_key=lambda r: (r[ts_at], r[0]),  # hex text sorts as the bytes do
            )  # fmt: skip
            if include_data and rows:
                found = {
                    r[0]: r
                    for r in self._conn.execute(
                        f"SELECT {_COLUMNS} FROM messages WHERE messageHash = ANY(%s)",
                        ([r[0] for r in rows],),
                    ).fetchall()
                }
                rows = [found[r[0]] for r in rows if r[0] in found]
        self._conn.rollback()
        return page_of_rows(
            rows, limit=limit, ascending=ascending,
            message=_row_to_message if include_data else _hash_only_message,
        )  # fmt: skip

    def get_message(self, message_hash: bytes) -> StoredMessage | None:
        row = self._conn.execute(
            f"SELECT {_COLUMNS} FROM messages WHERE messageHash = %s", (bytes(message_hash).hex(),)
        ).fetchone()
        self._conn.rollback()
        return None if row is None else _row_to_message(row)

    def get_envelope(self, message_hash: bytes) -> bytes | None:
        row = self._conn.execute(
            "SELECT envelope FROM v1_envelopes WHERE messageHash = %s",
            (bytes(message_hash).hex(),),
        ).fetchone()
        self._conn.rollback()
        return None if row is None else bytes(row[0])

    def get_envelopes(self, message_hashes: Sequence[bytes]) -> dict[bytes, bytes]:
        wanted = list(dict.fromkeys(bytes(h).hex() for h in message_hashes))
        if not wanted:
            return {}
        rows = self._conn.execute(
            "SELECT messageHash, envelope FROM v1_envelopes WHERE messageHash = ANY(%s)",
            (wanted,),
        ).fetchall()
        self._conn.rollback()
        return {bytes.fromhex(h): bytes(e) for h, e in rows}

    def query_v1_envelopes(
        self,
        lower_key: bytes,
        upper_key: bytes,
        *,
        topics: Sequence[bytes] = (),
        cursor: bytes | None = None,
        limit: int = 1000,
        descending: bool = False,
    ) -> list[tuple[bytes, bytes]]:
        low, high, high_inclusive = envelope_cursor_bounds(lower_key, upper_key, cursor, descending)
        where = ["dbKey >= %s", "dbKey <= %s" if high_inclusive else "dbKey < %s"]
        args: list[Any] = [low, high]
        if topics:
            where.append("substring(dbKey from 37 for 4) = ANY(%s)")
            args.append([bytes(t) for t in topics])
        order = "DESC" if descending else "ASC"
        args.append(limit)
        rows = self._conn.execute(
            f"SELECT dbKey, envelope FROM v1_envelopes WHERE {' AND '.join(where)} "
            f"ORDER BY dbKey {order} LIMIT %s",
            args,
        ).fetchall()
        self._conn.rollback()
        return [(bytes(k), bytes(e)) for k, e in rows]

    def count(self) -> int:
        (n,) = self._conn.execute("SELECT count(*) FROM messages").fetchone()  # type: ignore[misc]
        self._conn.rollback()
        return int(n)

    def count_envelopes(self) -> int:
        (n,) = self._conn.execute("SELECT count(*) FROM v1_envelopes").fetchone()  # type: ignore[misc]
        self._conn.rollback()
        return int(n)

    def close(self) -> None:
        self._conn.close()
