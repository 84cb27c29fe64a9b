"""End to end, in one process: the bridge with its v1 mailserver over real RLPx, its REST
store, a local server speaking nwaku's REST relay API, and a 7-day archive rollover on an
injected clock whose new archive a separate libtorrent session fetches by the magnet link
the bridge published."""

from __future__ import annotations

import asyncio
import base64
import json
import time
import uuid

import aiohttp
import pytest

from tests.bridge.support import ADMIN_TOKEN, FakeNwaku, bridge_config
from tests.helpers import wait_until
from waku_legacy.archive import (
    FetchOptions,
    Selection,
    SessionConfig,
    fetch_archives,
    verify_magnet_message,
)
from waku_legacy.archive.magnet import magnet_message_from_json
from waku_legacy.bridge.clock import ManualClock
from waku_legacy.bridge.service import BridgeService
from waku_legacy.crypto.keccak import keccak256
from waku_legacy.crypto.payload import encode_payload
from waku_legacy.crypto.secp256k1 import generate_private_key, private_key_from_bytes
from waku_legacy.identity.message_hash import message_hash
from waku_legacy.identity.topics import (
    CommunityId,
    chat_topic,
    content_topic_of_chat,
    symmetric_key_for_chat,
)
from waku_legacy.mailserver_compat.client.mailserver_client import HistoryQuery, MailServerClient
from waku_legacy.mailserver_compat.waku_peer import connect
from waku_legacy.mailserver_compat.wire.convert import envelope_to_waku_message
from waku_legacy.mailserver_compat.wire.cursor import db_key_for
from waku_legacy.mailserver_compat.wire.pow import seal
from waku_legacy.mailserver_compat.wire.waku_protocol import StatusOptions
from waku_legacy.store import StoredMessage, open_store

pytestmark = [pytest.mark.network, pytest.mark.torrent]
DAY = 86_400
NS = 1_000_000_000
COMMUNITY_KEY = private_key_from_bytes(bytes.fromhex("5a" * 32))
COMMUNITY = CommunityId(COMMUNITY_KEY.public_key.format(compressed=True))
CHANNEL = str(uuid.UUID(int=0x1234))
CHAT = COMMUNITY.channel_chat_id(CHANNEL)
TOPIC = chat_topic(CHAT)
SHARD = 128
PUBSUB = f"/waku/2/rs/16/{SHARD}"


class Collect:
    def __init__(self) -> None:
        self.envelopes: list[bytes] = []

    def append(self, raw: bytes) -> None:
        self.envelopes.append(raw)

    def flush(self) -> None:
        pass


def _channel_envelope(text: str, sender, sent: int):
    data = encode_payload(
        text.encode(), sign_with=sender, symmetric_key=symmetric_key_for_chat(CHAT)
    )
    return seal(sent + 60, 60, TOPIC, data, 0.002)


def _magnets(nwaku: FakeNwaku) -> list:
    # the -memberUpdate copy: it goes out first (the -magnetlinks one second_link_delay later)
    topic = content_topic_of_chat(COMMUNITY.universal_chat_id)
    out = []
    for pubsub, body in nwaku.published:
        if body["contentTopic"] == topic:
            assert pubsub == PUBSUB  # on the community's shard
            out.append(verify_magnet_message(magnet_message_from_json(body), COMMUNITY))
    return out


async def test_v1_rest_relay_and_a_seven_day_archive_rollover(tmp_path):
    t0 = int(time.time()) - 60
    clock = ManualClock(t0)
    sender = generate_private_key()
    # History the migration left in the store: three v1 messages three days ago.
    old = [_channel_envelope(f"old {i}", sender, t0 - 3 * DAY + i) for i in range(3)]
    store_url = f"sqlite:///{tmp_path}/store.sqlite3"
    with open_store(store_url) as store:
        rows = []
        for env in old:
            msg = envelope_to_waku_message(env)
            rows.append(StoredMessage(
                message_hash(PUBSUB, msg), PUBSUB, msg.content_topic, msg.payload, 1,
                msg.timestamp, None, env.encode(), db_key_for(env).encode(),
            ))  # fmt: skip
        store.insert_messages(rows)
    (tmp_path / "community.key").write_text(COMMUNITY_KEY.secret.hex())
    nwaku = await FakeNwaku().start()
    config = bridge_config(
        tmp_path, store_url,
        v1={"listen": "127.0.0.1:0", "node_key_file": str(tmp_path / "nodekey"),
            "rate_limit": 0},
        relay={"url": nwaku.url},
        archive={"archive_dir": str(tmp_path / "archives"),
                 "torrent_dir": str(tmp_path / "torrents"), "seed_listen": "127.0.0.1:0",
                 "trackers": False, "utp": False, "interval": "7d",
                 "republish_interval": "1d"},
        community=[{"id": str(COMMUNITY), "channels": [CHANNEL], "shard": SHARD,
                    "key_file": "community.key"}],
    )  # fmt: skip
    service = BridgeService(config, clock=clock)
    await service.start()
    archiver = service.archive.archivers[str(COMMUNITY)]
    http = aiohttp.ClientSession(f"http://127.0.0.1:{service.rest_port}")
    try:
        # 1. At start: no archive yet, so one run builds the first (the old messages).
        await wait_until(lambda: _magnets(nwaku), what="first magnet link")
        # the fake node records the link before it answers; the run marks it published after
        await wait_until(lambda: archiver.last_run is not None and archiver.last_run.published,
                         what="the first run's publish answered")  # fmt: skip
        first = archiver.last_run
        assert first.reason == "start" and first.build["archives_added"] == 1
        assert first.collected["from_envelopes"] == 3 and first.published
        assert _magnets(nwaku)[0].magnet_uri == archiver.magnet_uri()

        # 2. A v1 client posts channel messages over RLPx; they are stored and forwarded.
        now = int(time.time())
        posted = await _post_over_v1(service, nwaku, sender, now)

        # 3. ... and a v1 client gets the whole history back, byte for byte.
        collect = Collect()
        async with MailServerClient(service.mailserver.enode) as client:
            result = await client.pull(
                HistoryQuery(lower=t0 - 4 * DAY, upper=now + 120, topics=(TOPIC,), limit=3),
                collect,
            )
        assert sorted(collect.envelopes) == sorted(e.encode() for e in old + posted)
        assert result.pages >= 3

        # 4. A REST client sees the same messages from the v2 side.
        async with http.get("/store/v3/messages", params={
            "pubsubTopic": PUBSUB, "contentTopics": f"/waku/1/0x{TOPIC.hex()}/rfc26",
            "includeData": "true", "pageSize": "100"}) as response:  # fmt: skip
            doc = await response.json()
        assert sorted(base64.b64decode(m["message"]["payload"]) for m in doc["messages"]) == sorted(
            e.data for e in old + posted
        )

        # 5. Seven days later the schedule builds the next archive, swaps the seeded
        #    torrent and publishes a newer signed magnet link.
        link = await _roll_over(service, nwaku, clock, first)

        # 6. A separate libtorrent session fetches the new archive by that magnet link.
        await _check_member_fetch(service, link, tmp_path / "member", sender, posted, t0)

        # 7. Admin view, and the metrics that count all this.
        await _check_admin_and_metrics(http, link)
    finally:
        await http.close()
        await service.stop()
        await nwaku.stop()
    assert service.state == "Stopped"
    json.dumps(service.info())


async def _post_over_v1(service: BridgeService, nwaku: FakeNwaku, sender, now: int) -> list:
    """Step 2: a v1 client posts five channel messages over RLPx; they are stored and
    relayed. Returns the envelopes posted."""
    status = StatusOptions(pow_requirement=0.0, light_node=True)
    peer = await connect(service.mailserver.enode, sender, status=status)
    posted = [_channel_envelope(f"new {i}", sender, now) for i in range(5)]
    await peer.send_envelopes([e.encode() for e in posted])
    await peer.disconnect()
    channel_posts = lambda: [b for _, b in nwaku.published if b["contentTopic"] not in _magnet_cts()]  # noqa: E731, E501
    await wait_until(lambda: len(channel_posts()) == 5, what="five relay publishes")
    assert {base64.b64decode(b["payload"]) for b in channel_posts()} == {e.data for e in posted}
    await service.live.writer.flush()
    return posted


async def _roll_over(service: BridgeService, nwaku: FakeNwaku, clock: ManualClock, first):
    """Step 5: seven days on, the schedule's run after ``first``; returns the newer magnet
    link."""
    archiver = service.archive.archivers[str(COMMUNITY)]
    published_before = len(_magnets(nwaku))
    clock.advance(7 * DAY)
    await wait_until(lambda: archiver.last_run is not first and archiver.last_run.published,
                timeout=30, what="rollover run")  # fmt: skip
    second = archiver.last_run
    assert second.reason == "schedule" and second.build["archives_added"] == 1
    assert second.seeded and second.build["total_archives"] == 2
    await wait_until(lambda: len(_magnets(nwaku)) > published_before, what="new magnet link")
    link = _magnets(nwaku)[-1]
    assert link.clock > _magnets(nwaku)[0].clock
    assert link.info_hash != _magnets(nwaku)[0].info_hash  # a new torrent
    assert service.seeder.stats()[0].info_hash == link.info_hash  # and it is seeded
    return link


async def _check_member_fetch(service: BridgeService, link, folder, sender, posted, t0) -> None:
    """Step 6: a separate libtorrent session fetches the new archive by ``link``."""
    loopback = SessionConfig(listen="127.0.0.1:0", trackers=False, utp=False)
    fetched = await asyncio.to_thread(
        fetch_archives, link.magnet_uri, COMMUNITY, folder,
        FetchOptions(selection=Selection.LATEST, session=loopback, metadata_timeout=15,
                     data_timeout=30, peers=(f"127.0.0.1:{service.seeder.port}",)),
    )  # fmt: skip
    messages = [m for _, m in fetched.messages()]
    # archive_topics defaults to "both": each message on its channel topic (2024 clients)
    # and relabelled to <id>-memberUpdate (clients after status-go #5993), keccak-derived
    # hash, payload, sig and timestamp unchanged.
    universal = keccak256(f"{COMMUNITY}-memberUpdate".encode())[:4]
    channel = [m for m in messages if m.topic == TOPIC]
    relabelled = [m for m in messages if m.topic == universal]
    assert len(channel) + len(relabelled) == len(messages)
    new_texts = sorted(f"new {i}".encode() for i in range(5))
    assert sorted(m.payload for m in channel) == new_texts
    assert sorted(m.payload for m in relabelled) == new_texts
    uncompressed = sender.public_key.format(compressed=False)
    envelope_hashes = {keccak256(e.encode()) for e in posted}
    for m in channel:  # status-go archive semantics
        assert m.sig == uncompressed
        assert m.hash in envelope_hashes  # v1: envelope hash
        assert t0 + 0 <= m.timestamp < t0 + 7 * DAY
    originals = {m.payload: m for m in channel}
    for m in relabelled:
        source = originals[m.payload]
        assert (m.sig, m.timestamp) == (source.sig, source.timestamp)
        assert m.hash == keccak256(source.hash + universal)


async def _check_admin_and_metrics(http: aiohttp.ClientSession, link) -> None:
    """Step 7: the admin view, and the metrics that count all this."""
    headers = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
    async with http.get("/admin/v1/communities", headers=headers) as response:
        report = (await response.json())["communities"][0]
    assert report["id"] == str(COMMUNITY) and len(report["archives"]) == 2
    assert report["magnetUri"] == link.magnet_uri and report["seeding"]["infoHash"]
    assert report["linkReach"] == {"reachesMembers": True, "why": []}
    async with http.post(f"/admin/v1/communities/{COMMUNITY}/archive",
                         headers=headers) as response:  # fmt: skip
        runs = (await response.json())["runs"]
    assert runs[0]["build"]["archives_added"] == 0 and runs[0]["error"] is None
    async with http.get("/metrics") as response:
        text = await response.text()
    assert f'waku_legacy_archives_built_total{{community="{COMMUNITY}"}} 2' in text
    assert 'waku_legacy_envelopes_bridged_total{direction="v1_to_v2"} 5' in text
    assert f'waku_legacy_torrent_peers{{community="{COMMUNITY}"}}' in text


def _magnet_ct() -> str:
    return content_topic_of_chat(COMMUNITY.magnetlinks_chat_id)


def _magnet_cts() -> set[str]:
    """Archive links go to -memberUpdate and -magnetlinks (issue 12, default "both")."""
    return {_magnet_ct(), COMMUNITY.universal_content_topic}
