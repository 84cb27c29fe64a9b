"""``[viewer]`` in a running bridge: the store's channel messages indexed at start, a live v1
envelope readable on its day page moments after a v1 peer sends it, the archive link shown
after the archive run, every answer with the viewer's headers; off by default."""

from __future__ import annotations

import asyncio
import datetime as dt
import time
from pathlib import Path

import aiohttp

from tests.bridge.support import ADMIN_TOKEN
from tests.bridge.test_status_page import Community, _config
from tests.helpers import wait_until
from tests.waku_legacy.history.status_messages import (
    ALICE,
    BOB,
    Person,
    application,
    chat,
    expected_id,
    wrapped,
)
from waku_legacy.bridge.service import BridgeService
from waku_legacy.bridge.viewer import CONTENT_SECURITY_POLICY
from waku_legacy.crypto.payload import encode_payload
from waku_legacy.crypto.secp256k1 import generate_private_key
from waku_legacy.identity.message_hash import message_hash
from waku_legacy.identity.topics import chat_topic, symmetric_key_for_chat
from waku_legacy.mailserver_compat.waku_peer import connect
from waku_legacy.mailserver_compat.wire.convert import envelope_to_waku_message
from waku_legacy.mailserver_compat.wire.pow import seal
from waku_legacy.store import StoredMessage, open_store

CHAT_MESSAGE = 1  # ApplicationMetadataMessage.Type


def _envelope(community: Community, author: Person, text: str, at_ms: int):
    """A Status chat message as a member's client sends it on the channel: signed, in a
    ProtocolMessage, 26/WAKU-PAYLOAD encrypted with the channel key and signed, sealed."""
    chat_id = community.id.channel_chat_id(community.channel)
    app = application(author, CHAT_MESSAGE, chat(text, clock=at_ms, timestamp=at_ms,
                                                    chat_id=chat_id))  # fmt: skip
    data = encode_payload(wrapped(app), symmetric_key=symmetric_key_for_chat(chat_id),
                          sign_with=author.key)  # fmt: skip
    envelope = seal(at_ms // 1000 + 10, 10, chat_topic(chat_id), data, 0.002)
    return envelope, expected_id(author, app)


def _store(url: str, community: Community, envelope) -> None:
    """``envelope`` stored as the bridge stores a v1 envelope (on the community's shard)."""
    message = envelope_to_waku_message(envelope)
    with open_store(url) as store:
        store.insert_messages([StoredMessage(
            message_hash(community.pubsub, message), community.pubsub, message.content_topic,
            message.payload, 1, message.timestamp,
        )])  # fmt: skip


async def _get(url: str) -> tuple[int, dict[str, str], bytes]:
    async with aiohttp.ClientSession() as http, http.get(url) as response:
        return response.status, dict(response.headers), await response.read()


async def test_the_bridge_serves_and_keeps_the_viewer_current(tmp_path: Path):
    community = Community(tmp_path, 51, "Viewer Town", 128)
    url = f"sqlite:///{tmp_path}/store.sqlite3"
    now_ms = int(time.time() * 1000)
    before, first_id = _envelope(community, ALICE, "stored before the start", now_ms - 60_000)
    _store(url, community, before)
    config = _config(
        tmp_path, url, [community], viewer={"enabled": True},
        v1={"listen": "127.0.0.1:0", "node_key_file": str(tmp_path / "nodekey")},
    )  # fmt: skip
    service = BridgeService(config, seed=False)
    peer = None
    try:
        await service.start()
        base = f"http://127.0.0.1:{service.rest_port}/history/{community.id}"
        day = dt.datetime.fromtimestamp(now_ms / 1000, dt.UTC).date().isoformat()
        page = f"{base}/{community.channel}/{day}.json"

        async def ids() -> list[str]:
            status, _, body = await _get(page)
            if status != 200:
                return []
            import json

            return [m["id"] for m in json.loads(body)["messages"]]

        await wait_until_async(lambda: ids(), lambda got: first_id in got, "the stored message")
        peer = await connect(service.mailserver.enode, generate_private_key())
        live, live_id = _envelope(community, BOB, "sent live <b>now</b>", now_ms)
        await peer.send_envelopes([live.encode()])
        await wait_until_async(lambda: ids(), lambda got: live_id in got, "the live message")
        assert (await ids()) == [first_id, live_id]

        status, headers, body = await _get(f"{base}/{community.channel}/{day}")
        assert status == 200 and b"sent live &lt;b&gt;now&lt;/b&gt;" in body
        assert headers["Content-Security-Policy"] == CONTENT_SECURITY_POLICY
        assert headers["X-Robots-Tag"] == "noindex, nofollow"
        assert headers["Referrer-Policy"] == "no-referrer"
        status, headers, _ = await _get(f"{base}/{community.channel}/not-a-day")
        assert status == 400 and headers["X-Content-Type-Options"] == "nosniff"

        # the archive run at start published a magnet link: the index page names it
        async def archive() -> object:
            import json

            status, _, body = await _get(f"{base}/index.json")
            return json.loads(body)["community"]["archive"] if status == 200 else None

        await wait_until_async(archive, lambda a: bool(a and a["link"]), "the archive link")
        shown = await archive()
        assert shown["link"].startswith("magnet:?xt=urn:btih:")  # type: ignore[index]
        status, _, _ = await _get(f"http://127.0.0.1:{service.rest_port}/")
        assert status == 200  # the status page beside it

        # stored by another path than the live one (as a history pull stores): indexed
        # after the next archive run
        pulled, pulled_id = _envelope(community, ALICE, "pulled from a store node", now_ms + 1)
        _store(url, community, pulled)
        rest = f"http://127.0.0.1:{service.rest_port}"
        async with (
            aiohttp.ClientSession() as http,
            http.post(f"{rest}/admin/v1/communities/{community.id}/archive",
                      headers={"Authorization": f"Bearer {ADMIN_TOKEN}"}) as response,
        ):  # fmt: skip
            assert response.status == 200
        await wait_until_async(lambda: ids(), lambda got: pulled_id in got, "the pulled one")
        assert (await ids()) == [first_id, live_id, pulled_id]
    finally:
        if peer is not None:
            await peer.disconnect()
        await service.stop()


async def wait_until_async(read, done, what: str, timeout: float = 60.0) -> None:
    import asyncio

    deadline = time.monotonic() + timeout
    while True:
        got = await read()
        if done(got):
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what} (last: {got!r})")
        await asyncio.sleep(0.2)


async def test_the_viewer_is_off_by_default(tmp_path: Path):
    community = Community(tmp_path, 52, "Quiet", 128)
    url = f"sqlite:///{tmp_path}/store.sqlite3"
    with open_store(url):
        pass
    service = BridgeService(_config(tmp_path, url, [community]), seed=False)
    try:
        await service.start()
        status, _, _ = await _get(f"http://127.0.0.1:{service.rest_port}/history/")
        assert status == 404
        assert service.viewer is None
    finally:
        await service.stop()


async def test_worker_processes_forward_the_viewer_pages(tmp_path: Path):
    """With ``[server] workers`` > 1 (the default on a multi-core host) a request may land on a
    worker, which forwards what is not the store's to this process: the viewer's pages too,
    with their headers (they were 404 there: the forwarded requests' app had no viewer)."""
    community = Community(tmp_path, 53, "Two Processes", 128)
    url = f"sqlite:///{tmp_path}/store.sqlite3"
    now_ms = int(time.time() * 1000)
    stored, stored_id = _envelope(community, ALICE, "read through a worker", now_ms - 60_000)
    _store(url, community, stored)
    config = _config(tmp_path, url, [community], viewer={"enabled": True},
                     server={"listen": "127.0.0.1:0", "workers": 2})  # fmt: skip
    service = BridgeService(config, seed=False)
    try:
        await service.start()
        base = f"http://127.0.0.1:{service.rest_port}/history/{community.id}"
        day = dt.datetime.fromtimestamp((now_ms - 60_000) / 1000, dt.UTC).date().isoformat()
        page = f"{base}/{community.channel}/{day}"
        answered_by: set[str] = set()
        deadline = time.monotonic() + 60
        while len(answered_by) < 2:  # the primary and a worker, each at least once
            assert time.monotonic() < deadline, f"only {answered_by} answered"
            status, headers, body = await _get(page)
            # every answer is the viewer's (a 404 only while the day is not indexed yet)
            assert headers.get("Content-Security-Policy") == CONTENT_SECURITY_POLICY, (
                status, headers.get("X-Bridge-Process"), body[:200]
            )  # fmt: skip
            if status == 200 and b"read through a worker" in body:
                answered_by.add(headers["X-Bridge-Process"])
            else:
                assert status == 404, (status, body[:200])
            await asyncio.sleep(0.1)  # well under the address's request budget
        assert stored_id[2:] in body.decode()  # its permalink
    finally:
        await service.stop()


__all__ = ["wait_until"]
