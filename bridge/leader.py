"""One leader among bridge instances sharing a PostgreSQL store.

Several bridges may serve one PostgreSQL store (each its REST API, its workers, its v1
listener and live bridge). Exactly one at a time does the singleton work: archiving,
seeding and publishing magnet links, and pulling history. The role is a PostgreSQL
session-level advisory lock, ``pg_try_advisory_lock(KEY)`` with ``KEY`` derived from
:data:`LOCK_NAME`, taken on a connection of its own and held for that session's life:

- the holder runs ``SELECT 1`` on it every ``[store] leader_interval``; when that fails
  (server restarted, connection cut) it stops the singletons at once and competes again;
- the others try the lock every ``leader_interval``; a holder that dies (process killed,
  machine gone) loses its connection, the server ends its session and frees the lock, and
  the next try takes it: the role moves within one interval of the session's end;
- a holder that hangs (process stopped, event loop blocked) or is cut off without a reset:
  its session sets ``idle_session_timeout`` to three intervals (PostgreSQL 14 on; the
  heartbeat keeps a live holder well inside it) and TCP keepalives (10 s idle, 5 s apart,
  3 probes) so the server ends the session, freeing the lock, within ~3 intervals or ~25 s.
  A holder that wakes after that finds its session gone at its next heartbeat and stops its
  singletons then: up to one interval in which both may act (archive builds are crash-safe
  and per instance; a magnet link may be published twice, the newer clock wins).

SQLite stores are local files with one writer: one instance per store, no lock (the role is
always this instance's). The primary process of an instance holds the lock; its workers
only read and never take it.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from waku_legacy.bridge.logs import fields

__all__ = ["LOCK_NAME", "LeaderLock", "lock_key"]

log = logging.getLogger("waku_legacy.bridge.leader")

LOCK_NAME = "waku-legacy bridge singletons"


def lock_key(name: str = LOCK_NAME) -> int:
    """The advisory lock's 64-bit key: the first 8 bytes of SHA-256 of ``name``, signed."""
    return int.from_bytes(hashlib.sha256(name.encode()).digest()[:8], "big", signed=True)


class LeaderLock:
    """Competes for the lock; runs ``on_acquired`` when it is taken, ``on_lost`` when the
    session holding it is gone (both awaited on the event loop)."""

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
        self.held = False
        self._conn: Any = None

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
        return conn

    def _try(self) -> bool:
        """One try (a thread): connect when needed, then take the lock or check it."""
        if self._conn is None or self._conn.closed:
            self._conn = self._connect()
        if self.held:
            self._conn.execute("SELECT 1")
            return True
        row = self._conn.execute("SELECT pg_try_advisory_lock(%s)", (self.key,)).fetchone()
        return bool(row and row[0])

    def _drop(self) -> None:
        if self._conn is not None:
            with contextlib.suppress(Exception):
                self._conn.close()
        self._conn = None

    async def run(self) -> None:
        """Until cancelled: take the role when it is free, keep it while the session lives."""
        try:
            while True:
                try:
                    held = await asyncio.to_thread(self._try)
                except Exception as exc:  # psycopg.Error, OSError: the session is gone
                    await asyncio.to_thread(self._drop)
                    held = False
                    log.warning("leader lock: no session", extra=fields(error=str(exc)))
                if held and not self.held:
                    self.held = True
                    log.info("leader lock taken: this instance archives, seeds and publishes")
                    await self.on_acquired()
                elif self.held and not held:
                    self.held = False
                    log.warning("leader lock lost: singletons stopped until it is taken again")
                    await self.on_lost()
                await asyncio.sleep(self.interval)
        finally:
            await asyncio.to_thread(self._drop)  # ending the session frees the lock
            if self.held:
                self.held = False
                await self.on_lost()
