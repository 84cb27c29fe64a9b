"""The bridge's nwaku-compatible REST store API over real loopback HTTP: the published
OpenAPI shapes, nwaku's defaults and limits, cursor paging (every message exactly once in
both directions), the legacy API, and bad input answered with the right 4xx and a reason."""

from __future__ import annotations

import base64
import contextlib
import hashlib
import json
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import pytest

from tests.bridge.support import (
    ADMIN_TOKEN,
    CONTENT,
    HEALTH_REPORT,
    LEGACY_STORE_RESPONSE,
    OTHER_PUBSUB,
    PUBSUB,
    SPEC_STORE_QUERY_RESPONSE,
    WAKU_INFO,
    bridge_config,
    deployed_store_response,
    make_rows,
    order,
    validate,
)
from tests.helpers import fresh_database
from waku_legacy.bridge.service import BridgeService
from waku_legacy.store import StoredMessage, open_store

pytestmark = pytest.mark.network
N = 2500


def sqlite_store_of(folder: Path, count: int) -> tuple[Path, list[StoredMessage]]:
    """A SQLite store file in ``folder`` holding ``make_rows(count)``, and the rows."""
    path = folder / "store.sqlite3"
    rows = make_rows(count)
    with open_store(f"sqlite:///{path}") as store:
        store.insert_messages(rows)
    return path, rows


@contextlib.asynccontextmanager
async def serving(
    tmp_path: Path, store_url: str
) -> AsyncIterator[tuple[BridgeService, aiohttp.ClientSession]]:
    """The bridge serving ``store_url``, and an HTTP session on its REST port."""
    service = BridgeService(bridge_config(tmp_path, store_url))
    await service.start()
    try:
        async with aiohttp.ClientSession(f"http://127.0.0.1:{service.rest_port}") as http:
            yield service, http
    finally:
        await service.stop()


@pytest.fixture(scope="module")
def store_file(tmp_path_factory):
    return sqlite_store_of(tmp_path_factory.mktemp("rest"), N)


@pytest.fixture
async def bridge(store_file, tmp_path):
    path, rows = store_file
    # Memory-mapped reads (what deploy/bridge.example.toml configures).
    async with serving(tmp_path, f"sqlite:///{path}?mmap_size=67108864") as (service, http):
        yield service, http, rows


async def _get(http, path, **params):
    async with http.get(path, params=params) as response:
        body = await response.read()
        return response.status, response.headers.get("Content-Type", ""), body


async def _page_all(http, ascending: bool, page_size: int = 100, **params) -> list[dict]:
    got, cursor, pages = [], None, 0
    while True:
        query = dict(params, pageSize=str(page_size), ascending=str(ascending).lower(),
                     includeData="true")  # fmt: skip
        if cursor:
            query["cursor"] = cursor
        status, _, body = await _get(http, "/store/v3/messages", **query)
        assert status == 200, body
        doc = json.loads(body)
        validate(doc, deployed_store_response(True))
        timestamps = [(m["message"]["timestamp"], m["messageHash"]) for m in doc["messages"]]
        assert timestamps == sorted(timestamps), "each page is chronological"
        got.append(doc["messages"])
        pages += 1
        cursor = doc.get("paginationCursor")
        if cursor is None:
            return got
        assert cursor == doc["messages"][-1 if ascending else 0]["messageHash"]
        assert pages < 10_000


# -- shapes -------------------------------------------------------------------------------------


async def test_responses_validate_against_the_published_openapi_shapes(bridge):
    _service, http, rows = bridge
    for include in ("true", "false"):
        status, ctype, body = await _get(http, "/store/v3/messages", includeData=include,
                                         pageSize="5", pubsubTopic=PUBSUB)  # fmt: skip
        assert status == 200 and ctype.startswith("application/json")
        doc = json.loads(body)
        validate(doc, deployed_store_response(include == "true"))
        assert doc["statusCode"] == 200 and doc["statusDesc"] == "OK"
        assert len(doc["messages"]) == 5 and "paginationCursor" in doc
    # The spec's own schema, with only the key name nwaku deploys swapped in.
    spec_view = dict(doc_with_data := json.loads((await _get(
        http, "/store/v3/messages", includeData="true", pageSize="3"))[2]))  # fmt: skip
    spec_view["messages"] = [
        {"message_hash": m["messageHash"], "message": m["message"]}
        for m in doc_with_data["messages"]
    ]
    validate(spec_view, SPEC_STORE_QUERY_RESPONSE)
    # Default: includeData=false (nwaku), so entries carry only the hash.
    doc = json.loads((await _get(http, "/store/v3/messages"))[2])
    assert all(list(m) == ["messageHash"] for m in doc["messages"])
    assert len(doc["messages"]) == 20  # DefaultPageSize
    # Messages and hashes are the stored ones, byte for byte.
    by_hash = {r.message_hash: r for r in rows}
    for entry in doc_with_data["messages"]:
        row = by_hash[bytes.fromhex(entry["messageHash"][2:])]
        assert base64.b64decode(entry["message"]["payload"]) == row.payload
        assert entry["pubsubTopic"] == row.pubsub_topic
        assert entry["message"]["timestamp"] == row.timestamp
        assert base64.b64decode(entry["message"].get("meta", "")) == (row.meta or b"")


async def test_health_info_version_metrics(bridge):
    service, http, _ = bridge
    status, _, body = await _get(http, "/health")
    assert status == 200
    validate(json.loads(body), HEALTH_REPORT)
    assert json.loads(body)["nodeHealth"] == "READY"
    status, _, body = await _get(http, "/debug/v1/info")
    info = json.loads(body)
    validate(info, WAKU_INFO)
    assert info["listenAddresses"][0] == f"http://127.0.0.1:{service.rest_port}"
    status, _, body = await _get(http, "/debug/v1/version")
    assert status == 200 and body.startswith(b"waku-legacy")
    await _get(http, "/store/v3/messages", pageSize="bad")
    status, ctype, body = await _get(http, "/metrics")
    assert status == 200 and ctype.startswith("text/plain")
    text = body.decode()
    assert "# TYPE waku_legacy_http_requests_total counter" in text
    assert (
        'waku_legacy_http_requests_total{route="/store/v3/messages",method="GET",status="400"} 1'
        in text
    )
    assert "waku_legacy_http_request_duration_seconds_bucket" in text
    for line in text.splitlines():  # every sample line is "name{labels} number"
        if line and not line.startswith("#"):
            float(line.rsplit(" ", 1)[1])


# -- paging -------------------------------------------------------------------------------------


@pytest.mark.parametrize("ascending", [True, False])
async def test_paging_returns_every_message_exactly_once(bridge, ascending):
    _, http, rows = bridge
    pages = await _page_all(http, ascending)
    hashes = [m["messageHash"] for page in pages for m in page]
    assert len(hashes) == len(set(hashes)) == N
    expected = ["0x" + r.message_hash.hex() for r in order(rows)]
    if ascending:
        assert hashes == expected
    else:  # pages come newest first; each page is chronological inside
        assert [h for page in reversed(pages) for h in (m["messageHash"] for m in page)] == expected
    assert all(len(p) == 100 for p in pages[:-1])


async def test_filtered_paging_with_small_pages_and_base64_cursors(bridge):
    _, http, rows = bridge
    topics = CONTENT[:2]
    start, end = rows[10].timestamp, rows[20].timestamp
    low, high = min(start, end), max(start, end)
    want = [
        r for r in order(rows)
        if r.pubsub_topic == PUBSUB and r.content_topic in topics and low <= r.timestamp <= high
    ]  # fmt: skip
    got, cursor = [], None
    while True:
        params = {"pubsubTopic": PUBSUB, "contentTopics": ",".join(topics), "startTime": str(low),
                  "endTime": str(high), "pageSize": "7", "includeData": "yes"}  # fmt: skip
        if cursor is not None:  # pre-0.35 clients send base64; '+' must survive the URL
            params["cursor"] = base64.b64encode(cursor).decode()
        doc = json.loads((await _get(http, "/store/v3/messages", **params))[2])
        got += [bytes.fromhex(m["messageHash"][2:]) for m in doc["messages"]]
        if "paginationCursor" not in doc:
            break
        cursor = bytes.fromhex(doc["paginationCursor"][2:])
    assert got == [r.message_hash for r in want] and want


async def test_hashes_lookup_and_page_size_clamp(bridge):
    _, http, rows = bridge
    picks = rows[:3]
    doc = json.loads((await _get(
        http, "/store/v3/messages", includeData="true",
        hashes=",".join("0x" + r.message_hash.hex() for r in picks)))[2])  # fmt: skip
    assert {m["messageHash"] for m in doc["messages"]} == {
        "0x" + r.message_hash.hex() for r in picks
    }
    # nwaku clamps a page size above 100 to 100 (MaxPageSize) rather than refusing it.
    doc = json.loads((await _get(http, "/store/v3/messages", pageSize="1000"))[2])
    assert len(doc["messages"]) == 100 and "paginationCursor" in doc
    doc = json.loads((await _get(http, "/store/v3/messages", pageSize="0"))[2])
    assert len(doc["messages"]) == 20
    # a truncated peer id in peerAddr is nwaku's 400, not an answer from this store
    # (a peer that is there: test_store_rest_server_peer_addr.py)
    status, _, body = await _get(
        http, "/store/v3/messages", peerAddr="/ip4/127.0.0.1/tcp/60001/p2p/16Uiu2HAmVFX"
    )
    assert status == 400 and body.startswith(b"Failed parsing remote peer info: "), body


async def test_legacy_store_api_pages_with_its_cursor(bridge):
    _, http, rows = bridge
    want = [r for r in order(rows) if r.pubsub_topic == OTHER_PUBSUB]
    got, cursor = [], None
    while True:
        params = {"pubsubTopic": OTHER_PUBSUB, "pageSize": "50"}
        if cursor:
            params.update(senderTime=str(cursor["senderTime"]), storeTime=str(cursor["storeTime"]),
                          digest=cursor["digest"]["data"])  # fmt: skip
        status, _, body = await _get(http, "/store/v1/messages", **params)
        assert status == 200, body
        doc = json.loads(body)
        validate(doc, LEGACY_STORE_RESPONSE)
        got += [(base64.b64decode(m["payload"]), m["timestamp"]) for m in doc["messages"]]
        cursor = doc.get("cursor")
        if cursor is None:
            break
        last = doc["messages"][-1]
        digest = hashlib.sha256(last["contentTopic"].encode() + base64.b64decode(last["payload"]))
        assert base64.b64decode(cursor["digest"]["data"]) == digest.digest()
    assert got == [(r.payload, r.timestamp) for r in want]


# -- bad input ----------------------------------------------------------------------------------


# 400s with nwaku's own texts (the cases nwaku answers otherwise are in
# test_store_rest_server_nwaku_edges.py).
BAD_QUERIES = [
    ({"pageSize": "ten"}, "page size parsing error: invalid integer: ten"),
    ({"pageSize": "1" + "0" * 30}, "page size parsing error: Parsed integer outside of valid"),
    ({"startTime": "yesterday"}, "time parsing error: invalid integer: yesterday"),
    ({"endTime": "1.5e18"}, "time parsing error: invalid integer: 1.5e18"),
    ({"includeData": "perhaps"}, "include data parsing error: cannot interpret as a bool"),
    ({"cursor": "0x1234"}, "waku message hash parsing error: invalid hash length: 2"),
    ({"cursor": "not*a*cursor"}, "Exception converting hex string to bytes: n is not a hex"),
    ({"hashes": "0xzz"}, "Exception converting hex string to bytes: z is not a hexadecimal"),
    ({"peerAddr": "not a multiaddr"}, "Failed parsing remote peer info: MultiAddress.init "
     "[multiaddress: Invalid MultiAddress, must start with `/`]"),
]


@pytest.mark.parametrize("params, reason", BAD_QUERIES)
async def test_bad_queries_get_400_with_a_reason(bridge, params, reason):
    _, http, _ = bridge
    status, ctype, body = await _get(http, "/store/v3/messages", **params)
    assert status == 400, body
    assert ctype.startswith("text/plain")
    assert reason in body.decode(), body
    assert b"Traceback" not in body


async def test_protocol_level_errors(bridge):
    _, http, _ = bridge
    async with http.get("/store/v3/messages?pageSize=5&pageSize=6") as response:
        assert response.status == 400 and "given 2 times" in await response.text()
    status, _, body = await _get(http, "/store/v1/messages", digest="%%%")
    assert status == 400 and b"'digest'" in body
    status, _, body = await _get(http, "/nowhere")
    assert status == 404 and b"no such endpoint" in body
    async with http.post("/store/v3/messages") as response:
        assert response.status == 405 and "GET" in response.headers["Allow"]


async def test_internal_errors_never_leak_a_traceback(bridge, monkeypatch):
    _service, http, _ = bridge
    import waku_legacy.bridge.http_api as http_api

    def boom(*args, **kwargs):
        raise RuntimeError("secret internals /etc/passwd")

    monkeypatch.setattr(http_api, "run_v3_query", boom)
    status, _ctype, body = await _get(http, "/store/v3/messages")
    assert status == 500 and body == b"internal error\n"
    status, _, _ = await _get(http, "/health")  # and the service keeps serving
    assert status == 200


async def test_admin_endpoints_need_the_bearer_token(bridge):
    _, http, _ = bridge
    async with http.get("/admin/v1/communities") as response:
        assert response.status == 401
        assert response.headers["WWW-Authenticate"].startswith("Bearer")
        assert "Authorization: Bearer" in await response.text()
    bad = {"Authorization": "Bearer wrong-token-wrong-token"}
    async with http.get("/admin/v1/communities", headers=bad) as response:
        assert response.status == 403 and "wrong admin token" in await response.text()
    async with http.post("/admin/v1/archive", headers=bad) as response:
        assert response.status == 403
    good = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
    async with http.get("/admin/v1/communities", headers=good) as response:
        assert response.status == 200 and await response.json() == {"communities": []}
    async with http.get("/admin/v1/communities/0x12/archives", headers=good) as response:
        assert response.status == 400 and "bad community id" in await response.text()


def test_bad_mmap_size_is_a_store_error(tmp_path):
    from waku_legacy.store import StoreError

    with pytest.raises(StoreError, match="mmap_size must be a byte count"):
        open_store(f"sqlite:///{tmp_path}/x.sqlite3?mmap_size=lots")


@pytest.mark.postgres
async def test_rest_over_postgresql(postgres_dsn, tmp_path):
    with fresh_database(postgres_dsn, "br_") as url:
        rows = make_rows(300, seed=3)
        with open_store(url) as store:
            store.insert_messages(rows)
        service = BridgeService(bridge_config(tmp_path, url))
        await service.start()
        try:
            async with aiohttp.ClientSession(f"http://127.0.0.1:{service.rest_port}") as http:
                for ascending in (True, False):
                    pages = await _page_all(http, ascending, page_size=33)
                    assert sorted(m["messageHash"] for p in pages for m in p) == sorted(
                        "0x" + r.message_hash.hex() for r in rows
                    )
        finally:
            await service.stop()
