"""The store-rest source against a local aiohttp server speaking nwaku's REST store API:
hex and base64 cursors, retries with back-off, resuming from saved pages."""

from __future__ import annotations

import asyncio
import base64
import json
import threading
from pathlib import Path

import pytest
from aiohttp import web

from waku_legacy.identity.message_hash import message_hash
from waku_legacy.proto import waku_message_pb2
from waku_legacy.store import StoredMessage
from waku_legacy.store.rest_client import StorePager, StoreRestError, fetch_pages
from waku_legacy.store.rest_json import parse_hash, response_json

pytestmark = pytest.mark.network


class NwakuRestServer:
    """``GET /store/v3/messages`` as nwaku answers it (ordering by (timestamp, hash), an
    exclusive hash cursor, default page 20, max 100), over a fixed list of messages."""

    def __init__(self, messages: list[StoredMessage], *, cursor_encoding: str = "hex") -> None:
        self.messages = sorted(messages, key=lambda m: (m.timestamp, m.message_hash))
        self.cursor_encoding = cursor_encoding
        self.fail_next = 0  # answer this many requests with fail_status
        self.fail_status = 500
        self.broken = False  # answer everything with 503 (a node gone bad)
        self.requests: list[str] = []
        self.cursors_seen: list[bytes] = []
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self.url = ""

    async def _handle(self, request: web.Request) -> web.Response:
        self.requests.append(request.query_string)
        if self.broken:
            return web.Response(status=503, text="store unavailable")
        if self.fail_next:
            self.fail_next -= 1
            headers = {"Retry-After": "0"} if self.fail_status == 429 else {}
            return web.Response(status=self.fail_status, text="try later", headers=headers)
        q = request.query
        rows = self.messages
        if "pubsubTopic" in q:
            rows = [m for m in rows if m.pubsub_topic == q["pubsubTopic"]]
        if "contentTopics" in q:
            topics = set(q["contentTopics"].split(","))
            rows = [m for m in rows if m.content_topic in topics]
        if "startTime" in q:
            rows = [m for m in rows if m.timestamp >= int(q["startTime"])]
        if "endTime" in q:
            rows = [m for m in rows if m.timestamp <= int(q["endTime"])]
        if "cursor" in q:
            cursor = parse_hash(q["cursor"])
            self.cursors_seen.append(cursor)
            at = [i for i, m in enumerate(rows) if m.message_hash == cursor]
            if not at:
                return web.json_response(
                    {
                        "requestId": "",
                        "statusCode": 400,
                        "statusDesc": "cursor not found",
                        "messages": [],
                    },
                    status=400,
                )
            rows = rows[at[0] + 1 :]
        size = min(int(q.get("pageSize", 20)) or 20, 100)
        page, more = rows[:size], len(rows) > size
        body = response_json(
            "", page, include_data=True, cursor=page[-1].message_hash if more else None
        )
        if more and self.cursor_encoding == "base64":
            body["paginationCursor"] = base64.b64encode(page[-1].message_hash).decode()
        return web.json_response(body)

    def __enter__(self) -> NwakuRestServer:
        self._thread.start()

        async def start() -> str:
            app = web.Application()
            app.router.add_get("/store/v3/messages", self._handle)
            self._runner = web.AppRunner(app)
            await self._runner.setup()
            site = web.TCPSite(self._runner, "127.0.0.1", 0)
            await site.start()
            port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
            return f"http://127.0.0.1:{port}"

        self.url = asyncio.run_coroutine_threadsafe(start(), self._loop).result(10)
        return self

    def __exit__(self, *exc: object) -> None:
        asyncio.run_coroutine_threadsafe(self._runner.cleanup(), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(5)


def v2_messages(
    n: int, pubsub: str = "/waku/2/rs/16/32", start: int = 10**18
) -> list[StoredMessage]:
    out = []
    for i in range(n):
        wm = waku_message_pb2.WakuMessage(
            payload=b"m%d" % i,
            content_topic="/app/1/chat/proto",
            version=0,
            timestamp=start + (i // 3) * 10**9,
        )
        out.append(
            StoredMessage(
                message_hash(pubsub, wm),
                pubsub,
                wm.content_topic,
                bytes(wm.payload),
                0,
                wm.timestamp,
                None,
            )
        )
    return out


def _hashes(pages) -> list[bytes]:
    return [parse_hash(m["messageHash"]) for p in pages for m in p.messages]


@pytest.mark.parametrize("encoding", ["hex", "base64"])
def test_pages_through_everything_once(encoding: str) -> None:
    messages = v2_messages(95)
    with NwakuRestServer(messages, cursor_encoding=encoding) as server:
        pages = list(fetch_pages(server.url, StorePager(page_size=10)))
    assert _hashes(pages) == [
        m.message_hash for m in sorted(messages, key=lambda m: (m.timestamp, m.message_hash))
    ]
    assert len(pages) == 10 and pages[-1].cursor is None
    if encoding == "base64":
        # base64 cursors hold '+' and '/', which must survive the URL.
        sent = [c for c in server.requests if "cursor=" in c]
        assert any("%2B" in c or "%2F" in c for c in sent)
        assert server.cursors_seen == [
            pages[i].messages[-1] and parse_hash(pages[i].cursor) for i in range(9)
        ]


def test_retries_with_backoff_on_5xx_and_429() -> None:
    delays: list[float] = []
    with NwakuRestServer(v2_messages(30)) as server:
        server.fail_next = 2
        pages = list(fetch_pages(server.url, StorePager(page_size=50), sleep=delays.append))
        assert len(_hashes(pages)) == 30 and len(delays) == 2 and delays[1] > delays[0] * 1.0
        server.fail_next, server.fail_status = 1, 429
        assert (
            len(_hashes(fetch_pages(server.url, StorePager(page_size=50), sleep=delays.append)))
            == 30
        )
        server.fail_next, server.fail_status = 1, 400
        with pytest.raises(StoreRestError, match="HTTP 400"):
            list(fetch_pages(server.url, StorePager(), sleep=delays.append))


def test_resumes_from_saved_pages_after_the_node_fails(tmp_path: Path) -> None:
    messages = v2_messages(70)
    save = tmp_path / "pages"
    got: list[bytes] = []
    with NwakuRestServer(messages) as server:
        pager = StorePager(page_size=10)
        with pytest.raises(StoreRestError, match="HTTP 503"):
            for page in fetch_pages(
                server.url, pager, save_dir=save, retries=2, sleep=lambda s: None
            ):
                got.extend(_hashes([page]))
                if page.number == 3:
                    server.broken = True
        assert len(got) == 30 and len(list(save.glob("page-*.json"))) == 3
        server.broken = False
        before = len(server.requests)
        resumed = list(fetch_pages(server.url, StorePager(page_size=10), save_dir=save))
        # the three saved pages are replayed, only the four missing ones are fetched
        assert len(server.requests) - before == 4
    assert _hashes(resumed) == [
        m.message_hash for m in sorted(messages, key=lambda m: (m.timestamp, m.message_hash))
    ]
    assert json.loads((save / "page-000007.json").read_bytes())["messages"]


def test_connection_refused_is_a_clear_error() -> None:
    with pytest.raises(StoreRestError, match="connection error"):
        list(fetch_pages("http://127.0.0.1:1", StorePager(), retries=1, sleep=lambda s: None))
