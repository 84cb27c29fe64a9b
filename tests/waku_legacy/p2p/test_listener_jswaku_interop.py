"""A real Waku v2 client reads the bridge's store over libp2p: js-waku's LightNode (npm
``@waku/sdk`` 0.0.36, run under the Node 22 the npm registry ships, both installed by
``scripts/setup-js-interop.sh`` from ``tests/interop/js/package-lock.json``) dials the
bridge's WebSocket listener on loopback (Noise, mplex, identify, metadata), is accepted by
the sdk as a store peer for a community shard, pages through content topics with the sdk's
own Store API and gets every message exactly once, in the REST API's order and with the
REST API's hashes (which the client recomputes from the bodies it received); a hash-only
query (``include_data=false``) gives every hash with its pubsub topic, and a by-hash fetch
through the sdk returns their bodies. ``tests/interop/js/query_store.mjs`` is the client."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import os
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from tests.bridge.support import CONTENT, OTHER_PUBSUB, PUBSUB, bridge_config, make_rows
from tests.conftest import REPO_ROOT
from waku_legacy.bridge.service import BridgeService
from waku_legacy.store import StoredMessage, open_store

pytestmark = pytest.mark.network

ROOT = REPO_ROOT
CLIENT = ROOT / "tests" / "interop" / "js" / "query_store.mjs"
N = 400  # 320 on shard 128, 80 on shard 32, four content topics, many timestamp ties
PAGE = 25
CLIENT_TIMEOUT = 45.0


@pytest.fixture(scope="module")
def rows(tmp_path_factory) -> tuple[Path, list[StoredMessage]]:
    path = tmp_path_factory.mktemp("jswaku") / "store.sqlite3"
    messages = make_rows(N)
    with open_store(f"sqlite:///{path}") as store:
        store.insert_messages(messages)
    return path, messages


@contextlib.asynccontextmanager
async def serving(
    rows: tuple[Path, list[StoredMessage]], tmp_path: Path, **libp2p: Any
) -> AsyncIterator[tuple[str, aiohttp.ClientSession, list[StoredMessage]]]:
    """The bridge with its libp2p listener on loopback WebSocket: (its announced WS
    multiaddr, an HTTP session on its REST port, the stored rows)."""
    path, messages = rows
    config = bridge_config(
        tmp_path,
        f"sqlite:///{path}",
        libp2p={
            "listen": ["/ip4/127.0.0.1/tcp/0/ws"],
            "key_file": str(tmp_path / "libp2p.key"),
            "cluster_id": 16,
            "shards": [32, 128],
            **libp2p,
        },
    )
    service = BridgeService(config)
    await service.start()
    try:
        async with aiohttp.ClientSession(f"http://127.0.0.1:{service.rest_port}") as http:
            yield _ws_multiaddr(await _json(http, "/debug/v1/info")), http, messages
    finally:
        await service.stop()


@pytest.fixture
async def bridge(rows, tmp_path):
    async with serving(rows, tmp_path) as served:
        yield served


def _ws_multiaddr(info: dict[str, Any]) -> str:
    """The WebSocket multiaddr (with /p2p/<peer id>) the bridge announces."""
    found = [a for a in info["listenAddresses"] if "/ws/p2p/" in a]
    assert found, f"no WebSocket libp2p address announced: {info['listenAddresses']}"
    return found[0]


async def _json(http: aiohttp.ClientSession, path: str, **params: str) -> Any:
    async with http.get(path, params=params) as response:
        assert response.status == 200, await response.text()
        return await response.json()


async def _rest_pages(
    http, pubsub: str, topics: list[str], ascending: bool = True
) -> list[list[dict[str, Any]]]:
    """The REST API's pages for the same query (includeData, PAGE per page)."""
    pages: list[list[dict[str, Any]]] = []
    cursor = None
    while True:
        params = {"pubsubTopic": pubsub, "contentTopics": ",".join(topics),
                  "pageSize": str(PAGE), "ascending": str(ascending).lower(),
                  "includeData": "true"}  # fmt: skip
        if cursor:
            params["cursor"] = cursor
        doc = await _json(http, "/store/v3/messages", **params)
        pages.append(doc["messages"])
        cursor = doc.get("paginationCursor")
        if cursor is None:
            return pages


async def _client(
    node: str,
    addr: str,
    pubsub: str,
    topics: list[str],
    mode: str,
    direction: str = "forward",
    delay_ms: int = 0,
    connect: str = "dial",
):
    """Run the js-waku client; (exit code, JSON lines, stderr)."""
    env = {k: v for k, v in os.environ.items() if k not in ("NODE_ENV", "NODE_OPTIONS", "DEBUG")}
    proc = await asyncio.create_subprocess_exec(
        node, str(CLIENT), "--addr", addr, "--cluster", "16", "--pubsub", pubsub,
        "--content", ",".join(topics), "--page-size", str(PAGE), "--mode", mode,
        "--direction", direction, "--timeout-ms", "15000", "--delay-ms", str(delay_ms),
        "--connect", connect,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, env=env,
    )  # fmt: skip
    try:
        out, err = await asyncio.wait_for(proc.communicate(), CLIENT_TIMEOUT)
    except TimeoutError:
        proc.kill()
        await proc.wait()
        pytest.fail(f"the js-waku client did not finish in {CLIENT_TIMEOUT} s")
    lines = [json.loads(line) for line in out.decode().splitlines() if line.strip()]
    return proc.returncode, lines, err.decode()


def _expected(rows: list[StoredMessage], pubsub: str, topics: list[str]) -> list[StoredMessage]:
    chosen = [r for r in rows if r.pubsub_topic == pubsub and r.content_topic in topics]
    return sorted(chosen, key=lambda r: (r.timestamp, r.message_hash))


def _check_body(got: dict[str, Any], row: StoredMessage) -> None:
    """A message as js-waku decoded it is the stored one, byte for byte."""
    assert got["pubsubTopic"] == row.pubsub_topic
    assert got["contentTopic"] == row.content_topic
    assert base64.b64decode(got["payload"]) == row.payload
    assert int(got["timestamp"]) == row.timestamp
    assert got["version"] == row.version


def _peer_line(lines: list[dict[str, Any]], addr: str) -> None:
    peer = lines[0]
    assert peer["kind"] == "peer" and addr.endswith("/p2p/" + peer["peerId"])
    assert "/vac/waku/store-query/3.0.0" in peer["protocols"]  # from identify
    assert peer["shardInfo"] == {"clusterId": 16, "shards": [32, 128]}  # from metadata


@pytest.mark.parametrize("direction", ["forward", "backward"])
async def test_jswaku_pages_a_community_shard_exactly_once_with_rest_hashes(
    node_bin, bridge, direction
):
    addr, http, rows = bridge
    topics = CONTENT[:3]
    code, lines, err = await _client(node_bin, addr, PUBSUB, topics, "pages", direction)
    assert code == 0, err
    _peer_line(lines, addr)
    pages = [line["messages"] for line in lines if line["kind"] == "page"]
    count = sum(map(len, pages))
    assert lines[-1] == {"kind": "done", "mode": "pages", "pages": len(pages),
                         "messages": count, "distinct": count}  # fmt: skip
    expected = _expected(rows, PUBSUB, topics)
    assert len(expected) > 5 * PAGE  # several pages, timestamp ties across page borders
    # Backward: the newest page first, each page itself chronological (nwaku, REST).
    got = [m for page in (pages if direction == "forward" else pages[::-1]) for m in page]
    # Every message exactly once, in the store's order; js-waku's hashes (computed from the
    # bodies it received) are the stored ones.
    assert [m["hash"] for m in got] == [r.message_hash.hex() for r in expected]
    for message, row in zip(got, expected, strict=True):
        _check_body(message, row)
    # The same pages, hashes and bodies as the REST API gives for the same query.
    rest = await _rest_pages(http, PUBSUB, topics, ascending=direction == "forward")
    assert [[m["hash"] for m in page] for page in pages] == [
        [m["messageHash"][2:] for m in page] for page in rest if page
    ]
    rest_payloads = [[m["message"]["payload"] for m in page] for page in rest if page]
    assert [[m["payload"] for m in page] for page in pages] == rest_payloads


async def test_jswaku_hash_only_query_then_fetch_by_hash(node_bin, bridge):
    addr, http, rows = bridge
    topics = [CONTENT[1], CONTENT[3]]
    # Connected the way a web app names its store node: createLightNode({store: {peers}}).
    code, lines, err = await _client(
        node_bin, addr, OTHER_PUBSUB, topics, "hashes", connect="config"
    )
    assert code == 0, err
    _peer_line(lines, addr)
    expected = _expected(rows, OTHER_PUBSUB, topics)
    hash_pages = [line for line in lines if line["kind"] == "hash-page"]
    entries = [e for page in hash_pages for e in page["entries"]]
    assert all(page["statusCode"] == 200 for page in hash_pages)
    assert len(hash_pages) == -(-len(expected) // PAGE) > 1
    # Hash-only: every hash once, each with its pubsub topic, no bodies (checked by the client).
    assert entries == [
        {"hash": r.message_hash.hex(), "pubsubTopic": OTHER_PUBSUB} for r in expected
    ]
    rest = await _rest_pages(http, OTHER_PUBSUB, topics)
    assert [e["hash"] for e in entries] == [m["messageHash"][2:] for p in rest for m in p]
    # By hash through the sdk's Store API: the bodies, with their pubsub topics.
    fetched = next(line for line in lines if line["kind"] == "fetched")["messages"]
    by_hash = {r.message_hash.hex(): r for r in expected}
    assert sorted(m["hash"] for m in fetched) == sorted(by_hash)
    for message in fetched:
        _check_body(message, by_hash[message["hash"]])
    assert lines[-1]["kind"] == "done" and lines[-1]["fetched"] == len(expected)


async def test_jswaku_refuses_the_bridge_for_a_shard_it_does_not_announce(node_bin, bridge):
    """The metadata answer is what js-waku selects store peers by: a shard outside the
    bridge's announced shards gets no store peer, before any store query is sent."""
    addr, _http, _rows = bridge
    code, lines, err = await _client(node_bin, addr, "/waku/2/rs/16/200", CONTENT[:1], "pages")
    assert code == 1
    assert "does not select" in err and "/waku/2/rs/16/200" in err, err
    assert [line["kind"] for line in lines] == ["peer"]


async def test_jswaku_queries_after_the_bridge_timed_out_its_idle_pre_opened_streams(
    node_bin, rows, tmp_path, caplog
):
    """js-waku opens a store stream as soon as identify lists the codec and leaves it idle
    until the app queries; the bridge resets a stream that sends no request within
    read_timeout. A query made after that still gets every message (js-waku sees the reset
    stream and opens a new one)."""
    async with serving(rows, tmp_path, read_timeout="1s") as (
        addr, _http, messages,
    ):  # fmt: skip
        topics = CONTENT[:2]
        code, lines, err = await _client(node_bin, addr, PUBSUB, topics, "pages", delay_ms=3000)
    assert code == 0, err
    assert any("stream timeout" in r.getMessage() for r in caplog.records)  # it did reset
    got = [m["hash"] for line in lines if line["kind"] == "page" for m in line["messages"]]
    assert got == [r.message_hash.hex() for r in _expected(messages, PUBSUB, topics)]
