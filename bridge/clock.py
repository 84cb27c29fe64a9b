"""Wall-clock time for the schedulers, injectable so that tests can jump a week ahead.

:class:`SystemClock` sleeps in bounded steps and re-reads the wall clock, so a suspended
machine or an NTP step does not delay a due run by more than a step. :class:`ManualClock`
only moves when :meth:`ManualClock.advance` (or :meth:`ManualClock.set`) is called, waking
the sleepers whose time has come, in deadline order.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import time
from typing import Protocol

__all__ = ["Clock", "ManualClock", "SystemClock"]


class Clock(Protocol):
    def time(self) -> float:
        """Unix time in seconds."""
        ...

    async def sleep_until(self, when: float) -> None:
        """Return once :meth:`time` is at least ``when``."""
        ...


class SystemClock:
    def __init__(self, max_step: float = 60.0) -> None:
        self.max_step = max_step

    def time(self) -> float:
        return time.time()

    async def sleep_until(self, when: float) -> None:
        while True:
            left = when - time.time()
            if left <= 0:
                return
            await asyncio.sleep(min(left, self.max_step))


class ManualClock:
    def __init__(self, start: float) -> None:
        self._now = float(start)
        self._sleepers: list[tuple[float, int, asyncio.Future[None]]] = []
        self._order = itertools.count()

    def time(self) -> float:
        return self._now

    async def sleep_until(self, when: float) -> None:
        if when <= self._now:
            await asyncio.sleep(0)
            return
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        heapq.heappush(self._sleepers, (when, next(self._order), future))
        await future

    def set(self, now: float) -> None:
        if now < self._now:
            raise ValueError("a ManualClock does not go backwards")
        self._now = float(now)
        while self._sleepers and self._sleepers[0][0] <= self._now:
            _, _, future = heapq.heappop(self._sleepers)
            if not future.done():
                future.set_result(None)

    def advance(self, seconds: float) -> None:
        self.set(self._now + seconds)

    @property
    def sleepers(self) -> int:
        return sum(1 for *_, f in self._sleepers if not f.done())
