"""The bridge's HTTP side under hostile clients, over real sockets (issue 10, item 5):
slowloris connections are closed within the header timeout and idle ones within the idle
timeout, connections over the caps are refused while an honest client keeps its answers,
the per-address request budget stops floods but never an honest client paging with
cursors at full speed, and a forged legacy cursor costs a bounded number of rows."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import logging
import time

import aiohttp
import pytest

from tests.bridge.support import PUBSUB, bridge_config, make_rows
from waku_legacy.bridge.logs import _FIELDS
from waku_legacy.bridge.service import BridgeService
from waku_legacy.store import open_store

pytestmark = pytest.mark.network


@pytest.fixture(scope="module")
def store_url(tmp_path_factory):
    path = tmp_path_factory.mktemp("limits") / "store.sqlite3"
    with open_store(f"sqlite:///{path}") as store:
        store.insert_messages(make_rows(1500))
    return f"sqlite:///{path}"


@contextlib.asynccontextmanager
async def serving(tmp_path, store_url, **server):
    settings = {"listen": "127.0.0.1:0", "reader_threads": 2, "shutdown_timeout": 2, **server}
    service = BridgeService(bridge_config(tmp_path, store_url, server=settings))
    await service.start()
    try:
        yield service
    finally:
        await service.stop()


async def _open(port: int, source: str = "127.0.0.1"):
    return await asyncio.open_connection("127.0.0.1", port, local_addr=(source, 0))


async def _closed_within(reader: asyncio.StreamReader, seconds: float) -> bytes | None:
    """What the server sent before closing, or None if it is still open after ``seconds``."""
    data = b""
    try:
        async with asyncio.timeout(seconds):
            while chunk := await reader.read(4096):
                data += chunk
    except TimeoutError:
        return None
    except ConnectionResetError:
        pass  # closed (with unread data on the server's side)
    return data


async def test_slowloris_and_idle_connections_are_closed_within_the_timeouts(tmp_path, store_url):
    limits = {"header_timeout": "1s", "idle_timeout": "3s", "max_connections_per_address": 1000}
    async with serving(tmp_path, store_url, **limits) as service:
        port = service.rest_port
        slow = [await _open(port) for _ in range(150)]
        idle = [await _open(port) for _ in range(50)]
        started = time.monotonic()

        async def trickle(writer: asyncio.StreamWriter) -> None:
            # A request head that never ends: one header byte every 0.2 s.
            with contextlib.suppress(ConnectionError):
                writer.write(b"GET /health HTTP/1.1\r\nHost: x\r\n")
                while True:
                    await asyncio.sleep(0.2)
                    writer.write(b"X")
                    await writer.drain()

        trickles = [asyncio.create_task(trickle(w)) for _, w in slow]
        closed_slow = await asyncio.gather(*(_closed_within(r, 3.0) for r, _ in slow))
        slow_elapsed = time.monotonic() - started
        closed_idle = await asyncio.gather(*(_closed_within(r, 4.0) for r, _ in idle))
        idle_elapsed = time.monotonic() - started
        for task in trickles:
            task.cancel()
        assert all(c is not None for c in closed_slow), "every slowloris connection closed"
        assert slow_elapsed < 2.9
        assert all(c is not None for c in closed_idle), "every idle connection closed"
        assert 2.5 < idle_elapsed < 4.5
        assert service.metrics.http_refused.value("header_timeout") == 150
        # The service still answers.
        async with aiohttp.ClientSession() as http:
            async with http.get(f"http://127.0.0.1:{port}/health") as response:
                assert response.status == 200
        for _, writer in slow + idle:
            writer.close()


async def test_connections_over_the_caps_are_refused_and_an_honest_client_is_answered(
    tmp_path, store_url
):
    limits = {"max_connections": 45, "max_connections_per_address": 20, "idle_timeout": "60s"}
    async with serving(tmp_path, store_url, **limits) as service:
        port = service.rest_port
        url = f"http://127.0.0.1:{port}/store/v3/messages?pageSize=5"
        connector = aiohttp.TCPConnector(local_addr=("127.0.0.2", 0), limit=1)
        async with aiohttp.ClientSession(connector=connector) as honest:
            async with honest.get(url) as response:  # its keep-alive connection is open
                assert response.status == 200

            async def flood(source: str, count: int) -> tuple[int, int]:
                conns = [await _open(port, source) for _ in range(count)]
                answers = await asyncio.gather(*(_closed_within(r, 0.5) for r, _ in conns))
                flooders.extend(w for (_, w), a in zip(conns, answers, strict=True) if a is None)
                refused = [a for a in answers if a is not None]
                assert all(a.startswith(b"HTTP/1.1 503 ") for a in refused)
                return count - len(refused), len(refused)

            flooders: list[asyncio.StreamWriter] = []
            assert await flood("127.0.0.1", 30) == (20, 10)  # the per-address cap
            assert await flood("127.0.0.3", 30) == (20, 10)
            assert await flood("127.0.0.4", 10) == (4, 6)  # 45 in all, the honest one counted
            for _ in range(5):
                async with honest.get(url) as response:
                    assert response.status == 200
            metrics = service.metrics
            assert metrics.http_refused.value("address_connections") == 20
            assert metrics.http_refused.value("connections") == 6
            assert metrics.http_connections.value() == 45
            for writer in flooders:
                writer.close()
            await asyncio.sleep(0.2)
            # Once the flood is gone, new connections are admitted again.
            reader, writer = await _open(port, "127.0.0.1")
            writer.write(b"GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            assert (await _closed_within(reader, 2.0) or b"").startswith(b"HTTP/1.1 200 ")
            writer.close()


async def test_a_slow_request_body_gets_408_and_the_connection_is_closed(tmp_path, store_url):
    async with serving(tmp_path, store_url, body_timeout="1s") as service:
        reader, writer = await _open(service.rest_port)
        writer.write(
            b"POST /admin/v1/archive HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\nabc"
        )
        started = time.monotonic()
        answer = await _closed_within(reader, 3.0)
        assert answer is not None and answer.startswith(b"HTTP/1.1 408 ")
        assert time.monotonic() - started < 2.5
        assert service.metrics.http_refused.value("body_timeout") == 1
        writer.close()


async def _page_through(http, path: str, params: dict[str, str], legacy: bool = False) -> int:
    seen, cursor = 0, None
    while True:
        query = dict(params)
        if cursor is not None:
            query.update(cursor)
        async with http.get(path, params=query) as response:
            assert response.status == 200, await response.text()
            doc = await response.json()
        seen += len(doc["messages"])
        if legacy:
            c = doc.get("cursor")
            cursor = None if c is None else {
                "pubsubTopic": c["pubsubTopic"], "senderTime": str(c["senderTime"]),
                "storeTime": str(c["storeTime"]), "digest": c["digest"]["data"],
            }  # fmt: skip
        else:
            c = doc.get("paginationCursor")
            cursor = None if c is None else {"cursor": c}
        if cursor is None:
            return seen


async def test_the_request_budget_stops_floods_not_paging(tmp_path, store_url, caplog):
    budget = {"requests_per_second": 5, "request_burst": 10}
    async with serving(tmp_path, store_url, **budget) as service:
        base = f"http://127.0.0.1:{service.rest_port}"
        async with aiohttp.ClientSession(base) as http:
            # Full speed, no pause: 1200 messages of one shard at 10 per page, both APIs.
            params = {"pubsubTopic": PUBSUB, "pageSize": "10"}
            for _ in range(2):
                assert await _page_through(http, "/store/v3/messages", params) == 1200
            assert await _page_through(http, "/store/v1/messages", params, legacy=True) == 1200
            assert service.metrics.http_refused.value("rate_limit") <= 3
            # A flood of fresh queries from one address: refused with 429 and Retry-After.
            statuses = []
            with caplog.at_level(logging.WARNING, logger="waku_legacy.bridge.http"):
                for i in range(60):
                    async with http.get(
                        "/store/v3/messages", params={"startTime": str(i + 1)}
                    ) as r:
                        statuses.append(r.status)
                        if r.status == 429:
                            assert int(r.headers["Retry-After"]) >= 1
                            assert "request budget" in await r.text()
            assert statuses.count(429) >= 45
            assert service.metrics.http_refused.value("rate_limit") >= 45
            assert any(
                r.getMessage() == "http refused"
                and getattr(r, _FIELDS, {}).get("reason") == "rate_limit"
                for r in caplog.records
            )
            # A forged cursor is no continuation: it is charged (and refused while the
            # budget is empty), and the same continuation is free only once.
            async with http.get("/store/v3/messages", params={"cursor": "0x" + "ab" * 32}) as r:
                assert r.status == 429
            # Another address still has its own budget.
            connector = aiohttp.TCPConnector(local_addr=("127.0.0.2", 0))
            async with aiohttp.ClientSession(base, connector=connector) as other:
                async with other.get("/store/v3/messages") as r:
                    assert r.status == 200


async def test_a_forged_legacy_cursor_reads_a_bounded_number_of_rows(tmp_path):
    from waku_legacy.bridge.store_rest_server import (
        LEGACY_CURSOR_SCAN,
        LegacyCursorCache,
        parse_legacy_query,
        run_legacy_query,
    )
    from waku_legacy.store import StoredMessage

    ts = 1_700_000_000_000_000_000
    rows = [
        StoredMessage(i.to_bytes(2, "big") + bytes(30), PUBSUB, "/a/1/b/proto", b"p%d" % i, 0, ts)
        for i in range(3000)
    ]  # 3,000 messages at ONE timestamp: the worst case for a legacy cursor

    class Counting:
        def __init__(self, store):
            self.store, self.rows = store, 0

        def query(self, query):
            page = self.store.query(query)
            self.rows += len(page.messages)
            return page

        def get_message(self, h):
            self.rows += 1
            return self.store.get_message(h)

    with open_store(f"sqlite:///{tmp_path}/s.sqlite3") as raw:
        raw.insert_messages(rows)
        store = Counting(raw)
        forged = {"pubsubTopic": PUBSUB, "senderTime": str(ts), "storeTime": str(ts),
                  "digest": base64.b64encode(b"\x01" * 32).decode()}  # fmt: skip
        started = time.perf_counter()
        with pytest.raises(Exception, match="cursor not found"):
            run_legacy_query(store, parse_legacy_query(forged), LegacyCursorCache())
        assert store.rows <= LEGACY_CURSOR_SCAN <= 1000
        assert time.perf_counter() - started < 0.5
        # Honest paging through all 3,000 (cursors this server handed out) still works,
        # and reads about one page per request.
        known, params, seen, requests = LegacyCursorCache(), {"pubsubTopic": PUBSUB}, 0, 0
        store.rows = 0
        while True:
            doc = json.loads(run_legacy_query(store, parse_legacy_query(params), known))
            seen += len(doc["messages"])
            requests += 1
            if "cursor" not in doc:
                break
            c = doc["cursor"]
            params = {"pubsubTopic": PUBSUB, "senderTime": str(c["senderTime"]),
                      "storeTime": str(c["storeTime"]), "digest": c["digest"]["data"]}  # fmt: skip
        assert seen == 3000
        assert store.rows <= requests * 22
