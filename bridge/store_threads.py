"""Async access to the v2 store from the event loop: reader threads and one writer.

The store classes are synchronous and one instance is one connection. Here every thread
gets its own instance (``open_store(url)`` per thread), so that SQLite readers run in
parallel under WAL (and release the GIL inside SQLite) and PostgreSQL gets a connection per
thread. All writes go through ONE writer thread, in submission order; :meth:`close` waits for
writes already submitted (graceful shutdown finishes in-flight writes) before closing.
"""

from __future__ import annotations

import asyncio
import functools
import threading
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from waku_legacy.store import (
    MessageStore,
    QueryPage,
    StoredMessage,
    StoreQuery,
    V1EnvelopeQuery,
    open_store,
)

__all__ = ["StoreAccess", "ThreadLocalStore"]

T = TypeVar("T")


class ThreadLocalStore(MessageStore):
    """A store whose every call uses the calling thread's own store instance.

    Hand it to synchronous code run from several threads (the mailserver's
    ``V2StoreSource`` queries from ``asyncio.to_thread``)."""

    def __init__(self, url: str, *, read_only: bool = False) -> None:
        self.url = url
        self.read_only = read_only  # every connection refuses writes (a worker process)
        self._local = threading.local()
        self._lock = threading.Lock()
        self._instances: list[MessageStore] = []
        self._closed = False

    def get(self) -> MessageStore:
        store = getattr(self._local, "store", None)
        if store is None:
            if self._closed:
                raise RuntimeError("the store is closed")
            store = open_store(self.url)
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

    def __init__(self, url: str, *, readers: int = 4, read_only: bool = False) -> None:
        self.url = url
        self.stores = ThreadLocalStore(url, read_only=read_only)
        self.inline_reads = readers == 0
        self._readers = ThreadPoolExecutor(max(readers, 1), thread_name_prefix="store-read")
        self._writer = ThreadPoolExecutor(1, thread_name_prefix="store-write")
        self._pending_writes: set[asyncio.Future[Any]] = set()
        self._closing = False
        # Open (and create the schema) once up front so that a bad URL fails at start.
        self._writer.submit(self.stores.get).result()

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
