"""One store request in, one response out: what a libp2p stream handler calls.

:func:`serve_store_v3` and :func:`serve_legacy_store` take the body of one request frame and
a :class:`~waku_legacy.store.types.MessageStore` and return a :class:`StoreAnswer`: the body
of the response frame, the status, and the typed error worth a log line. They never raise:
bytes that do not decode, over-limit queries, forged cursors, a store that fails, even a
bug, all become answers (nwaku's codes and texts; see :mod:`.store_v3` and :mod:`.legacy`).
The work per request is bounded: at most 10 content topics (one indexed page read each),
1000 hashes (primary-key lookups), pages of at most 100 messages, a legacy cursor search
of at most 500 rows.

The store calls are synchronous: run these on a thread (the bridge passes
``StoreAccess.stores``, a store per thread). :func:`answer_store_v3` and
:func:`answer_legacy_store` return only the body.
"""

from __future__ import annotations

from dataclasses import dataclass

from waku_legacy.errors import DecodeError, WakuLegacyError
from waku_legacy.store.legacy_query import LegacyCursorCache, LegacyCursorNotFound, run_legacy_page
from waku_legacy.store.protocol import legacy, store_v3
from waku_legacy.store.protocol.legacy import HistoryError, LegacyRefused
from waku_legacy.store.protocol.store_v3 import StatusCode, StoreRequestRefused
from waku_legacy.store.query import StoreQueryError, run_query, run_wire_query
from waku_legacy.store.types import InvalidQuery, MessageStore, StoreError

__all__ = [
    "InternalError",
    "StoreAnswer",
    "answer_legacy_store",
    "answer_store_v3",
    "legacy_store_too_many_requests",
    "serve_legacy_store",
    "serve_store_v3",
    "store_v3_too_many_requests",
]


class InternalError(WakuLegacyError):
    """An exception no store request should cause (a bug): answered as unavailable."""


@dataclass(frozen=True, slots=True)
class StoreAnswer:
    """A response body and what to log: ``status`` is the v3 status code (legacy: 200, or
    400/429/503 for ``INVALID_CURSOR``/``TOO_MANY_REQUESTS``/``SERVICE_UNAVAILABLE``, 400
    for the empty reply to bytes that do not decode); ``error`` the refusal or failure
    (None when the query was answered); ``messages`` how many messages the answer holds."""

    body: bytes
    status: int
    request_id: str = ""
    messages: int = 0
    error: WakuLegacyError | None = None
    #: the cursor a client continues this answer with: the last message's hash (nwaku's
    #: pagination cursor; js-waku ignores that and takes the last hash itself)
    next_cursor: bytes | None = None


def _internal(exc: Exception) -> InternalError:
    return InternalError(f"store request failed unexpectedly: {type(exc).__name__}: {exc}")


def _v3_refusal(
    request_id: str, status: StatusCode, desc: str, error: WakuLegacyError
) -> StoreAnswer:
    return StoreAnswer(
        store_v3.encode_response(request_id, status, desc), status, request_id, 0, error
    )


def serve_store_v3(request: bytes, store: MessageStore) -> StoreAnswer:
    """Answer one ``/vac/waku/store-query/3.0.0`` request body."""
    try:
        decoded = store_v3.decode_request(request)
    except StoreRequestRefused as exc:
        return _v3_refusal(
            exc.request_id, StatusCode.BAD_REQUEST, f"BAD_REQUEST: {exc.reason}", exc
        )
    except DecodeError as exc:  # nwaku: 400, request id not echoed
        desc = f"decoding rpc failed: {exc.reason}"
        return _v3_refusal("", StatusCode.BAD_REQUEST, desc, exc)
    except Exception as exc:
        return _v3_refusal("", StatusCode.BAD_REQUEST, "decoding rpc failed", _internal(exc))
    rid = decoded.request_id
    query = decoded.query
    try:
        # a page with data is written from the store's rows as they are read (no message
        # objects, topics not decoded); a hash-only page from its few fields
        page = (
            run_wire_query(store, query, topics_always_capped=True)
            if query.include_data
            else run_query(store, query, topics_always_capped=True)
        )
        body = store_v3.encode_response(
            rid, StatusCode.SUCCESS, "OK", page.messages,
            include_data=query.include_data, cursor=page.cursor,
        )  # fmt: skip
    except StoreQueryError as exc:  # nwaku toStoreResult: 300 "BAD_RESPONSE: archive error: …"
        return _v3_refusal(rid, StatusCode.BAD_RESPONSE, f"BAD_RESPONSE: archive error: {exc}", exc)
    except InvalidQuery as exc:  # a topic or hash no store can hold
        return _v3_refusal(rid, StatusCode.BAD_REQUEST, f"BAD_REQUEST: {exc}", exc)
    except StoreError as exc:
        return _v3_refusal(rid, StatusCode.SERVICE_UNAVAILABLE, "SERVICE_UNAVAILABLE", exc)
    except Exception as exc:  # a bug, or a row no message can be written from
        return _v3_refusal(
            rid, StatusCode.SERVICE_UNAVAILABLE, "SERVICE_UNAVAILABLE", _internal(exc)
        )
    last = page.messages[-1][0] if page.messages else None
    return StoreAnswer(body, StatusCode.SUCCESS, rid, len(page.messages), next_cursor=last)


def answer_store_v3(request: bytes, store: MessageStore) -> bytes:
    """:func:`serve_store_v3`, only the response body."""
    return serve_store_v3(request, store).body


_LEGACY_STATUS = {
    HistoryError.NONE: 200,
    HistoryError.INVALID_CURSOR: 400,
    HistoryError.TOO_MANY_REQUESTS: 429,
    HistoryError.SERVICE_UNAVAILABLE: 503,
}


def _legacy_refusal(request_id: str, error: HistoryError, exc: WakuLegacyError) -> StoreAnswer:
    body = legacy.encode_history_response(request_id, error=error)
    return StoreAnswer(body, _LEGACY_STATUS[error], request_id, 0, exc)


def serve_legacy_store(
    request: bytes, store: MessageStore, cursor_cache: LegacyCursorCache | None = None
) -> StoreAnswer:
    """Answer one ``/vac/waku/store/2.0.0-beta4`` request body (``cursor_cache``: the
    process's :class:`LegacyCursorCache`, so paging with our cursors costs one lookup)."""
    try:
        decoded = legacy.decode_history_rpc(request)
    except LegacyRefused as exc:
        return _legacy_refusal(exc.request_id, HistoryError.INVALID_CURSOR, exc)
    except DecodeError as exc:  # nwaku: an empty reply
        return StoreAnswer(b"", 400, "", 0, exc)
    except Exception as exc:
        return StoreAnswer(b"", 400, "", 0, _internal(exc))
    rid = decoded.request_id
    try:
        page = run_legacy_page(store, decoded.query, cursor_cache)
    except (LegacyCursorNotFound, StoreQueryError, InvalidQuery) as exc:
        return _legacy_refusal(rid, HistoryError.INVALID_CURSOR, exc)
    except StoreError as exc:
        return _legacy_refusal(rid, HistoryError.SERVICE_UNAVAILABLE, exc)
    except Exception as exc:
        return _legacy_refusal(rid, HistoryError.SERVICE_UNAVAILABLE, _internal(exc))
    body = legacy.encode_history_response(rid, page.messages, page.cursor)
    return StoreAnswer(body, 200, rid, len(page.messages))


def answer_legacy_store(
    request: bytes, store: MessageStore, cursor_cache: LegacyCursorCache | None = None
) -> bytes:
    """:func:`serve_legacy_store`, only the response body."""
    return serve_legacy_store(request, store, cursor_cache).body


def store_v3_too_many_requests() -> bytes:
    """nwaku's reply when the rate limit refuses a v3 request (429, request id ``N/A``)."""
    return store_v3.too_many_requests()


def legacy_store_too_many_requests() -> bytes:
    """nwaku's reply when the rate limit refuses a legacy request (error 429)."""
    return legacy.too_many_requests()
