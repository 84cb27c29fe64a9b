"""The worker processes as a component (:class:`WorkersComponent`)."""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from dataclasses import replace

from aiohttp import web

from waku_legacy.bridge.components.context import BridgeContext, require
from waku_legacy.bridge.components.http import HttpApi
from waku_legacy.bridge.components.libp2p import Libp2pComponent
from waku_legacy.bridge.components.store import StoreComponent
from waku_legacy.bridge.http_api import BridgeBackend, make_app
from waku_legacy.bridge.http_guard import HttpLimits
from waku_legacy.bridge.lifecycle import Component
from waku_legacy.bridge.workers import WorkerPool

__all__ = ["WorkersComponent"]


class WorkersComponent(Component):
    """The worker processes on the REST socket, and the Unix socket they forward everything
    but the store routes to (no limits there: the worker applied them). Closing stops the
    workers first (each finishes its requests; forwarded ones need this process), then the
    Unix socket."""

    name = "workers"

    def __init__(
        self, context: BridgeContext, count: int, service: BridgeBackend, http: HttpApi,
        store: StoreComponent, libp2p: Libp2pComponent | None,
        subapps: Sequence[tuple[str, web.Application]] = (),
    ) -> None:  # fmt: skip
        self.context = context
        self.count = count
        self.service = service
        self.http = http
        self.store = store
        self.libp2p = libp2p
        # (prefix, application) served to forwarded requests too: the history viewer's pages
        self.subapps = subapps
        self.needs = tuple(part.name for part in (store, http, libp2p) if part is not None)
        self.pool: WorkerPool | None = None
        self._internal: web.AppRunner | None = None

    async def open(self) -> None:
        context = self.context
        timeout = context.shutdown_timeout
        config = context.config
        if self.libp2p is not None:  # the shards the primary announces, resolved at its open
            config = replace(config, libp2p=self.libp2p.config)
        self.pool = WorkerPool(
            config, require(self.http.listener, "the REST socket"), self.count,
            context.metrics, shutdown_timeout=timeout,
            libp2p_listen=self.libp2p.shareable_listen() if self.libp2p else (),
        )  # fmt: skip
        internal = make_app(
            self.store.opened, context.metrics, service=self.service,
            limits=HttpLimits(requests_per_second=0), subapps=self.subapps,
        )  # fmt: skip
        self._internal = web.AppRunner(
            internal, handle_signals=False, access_log=None, shutdown_timeout=timeout
        )
        await self._internal.setup()
        await web.UnixSite(self._internal, str(self.pool.primary_socket)).start()
        await self.pool.start()

    async def close(self) -> None:
        pool, internal, self._internal = self.pool, self._internal, None
        async with contextlib.AsyncExitStack() as then:  # the Unix socket even if a stop raised
            if internal is not None:
                then.push_async_callback(internal.cleanup)
            if pool is not None:
                await pool.stop()  # workers finish their requests (forwarded ones need us)

    def pids(self) -> list[int]:
        return self.pool.pids() if self.pool is not None else []
