"""The relay publisher survives whatever the nwaku node answers: a body that is not UTF-8
or is huge is an error to log and retry, never an exception that kills the publish queue."""

from __future__ import annotations

import asyncio

import aiohttp
import pytest
from aiohttp import web

from waku_legacy.bridge.config import RelayConfig
from waku_legacy.bridge.metrics import BridgeMetrics
from waku_legacy.bridge.relay import RelayPublisher
from waku_legacy.proto import waku_message_pb2

pytestmark = pytest.mark.network


async def test_odd_answers_are_retried_and_the_queue_keeps_going():
    answers = [
        web.Response(status=503, body=b"\xff\xfe not utf-8 \xc3", content_type="text/plain"),
        web.Response(status=503, body=b"x" * (3 << 20), content_type="text/plain"),
    ]
    published: list[str] = []

    async def relay(request: web.Request) -> web.Response:
        if answers:
            return answers.pop(0)
        published.append(request.match_info["topic"])
        return web.Response(text="OK")

    app = web.Application()
    app.router.add_post("/relay/v1/messages/{topic}", relay)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    metrics = BridgeMetrics()
    async with aiohttp.ClientSession() as session:
        publisher = RelayPublisher(
            RelayConfig(url=f"http://127.0.0.1:{port}", retries=3), metrics, session
        )
        publisher.backoff = 0.01
        publisher.start()
        try:
            message = waku_message_pb2.WakuMessage(
                payload=b"hi", content_topic="/a/1/b/proto", timestamp=1
            )
            publisher.submit("/waku/2/rs/16/32", message)
            publisher.submit("/waku/2/rs/16/32", message)
            await asyncio.wait_for(publisher.drained(), 10)
            assert len(published) == 2  # the first after two odd 503s, then the second
            assert metrics.relay_publish.value("ok") == 2
        finally:
            await publisher.close()
            await runner.cleanup()
