"""The batch forms of the migration's per-record functions (what the Spark tasks call, no
Spark here): a batch gives, row for row, what the per-record function gives each record."""

from __future__ import annotations

import hashlib
import json

import coincurve
import pyarrow as pa
import rlp

from waku_legacy.crypto.payload import encode_payload
from waku_legacy.identity.topic_mapping import ChannelRoute, TopicMapping
from waku_legacy.migrate.archives import ARCHIVE_SCHEMA, archive_batch, archive_fields
from waku_legacy.migrate.decode import _RAW_NAMES, decode_columns, decode_record
from waku_legacy.migrate.records import MESSAGE_SCHEMA
from waku_legacy.proto import waku_message_pb2

TOPIC = bytes.fromhex("1a2b3c4d")
CONTENT_TOPIC = "/waku/1/0x1a2b3c4d/rfc26"
MAPPING = TopicMapping(
    "/waku/2/rs/16/32", {CONTENT_TOPIC: ChannelRoute("0x02ab", "chan", "/waku/2/rs/16/128")}
)
KEY = hashlib.sha256(b"channel key").digest()


def _raw(fmt: str, data: bytes | None, location: str, **extra: object) -> dict[str, object]:
    row: dict[str, object] = dict.fromkeys(_RAW_NAMES)
    row.update(source="s1", kind="k", location=location, rank=2, format=fmt, data=data)
    row.update(extra)
    return row


def test_decode_columns_gives_decode_record_row_for_row() -> None:
    message = {"payload": "aGk=", "contentTopic": "/a/1/b/c", "version": 0, "timestamp": 10**18}
    proto = waku_message_pb2.WakuMessage(
        payload=b"hi", content_topic="/app/1/x/proto", timestamp=5, meta=b"\x01"
    ).SerializeToString()
    raws = [
        _raw("v1-envelope", rlp.encode([1_650_000_100, 100, TOPIC, b"\x05" * 300, 7]), "a"),
        _raw("v1-envelope", rlp.encode([1_650_000_200, 50, b"\x00\x01\x02\x03", b"x", 1]), "b"),
        _raw("v2-json", json.dumps({"pubsubTopic": "/p", "message": message}).encode(), "c"),
        _raw("v2-proto", proto, "d", pubsub_topic="/waku/2/rs/1/0"),
        _raw("v1-envelope", b"\xc2\x01\x02", "e"),  # quarantined: malformed
        _raw("v2-json", b"{nope", "f"),  # quarantined: not JSON
        _raw("v1-envelope", b"xx", "g", error="record CRC mismatch"),
    ]
    columns = [[raw[name] for raw in raws] for name in _RAW_NAMES]
    batch = decode_columns(columns, MAPPING)
    assert batch.schema == MESSAGE_SCHEMA
    assert batch.to_pylist() == [decode_record(raw, MAPPING) for raw in raws]
    assert batch.column("quarantined").to_pylist() == [False] * 4 + [True] * 3


def test_decode_columns_of_no_records_is_an_empty_message_batch() -> None:
    batch = decode_columns([[] for _ in _RAW_NAMES], MAPPING)
    assert batch.schema == MESSAGE_SCHEMA and batch.num_rows == 0


def test_archive_batch_gives_archive_fields_row_for_row() -> None:
    author = coincurve.PrivateKey(hashlib.sha256(b"author").digest())
    good = encode_payload(b"hello", sign_with=author, symmetric_key=KEY)
    db_key = (1_650_000_000).to_bytes(4, "big") + hashlib.sha256(b"env").digest() + TOPIC
    rows = [
        (b"\x11" * 32, good, 1, 1_650_000_000 * 10**9, db_key, "2022-W15", "s1"),
        (b"\x22" * 32, b"\x00" * 40, 1, 1_650_000_500 * 10**9, None, "2022-W15", "s2"),
        (b"\x33" * 32, b"plain", 0, 1_650_100_000 * 10**9, None, "2022-W16", "s1"),
    ]
    names = ("message_hash", "payload", "version", "timestamp", "db_key", "week", "source")
    types = (pa.binary(), pa.binary(), pa.int32(), pa.int64(), pa.binary(), pa.string(),
             pa.string())  # fmt: skip
    columns = zip(*rows, strict=True)
    arrays = [pa.array(list(column), t) for column, t in zip(columns, types, strict=True)]
    batch = pa.RecordBatch.from_arrays(
        [pa.array([CONTENT_TOPIC] * len(rows), pa.string()), *arrays],
        names=["content_topic", *names],
    )
    out = archive_batch(batch, {CONTENT_TOPIC: KEY})
    assert out.schema == ARCHIVE_SCHEMA
    got = out.to_pylist()
    for row, (h, payload, version, ts, key, week, source) in zip(got, rows, strict=True):
        fields = archive_fields(
            message_hash=h, content_topic=CONTENT_TOPIC, payload=payload, version=version,
            timestamp_ns=ts, db_key=key, symmetric_key=KEY,
        )  # fmt: skip
        expected = {name: fields.get(name) for name in ARCHIVE_SCHEMA.names}
        expected.update(timestamp=ts // 10**9, week=week, source=source)
        assert row == expected
    assert [r["ok"] for r in got] == [True, False, False]
    assert got[0]["hash"] == db_key[4:36] and got[0]["payload"] is not None
    assert got[1]["reason"] and got[2]["reason"].startswith("payload version 0")
