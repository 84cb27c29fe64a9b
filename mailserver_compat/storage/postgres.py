"""status-go's PostgreSQL mailserver database.

Schema (status-go's mailserver migrations)::

    CREATE TABLE envelopes (id BYTEA NOT NULL UNIQUE, data BYTEA NOT NULL,
                            topic BYTEA NOT NULL, bloom BIT(512) NOT NULL);
    CREATE INDEX id_bloom_idx ON envelopes (id DESC, bloom);
    CREATE INDEX id_topic_idx ON envelopes (id DESC, topic);

``id`` is the 40-byte DB key (sent time u32 BE || envelope hash || topic), ``data`` the
envelope's RLP, ``bloom`` the topic's 64-byte bloom as a bit string.

Query semantics (status-go ``BuildIterator``): newest first, ``ORDER BY id DESC``; without
a cursor ``id >= lower AND id <= upper``, with one ``id >= lower AND id < cursor``; bloom
filtering keeps rows whose bloom is a subset of the request bloom
(``bloom & request = bloom``); a topic list filters on ``topic = ANY(...)`` instead.

Parallel reads (the migration): :meth:`PostgresEnvelopeStore.plan_splits` cuts the id space
at sampled quantiles into ``[start, stop)`` ranges, each read in ascending id order by one
Spark partition with its own connection and a server-side cursor, so no reader holds more
than a fetch batch in memory.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Iterator, Sequence
from types import TracebackType
from typing import Any

from waku_legacy.errors import WakuLegacyError
from waku_legacy.store.dsn import redact_dsn

__all__ = [
    "BLOOM_SIZE",
    "SCHEMA_SQL",
    "PostgresEnvelopeStore",
    "PostgresSourceError",
    "bloom_bits",
]

BLOOM_SIZE = 64

SCHEMA_SQL = (
    "CREATE TABLE IF NOT EXISTS envelopes (id BYTEA NOT NULL UNIQUE, data BYTEA NOT NULL, "
    "topic BYTEA NOT NULL, bloom BIT(512) NOT NULL)",
    "CREATE INDEX IF NOT EXISTS id_bloom_idx ON envelopes (id DESC, bloom)",
    "CREATE INDEX IF NOT EXISTS id_topic_idx ON envelopes (id DESC, topic)",
)

_INSERT = (
    "INSERT INTO envelopes (id, data, topic, bloom) VALUES (%s, %s, %s, %s::bit(512)) "
    "ON CONFLICT (id) DO NOTHING"
)


class PostgresSourceError(WakuLegacyError):
    """A legacy mailserver PostgreSQL database that cannot be reached or read."""


def bloom_bits(bloom: bytes) -> str:
    """A 64-byte bloom as PostgreSQL BIT(512) text (most significant bit of byte 0 first,
    like status-go's ``toBitString``)."""
    if len(bloom) != BLOOM_SIZE:
        raise PostgresSourceError(f"a bloom filter is {BLOOM_SIZE} bytes, got {len(bloom)}")
    return "".join(f"{b:08b}" for b in bloom)


class PostgresEnvelopeStore:
    """A legacy status-go mailserver database on PostgreSQL."""

    def __init__(self, dsn: str, *, create_schema: bool = False, connect_timeout: int = 10) -> None:
        import psycopg

        self.dsn = dsn
        try:
            self._conn = psycopg.connect(dsn, connect_timeout=connect_timeout, autocommit=False)
        except psycopg.Error as exc:
            raise PostgresSourceError(
                f"cannot connect to the mailserver database {redact_dsn(dsn)}: {exc}"
            ) from exc
        if create_schema:
            with self._conn.transaction():
                for statement in SCHEMA_SQL:
                    self._conn.execute(statement)

    # -- writing ---------------------------------------------------------------------------

    def insert_rows(self, rows: Iterable[tuple[bytes, bytes, bytes, bytes]]) -> int:
        """Insert ``(db_key, envelope_rlp, topic, bloom)`` rows; existing ids are left alone
        (``ON CONFLICT (id) DO NOTHING``, as status-go). Returns the number of rows given."""
        params = [(bytes(k), bytes(d), bytes(t), bloom_bits(b)) for k, d, t, b in rows]
        with self._conn.transaction(), self._conn.cursor() as cur:
            cur.executemany(_INSERT, params)
        return len(params)

    def bulk_load(self, rows: Iterable[tuple[bytes, bytes, bytes, bytes]]) -> int:
        """Fast load for large volumes: COPY into a temporary table, then insert with
        ``ON CONFLICT DO NOTHING``. Returns the number of rows copied."""
        count = 0
        with self._conn.transaction(), self._conn.cursor() as cur:
            cur.execute(
                "CREATE TEMP TABLE IF NOT EXISTS envelopes_load "
                "(id BYTEA, data BYTEA, topic BYTEA, bloom BIT(512)) ON COMMIT DELETE ROWS"
            )
            with cur.copy("COPY envelopes_load (id, data, topic, bloom) FROM STDIN") as copy:
                for key, data, topic, bloom in rows:
                    copy.write_row((bytes(key), bytes(data), bytes(topic), bloom_bits(bloom)))
                    count += 1
            cur.execute(
                "INSERT INTO envelopes (id, data, topic, bloom) "
                "SELECT id, data, topic, bloom FROM envelopes_load ON CONFLICT (id) DO NOTHING"
            )
        return count

    def save_envelope(self, envelope_rlp: bytes) -> bytes:
        """Store one envelope as status-go's ``SaveEnvelope`` does; returns its DB key."""
        from waku_legacy.mailserver_compat.storage.leveldb import db_key_of_envelope

        key = db_key_of_envelope(envelope_rlp)
        topic = key[36:40]
        self.insert_rows([(key, envelope_rlp, topic, _topic_bloom(topic))])
        return key

    # -- reading ---------------------------------------------------------------------------

    def get(self, db_key: bytes) -> bytes | None:
        row = self._conn.execute("SELECT data FROM envelopes WHERE id = %s", (db_key,)).fetchone()
        self._conn.rollback()
        return None if row is None else bytes(row[0])

    def _aggregate(self, sql: str, params: Sequence[Any] = ()) -> Any:
        """The value of a one-column aggregate query (which always answers one row)."""
        row = self._conn.execute(sql, params).fetchone()
        assert row is not None
        return row[0]

    def count(self) -> int:
        n = self._aggregate("SELECT count(*) FROM envelopes")
        self._conn.rollback()
        return int(n)

    def query(
        self,
        lower_key: bytes,
        upper_key: bytes,
        *,
        cursor: bytes | None = None,
        bloom: bytes | None = None,
        topics: Sequence[bytes] | None = None,
        limit: int = 1000,
    ) -> list[tuple[bytes, bytes]]:
        """One page in status-go order: ``(id, data)`` rows, newest first.

        ``lower_key``/``upper_key`` are DB-key bounds (inclusive); a ``cursor`` replaces the
        upper bound and is exclusive; ``topics`` (when given) filter instead of ``bloom``.
        """
        where = ["id >= %s"]
        args: list[Any] = [bytes(lower_key)]
        if cursor:
            where.append("id < %s")
            args.append(bytes(cursor))
        else:
            where.append("id <= %s")
            args.append(bytes(upper_key))
        if topics:
            where.append("topic = ANY(%s)")
            args.append([bytes(t) for t in topics])
        elif bloom is not None:
            where.append("bloom & %s::bit(512) = bloom")
            args.append(bloom_bits(bloom))
        args.append(limit)
        sql = (
            f"SELECT id, data FROM envelopes WHERE {' AND '.join(where)} ORDER BY id DESC LIMIT %s"
        )
        rows = self._conn.execute(sql, args).fetchall()
        self._conn.rollback()
        return [(bytes(i), bytes(d)) for i, d in rows]

    def scan_boundary(
        self,
        lower_key: bytes,
        upper_key: bytes,
        *,
        cursor: bytes | None = None,
        max_scan: int,
    ) -> bytes | None:
        """The ``max_scan``-th id of :meth:`query`'s range in its order (newest first), or
        ``None`` when the range holds fewer rows: a page that stops there examined at most
        ``max_scan`` rows (an index-only walk of the ``id`` index)."""
        where = ["id >= %s", "id < %s" if cursor else "id <= %s"]
        args: list[Any] = [bytes(lower_key), bytes(cursor) if cursor else bytes(upper_key)]
        args.append(max(0, max_scan - 1))
        sql = (
            f"SELECT id FROM envelopes WHERE {' AND '.join(where)} "
            "ORDER BY id DESC OFFSET %s LIMIT 1"
        )
        row = self._conn.execute(sql, args).fetchone()
        self._conn.rollback()
        return None if row is None else bytes(row[0])

    def iter_id_range(
        self, start: bytes | None = None, stop: bytes | None = None, *, batch_size: int = 5000
    ) -> Iterator[tuple[bytes, bytes]]:
        """``(id, data)`` for ids in ``[start, stop)`` in ascending order, streamed through a
        server-side cursor ``batch_size`` rows at a time."""
        where, args = [], []
        if start is not None:
            where.append("id >= %s")
            args.append(bytes(start))
        if stop is not None:
            where.append("id < %s")
            args.append(bytes(stop))
        sql = "SELECT id, data FROM envelopes"
        if where:
            sql += " WHERE " + " AND ".join(where)
        sql += " ORDER BY id"
        try:
            # Binary results: bytea arrives as its bytes, not as hex text to parse.
            with (
                self._conn.transaction(),
                self._conn.cursor(name="envelope_range", binary=True) as cur,
            ):
                cur.itersize = batch_size
                cur.execute(sql, args)
                while True:
                    rows = cur.fetchmany(batch_size)
                    if not rows:
                        break
                    for key, data in rows:
                        yield bytes(key), bytes(data)
        except Exception as exc:
            import psycopg

            if isinstance(exc, psycopg.Error):
                raise PostgresSourceError(
                    f"reading envelopes from {redact_dsn(self.dsn)} failed: {exc}"
                ) from exc
            raise

    def plan_splits(
        self, parts: int, *, sample_rows: int = 20000
    ) -> list[tuple[bytes | None, bytes | None]]:
        """Cut the id space into at most ``parts`` ``[start, stop)`` ranges holding about
        the same number of rows (quantiles of a sample; the whole table when small). The
        outer bounds are open (None), so every row is in exactly one range."""
        if parts <= 1:
            return [(None, None)]
        estimate = self._aggregate(
            "SELECT GREATEST(reltuples, 0)::bigint FROM pg_class WHERE oid = 'envelopes'::regclass"
        )
        fractions = [i / parts for i in range(1, parts)]
        sources = ["envelopes"]
        if estimate and estimate > sample_rows * 2:
            percent = min(100.0, 100.0 * sample_rows / estimate)
            # SYSTEM samples whole pages: cheap on a big table, but it can come back with
            # too few rows (or none) when the table spans few pages; the full scan follows.
            sample = f"(SELECT id FROM envelopes TABLESAMPLE SYSTEM ({percent:.6f})) AS s"
            sources.insert(0, sample)
        unique: list[bytes] = []
        for source in sources:
            cuts = self._aggregate(
                f"SELECT percentile_disc(%s::float8[]) WITHIN GROUP (ORDER BY id) FROM {source}",
                (fractions,),
            )
            unique = sorted({bytes(c) for c in (cuts or []) if c is not None})
            if len(unique) == len(fractions):
                break
        self._conn.rollback()
        edges: list[bytes | None] = [None, *unique, None]
        return list(itertools.pairwise(edges))

    # -- lifecycle -------------------------------------------------------------------------

    def close(self) -> None:
        self._conn.close()

    def __enter__(self) -> PostgresEnvelopeStore:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


def _topic_bloom(topic: bytes) -> bytes:
    from waku_legacy.mailserver_compat.wire.bloom import topic_to_bloom

    return topic_to_bloom(topic)
