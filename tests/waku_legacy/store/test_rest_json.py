"""The REST store JSON codec (waku_legacy.store.rest_json): hash/cursor forms, nwaku's
message and response shapes, client-side parsing with limits and hash checks."""

from __future__ import annotations

import base64
import hashlib

import pytest
from hypothesis import given
from hypothesis import strategies as st

from waku_legacy.errors import DecodeError, LimitExceeded
from waku_legacy.store import StoredMessage
from waku_legacy.store.rest_json import (
    HashMismatch,
    RestJsonError,
    format_hash,
    key_value_json,
    message_json,
    parse_hash,
    parse_hashes,
    parse_message,
    parse_store_response,
    response_json,
    store_query_params,
)

# A hash whose standard base64 form holds both '+' and '/' (the pre-0.35 URL trouble).
TRICKY = bytes.fromhex("fbef" * 16)
PUBSUB = "/waku/2/rs/16/32"


def _stored(i: int, *, meta: bytes | None = None) -> StoredMessage:
    payload = b"payload-%d" % i
    content = "/waku/1/0x01020304/rfc26"
    ts = 1_700_000_000_000_000_000 + i
    # Deterministic hash by hand (wire-facts §1): pubsub || payload || content || meta || ts.
    digest = hashlib.sha256(
        PUBSUB.encode() + payload + content.encode() + (meta or b"") + ts.to_bytes(8, "big")
    ).digest()
    return StoredMessage(digest, PUBSUB, content, payload, 1, ts, meta)


def test_hash_forms_all_parse_to_the_same_bytes():
    std = base64.b64encode(TRICKY).decode()
    assert "+" in std and "/" in std
    forms = [
        "0x" + TRICKY.hex(),
        "0X" + TRICKY.hex().upper(),
        TRICKY.hex(),
        std,
        std.replace("+", " "),  # form decoding of an unescaped '+'
        base64.urlsafe_b64encode(TRICKY).decode(),
        std.rstrip("="),
    ]
    for form in forms:
        assert parse_hash(form) == TRICKY, form
    assert format_hash(TRICKY) == "0x" + "fbef" * 16


@pytest.mark.parametrize(
    "text, fragment",
    [
        ("0x1234", "32 bytes"),
        ("0xzz" + "00" * 31, "64 hex digits"),
        ("not a hash!", "neither"),
        (base64.b64encode(b"\x01" * 31).decode(), "32 bytes"),
        ("A" * 500, "too long"),
    ],
)
def test_bad_hashes_are_typed_errors(text, fragment):
    with pytest.raises(RestJsonError) as info:
        parse_hash(text, "cursor")
    assert isinstance(info.value, DecodeError)
    assert fragment in str(info.value) and "cursor" in str(info.value)


def test_hash_lists_skip_empty_items_and_are_bounded():
    h1, h2 = b"\x01" * 32, b"\x02" * 32
    assert parse_hashes(f"{format_hash(h1)},,{format_hash(h2)},") == [h1, h2]
    with pytest.raises(LimitExceeded):
        parse_hashes(",".join([format_hash(h1)] * 101))


def test_message_json_matches_nwaku_shape():
    m = _stored(1, meta=b"\x00\x01")
    out = message_json(m)
    assert list(out) == ["payload", "contentTopic", "meta", "version", "timestamp", "ephemeral"]
    assert out["payload"] == base64.b64encode(b"payload-1").decode()
    assert out["meta"] == "AAE="
    assert "meta" not in message_json(_stored(2))
    assert key_value_json(m, include_data=False) == {"messageHash": format_hash(m.message_hash)}
    full = key_value_json(m, include_data=True)
    assert list(full) == ["messageHash", "message", "pubsubTopic"]
    assert full["pubsubTopic"] == PUBSUB


def test_response_round_trip_with_hash_check():
    rows = [_stored(i, meta=b"m" if i % 2 else None) for i in range(5)]
    doc = response_json("rid", rows, include_data=True, cursor=rows[-1].message_hash)
    assert list(doc) == ["requestId", "statusCode", "statusDesc", "messages", "paginationCursor"]
    parsed = parse_store_response(doc)
    assert parsed.status_code == 200 and parsed.status_desc == "OK"
    assert parsed.cursor == rows[-1].message_hash
    assert [kv.stored() for kv in parsed.messages] == rows
    no_cursor = response_json("rid", rows, include_data=False, cursor=None)
    assert "paginationCursor" not in no_cursor
    assert parse_store_response(no_cursor).cursor is None


def test_hash_mismatch_is_detected():
    m = _stored(3)
    doc = response_json("r", [m._replace(payload=b"tampered")], include_data=True, cursor=None)
    entry = parse_store_response(doc).messages[0]
    with pytest.raises(HashMismatch):
        entry.stored()
    assert entry.stored(verify_hash=False).payload == b"tampered"


@pytest.mark.parametrize(
    "obj, fragment",
    [
        ([], "JSON object"),
        ({"requestId": "x", "statusCode": 200, "statusDesc": "OK"}, "'messages' is missing"),
        ({"requestId": "x", "statusCode": -1, "statusDesc": "", "messages": []}, "statusCode"),
        ({"requestId": "x", "statusCode": 200, "statusDesc": "", "messages": [{}]}, "messageHash"),
        (
            {"requestId": "x", "statusCode": 200, "statusDesc": "", "messages": [],
             "paginationCursor": "0x12"},
            "paginationCursor",
        ),
    ],
)  # fmt: skip
def test_malformed_responses(obj, fragment):
    with pytest.raises(RestJsonError) as info:
        parse_store_response(obj)
    assert fragment in str(info.value)


def test_message_limits_and_types():
    with pytest.raises(LimitExceeded):
        parse_message({"payload": "", "contentTopic": "/a/1/b/c", "meta": "A" * 100})
    with pytest.raises(RestJsonError, match="base64"):
        parse_message({"payload": "***", "contentTopic": "/a/1/b/c"})
    with pytest.raises(RestJsonError, match="unknown"):
        parse_message({"payload": "", "contentTopic": "/a/1/b/c", "extra": 1})
    with pytest.raises(RestJsonError, match="integer"):
        parse_message({"payload": "", "contentTopic": "/a/1/b/c", "timestamp": "1"})
    with pytest.raises(RestJsonError, match="version"):
        parse_message({"payload": "", "contentTopic": "/a/1/b/c", "version": 1 << 32})


def test_query_params_for_old_and_new_nodes():
    params = store_query_params(
        pubsub_topic=PUBSUB, content_topics=["/a/1/b/c", "/d/1/e/f"], cursor=TRICKY,
        page_size=100, start_time=5,
    )  # fmt: skip
    assert params["cursor"] == format_hash(TRICKY)
    assert params["contentTopics"] == "/a/1/b/c,/d/1/e/f"
    assert params["includeData"] == "true" and params["ascending"] == "true"
    old = store_query_params(cursor=TRICKY, cursor_encoding="base64")
    assert old["cursor"] == base64.b64encode(TRICKY).decode()


@given(
    payload=st.binary(max_size=300),
    meta=st.one_of(st.none(), st.binary(min_size=1, max_size=64)),
    ts=st.integers(-(1 << 63), (1 << 63) - 1),
    version=st.integers(0, (1 << 32) - 1),
    topic=st.text(max_size=40),
)
def test_message_json_round_trip(payload, meta, ts, version, topic):
    m = StoredMessage(b"\x07" * 32, PUBSUB, topic, payload, version, ts, meta)
    back = parse_message(message_json(m))
    assert bytes(back.payload) == payload and back.content_topic == topic
    assert back.timestamp == ts and back.version == version
    assert (bytes(back.meta) or None) == meta


@given(st.binary(min_size=32, max_size=32))
def test_every_hash_form_round_trips(digest):
    assert parse_hash(format_hash(digest)) == digest
    assert parse_hash(base64.b64encode(digest).decode()) == digest
    assert parse_hash(base64.urlsafe_b64encode(digest).decode()) == digest


@given(
    rows=st.lists(
        st.tuples(
            st.binary(max_size=64),
            st.one_of(st.none(), st.binary(min_size=1, max_size=64)),
            st.text(max_size=20),
            st.text(max_size=20),
            st.integers(-(1 << 63), (1 << 63) - 1),
            st.integers(0, (1 << 32) - 1),
        ),
        max_size=5,
    ),
    include=st.booleans(),
    cursor=st.one_of(st.none(), st.binary(min_size=32, max_size=32)),
    request_id=st.text(max_size=10),
)
def test_fast_response_encoder_equals_json_dumps(rows, include, cursor, request_id):
    import json

    from waku_legacy.store.rest_json import response_json_bytes

    messages = [
        StoredMessage(hashlib.sha256(p).digest(), pubsub, content, p, version, ts, meta)
        for p, meta, content, pubsub, ts, version in rows
    ]
    expected = json.dumps(
        response_json(request_id, messages, include_data=include, cursor=cursor),
        separators=(",", ":"),
    ).encode()
    assert (
        response_json_bytes(request_id, messages, include_data=include, cursor=cursor) == expected
    )
