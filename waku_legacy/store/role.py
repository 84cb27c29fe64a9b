"""The archiving role's fencing token and each community's archive-link schedule, in the
v2 store (PostgreSQL or SQLite), beside nwaku's tables.

Two tables, created on first use (bridges only; nwaku and the migration never read them)::

    CREATE TABLE bridge_role (name TEXT PRIMARY KEY, token BIGINT NOT NULL,
        holder TEXT NOT NULL, taken_at DOUBLE PRECISION NOT NULL);
    CREATE TABLE link_publication (community TEXT PRIMARY KEY, link TEXT NOT NULL,
        clock BIGINT NOT NULL, clock_reason TEXT NOT NULL, published_at DOUBLE PRECISION,
        next_publish DOUBLE PRECISION NOT NULL, second_due DOUBLE PRECISION,
        token BIGINT NOT NULL);

- ``bridge_role.token`` only grows: :meth:`RoleStore.take` adds one in the transaction that
  takes the role, so a holder that lost the role holds a token below the row's from then on.
  ``holder`` is ``""`` once a holder handed the role back in order (:meth:`RoleStore.release`):
  the next one need not wait out the old holder's last heartbeat.
- ``link_publication``: the link last signed for a community, its clock, when the first copy
  went out (NULL: recorded, not confirmed sent), when it is due again and when the second
  chat's copy is due (NULL: none pending). :meth:`RoleStore.record` writes it only while
  the row's token is the writer's, checked in the same transaction.

Times are the bridge's clock (Unix seconds); the rows are read by whoever holds the role next.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from waku_legacy.store.types import StoreError

__all__ = ["ROLE", "FencingTokenLost", "LinkPublication", "RoleStore"]

ROLE = "archiving"
# the same key as the PostgreSQL store's schema creation: one schema writer at a time
_SCHEMA_LOCK = 7377656

SCHEMA = (
    "CREATE TABLE IF NOT EXISTS bridge_role (name TEXT PRIMARY KEY, token BIGINT NOT NULL, "
    "holder TEXT NOT NULL, taken_at DOUBLE PRECISION NOT NULL)",
    "CREATE TABLE IF NOT EXISTS link_publication (community TEXT PRIMARY KEY, "
    "link TEXT NOT NULL, clock BIGINT NOT NULL, clock_reason TEXT NOT NULL, "
    "published_at DOUBLE PRECISION, next_publish DOUBLE PRECISION NOT NULL, "
    "second_due DOUBLE PRECISION, token BIGINT NOT NULL)",
)
_COLUMNS = "community, link, clock, clock_reason, published_at, next_publish, second_due"


class FencingTokenLost(StoreError):
    """This instance no longer holds the archiving role: its write was refused."""


@dataclass(frozen=True, slots=True)
class LinkPublication:
    """A community's archive link as last signed, and its schedule."""

    community: str
    link: str
    clock: int  # ms: a later link message never goes below it
    clock_reason: str
    published_at: float | None  # the first copy confirmed sent (None: not yet)
    next_publish: float  # when the link goes out again
    second_due: float | None  # the second chat's copy (None: nothing pending)

    def to_json(self) -> dict[str, Any]:
        return {
            "clock": self.clock, "magnet_uri": self.link, "clock_reason": self.clock_reason,
            "at": self.published_at,
        }  # fmt: skip


class RoleStore:
    """The two tables over one DB-API connection: psycopg in autocommit mode (``postgres``)
    or sqlite3 with ``isolation_level=None``. Not thread-safe: the caller serialises."""

    def __init__(self, conn: Any, *, postgres: bool) -> None:
        self.conn = conn
        self.postgres = postgres
        self._p = "%s" if postgres else "?"

    @contextlib.contextmanager
    def _transaction(self) -> Iterator[None]:
        if self.postgres:
            with self.conn.transaction():
                yield
            return
        self.conn.execute("BEGIN IMMEDIATE")  # SQLite: the write lock from the start
        try:
            yield
        except BaseException:
            self.conn.execute("ROLLBACK")
            raise
        self.conn.execute("COMMIT")

    def create(self) -> None:
        with self._transaction():
            if self.postgres:
                self.conn.execute("SELECT pg_advisory_xact_lock(%s)", (_SCHEMA_LOCK,))
            for statement in SCHEMA:
                self.conn.execute(statement)

    def take(self, holder: str, now: float) -> tuple[int, bool]:
        """Take the role: (the new token, whether the last holder handed it back in order)."""
        p = self._p
        with self._transaction():
            self.conn.execute(
                f"INSERT INTO bridge_role (name, token, holder, taken_at) VALUES ({p}, 0, '', 0) "
                "ON CONFLICT (name) DO NOTHING",
                (ROLE,),
            )
            lock = " FOR UPDATE" if self.postgres else ""
            before = self.conn.execute(
                f"SELECT holder FROM bridge_role WHERE name = {p}{lock}", (ROLE,)
            ).fetchone()
            row = self.conn.execute(
                f"UPDATE bridge_role SET token = token + 1, holder = {p}, taken_at = {p} "
                f"WHERE name = {p} RETURNING token",
                (holder, now, ROLE),
            ).fetchone()
        return int(row[0]), before is not None and before[0] == ""

    def token(self) -> int | None:
        row = self.conn.execute(
            f"SELECT token FROM bridge_role WHERE name = {self._p}", (ROLE,)
        ).fetchone()
        return None if row is None else int(row[0])

    def check(self, token: int) -> None:
        """:class:`FencingTokenLost` unless the row's token is ``token``."""
        current = self.token()
        if current != token:
            raise FencingTokenLost(
                f"fencing token {token} is stale (the store's is {current}): another "
                "instance holds the archiving role"
            )

    def release(self, token: int) -> None:
        """Mark the role handed back in order (only while ``token`` is the row's)."""
        with self._transaction():
            self.conn.execute(
                f"UPDATE bridge_role SET holder = '' WHERE name = {self._p} AND token = {self._p}",
                (ROLE, token),
            )

    def publication(self, community: str) -> LinkPublication | None:
        row = self.conn.execute(
            f"SELECT {_COLUMNS} FROM link_publication WHERE community = {self._p}", (community,)
        ).fetchone()
        if row is None:
            return None
        return LinkPublication(
            str(row[0]), str(row[1]), int(row[2]), str(row[3]),
            None if row[4] is None else float(row[4]), float(row[5]),
            None if row[6] is None else float(row[6]),
        )  # fmt: skip

    def record(self, token: int, publication: LinkPublication) -> None:
        """Write ``publication`` in one transaction that first checks ``token`` against the
        role row (locked until commit: a taker's increment waits for it, or it sees the
        taker's token and nothing is written)."""
        p = self._p
        with self._transaction():
            lock = " FOR SHARE" if self.postgres else ""
            row = self.conn.execute(
                f"SELECT token FROM bridge_role WHERE name = {p}{lock}", (ROLE,)
            ).fetchone()
            if row is None or int(row[0]) != token:
                raise FencingTokenLost(
                    f"fencing token {token} is stale (the store's is "
                    f"{None if row is None else row[0]}): the link schedule was not written"
                )
            self.conn.execute(
                f"INSERT INTO link_publication ({_COLUMNS}, token) "
                f"VALUES ({p}, {p}, {p}, {p}, {p}, {p}, {p}, {p}) "
                "ON CONFLICT (community) DO UPDATE SET link = excluded.link, "
                "clock = excluded.clock, clock_reason = excluded.clock_reason, "
                "published_at = excluded.published_at, next_publish = excluded.next_publish, "
                "second_due = excluded.second_due, token = excluded.token",
                (publication.community, publication.link, publication.clock,
                 publication.clock_reason, publication.published_at, publication.next_publish,
                 publication.second_due, token),
            )  # fmt: skip
