"""Decoding raw records into v2 messages: plain functions, tested without Spark.

:func:`decode_record` turns one RAW record into one MESSAGE row (see
:mod:`~waku_legacy.migrate.records`), never raising: a record that does not decode comes back
quarantined with the reason. :func:`decode_batch` applies it to an Arrow record batch (what
``mapInArrow`` hands a Spark task).

- v1 envelopes are converted as nwaku's bridge does
  (:func:`~waku_legacy.mailserver_compat.wire.convert.envelope_to_waku_message`) onto the pubsub
  topic of the shard mapping, and keep their envelope bytes and status-go DB key.
- v2 records (REST JSON entries, serialized WakuMessages) keep the pubsub topic they were
  on; their hash is recomputed and must match the one the source claims.
- ``dedup_key`` identifies a message across sources: the deterministic hash, except that a
  version-1 message on a ``/waku/1/…/rfc26`` topic (a bridged v1 envelope) is keyed as if it
  were on the mapped pubsub topic, so that the bridge's v2 copy and the original envelope
  are one message even when the bridge published it on another pubsub topic.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from operator import itemgetter
from typing import Any

import pyarrow as pa

from waku_legacy.errors import WakuLegacyError
from waku_legacy.identity.message_hash import deterministic_hash, envelope_hash
from waku_legacy.identity.topic_mapping import TopicMapping
from waku_legacy.identity.topics import is_v1_content_topic
from waku_legacy.mailserver_compat.wire.convert import envelope_to_waku_message
from waku_legacy.mailserver_compat.wire.cursor import db_key_bytes
from waku_legacy.mailserver_compat.wire.envelope import Envelope
from waku_legacy.migrate.records import (
    FORMAT_V1,
    FORMAT_V2_JSON,
    FORMAT_V2_PROTO,
    MESSAGE_SCHEMA,
    UNKNOWN_WEEK,
    week_of,
)

__all__ = ["MAX_META_SIZE", "MAX_PAYLOAD_SIZE", "decode_batch", "decode_columns", "decode_record"]

MAX_META_SIZE = 64
MAX_PAYLOAD_SIZE = 10 * 1024 * 1024
_INT64_MAX = (1 << 63) - 1
_NAMES = tuple(MESSAGE_SCHEMA.names)
# A decoded row travels as a tuple in MESSAGE_SCHEMA order (what _message_row builds), so a
# batch becomes Arrow columns by one transpose, without a dict per record.
_ROW_ORDER = ("dedup_key", "message_hash", "pubsub_topic", "content_topic", "payload",
              "version", "timestamp", "meta", "envelope", "db_key", "community", "channel",
              "week", "source", "kind", "location", "rank", "from_v2", "quarantined", "reason",
              "data")  # fmt: skip
if _NAMES != _ROW_ORDER:
    raise RuntimeError("MESSAGE_SCHEMA's columns changed: update decode._ROW_ORDER")
_MESSAGE_HASH = _ROW_ORDER.index("message_hash")
_ROW_VALUES = itemgetter(*_NAMES)
Row = tuple[Any, ...]


class Quarantine(Exception):
    """Internal: a record to quarantine, with the reason."""


#: (source, kind, location, rank) of a record: what a decoded row carries of where it was read
Provenance = tuple[str, str, str, int]


def _provenance(raw: dict[str, Any]) -> Provenance:
    return raw["source"], raw["kind"], raw["location"], raw["rank"]


def _quarantine(raw: dict[str, Any], reason: str) -> Row:
    row: dict[str, Any] = dict.fromkeys(_NAMES)
    # A key of its own, so that a quarantined record is nobody's duplicate.
    provenance = f"{raw['source']}\0{raw['location']}".encode()
    row.update(
        dedup_key=hashlib.sha256(b"quarantined\0" + provenance).digest(),
        source=raw["source"], kind=raw["kind"], location=raw["location"], rank=raw["rank"],
        pubsub_topic=raw.get("pubsub_topic"), week=UNKNOWN_WEEK, quarantined=True,
        from_v2=raw.get("format") != FORMAT_V1, reason=reason, data=raw.get("data"),
    )  # fmt: skip
    return _ROW_VALUES(row)  # type: ignore[no-any-return]


def _message_row(
    provenance: Provenance,
    mapping: TopicMapping,
    *,
    pubsub_topic: str,
    content_topic: str,
    payload: bytes,
    version: int,
    timestamp: int,
    meta: bytes | None,
    envelope: bytes | None = None,
    db_key: bytes | None = None,
) -> Row:
    if len(payload) > MAX_PAYLOAD_SIZE:
        raise Quarantine(f"payload too large: {len(payload)} bytes, over {MAX_PAYLOAD_SIZE}")
    if meta is not None and len(meta) > MAX_META_SIZE:
        raise Quarantine(f"meta too large: {len(meta)} bytes, over {MAX_META_SIZE} (14/WAKU2)")
    if not -_INT64_MAX - 1 <= timestamp <= _INT64_MAX:
        raise Quarantine(f"timestamp out of range: {timestamp} does not fit in int64")
    if timestamp < 0:
        raise Quarantine(f"negative timestamp: {timestamp} (ttl larger than expiry?)")
    meta_bytes = meta or b""
    message_hash = deterministic_hash(pubsub_topic, payload, content_topic, meta_bytes, timestamp)
    route = mapping.route(content_topic)
    dedup_key = message_hash
    if version == 1:
        canonical = route.pubsub_topic if route is not None else mapping.default_pubsub_topic
        # (a v1 envelope's own row is on the canonical topic: no pattern match for it)
        if canonical != pubsub_topic and is_v1_content_topic(content_topic):
            dedup_key = deterministic_hash(canonical, payload, content_topic, meta_bytes, timestamp)
    return (
        dedup_key, message_hash, pubsub_topic, content_topic, payload, version, timestamp, meta,
        envelope, db_key,
        route.community if route is not None else None,
        route.channel if route is not None else None,
        week_of(timestamp), *provenance,
        envelope is None,  # from_v2
        False, None, None,  # quarantined, reason, data
    )  # fmt: skip


def _decode_v1(raw: dict[str, Any], mapping: TopicMapping) -> Row:
    return _v1_row(raw["data"], _provenance(raw), mapping)


def _v1_row(data: bytes, provenance: Provenance, mapping: TopicMapping) -> Row:
    envelope = Envelope.decode(data)
    message = envelope_to_waku_message(envelope)
    # Envelope.decode accepts canonical RLP only (as go-ethereum), so the bytes read are the
    # bytes status-go hashed: keccak of them is the envelope hash without re-encoding.
    db_key = db_key_bytes(envelope.sent_time, envelope_hash(data), envelope.topic)
    return _message_row(
        provenance, mapping,
        pubsub_topic=mapping.pubsub_for(message.content_topic),
        content_topic=message.content_topic,
        payload=message.payload,
        version=message.version,
        timestamp=message.timestamp,
        meta=None,
        envelope=data,
        db_key=db_key,
    )  # fmt: skip


def _check_claim(raw: dict[str, Any], row: Row) -> Row:
    claimed = raw.get("claimed_hash")
    if claimed and bytes(claimed) != row[_MESSAGE_HASH]:
        raise Quarantine(
            f"message hash mismatch: the source says 0x{bytes(claimed).hex()}, "
            f"the message hashes to 0x{row[_MESSAGE_HASH].hex()}"
        )
    return row


def _decode_v2_json(raw: dict[str, Any], mapping: TopicMapping) -> Row:
    from waku_legacy.store.rest_json import parse_hash, parse_message

    try:
        entry = json.loads(raw["data"])
    except (ValueError, UnicodeDecodeError) as exc:
        raise Quarantine(f"REST message entry is not JSON: {exc}") from None
    if not isinstance(entry, dict):
        raise Quarantine("REST message entry is not a JSON object")
    if not isinstance(entry.get("message"), dict):
        raise Quarantine("REST message entry has no 'message' object (includeData=false?)")
    message = parse_message(entry["message"])
    if message.ephemeral:
        raise Quarantine("ephemeral message (stores do not keep them)")
    pubsub_topic = entry.get("pubsubTopic") or raw.get("pubsub_topic")
    if not isinstance(pubsub_topic, str) or not pubsub_topic:
        raise Quarantine("no pubsub topic: neither the entry nor the source names one")
    row = _message_row(
        _provenance(raw), mapping,
        pubsub_topic=pubsub_topic,
        content_topic=message.content_topic,
        payload=bytes(message.payload),
        version=message.version,
        timestamp=message.timestamp,
        meta=bytes(message.meta) or None,
    )  # fmt: skip
    if entry.get("messageHash") is not None:
        raw = {**raw, "claimed_hash": parse_hash(entry["messageHash"])}
    return _check_claim(raw, row)


def _decode_v2_proto(raw: dict[str, Any], mapping: TopicMapping) -> Row:
    from waku_legacy.proto import waku_message_pb2
    from waku_legacy.proto.codec import parse_message

    message = parse_message(
        waku_message_pb2.WakuMessage, raw["data"], "WakuMessage", max_size=2 * MAX_PAYLOAD_SIZE
    )
    pubsub_topic = raw.get("pubsub_topic")
    if not pubsub_topic:
        raise Quarantine("no pubsub topic for a v2 message")
    if message.ephemeral:
        raise Quarantine("ephemeral message (stores do not keep them)")
    row = _message_row(
        _provenance(raw), mapping,
        pubsub_topic=pubsub_topic,
        content_topic=message.content_topic,
        payload=message.payload,
        version=message.version,
        timestamp=message.timestamp,
        meta=message.meta if message.HasField("meta") and message.meta else None,
    )  # fmt: skip
    return _check_claim(raw, row)


_DECODERS = {
    FORMAT_V1: _decode_v1,
    FORMAT_V2_JSON: _decode_v2_json,
    FORMAT_V2_PROTO: _decode_v2_proto,
}


def decode_record(raw: dict[str, Any], mapping: TopicMapping) -> dict[str, Any]:
    """One RAW record (a dict of its columns) -> one MESSAGE row (a dict)."""
    return dict(zip(_NAMES, _decode_values(raw, mapping), strict=True))


def _decode_values(raw: dict[str, Any], mapping: TopicMapping) -> Row:
    """:func:`decode_record`'s row as a tuple in MESSAGE_SCHEMA order."""
    if raw.get("error"):
        return _quarantine(raw, raw["error"])
    if raw.get("data") is None:
        return _quarantine(raw, "no data")
    decoder = _DECODERS.get(raw.get("format") or "")
    if decoder is None:
        return _quarantine(raw, f"unknown record format {raw.get('format')!r}")
    try:
        return decoder(raw, mapping)
    except Quarantine as exc:
        return _quarantine(raw, str(exc))
    except WakuLegacyError as exc:
        return _quarantine(raw, str(exc))


def _decode_fast(values: tuple[Any, ...], mapping: TopicMapping) -> Row:
    """:func:`_decode_values` of a record given as its RAW values: a readable v1 envelope
    (most records of a migration) without building the record's dict."""
    source, kind, location, rank, fmt, data, _, _, error = values
    if fmt == FORMAT_V1 and data is not None and error is None:
        try:
            return _v1_row(data, (source, kind, location, rank), mapping)
        except (Quarantine, WakuLegacyError):
            pass  # the dict's way gives the quarantined row
    return _decode_values(dict(zip(_RAW_NAMES, values, strict=True)), mapping)


_RAW_NAMES = ("source", "kind", "location", "rank", "format", "data", "pubsub_topic",
              "claimed_hash", "error")  # fmt: skip


def decode_batch(batch: pa.RecordBatch, mapping: TopicMapping) -> pa.RecordBatch:
    """A RAW record batch -> a MESSAGE record batch, row for row."""
    return decode_columns([batch.column(name).to_pylist() for name in _RAW_NAMES], mapping)


def decode_columns(columns: Sequence[Sequence[Any]], mapping: TopicMapping) -> pa.RecordBatch:
    """RAW records as Python column lists (in RAW_SCHEMA order) -> a MESSAGE record batch:
    what a source reader decoding in its own worker uses, without building RAW Arrow."""
    rows = [_decode_fast(values, mapping) for values in zip(*columns, strict=True)]
    columns_out = list(zip(*rows, strict=True)) if rows else [()] * len(_NAMES)
    return pa.RecordBatch.from_arrays(
        [pa.array(c, f.type) for c, f in zip(columns_out, MESSAGE_SCHEMA, strict=True)],
        schema=MESSAGE_SCHEMA,
    )
