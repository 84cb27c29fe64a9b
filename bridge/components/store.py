"""The v2 store as a component (:class:`StoreComponent`) and the probe that watches it
(:func:`store_watcher`)."""

from __future__ import annotations

import asyncio
import logging

from waku_legacy.bridge.components.context import require
from waku_legacy.bridge.lifecycle import READY, BackgroundTask, Component
from waku_legacy.bridge.logs import fields
from waku_legacy.bridge.store_threads import StoreAccess
from waku_legacy.store import StoreUnavailable

__all__ = ["StoreComponent", "store_watcher"]

log = logging.getLogger("waku_legacy.bridge")


class StoreComponent(Component):
    """The v2 store (:class:`~waku_legacy.bridge.store_threads.StoreAccess`): reader threads,
    the writer, the reconnect schedule. Closing waits for submitted writes."""

    name = "store"

    def __init__(self, url: str, *, readers: int, shutdown_timeout: float) -> None:
        self.url = url
        self.readers = readers
        self.shutdown_timeout = shutdown_timeout
        self.access: StoreAccess | None = None

    @property
    def opened(self) -> StoreAccess:
        return require(self.access, "the store")

    async def open(self) -> None:
        self.access = await asyncio.to_thread(StoreAccess, self.url, readers=self.readers)

    async def close(self) -> None:
        if self.access is not None:
            await self.access.close(timeout=self.shutdown_timeout)

    def outage(self) -> str | None:
        """Why the store cannot be reached now (None: it can, or it is not open)."""
        return None if self.access is None else self.access.health.describe()

    def health(self) -> str | None:
        outage = self.outage()
        if outage is not None:
            return f"Not Ready: {outage}"
        return READY if self.access is not None and not self.closed else None


def store_watcher(store: StoreComponent, interval: float = 5.0) -> BackgroundTask:
    """Probes the store every ``interval`` seconds, and on the reconnect schedule while it is
    down: an outage and the store's return show on ``/health`` (and are logged, by
    :class:`~waku_legacy.bridge.store_threads.StoreHealth`) even when no request or live row
    touches the store."""

    async def watch() -> None:
        access = store.opened
        health = access.health
        while True:
            await asyncio.sleep(max(health.retry_in(), 0.1) if health.down else interval)
            try:
                await access.probe()
            except StoreUnavailable:
                pass  # logged once per outage by StoreHealth
            except Exception as exc:
                log.debug("store probe failed", extra=fields(error=str(exc)))

    return BackgroundTask("store-probe", watch, needs=(store.name,))
