"""Legacy 13/WAKU2-STORE (/vac/waku/store/2.0.0-beta4) answered from the v2 store, sans-IO.

Requests are assembled by hand from the published proto's field numbers (wire-facts §5,
waku-org/waku-proto waku/store/v2beta4/store.proto): HistoryRPC{request_id=1, query=2,
response=3}, HistoryQuery{pubsub_topic=2, content_filters=3 (ContentFilter{content_topic=1}),
paging_info=4, start_time=5, end_time=6}, PagingInfo{page_size=1, cursor=2, direction=3
(BACKWARD=0, FORWARD=1)}, Index{digest=1, receiver_time=2, sender_time=3, pubsub_topic=4},
HistoryResponse{messages=2, paging_info=3, error=4}; digest = sha256(content_topic ||
payload). Expected behaviour is nwaku's (7d1c6ab: waku_store_legacy/protocol.nim, rpc.nim,
rpc_codec.nim, common.nim checkHistCursor, waku_archive_legacy/archive.nim).
"""

from __future__ import annotations

import base64
import hashlib
import json
import random
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from tests import pb_wire as w
from tests.helpers import filled_store
from tests.waku_legacy.store.protocol.test_store_v3 import PUBSUB, ROWS, TOPICS, FailingStore
from tests.waku_legacy.store.support import expected_hashes
from waku_legacy.bridge.store_rest_server import parse_legacy_query, run_legacy_query
from waku_legacy.proto import store_v2beta4_pb2
from waku_legacy.store import MessageStore, StoreError
from waku_legacy.store.protocol import (
    LEGACY_STORE_CODEC,
    HistoryError,
    InternalError,
    LegacyCursorCache,
    answer_legacy_store,
    legacy_store_too_many_requests,
    serve_legacy_store,
)


@pytest.fixture(
    scope="module", params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]
)
def store(request: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[MessageStore]:
    with filled_store(request, tmp_path_factory, ROWS, "spl") as s:
        yield s


@dataclass(frozen=True)
class Index:
    digest: bytes
    receiver_time: int
    sender_time: int
    pubsub_topic: str

    def encode(self) -> bytes:
        return (
            w.field_bytes(1, self.digest)
            + w.field_sint64(2, self.receiver_time)
            + w.field_sint64(3, self.sender_time)
            + w.field_bytes(4, self.pubsub_topic)
        )


def digest_of(content_topic: str, payload: bytes) -> bytes:
    return hashlib.sha256(content_topic.encode() + payload).digest()


def hand_rpc(
    request_id: str | None = "L",
    *,
    pubsub: str | None = None,
    topics: tuple[str, ...] = (),
    start: int | None = None,
    end: int | None = None,
    page_size: int | None = None,
    cursor: Index | None = None,
    forward: bool | None = None,
    query: bool = True,
) -> bytes:
    q = b""
    if pubsub is not None:
        q += w.field_bytes(2, pubsub)
    for t in topics:
        q += w.field_bytes(3, w.field_bytes(1, t))
    paging = b""
    if page_size is not None:
        paging += w.field_varint(1, page_size)
    if cursor is not None:
        paging += w.field_bytes(2, cursor.encode())
    if forward is not None:
        paging += w.field_varint(3, 1 if forward else 0)
    if paging:
        q += w.field_bytes(4, paging)
    if start is not None:
        q += w.field_sint64(5, start)
    if end is not None:
        q += w.field_sint64(6, end)
    out = b"" if request_id is None else w.field_bytes(1, request_id)
    return out + (w.field_bytes(2, q) if query else b"")


@dataclass
class Reply:
    request_id: bytes | None
    messages: list[bytes]
    cursor: Index | None
    error: int | None


def read_reply(body: bytes) -> Reply:
    response = w.first(body, 3)
    assert response is not None and w.first(body, 2) is None
    paging = w.first(response, 3)
    cursor = None
    if paging is not None:
        raw = w.first(paging, 2)
        assert w.first(paging, 1) is None and w.first(paging, 3) is None  # only the cursor
        cursor = Index(
            w.first(raw, 1),
            w.unzigzag(w.first(raw, 2)),
            w.unzigzag(w.first(raw, 3)),
            w.first(raw, 4).decode(),
        )
    return Reply(w.first(body, 1), w.every(response, 2), cursor, w.first(response, 4))


BY_DIGEST = {(r.timestamp, digest_of(r.content_topic, r.payload)): r for r in ROWS}


def hash_of(message: bytes) -> bytes:
    """The stored row a returned WakuMessage is (by its content, not by a hash we sent)."""
    payload, topic = w.first(message, 1), w.first(message, 2).decode()
    ts = w.unzigzag(w.first(message, 10))
    return BY_DIGEST[(ts, digest_of(topic, payload))].message_hash


def page_through(
    store: MessageStore, cache: LegacyCursorCache | None, **kw: Any
) -> tuple[list[bytes], int]:
    seen: list[bytes] = []
    cursor = None
    pages = 0
    while True:
        reply = read_reply(answer_legacy_store(hand_rpc(cursor=cursor, **kw), store, cache))
        assert (reply.request_id, reply.error) == (b"L", 0)
        pages += 1
        got = [hash_of(m) for m in reply.messages]
        seen += got if kw.get("forward") else list(reversed(got))
        if reply.cursor is None:
            return seen, pages
        last = reply.messages[-1] if kw.get("forward") else reply.messages[0]
        row = next(r for r in ROWS if r.message_hash == hash_of(last))
        assert reply.cursor == Index(
            digest_of(row.content_topic, row.payload), row.timestamp, row.timestamp,
            row.pubsub_topic,
        )  # fmt: skip
        cursor = reply.cursor


def test_codec_name() -> None:
    assert LEGACY_STORE_CODEC == "/vac/waku/store/2.0.0-beta4"


@pytest.mark.parametrize(
    "case",
    [
        dict(pubsub=PUBSUB[0]),
        dict(pubsub=PUBSUB[1], topics=(TOPICS[1], TOPICS[3])),
        dict(topics=(TOPICS[0],)),
        dict(start=ROWS[5].timestamp, end=ROWS[9].timestamp + 20 * 10**9),
        dict(pubsub=PUBSUB[0], start=ROWS[5].timestamp, end=ROWS[9].timestamp + 20 * 10**9),
    ],
)
@pytest.mark.parametrize("forward", [True, False])
@pytest.mark.parametrize("cached", [True, False])
def test_paging_returns_every_message_once_in_order_like_rest(
    store: MessageStore, case: dict[str, Any], forward: bool, cached: bool
) -> None:
    cache = LegacyCursorCache() if cached else None  # without it: the bounded scan
    seen, pages = page_through(store, cache, page_size=13, forward=forward, **case)
    want = expected_hashes(
        ROWS, pubsub=case.get("pubsub"), topics=case.get("topics", ()), start=case.get("start"),
        end=case.get("end"), ascending=forward,
    )  # fmt: skip
    assert seen == want and len(want) > 0
    assert pages == -(-len(want) // 13)
    # the legacy REST API over the same store gives the same messages in the same order
    # (its cursor parameters include pubsubTopic, which also filters: compare with one)
    if "pubsub" not in case:
        return
    params = {"pageSize": "13", "ascending": "true" if forward else "false"}
    if "pubsub" in case:
        params["pubsubTopic"] = case["pubsub"]
    if "topics" in case:
        params["contentTopics"] = ",".join(case["topics"])
    if "start" in case:
        params |= {"startTime": str(case["start"]), "endTime": str(case["end"])}
    rest: list[bytes] = []
    while True:
        body = json.loads(run_legacy_query(store, parse_legacy_query(params), cache))
        ts_digests = [
            (m["timestamp"], digest_of(m["contentTopic"], base64.b64decode(m["payload"])))
            for m in body["messages"]
        ]
        hashes = [BY_DIGEST[k].message_hash for k in ts_digests]
        rest += hashes if forward else list(reversed(hashes))
        if "cursor" not in body:
            break
        c = body["cursor"]
        params |= {
            "pubsubTopic": c["pubsubTopic"], "senderTime": str(c["senderTime"]),
            "storeTime": str(c["storeTime"]), "digest": c["digest"]["data"],
        }  # fmt: skip
    assert rest == seen


def test_default_is_backward_twenty_in_chronological_order(store: MessageStore) -> None:
    reply = read_reply(answer_legacy_store(hand_rpc(), store, LegacyCursorCache()))
    newest = expected_hashes(ROWS, ascending=False)[:20]
    assert [hash_of(m) for m in reply.messages] == list(reversed(newest))
    assert reply.cursor is not None and reply.error == 0


@pytest.mark.parametrize(("size", "got"), [(0, 20), (1, 1), (100, 100), (5000, 100)])
def test_page_sizes_as_nwaku_clamps_them(store: MessageStore, size: int, got: int) -> None:
    reply = read_reply(answer_legacy_store(hand_rpc(page_size=size, forward=True), store))
    assert len(reply.messages) == got


def test_messages_are_whole_waku_messages(store: MessageStore) -> None:
    reply = read_reply(answer_legacy_store(hand_rpc(page_size=100, forward=True), store))
    for raw in reply.messages:
        row = next(r for r in ROWS if r.message_hash == hash_of(raw))
        assert w.first(raw, 1) == row.payload and w.first(raw, 3) == row.version
        assert w.first(raw, 11) == row.meta


def test_generated_classes_read_our_replies(store: MessageStore) -> None:
    rpc = store_v2beta4_pb2.HistoryRPC(request_id="g")
    rpc.query.pubsub_topic = PUBSUB[0]
    rpc.query.paging_info.page_size = 4
    rpc.query.paging_info.direction = store_v2beta4_pb2.PagingInfo.FORWARD
    got = store_v2beta4_pb2.HistoryRPC.FromString(
        answer_legacy_store(rpc.SerializeToString(), store)
    )
    assert got.request_id == "g" and got.response.error == 0 and len(got.response.messages) == 4
    assert got.response.paging_info.cursor.pubsub_topic == PUBSUB[0]


FORGED = Index(hashlib.sha256(b"forged").digest(), ROWS[0].timestamp, ROWS[0].timestamp, PUBSUB[0])


@pytest.mark.parametrize(
    ("cursor", "reason"),
    [
        (FORGED, "cursor not found"),
        (Index(FORGED.digest, 5, 5, PUBSUB[0]), "cursor not found"),
        (Index(FORGED.digest, 5, 5, ""), "empty pubsubTopic"),
        (Index(FORGED.digest, 0, 5, PUBSUB[0]), "invalid storeTime"),
        (Index(FORGED.digest, 5, 0, PUBSUB[0]), "invalid senderTime"),
        (Index(bytes(32), 5, 5, PUBSUB[0]), "empty digest"),
        (Index(b"", 5, 5, PUBSUB[0]), "empty digest"),
        (Index(b"\x01" * 31, 5, 5, PUBSUB[0]), "32 bytes"),
    ],
)
def test_bad_and_forged_cursors_get_invalid_cursor(
    store: MessageStore, cursor: Index, reason: str
) -> None:
    answer = serve_legacy_store(hand_rpc("F", cursor=cursor), store, LegacyCursorCache())
    reply = read_reply(answer.body)
    assert (reply.request_id, reply.error, reply.messages) == (b"F", 1, [])
    assert answer.status == 400 and reason in str(answer.error)


def test_too_many_content_topics_get_invalid_cursor(store: MessageStore) -> None:
    topics = tuple(f"/app/1/t{i}/proto" for i in range(200))
    for asked in (topics, topics[:11]):
        answer = serve_legacy_store(hand_rpc("T", topics=asked), store)
        assert read_reply(answer.body).error == HistoryError.INVALID_CURSOR
        assert "too many content topics" in str(answer.error)
    assert read_reply(answer_legacy_store(hand_rpc(topics=topics[:10]), store)).error == 0


@pytest.mark.parametrize(
    "body",
    [
        b"\xff\xff",
        hand_rpc(query=False),  # no query: nwaku's "empty query rpc"
        hand_rpc(None),  # no request id
        w.field_bytes(1, "x") + w.field_bytes(2, w.field_bytes(2, b"\xff\xfe")),  # not UTF-8
    ],
)
def test_what_does_not_decode_gets_an_empty_reply(store: MessageStore, body: bytes) -> None:
    answer = serve_legacy_store(body, store)
    assert answer.body == b"" and answer.status == 400 and answer.error is not None


def test_random_bytes_never_raise(store: MessageStore) -> None:
    rnd = random.Random(5)
    for _ in range(300):
        body = bytes(rnd.randrange(256) for _ in range(rnd.randrange(1, 80)))
        answer = serve_legacy_store(body, store, LegacyCursorCache())
        assert answer.body == b"" or read_reply(answer.body).error in (0, 1)


def test_error_field_is_written_even_when_none(store: MessageStore) -> None:
    body = answer_legacy_store(hand_rpc(page_size=1), store)
    assert (4, 0) in w.fields(w.first(body, 3))


def test_store_failures_and_bugs_are_service_unavailable() -> None:
    down = serve_legacy_store(hand_rpc("D"), FailingStore(StoreError("gone")))
    assert read_reply(down.body).error == 503 and isinstance(down.error, StoreError)
    bug = serve_legacy_store(hand_rpc("D"), FailingStore(ZeroDivisionError()))
    assert read_reply(bug.body).error == 503 and isinstance(bug.error, InternalError)


def test_rate_limit_reply_is_nwakus() -> None:
    reply = read_reply(legacy_store_too_many_requests())
    assert (reply.request_id, reply.error, reply.messages) == (b"N/A", 429, [])
