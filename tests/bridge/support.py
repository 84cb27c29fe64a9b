"""Shared helpers for the bridge tests: store rows, a running service, schemas, a validator."""

from __future__ import annotations

import base64
import binascii
import hashlib
import random
from collections.abc import Sequence
from typing import Any

from waku_legacy.bridge.config import parse_config
from waku_legacy.store import StoredMessage

PUBSUB = "/waku/2/rs/16/128"
OTHER_PUBSUB = "/waku/2/rs/16/32"
CONTENT = [f"/waku/1/0x0000000{i}/rfc26" for i in range(4)]
BASE_TS = 1_700_000_000_000_000_000
ADMIN_TOKEN = "admin-token-0123456789abcdef"


def deterministic_hash(pubsub: str, payload: bytes, content: str, meta: bytes | None, ts: int):
    """14/WAKU2-MESSAGE hash written out by hand (independent of the code under test)."""
    return hashlib.sha256(
        pubsub.encode() + payload + content.encode() + (meta or b"") + ts.to_bytes(8, "big")
    ).digest()


def make_rows(n: int, *, seed: int = 7, ties: int = 40) -> list[StoredMessage]:
    """``n`` messages over two shards and four topics, with many timestamp ties."""
    rnd = random.Random(seed)
    rows = []
    for i in range(n):
        pubsub = PUBSUB if i % 5 else OTHER_PUBSUB
        content = CONTENT[i % 4]
        payload = b"message %d " % i + rnd.randbytes(rnd.randrange(0, 40))
        meta = b"meta%d" % i if i % 7 == 0 else None
        ts = BASE_TS + rnd.randrange(max(1, n // ties)) * 1_000_000
        rows.append(
            StoredMessage(
                deterministic_hash(pubsub, payload, content, meta, ts),
                pubsub,
                content,
                payload,
                1,
                ts,
                meta,
            )
        )
    return rows


def order(rows: Sequence[StoredMessage]) -> list[StoredMessage]:
    return sorted(rows, key=lambda r: (r.timestamp, r.message_hash))


def bridge_config(tmp_path, store_url: str, **sections: Any):
    data: dict[str, Any] = {
        "server": {"listen": "127.0.0.1:0", "reader_threads": 3, "shutdown_timeout": 5},
        "store": {"url": store_url},
        "admin": {"token": ADMIN_TOKEN},
        "logging": {"level": "warning"},
    }
    data.update(sections)
    # one process unless a test asks for workers ([server] workers defaults to the cores)
    data["server"] = {"workers": 1, **data["server"]}
    return parse_config(data, base_dir=tmp_path, origin="test.toml")


# -- the published OpenAPI description, as data ---------------------------------------------
#
# Transcribed from waku-org/waku-rest-api api-spec/schemas/apitypes.yaml (WakuMessage,
# WakuMessageKeyValue, StoreQueryResponse, HealthReport, WakuInfo) and api-spec/storeapi.yaml.
# One deliberate difference, because deployed nwaku wins (waku_api/rest/store/types.nim):
# the spec names the hash key ``message_hash`` and marks ``message`` required, while nwaku
# writes ``messageHash``, adds ``pubsubTopic`` and omits ``message`` unless includeData=true.

WAKU_MESSAGE = {
    "type": "object",
    "properties": {
        "payload": {"type": "string", "format": "byte"},
        "contentTopic": {"type": "string"},
        "version": {"type": "integer", "format": "int32"},
        "timestamp": {"type": "integer", "format": "int64"},
        "ephemeral": {"type": "boolean"},
        "proof": {"type": "string"},
        "meta": {"type": "string", "format": "byte"},
    },
    "required": ["payload", "contentTopic", "timestamp"],
}
SPEC_KEY_VALUE = {
    "type": "object",
    "properties": {"message_hash": {"type": "string"}, "message": WAKU_MESSAGE},
    "required": ["message_hash", "message"],
}
SPEC_STORE_QUERY_RESPONSE = {
    "type": "object",
    "properties": {
        "requestId": {"type": "string"},
        "statusCode": {"type": "integer", "format": "uint32"},
        "statusDesc": {"type": "string"},
        "messages": {"type": "array", "items": SPEC_KEY_VALUE},
        "paginationCursor": {"type": "string"},
    },
    "required": ["requestId", "statusCode", "statusDesc", "messages"],
}


def deployed_store_response(include_data: bool) -> dict[str, Any]:
    """The spec schema with nwaku's deployed key names (see above)."""
    key_value = {
        "type": "object",
        "properties": {
            "messageHash": {"type": "string", "pattern_hex32": True},
            "message": WAKU_MESSAGE,
            "pubsubTopic": {"type": "string"},
        },
        "required": ["messageHash", "message", "pubsubTopic"] if include_data else ["messageHash"],
    }
    schema = dict(SPEC_STORE_QUERY_RESPONSE)
    schema["properties"] = dict(schema["properties"])
    schema["properties"]["messages"] = {"type": "array", "items": key_value}
    schema["properties"]["paginationCursor"] = {"type": "string", "pattern_hex32": True}
    return schema


# Current nwaku (v0.36 on): HealthStatus enum names (node/health_monitor/health_status.nim),
# each protocol {"<name>": STATUS, "desc"?: reason} (rest_api/endpoint/health/types.nim).
HEALTH_STATUS = ["INITIALIZING", "SYNCHRONIZING", "READY", "NOT_READY", "NOT_MOUNTED",
                 "SHUTTING_DOWN"]  # fmt: skip
HEALTH_REPORT = {
    "type": "object",
    "properties": {
        "nodeHealth": {"type": "string", "enum": HEALTH_STATUS},
        "protocolsHealth": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {"desc": {"type": "string"}},
                "additional": {"type": "string", "enum": HEALTH_STATUS},
            },
        },
    },
    "required": ["nodeHealth", "protocolsHealth"],
}
WAKU_INFO = {
    "type": "object",
    "properties": {
        "listenAddresses": {"type": "array", "items": {"type": "string"}},
        "enrUri": {"type": "string"},
    },
    "required": ["listenAddresses"],
    "open": True,  # the spec allows more keys; the bridge adds a few
}
# Legacy store (legacystoreapi.yaml -> StoreResponse), nwaku's deployed shape
# (waku_api/rest/legacy_store/types.nim): times are integers and the digest is {data: b64}.
LEGACY_STORE_RESPONSE = {
    "type": "object",
    "properties": {
        "messages": {"type": "array", "items": dict(WAKU_MESSAGE, required=["payload",
                                                                              "contentTopic"])},
        "cursor": {
            "type": "object",
            "properties": {
                "pubsubTopic": {"type": "string"},
                "senderTime": {"type": "integer", "format": "int64"},
                "storeTime": {"type": "integer", "format": "int64"},
                "digest": {
                    "type": "object",
                    "properties": {"data": {"type": "string", "format": "byte"}},
                    "required": ["data"],
                },
            },
            "required": ["pubsubTopic", "senderTime", "storeTime", "digest"],
        },
        "errorMessage": {"type": "string"},
    },
    "required": ["messages"],
}  # fmt: skip

_RANGES = {"int32": (-(1 << 31), (1 << 31) - 1), "uint32": (0, (1 << 32) - 1),
           "int64": (-(1 << 63), (1 << 63) - 1)}  # fmt: skip


def validate(value: Any, schema: dict[str, Any], path: str = "$") -> None:
    """A small structural validator for the subset of OpenAPI the schemas above use.
    Objects are closed (no keys beyond ``properties``) unless the schema says ``open``."""
    kind = schema.get("type")
    if kind == "object":
        assert isinstance(value, dict), f"{path}: expected an object, got {value!r}"
        for key in schema.get("required", []):
            assert key in value, f"{path}: required key {key!r} missing"
        props = schema.get("properties", {})
        for key, item in value.items():
            if key in props:
                validate(item, props[key], f"{path}.{key}")
            elif "additional" in schema:
                validate(item, schema["additional"], f"{path}.{key}")
            else:
                assert schema.get("open"), f"{path}: unexpected key {key!r}"
    elif kind == "array":
        assert isinstance(value, list), f"{path}: expected an array"
        for n, item in enumerate(value):
            validate(item, schema["items"], f"{path}[{n}]")
    elif kind == "string":
        assert isinstance(value, str), f"{path}: expected a string, got {value!r}"
        if schema.get("format") == "byte":
            try:
                base64.b64decode(value, validate=True)
            except binascii.Error as exc:
                raise AssertionError(f"{path}: not base64: {value!r}") from exc
        if schema.get("pattern_hex32"):
            assert value.startswith("0x") and len(value) == 66, f"{path}: not 0x + 64 hex"
            bytes.fromhex(value[2:])
        if "enum" in schema:
            assert value in schema["enum"], f"{path}: {value!r} not in {schema['enum']}"
    elif kind == "integer":
        assert isinstance(value, int) and not isinstance(value, bool), f"{path}: not an integer"
        low, high = _RANGES.get(schema.get("format", ""), (None, None))
        if low is not None:
            assert low <= value <= high, f"{path}: {value} outside {schema['format']}"
    elif kind == "boolean":
        assert isinstance(value, bool), f"{path}: expected a boolean"
    else:
        raise AssertionError(f"schema at {path} has no type")


# -- a local server speaking nwaku's REST API (relay publish + store query) ---------------------


class FakeNwaku:
    """nwaku's ``POST /relay/v1/messages/{topic}`` and ``GET /store/v3/messages`` on loopback.

    Relay: the body is read as nwaku reads it (``payload`` base64 and non-empty,
    ``contentTopic``, ``version``, ``timestamp``, ``meta``?), recorded, answered ``OK``; with
    ``store_relayed`` the message also lands in this node's store (as a real relay+store
    node would archive it). Store: (timestamp, hash) order, exclusive hash cursor, default
    page 20, max 100, hex cursors. ``fail_store`` answers store queries with 503 after that
    many pages have been served; ``fail_relay`` answers that many publishes with 503.
    """

    def __init__(self, messages: Sequence[StoredMessage] = (), *, store_relayed: bool = True):
        self.messages = list(messages)
        self.store_relayed = store_relayed
        self.published: list[tuple[str, dict[str, Any]]] = []
        self.store_requests: list[dict[str, str]] = []
        self.fail_store: int | None = None
        self.fail_relay = 0
        self.pages_served = 0
        self._runner: Any = None
        self.url = ""
        self.relay_event: Any = None

    async def start(self) -> FakeNwaku:
        import asyncio

        from aiohttp import web

        self.relay_event = asyncio.Event()
        app = web.Application()
        app.router.add_post("/relay/v1/messages/{topic}", self._relay)
        app.router.add_get("/store/v3/messages", self._store)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        port = self._runner.addresses[0][1]
        self.url = f"http://127.0.0.1:{port}"
        return self

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()

    async def _relay(self, request):
        from aiohttp import web

        from waku_legacy.store.rest_json import RestJsonError, parse_message

        topic = request.match_info["topic"]  # aiohttp has already URL-decoded it
        if self.fail_relay:
            self.fail_relay -= 1
            return web.Response(status=503, text="relay not ready")
        try:
            body = await request.json()
            message = parse_message(body)
        except (ValueError, RestJsonError) as exc:
            return web.Response(status=400, text=f"Failed to decode message: {exc}")
        if not message.payload:
            return web.Response(status=400, text="Field `payload` is missing")
        self.published.append((topic, body))
        if self.store_relayed:
            meta = bytes(message.meta) or None
            self.messages.append(
                StoredMessage(
                    deterministic_hash(
                        topic,
                        bytes(message.payload),
                        message.content_topic,
                        meta,
                        message.timestamp,
                    ),
                    topic,
                    message.content_topic,
                    bytes(message.payload),
                    message.version,
                    message.timestamp,
                    meta,
                )
            )
        self.relay_event.set()
        return web.Response(text="OK")

    async def _store(self, request):
        from aiohttp import web

        from waku_legacy.store.rest_json import parse_hash, response_json

        q = request.query
        self.store_requests.append(dict(q))
        if self.fail_store is not None and self.pages_served >= self.fail_store:
            return web.Response(status=503, text="store unavailable")
        rows = order(self.messages)
        if "pubsubTopic" in q:
            rows = [m for m in rows if m.pubsub_topic == q["pubsubTopic"]]
        if q.get("contentTopics"):
            topics = set(q["contentTopics"].split(","))
            rows = [m for m in rows if m.content_topic in topics]
        if q.get("startTime"):
            rows = [m for m in rows if m.timestamp >= int(q["startTime"])]
        if q.get("endTime"):
            rows = [m for m in rows if m.timestamp <= int(q["endTime"])]
        if q.get("ascending", "true") != "true":
            rows.reverse()
        if q.get("cursor"):
            cursor = parse_hash(q["cursor"])
            at = [i for i, m in enumerate(rows) if m.message_hash == cursor]
            if not at:
                return web.Response(status=400, text="cursor not found")
            rows = rows[at[0] + 1 :]
        size = min(int(q.get("pageSize") or 20) or 20, 100)
        page, more = rows[:size], len(rows) > size
        cursor = page[-1].message_hash if more else None
        self.pages_served += 1
        return web.json_response(
            response_json("", order(page), include_data=q.get("includeData") == "true",
                          cursor=cursor)
        )  # fmt: skip
