"""The row shapes flowing through the migration (Arrow schemas, as Spark sees them).

RAW (what sources produce; one row per record read, with provenance):
    source, kind, location   which source, its kind, where in it (key, offset, page, …)
    rank                     the source's position in the config (earlier wins ties)
    format                   "v1-envelope" (data = envelope RLP), "v2-json" (data = one
                             nwaku REST message entry as JSON), "v2-proto" (data = a
                             serialized WakuMessage)
    data, pubsub_topic       the bytes; the pubsub topic a v2 record was on (if known)
    claimed_hash             the hash a v2 source says the message has (checked)
    error                    set when the source itself could not read this record

MESSAGE (what decoding produces; quarantined records keep ``data`` and a ``reason``):
    dedup_key, message_hash, pubsub_topic, content_topic, payload, version, timestamp (ns),
    meta, envelope, db_key, community, channel, week, source, kind, location, rank,
    from_v2, quarantined, reason, data
"""

from __future__ import annotations

import datetime as _dt
import functools

import pyarrow as pa

__all__ = [
    "FORMAT_V1",
    "FORMAT_V2_JSON",
    "FORMAT_V2_PROTO",
    "MESSAGE_SCHEMA",
    "RAW_SCHEMA",
    "UNKNOWN_WEEK",
    "spark_ddl",
    "week_of",
]

FORMAT_V1 = "v1-envelope"
FORMAT_V2_JSON = "v2-json"
FORMAT_V2_PROTO = "v2-proto"
UNKNOWN_WEEK = "unknown"

RAW_SCHEMA = pa.schema(
    [
        ("source", pa.string()),
        ("kind", pa.string()),
        ("location", pa.string()),
        ("rank", pa.int32()),
        ("format", pa.string()),
        ("data", pa.binary()),
        ("pubsub_topic", pa.string()),
        ("claimed_hash", pa.binary()),
        ("error", pa.string()),
    ]
)

MESSAGE_SCHEMA = pa.schema(
    [
        ("dedup_key", pa.binary()),
        ("message_hash", pa.binary()),
        ("pubsub_topic", pa.string()),
        ("content_topic", pa.string()),
        ("payload", pa.binary()),
        ("version", pa.int32()),
        ("timestamp", pa.int64()),
        ("meta", pa.binary()),
        ("envelope", pa.binary()),
        ("db_key", pa.binary()),
        ("community", pa.string()),
        ("channel", pa.string()),
        ("week", pa.string()),
        ("source", pa.string()),
        ("kind", pa.string()),
        ("location", pa.string()),
        ("rank", pa.int32()),
        ("from_v2", pa.bool_()),
        ("quarantined", pa.bool_()),
        ("reason", pa.string()),
        ("data", pa.binary()),
    ]
)

_SPARK_TYPES = {
    pa.string(): "STRING",
    pa.binary(): "BINARY",
    pa.int32(): "INT",
    pa.int64(): "BIGINT",
    pa.bool_(): "BOOLEAN",
}


def spark_ddl(schema: pa.Schema) -> str:
    """The Spark DDL string of an Arrow schema made of the simple types above."""
    return ", ".join(f"{f.name} {_SPARK_TYPES[f.type]}" for f in schema)


_EPOCH = _dt.datetime(1970, 1, 1, tzinfo=_dt.UTC)


def week_of(timestamp_ns: int | None) -> str:
    """ISO week (``2021-W07``) of a timestamp in nanoseconds, UTC."""
    if timestamp_ns is None or timestamp_ns <= 0:
        return UNKNOWN_WEEK
    return _week_of_day(timestamp_ns // 86_400_000_000_000)


@functools.lru_cache(maxsize=4096)
def _week_of_day(day_number: int) -> str:
    try:
        day = _EPOCH + _dt.timedelta(days=day_number)
    except OverflowError:
        return UNKNOWN_WEEK
    year, week, _ = day.isocalendar()
    return f"{year}-W{week:02d}"
