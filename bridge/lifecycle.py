"""One lifecycle for the bridge's parts: each a component, entered in order on one stack.

    lifecycle = Lifecycle()
    await lifecycle.enter(store)        # started; its aclose() is on the stack first
    await lifecycle.enter(http)         # ...
    await lifecycle.aclose()            # every entered component closed, newest first

A component's ``aclose()`` goes on the :class:`contextlib.AsyncExitStack` *before* its
``start()`` runs, so a part that fails half-way is closed too (``aclose()`` must be safe on a
part that never started or started only in part), and shutdown is the reverse of start by
construction: nothing to keep in step by hand. A close that raises is logged with its
traceback and the others still close (a part that cannot stop cleanly must not keep the rest
open).

:class:`ServiceState` is the service's own state; its values are the texts ``/health``
shows (nwaku's states, :data:`~waku_legacy.bridge.http_api.NWAKU_HEALTH`).
"""

from __future__ import annotations

import contextlib
import enum
import logging
from typing import Protocol

from waku_legacy.bridge.logs import fields

__all__ = ["Component", "Lifecycle", "ServiceState"]

log = logging.getLogger("waku_legacy.bridge")


class ServiceState(enum.StrEnum):
    """Where the service is in its life; the value is the ``/health`` text."""

    INITIALIZING = "Initializing"  # start() runs: components are being entered
    READY = "Ready"  # every component started
    SHUTTING_DOWN = "Shutting Down"  # stop() runs (or a start failed): closing, newest first
    STOPPED = "Stopped"  # every entered component closed


class Component(Protocol):
    """A part of the bridge with a lifetime of its own."""

    @property
    def name(self) -> str:
        """Short and stable: logs and the lifecycle's events use it."""
        ...

    async def start(self) -> None:
        """Acquire and start (listen, spawn the task, open the store); raise to refuse."""
        ...

    async def aclose(self) -> None:
        """Release everything; idempotent, and safe after a start() that failed half-way."""
        ...

    def health(self) -> str | None:
        """``"Ready"``, ``"Not Ready: <why>"``, or None while it does not serve (before its
        start, after its close): then the service's state is shown for it."""
        ...


class Lifecycle:
    """The service's state and the stack its components are entered on."""

    def __init__(self) -> None:
        self.state = ServiceState.INITIALIZING
        self._stack = contextlib.AsyncExitStack()

    async def enter(self, component: Component) -> None:
        """Start ``component`` after those entered before; it closes before them."""
        self._stack.push_async_callback(self._close, component)
        await component.start()

    async def aclose(self) -> None:
        """Close every entered component, newest first; the state turns Stopped."""
        self.state = ServiceState.SHUTTING_DOWN
        try:
            await self._stack.aclose()
        finally:
            self.state = ServiceState.STOPPED

    @staticmethod
    async def _close(component: Component) -> None:
        try:
            await component.aclose()
        except Exception as exc:
            log.error(
                "component did not close cleanly", exc_info=True,
                extra=fields(component=component.name, error=str(exc)),
            )  # fmt: skip
