"""The leader lock as a component (:class:`LeaderComponent`): instances sharing a PostgreSQL
store take turns at the singletons."""

from __future__ import annotations

import asyncio

from waku_legacy.bridge.components.singletons import Singletons
from waku_legacy.bridge.leader import LeaderLock
from waku_legacy.bridge.lifecycle import READY, Component, cancel_task

__all__ = ["LeaderComponent"]


class LeaderComponent(Component):
    """The leader lock (:mod:`waku_legacy.bridge.leader`): instances sharing a PostgreSQL
    store take turns at the singletons. Closing ends the lock's session (and releases the
    singletons when this instance held it). It needs what the singletons need: it opens
    them."""

    name = "leader"

    def __init__(self, url: str, interval: float, singletons: Singletons) -> None:
        self.url = url
        self.interval = interval
        self.singletons = singletons
        self.needs = singletons.needs
        # made here: the archivers fence their writes with it (bridge.leader)
        self.lock = LeaderLock(
            self.url, interval=self.interval, on_acquired=self.singletons.open,
            on_lost=self.singletons.release,
        )  # fmt: skip
        self._started = False
        self._task: asyncio.Task[None] | None = None

    async def open(self) -> None:
        self._started = True
        self._task = asyncio.create_task(self.lock.run(), name="leader-lock")

    async def close(self) -> None:
        task, self._task = self._task, None
        await cancel_task(task)

    def health(self) -> str | None:
        if not self._started:
            return None
        return READY if self.singletons.is_leader else "Standby"
