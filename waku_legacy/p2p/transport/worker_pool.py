"""Worker threads for an asyncio loop's blocking calls, with results handed back in batches.

``loop.run_in_executor`` costs, per call, a ``concurrent.futures.Future``, an asyncio future
chained to it and one ``call_soon_threadsafe`` (a write to the loop's wake-up socket) per
result; under load the native libp2p server spent 6-8% of its GIL time there (py-spy
``--gil``). Here a job is one tuple on a ``SimpleQueue``; a worker appends its result to a
deque and wakes the loop only when no wake-up is already pending, so results finishing
together are delivered in one loop callback."""

from __future__ import annotations

import asyncio
import threading
from collections import deque
from collections.abc import Callable
from queue import SimpleQueue
from typing import Any

__all__ = ["Delivery", "LoopWorkers"]

#: called on the loop's thread with ``(result, None)``, or ``(None, error)`` when the
#: function raised
Delivery = Callable[[Any, BaseException | None], None]


class LoopWorkers:
    def __init__(self, loop: asyncio.AbstractEventLoop, count: int, name: str) -> None:
        self._loop = loop
        self._jobs: SimpleQueue[tuple[Callable[[Any], Any], Any, Delivery] | None] = SimpleQueue()
        self._results: deque[tuple[Delivery, Any, BaseException | None]] = deque()
        self._wake_pending = False
        self._threads = [
            threading.Thread(target=self._work, name=f"{name}-{n}", daemon=True)
            for n in range(count)
        ]
        for thread in self._threads:
            thread.start()

    def submit(self, fn: Callable[[Any], Any], arg: Any, deliver: Delivery) -> None:
        """Run ``fn(arg)`` on a worker; ``deliver(result, error)`` later on the loop."""
        self._jobs.put((fn, arg, deliver))

    def shutdown(self) -> None:
        """Workers end after the job they are on; queued jobs are dropped undelivered."""
        while not self._jobs.empty():
            try:
                self._jobs.get_nowait()
            except Exception:  # raced with a worker: nothing left
                break
        for _ in self._threads:
            self._jobs.put(None)

    def _work(self) -> None:
        jobs, results = self._jobs, self._results
        while True:
            job = jobs.get()
            if job is None:
                return
            fn, arg, deliver = job
            try:
                results.append((deliver, fn(arg), None))
            except BaseException as exc:  # delivered to the loop, which logs it
                results.append((deliver, None, exc))
            # appended first, flag read second: a pending wake-up delivers this result too
            if not self._wake_pending:
                self._wake_pending = True
                try:
                    self._loop.call_soon_threadsafe(self._deliver)
                except RuntimeError:  # the loop is closed: nobody to deliver to
                    return

    def _deliver(self) -> None:
        self._wake_pending = False  # reset before draining (see _work)
        results = self._results
        while results:
            deliver, result, error = results.popleft()
            deliver(result, error)
