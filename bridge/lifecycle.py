"""One lifecycle for the bridge's parts: each a component (an async context manager),
entered in order on one stack, each after the components it needs.

    lifecycle = Lifecycle()
    await lifecycle.start([store, live, http])  # entered in order; the state turns Ready
    await lifecycle.aclose()                    # every entered component closed, newest first

A component says what it needs (``needs = ("store", "live")``, by name) and
:meth:`Lifecycle.enter` refuses it (:class:`ComponentOrderError`) before those are entered:
the start order is structural, not a list kept in step with prose. Its ``__aexit__`` goes on
the :class:`contextlib.AsyncExitStack` *before* its ``__aenter__`` runs, so a part that fails
half-way is closed too (its :meth:`Component.close` must be safe on a part that never opened
or opened only in part), and shutdown is the reverse of start by construction.

Closing is idempotent in one place (:meth:`Component.__aexit__` closes once); a close that
raises is logged here, with its traceback ("component did not close cleanly"), and the others
still close (a part that cannot stop cleanly must not keep the rest open). Components never
swallow their own close errors: :func:`cancel_task` lets all but the cancellation through.

:class:`ServiceState` is the service's state, kept by the lifecycle alone; its values are the
texts ``/health`` shows (nwaku's states, :data:`~waku_legacy.bridge.http_api.NWAKU_HEALTH`).
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import logging
from collections.abc import Callable, Coroutine, Sequence
from types import TracebackType
from typing import Self, TypeVar

from waku_legacy.bridge.logs import fields

__all__ = [
    "READY",
    "BackgroundTask",
    "Component",
    "ComponentOrderError",
    "Lifecycle",
    "ServiceState",
    "cancel_task",
]

log = logging.getLogger("waku_legacy.bridge")

T = TypeVar("T")
READY = "Ready"  # a component's health when it serves


class ServiceState(enum.StrEnum):
    """Where the service is in its life; the value is the ``/health`` text."""

    INITIALIZING = "Initializing"  # start() runs: components are being entered
    READY = "Ready"  # every component started
    SHUTTING_DOWN = "Shutting Down"  # stop() runs (or a start failed): closing, newest first
    STOPPED = "Stopped"  # every entered component closed


class ComponentOrderError(RuntimeError):
    """A component was entered before a component it needs (or twice under one name)."""


async def cancel_task(task: asyncio.Task[None] | None) -> None:
    """Cancel ``task`` and wait for it; what it raised other than its cancellation (a loop
    that had died) comes through, for the close-error log."""
    if task is None:
        return
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task


class Component:
    """A part of the bridge with a lifetime of its own, as an async context manager:
    ``__aenter__`` runs :meth:`open`, ``__aexit__`` runs :meth:`close` once (a second exit
    does nothing). Subclasses set :attr:`name` and, when they take other components' running
    objects, :attr:`needs`."""

    name: str = "component"  # short and stable: logs and the lifecycle's checks use it
    # the names of the components that must be entered before this one (and close after it)
    needs: tuple[str, ...] = ()
    _closed = False  # set on the instance by the first __aexit__

    async def open(self) -> None:
        """Acquire and start (listen, spawn the task, open the store); raise to refuse."""

    async def close(self) -> None:
        """Release everything; safe after an open() that failed half-way. Runs once."""

    def health(self) -> str | None:
        """``"Ready"``, ``"Not Ready: <why>"``, or None while it does not serve (before its
        open, after its close): then the service's state is shown for it."""
        return None

    @property
    def closed(self) -> bool:
        return self._closed

    async def __aenter__(self) -> Self:
        await self.open()
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:  # fmt: skip
        if self._closed:
            return
        self._closed = True
        await self.close()


class BackgroundTask(Component):
    """A loop on the event loop: a task from ``open()``, cancelled by ``close()``; what the
    loop raised before (it died) is raised by the close."""

    def __init__(
        self, name: str, run: Callable[[], Coroutine[object, None, None]],
        needs: tuple[str, ...] = (),
    ) -> None:  # fmt: skip
        self.name = name
        self.needs = needs
        self._run = run
        self._task: asyncio.Task[None] | None = None

    async def open(self) -> None:
        self._task = asyncio.create_task(self._run(), name=self.name)

    async def close(self) -> None:
        task, self._task = self._task, None
        await cancel_task(task)


class Lifecycle:
    """The service's state and the one stack its components are entered on. ``within``: the
    lifecycle this one's components run inside (the singletons'), whose entered components
    count for their needs."""

    def __init__(self, within: Lifecycle | None = None) -> None:
        self.state = ServiceState.INITIALIZING
        self.failed: str | None = None  # the component whose entry failed, if one did
        self._within = within
        self._entered: dict[str, Component] = {}  # by name, in order; kept after the close
        self._stack = contextlib.AsyncExitStack()

    def entered(self, name: str) -> bool:
        """Whether a component of that name was entered here or in the enclosing lifecycle."""
        return name in self._entered or (self._within is not None and self._within.entered(name))

    def find(self, kind: type[T]) -> T | None:
        """The entered component of that type (None: not configured, or not entered)."""
        for component in self._entered.values():
            if isinstance(component, kind):
                return component
        return None

    async def enter(self, component: Component) -> None:
        """Open ``component`` after those entered before; it closes before them. Refused
        (:class:`ComponentOrderError`) before what it needs, or under a name already used."""
        missing = [name for name in component.needs if not self.entered(name)]
        if missing:
            raise ComponentOrderError(
                f"{component.name} needs {', '.join(missing)} entered before it"
            )
        if component.name in self._entered:
            raise ComponentOrderError(f"a component named {component.name} is already entered")
        self._stack.push_async_exit(self._closer(component))
        await component.__aenter__()
        self._entered[component.name] = component

    async def start(self, components: Sequence[Component]) -> None:
        """Enter ``components`` in order, then the state turns Ready. When one fails,
        :attr:`failed` names it and its error is raised (the caller closes)."""
        if self.state is not ServiceState.INITIALIZING or self._entered:
            raise RuntimeError(f"a bridge service starts once (this one is {self.state})")
        for component in components:
            try:
                await self.enter(component)
            except BaseException:
                self.failed = component.name
                raise
        self.state = ServiceState.READY

    async def aclose(self) -> None:
        """Close every entered component, newest first; the state turns Stopped."""
        self.state = ServiceState.SHUTTING_DOWN
        try:
            await self._stack.aclose()
        finally:
            self.state = ServiceState.STOPPED

    @staticmethod
    def _closer(
        component: Component,
    ) -> Callable[
        [type[BaseException] | None, BaseException | None, TracebackType | None],
        Coroutine[object, None, bool],
    ]:
        async def close(
            kind: type[BaseException] | None, error: BaseException | None,
            traceback: TracebackType | None,
        ) -> bool:  # fmt: skip
            try:
                await component.__aexit__(kind, error, traceback)
            except Exception as exc:  # the one close-error log: the others still close
                log.error(
                    "component did not close cleanly", exc_info=True,
                    extra=fields(component=component.name, error=str(exc)),
                )  # fmt: skip
            return False  # never swallows what the stack is unwinding

        return close
