"""Operations: Prometheus text, JSON log lines, the injectable clock, graceful shutdown that
finishes in-flight requests and writes, archive runs missed while down, magnet republishing."""

from __future__ import annotations

import asyncio
import io
import json
import logging
import time
import uuid

import aiohttp
import pytest

from tests.bridge.support import FakeNwaku, bridge_config
from tests.helpers import start_until_archive_published, store_channel_messages, wait_until
from waku_legacy.archive import verify_magnet_message
from waku_legacy.archive.magnet import magnet_message_from_json
from waku_legacy.bridge.clock import ManualClock
from waku_legacy.bridge.logs import configure_logging, fields
from waku_legacy.bridge.metrics import Registry
from waku_legacy.bridge.service import BridgeService
from waku_legacy.crypto.secp256k1 import generate_private_key, private_key_from_bytes
from waku_legacy.identity.topics import CommunityId
from waku_legacy.mailserver_compat.waku_peer import connect
from waku_legacy.mailserver_compat.wire.pow import seal
from waku_legacy.store import open_store

DAY = 86_400


def test_prometheus_text_exposition():
    registry = Registry()
    requests = registry.counter("t_requests_total", "Requests\nanswered", ("route",))
    latency = registry.histogram("t_latency_seconds", "Latency", buckets=(0.1, 1.0))
    registry.gauge("t_peers", "Peers", callback=lambda: [((), 3)])
    registry.gauge("t_broken", "A probe that fails", callback=lambda: 1 / 0)
    requests.inc(1, '/a"b')
    requests.inc(2, '/a"b')
    for value in (0.05, 0.5, 5.0):
        latency.observe(value)
    with pytest.raises(ValueError):
        requests.inc(-1, "/x")
    # Expected text derived by hand from the 0.0.4 exposition format.
    assert registry.render() == (
        "# HELP t_requests_total Requests\\nanswered\n"
        "# TYPE t_requests_total counter\n"
        't_requests_total{route="/a\\"b"} 3\n'
        "# HELP t_latency_seconds Latency\n"
        "# TYPE t_latency_seconds histogram\n"
        't_latency_seconds_bucket{le="0.1"} 1\n'
        't_latency_seconds_bucket{le="1"} 2\n'
        't_latency_seconds_bucket{le="+Inf"} 3\n'
        "t_latency_seconds_sum 5.55\n"
        "t_latency_seconds_count 3\n"
        "# HELP t_peers Peers\n"
        "# TYPE t_peers gauge\n"
        "t_peers 3\n"
        "# HELP t_broken A probe that fails\n"
        "# TYPE t_broken gauge\n"
        "t_broken 0\n"
    )


def test_json_log_lines():
    stream = io.StringIO()
    configure_logging("info", "json", stream)
    log = logging.getLogger("waku_legacy.bridge.test")
    log.info("archive built", extra=fields(community="0x02ab", archives=3))
    try:
        raise RuntimeError("disk full")
    except RuntimeError:
        log.error("archive run failed", exc_info=True)
    log.debug("not shown at info")
    lines = [json.loads(line) for line in stream.getvalue().splitlines()]
    assert len(lines) == 2
    assert lines[0]["msg"] == "archive built" and lines[0]["archives"] == 3
    assert lines[0]["level"] == "info" and lines[0]["ts"].endswith("Z")
    assert lines[1]["error"] == "disk full" and lines[1]["exc_type"] == "RuntimeError"
    assert "traceback" not in lines[1]  # tracebacks only at debug level
    configure_logging("warning", "text", io.StringIO())


async def test_manual_clock_wakes_sleepers_in_order():
    clock = ManualClock(1000)
    woke: list[str] = []

    async def sleeper(name: str, when: float) -> None:
        await clock.sleep_until(when)
        woke.append(name)

    tasks = [asyncio.create_task(sleeper(n, w)) for n, w in (("b", 1020), ("a", 1010), ("c", 999))]
    await asyncio.sleep(0.01)
    assert woke == ["c"] and clock.sleepers == 2
    clock.advance(15)
    await asyncio.sleep(0.01)
    assert woke == ["c", "a"]
    clock.set(2000)
    await asyncio.gather(*tasks)
    assert woke == ["c", "a", "b"]
    with pytest.raises(ValueError):
        clock.set(10)


@pytest.mark.network
async def test_graceful_shutdown_finishes_requests_and_writes(tmp_path, monkeypatch):
    url = f"sqlite:///{tmp_path}/store.sqlite3"
    config = bridge_config(
        tmp_path, url, v1={"listen": "127.0.0.1:0", "node_key_file": str(tmp_path / "k"),
                           "rate_limit": 0})  # fmt: skip
    service = BridgeService(config, clock=ManualClock(time.time()))
    await service.start()
    import waku_legacy.bridge.http_api as http_api

    original = http_api.run_v3_query

    def slow_query(*args, **kwargs):
        time.sleep(0.4)  # a request still running when the stop begins
        return original(*args, **kwargs)

    monkeypatch.setattr(http_api, "run_v3_query", slow_query)
    real_insert = service.store.insert

    async def slow_insert(rows):
        await asyncio.sleep(0.3)  # writes still queued when the stop begins
        return await real_insert(rows)

    service.store.insert = slow_insert  # type: ignore[method-assign]
    peer = await connect(service.mailserver.enode, generate_private_key())
    topic = b"\x01\x02\x03\x04"
    now = int(time.time())
    envelopes = [seal(now + 20, 20, topic, b"msg %d" % i, 0.002).encode() for i in range(20)]
    for raw in envelopes:
        await peer.send_envelopes([raw])
    await wait_until(lambda: service.mailserver.stats["live_accepted"] == 20, what="accepted")

    async def slow_request() -> tuple[int, dict]:
        async with (
            aiohttp.ClientSession() as http,
            http.get(f"http://127.0.0.1:{service.rest_port}/store/v3/messages") as response,
        ):
            return response.status, await response.json()

    request = asyncio.create_task(slow_request())
    await asyncio.sleep(0.1)
    await service.stop()
    status, doc = await request
    assert status == 200 and "messages" in doc
    assert service.state == "Stopped"
    with open_store(url) as store:
        assert store.count() == 20 and store.count_envelopes() == 20


@pytest.mark.network
@pytest.mark.torrent
async def test_missed_archive_window_runs_at_start_and_magnet_is_republished(tmp_path):
    key = private_key_from_bytes(bytes.fromhex("3c" * 32))
    community = CommunityId(key.public_key.format(compressed=True))
    channel = str(uuid.UUID(int=99))
    (tmp_path / "c.key").write_text(key.secret.hex())
    url = f"sqlite:///{tmp_path}/store.sqlite3"
    pubsub = "/waku/2/rs/16/200"
    t0 = 1_750_000_000

    nwaku = await FakeNwaku().start()
    config = bridge_config(
        tmp_path, url, relay={"url": nwaku.url},
        archive={"archive_dir": str(tmp_path / "a"), "torrent_dir": str(tmp_path / "t"),
                 "seed_listen": "127.0.0.1:0", "trackers": False, "republish_interval": "1d"},
        community=[{"id": str(community), "channels": [channel], "shard": 200,
                    "key_file": "c.key"}],
    )  # fmt: skip

    def links() -> list:
        return [
            verify_magnet_message(magnet_message_from_json(body), community)
            for _, body in nwaku.published
        ]

    try:
        store_channel_messages(url, community, channel, t0 - 2 * DAY, 4, pubsub)
        service = BridgeService(config, clock=ManualClock(t0))
        archiver = await start_until_archive_published(service, community)
        assert archiver.last_end() == t0 and archiver.next_due() == t0 + 7 * DAY
        await service.stop()

        # Down for ten days; messages kept arriving meanwhile (migration, history pulls).
        store_channel_messages(url, community, channel, t0 + 2 * DAY, 3, pubsub)
        clock = ManualClock(t0 + 10 * DAY)
        service = BridgeService(config, clock=clock)
        archiver = await start_until_archive_published(service, community, what="catch-up")
        run = archiver.last_run
        assert run.reason == "start" and run.build["archives_added"] == 1
        # 3 messages, each archived on its channel topic and on <id>-memberUpdate (the
        # archive_topics default, "both").
        assert run.build["messages_archived"] == 2 * 3 and archiver.last_end() == t0 + 10 * DAY
        count = len(links())
        assert links()[-1].clock == (t0 + 10 * DAY) * 1000
        # A day later the same magnet link is re-signed with a fresh clock and republished,
        # without a new archive.
        clock.advance(DAY)
        await wait_until(lambda: len(links()) > count, what="republish")
        assert links()[-1].clock == (t0 + 11 * DAY) * 1000
        assert links()[-1].magnet_uri == links()[-2].magnet_uri
        assert archiver.last_run is run
        await service.stop()
    finally:
        await nwaku.stop()


@pytest.mark.network
async def test_port_in_use_is_a_config_error_naming_the_key(tmp_path):
    from waku_legacy.errors import ConfigError

    first = BridgeService(bridge_config(tmp_path, f"sqlite:///{tmp_path}/a.sqlite3"))
    await first.start()
    try:
        taken = bridge_config(tmp_path, f"sqlite:///{tmp_path}/b.sqlite3",
                              server={"listen": f"127.0.0.1:{first.rest_port}"})  # fmt: skip
        second = BridgeService(taken)
        with pytest.raises(ConfigError, match=r"\[server\] listen: cannot listen"):
            await second.start()
        await second.stop()
    finally:
        await first.stop()
