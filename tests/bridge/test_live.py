"""Live bridging and history pulls, against real RLPx v1 peers and a local server speaking
nwaku's REST API: v1 envelopes stored with their bytes and published through the relay API,
v2 messages offered to v1 peers, the seen-cache stopping loops, resumable 30-day pulls."""

from __future__ import annotations

import asyncio
import base64
import json
import time

import pytest

from tests.bridge.support import (
    FakeNwaku,
    bridge_config,
    deterministic_hash,
)
from tests.helpers import wait_until
from waku_legacy.bridge.clock import ManualClock
from waku_legacy.bridge.service import BridgeService
from waku_legacy.crypto.secp256k1 import generate_private_key
from waku_legacy.identity.shards import GLOBAL_PUBSUB_TOPIC
from waku_legacy.identity.topics import v1_topic_to_content_topic
from waku_legacy.mailserver_compat.waku_peer import connect
from waku_legacy.mailserver_compat.wire.envelope import Envelope
from waku_legacy.mailserver_compat.wire.pow import seal
from waku_legacy.mailserver_compat.wire.waku_protocol import EnvelopesReceived, StatusOptions
from waku_legacy.store import StoredMessage

pytestmark = pytest.mark.network
DAY = 86_400
NS = 1_000_000_000
TOPIC = bytes.fromhex("0badcafe")


def _envelope(data: bytes, *, topic: bytes = TOPIC, now: int | None = None) -> Envelope:
    now = int(time.time()) if now is None else now
    return seal(now + 30, 30, topic, data, 0.002)


def _v2(i: int, ts: int, *, pubsub: str = GLOBAL_PUBSUB_TOPIC, topic: bytes = TOPIC,
        version: int = 1) -> StoredMessage:  # fmt: skip
    payload = b"v2 message %d" % i
    content = v1_topic_to_content_topic(topic)
    return StoredMessage(
        deterministic_hash(pubsub, payload, content, None, ts), pubsub, content, payload,
        version, ts,
    )  # fmt: skip


async def _service(tmp_path, nwaku: FakeNwaku, clock: ManualClock, **extra):
    sections = {
        "v1": {"listen": "127.0.0.1:0", "node_key_file": str(tmp_path / "nodekey"),
               "rate_limit": 0, "min_pow": 0.001},
        "relay": {"url": nwaku.url, "retries": 2},
    }  # fmt: skip
    sections.update(extra)
    config = bridge_config(tmp_path, f"sqlite:///{tmp_path}/store.sqlite3", **sections)
    service = BridgeService(config, clock=clock)
    await service.start()
    if service.relay is not None:
        service.relay.backoff = 0.01
    if service.history is not None:
        service.history.backoff = 0.01
    return service


async def _peer(service, *, topics=None):
    status = StatusOptions(pow_requirement=0.0, light_node=False,
                           topic_interest=None if topics is None else tuple(topics))  # fmt: skip
    return await connect(service.mailserver.enode, generate_private_key(), status=status)


async def _next_envelopes(peer, timeout: float = 5.0) -> list[bytes]:
    async with asyncio.timeout(timeout):
        while True:
            event = await peer.recv()
            if isinstance(event, EnvelopesReceived):
                return list(event.envelopes)


async def test_v1_envelopes_are_stored_published_and_passed_on(tmp_path):
    nwaku = await FakeNwaku(store_relayed=False).start()
    nwaku.fail_relay = 1  # the first publish meets a 503 and is retried
    service = await _service(tmp_path, nwaku, ManualClock(time.time()))
    sender = await _peer(service)
    listener = await _peer(service, topics=[TOPIC])
    uninterested = await _peer(service, topics=[b"\x00\x00\x00\x01"])
    try:
        await wait_until(lambda: len(service.mailserver.peers) == 3, what="three peers")
        envelope = _envelope(b"hello from v1")
        raw = envelope.encode()
        await sender.send_envelopes([raw])
        assert await _next_envelopes(listener) == [raw]  # passed on, byte for byte
        await wait_until(lambda: nwaku.published, what="relay publish")
        topic, body = nwaku.published[0]
        assert topic == GLOBAL_PUBSUB_TOPIC  # not a community topic: the default shard
        assert body == {
            "payload": base64.b64encode(b"hello from v1").decode(),
            "contentTopic": "/waku/1/0x0badcafe/rfc26",
            "version": 1,
            "timestamp": (envelope.expiry - envelope.ttl) * NS,
        }
        digest = deterministic_hash(topic, b"hello from v1", body["contentTopic"], None,
                                    body["timestamp"])  # fmt: skip
        await service.live.writer.flush()
        store = service.store.stores
        await wait_until(lambda: store.get_message(digest) is not None, what="stored message")
        assert await service.store.read(lambda s: s.get_envelope(digest)) == raw
        # A repeat (even from another peer) is neither stored again nor published again.
        await listener.send_envelopes([raw])
        await sender.send_envelopes([_envelope(b"second").encode()])
        await wait_until(lambda: len(nwaku.published) == 2, what="second publish")
        assert base64.b64decode(nwaku.published[1][1]["payload"]) == b"second"
        with pytest.raises(TimeoutError):
            await _next_envelopes(uninterested, timeout=0.3)
        metrics = service.metrics
        assert metrics.envelopes_bridged.value("v1_to_v2") == 2
        # counted when the node's answer is back, a moment after the node recorded it
        await wait_until(lambda: metrics.relay_publish.value("ok") == 2, what="two publishes ok")
    finally:
        for peer in (sender, listener, uninterested):
            await peer.disconnect()
        await service.stop()
        await nwaku.stop()


async def test_on_a_protected_shard_the_signed_message_is_the_one_stored(tmp_path):
    """The relay publishes a shard-signed copy (57); the store keeps that same message (its
    meta and hash), so the network's copy pulled back later is no second row."""
    from waku_legacy.identity.message_hash import message_hash
    from waku_legacy.proto import waku_message_pb2

    (tmp_path / "shard.key").write_text("11" * 32 + "\n")
    nwaku = await FakeNwaku(store_relayed=False).start()
    relay = {"url": nwaku.url, "retries": 2, "protected_shard": [
        {"pubsub_topic": GLOBAL_PUBSUB_TOPIC, "key_file": str(tmp_path / "shard.key")}]}
    service = await _service(tmp_path, nwaku, ManualClock(time.time()), relay=relay)
    sender = await _peer(service)
    try:
        await wait_until(lambda: len(service.mailserver.peers) == 1, what="peer")
        await sender.send_envelopes([_envelope(b"signed on the shard").encode()])
        await wait_until(lambda: nwaku.published, what="relay publish")
        topic, body = nwaku.published[0]
        published = waku_message_pb2.WakuMessage(
            payload=base64.b64decode(body["payload"]), content_topic=body["contentTopic"],
            version=body["version"], timestamp=body["timestamp"],
            meta=base64.b64decode(body["meta"]),
        )  # fmt: skip
        assert len(published.meta) == 64
        await service.live.writer.flush()
        digest = message_hash(topic, published)
        stored = await service.store.read(lambda s: s.get_message(digest))
        assert stored is not None and stored.meta == published.meta
        assert await service.store.read(lambda s: s.count()) == 1
    finally:
        await sender.disconnect()
        await service.stop()
        await nwaku.stop()


async def test_v2_messages_are_offered_to_v1_peers_once(tmp_path):
    now = time.time()
    clock = ManualClock(now)
    fresh = _v2(1, int(now * NS) - 10 * NS)
    old = _v2(2, int(now * NS) - 2 * DAY * NS)  # history: stored, not offered live
    not_v1 = _v2(3, int(now * NS), version=0)
    nwaku = await FakeNwaku([fresh, old, not_v1]).start()
    history = {"nodes": [nwaku.url], "interval": "1h", "page_size": 2,
               "pubsub_topics": [GLOBAL_PUBSUB_TOPIC]}  # fmt: skip
    service = await _service(tmp_path, nwaku, clock, history=history)
    listener = await _peer(service)
    try:
        got = await _next_envelopes(listener)
        envelope = Envelope.decode(got[0])
        assert envelope.data == fresh.payload and envelope.topic == TOPIC
        assert envelope.ttl == 5  # nwaku's bridge TTL
        await wait_until(lambda: service.history.last_reports, what="first pull")
        report = service.history.last_reports[0]
        assert (report.new, report.offered_v1, report.pages) == (3, 1, 2)
        for row in (fresh, old, not_v1):
            assert service.store.stores.get_message(row.message_hash) is not None
        # The bridge's own publication comes back from the store node: not offered again.
        sender = await _peer(service)
        await sender.send_envelopes([_envelope(b"round trip").encode()])
        passed_on = await _next_envelopes(listener)  # v1 -> v1, once
        assert Envelope.decode(passed_on[0]).data == b"round trip"
        await wait_until(lambda: nwaku.published, what="publish")
        clock.advance(3600)  # next pull
        await wait_until(lambda: service.history.last_reports[0] is not report, what="second pull")
        second = service.history.last_reports[0]
        # fresh, not_v1 and the round trip are in the window again; none is new
        assert (second.messages, second.new, second.offered_v1) == (3, 0, 0)
        # The echo of an envelope the bridge sealed is ignored by the mailserver's seen set.
        accepted = service.mailserver.stats["live_accepted"]
        await sender.send_envelopes([got[0]])
        await asyncio.sleep(0.2)
        assert service.mailserver.stats["live_accepted"] == accepted
        with pytest.raises(TimeoutError):
            await _next_envelopes(listener, timeout=0.3)
        assert len(nwaku.published) == 1
        await sender.disconnect()
    finally:
        await listener.disconnect()
        await service.stop()
        await nwaku.stop()


async def test_history_pull_is_windowed_checked_and_resumable(tmp_path):
    now = time.time()
    clock = ManualClock(now)
    rows = [_v2(i, int(now * NS) - (i + 1) * 60 * NS, version=0) for i in range(250)]
    ancient = _v2(999, int((now - 31 * DAY) * NS), version=0)
    forged = rows[5]._replace(payload=b"tampered")  # hash no longer matches its contents
    nwaku = await FakeNwaku([*rows[:5], forged, *rows[6:], ancient]).start()
    nwaku.fail_store = 1  # one page, then the node fails
    history = {
        "nodes": [nwaku.url],
        "interval": "1d",
        "retries": 1,
        "pubsub_topics": [GLOBAL_PUBSUB_TOPIC],
        "state_dir": str(tmp_path / "st"),
    }
    service = await _service(tmp_path, nwaku, clock, history=history)  # fmt: skip
    try:
        await wait_until(lambda: service.history.last_reports, what="first pull")
        first = service.history.last_reports[0]
        assert first.error and "503" in first.error and first.pages == 1
        state = json.loads(next((tmp_path / "st").glob("history-*.json")).read_text())
        assert state["cursor"] and state["start"] == int(now * NS) - 30 * DAY * NS
        # The node recovers; the next pull resumes from the saved cursor, not from the start.
        nwaku.fail_store = None
        requests_before = len(nwaku.store_requests)
        second = await service.history.pull(nwaku.url, GLOBAL_PUBSUB_TOPIC)
        assert second.resumed and second.error is None
        assert nwaku.store_requests[requests_before]["cursor"] == state["cursor"]
        assert first.new + second.new == 249 and second.bad_hashes == 1
        store = service.store.stores
        assert store.get_message(forged.message_hash) is None
        assert store.get_message(ancient.message_hash) is None  # outside the 30 days
        assert store.count() == 249
        state = json.loads(next((tmp_path / "st").glob("history-*.json")).read_text())
        assert state["cursor"] is None and state["complete_end"] == int(now * NS)
        # A later pull starts an hour before the last complete end, and finds nothing new.
        clock.advance(2 * DAY)
        third = await service.history.pull(nwaku.url, GLOBAL_PUBSUB_TOPIC)
        assert not third.resumed and third.start == int(now * NS) - 3600 * NS
        assert third.new == 0
    finally:
        await service.stop()
        await nwaku.stop()


async def test_relay_refusal_is_not_retried_and_service_keeps_going(tmp_path):
    nwaku = await FakeNwaku().start()
    service = await _service(tmp_path, nwaku, ManualClock(time.time()))
    try:
        from waku_legacy.bridge.relay import RelayError
        from waku_legacy.proto import waku_message_pb2

        empty = waku_message_pb2.WakuMessage(payload=b"", content_topic="/a/1/b/c")
        with pytest.raises(RelayError) as info:
            await service.relay.publish(GLOBAL_PUBSUB_TOPIC, empty)
        assert info.value.status == 400 and "payload" in str(info.value)
        await nwaku.stop()  # the node goes away: connection errors, retried, then reported
        with pytest.raises(RelayError) as info:
            await service.relay.publish(GLOBAL_PUBSUB_TOPIC, empty)
        assert info.value.status == 0
        assert service.metrics.relay_publish.value("error") == 2
    finally:
        await service.stop()


async def test_trusted_mailserver_history_is_stored_not_republished(tmp_path):
    nwaku = await FakeNwaku().start()
    trusted = generate_private_key()
    service = await _service(
        tmp_path, nwaku, ManualClock(time.time()),
        v1={"listen": "127.0.0.1:0", "node_key_file": str(tmp_path / "nodekey"),
            "rate_limit": 0, "trusted_peers": [trusted.public_key.format(False)[1:].hex()]},
    )  # fmt: skip
    status = StatusOptions(pow_requirement=0.0, light_node=False)
    peer = await connect(service.mailserver.enode, trusted, status=status)
    try:
        old = _envelope(b"last week", now=int(time.time()) - 7 * DAY)
        await peer.send_p2p_messages([old.encode()])
        digest = deterministic_hash(
            GLOBAL_PUBSUB_TOPIC,
            b"last week",
            "/waku/1/0x0badcafe/rfc26",
            None,
            (old.expiry - old.ttl) * NS,
        )
        store = service.store.stores
        await wait_until(lambda: store.get_message(digest) is not None, what="stored history")
        assert store.get_envelope(digest) == old.encode()
        assert nwaku.published == []
        assert service.metrics.envelopes_dropped.value("not_live") == 1
    finally:
        await peer.disconnect()
        await service.stop()
        await nwaku.stop()
