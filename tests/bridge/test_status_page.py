"""The status page (``GET /``) and its JSON (``GET /debug/v1/status``): rendered in headless
Chromium (a screenshot, the rendered text naming every community and its latest link, a new
window after an archive run), every value escaped, nothing secret, the same values in both,
and ``[server] status_page = false`` turning both off."""

from __future__ import annotations

import json
import time
import uuid
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from tests.bridge.support import ADMIN_TOKEN, FakeNwaku, bridge_config
from tests.browser import WINDOW, check_png, chromium, page_text, screenshot, text_of
from tests.helpers import start_until_archive_published, store_channel_messages, wait_until
from waku_legacy.bridge.archiver import LinkReach
from waku_legacy.bridge.clock import ManualClock
from waku_legacy.bridge.service import BridgeService
from waku_legacy.bridge.status import (
    ArchiveRun,
    ArchiveWindow,
    CommunityStatus,
    HistoryStatus,
    PeerStatus,
    ProtocolHealth,
    Publication,
    PullStatus,
    Refusal,
    ServiceStatus,
    StatusReport,
    V1Status,
    public_store_url,
)
from waku_legacy.bridge.status_page import number, render_status_page, utc
from waku_legacy.crypto.secp256k1 import generate_private_key, private_key_from_bytes
from waku_legacy.errors import ConfigError
from waku_legacy.identity.topics import CommunityId
from waku_legacy.mailserver_compat.waku_peer import connect
from waku_legacy.mailserver_compat.wire.pow import seal

DAY = 86_400
T0 = 1_750_000_000
HOSTILE = '<script>alert("x")</script><img src=x onerror=alert(1)>&amp;"\''


class Community:
    def __init__(self, tmp_path: Path, seed: int, name: str, shard: int) -> None:
        self.key = private_key_from_bytes(bytes([seed]) * 32)
        self.id = CommunityId(self.key.public_key.format(compressed=True))
        self.channel = str(uuid.UUID(int=seed))
        self.name = name
        self.shard = shard
        self.pubsub = f"/waku/2/rs/16/{shard}"
        self.key_file = tmp_path / f"{seed}.key"
        self.key_file.write_text(self.key.secret.hex())

    def table(self) -> dict[str, Any]:
        return {"id": str(self.id), "channels": [self.channel], "shard": self.shard,
                "key_file": str(self.key_file), "name": self.name}  # fmt: skip


def _config(tmp_path: Path, url: str, communities: list[Community], **sections: Any) -> Any:
    archive = {"archive_dir": str(tmp_path / "a"), "torrent_dir": str(tmp_path / "t"),
               "seed_listen": "127.0.0.1:0", "trackers": False, "utp": False,
               "republish_interval": "7d"}  # fmt: skip
    return bridge_config(
        tmp_path, url, archive=archive, community=[c.table() for c in communities], **sections
    )


# -- the rendered page ----------------------------------------------------------------------


@pytest.mark.network
@pytest.mark.torrent
async def test_status_page_in_headless_chromium_shows_a_new_window_after_a_run(tmp_path):
    url = f"sqlite:///{tmp_path}/store.sqlite3"
    communities = [Community(tmp_path, 0x41, "Logos Café", 128),
                   Community(tmp_path, 0x42, "Old Timers", 200)]  # fmt: skip
    for n, community in enumerate(communities):
        store_channel_messages(url, community.id, community.channel, T0 - (2 + n) * DAY,
                               3 + n, community.pubsub)  # fmt: skip
    nwaku = await FakeNwaku().start()
    config = _config(
        tmp_path, url, communities, relay={"url": nwaku.url},
        v1={"listen": "127.0.0.1:0", "node_key_file": str(tmp_path / "nodekey")},
        history={"nodes": [nwaku.url], "retries": 0},
    )  # fmt: skip
    clock = ManualClock(T0)
    service = BridgeService(config, clock=clock)
    peer = None
    try:
        await start_until_archive_published(service, communities[0].id)
        await wait_until(lambda: _published(service, communities[1]), what="the second link")
        assert service.history is not None
        await wait_until(lambda: service.history.last_reports, what="a history pull")
        peer_key = generate_private_key()
        peer = await connect(service.mailserver.enode, peer_key)
        expired = seal(int(time.time()) - 30, 30, b"\x01\x02\x03\x04", b"late", 0.002)
        await peer.send_envelopes([expired.encode()])  # refused: shown with its reason
        await wait_until(lambda: service.mailserver.refusals, what="the refusal")
        base = f"http://127.0.0.1:{service.rest_port}"

        first = await screenshot(tmp_path, base + "/", "first.png")
        check_png(first, WINDOW)
        text = text_of((await chromium(tmp_path, base + "/", "--dump-dom")).decode())
        status = await _json(base + "/debug/v1/status")
        for community, shown in zip(communities, status["communities"], strict=True):
            assert shown["link"] and shown["link"].startswith("magnet:?")
            for value in (community.name, str(community.id), shown["link"], community.pubsub):
                assert value in text, value
        assert peer_key.public_key.format(compressed=False)[1:].hex() in text
        assert status["v1"]["refusals"] == [{"kind": "live", "reason": "expired", "count": 1}]
        assert status["v1"]["peers"][0]["liveRejected"] == 1 and "expired" in text
        assert nwaku.url in text and "READY" in text

        # A new week's messages, archived now by the admin API: the new window shows.
        target = communities[0]
        store_channel_messages(url, target.id, target.channel, T0 + DAY, 5, target.pubsub)
        clock.advance(2 * DAY)
        async with (
            aiohttp.ClientSession() as http,
            http.post(f"{base}/admin/v1/communities/{target.id}/archive",
                      headers={"Authorization": f"Bearer {ADMIN_TOKEN}"}) as response,
        ):  # fmt: skip
            assert response.status == 200
            run = (await response.json())["runs"][0]
        assert run["error"] is None and run["build"]["archives_added"] == 1
        after = await _json(base + "/debug/v1/status")
        newest = after["communities"][0]["windows"][0]
        assert newest["end"] == T0 + 2 * DAY and newest["messages"] == 5
        # "both": each message archived on its channel topic and on -memberUpdate (issue 34)
        assert (newest["copies"], newest["archiveTopics"]) == (2 * 5, "both")
        assert newest["archiveId"] not in {w["archiveId"] for w in
                                           status["communities"][0]["windows"]}  # fmt: skip
        second = await screenshot(tmp_path, base + "/", "status.png")
        check_png(second, WINDOW)
        text = text_of((await chromium(tmp_path, base + "/", "--dump-dom")).decode())
        for value in (newest["archiveId"], utc(newest["start"]), utc(newest["end"]),
                      after["communities"][0]["link"]):  # fmt: skip
            assert value in text, value
    finally:
        if peer is not None:
            await peer.disconnect()
        await service.stop()
        await nwaku.stop()


def _published(service: BridgeService, community: Community) -> bool:
    assert service.archive is not None
    run = service.archive.archivers[str(community.id)].last_run
    return bool(run and run.published)


async def _json(url: str) -> Any:
    async with aiohttp.ClientSession() as http, http.get(url) as response:
        assert response.status == 200
        return await response.json()


async def _get(url: str) -> tuple[int, str, Any]:
    async with aiohttp.ClientSession() as http, http.get(url) as response:
        return response.status, await response.text(), response.headers


# -- over HTTP: the same values, nothing secret, the switch ----------------------------------


@pytest.mark.network
@pytest.mark.torrent
async def test_json_and_html_carry_the_same_values_and_nothing_secret(tmp_path):
    url = f"sqlite:///{tmp_path}/store.sqlite3"
    community = Community(tmp_path, 0x43, HOSTILE, 128)
    store_channel_messages(url, community.id, community.channel, T0 - 2 * DAY, 4,
                           community.pubsub)  # fmt: skip
    nwaku = await FakeNwaku().start()
    secret_node = nwaku.url.replace("http://", "http://operator:hunter2-secret@")
    config = _config(
        tmp_path, url, [community], relay={"url": nwaku.url},
        history={"nodes": [secret_node], "retries": 0},
    )  # fmt: skip
    service = BridgeService(config, clock=ManualClock(T0))
    try:
        await start_until_archive_published(service, community.id)
        base = f"http://127.0.0.1:{service.rest_port}"
        status, page, headers = await _get(base + "/")
        assert status == 200 and headers["Content-Type"] == "text/html; charset=utf-8"
        assert "default-src 'none'" in headers["Content-Security-Policy"]
        document = await _json(base + "/debug/v1/status")
        text = text_of(page)
        _check_same_values(document, text)
        secrets = (ADMIN_TOKEN, community.key.secret.hex(), "hunter2-secret")
        for shown in (page, json.dumps(document)):
            for secret in secrets:
                assert secret not in shown
        assert HOSTILE in text  # shown as text, not markup
        assert "script" not in page_text(page).tags and "img" not in page_text(page).tags
        assert document["history"]["nodes"] == [nwaku.url]  # the URL without its password
    finally:
        await service.stop()
        await nwaku.stop()


def _check_same_values(document: dict[str, Any], text: str) -> None:
    service = document["service"]
    for value in (service["version"], service["health"], service["store"], utc(service["now"]),
                  *service["listeners"]):  # fmt: skip
        assert value in text, value
    for community in document["communities"]:
        assert community["windows"], "no archive window"
        published, run, seeding = (community[k] for k in ("published", "lastRun", "seeding"))
        for value in (community["id"], community["name"], community["pubsubTopic"],
                      *community["channels"], community["link"], str(published["clock"]),
                      published["clockReason"], utc(published["at"]), utc(run["started"]),
                      run["outcome"], number(seeding["peers"]), seeding["infoHash"]):  # fmt: skip
            assert value in text, value
        for window in community["windows"]:
            for value in (window["archiveId"], utc(window["start"]), utc(window["end"]),
                          number(window["messages"]), number(window["copies"]),
                          number(window["size"])):  # fmt: skip
                assert value in text, value


@pytest.mark.network
async def test_status_page_switched_off_is_404_like_any_unknown_path(tmp_path):
    url = f"sqlite:///{tmp_path}/store.sqlite3"
    config = bridge_config(tmp_path, url, server={"listen": "127.0.0.1:0",
                                                  "status_page": False})  # fmt: skip
    service = BridgeService(config)
    await service.start()
    try:
        base = f"http://127.0.0.1:{service.rest_port}"
        for path in ("/", "/debug/v1/status"):
            status, body, _ = await _get(base + path)
            assert (status, body) == (404, f"no such endpoint: {path}\n")
        assert (await _get(base + "/no-such-page"))[0] == 404
        assert (await _get(base + "/health"))[0] == 200
    finally:
        await service.stop()


@pytest.mark.network
async def test_status_page_needs_no_token_and_works_without_communities(tmp_path):
    config = bridge_config(tmp_path, f"sqlite:///{tmp_path}/store.sqlite3")
    assert config.server.status_page is True  # the default
    service = BridgeService(config)
    await service.start()
    try:
        status, page, _ = await _get(f"http://127.0.0.1:{service.rest_port}/")
        assert status == 200
        text = text_of(page)
        assert "Communities (0)" in text and "not configured (no [v1])" in text
    finally:
        await service.stop()


def test_status_page_switch_must_be_a_boolean(tmp_path):
    with pytest.raises(ConfigError, match="status_page"):
        bridge_config(tmp_path, "sqlite:///x.sqlite3", server={"status_page": "yes"})


# -- the page alone: escaping, the store's password ------------------------------------------


def _hostile_report() -> StatusReport:
    service = ServiceStatus(
        version="waku-legacy-bridge/0.1.0", state="Ready", health="Degraded",
        protocols=(ProtocolHealth("Archives", "NOT_READY", HOSTILE),), started=T0, now=T0 + 90,
        uptime=90, listeners=("http://127.0.0.1:8645",), seed_port=None,
        store="sqlite:///store.sqlite3",
    )  # fmt: skip
    community = CommunityStatus(
        id="0x02" + "ab" * 32, name=HOSTILE, shard=128, pubsub_topic="/waku/2/rs/16/128",
        channels=(HOSTILE,), backend="torrent", archives=1,
        windows=(ArchiveWindow("0x" + "cd" * 32, T0 - DAY, T0, 12_345, 102_400, 24_690, "both"),),
        index_error=HOSTILE, link="magnet:?xt=urn:btih:" + "ef" * 20 + "&dn=" + HOSTILE,
        published=Publication("magnet:?x", 1_750_000_000_000, HOSTILE, T0),
        seeding=None,
        last_run=ArchiveRun(T0, "admin", "error", HOSTILE, None, None, False, False),
        next_run=None, degraded=HOSTILE, link_reach=LinkReach(False, (HOSTILE,)),
    )  # fmt: skip
    v1 = V1Status(
        enode="enode://" + "11" * 64 + "@127.0.0.1:30303",
        peers=(PeerStatus("22" * 64, HOSTILE, T0, True, 1, 2, 3, 4),),
        refusals=(Refusal("live", HOSTILE, 7),), totals={HOSTILE: 1},
    )
    history = HistoryStatus(
        nodes=(HOSTILE,), interval=3600,
        pulls=(PullStatus(HOSTILE, HOSTILE, T0 - DAY, T0, 1, 2, 3, 0, 0, HOSTILE),),
    )
    return StatusReport(service, (community,), v1, history)


def test_every_value_is_escaped():
    page = render_status_page(_hostile_report())
    parsed = page_text(page)
    assert not parsed.tags & {"script", "img", "link", "iframe", "object", "form"}
    assert all(not name.startswith("on") for name, _ in parsed.attributes)
    assert "<script>" not in page and "&lt;script&gt;" in page
    text = " ".join(parsed.parts)
    assert text.count(HOSTILE) >= 10  # each hostile value shown as text
    assert number(12_345) in text and utc(T0) in text


def test_the_json_is_the_report():
    report = _hostile_report()
    document = report.to_json()
    assert json.loads(json.dumps(document)) == document
    assert document["communities"][0]["windows"][0] == {
        "archiveId": "0x" + "cd" * 32, "start": T0 - DAY, "end": T0, "messages": 12_345,
        "size": 102_400, "copies": 24_690, "archiveTopics": "both",
    }  # fmt: skip
    assert document["v1"]["peers"][0]["enodeId"] == "22" * 64
    assert document["service"]["protocols"][0] == {
        "name": "Archives", "status": "NOT_READY", "desc": HOSTILE,
    }  # fmt: skip


def test_a_postgres_store_password_is_redacted():
    shown = public_store_url("postgresql://waku:s3cret-pass@db.internal:5432/waku_store")
    assert "s3cret-pass" not in shown and "db.internal" in shown and "***" in shown
    assert public_store_url("sqlite:///var/lib/store.sqlite3") == "sqlite:///var/lib/store.sqlite3"


def test_page_and_json_say_whether_the_link_reaches_members():
    """Issue 24: "not by this process yet" beside `"canPublish": false` said nothing of
    why; the page and its JSON carry linkReach (reachesMembers and every reason)."""
    report = _hostile_report()
    assert report.to_json()["communities"][0]["linkReach"] == {
        "reachesMembers": False, "why": [HOSTILE],
    }  # fmt: skip
    text = " ".join(page_text(render_status_page(report)).parts)
    assert "reaches members" in text and HOSTILE in text
    import dataclasses

    fine = dataclasses.replace(report.communities[0], link_reach=LinkReach(True, ()))
    good = dataclasses.replace(report, communities=(fine,))
    assert "reaches members yes" in " ".join(page_text(render_status_page(good)).parts)


def test_archived_copies_are_called_copies():
    """Issue 24: with archive_topics = "both" a week of 6 messages showed 12 under
    '#messages'; the page calls them archived copies and says why there are two. Issue 34:
    the messages are counted as messages, the copies beside them, with the mode."""
    text = " ".join(page_text(render_status_page(_hostile_report())).parts)
    # the windows' header
    assert "archive from to messages archived copies archive topics bytes" in text
    assert "archived copies, seeded" in text  # the last run's line
    assert 'each message is archived twice' in text and '"both"' in text
