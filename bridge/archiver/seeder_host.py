"""The libtorrent seeder on its own thread (:class:`SeederHost`)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from waku_legacy.archive import SessionConfig

__all__ = ["SeederHost"]


T = TypeVar("T")


class SeederHost:
    """The libtorrent seeder on its own thread (its calls block; they must not overlap)."""

    def __init__(self, archive_dir: str, config: SessionConfig) -> None:
        self._pool = ThreadPoolExecutor(1, thread_name_prefix="seeder")
        self.archive_dir = archive_dir
        self.config = config
        self.seeder: Any = None

    async def call(self, fn: Callable[..., T], *args: Any) -> T:
        return await asyncio.get_running_loop().run_in_executor(self._pool, fn, *args)

    async def start(self) -> None:
        from waku_legacy.archive import Seeder

        self.seeder = await self.call(Seeder, self.archive_dir, self.config)

    @property
    def port(self) -> int:
        return int(self.seeder.listen_port) if self.seeder is not None else 0

    async def seed(self, torrent_path: str) -> Any:
        return await self.call(self.seeder.seed, torrent_path)

    def stats(self) -> list[Any]:
        # status() reads are cheap and thread-safe in libtorrent; scrapes call this directly
        return [] if self.seeder is None else self.seeder.stats()

    async def close(self) -> None:
        if self.seeder is not None:
            await self.call(self.seeder.close)
            self.seeder = None
        self._pool.shutdown(wait=True)
