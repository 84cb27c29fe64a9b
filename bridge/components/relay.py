"""The relay publisher as a component (:class:`RelayComponent`)."""

from __future__ import annotations

from waku_legacy.bridge.components.http_client import HttpClient
from waku_legacy.bridge.config import RelayConfig
from waku_legacy.bridge.lifecycle import READY, Component
from waku_legacy.bridge.metrics import BridgeMetrics
from waku_legacy.bridge.relay import RelayPublisher

__all__ = ["RelayComponent"]

DRAIN_AT_MOST = 10.0  # seconds the queue gets to drain at a stop, whatever shutdown_timeout


class RelayComponent(Component):
    """The relay publisher's queue (nwaku's REST relay): closing gives it a bounded time
    (``shutdown_timeout``, at most :data:`DRAIN_AT_MOST`) to drain."""

    name = "relay"

    def __init__(
        self, config: RelayConfig, metrics: BridgeMetrics, client: HttpClient, timeout: float
    ) -> None:
        self.config = config
        self.metrics = metrics
        self.client = client
        self.timeout = timeout
        self.needs = (client.name,)
        self.publisher: RelayPublisher | None = None

    async def open(self) -> None:
        self.publisher = RelayPublisher(self.config, self.metrics, self.client.opened)
        self.publisher.start()

    async def close(self) -> None:
        if self.publisher is not None:
            await self.publisher.close(timeout=min(self.timeout, DRAIN_AT_MOST))

    def health(self) -> str | None:
        return READY if self.publisher is not None else None
