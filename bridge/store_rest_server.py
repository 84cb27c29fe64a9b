"""nwaku's REST store API over the local v2 store: parameter parsing and page building.

Sans-IO: :func:`parse_v3_query` / :func:`parse_legacy_query` turn query parameters into a
typed query or raise :class:`RestError` (HTTP status + reason); :func:`run_v3_query` /
:func:`run_legacy_query` answer one page from a :class:`MessageStore` as JSON bytes (they run
on a store reader thread).

``GET /store/v3/messages`` answers as nwaku does (read at nwaku 7d1c6ab, v0.37.x:
``waku/rest_api/endpoint/store/handlers.nim`` and ``types.nim``, ``waku_archive/archive.nim``,
``waku_store/self_req_handler.nim``, ``node/kernel_api/store.nim``), texts included; the table
in docs/compat/nwaku-rest.md lists each case:

- ``includeData``: Nim ``parseBool`` (y/yes/true/1/on, n/no/false/0/off, any case, ``_``
  ignored), default **false**; else 400 ``include data parsing error: cannot interpret as a
  bool: <value>``;
- ``pageSize``, ``startTime``, ``endTime``: Nim ``parseInt`` (sign, digits, ``_`` between
  digits); 400 ``page size parsing error: invalid integer: <value>`` / ``… Parsed integer
  outside of valid range`` (``time parsing error: …`` for times). Page size empty or 0 -> 20,
  above 100 -> 100, negative -> 100 (nwaku converts it to uint64, which wraps). Times <= 0
  mean "no bound";
- ``ascending``: exactly ``true`` is ascending, anything else descending (no error);
- ``cursor``/``hashes``: hex with an optional ``0x`` (stew ``hexToSeqByte``), 400
  ``Exception converting hex string to bytes: …`` or ``waku message hash parsing error:
  invalid hash length: <n>``; empty items of ``hashes`` are skipped (ours also reads the
  base64 of a 32-byte hash, as clients of nwaku before v0.35 send it);
- a cursor of all zeroes, a cursor that is no stored message, and over 10 content topics
  *with* a cursor are the archive's errors, which nwaku's self-store path answers with 500
  and ``error in handleSelfStoreRequest: BAD_RESPONSE: archive error: …``;
- pubsub and content topics are not checked: an unknown or malformed topic matches nothing
  (200, no messages).

Kept stricter than nwaku (docs/compat/nwaku-rest.md says why): a repeated parameter, a control
character or non-UTF-8 text in a topic (nwaku's answer there depends on its database), more
than 100 ``hashes``, and (legacy API) a ``peerAddr`` that is not a multiaddr are 400 with a
reason. On ``/store/v3/messages`` a ``peerAddr`` is queried as nwaku does:
:mod:`waku_legacy.bridge.store_peer` (without one, this node IS the store, as nwaku answers
from its own store).

``GET /store/v1/messages`` is nwaku's legacy API (``rest_api/endpoint/legacy_store/handlers.nim``:
the same parsing with the texts ``Problem parsing page size [<Nim error>]`` and ``Problem
parsing time [<Nim error>]``): messages as ``{payload, contentTopic,
version, timestamp, ephemeral, meta?}``, cursor ``{pubsubTopic, senderTime, storeTime,
digest: {data: base64}}`` with ``digest = sha256(contentTopic || payload)``; the cursor is
used only when ``pubsubTopic``, ``senderTime``, ``storeTime`` and ``digest`` are all given.

The query semantics (nwaku's archive checks, legacy cursors) are not here: they are
:mod:`waku_legacy.store.query` and :mod:`waku_legacy.store.legacy_query`, shared with the
store protocols over libp2p (:mod:`waku_legacy.store.protocol`); this module parses HTTP
parameters and writes JSON.
"""

from __future__ import annotations

import base64
import json
import re
from collections.abc import Mapping
from typing import Any, Protocol

from waku_legacy.errors import WakuLegacyError
from waku_legacy.store import (
    DEFAULT_PAGE_SIZE,
    MAX_PAGE_SIZE,
    InvalidQuery,
    MessageStore,
)
from waku_legacy.store.legacy_query import (
    LEGACY_CURSOR_SCAN,
    LegacyCursor,
    LegacyCursorCache,
    LegacyCursorNotFound,
    LegacyQuery,
    run_legacy_page,
)
from waku_legacy.store.query import MAX_CONTENT_TOPICS, StoreQueryError, run_query
from waku_legacy.store.rest_json import (
    MAX_HASHES_PER_QUERY,
    lenient_b64decode,
    response_json_bytes,
)
from waku_legacy.store.types import StoredMessage, StoreError, StoreQuery, StoreUnavailable

__all__ = [  # the legacy cursor types and limits are waku_legacy.store's, re-exported
    "LEGACY_CURSOR_SCAN",
    "MAX_CONTENT_TOPICS",
    "NWAKU_CURSOR_NOT_FOUND",
    "NWAKU_SERVICE_UNAVAILABLE",
    "LegacyCursor",
    "LegacyCursorCache",
    "LegacyQuery",
    "RestError",
    "parse_legacy_query",
    "parse_v3_query",
    "query_param",
    "run_legacy_query",
    "run_v3_query",
]

_I64_MAX = (1 << 63) - 1
_NIM_INT = re.compile(r"[+-]?[0-9][0-9_]*")  # Nim parseutils: '_' after a digit is skipped
_TRUE = {"y", "yes", "true", "1", "on"}
_FALSE = {"n", "no", "false", "0", "off"}
_HEX_DIGITS = frozenset("0123456789abcdefABCDEF")
_MULTIADDR = re.compile(r"/(ip4|ip6|dns|dns4|dns6|dnsaddr)/[^/]+(/[a-z0-9-]+/[^/]+)*")
# nwaku's self-store path answers an archive error with 500 and these texts
# (self_req_handler.nim <- kernel_api/store.nim toStoreResult <- archive.nim / drivers).
_ARCHIVE_ERROR = "error in handleSelfStoreRequest: BAD_RESPONSE: archive error: "
NWAKU_CURSOR_NOT_FOUND = _ARCHIVE_ERROR + "DRIVER_ERROR: cursor not found"
NWAKU_ZERO_CURSOR = _ARCHIVE_ERROR + "INVALID_QUERY: all zeroes cursor hash"
NWAKU_TOO_MANY_TOPICS = _ARCHIVE_ERROR + "INVALID_QUERY: too many content topics"
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


class Params(Protocol):
    def getall(self, key: str, default: Any = ...) -> list[str]: ...
    def __contains__(self, key: object) -> bool: ...


class RestError(WakuLegacyError):
    """An HTTP error answer: ``status`` and a reason for the client."""

    def __init__(self, status: int, reason: str, headers: Mapping[str, str] | None = None) -> None:
        super().__init__(reason)
        self.status = status
        self.reason = reason
        self.headers = dict(headers or {})


def _bad(reason: str) -> RestError:
    return RestError(400, reason)


def _one(params: Params | Mapping[str, str], key: str) -> str | None:
    """The single value of ``key`` ("" counts as absent, as in nwaku); repeats are refused."""
    if hasattr(params, "getall"):
        values = params.getall(key, [])
    else:
        values = [params[key]] if key in params else []
    if len(values) > 1:
        raise _bad(f"query parameter '{key}' is given {len(values)} times")
    if not values or values[0] == "":
        return None
    return values[0]


query_param = _one  # for the other readers of these parameters (bridge.store_peer)


def nim_parse_int(text: str) -> int:
    """Nim's ``strutils.parseInt`` (64-bit ``int``); raises ValueError with Nim's message."""
    match = _NIM_INT.match(text)
    if match is None:
        raise ValueError(f"invalid integer: {text}")
    digits = match.group().replace("_", "")
    if len(digits) > 25 or not -_I64_MAX - 1 <= int(digits) <= _I64_MAX:
        raise ValueError("Parsed integer outside of valid range")
    if match.end() != len(text):
        raise ValueError(f"invalid integer: {text}")
    return int(digits)


def _parsed_int(what: str, text: str, legacy: bool) -> int:
    """``text`` as Nim parses it, or a 400 in the v3 (or legacy) API's words."""
    try:
        return nim_parse_int(text)
    except ValueError as exc:
        reason = f"Problem parsing {what} [{exc}]" if legacy else f"{what} parsing error: {exc}"
        raise _bad(reason) from None


def _time(text: str | None, legacy: bool = False) -> int | None:
    if text is None:
        return None
    value = _parsed_int("time", text, legacy)
    return value if value > 0 else None  # nwaku: only positive times bound the query


def _page_size(text: str | None, legacy: bool = False) -> int:
    if text is None:
        return DEFAULT_PAGE_SIZE
    value = _parsed_int("page size", text, legacy)
    if value == 0:
        return DEFAULT_PAGE_SIZE
    # nwaku: uint64(parseInt(…)) wraps a negative size to 2^64 - n, then clamps it to 100
    return MAX_PAGE_SIZE if value < 0 else min(value, MAX_PAGE_SIZE)


def _ascending(text: str | None) -> bool:
    return text is None or text == "true"  # nwaku paging.nim: (s == "true").into()


def _include_data(text: str | None) -> bool:
    if text is None:
        return False
    normal = text.lower().replace("_", "")  # Nim strutils.normalize
    if normal in _TRUE:
        return True
    if normal in _FALSE:
        return False
    raise _bad(f"include data parsing error: cannot interpret as a bool: {text}")


def _base64_hash(text: str) -> bytes | None:
    raw = lenient_b64decode(text)
    return raw if raw is not None and len(raw) == 32 else None


def nwaku_hash(text: str) -> bytes | None:
    """A message hash as nwaku's REST ``parseHash`` reads it (None for ""), or a 400 with
    nwaku's text. One leniency: a text that is not hex but base64 of 32 bytes (what clients
    of nwaku before v0.35 send back) is read as that hash."""
    if text == "":
        return None
    digits = text[2:] if text[:2] in ("0x", "0X") else text
    bad = next((c for c in digits if c not in _HEX_DIGITS), None)
    if len(text) % 2 or bad is not None:
        raw = _base64_hash(text)
        if raw is not None:
            return raw
    if len(text) % 2:
        raise _bad("Exception converting hex string to bytes: hex string must have even length")
    if bad is not None:
        raise _bad(
            f"Exception converting hex string to bytes: {bad} is not a hexadecimal character"
        )
    raw = bytes.fromhex(digits)
    if len(raw) != 32:
        raise _bad(f"waku message hash parsing error: invalid hash length: {len(raw)}")
    return raw


def _hashes(text: str | None) -> tuple[bytes, ...]:
    if text is None:
        return ()
    items = text.split(",")
    count = sum(1 for item in items if item)
    if count > MAX_HASHES_PER_QUERY:  # ours: nwaku has no cap (its 64 KiB head bounds it)
        raise _bad(f"{count} hashes in one query; at most {MAX_HASHES_PER_QUERY}")
    return tuple(h for h in map(nwaku_hash, items) if h is not None)


def _check_characters(kind: str, text: str) -> None:
    """Control characters (NUL above all: PostgreSQL text cannot hold it) and text that is
    not UTF-8 are refused here, the same for every store backend."""
    bad = _CONTROL.search(text)
    if bad is not None:
        raise _bad(f"{kind} {text[:80]!r} holds the control character {bad.group()!r}")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise _bad(f"{kind} {text[:80]!r} is not valid UTF-8") from None


def _pubsub_topic(text: str | None) -> str | None:
    """nwaku does not check the topic (an unknown or malformed one matches nothing)."""
    if text is not None:
        _check_characters("pubsub topic", text)
    return text


def _content_topics(text: str | None) -> tuple[str, ...]:
    if text is None:
        return ()
    topics = [t for t in text.split(",") if t != ""]
    for topic in topics:
        _check_characters("content topic", topic)
    return tuple(dict.fromkeys(topics))


def _peer_addr(text: str | None) -> None:
    if text is not None and _MULTIADDR.fullmatch(text) is None:
        raise _bad(f"'peerAddr' {text[:80]!r} is not a multiaddr (/ip4/…/tcp/…/p2p/…)")


def parse_v3_query(params: Params | Mapping[str, str]) -> StoreQuery:
    """Query parameters of ``GET /store/v3/messages`` (raises :class:`RestError`)."""
    # nwaku's order: includeData, topics, times, hashes, cursor, ascending, pageSize
    include_data = _include_data(_one(params, "includeData"))
    pubsub = _pubsub_topic(_one(params, "pubsubTopic"))
    content_topics = _content_topics(_one(params, "contentTopics"))
    start_time = _time(_one(params, "startTime"))
    end_time = _time(_one(params, "endTime"))
    hashes = _hashes(_one(params, "hashes"))
    cursor_text = _one(params, "cursor")
    cursor = None if cursor_text is None else nwaku_hash(cursor_text)
    ascending = _ascending(_one(params, "ascending"))
    page_size = _page_size(_one(params, "pageSize"))
    # peerAddr: bridge.store_peer (nwaku checks it after the query's own parameters)
    return StoreQuery(
        pubsub_topic=pubsub,
        content_topics=content_topics,
        start_time=start_time,
        end_time=end_time,
        hashes=hashes,
        cursor=cursor,
        ascending=ascending,
        limit=page_size,
        include_data=include_data,
    )


def _dumps(obj: Any) -> bytes:
    return json.dumps(obj, separators=(",", ":")).encode()


def run_v3_query(
    store: MessageStore,
    query: StoreQuery,
    request_id: str,
    *,
    cursor_out: list[bytes | None] | None = None,
) -> bytes:
    """One page as nwaku's ``StoreQueryResponse`` JSON (runs on a store thread); the page's
    cursor (None when no more follow) is appended to ``cursor_out`` when given."""
    try:
        page = run_query(store, query)
    except StoreQueryError as exc:  # nwaku's self-store path: 500 with the archive's words
        raise RestError(500, _ARCHIVE_ERROR + str(exc)) from None
    if cursor_out is not None:
        cursor_out.append(page.cursor)
    return response_json_bytes(
        request_id, page.messages, include_data=query.include_data, cursor=page.cursor
    )


# -- the legacy API (store v2-beta4 shapes) ----------------------------------------------------


def _digest(text: str) -> bytes:
    raw = lenient_b64decode(text)
    if raw is None:
        raise _bad(f"'digest' {text[:60]!r} is not base64")
    if len(raw) != 32:
        raise _bad(f"'digest' must be 32 bytes, got {len(raw)}")
    return raw


def parse_legacy_query(params: Params | Mapping[str, str]) -> LegacyQuery:
    """Query parameters of ``GET /store/v1/messages`` (raises :class:`RestError`)."""
    _peer_addr(_one(params, "peerAddr"))
    pubsub = _pubsub_topic(_one(params, "pubsubTopic"))
    sender = _time(_one(params, "senderTime"), legacy=True)
    stored = _time(_one(params, "storeTime"), legacy=True)
    digest_text = _one(params, "digest")
    digest = None if digest_text is None else _digest(digest_text)
    cursor = None
    if pubsub is not None and sender is not None and stored is not None and digest is not None:
        cursor = LegacyCursor(pubsub, sender, stored, digest)
    return LegacyQuery(
        pubsub_topic=pubsub,
        content_topics=_content_topics(_one(params, "contentTopics")),
        start_time=_time(_one(params, "startTime"), legacy=True),
        end_time=_time(_one(params, "endTime"), legacy=True),
        cursor=cursor,
        ascending=_ascending(_one(params, "ascending")),
        page_size=_page_size(_one(params, "pageSize"), legacy=True),
    )


def legacy_message_json(m: StoredMessage) -> dict[str, Any]:
    out: dict[str, Any] = {
        "payload": base64.b64encode(m.payload).decode("ascii"),
        "contentTopic": m.content_topic,
        "version": m.version,
        "timestamp": m.timestamp,
        "ephemeral": False,
    }
    if m.meta:
        out["meta"] = base64.b64encode(m.meta).decode("ascii")
    return out


def run_legacy_query(
    store: MessageStore,
    query: LegacyQuery,
    known: LegacyCursorCache | None = None,
    *,
    cursor_out: list[LegacyCursor | None] | None = None,
) -> bytes:
    """One legacy page as JSON; its cursor is remembered in ``known`` and appended to
    ``cursor_out`` (None when no more follow)."""
    try:
        page = run_legacy_page(store, query, known)
    except LegacyCursorNotFound as exc:
        raise _bad(exc.cause) from None
    out: dict[str, Any] = {"messages": [legacy_message_json(m) for m in page.messages]}
    next_cursor = page.cursor
    if next_cursor is not None:
        out["cursor"] = {
            "pubsubTopic": next_cursor.pubsub_topic,
            "senderTime": next_cursor.sender_time,
            "storeTime": next_cursor.store_time,
            "digest": {"data": base64.b64encode(next_cursor.digest).decode()},
        }
    if cursor_out is not None:
        cursor_out.append(next_cursor)
    return _dumps(out)


# A store that cannot be reached: nwaku's store error kind for it is SERVICE_UNAVAILABLE (503;
# waku/waku_store/common.nim: ErrorCode.SERVICE_UNAVAILABLE = 503, `$` gives the bare name), and
# its REST self-store path words an error "error in handleSelfStoreRequest: " & $error
# (waku_store/self_req_handler.nim). nwaku sends that with 500 (rest_api/endpoint/store/
# handlers.nim: internalServerError for any error); ours is 503 with Retry-After, so that
# clients and proxies retry instead of treating the node as broken.
NWAKU_SERVICE_UNAVAILABLE = "error in handleSelfStoreRequest: SERVICE_UNAVAILABLE"
STORE_RETRY_AFTER = 5  # seconds: about the reconnect schedule's longest step


def store_error_status(exc: BaseException) -> RestError:
    """The answer for a store failure while serving (never the exception text of a driver)."""
    if isinstance(exc, RestError):
        return exc
    if isinstance(exc, InvalidQuery):  # refused by the store itself, the same on every backend
        return RestError(400, str(exc))
    if isinstance(exc, StoreUnavailable):
        return RestError(
            503, NWAKU_SERVICE_UNAVAILABLE, {"Retry-After": str(STORE_RETRY_AFTER)}
        )
    if isinstance(exc, StoreError):
        return RestError(503, "the store cannot answer right now; retry later")
    return RestError(500, "internal error")
