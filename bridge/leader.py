"""One leader among bridge instances sharing a PostgreSQL store, fenced.

Several bridges may serve one PostgreSQL store (each its REST API, its workers, its v1
listener and live bridge). Exactly one at a time does the singleton work: archiving,
seeding and publishing archive links, and pulling history. The role is a PostgreSQL
session-level advisory lock, ``pg_try_advisory_lock(KEY)`` with ``KEY`` derived from
:data:`LOCK_NAME`, taken on a connection of its own and held for that session's life, plus a
fencing token (:mod:`waku_legacy.store.role`): a row whose number only grows, incremented on
that connection right after the lock is taken.

- The others try the lock every ``[store] leader_interval``. One that takes it increments
  the token, then waits one more interval before it starts the singletons (the old holder's
  last heartbeat has run out by then), unless the old holder handed the role back in order
  (SIGTERM: it stopped its singletons first and marked the row): then it starts at once.
- The holder checks its token on its session :data:`CHECKS_PER_INTERVAL` times per interval;
  a check that fails, or does not answer within an interval, stops the singletons at once.
- Every write the role makes checks again at the point of writing (:meth:`LeaderLock.check`,
  a round trip on the lock's session): archive data, index, digests, state, torrent and link
  message files before each append or rename (:mod:`waku_legacy.archive.fence`), and the link
  schedule in the store inside the transaction that writes it (the token row locked FOR
  SHARE: :meth:`~waku_legacy.store.role.RoleStore.record`). A holder whose session was
  terminated (``pg_terminate_backend``, a reset connection) fails its next check at once,
  before the next write, even while its heartbeat has not noticed yet.
- A holder that hangs or is cut off without a reset: its session sets
  ``idle_session_timeout`` to three intervals (PostgreSQL 14 on) and TCP keepalives (10 s
  idle, 5 s apart, 3 probes), so the server ends the session and frees the lock; its checks
  block meanwhile (no write) and fail once the session is gone.

What this guarantees, and what not: a store write (the link schedule) is made only while the
writer's token is the row's, atomically. A file write is made only after a check that
succeeded on a live session holding the lock; the check cannot be atomic with the write on a
shared file system, so one window remains: between a check that passed and the rename (or
one archive's append) right after it. A holder paused there (SIGSTOP, a VM freeze) for longer
than the successor's wait (one interval) writes that one step late. Likewise a relay
publish follows the transaction that recorded it, and a holder paused between the two
publishes late. The cost: a takeover after a crash or a cut takes one interval longer, and
the holder makes about ``CHECKS_PER_INTERVAL / leader_interval`` queries a second plus one
per file it writes.

SQLite stores are local files with one writer: one instance per store, no lock; the role is
this instance's (:class:`LocalRole`: the same token and link schedule, in the SQLite file).
The primary process of an instance holds the lock; its workers only read and never take it.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import os
import socket
import sqlite3
import threading
import time
from collections.abc import Awaitable, Callable, Iterator
from typing import Any, Protocol

from waku_legacy.bridge.logs import fields
from waku_legacy.store import StoreError
from waku_legacy.store.role import FencingTokenLost, LinkPublication, RoleStore

__all__ = ["CHECKS_PER_INTERVAL", "LOCK_NAME", "LeaderLock", "LocalRole", "Role", "lock_key"]

log = logging.getLogger("waku_legacy.bridge.leader")

LOCK_NAME = "waku-legacy bridge singletons"
CHECKS_PER_INTERVAL = 4  # the holder's token checks per leader_interval


def lock_key(name: str = LOCK_NAME) -> int:
    """The advisory lock's 64-bit key: the first 8 bytes of SHA-256 of ``name``, signed."""
    return int.from_bytes(hashlib.sha256(name.encode()).digest()[:8], "big", signed=True)


def _holder_name() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


class Role(Protocol):
    """The archiving role as the archivers see it: a fencing check before each write, and
    the link schedule in the store."""

    def check(self) -> None:
        """Raise :class:`FencingTokenLost` unless this instance holds the role now."""

    def publication(self, community: str) -> LinkPublication | None:
        """The community's link schedule as last recorded (by any holder)."""

    def record(self, publication: LinkPublication) -> None:
        """Write it, in one transaction with the token check (:class:`FencingTokenLost`)."""


class LeaderLock:
    """Competes for the lock; runs ``on_acquired`` when the role may act, ``on_lost`` when
    it may not any more (both awaited on the event loop). The fencing :class:`Role` of the
    archivers while it holds the role."""

    def __init__(
        self,
        dsn: str,
        *,
        interval: float,
        on_acquired: Callable[[], Awaitable[None]],
        on_lost: Callable[[], Awaitable[None]],
        name: str = LOCK_NAME,
    ) -> None:
        self.dsn = dsn
        self.interval = interval
        self.key = lock_key(name)
        self.on_acquired = on_acquired
        self.on_lost = on_lost
        self.held = False  # the singletons run
        self.token: int | None = None  # the lock and this token are ours
        self._start_at: float | None = None  # monotonic: when the singletons may start
        self._handed_back = False  # the last holder marked the role handed back in order
        self._conn: Any = None
        self._roles: RoleStore | None = None
        self._io = threading.Lock()  # one statement at a time on the lock's session

    def _connect(self) -> Any:
        import psycopg

        conn = psycopg.connect(
            self.dsn, autocommit=True, connect_timeout=max(1, int(self.interval)),
            keepalives=1, keepalives_idle=10, keepalives_interval=5, keepalives_count=3,
            application_name="waku-legacy bridge leader",
        )  # fmt: skip
        timeout_ms = int(self.interval * 3 * 1000)
        with contextlib.suppress(psycopg.Error):  # PostgreSQL 13 and older: no such setting
            conn.execute(f"SET idle_session_timeout = {timeout_ms}")
        for setting, value in (("tcp_keepalives_idle", 10), ("tcp_keepalives_interval", 5),
                               ("tcp_keepalives_count", 3)):  # fmt: skip
            with contextlib.suppress(psycopg.Error):
                conn.execute(f"SET {setting} = {value}")
        roles = RoleStore(conn, postgres=True)
        roles.create()
        self._roles = roles
        return conn

    def _try(self) -> bool:
        """One try (a thread): connect when needed, then check our token, or take the lock
        and a new token (``_handed_back``: whether the last holder handed the role back)."""
        with self._io:
            if self._conn is None or self._conn.closed:
                if self.token is not None:  # the session that held the lock is gone
                    raise FencingTokenLost("the leader lock's session is gone")
                self._conn = self._connect()
            assert self._roles is not None
            if self.token is not None:
                self._roles.check(self.token)
                return True
            row = self._conn.execute("SELECT pg_try_advisory_lock(%s)", (self.key,)).fetchone()
            if not (row and row[0]):
                return False
            self.token, self._handed_back = self._roles.take(_holder_name(), time.time())
            return True

    def _drop(self) -> None:
        # never waits for _io: a statement hung on a dead session must not keep it open
        conn, self._conn = self._conn, None
        if conn is not None:
            with contextlib.suppress(Exception):
                conn.close()

    def _release(self, token: int) -> None:
        """Mark the role handed back, on our still-live session (the next holder need not
        wait); nothing when the session is gone."""
        with self._io:
            if self._roles is not None and self._conn is not None and not self._conn.closed:
                with contextlib.suppress(Exception):
                    self._roles.release(token)

    # -- the Role the archivers use (from their threads) -------------------------------------

    def _roles_for(self, token: int | None) -> RoleStore:
        if token is None or not self.held or self._roles is None:
            raise FencingTokenLost(
                "no fencing token: this instance does not hold the archiving role"
            )
        return self._roles

    def check(self) -> None:
        token = self.token
        roles = self._roles_for(token)
        assert token is not None
        try:
            with self._io:
                if self.token != token:
                    raise FencingTokenLost(f"fencing token {token}: the archiving role was lost")
                roles.check(token)
        except FencingTokenLost:
            raise
        except Exception as exc:  # psycopg.Error, OSError: the session, and the role, are gone
            raise FencingTokenLost(
                f"fencing token {token} not confirmed: the leader lock's session failed ({exc})"
            ) from exc

    def publication(self, community: str) -> LinkPublication | None:
        token = self.token
        roles = self._roles_for(token)
        try:
            with self._io:
                return roles.publication(community)
        except Exception as exc:  # psycopg.Error, OSError
            raise FencingTokenLost(
                f"fencing token {token} not confirmed: the leader lock's session failed ({exc})"
            ) from exc

    def record(self, publication: LinkPublication) -> None:
        token = self.token
        roles = self._roles_for(token)
        assert token is not None
        try:
            with self._io:
                roles.record(token, publication)
        except FencingTokenLost:
            raise
        except Exception as exc:
            raise FencingTokenLost(
                f"fencing token {token} not confirmed: the leader lock's session failed ({exc})"
            ) from exc

    # -- the loop ----------------------------------------------------------------------------

    async def _lose(self, why: str) -> None:
        self.token = None  # every check fails from now on, before the singletons stop
        self._start_at = None
        if self.held:
            self.held = False
            log.warning("leader lock lost: singletons stopped until it is taken again",
                        extra=fields(error=why))  # fmt: skip
            await self.on_lost()

    async def run(self) -> None:
        """Until cancelled: take the role when it is free, act once the old holder's last
        heartbeat has run out, keep it while the checks pass."""
        try:
            while True:
                try:
                    # a check that does not answer within an interval is a lost role
                    got = await asyncio.wait_for(asyncio.to_thread(self._try), self.interval)
                except (Exception, TimeoutError) as exc:  # psycopg.Error, OSError, stale token
                    await asyncio.to_thread(self._drop)
                    if self.token is not None:
                        await self._lose(str(exc) or type(exc).__name__)
                    else:
                        log.warning("leader lock: no session", extra=fields(error=str(exc)))
                    got = False
                now = time.monotonic()
                if got and self._start_at is None:
                    wait = 0.0 if self._handed_back else self.interval
                    self._start_at = now + wait
                    log.info(
                        "leader lock taken: this instance archives, seeds and publishes",
                        extra=fields(token=self.token, wait=wait),
                    )
                if not self.held and self._start_at is not None and now >= self._start_at:
                    self.held = True
                    await self.on_acquired()
                if self.token is None:
                    delay = self.interval
                elif self.held:
                    delay = self.interval / CHECKS_PER_INTERVAL
                else:
                    start_at = self._start_at if self._start_at is not None else now
                    delay = min(self.interval / CHECKS_PER_INTERVAL, start_at - now)
                await asyncio.sleep(max(delay, 0.0))
        finally:
            token = self.token
            if self.held:  # the singletons finish what they write while the token holds
                try:
                    await self.on_lost()
                finally:
                    self.held = False
            self.token, self._start_at = None, None
            if token is not None:
                await asyncio.to_thread(self._release, token)
            await asyncio.to_thread(self._drop)  # ending the session frees the lock


class LocalRole:
    """SQLite: one instance per store, the role always its own; the same token (taken at
    start) and link schedule, in the store's file."""

    def __init__(self, path: str, *, busy_timeout_ms: int = 30_000) -> None:
        self.path = path
        self._io = threading.Lock()
        try:
            self._conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
            self._conn.execute(f"PRAGMA busy_timeout={int(busy_timeout_ms)}")
            self._roles = RoleStore(self._conn, postgres=False)
            self._roles.create()
            self.token, _ = self._roles.take(_holder_name(), time.time())
        except sqlite3.Error as exc:
            raise StoreError(
                f"cannot take the archiving role in the SQLite store {path}: {exc}"
            ) from exc

    @contextlib.contextmanager
    def _using(self) -> Iterator[RoleStore]:
        try:
            with self._io:
                yield self._roles
        except sqlite3.Error as exc:  # locked past busy_timeout, I/O error: not confirmed
            raise FencingTokenLost(
                f"fencing token {self.token} not confirmed: the SQLite store failed ({exc})"
            ) from exc

    def check(self) -> None:
        with self._using() as roles:
            roles.check(self.token)

    def publication(self, community: str) -> LinkPublication | None:
        with self._using() as roles:
            return roles.publication(community)

    def record(self, publication: LinkPublication) -> None:
        with self._using() as roles:
            roles.record(self.token, publication)

    def close(self) -> None:
        with self._io:
            with contextlib.suppress(sqlite3.Error):
                self._roles.release(self.token)
            self._conn.close()
