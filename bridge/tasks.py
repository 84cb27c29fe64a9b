"""Stopping the bridge's queue workers (the live batch writer, the relay publisher): each
is told to finish its queue, and is cancelled when it has not within the shutdown grace."""

from __future__ import annotations

import asyncio
import contextlib

__all__ = ["finish_or_cancel"]


async def finish_or_cancel(task: asyncio.Task[None], timeout: float | None) -> bool:
    """Wait up to ``timeout`` seconds (None: no limit) for ``task`` to end by itself; cancel
    it when it does not. Returns whether it ended in time."""
    try:
        await asyncio.wait_for(asyncio.shield(task), timeout)
    except TimeoutError:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        return False
    return True
