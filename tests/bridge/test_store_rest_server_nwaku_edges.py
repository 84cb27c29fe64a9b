"""The bridge's REST answers on edge cases are a current nwaku's (read at nwaku 7d1c6ab,
v0.37.x; the table in docs/compat/nwaku-rest.md cites the files): unknown or
malformed topics, negative or huge page sizes, cursors that point nowhere, bad hashes, an
over-long request head, and the ``/health`` document. Real service, real loopback HTTP."""

from __future__ import annotations

import asyncio
import json

import aiohttp
import pytest

from tests.bridge.support import HEALTH_REPORT, validate
from tests.bridge.test_store_rest_server import serving, sqlite_store_of

pytestmark = pytest.mark.network
N = 400
ARCHIVE = "error in handleSelfStoreRequest: BAD_RESPONSE: archive error: "


@pytest.fixture(scope="module")
def store_file(tmp_path_factory):
    return sqlite_store_of(tmp_path_factory.mktemp("edges"), N)


@pytest.fixture
async def bridge(store_file, tmp_path):
    path, rows = store_file
    async with serving(tmp_path, f"sqlite:///{path}") as (service, http):
        yield service, http, rows


async def _get(http, path="/store/v3/messages", **params):
    async with http.get(path, params=params) as response:
        return response.status, (await response.read()).decode()


async def _doc(http, path="/store/v3/messages", **params):
    status, body = await _get(http, path, **params)
    assert status == 200, body
    return json.loads(body)


def _text(body: str) -> str:
    return body.rstrip("\n")


# -- topics: nwaku does not check them; an unknown or malformed one matches nothing ------


@pytest.mark.parametrize(
    "params",
    [
        {"pubsubTopic": "/waku/2/rs/99/7"},  # well-formed, unknown
        {"pubsubTopic": "my pubsub topic"},
        {"pubsubTopic": "/waku/2/rs/16/064"},
        {"contentTopics": "not-a-topic"},
        {"contentTopics": "/app/1/nothing/proto"},
    ],
)
async def test_unknown_or_malformed_topics_are_200_with_no_messages(bridge, params):
    _, http, _ = bridge
    for path in ("/store/v3/messages", "/store/v1/messages"):
        doc = await _doc(http, path, **params)
        assert doc["messages"] == [], (path, doc)


async def test_over_10_content_topics_only_refused_with_a_cursor_as_nwaku_does(bridge):
    _, http, _ = bridge
    topics = ",".join(f"/app/1/t{i}/proto" for i in range(11))
    assert (await _doc(http, contentTopics=topics))["messages"] == []
    cursor = (await _doc(http, pageSize="5"))["paginationCursor"]
    status, body = await _get(http, contentTopics=topics, cursor=cursor)
    assert status == 500 and _text(body) == ARCHIVE + "INVALID_QUERY: too many content topics"


# -- page sizes -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "size, count",
    [("-5", 100), ("-1", 100), ("0", 20), ("", 20), ("1000", 100), ("+7", 7), ("1_0", 10)],
)
async def test_page_sizes_as_nwaku_reads_them(bridge, size, count):
    _, http, _ = bridge
    doc = await _doc(http, pageSize=size)
    assert len(doc["messages"]) == count and "paginationCursor" in doc


@pytest.mark.parametrize(
    "params, status, text",
    [
        ({"pageSize": "1" + "0" * 30},
         400, "page size parsing error: Parsed integer outside of valid range"),
        ({"pageSize": "9223372036854775808"},
         400, "page size parsing error: Parsed integer outside of valid range"),
        ({"pageSize": "ten"}, 400, "page size parsing error: invalid integer: ten"),
        ({"pageSize": " 5"}, 400, "page size parsing error: invalid integer:  5"),
        ({"startTime": "soon"}, 400, "time parsing error: invalid integer: soon"),
        ({"includeData": "perhaps"},
         400, "include data parsing error: cannot interpret as a bool: perhaps"),
    ],
)  # fmt: skip
async def test_parse_errors_are_nwakus_400s(bridge, params, status, text):
    _, http, _ = bridge
    got_status, body = await _get(http, **params)
    assert (got_status, _text(body)) == (status, text)


async def test_legacy_parse_errors_are_nwakus_400s(bridge):
    _, http, _ = bridge
    status, body = await _get(http, "/store/v1/messages", pageSize="ten")
    assert (status, _text(body)) == (400, "Problem parsing page size [invalid integer: ten]")
    status, body = await _get(http, "/store/v1/messages", startTime="x")
    assert (status, _text(body)) == (400, "Problem parsing time [invalid integer: x]")
    assert len((await _doc(http, "/store/v1/messages", pageSize="-3"))["messages"]) == 100


async def test_ascending_other_than_true_is_descending_and_include_data_is_parse_bool(bridge):
    _, http, _ = bridge
    def page(doc):
        return doc["messages"], doc["paginationCursor"]

    descending = page(await _doc(http, ascending="false", pageSize="10"))
    assert descending != page(await _doc(http, ascending="true", pageSize="10"))
    for value in ("maybe", "TRUE", "1"):
        assert page(await _doc(http, ascending=value, pageSize="10")) == descending
    for value in ("YES", "o_n", "1"):
        assert "message" in (await _doc(http, includeData=value, pageSize="1"))["messages"][0]
    for value in ("off", "N"):
        assert "message" not in (await _doc(http, includeData=value, pageSize="1"))["messages"][0]


# -- cursors and hashes ---------------------------------------------------------------------


async def test_cursors_that_point_nowhere_are_nwakus_500s(bridge):
    _, http, _ = bridge
    status, body = await _get(http, cursor="0x" + "00" * 32)
    assert status == 500 and _text(body) == ARCHIVE + "INVALID_QUERY: all zeroes cursor hash"
    status, body = await _get(http, cursor="0x" + "ab" * 32)
    assert status == 500 and _text(body) == ARCHIVE + "DRIVER_ERROR: cursor not found"
    status, body = await _get(http, "/health")  # and the service keeps serving
    assert status == 200


@pytest.mark.parametrize(
    "params, text",
    [
        ({"cursor": "0x1234"}, "waku message hash parsing error: invalid hash length: 2"),
        ({"cursor": "0x" + "ab" * 33}, "waku message hash parsing error: invalid hash length: 33"),
        ({"cursor": "0x123"}, "Exception converting hex string to bytes: hex string must have "
                              "even length"),
        ({"cursor": "not*a*cursor"},
         "Exception converting hex string to bytes: n is not a hexadecimal character"),
        ({"hashes": "0xzz"}, "Exception converting hex string to bytes: z is not a hexadecimal "
                             "character"),
        ({"hashes": "0x" + "11" * 32 + ",0x" + "22" * 16},
         "waku message hash parsing error: invalid hash length: 16"),
    ],
)  # fmt: skip
async def test_bad_hashes_are_nwakus_400s(bridge, params, text):
    _, http, _ = bridge
    status, body = await _get(http, **params)
    assert (status, _text(body)) == (400, text)


async def test_hash_lists_skip_empty_items_and_unknown_hashes_match_nothing(bridge):
    _, http, rows = bridge
    known = rows[3].message_hash.hex()
    doc = await _doc(http, hashes=f",0x{known},,{'cd' * 32},")
    assert [m["messageHash"] for m in doc["messages"]] == ["0x" + known]


# -- the request head -----------------------------------------------------------------------


async def _raw(port: int, target: str) -> tuple[int, bytes, bytes]:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(f"GET {target} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
    data = await asyncio.wait_for(reader.read(), 10)  # nwaku closes after a 431
    writer.close()
    head, _, body = data.partition(b"\r\n\r\n")
    return int(head.split(b" ", 2)[1]), head, body


async def test_a_request_head_over_64_kib_is_431_with_no_body_and_closed(bridge):
    service, _, _ = bridge
    long_topic = "/app/1/" + "x" * 70_000 + "/proto"
    status, _head, body = await _raw(
        service.rest_port, f"/store/v3/messages?contentTopics={long_topic}"
    )
    assert status == 431 and body == b""  # and closed: _raw read to the end of the stream
    # 20 KiB (aiohttp's default line limit is 8190): served, as nwaku serves it
    topic = "/app/1/" + "y" * 20_000 + "/proto"
    async with aiohttp.ClientSession() as http:
        url = f"http://127.0.0.1:{service.rest_port}/store/v3/messages?contentTopics={topic}"
        async with http.get(url) as response:
            assert response.status == 200 and (await response.json())["messages"] == []


# -- /health --------------------------------------------------------------------------------


async def test_health_is_nwakus_health_report(bridge):
    _, http, _ = bridge
    status, body = await _get(http, "/health")
    doc = json.loads(body)
    assert status == 200
    validate(doc, HEALTH_REPORT)
    assert doc == {"nodeHealth": "READY", "protocolsHealth": [{"Store": "READY"}]}


def test_health_document_states():
    from waku_legacy.bridge.http_api import health_document

    assert health_document("Initializing", [{"Store": "Initializing"}]) == (
        {"nodeHealth": "INITIALIZING", "protocolsHealth": [{"Store": "INITIALIZING"}]}, 200
    )  # nwaku answers 200 in every state
    assert health_document("Shutting Down", [])[0]["nodeHealth"] == "SHUTTING_DOWN"
    doc, status = health_document(
        "Degraded", [{"Store": "Ready"}, {"Archives": "Degraded: c: truncated"}]
    )
    assert status == 503 and doc == {
        "nodeHealth": "Degraded",
        "protocolsHealth": [
            {"Store": "READY"},
            {"Archives": "NOT_READY", "desc": "Degraded: c: truncated"},
        ],
    }
