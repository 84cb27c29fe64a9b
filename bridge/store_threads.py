"""Async access to the v2 store from the event loop: reader threads and one writer.

The store classes are synchronous and one instance is one connection. Here every thread
gets its own instance (``open_store(url)`` per thread), so that SQLite readers run in
parallel under WAL (and release the GIL inside SQLite) and PostgreSQL gets a connection per
thread. All writes go through ONE writer thread, in submission order; :meth:`close` waits for
writes already submitted (graceful shutdown finishes in-flight writes) before closing.

Outages: every connection of one store shares one :class:`StoreHealth` (the reconnect
schedule of :mod:`waku_legacy.store.reconnect`, bounded exponential backoff with jitter).
A lost connection raises :class:`~waku_legacy.store.StoreUnavailable` and is opened again
by a later call; while the store is down, calls fail at once (the REST API and the store
protocols answer 503 SERVICE_UNAVAILABLE, ``/health`` says the store is NOT_READY with the
reason) and the outage is logged as three kinds of structured lines: store unreachable,
still unreachable (every minute), reachable again (with the outage's length).
"""

from __future__ import annotations

import asyncio
import functools
import logging
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from waku_legacy.bridge.logs import fields
from waku_legacy.bridge.status import public_store_url
from waku_legacy.store import (
    MessageStore,
    QueryPage,
    Reconnect,
    StoredMessage,
    StoreQuery,
    StoreUnavailable,
    V1EnvelopeQuery,
    WirePage,
    open_store,
)

__all__ = ["StoreAccess", "StoreHealth", "ThreadLocalStore"]

T = TypeVar("T")

log = logging.getLogger("waku_legacy.bridge.store")


class StoreHealth(Reconnect):
    """One store's reconnect schedule, logged; :meth:`describe` is what ``/health`` says."""

    def __init__(self, url: str) -> None:
        super().__init__()  # Reconnect's schedule, as it declares it
        self.url = url
        self.outages = 0
        self.down_wall: float | None = None  # time.time() of the outage's start

    def on_down(self, reason: str) -> None:
        self.outages += 1
        self.down_wall = time.time()
        log.error("store unreachable; serving 503 and spooling live rows until it is back",
                  extra=fields(store=public_store_url(self.url), error=reason))  # fmt: skip

    def on_still_down(self, reason: str, down_for: float, attempts: int) -> None:
        log.error("store still unreachable", extra=fields(
            store=public_store_url(self.url), down_s=round(down_for, 1), attempts=attempts,
            error=reason))  # fmt: skip

    def on_up(self, down_for: float, attempts: int) -> None:
        self.down_wall = None
        log.warning("store reachable again", extra=fields(
            store=public_store_url(self.url), down_s=round(down_for, 3),
            failed_attempts=attempts))  # fmt: skip

    def describe(self) -> str | None:
        """None when the store is up, else why it is not (for ``/health``'s ``desc``)."""
        reason = self.reason
        since = self.down_wall
        if not self.down or reason is None:
            return None
        when = "" if since is None else time.strftime(" since %H:%M:%SZ", time.gmtime(since))
        return f"store unreachable{when}: {reason}"


class ThreadLocalStore(MessageStore):
    """A store whose every call uses the calling thread's own store instance.

    Hand it to synchronous code run from several threads (the mailserver's
    ``V2StoreSource`` queries from ``asyncio.to_thread``)."""

    def __init__(
        self, url: str, *, read_only: bool = False, health: StoreHealth | None = None
    ) -> None:
        self.url = url
        self.read_only = read_only  # every connection refuses writes (a worker process)
        self.health = health or StoreHealth(url)
        self._local = threading.local()
        self._lock = threading.Lock()
        self._instances: list[MessageStore] = []
        self._closed = False

    def get(self) -> MessageStore:
        store = getattr(self._local, "store", None)
        if store is None:
            if self._closed:
                raise RuntimeError("the store is closed")
            store = open_store(self.url, reconnect=self.health)
            if self.read_only:
                store.make_read_only()
            self._local.store = store
            with self._lock:
                self._instances.append(store)
        return store

    # The store interface, each call on the calling thread's instance.

    def insert_messages(
        self, rows: Iterable[StoredMessage | tuple[Any, ...]], *, batch_size: int = 5000
    ) -> int:
        return self.get().insert_messages(rows, batch_size=batch_size)

    def query(self, query: StoreQuery) -> QueryPage:
        return self.get().query(query)

    def query_wire(self, query: StoreQuery) -> WirePage:
        return self.get().query_wire(query)

    def get_message(self, message_hash: bytes) -> StoredMessage | None:
        return self.get().get_message(message_hash)

    def get_envelope(self, message_hash: bytes) -> bytes | None:
        return self.get().get_envelope(message_hash)

    def get_envelopes(self, message_hashes: Sequence[bytes]) -> dict[bytes, bytes]:
        return self.get().get_envelopes(message_hashes)

    def query_v1_envelopes(self, query: V1EnvelopeQuery) -> list[tuple[bytes, bytes]]:
        return self.get().query_v1_envelopes(query)

    def count(self) -> int:
        return self.get().count()

    def count_envelopes(self) -> int:
        return self.get().count_envelopes()

    def ping(self) -> None:
        self.get().ping()

    def close(self) -> None:
        """Close every thread's instance (call when no thread uses the store any more)."""
        with self._lock:
            self._closed = True
            instances, self._instances = self._instances, []
        for store in instances:
            try:
                store.close()
            except Exception:
                pass


class StoreAccess:
    """Reader pool + single writer over one store URL.

    ``readers=0`` runs reads on the event loop's own thread (no thread hop, no GIL
    hand-over: faster for SQLite pages that take well under a millisecond, but one slow
    query then holds up every other request)."""

    def __init__(
        self,
        url: str,
        *,
        readers: int = 4,
        read_only: bool = False,
        start_in_outage: bool = False,
    ) -> None:
        self.url = url
        self.stores = ThreadLocalStore(url, read_only=read_only)
        self.health = self.stores.health
        self.inline_reads = readers == 0
        self._readers = ThreadPoolExecutor(max(readers, 1), thread_name_prefix="store-read")
        self._writer = ThreadPoolExecutor(1, thread_name_prefix="store-write")
        self._pending_writes: set[asyncio.Future[Any]] = set()
        self._closing = False
        # Open (and create the schema) once up front so that a bad URL fails at start; a
        # process started during an outage (a REST worker restarted) serves 503 until the
        # store is back instead of failing.
        try:
            self._writer.submit(self.stores.get).result()
        except StoreUnavailable:
            if not start_in_outage:
                raise

    async def read(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """Run ``fn(store, *args, **kwargs)`` on a reader thread."""
        if self.inline_reads:
            return fn(self.stores.get(), *args, **kwargs)
        loop = asyncio.get_running_loop()
        call = functools.partial(self._call, fn, args, kwargs)
        return await loop.run_in_executor(self._readers, call)

    def _call(self, fn: Callable[..., T], args: Sequence[Any], kwargs: dict[str, Any]) -> T:
        return fn(self.stores.get(), *args, **kwargs)

    async def write(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """Run ``fn(store, ...)`` on the writer thread (in submission order)."""
        if self._closing:
            raise RuntimeError("the store is shutting down; write refused")
        loop = asyncio.get_running_loop()
        future = loop.run_in_executor(self._writer, functools.partial(self._call, fn, args, kwargs))
        self._pending_writes.add(future)
        future.add_done_callback(self._pending_writes.discard)
        return await asyncio.shield(future)  # a cancelled caller still lets the write finish

    async def insert(self, rows: Iterable[StoredMessage]) -> int:
        rows = list(rows)
        if not rows:
            return 0
        return await self.write(lambda store: store.insert_messages(rows))

    async def probe(self) -> None:
        """Check the store answers (a reader thread's connection; raises
        :class:`~waku_legacy.store.StoreUnavailable` when not)."""
        await self.read(lambda store: store.ping())

    @property
    def pending_writes(self) -> int:
        return len(self._pending_writes)

    async def close(self, timeout: float = 30.0) -> None:
        """Refuse new writes, wait for submitted ones (up to ``timeout``), close."""
        self._closing = True
        if self._pending_writes:
            await asyncio.wait(list(self._pending_writes), timeout=timeout)
        loop = asyncio.get_running_loop()
        await loop.run_in_executor(None, self._shutdown)

    def _shutdown(self) -> None:
        self._writer.shutdown(wait=True)
        self._readers.shutdown(wait=True)
        self.stores.close()
