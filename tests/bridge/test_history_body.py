"""The history pull reads whole store pages, however the node sends them (issue 10, item 1).

A real aiohttp server answers ``GET /store/v3/messages`` from a store with the bridge's own
REST code, and streams each page in small chunks with pauses, so that the client never has a
whole page buffered at once. Pages are several hundred KB (100 messages of ~4 KB)."""

from __future__ import annotations

import asyncio
import time

import aiohttp
import pytest
from aiohttp import web

from tests.bridge.support import deterministic_hash
from waku_legacy.bridge.clock import ManualClock
from waku_legacy.bridge.config import HistoryConfig
from waku_legacy.bridge.history import HistoryPuller
from waku_legacy.bridge.metrics import BridgeMetrics
from waku_legacy.bridge.store_rest_server import parse_v3_query, run_v3_query
from waku_legacy.bridge.store_threads import StoreAccess
from waku_legacy.identity.shards import GLOBAL_PUBSUB_TOPIC
from waku_legacy.store import StoredMessage, open_store

pytestmark = pytest.mark.network
NS = 1_000_000_000
CONTENT = "/waku/1/0x0badcafe/rfc26"


def _rows(n: int, now: float, size: int) -> list[StoredMessage]:
    rows = []
    for i in range(n):
        payload = (b"%06d" % i) * (size // 6)
        ts = int(now * NS) - (i + 1) * NS
        digest = deterministic_hash(GLOBAL_PUBSUB_TOPIC, payload, CONTENT, None, ts)
        rows.append(StoredMessage(digest, GLOBAL_PUBSUB_TOPIC, CONTENT, payload, 1, ts))
    return rows


class ChunkedStoreServer:
    """nwaku's store REST API over a SQLite store, each answer sent in ``chunk``-byte pieces."""

    def __init__(self, path, chunk: int = 16 * 1024) -> None:
        self.store = open_store(f"sqlite:///{path}")
        self.chunk = chunk
        self.requests = 0
        self.page_bytes: list[int] = []

    async def handle(self, request: web.Request) -> web.StreamResponse:
        self.requests += 1
        body = run_v3_query(self.store, parse_v3_query(request.query), "req")
        self.page_bytes.append(len(body))
        response = web.StreamResponse(headers={"Content-Type": "application/json"})
        response.enable_chunked_encoding()
        await response.prepare(request)
        for i in range(0, len(body), self.chunk):
            await response.write(body[i : i + self.chunk])
            await asyncio.sleep(0.001)  # the client sees the body arrive piece by piece
        await response.write_eof()
        return response

    async def start(self) -> str:
        app = web.Application()
        app.router.add_get("/store/v3/messages", self.handle)
        self.runner = web.AppRunner(app, access_log=None)
        await self.runner.setup()
        site = web.TCPSite(self.runner, "127.0.0.1", 0)
        await site.start()
        port = self.runner.addresses[0][1]
        return f"http://127.0.0.1:{port}"

    async def stop(self) -> None:
        await self.runner.cleanup()
        self.store.close()


async def _puller(tmp_path, url: str, clock: ManualClock, **kwargs) -> tuple:
    store = StoreAccess(f"sqlite:///{tmp_path / 'bridge.sqlite3'}", readers=1)
    session = aiohttp.ClientSession()
    config = HistoryConfig(nodes=(url,), retries=2, timeout=20.0)
    puller = HistoryPuller(
        config, store=store, metrics=BridgeMetrics(), clock=clock, session=session,
        pubsub_topics=[GLOBAL_PUBSUB_TOPIC], state_dir=tmp_path / "state", backoff=0.01,
        **kwargs,
    )  # fmt: skip
    return puller, store, session


async def test_history_pull_stores_every_message_of_large_chunked_pages(tmp_path):
    now = time.time()
    rows = _rows(350, now, 4000)
    server = ChunkedStoreServer(tmp_path / "node.sqlite3")
    server.store.insert_messages(rows)
    url = await server.start()
    puller, store, session = await _puller(tmp_path, url, ManualClock(now))
    try:
        report = await puller.pull(url, GLOBAL_PUBSUB_TOPIC)
        assert report.error is None, report.error
        assert min(server.page_bytes[:3]) > 300_000, "pages of several hundred KB"
        assert report.pages == 4 and report.messages == 350 and report.new == 350
        assert await store.read(lambda s: s.count()) == 350
        for row in rows[::50]:
            got = await store.read(lambda s, h=row.message_hash: s.get_message(h))
            assert got is not None and got.payload == row.payload
    finally:
        await session.close()
        await store.close()
        await server.stop()


async def test_a_page_over_the_limit_is_a_clear_error_and_not_retried(tmp_path):
    now = time.time()
    server = ChunkedStoreServer(tmp_path / "node.sqlite3")
    server.store.insert_messages(_rows(100, now, 4000))
    url = await server.start()
    puller, store, session = await _puller(
        tmp_path, url, ManualClock(now), max_response_bytes=200_000
    )
    try:
        report = await puller.pull(url, GLOBAL_PUBSUB_TOPIC)
        assert report.error is not None and "over the 200000-byte limit" in report.error
        assert server.requests == 1  # the same page would be too large again
        assert await store.read(lambda s: s.count()) == 0
    finally:
        await session.close()
        await store.close()
        await server.stop()
