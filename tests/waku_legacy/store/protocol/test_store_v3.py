"""13/WAKU2-STORE v3 (/vac/waku/store-query/3.0.0) answered from the v2 store, sans-IO.

Requests are built two ways: with the generated classes and by hand from the field numbers
of the published proto (wire-facts §5: StoreQueryRequest{request_id=1, include_data=2,
pubsub_topic=10, content_topics=11, time_start=12, time_end=13, message_hashes=20,
pagination_cursor=51, pagination_forward=52, pagination_limit=53}); responses are read by
hand too (StoreQueryResponse{request_id=1, status_code=10, status_desc=11, messages=20,
pagination_cursor=51}, WakuMessageKeyValue{message_hash=1, message=2, pubsub_topic=3}).
Expected statuses and texts are nwaku's (7d1c6ab: waku_store/protocol.nim, common.nim,
node/kernel_api/store.nim toStoreResult, waku_archive/archive.nim findMessages).
"""

from __future__ import annotations

import hashlib
import json
import random
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests import pb_wire as w
from tests.helpers import filled_store
from tests.waku_legacy.store.support import expected_hashes
from waku_legacy.bridge.store_rest_server import parse_v3_query, run_v3_query
from waku_legacy.proto import store_v3_pb2
from waku_legacy.store import MessageStore, StoredMessage, StoreError, StoreQuery, open_store
from waku_legacy.store.protocol import (
    STORE_V3_CODEC,
    InternalError,
    StatusCode,
    answer_store_v3,
    serve_store_v3,
    store_v3_too_many_requests,
)
from waku_legacy.store.protocol.store_v3 import decode_request, request_cursor

PUBSUB = ["/waku/2/rs/16/128", "/waku/2/rs/16/32"]
TOPICS = [f"/waku/1/0x0000000{i}/rfc26" for i in range(4)]
T0 = 1_700_000_000_000_000_000


def reference_hash(pubsub: str, payload: bytes, content: str, meta: bytes, ts: int) -> bytes:
    """14/WAKU2-MESSAGE deterministic hash, written from the spec."""
    return hashlib.sha256(
        pubsub.encode() + payload + content.encode() + meta + ts.to_bytes(8, "big")
    ).digest()


def make_rows(n: int, seed: int = 7) -> list[StoredMessage]:
    rnd = random.Random(seed)
    rows = []
    for i in range(n):
        pubsub, topic = PUBSUB[i % 2], TOPICS[i % 4]
        ts = T0 + rnd.randrange(60) * 1_000_000_000  # many equal timestamps
        payload = b"p%d" % i
        meta = b"m%d" % i if i % 5 == 0 else None
        h = reference_hash(pubsub, payload, topic, meta or b"", ts)
        rows.append(StoredMessage(h, pubsub, topic, payload, 1, ts, meta))
    return rows


ROWS = make_rows(260)


@pytest.fixture(
    scope="module", params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]
)
def store(request: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[MessageStore]:
    """ROWS in a store (read only by the tests: one per module and backend)."""
    with filled_store(request, tmp_path_factory, ROWS, "sp3") as s:
        yield s


def hand_request(
    request_id: str | None = "r",
    *,
    include_data: bool = False,
    pubsub: str | None = None,
    topics: tuple[str, ...] = (),
    start: int | None = None,
    end: int | None = None,
    hashes: tuple[bytes, ...] = (),
    cursor: bytes | None = None,
    forward: bool = False,
    limit: int | None = None,
) -> bytes:
    out = b""
    if request_id is not None:
        out += w.field_bytes(1, request_id)
    if include_data:
        out += w.field_varint(2, 1)
    if pubsub is not None:
        out += w.field_bytes(10, pubsub)
    for t in topics:
        out += w.field_bytes(11, t)
    if start is not None:
        out += w.field_sint64(12, start)
    if end is not None:
        out += w.field_sint64(13, end)
    for h in hashes:
        out += w.field_bytes(20, h)
    if cursor is not None:
        out += w.field_bytes(51, cursor)
    if forward:
        out += w.field_varint(52, 1)
    if limit is not None:
        out += w.field_varint(53, limit)
    return out


@dataclass
class Entry:
    message_hash: bytes
    pubsub_topic: str | None
    message: bytes | None


@dataclass
class Response:
    request_id: bytes | None
    status: int | None
    desc: str | None
    entries: list[Entry]
    cursor: bytes | None


def read_response(body: bytes) -> Response:
    """A StoreQueryResponse read by field number (not with the generated classes)."""
    entries = []
    for raw in w.every(body, 20):
        topic = w.first(raw, 3)
        entries.append(
            Entry(w.first(raw, 1), None if topic is None else topic.decode(), w.first(raw, 2))
        )
    desc = w.first(body, 11)
    return Response(
        w.first(body, 1),
        w.first(body, 10),
        None if desc is None else desc.decode(),
        entries,
        w.first(body, 51),
    )


def page_through(store: MessageStore, **kw: Any) -> tuple[list[bytes], int]:
    """Every hash a paged protocol query returns, in the order a client sees them (pages
    in query order, each page chronological), and the number of pages."""
    seen: list[bytes] = []
    cursor = None
    pages = 0
    while True:
        resp = read_response(answer_store_v3(hand_request(cursor=cursor, **kw), store))
        assert (resp.status, resp.desc, resp.request_id) == (200, "OK", b"r")
        pages += 1
        got = [e.message_hash for e in resp.entries]
        assert len(got) <= (kw.get("limit") or 20)
        seen += got if kw.get("forward") else list(reversed(got))
        if resp.cursor is None:
            return seen, pages
        assert resp.cursor == (got[-1] if kw.get("forward") else got[0])
        cursor = resp.cursor


def rest_hashes(store: MessageStore, params: dict[str, str]) -> list[bytes]:
    seen: list[bytes] = []
    cursor: str | None = None
    while True:
        page_params = dict(params) | ({"cursor": cursor} if cursor else {})
        out: list[bytes | None] = []
        body = json.loads(run_v3_query(store, parse_v3_query(page_params), "x", cursor_out=out))
        hashes = [bytes.fromhex(m["messageHash"][2:]) for m in body["messages"]]
        seen += hashes if params.get("ascending") == "true" else list(reversed(hashes))
        if out[0] is None:
            return seen
        cursor = "0x" + out[0].hex()


def test_codec_names() -> None:
    assert STORE_V3_CODEC == "/vac/waku/store-query/3.0.0"


def test_hand_assembled_and_generated_requests_decode_alike() -> None:
    h1, h2 = ROWS[0].message_hash, ROWS[1].message_hash
    kw: dict[str, Any] = dict(
        include_data=True, pubsub=PUBSUB[0], topics=(TOPICS[0], TOPICS[1]), start=-5,
        end=T0, hashes=(h1, h2), cursor=ROWS[2].message_hash, forward=True, limit=33,
    )  # fmt: skip
    generated = store_v3_pb2.StoreQueryRequest(
        request_id="r", include_data=True, pubsub_topic=PUBSUB[0],
        content_topics=[TOPICS[0], TOPICS[1]], time_start=-5, time_end=T0,
        message_hashes=[h1, h2], pagination_cursor=ROWS[2].message_hash,
        pagination_forward=True, pagination_limit=33,
    ).SerializeToString()  # fmt: skip
    want = StoreQuery(
        pubsub_topic=PUBSUB[0], content_topics=(TOPICS[0], TOPICS[1]), start_time=-5,
        end_time=T0, hashes=(h1, h2), cursor=ROWS[2].message_hash, ascending=True,
        limit=33, include_data=True,
    )  # fmt: skip
    for body in (hand_request(**kw), generated):
        got = decode_request(body)
        assert got.request_id == "r" and got.query == want


@pytest.mark.parametrize(
    ("limit", "page"),
    [(None, 20), (0, 20), (1, 1), (100, 100), (101, 100), ((1 << 64) - 1, 100)],
)
def test_page_size_as_nwaku_clamps_it(limit: int | None, page: int) -> None:
    q = decode_request(hand_request(limit=limit)).query
    assert q.limit == page
    # nwaku's defaults: BACKWARD, no data, no bounds
    assert (q.ascending, q.include_data, q.start_time, q.end_time, q.cursor) == (
        False, False, None, None, None,
    )  # fmt: skip


@pytest.mark.parametrize(
    "case",
    [
        dict(),
        dict(pubsub=PUBSUB[1]),
        dict(topics=(TOPICS[2],)),
        dict(pubsub=PUBSUB[0], topics=(TOPICS[0], TOPICS[2])),
        dict(topics=(TOPICS[1], TOPICS[3], TOPICS[0])),
        dict(start=T0 + 10 * 10**9, end=T0 + 40 * 10**9),
    ],
)
@pytest.mark.parametrize("forward", [True, False])
@pytest.mark.parametrize("include_data", [True, False])
def test_paging_returns_every_message_once_in_order_like_rest(
    store: MessageStore, case: dict[str, Any], forward: bool, include_data: bool
) -> None:
    seen, pages = page_through(store, include_data=include_data, forward=forward, limit=17, **case)
    want = expected_hashes(
        ROWS, pubsub=case.get("pubsub"), topics=case.get("topics", ()), start=case.get("start"),
        end=case.get("end"), ascending=forward,
    )  # fmt: skip
    assert seen == want
    assert len(set(seen)) == len(seen) > 0
    assert pages == -(-len(want) // 17)
    params = {"pageSize": "17", "ascending": "true" if forward else "false"}
    if "pubsub" in case:
        params["pubsubTopic"] = case["pubsub"]
    if "topics" in case:
        params["contentTopics"] = ",".join(case["topics"])
    if "start" in case:
        params |= {"startTime": str(case["start"]), "endTime": str(case["end"])}
    assert rest_hashes(store, params) == seen


def test_pages_are_chronological_and_carry_whole_messages(store: MessageStore) -> None:
    resp = read_response(
        answer_store_v3(hand_request(include_data=True, pubsub=PUBSUB[0], limit=50), store)
    )
    by_hash = {r.message_hash: r for r in ROWS}
    got = [by_hash[e.message_hash] for e in resp.entries]
    assert [(r.timestamp, r.message_hash) for r in got] == sorted(
        (r.timestamp, r.message_hash) for r in got
    )
    # BACKWARD by default: the newest 50, shown oldest first
    newest = expected_hashes(ROWS, pubsub=PUBSUB[0], ascending=False)[:50]
    assert [r.message_hash for r in got] == list(reversed(newest))
    for e in resp.entries:
        r = by_hash[e.message_hash]
        assert e.pubsub_topic == r.pubsub_topic
        assert e.message is not None
        # WakuMessage{payload=1, content_topic=2, version=3, timestamp=10 (sint64), meta=11}
        assert w.first(e.message, 1) == r.payload
        assert w.first(e.message, 2).decode() == r.content_topic
        assert w.first(e.message, 3) == 1
        assert w.unzigzag(w.first(e.message, 10)) == r.timestamp
        assert w.first(e.message, 11) == r.meta


def test_hash_only_then_by_hash_returns_bodies_with_pubsub_topics(store: MessageStore) -> None:
    first = read_response(answer_store_v3(hand_request(forward=True, limit=100), store))
    assert len(first.entries) == 100 and first.cursor is not None
    by_hash = {r.message_hash: r for r in ROWS}
    for e in first.entries:
        assert e.message is None  # hash only
        assert e.pubsub_topic == by_hash[e.message_hash].pubsub_topic  # but its pubsub topic
    hashes = tuple(e.message_hash for e in first.entries)
    full = read_response(
        answer_store_v3(
            hand_request(include_data=True, hashes=hashes, forward=True, limit=100), store
        )
    )
    assert full.cursor is None
    assert [e.message_hash for e in full.entries] == list(hashes)
    for e in full.entries:
        r = by_hash[e.message_hash]
        assert e.pubsub_topic == r.pubsub_topic and e.message is not None
        again = reference_hash(
            e.pubsub_topic, w.first(e.message, 1), w.first(e.message, 2).decode(),
            w.first(e.message, 11) or b"", w.unzigzag(w.first(e.message, 10)),
        )  # fmt: skip
        assert again == e.message_hash


def test_spec_hash_vectors_come_back_with_their_hashes(tmp_path: Path, vectors: Any) -> None:
    cases = vectors("waku-message-hash.json")["cases"]
    rows = [
        StoredMessage(
            bytes.fromhex(c["expected"]),
            c["pubsub_topic"],
            c["content_topic"],
            bytes.fromhex(c["payload"]),
            0,
            c["timestamp"],
            bytes.fromhex(c["meta"]) if c.get("meta") else None,
        )
        for c in cases
    ]
    with open_store(f"sqlite:///{tmp_path}/v.sqlite3") as s:
        s.insert_messages(rows)
        for include_data in (False, True):
            resp = read_response(
                answer_store_v3(hand_request(include_data=include_data, limit=100), s)
            )
            assert sorted(e.message_hash.hex() for e in resp.entries) == sorted(
                c["expected"] for c in cases
            )
            for e in resp.entries:
                case = next(c for c in cases if c["expected"] == e.message_hash.hex())
                assert e.pubsub_topic == case["pubsub_topic"]
                if include_data:
                    # nwaku's decoder requires payload and content_topic, even when empty
                    assert w.first(e.message, 1) is not None
                    assert w.first(e.message, 2) is not None
                    again = reference_hash(
                        e.pubsub_topic, w.first(e.message, 1),
                        w.first(e.message, 2).decode(), w.first(e.message, 11) or b"",
                        w.unzigzag(w.first(e.message, 10) or 0),
                    )  # fmt: skip
                    assert again.hex() == case["expected"]


def test_time_bounds_are_inclusive(store: MessageStore) -> None:
    ts = sorted({r.timestamp for r in ROWS})
    start, end = ts[3], ts[8]
    seen, _ = page_through(store, start=start, end=end, forward=True, limit=100)
    assert seen == expected_hashes(ROWS, start=start, end=end)
    assert {r.timestamp for r in ROWS if r.message_hash in seen} >= {start, end}


def test_too_many_content_topics_get_nwakus_archive_error(store: MessageStore) -> None:
    topics = tuple(f"/app/1/t{i}/proto" for i in range(200))
    want = "BAD_RESPONSE: archive error: INVALID_QUERY: too many content topics"
    for asked in (topics, topics[:11]):
        for cursor in (None, ROWS[0].message_hash):
            resp = read_response(
                answer_store_v3(hand_request("many", topics=asked, cursor=cursor), store)
            )
            assert (resp.status, resp.desc, resp.request_id) == (300, want, b"many")
    resp = read_response(answer_store_v3(hand_request(topics=(*TOPICS, *topics[:6])), store))
    assert resp.status == 200 and len(resp.entries) == 20


def test_forged_and_zero_cursors_get_nwakus_archive_errors(store: MessageStore) -> None:
    forged = hashlib.sha256(b"no such message").digest()
    cases = [
        (forged, "BAD_RESPONSE: archive error: DRIVER_ERROR: cursor not found"),
        (forged[:7], "BAD_RESPONSE: archive error: DRIVER_ERROR: cursor not found"),
        (bytes(32), "BAD_RESPONSE: archive error: INVALID_QUERY: all zeroes cursor hash"),
        (b"", "BAD_RESPONSE: archive error: INVALID_QUERY: all zeroes cursor hash"),
    ]
    for cursor, desc in cases:
        answer = serve_store_v3(hand_request("c1", cursor=cursor), store)
        resp = read_response(answer.body)
        assert (resp.status, resp.desc, resp.request_id) == (300, desc, b"c1")
        assert answer.status == StatusCode.BAD_RESPONSE and answer.error is not None


@pytest.mark.parametrize(
    "body",
    [
        b"\xff\xff\xff",
        b"\x0a\x05ab",  # request_id runs past the end
        w.field_bytes(1, "r") + w.field_bytes(10, b"\xff\xfe"),  # topic not UTF-8
        bytes(range(256)),
    ],
)
def test_bytes_that_do_not_decode_get_400(store: MessageStore, body: bytes) -> None:
    answer = serve_store_v3(body, store)
    resp = read_response(answer.body)
    assert resp.status == 400 and resp.desc is not None
    assert resp.desc.startswith("decoding rpc failed: ")
    assert resp.request_id == b""  # present and empty, as nwaku writes it
    assert w.fields(answer.body)[0] == (1, b"") or (1, b"") in w.fields(answer.body)
    assert answer.error is not None


def test_a_request_without_request_id_is_refused_as_nwaku_does(store: MessageStore) -> None:
    for body in (b"", hand_request(None, pubsub=PUBSUB[0])):
        resp = read_response(answer_store_v3(body, store))
        assert (resp.status, resp.desc) == (
            400, "decoding rpc failed: MissingRequiredField request_id",
        )  # fmt: skip
    resp = read_response(answer_store_v3(hand_request(""), store))  # empty but present
    assert resp.status == 200 and len(resp.entries) == 20


def test_random_bytes_never_raise(store: MessageStore) -> None:
    rnd = random.Random(3)
    for _ in range(300):
        body = bytes(rnd.randrange(256) for _ in range(rnd.randrange(1, 80)))
        answer = serve_store_v3(body, store)
        assert answer.status in (200, 300, 400)
        assert read_response(answer.body).status == answer.status


def test_over_1000_hashes_are_refused_with_a_reason(store: MessageStore) -> None:
    unknown = [hashlib.sha256(b"%d" % i).digest() for i in range(1001)]
    resp = read_response(answer_store_v3(hand_request("h", hashes=tuple(unknown)), store))
    assert resp.status == 400 and resp.request_id == b"h"
    assert resp.desc == "BAD_REQUEST: 1001 message hashes in one query; at most 1000"
    # 1000 hashes (every stored one among them) are looked up at once, paged as usual
    asked = tuple(unknown[: 1000 - len(ROWS)] + [r.message_hash for r in ROWS])
    seen, pages = page_through(store, hashes=asked, forward=True, limit=100)
    assert seen == expected_hashes(ROWS) and pages == 3


def test_a_topic_no_store_can_hold_is_a_bad_request(store: MessageStore) -> None:
    resp = read_response(answer_store_v3(hand_request(pubsub="a\x00b"), store))
    assert resp.status == 400 and resp.desc is not None and resp.desc.startswith("BAD_REQUEST: ")


class FailingStore(MessageStore):
    """A store whose queries fail (the database went away, or a bug)."""

    url = "failing://"

    def __init__(self, exc: Exception) -> None:
        self.exc = exc

    def query(self, query: StoreQuery) -> Any:
        raise self.exc

    def insert_messages(self, rows: Any, *, batch_size: int = 5000) -> int:
        raise NotImplementedError

    def get_message(self, message_hash: bytes) -> Any:
        raise self.exc

    def get_envelope(self, message_hash: bytes) -> Any:
        raise NotImplementedError

    def get_envelopes(self, message_hashes: Any) -> Any:
        raise NotImplementedError

    def query_v1_envelopes(self, query: Any) -> Any:
        raise NotImplementedError

    def count(self) -> int:
        return 0

    def count_envelopes(self) -> int:
        return 0

    def close(self) -> None:
        pass


def test_store_failures_and_bugs_are_503_never_exceptions() -> None:
    down = serve_store_v3(hand_request("d"), FailingStore(StoreError("connection refused")))
    resp = read_response(down.body)
    assert (resp.status, resp.desc, resp.request_id) == (503, "SERVICE_UNAVAILABLE", b"d")
    assert isinstance(down.error, StoreError)
    bug = serve_store_v3(hand_request("d"), FailingStore(KeyError("oops")))
    assert read_response(bug.body).status == 503
    assert isinstance(bug.error, InternalError) and "KeyError" in str(bug.error)


def test_rate_limit_reply_is_nwakus() -> None:
    resp = read_response(store_v3_too_many_requests())
    assert (resp.request_id, resp.status, resp.desc) == (b"N/A", 429, "TOO_MANY_REQUESTS")


def test_generated_classes_read_our_responses(store: MessageStore) -> None:
    body = answer_store_v3(hand_request("g", include_data=True, forward=True, limit=5), store)
    resp = store_v3_pb2.StoreQueryResponse.FromString(body)
    assert (resp.request_id, resp.status_code, resp.status_desc) == ("g", 200, "OK")
    assert [m.message_hash for m in resp.messages] == expected_hashes(ROWS)[:5]
    assert resp.pagination_cursor == expected_hashes(ROWS)[4]
    assert all(m.HasField("message") and m.pubsub_topic for m in resp.messages)


@pytest.mark.parametrize("forward", [True, False])
def test_paging_the_way_js_waku_does_stops_at_an_empty_page(
    store: MessageStore, forward: bool
) -> None:
    """js-waku (packages/core/src/lib/store/store.ts) ignores pagination_cursor: it sends
    the last (forward) or first (backward) hash of each page and stops at an empty page."""
    seen: list[bytes] = []
    cursor = None
    while True:
        resp = read_response(
            answer_store_v3(
                hand_request(include_data=True, pubsub=PUBSUB[1], topics=(TOPICS[1], TOPICS[3]),
                             cursor=cursor, forward=forward, limit=30),
                store,
            )
        )  # fmt: skip
        assert resp.status == 200
        if not resp.entries:
            break
        hashes = [e.message_hash for e in resp.entries]
        seen += hashes if forward else list(reversed(hashes))
        cursor = hashes[-1] if forward else hashes[0]
    assert seen == expected_hashes(
        ROWS, pubsub=PUBSUB[1], topics=(TOPICS[1], TOPICS[3]), ascending=forward
    )


def test_one_stream_sans_io_frames_in_and_out(store: MessageStore) -> None:
    """A request arriving in odd pieces, answered, and read back through the framing."""
    from waku_legacy.store.protocol import MAX_REQUEST_SIZE, FrameReader, encode_frame

    wire = encode_frame(hand_request("s", include_data=True, limit=7, forward=True))
    server = FrameReader(MAX_REQUEST_SIZE)
    frames: list[bytes] = []
    for at in range(0, len(wire), 3):
        frames += server.feed(wire[at : at + 3])
    server.finish()
    assert len(frames) == 1
    client = FrameReader(4 * 1024 * 1024)
    (reply,) = client.feed(encode_frame(answer_store_v3(frames[0], store)))
    resp = read_response(reply)
    assert resp.request_id == b"s"
    assert [e.message_hash for e in resp.entries] == expected_hashes(ROWS)[:7]


@pytest.mark.parametrize(
    "m",
    [
        StoredMessage(b"\x01" * 32, "/p", "/a/1/b/c", b"x" * 300, 0, 0),
        StoredMessage(b"\x02" * 32, "/p", "/a/1/b/c", b"", 1, -1_000, b"m" * 64),
        StoredMessage(b"\x03" * 32, "/p", "", b"y", (1 << 32) - 1, (1 << 63) - 1),
        StoredMessage(b"\x04" * 32, "/p", "t" * 20000, b"z" * 70000, 2, -(1 << 63)),
    ],
)
def test_hand_written_messages_parse_as_the_published_proto(m: StoredMessage) -> None:
    from waku_legacy.proto import waku_message_pb2
    from waku_legacy.store.protocol.store_v3 import waku_message_bytes

    raw = waku_message_bytes(m)
    got = waku_message_pb2.WakuMessage.FromString(raw)
    assert (got.payload, got.content_topic, got.version, got.timestamp) == (
        m.payload, m.content_topic, m.version, m.timestamp,
    )  # fmt: skip
    assert got.meta == (m.meta or b"") and not got.HasField("ephemeral")
    assert w.first(raw, 1) == m.payload and w.first(raw, 2) == m.content_topic.encode()


EDGE_MESSAGES = [
    StoredMessage(b"\x01" * 32, "/p", "/a/1/b/c", b"x" * 300, 0, 0),
    StoredMessage(b"\x02" * 32, "/p", "/a/1/b/c", b"", 1, -1_000, b"m" * 64),
    StoredMessage(b"\x03" * 32, "/p", "", b"y", (1 << 32) - 1, (1 << 63) - 1),
    StoredMessage(b"\x04" * 32, "/p", "t" * 20000, b"z" * 70000, 2, -(1 << 63)),
    StoredMessage(b"\x05" * 32, "", "/a/1/b/c", b"w" * 15999, 1, T0),  # the inline path
    StoredMessage(b"\x06" * 32, "/q", "/a/1/b/d", b"v" * 16000, 300, T0 + 1),
    StoredMessage(b"\x07" * 32, "/q", "/a/1/b/d", b"u", 1, (1 << 55) - 1, b"m"),
    StoredMessage(b"\x08" * 32, "/q", "/a/1/b/d", b"s", 1, 1 << 55),
    StoredMessage(b"\x09" * 32, "/q", "/a/1/b/\u00e9", b"r", 1, (1 << 62) - 1),
    StoredMessage(b"\x0a" * 32, "/q", "/a/1/b/e", b"q", 1, 1 << 62),
]


def test_page_entries_hold_the_hand_written_messages() -> None:
    """Each entry of a page with data is {hash, the message as waku_message_bytes writes
    it, the pubsub topic}, whether the page is written from StoredMessages or from a
    store's wire rows (topics as UTF-8 bytes, a NULL payload), and the generated classes
    read the same values back."""
    from waku_legacy.proto import waku_message_pb2
    from waku_legacy.store.protocol.store_v3 import encode_response, waku_message_bytes

    body = encode_response("r", 200, "OK", EDGE_MESSAGES, include_data=True, cursor=b"c" * 32)
    wire = [
        (m.message_hash, m.pubsub_topic.encode(), m.content_topic.encode(), m.payload or None,
         m.version, m.timestamp, m.meta)
        for m in EDGE_MESSAGES
    ]  # fmt: skip
    assert encode_response("r", 200, "OK", wire, include_data=True, cursor=b"c" * 32) == body
    entries = w.every(body, 20)
    assert len(entries) == len(EDGE_MESSAGES)
    for raw, m in zip(entries, EDGE_MESSAGES, strict=True):
        assert w.first(raw, 1) == m.message_hash
        assert w.first(raw, 2) == waku_message_bytes(m)
        assert w.first(raw, 3) == m.pubsub_topic.encode()
    resp = store_v3_pb2.StoreQueryResponse.FromString(body)
    for got, m in zip(resp.messages, EDGE_MESSAGES, strict=True):
        message = waku_message_pb2.WakuMessage.FromString(got.message.SerializeToString())
        assert (got.message_hash, got.pubsub_topic, message.payload, message.content_topic,
                message.version, message.timestamp, message.meta) == (
            m.message_hash, m.pubsub_topic, m.payload, m.content_topic, m.version, m.timestamp,
            m.meta or b"")  # fmt: skip


def test_wire_topics_that_are_not_utf8_are_written_as_the_decoded_text() -> None:
    """A stored topic whose bytes are not UTF-8 (a file another writer filled) is written
    as the store's StoredMessage would hold it: U+FFFD for each bad sequence."""
    from waku_legacy.store.protocol.store_v3 import encode_response

    bad = (b"\x0b" * 32, b"/p\xff", b"/a/\xc3", b"x", 1, T0, None)
    decoded = StoredMessage(bad[0], "/p\ufffd", "/a/\ufffd", b"x", 1, T0)
    assert encode_response("r", 200, "OK", [bad], include_data=True) == encode_response(
        "r", 200, "OK", [decoded], include_data=True
    )


@pytest.mark.parametrize(
    "body",
    [
        w.field_bytes(1, "r1") + w.field_varint(2, 1),  # a first page: no cursor
        w.field_bytes(1, "r2") + w.field_bytes(51, bytes(range(1, 33))),
        w.field_bytes(1, "r3") + w.field_bytes(51, b"\x07" * 5),  # short: zero-padded
        w.field_bytes(1, "r4") + w.field_bytes(51, b"\x01" * 40),  # long: cut to 32
        # the last of two cursors, as the parser keeps it, around other fields
        w.field_bytes(51, b"\x02" * 32)
        + w.field_bytes(1, "r5")
        + w.field_bytes(11, "/a/1/b/p")
        + w.field_bytes(51, b"\x03" * 32)
        + w.field_varint(53, 20),
    ],
)
def test_request_cursor_reads_what_decode_request_reads(body: bytes) -> None:
    assert request_cursor(body) == decode_request(body).query.cursor


@pytest.mark.parametrize("body", [b"\xff\xff\xff", b"\x0a\x05ab", b"\x8a\x03" + b"\x40"])
def test_request_cursor_of_bytes_that_do_not_walk(body: bytes) -> None:
    assert request_cursor(body) is None
