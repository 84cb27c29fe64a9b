"""History pulls from v2 store nodes, as a component (:class:`HistoryComponent`)."""

from __future__ import annotations

from pathlib import Path

from waku_legacy.bridge.components.context import BridgeContext, local_state_dir, require
from waku_legacy.bridge.components.http_client import HttpClient
from waku_legacy.bridge.components.live import LiveComponent
from waku_legacy.bridge.components.store import StoreComponent
from waku_legacy.bridge.config import HistoryConfig
from waku_legacy.bridge.history import HistoryPuller
from waku_legacy.bridge.lifecycle import BackgroundTask, Component

__all__ = ["HistoryComponent"]


class HistoryComponent(Component):
    """History pulls from the configured store nodes, every ``[history] interval``."""

    name = "history"

    def __init__(
        self, context: BridgeContext, history: HistoryConfig, store: StoreComponent,
        client: HttpClient, live: LiveComponent,
    ) -> None:  # fmt: skip
        self.context = context
        self.history = history
        self.store = store
        self.client = client
        self.live = live
        self.needs = (store.name, client.name, live.name)
        self.puller: HistoryPuller | None = None
        self._task = BackgroundTask("history", self._run)

    def pubsub_topics(self) -> list[str]:
        if self.history.pubsub_topics:
            return list(self.history.pubsub_topics)
        router = self.context.router
        communities = {route.pubsub_topic for route in router.routes.values()}
        return sorted({*communities, router.default_pubsub_topic})

    def state_dir(self) -> Path:
        if self.history.state_dir:
            return Path(self.history.state_dir)
        return local_state_dir(self.context.config) / "history-state"

    async def _run(self) -> None:
        await require(self.puller, "the history puller").run()

    async def open(self) -> None:
        context = self.context
        self.puller = HistoryPuller(
            self.history, store=self.store.opened, metrics=context.metrics, clock=context.clock,
            session=self.client.opened, pubsub_topics=self.pubsub_topics(),
            state_dir=self.state_dir(), live=self.live.bridge,
        )  # fmt: skip
        await self._task.__aenter__()

    async def close(self) -> None:
        await self._task.__aexit__(None, None, None)
