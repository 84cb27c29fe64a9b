"""The HTTP client session the relay publisher and the history pulls share."""

from __future__ import annotations

import aiohttp

from waku_legacy.bridge.components.context import require
from waku_legacy.bridge.lifecycle import Component

__all__ = ["HttpClient"]


class HttpClient(Component):
    """The HTTP client session the relay publisher and the history pulls share."""

    name = "http-client"

    def __init__(self) -> None:
        self.session: aiohttp.ClientSession | None = None

    @property
    def opened(self) -> aiohttp.ClientSession:
        return require(self.session, "the HTTP client session")

    async def open(self) -> None:
        self.session = aiohttp.ClientSession()

    async def close(self) -> None:
        if self.session is not None:
            await self.session.close()
