"""The bridge's store over libp2p, with the project's own client (the issue's second client
stack: py-libp2p TCP or WebSocket, Noise, yamux or mplex, requests built from the published
protobufs in proto/): every page and hash the REST API gives for the same query, the
legacy store, hash-only queries, the announced multiaddrs, the CLI, and bad input (200
content topics, forged cursors, garbage bodies, oversize frames) answered with nwaku's
status codes or a reset stream while the listener keeps answering."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import pytest
import trio
from libp2p.crypto.secp256k1 import Secp256k1PublicKey
from libp2p.custom_types import TProtocol
from libp2p.network.stream.exceptions import StreamError
from libp2p.peer.id import ID
from multiaddr import Multiaddr

from tests.bridge.support import CONTENT, OTHER_PUBSUB, PUBSUB, bridge_config, make_rows, order
from tests.p2p_pylibp2p.client import P2PClient, request_once
from tests.p2p_pylibp2p.streams import encode_varint, read_frame
from waku_legacy.bridge.service import BridgeService
from waku_legacy.errors import ConfigError
from waku_legacy.identity.message_hash import deterministic_hash
from waku_legacy.p2p.enr import decode_enr, decode_multiaddrs, decode_relay_shards
from waku_legacy.p2p.errors import P2PError
from waku_legacy.p2p.store_client import (
    STORE_V3_CODEC,
    StoreQueryArgs,
    build_request,
    decode_response,
    query_pages,
)
from waku_legacy.proto import store_v2beta4_pb2
from waku_legacy.store import StoredMessage, open_store

pytestmark = pytest.mark.network
N = 600
LEGACY_CODEC = "/vac/waku/store/2.0.0-beta4"
RESET = (P2PError, StreamError)  # what a reader of a reset stream sees


@pytest.fixture(scope="module")
def rows(tmp_path_factory) -> tuple[Path, list[StoredMessage]]:
    folder = tmp_path_factory.mktemp("p2p-store")
    path = folder / "store.sqlite3"
    rows = make_rows(N)
    with open_store(f"sqlite:///{path}") as store:
        store.insert_messages(rows)
    return path, rows


@pytest.fixture
async def bridge(rows, tmp_path) -> AsyncIterator[tuple[BridgeService, aiohttp.ClientSession]]:
    """The bridge with ``[libp2p]`` on loopback TCP and /ws."""
    path, _ = rows
    libp2p = {
        "listen": ["/ip4/127.0.0.1/tcp/0", "/ip4/127.0.0.1/tcp/0/ws"],
        "shards": [32, 128],
        "read_timeout": 2,
        "max_streams_per_connection": 8,
        "requests_per_second": 1000,
        "address_requests_per_second": 1000,
        "request_burst": 1000,
    }
    service = BridgeService(bridge_config(tmp_path, f"sqlite:///{path}", libp2p=libp2p))
    await service.start()
    try:
        async with aiohttp.ClientSession(f"http://127.0.0.1:{service.rest_port}") as http:
            yield service, http
    finally:
        await service.stop()


def _addr(service: BridgeService, transport: str) -> str:
    addrs = service.p2p.multiaddrs
    return next(a for a in addrs if ("/ws/" in a) == (transport == "ws"))


async def _rest_pages(http, **params: str) -> list[dict]:
    pages, cursor = [], None
    while True:
        query = dict(params)
        if cursor:
            query["cursor"] = cursor
        async with http.get("/store/v3/messages", params=query) as response:
            assert response.status == 200
            doc = await response.json()
        pages.append(doc)
        cursor = doc.get("paginationCursor")
        if cursor is None:
            return pages


def _p2p_pages(address: str, muxer: str, args: StoreQueryArgs) -> list:
    async def main() -> list:
        async with P2PClient.dial(address, muxers=(muxer,)) as client:
            return [page async for page in query_pages(client, args, max_pages=1000)]

    return trio.run(main)


@pytest.mark.parametrize(
    ("transport", "muxer"), [("tcp", "yamux"), ("tcp", "mplex"), ("ws", "mplex"), ("ws", "yamux")]
)
async def test_pages_match_the_rest_api(rows, bridge, transport, muxer) -> None:
    service, http = bridge
    _, stored = rows
    topics = CONTENT[:2]
    for forward in (True, False):
        args = StoreQueryArgs(
            pubsub_topic=PUBSUB, content_topics=topics, page_size=37, forward=forward
        )
        pages = await asyncio.to_thread(_p2p_pages, _addr(service, transport), muxer, args)
        rest = await _rest_pages(
            http, pubsubTopic=PUBSUB, contentTopics=",".join(topics), pageSize="37",
            includeData="true", ascending=str(forward).lower(),
        )  # fmt: skip
        assert len(pages) == len(rest) > 2
        for page, doc in zip(pages, rest, strict=True):
            assert page.status_code == 200 and page.status_desc == "OK"
            assert page.request_id == args.request_id
            assert ["0x" + m.message_hash.hex() for m in page.messages] == [
                m["messageHash"] for m in doc["messages"]
            ]
            cursor = (
                "0x" + page.pagination_cursor.hex() if page.HasField("pagination_cursor") else None
            )
            assert cursor == doc.get("paginationCursor")
            for entry in page.messages:  # the body hashes to its key, with its pubsub topic
                m = entry.message
                assert entry.pubsub_topic == PUBSUB
                meta = m.meta if m.HasField("meta") else b""
                digest = deterministic_hash(PUBSUB, m.payload, m.content_topic, meta, m.timestamp)
                assert digest == entry.message_hash
        got = [m.message_hash for page in pages for m in page.messages]
        want = [
            r.message_hash
            for r in order(stored)
            if r.pubsub_topic == PUBSUB and r.content_topic in topics
        ]
        # every message exactly once; forward pages in the store's order end to end
        assert len(got) == len(set(got)) == len(want) and set(got) == set(want)
        if forward:
            assert got == want


async def test_hash_only_query_then_fetch_by_hash(rows, bridge) -> None:
    service, _ = bridge
    _, stored = rows
    address = _addr(service, "tcp")
    args = StoreQueryArgs(
        pubsub_topic=OTHER_PUBSUB, content_topics=[CONTENT[1]], include_data=False, page_size=20
    )
    pages = await asyncio.to_thread(_p2p_pages, address, "yamux", args)
    entries = [m for page in pages for m in page.messages]
    assert entries and all(not m.HasField("message") for m in entries)
    assert {m.pubsub_topic for m in entries} == {OTHER_PUBSUB}
    hashes = [m.message_hash for m in entries][:100]
    fetched = await asyncio.to_thread(
        _p2p_pages, address, "yamux", StoreQueryArgs(message_hashes=hashes, page_size=100)
    )
    by_hash = {r.message_hash: r for r in stored}
    bodies = [m for page in fetched for m in page.messages]
    assert sorted(m.message_hash for m in bodies) == sorted(hashes)
    for m in bodies:
        assert m.pubsub_topic == by_hash[m.message_hash].pubsub_topic
        assert m.message.payload == by_hash[m.message_hash].payload


async def test_legacy_store_pages_with_its_cursor(rows, bridge) -> None:
    service, _ = bridge
    _, stored = rows
    want = [r for r in order(stored) if r.pubsub_topic == OTHER_PUBSUB]

    async def main() -> list[tuple[bytes, int]]:
        got: list[tuple[bytes, int]] = []
        cursor = None
        async with P2PClient.dial(_addr(service, "tcp")) as client:
            for number in range(100):
                rpc = store_v2beta4_pb2.HistoryRPC(request_id=f"r{number}")
                rpc.query.pubsub_topic = OTHER_PUBSUB
                rpc.query.paging_info.page_size = 40
                rpc.query.paging_info.direction = store_v2beta4_pb2.PagingInfo.FORWARD
                if cursor is not None:
                    rpc.query.paging_info.cursor.CopyFrom(cursor)
                answer = store_v2beta4_pb2.HistoryRPC.FromString(
                    await client.request(LEGACY_CODEC, rpc.SerializeToString())
                )
                assert answer.request_id == f"r{number}"
                assert answer.response.error == store_v2beta4_pb2.HistoryResponse.NONE
                got += [(m.payload, m.timestamp) for m in answer.response.messages]
                if not answer.response.messages or not answer.response.paging_info.HasField(
                    "cursor"
                ):
                    break
                cursor = answer.response.paging_info.cursor
        return got

    got = await asyncio.to_thread(trio.run, main)
    assert got == [(r.payload, r.timestamp) for r in want]


async def test_announced_in_info_and_log(bridge, caplog) -> None:
    service, http = bridge
    async with http.get("/debug/v1/info") as response:
        info = await response.json()
    libp2p = info["libp2p"]
    assert libp2p["peerId"] == service.p2p.peer_id and libp2p["peerId"].startswith("16Uiu2")
    assert libp2p["clusterId"] == 16 and libp2p["shards"] == [32, 128]
    assert sorted(libp2p["multiaddrs"]) == sorted(service.p2p.multiaddrs)
    assert all(a.endswith("/p2p/" + libp2p["peerId"]) for a in libp2p["multiaddrs"])
    assert set(libp2p["multiaddrs"]) <= set(info["listenAddresses"])
    assert {("/ws/" in a) for a in libp2p["multiaddrs"]} == {True, False}
    assert sorted(libp2p["listening"]) == sorted(a.split("/p2p/")[0] for a in libp2p["multiaddrs"])
    # the ENR (31/WAKU2-ENR): the same key, the TCP address in ip/tcp, WS in multiaddrs
    record = decode_enr(info["enrUri"])
    tcp = next(a for a in libp2p["listening"] if "/ws" not in a)
    assert int.from_bytes(record.pairs["tcp"], "big") == int(tcp.rsplit("/", 1)[1])
    assert record.pairs["ip"] == bytes([127, 0, 0, 1])
    assert decode_relay_shards("rs", record.pairs["rs"]) == (16, [32, 128])
    assert (
        ID.from_pubkey(Secp256k1PublicKey.from_bytes(record.public_key)).to_base58()
        == libp2p["peerId"]
    )
    (ws,) = decode_multiaddrs(record.pairs["multiaddrs"])
    assert str(Multiaddr(ws)) in libp2p["listening"]


async def test_peer_id_persists_across_restarts(rows, tmp_path) -> None:
    path, _ = rows
    config = bridge_config(
        tmp_path, f"sqlite:///{path}", libp2p={"listen": ["/ip4/127.0.0.1/tcp/0"]}
    )
    ids = []
    for _ in range(2):
        service = BridgeService(config)
        await service.start()
        ids.append(service.p2p.peer_id)
        await service.stop()
        assert not service.p2p.running  # its sockets closed with the bridge
    assert ids[0] == ids[1]
    assert (tmp_path / "libp2p.key").stat().st_mode & 0o777 == 0o600


async def test_bad_input_then_still_answers(rows, bridge) -> None:
    service, _ = bridge
    address = _addr(service, "tcp")

    def ask(body: bytes):
        return decode_response(request_once(address, STORE_V3_CODEC, body))

    def normal() -> None:
        page = ask(build_request(StoreQueryArgs(pubsub_topic=PUBSUB, content_topics=[CONTENT[0]])))
        assert page.status_code == 200 and len(page.messages) > 0

    cases = [
        (  # 200 content topics: nwaku's archive refuses more than 10
            StoreQueryArgs(pubsub_topic=PUBSUB, content_topics=[f"/t/{i}/x" for i in range(200)]),
            300,
            "BAD_RESPONSE: archive error: INVALID_QUERY: too many content topics",
        ),
        (  # a cursor this store never handed out
            StoreQueryArgs(pubsub_topic=PUBSUB, content_topics=[CONTENT[0]], cursor=os.urandom(32)),
            300,
            "BAD_RESPONSE: archive error: DRIVER_ERROR: cursor not found",
        ),
        (
            StoreQueryArgs(pubsub_topic=PUBSUB, content_topics=[CONTENT[0]], cursor=bytes(32)),
            300,
            "BAD_RESPONSE: archive error: INVALID_QUERY: all zeroes cursor hash",
        ),
    ]
    for args, status, desc in cases:
        page = await asyncio.to_thread(ask, build_request(args))
        assert (page.status_code, page.status_desc, page.request_id) == (
            status,
            desc,
            args.request_id,
        )
        assert not page.messages
        await asyncio.to_thread(normal)
    garbage = await asyncio.to_thread(ask, b"\xff\xff\xff" + os.urandom(64))
    assert garbage.status_code == 400 and garbage.status_desc.startswith("decoding rpc failed")
    await asyncio.to_thread(normal)

    async def oversize_and_idle() -> None:
        async with P2PClient.dial(address) as client:
            stream = await client.host.new_stream(client.peer, [TProtocol(STORE_V3_CODEC)])
            await stream.write(encode_varint(100 * 1024 * 1024) + b"\x0a" * 1000)
            with pytest.raises(RESET), trio.fail_after(5):  # reset, never answered
                await read_frame(stream, 1 << 20)
            idle = [
                await client.host.new_stream(client.peer, [TProtocol(STORE_V3_CODEC)])
                for _ in range(8)
            ]
            await trio.sleep(3)  # read_timeout = 2 s
            for stream in idle:
                with pytest.raises(RESET):
                    await stream.write(b"\x00")
                    await read_frame(stream, 1024)

    await asyncio.to_thread(trio.run, oversize_and_idle)
    stats = service.p2p.stats()
    assert stats["request_too_large"] == 1 and stats["stream_timeout"] >= 8
    await asyncio.to_thread(normal)


async def test_cli_store_query(rows, bridge) -> None:
    service, http = bridge
    address = _addr(service, "ws")
    command = [
        sys.executable, "-m", "waku_legacy.cli", "store", "query", "--peer", address,
        "--pubsub-topic", PUBSUB, "--content-topic", CONTENT[3], "--page-size", "25",
        "--pages", "100", "--muxer", "mplex", "--json",
    ]  # fmt: skip
    done = await asyncio.to_thread(subprocess.run, command, capture_output=True, timeout=60)
    assert done.returncode == 0, done.stderr.decode()
    doc = json.loads(done.stdout)
    rest = await _rest_pages(
        http, pubsubTopic=PUBSUB, contentTopics=CONTENT[3], pageSize="25", includeData="true"
    )
    assert [[m["messageHash"] for m in p["messages"]] for p in doc["pages"]] == [
        [m["messageHash"] for m in p["messages"]] for p in rest
    ]
    assert {m["pubsubTopic"] for p in doc["pages"] for m in p["messages"]} == {PUBSUB}
    table = await asyncio.to_thread(
        subprocess.run,
        [*command[:-1], "--hashes-only"],
        capture_output=True,
        timeout=60,
    )
    assert table.returncode == 0 and b"page 1: status 200 OK" in table.stdout


OTHER_PEER_ID = "16Uiu2HAmPLe7Mzm8TsYUubgCAW1aJoeFScxrLj8ppHFivPo97bUZ"


async def test_cli_store_query_unreachable_or_wrong_peer_is_one_line(bridge) -> None:
    """Issue 24: an unreachable peer or a peer id that is not the node's own is one line
    with a hint and exit 2 (no py-libp2p log lines, no ExceptionGroup traceback, no 70)."""
    service, _ = bridge
    right = _addr(service, "tcp")
    wrong_id = right.rsplit("/p2p/", 1)[0] + "/p2p/" + OTHER_PEER_ID
    closed = "/ip4/127.0.0.1/tcp/1/p2p/" + OTHER_PEER_ID
    for peer in (closed, wrong_id):
        command = [
            sys.executable, "-m", "waku_legacy.cli", "store", "query", "--peer", peer,
            "--pubsub-topic", PUBSUB, "--timeout", "5",
        ]  # fmt: skip
        done = await asyncio.to_thread(subprocess.run, command, capture_output=True, timeout=60)
        err = done.stderr.decode()
        assert done.returncode == 2, err
        assert err.startswith("waku-legacy store: error: cannot connect to "), err
        assert err.count("\n") == 1 and "Traceback" not in err, err
        assert "peer id" in err, err


async def test_metrics_count_libp2p_events(bridge) -> None:
    service, http = bridge
    args = StoreQueryArgs(pubsub_topic=PUBSUB, content_topics=[CONTENT[0]], page_size=5)
    body = await asyncio.to_thread(
        request_once, _addr(service, "tcp"), STORE_V3_CODEC, build_request(args)
    )
    assert decode_response(body).status_code == 200
    async with http.get("/metrics") as response:
        text = await response.text()
    lines = [line for line in text.splitlines() if line.startswith("waku_legacy_libp2p_events{")]
    counts = {line.split('"')[1]: float(line.rsplit(" ", 1)[1]) for line in lines}
    assert counts["requests_answered"] >= 1 and counts["connections_accepted"] >= 1


async def test_health_reports_the_listener(bridge) -> None:
    service, http = bridge

    async def libp2p_health() -> dict:
        async with http.get("/health") as response:
            assert response.status == 200
            doc = await response.json()
        (entry,) = [e for e in doc["protocolsHealth"] if "Store (libp2p)" in e]
        return entry

    assert await libp2p_health() == {"Store (libp2p)": "READY"}
    for server in service.p2p._servers:  # its listening sockets close
        server.close()
    assert await libp2p_health() == {"Store (libp2p)": "NOT_READY", "desc": "Not Ready: stopped"}


async def test_a_second_bridge_on_the_same_port_is_refused(rows, tmp_path) -> None:
    """The listener binds a TCP-only port with SO_REUSEPORT: without the check a second
    bridge (another key) would share the port and take half the connections."""
    path, _ = rows
    first_dir, second_dir = tmp_path / "first", tmp_path / "second"
    first_dir.mkdir()
    second_dir.mkdir()
    tcp_only = {"listen": ["/ip4/127.0.0.1/tcp/0"]}
    first = BridgeService(bridge_config(first_dir, f"sqlite:///{path}", libp2p=tcp_only))
    await first.start()
    try:
        port = first.p2p.bound[0].rsplit("/", 1)[1]
        taken = {"listen": [f"/ip4/127.0.0.1/tcp/{port}"]}
        second = BridgeService(bridge_config(second_dir, f"sqlite:///{path}", libp2p=taken))
        with pytest.raises(ConfigError, match=f"tcp/{port}"):
            await second.start()
        await second.stop()
        assert first.p2p.running  # the first one is untouched and alone on the port
        args = StoreQueryArgs(pubsub_topic=PUBSUB, content_topics=[CONTENT[0]])
        for _ in range(4):
            body = await asyncio.to_thread(
                request_once, first.p2p.multiaddrs[0], STORE_V3_CODEC, build_request(args)
            )
            assert decode_response(body).status_code == 200
    finally:
        await first.stop()


async def test_paging_at_full_speed_is_not_rate_limited(rows, tmp_path) -> None:
    """A store v3 page's next page is free of the request budget for the peer it was
    answered to (as on the REST API): with a budget of 2 requests and no refill, one client
    pages through 600 messages twice, 20 a page; a third fresh query gets nwaku's 429."""
    path, stored = rows
    libp2p = {
        "listen": ["/ip4/127.0.0.1/tcp/0"],
        "shards": [32, 128],
        "requests_per_second": 0.001,
        "request_burst": 2,
    }
    service = BridgeService(bridge_config(tmp_path, f"sqlite:///{path}", libp2p=libp2p))
    await service.start()
    try:
        address = _addr(service, "tcp")
        args = StoreQueryArgs(pubsub_topic=PUBSUB, content_topics=CONTENT, page_size=20)
        expected = sorted(m.message_hash for m in stored if m.pubsub_topic == PUBSUB)

        def run() -> tuple[list, list, object]:
            async def main() -> tuple[list, list, object]:
                async with P2PClient.dial(address) as client:
                    first = [p async for p in query_pages(client, args, max_pages=1000)]
                    second = [p async for p in query_pages(client, args, max_pages=1000)]
                    third = [p async for p in query_pages(client, args, max_pages=1)]
                    return first, second, third[0]

            return trio.run(main)

        first, second, third = await asyncio.to_thread(run)
        for pages in (first, second):
            assert len(pages) >= len(expected) // 20
            assert all(page.status_code == 200 for page in pages)
            hashes = [m.message_hash for page in pages for m in page.messages]
            assert sorted(hashes) == expected and len(hashes) == len(set(hashes))
        assert third.status_code == 429
        assert service.p2p.stats()["request_rate_limited"] == 1
    finally:
        await service.stop()
