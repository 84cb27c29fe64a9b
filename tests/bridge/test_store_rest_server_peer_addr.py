"""Issue 24, nwaku parity: ``peerAddr`` on ``/store/v3/messages`` queries that peer (with the
project's libp2p store client) and answers nwaku's status codes and texts
(waku_api/rest/store/handlers.nim, waku_core/peers.nim): the remote peer is a second bridge
with [libp2p], over real sockets."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from urllib.parse import urlencode

import aiohttp
import pytest

from tests.bridge.support import PUBSUB, bridge_config, make_rows
from waku_legacy.bridge.service import BridgeService
from waku_legacy.store import open_store

pytestmark = pytest.mark.network
OTHER_PEER_ID = "16Uiu2HAmPLe7Mzm8TsYUubgCAW1aJoeFScxrLj8ppHFivPo97bUZ"


async def _service(folder: Path, rows: int, libp2p: dict | None = None) -> BridgeService:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "store.sqlite3"
    with open_store(f"sqlite:///{path}") as store:
        store.insert_messages(make_rows(rows))
    sections = {"libp2p": libp2p} if libp2p else {}
    service = BridgeService(bridge_config(folder, f"sqlite:///{path}", **sections))
    await service.start()
    return service


@pytest.fixture
async def pair(tmp_path) -> AsyncIterator[tuple[aiohttp.ClientSession, BridgeService, str]]:
    """The bridge asked (an empty store) and the remote peer (200 messages, [libp2p])."""
    local = await _service(tmp_path / "local", 0)
    remote = await _service(tmp_path / "remote", 200, {
        "listen": ["/ip4/127.0.0.1/tcp/0"], "shards": [32, 128], "requests_per_second": 1000,
        "address_requests_per_second": 1000, "request_burst": 1000,
    })  # fmt: skip
    address = remote.p2p.multiaddrs[0]
    try:
        async with aiohttp.ClientSession(f"http://127.0.0.1:{local.rest_port}") as http:
            yield http, remote, address
    finally:
        await local.stop()
        await remote.stop()


async def _get(http: aiohttp.ClientSession, **params: str) -> tuple[int, str]:
    async with http.get("/store/v3/messages?" + urlencode(params)) as response:
        return response.status, await response.text()


async def test_peer_addr_answers_from_that_peer(pair) -> None:
    http, remote, address = pair
    query = {"pubsubTopic": PUBSUB, "includeData": "true", "pageSize": "30"}
    status, own = await _get(http, **query)
    assert status == 200 and json.loads(own)["messages"] == []  # the asked bridge is empty
    status, body = await _get(http, peerAddr=address, **query)
    assert status == 200, body
    doc = json.loads(body)
    async with aiohttp.ClientSession() as direct:
        url = f"http://127.0.0.1:{remote.rest_port}/store/v3/messages?" + urlencode(query)
        async with direct.get(url) as response:
            expected = json.loads(await response.text())
    assert doc["statusCode"] == 200 and len(doc["messages"]) == 30
    assert doc["messages"] == expected["messages"]
    assert doc["paginationCursor"] == expected["paginationCursor"]


async def test_peer_addr_errors_are_nwakus(pair) -> None:
    http, _, address = pair
    host = address.rsplit("/p2p/", 1)[0]
    truncated = address[:-1]
    cases = [
        (truncated, 400, "Failed parsing remote peer info: MultiAddress.init [multiaddress: "),
        (address.replace("/tcp", ""), 400, "Unsupported protocol"),
        (host, 400, "Failed parsing remote peer info: Error in parsePeerInfo: p2p part"),
        ("not a multiaddr", 400, "must start with `/`"),
        ("/ip4/127.0.0.1/tcp/1/p2p/" + OTHER_PEER_ID, 500,
         f"Error occurred in queryFut.read() [PEER_DIAL_FAILURE: {OTHER_PEER_ID}]"),
        (host + "/p2p/" + OTHER_PEER_ID, 500,  # a node there, but another peer id
         f"Error occurred in queryFut.read() [PEER_DIAL_FAILURE: {OTHER_PEER_ID}]"),
    ]  # fmt: skip
    for peer, status, text in cases:
        got, body = await _get(http, peerAddr=peer, pubsubTopic=PUBSUB)
        assert (got, text in body) == (status, True), (peer, got, body)
    # the other parameters are checked first, as nwaku does
    got, body = await _get(http, peerAddr=truncated, pageSize="ten")
    assert got == 400 and body.startswith("page size parsing error"), body


async def test_a_refusing_peer_is_nwakus_429(tmp_path) -> None:
    local = await _service(tmp_path / "local", 0)
    remote = await _service(tmp_path / "remote", 10, {
        "listen": ["/ip4/127.0.0.1/tcp/0"], "shards": [32], "requests_per_second": 0.01,
        "request_burst": 1, "address_requests_per_second": 0.01,
    })  # fmt: skip
    try:
        async with aiohttp.ClientSession(f"http://127.0.0.1:{local.rest_port}") as http:
            answers = [await _get(http, peerAddr=remote.p2p.multiaddrs[0]) for _ in range(3)]
    finally:
        await local.stop()
        await remote.stop()
    assert answers[0][0] == 200
    assert (429, "Request rate limit reached\n") in answers[1:], answers


async def test_a_silent_peer_is_nwakus_timeout_and_a_transportless_one_a_400(pair) -> None:
    """A peer that accepts the connection and then says nothing (a black hole, as a stalled
    node behaves): 500 and nwaku's timeout text after its 5 s, not a hang; an address with
    no TCP: nwaku's 'no supported transport' 400 before any dial."""
    import socket
    import time

    http, _, _ = pair
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen()
        port = silent.getsockname()[1]
        started = time.monotonic()
        got, body = await _get(
            http, peerAddr=f"/ip4/127.0.0.1/tcp/{port}/p2p/{OTHER_PEER_ID}", pubsubTopic=PUBSUB
        )
        took = time.monotonic() - started
    assert (got, body) == (500, "No history response received (timeout)\n")
    assert 4.5 <= took < 10, took
    got, body = await _get(http, peerAddr=f"/ip4/127.0.0.1/udp/9/p2p/{OTHER_PEER_ID}")
    assert got == 400 and body.startswith("Failed parsing remote peer info: "), body
    assert "no supported transport found" in body, body
