"""nwaku's REST JSON for the v2 store: the one codec for REST servers and clients.

Used by the bridge's ``GET /store/v3/messages`` (server side) and by everything that reads a
remote node's store over REST (the bridge's history pull, the migration's ``store-rest``
source). Facts, from nwaku ``waku_api/rest/store/types.nim`` and ``waku_store/common.nim``
and the waku-rest-api OpenAPI description:

- a message object, keys in nwaku's order: ``payload`` (standard base64), ``contentTopic``,
  ``meta`` (base64, only when non-empty), ``version``, ``timestamp`` (ns), ``ephemeral``
  (``proof`` only with RLN, which this project never stores);
- one result: ``{"messageHash": "0x<hex>", "message"?: {...}, "pubsubTopic"?: "..."}``;
  ``message`` and ``pubsubTopic`` are present only when the query asked ``includeData``;
- a response: ``{"requestId", "statusCode", "statusDesc", "messages": [...],
  "paginationCursor"?: "0x<hex>"}``; the cursor is present only when more messages follow;
- hashes and cursors in requests: ``0x`` hex since nwaku 0.35 (``0x`` optional); older nodes
  used base64, which broke on ``+`` and ``/`` in URLs. :func:`parse_hash` reads hex, standard
  base64 (also with ``+`` turned into a space by form decoding) and URL-safe base64.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from waku_legacy.errors import DecodeError, LimitExceeded
from waku_legacy.identity.message_hash import message_hash
from waku_legacy.proto import waku_message_pb2
from waku_legacy.store.types import StoredMessage

__all__ = [
    "MAX_HASHES_PER_QUERY",
    "MAX_META_SIZE",
    "MAX_PAYLOAD_SIZE",
    "HashMismatch",
    "RestJsonError",
    "RestKeyValue",
    "RestStoreResponse",
    "format_hash",
    "key_value_json",
    "lenient_b64decode",
    "message_json",
    "parse_hash",
    "parse_hashes",
    "parse_key_value",
    "parse_message",
    "parse_store_response",
    "response_json",
    "response_json_bytes",
    "store_query_params",
]

HASH_SIZE = 32
MAX_META_SIZE = 64  # 14/WAKU2-MESSAGE
# nwaku's MaxWakuMessageSize is 150 KiB; v1-era Status payloads reach 1 MiB. Anything over
# this is not a message we should take from a peer's JSON.
MAX_PAYLOAD_SIZE = 1 << 20
MAX_HASHES_PER_QUERY = 100  # bounds the SQL IN list; one page holds at most 100 anyway
MAX_TOPIC_LENGTH = 1024
_U32 = (1 << 32) - 1
_I64 = (1 << 63) - 1
_HEX = re.compile(r"[0-9a-fA-F]*")


class RestJsonError(DecodeError):
    """REST JSON (or a REST query value) that does not hold what nwaku's API defines."""


class HashMismatch(RestJsonError):
    """A message whose ``messageHash`` is not the deterministic hash of its contents."""


# -- hashes and cursors ---------------------------------------------------------------------


def format_hash(digest: bytes) -> str:
    """``0x`` + lowercase hex: how nwaku (0.35+) writes hashes and cursors."""
    return "0x" + bytes(digest).hex()


def lenient_b64decode(text: str) -> bytes | None:
    """Standard or URL-safe base64, padding optional, a space read as '+' (form decoding
    turns an unescaped '+' into one); None when it is not base64."""
    b64 = text.replace(" ", "+").replace("-", "+").replace("_", "/")
    b64 += "=" * (-len(b64) % 4)
    try:
        return base64.b64decode(b64, validate=True)
    except (binascii.Error, ValueError):
        return None


def parse_hash(text: str, what: str = "message hash") -> bytes:
    """A 32-byte hash from ``0x`` hex, bare hex, standard or URL-safe base64."""
    if not isinstance(text, str):
        raise RestJsonError(what, f"expected a string, got {type(text).__name__}")
    # Only line noise is stripped: a space may be a form-decoded '+' of base64.
    value = text.strip("\t\r\n")
    if len(value) > 200:
        raise RestJsonError(what, f"{len(value)} characters is far too long for a 32-byte hash")
    prefixed = value[:2] in ("0x", "0X")
    digits = value[2:] if prefixed else value
    if _HEX.fullmatch(digits) and not len(digits) % 2 and (prefixed or len(digits) == 64):
        raw = bytes.fromhex(digits)
    else:
        # Base64 (a base64 text may itself start with "0x").
        b64_raw = lenient_b64decode(value)
        if b64_raw is None or (prefixed and len(b64_raw) != HASH_SIZE):
            raise RestJsonError(
                what,
                f"{value!r} is neither 0x followed by 64 hex digits nor base64 of a 32-byte hash",
            )
        raw = b64_raw
    if len(raw) != HASH_SIZE:
        raise RestJsonError(what, f"a hash is {HASH_SIZE} bytes, {value!r} holds {len(raw)}")
    return raw


def parse_hashes(text: str, what: str = "hashes") -> list[bytes]:
    """A comma-separated list of hashes (empty items are skipped, as nwaku does)."""
    items = [item for item in text.split(",") if item.strip()]
    if len(items) > MAX_HASHES_PER_QUERY:
        raise LimitExceeded(
            what, f"{len(items)} hashes in one query; at most {MAX_HASHES_PER_QUERY}"
        )
    return [parse_hash(item, f"{what} item {n + 1}") for n, item in enumerate(items)]


# -- writing (server side) --------------------------------------------------------------------


def message_json(message: StoredMessage) -> dict[str, Any]:
    """nwaku's JSON for one stored message (keys in nwaku's order)."""
    out: dict[str, Any] = {
        "payload": base64.b64encode(message.payload).decode("ascii"),
        "contentTopic": message.content_topic,
    }
    if message.meta:
        out["meta"] = base64.b64encode(message.meta).decode("ascii")
    out["version"] = message.version
    out["timestamp"] = message.timestamp
    out["ephemeral"] = False  # ephemeral messages are never stored
    return out


def key_value_json(message: StoredMessage, *, include_data: bool) -> dict[str, Any]:
    """One entry of ``messages``: the hash, and with ``include_data`` the message and topic."""
    if not include_data:
        return {"messageHash": format_hash(message.message_hash)}
    return {
        "messageHash": format_hash(message.message_hash),
        "message": message_json(message),
        "pubsubTopic": message.pubsub_topic,
    }


def response_json(
    request_id: str,
    messages: Iterable[StoredMessage],
    *,
    include_data: bool,
    cursor: bytes | None,
    status_code: int = 200,
    status_desc: str = "OK",
) -> dict[str, Any]:
    """The ``StoreQueryResponse`` object nwaku's REST API answers with."""
    out: dict[str, Any] = {
        "requestId": request_id,
        "statusCode": status_code,
        "statusDesc": status_desc,
        "messages": [key_value_json(m, include_data=include_data) for m in messages],
    }
    if cursor is not None:
        out["paginationCursor"] = format_hash(cursor)
    return out


_json_string = json.encoder.encode_basestring_ascii
_TOPIC_CACHE: dict[str, str] = {}


def _topic_json(topic: str) -> str:
    """A topic as a JSON string literal (topics repeat: cached, bounded)."""
    encoded = _TOPIC_CACHE.get(topic)
    if encoded is None:
        encoded = _json_string(topic)
        if len(_TOPIC_CACHE) < 4096:
            _TOPIC_CACHE[topic] = encoded
    return encoded


def response_json_bytes(
    request_id: str,
    messages: Iterable[StoredMessage],
    *,
    include_data: bool,
    cursor: bytes | None,
    status_code: int = 200,
    status_desc: str = "OK",
) -> bytes:
    """``json.dumps(response_json(...), separators=(",", ":")).encode()`` (ASCII, non-ASCII
    escaped), built directly: the REST server's hot path, several times faster for full
    pages than building dicts and encoding them."""
    b64 = binascii.b2a_base64
    parts = [
        f'{{"requestId":{_json_string(request_id)},"statusCode":{int(status_code)},'
        f'"statusDesc":{_json_string(status_desc)},"messages":['
    ]
    entries = []
    if include_data:
        for m in messages:
            meta = f',"meta":"{b64(m.meta, newline=False).decode("ascii")}"' if m.meta else ""
            entries.append(
                f'{{"messageHash":"0x{m.message_hash.hex()}","message":{{"payload":"'
                f'{b64(m.payload, newline=False).decode("ascii")}","contentTopic":'
                f'{_topic_json(m.content_topic)}{meta},"version":{int(m.version)},'
                f'"timestamp":{int(m.timestamp)},"ephemeral":false}},"pubsubTopic":'
                f"{_topic_json(m.pubsub_topic)}}}"
            )
    else:
        entries = [f'{{"messageHash":"0x{m.message_hash.hex()}"}}' for m in messages]
    parts.append(",".join(entries))
    parts.append("]")
    if cursor is not None:
        parts.append(f',"paginationCursor":"0x{bytes(cursor).hex()}"')
    parts.append("}")
    return "".join(parts).encode("ascii")


# -- reading (client side) -----------------------------------------------------------------


def _b64(value: Any, what: str, field: str, limit: int) -> bytes:
    if not isinstance(value, str):
        raise RestJsonError(what, f"'{field}' must be a base64 string, got {type(value).__name__}")
    if len(value) > (limit + 2) // 3 * 4 + 4:
        raise LimitExceeded(what, f"'{field}' is over {limit} bytes")
    try:
        raw = base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        raise RestJsonError(what, f"'{field}' is not standard base64") from None
    if len(raw) > limit:
        raise LimitExceeded(what, f"'{field}' of {len(raw)} bytes is over {limit} bytes")
    return raw


def _int(value: Any, what: str, field: str, low: int, high: int) -> int:
    if not isinstance(value, int) or isinstance(value, bool):
        raise RestJsonError(what, f"'{field}' must be an integer, got {type(value).__name__}")
    if not low <= value <= high:
        raise RestJsonError(what, f"'{field}' {value} is outside {low}..{high}")
    return value


def _topic(value: Any, what: str, field: str) -> str:
    if not isinstance(value, str):
        raise RestJsonError(what, f"'{field}' must be a string, got {type(value).__name__}")
    if len(value) > MAX_TOPIC_LENGTH:
        raise LimitExceeded(what, f"'{field}' of {len(value)} characters is too long")
    try:
        value.encode("utf-8")  # JSON allows lone surrogates ("\ud800"); topics are UTF-8
    except UnicodeEncodeError:
        raise RestJsonError(what, f"'{field}' is not valid Unicode (a lone surrogate)") from None
    return value


def parse_message(obj: Any, what: str = "REST message") -> waku_message_pb2.WakuMessage:
    """nwaku's message JSON to a protobuf ``WakuMessage`` (limits enforced, unknown keys
    refused as nwaku's reader does, except ``proof`` which is read and dropped)."""
    if not isinstance(obj, Mapping):
        raise RestJsonError(what, f"expected a JSON object, got {type(obj).__name__}")
    unknown = set(obj) - {"payload", "contentTopic", "meta", "version", "timestamp",
                          "ephemeral", "proof"}  # fmt: skip
    if unknown:
        raise RestJsonError(what, f"unknown key(s) {sorted(unknown)}")
    if "contentTopic" not in obj:
        raise RestJsonError(what, "'contentTopic' is missing")
    message = waku_message_pb2.WakuMessage(
        payload=_b64(obj.get("payload", ""), what, "payload", MAX_PAYLOAD_SIZE),
        content_topic=_topic(obj["contentTopic"], what, "contentTopic"),
    )
    if "version" in obj:
        message.version = _int(obj["version"], what, "version", 0, _U32)
    if "timestamp" in obj:
        message.timestamp = _int(obj["timestamp"], what, "timestamp", -_I64 - 1, _I64)
    meta = obj.get("meta")
    if meta:
        message.meta = _b64(meta, what, "meta", MAX_META_SIZE)
    ephemeral = obj.get("ephemeral")
    if ephemeral is not None:
        if not isinstance(ephemeral, bool):
            raise RestJsonError(what, "'ephemeral' must be a boolean")
        if ephemeral:
            message.ephemeral = True
    return message


@dataclass(frozen=True, slots=True)
class RestKeyValue:
    """One entry of a REST store response."""

    message_hash: bytes
    pubsub_topic: str | None = None
    message: waku_message_pb2.WakuMessage | None = None

    def stored(self, *, verify_hash: bool = True) -> StoredMessage:
        """The store row for this entry (needs ``includeData``). With ``verify_hash`` the
        hash must be the deterministic hash of the contents (:class:`HashMismatch`)."""
        what = f"REST message {format_hash(self.message_hash)}"
        if self.message is None or self.pubsub_topic is None:
            raise RestJsonError(what, "no message data (query with includeData=true)")
        m = self.message
        if verify_hash:
            expected = message_hash(self.pubsub_topic, m)
            if expected != self.message_hash:
                raise HashMismatch(
                    what, f"its contents hash to {format_hash(expected)} on {self.pubsub_topic}"
                )
        return StoredMessage(
            self.message_hash,
            self.pubsub_topic,
            m.content_topic,
            bytes(m.payload),
            m.version,
            m.timestamp,
            bytes(m.meta) if m.meta else None,
        )


def parse_key_value(obj: Any, what: str = "REST store entry") -> RestKeyValue:
    """One ``{"messageHash", "message"?, "pubsubTopic"?}`` entry of a store response."""
    if not isinstance(obj, Mapping):
        raise RestJsonError(what, "expected a JSON object")
    if "messageHash" not in obj:
        raise RestJsonError(what, "'messageHash' is missing")
    digest = parse_hash(obj["messageHash"], f"{what} messageHash")
    message = parse_message(obj["message"], what) if obj.get("message") else None
    pubsub = obj.get("pubsubTopic")
    return RestKeyValue(
        digest, None if pubsub is None else _topic(pubsub, what, "pubsubTopic"), message
    )


@dataclass(frozen=True, slots=True)
class RestStoreResponse:
    request_id: str
    status_code: int
    status_desc: str
    messages: list[RestKeyValue]
    cursor: bytes | None


def parse_store_response(obj: Any) -> RestStoreResponse:
    """A ``StoreQueryResponse`` JSON object (already parsed from text) to typed values."""
    what = "REST store response"
    if not isinstance(obj, Mapping):
        raise RestJsonError(what, f"expected a JSON object, got {type(obj).__name__}")
    for key in ("requestId", "statusCode", "statusDesc", "messages"):
        if key not in obj:
            raise RestJsonError(what, f"'{key}' is missing")
    request_id = obj["requestId"]
    status_desc = obj["statusDesc"]
    if not isinstance(request_id, str) or not isinstance(status_desc, str):
        raise RestJsonError(what, "'requestId' and 'statusDesc' must be strings")
    status_code = _int(obj["statusCode"], what, "statusCode", 0, _U32)
    raw_messages = obj["messages"]
    if not isinstance(raw_messages, list):
        raise RestJsonError(what, "'messages' must be a list")
    if len(raw_messages) > 10_000:
        raise LimitExceeded(what, f"{len(raw_messages)} messages in one page")
    entries = [parse_key_value(item, f"{what} message {n}") for n, item in enumerate(raw_messages)]
    raw_cursor = obj.get("paginationCursor")
    cursor = None if not raw_cursor else parse_hash(raw_cursor, f"{what} paginationCursor")
    return RestStoreResponse(request_id, status_code, status_desc, entries, cursor)


def store_query_params(
    *,
    pubsub_topic: str | None = None,
    content_topics: Sequence[str] = (),
    start_time: int | None = None,
    end_time: int | None = None,
    hashes: Sequence[bytes] = (),
    cursor: bytes | None = None,
    page_size: int | None = None,
    ascending: bool = True,
    include_data: bool = True,
    cursor_encoding: str = "hex",
) -> dict[str, str]:
    """Query parameters for ``GET /store/v3/messages`` (``cursor_encoding="base64"`` for
    nodes older than nwaku 0.35)."""
    if cursor_encoding not in ("hex", "base64"):
        raise ValueError("cursor_encoding must be 'hex' or 'base64'")

    def enc(digest: bytes) -> str:
        if cursor_encoding == "hex":
            return format_hash(digest)
        return base64.b64encode(digest).decode("ascii")

    params: dict[str, str] = {
        "includeData": "true" if include_data else "false",
        "ascending": "true" if ascending else "false",
    }
    if pubsub_topic:
        params["pubsubTopic"] = pubsub_topic
    if content_topics:
        params["contentTopics"] = ",".join(content_topics)
    if start_time is not None:
        params["startTime"] = str(start_time)
    if end_time is not None:
        params["endTime"] = str(end_time)
    if hashes:
        params["hashes"] = ",".join(enc(h) for h in hashes)
    if cursor is not None:
        params["cursor"] = enc(cursor)
    if page_size is not None:
        params["pageSize"] = str(page_size)
    return params
