"""What one instance of a store does (seeding, archiving, history pulls), as a component
(:class:`Singletons`) with a lifecycle of its own."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from waku_legacy.bridge.lifecycle import READY, Component, Lifecycle
from waku_legacy.bridge.metrics import BridgeMetrics

__all__ = ["Singletons"]

T = TypeVar("T")


class Singletons(Component):
    """What one instance of a store does: seeding, archiving, history pulls, in that order
    on a lifecycle of their own, inside the service's (``within``: what they need is entered
    there). SQLite: entered with the service; PostgreSQL: opened when this instance takes
    the leader lock, released when it loses it. ``parts`` builds them afresh each time (a
    component opens once)."""

    name = "singletons"

    def __init__(
        self, metrics: BridgeMetrics, parts: Callable[[], list[Component]], within: Lifecycle
    ) -> None:
        self.metrics = metrics
        self._parts = parts
        self._within = within
        self.is_leader = False
        self._lifecycle = Lifecycle(within)
        # what the parts need from the service: a set of them built for their declarations
        built = parts()
        own = {part.name for part in built}
        self.needs = tuple(dict.fromkeys(n for p in built for n in p.needs if n not in own))

    def part(self, kind: type[T]) -> T | None:
        """The running part of that type (None: not configured, or not running)."""
        return self._lifecycle.find(kind)

    async def open(self) -> None:
        self.is_leader = True
        self.metrics.leader.set(1)
        self._lifecycle = Lifecycle(self._within)
        try:
            await self._lifecycle.start(self._parts())
        except BaseException:
            await self._lifecycle.aclose()
            raise

    async def close(self) -> None:
        """The service stops: close the parts (they stay readable, as their reports)."""
        await self._lifecycle.aclose()

    async def release(self) -> None:
        """The leader lock's session is gone: another instance may take the role now."""
        self.is_leader = False
        self.metrics.leader.set(0)
        await self._lifecycle.aclose()
        self._lifecycle = Lifecycle(self._within)  # nothing running to read

    def health(self) -> str | None:
        return READY if self.is_leader else None
