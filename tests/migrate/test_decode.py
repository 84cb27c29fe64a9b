"""Per-record decoding (no Spark): bridge conversion, shard mapping, dedup keys, quarantine.

Expected values are derived here from the wire facts with hashlib and pycryptodome's keccak,
not with the project's hash helpers."""

from __future__ import annotations

import base64
import hashlib
import json
import struct

import pyarrow as pa
import rlp

from tests.helpers import reference_keccak256
from waku_legacy.identity.topic_mapping import ChannelRoute, TopicMapping
from waku_legacy.migrate.decode import decode_batch, decode_record
from waku_legacy.migrate.records import MESSAGE_SCHEMA, RAW_SCHEMA
from waku_legacy.proto import waku_message_pb2

TOPIC = bytes.fromhex("1a2b3c4d")
CONTENT_TOPIC = "/waku/1/0x1a2b3c4d/rfc26"
SHARD_TOPIC = "/waku/2/rs/16/128"
DEFAULT = "/waku/2/rs/16/32"
MAPPING = TopicMapping(DEFAULT, {CONTENT_TOPIC: ChannelRoute("0x02ab", "chan-uuid", SHARD_TOPIC)})


def _v2_hash(pubsub: str, payload: bytes, content: str, meta: bytes, ts: int) -> bytes:
    return hashlib.sha256(
        pubsub.encode() + payload + content.encode() + meta + struct.pack(">q", ts)
    ).digest()


def _raw(fmt: str, data: bytes | None, **extra) -> dict:
    row = {
        "source": "s1",
        "kind": "k",
        "location": "loc",
        "rank": 1,
        "format": fmt,
        "data": data,
        "pubsub_topic": None,
        "claimed_hash": None,
        "error": None,
    }
    row.update(extra)
    return row


EXPIRY, TTL, NONCE = 1_650_000_100, 100, 7
DATA = b"\x05" * 300
ENVELOPE = rlp.encode([EXPIRY, TTL, TOPIC, DATA, NONCE])


def test_v1_envelope_converts_like_the_nwaku_bridge() -> None:
    row = decode_record(_raw("v1-envelope", ENVELOPE), MAPPING)
    ts = (EXPIRY - TTL) * 10**9
    assert not row["quarantined"]
    assert (row["content_topic"], row["payload"], row["version"], row["timestamp"]) == (
        CONTENT_TOPIC,
        DATA,
        1,
        ts,
    )
    assert row["pubsub_topic"] == SHARD_TOPIC and row["community"] == "0x02ab"
    assert row["message_hash"] == _v2_hash(SHARD_TOPIC, DATA, CONTENT_TOPIC, b"", ts)
    assert row["dedup_key"] == row["message_hash"]
    assert row["envelope"] == ENVELOPE
    assert row["db_key"] == struct.pack(">I", EXPIRY - TTL) + reference_keccak256(ENVELOPE) + TOPIC
    assert row["week"] == "2022-W15" and row["from_v2"] is False


def test_unmapped_topic_goes_to_the_default_pubsub_topic() -> None:
    other = rlp.encode([EXPIRY, TTL, b"\x00\x00\x00\x01", DATA, NONCE])
    row = decode_record(_raw("v1-envelope", other), MAPPING)
    assert row["pubsub_topic"] == DEFAULT and row["community"] is None


def test_bridged_v2_copy_on_another_pubsub_topic_has_the_same_dedup_key() -> None:
    ts = (EXPIRY - TTL) * 10**9
    bridged_hash = _v2_hash("/waku/2/default-waku/proto", DATA, CONTENT_TOPIC, b"", ts)
    entry = {
        "messageHash": "0x" + bridged_hash.hex(),
        "pubsubTopic": "/waku/2/default-waku/proto",
        "message": {
            "payload": base64.b64encode(DATA).decode(),
            "contentTopic": CONTENT_TOPIC,
            "version": 1,
            "timestamp": ts,
        },
    }
    v2 = decode_record(_raw("v2-json", json.dumps(entry).encode()), MAPPING)
    v1 = decode_record(_raw("v1-envelope", ENVELOPE), MAPPING)
    assert not v2["quarantined"], v2["reason"]
    assert v2["message_hash"] == bridged_hash and v2["pubsub_topic"] == "/waku/2/default-waku/proto"
    assert v2["dedup_key"] == v1["dedup_key"] and v2["from_v2"] is True
    # base64 hashes (nwaku < 0.35) are read too
    entry["messageHash"] = base64.b64encode(bridged_hash).decode()
    assert not decode_record(_raw("v2-json", json.dumps(entry).encode()), MAPPING)["quarantined"]


def test_v2_proto_row_with_meta() -> None:
    msg = waku_message_pb2.WakuMessage(
        payload=b"hi", content_topic="/app/1/x/proto", version=0, timestamp=5, meta=b"\x01\x02"
    )
    h = _v2_hash("/waku/2/rs/1/0", b"hi", "/app/1/x/proto", b"\x01\x02", 5)
    row = decode_record(
        _raw("v2-proto", msg.SerializeToString(), pubsub_topic="/waku/2/rs/1/0", claimed_hash=h),
        MAPPING,
    )
    assert not row["quarantined"] and row["message_hash"] == h and row["meta"] == b"\x01\x02"


def test_bad_records_are_quarantined_with_a_reason() -> None:
    ts = 10**18
    good = {"payload": "aGk=", "contentTopic": "/a/1/b/c", "version": 0, "timestamp": ts}
    cases = {
        "malformed envelope": _raw("v1-envelope", b"\xc2\x01\x02"),
        "negative timestamp": _raw("v1-envelope", rlp.encode([5, 10, TOPIC, b"x", 0])),
        "not JSON": _raw("v2-json", b"{nope"),
        "no 'message'": _raw("v2-json", json.dumps({"messageHash": "0x00"}).encode()),
        "base64": _raw(
            "v2-json",
            json.dumps({"pubsubTopic": "/p", "message": {**good, "payload": "!!"}}).encode(),
        ),
        "ephemeral": _raw(
            "v2-json",
            json.dumps({"pubsubTopic": "/p", "message": {**good, "ephemeral": True}}).encode(),
        ),
        "no pubsub topic": _raw("v2-json", json.dumps({"message": good}).encode()),
        "hash mismatch": _raw(
            "v2-json",
            json.dumps(
                {"pubsubTopic": "/p", "messageHash": "0x" + "11" * 32, "message": good}
            ).encode(),
        ),
        "meta": _raw(
            "v2-proto",
            waku_message_pb2.WakuMessage(
                payload=b"", content_topic="/a", meta=b"m" * 65
            ).SerializeToString(),
            pubsub_topic="/p",
        ),
        "record CRC mismatch": _raw(
            "v1-envelope", b"xx", error="record CRC mismatch: bytes 8..20 skipped"
        ),
        "unknown record format": _raw("v3", b"x"),
    }
    keys = set()
    for expected, raw in cases.items():
        row = decode_record(raw, MAPPING)
        assert row["quarantined"], expected
        assert expected in row["reason"], (expected, row["reason"])
        assert row["data"] == raw["data"] and row["source"] == "s1"
        keys.add(row["dedup_key"])
    assert len(keys) == 1  # same provenance -> same key; different provenance differs:
    other = decode_record(_raw("v3", b"x", location="elsewhere"), MAPPING)
    assert other["dedup_key"] not in keys


def test_decode_batch_keeps_rows_and_schema() -> None:
    raws = [_raw("v1-envelope", ENVELOPE), _raw("v1-envelope", b"junk")]
    batch = pa.RecordBatch.from_pylist(raws, schema=RAW_SCHEMA)
    out = decode_batch(batch, MAPPING)
    assert out.schema == MESSAGE_SCHEMA and out.num_rows == 2
    assert out.column("quarantined").to_pylist() == [False, True]
