"""The Waku v1 mailserver as a component (:class:`MailserverComponent`)."""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING

from waku_legacy.bridge.components.context import require
from waku_legacy.bridge.components.live import LiveComponent
from waku_legacy.bridge.components.store import StoreComponent
from waku_legacy.bridge.config import V1Config
from waku_legacy.bridge.lifecycle import READY, Component
from waku_legacy.bridge.logs import fields
from waku_legacy.bridge.metrics import BridgeMetrics
from waku_legacy.errors import ConfigError

if TYPE_CHECKING:  # imported when opened: the v1 stack loads only when used
    from waku_legacy.mailserver_compat.server.asyncio_server import MailServer

__all__ = ["MailserverComponent"]

log = logging.getLogger("waku_legacy.bridge")


class MailserverComponent(Component):
    """The Waku v1 mailserver (RLPx listener): history requests from the store, live
    envelopes to the live bridge. Closing disconnects its peers."""

    name = "v1"

    def __init__(self, v1: V1Config, store: StoreComponent, live: LiveComponent,
                 metrics: BridgeMetrics) -> None:  # fmt: skip
        self.v1 = v1
        self.store = store
        self.live = live
        self.metrics = metrics
        self.needs = (store.name, live.name)
        self.server: MailServer | None = None

    async def open(self) -> None:
        from waku_legacy.crypto.key_file import load_or_create_node_key
        from waku_legacy.mailserver_compat.server.asyncio_server import MailServer
        from waku_legacy.mailserver_compat.server.core import MailServerConfig
        from waku_legacy.mailserver_compat.storage.envelope_store import V2StoreSource

        v1 = self.v1
        live = require(self.live.bridge, "the live bridge")
        key, created = await asyncio.to_thread(load_or_create_node_key, v1.node_key_file)
        if created:
            log.info("created a v1 node key", extra=fields(path=v1.node_key_file))
        config = MailServerConfig(
            rate_limit=v1.rate_limit, min_pow=v1.min_pow,
            trusted_peers=frozenset(v1.trusted_peers), seen_capacity=v1.seen_capacity,
            limits=v1.limits,
        )  # fmt: skip
        self.server = MailServer(
            V2StoreSource(self.store.opened.stores), key, config, sink=live.on_v1_envelope,
            on_refusal=self.metrics.count_v1_refusal,
        )  # fmt: skip
        live.mailserver = self.server
        try:
            await self.server.start(v1.host, v1.port)
        except OSError as exc:
            raise ConfigError(
                f"[v1] listen: cannot listen on {v1.host}:{v1.port}: {exc.strerror or exc}"
            ) from None

    async def close(self) -> None:
        if self.server is not None:
            await self.server.close()

    def health(self) -> str | None:
        return READY if self.server is not None and self.server.listening else None
