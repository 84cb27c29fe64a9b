"""The REST API as a component (:class:`HttpApi`)."""

from __future__ import annotations

import os
import socket
from collections.abc import Sequence

from aiohttp import web

from waku_legacy.bridge.components.store import StoreComponent
from waku_legacy.bridge.config import ServerConfig
from waku_legacy.bridge.http_api import BridgeBackend, make_runner
from waku_legacy.bridge.http_guard import HttpLimits
from waku_legacy.bridge.lifecycle import READY, Component
from waku_legacy.bridge.metrics import BridgeMetrics
from waku_legacy.bridge.workers import bind_listener
from waku_legacy.errors import ConfigError

__all__ = ["HttpApi"]


class HttpApi(Component):
    """The REST API (store, operations, status page, admin): on its own socket, or (worker
    processes) on one this process binds with SO_REUSEPORT for all. Closing stops accepting
    and lets in-flight requests finish (``shutdown_timeout``). It needs the components its
    requests use (``serves``: the live bridge, the relay publisher, the viewer), so that they
    close after it: its in-flight requests never meet them closed."""

    name = "http"

    def __init__(
        self, service: BridgeBackend, store: StoreComponent, metrics: BridgeMetrics,
        server: ServerConfig, *, shared_socket: bool,
        subapps: Sequence[tuple[str, web.Application]] = (),
        serves: Sequence[Component | None] = (),
    ) -> None:  # fmt: skip
        self.service = service
        self.subapps = subapps  # (prefix, application): the history viewer's pages
        self.store = store
        self.metrics = metrics
        self.server = server
        self.shared_socket = shared_socket
        self.needs = (store.name, *(part.name for part in serves if part is not None))
        self.runner: web.AppRunner | None = None
        self.listener: socket.socket | None = None  # bound here when there are workers
        self.port = 0

    async def open(self) -> None:
        server = self.server
        self.runner = make_runner(
            self.store.opened, self.metrics, HttpLimits.from_config(server),
            service=self.service, shutdown_timeout=server.shutdown_timeout,
            process=str(os.getpid()) if self.shared_socket else None, subapps=self.subapps,
        )  # fmt: skip
        await self.runner.setup()
        try:
            if self.shared_socket:
                self.listener = bind_listener(server.host, server.port)
                site: web.BaseSite = web.SockSite(self.runner, self.listener)
            else:
                site = web.TCPSite(self.runner, server.host, server.port)
            await site.start()
        except OSError as exc:
            raise ConfigError(
                f"[server] listen: cannot listen on {server.host}:{server.port}: "
                f"{exc.strerror or exc}"
            ) from None
        self.port = self.runner.addresses[0][1]  # the site's first socket

    async def close(self) -> None:
        runner, self.runner = self.runner, None
        try:
            if runner is not None:
                await runner.cleanup()  # in-flight requests finish (shutdown_timeout)
        finally:
            listener, self.listener = self.listener, None
            if listener is not None:
                listener.close()

    def health(self) -> str | None:
        return READY if self.runner is not None else None
