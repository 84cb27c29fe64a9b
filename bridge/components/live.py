"""The live bridge as a component (:class:`LiveComponent`)."""

from __future__ import annotations

from waku_legacy.bridge.components.context import BridgeContext, local_state_dir
from waku_legacy.bridge.components.relay import RelayComponent
from waku_legacy.bridge.components.store import StoreComponent
from waku_legacy.bridge.config import V1Config
from waku_legacy.bridge.lifecycle import READY, Component
from waku_legacy.bridge.live import LiveBridge

__all__ = ["LiveComponent"]


class LiveComponent(Component):
    """The live bridge (v1 <-> v2) and its batch writer: closing writes what it buffered."""

    name = "live"

    def __init__(
        self, context: BridgeContext, store: StoreComponent, relay: RelayComponent | None
    ) -> None:
        self.context = context
        self.store = store
        self.relay = relay
        self.needs = (store.name,) if relay is None else (store.name, relay.name)
        self.bridge: LiveBridge | None = None

    async def open(self) -> None:
        context = self.context
        v1 = context.config.v1 or V1Config()  # without [v1]: its defaults
        self.bridge = LiveBridge(
            store=self.store.opened, router=context.router, metrics=context.metrics,
            clock=context.clock, relay=self.relay.publisher if self.relay else None,
            seen_capacity=v1.seen_capacity, live_window=v1.live_window,
            spool=local_state_dir(context.config) / "live-spool.rlp",
        )  # fmt: skip
        self.bridge.start()

    async def close(self) -> None:
        if self.bridge is not None:
            await self.bridge.close(self.context.shutdown_timeout)  # buffered rows reach the store

    def health(self) -> str | None:
        return READY if self.bridge is not None and not self.closed else None
