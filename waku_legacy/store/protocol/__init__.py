"""The Waku store protocols over libp2p, sans-IO: 13/WAKU2-STORE v3
(``/vac/waku/store-query/3.0.0``) and the legacy ``/vac/waku/store/2.0.0-beta4``.

:mod:`.framing` cuts a stream into length-prefixed frames; :mod:`.store_v3` and
:mod:`.legacy` decode requests and encode responses as nwaku does; :mod:`.handlers` answers
one request body from a v2 store with the query semantics the REST API shares
(:mod:`waku_legacy.store.query`, :mod:`waku_legacy.store.legacy_query`). The libp2p
listener (streams, transports, limits) is :mod:`waku_legacy.p2p.transport.native` (its policy:
:mod:`waku_legacy.p2p.policy`), which calls these.
"""

from __future__ import annotations

from waku_legacy.store.legacy_query import LegacyCursorCache
from waku_legacy.store.protocol.framing import FrameError, FrameReader, FrameTooLarge, encode_frame
from waku_legacy.store.protocol.handlers import (
    InternalError,
    StoreAnswer,
    answer_legacy_store,
    answer_store_v3,
    legacy_store_too_many_requests,
    serve_legacy_store,
    serve_store_v3,
    store_v3_too_many_requests,
)
from waku_legacy.store.protocol.legacy import LEGACY_STORE_CODEC, HistoryError
from waku_legacy.store.protocol.store_v3 import MAX_REQUEST_SIZE, STORE_V3_CODEC, StatusCode

__all__ = [
    "LEGACY_STORE_CODEC",
    "MAX_REQUEST_SIZE",
    "STORE_V3_CODEC",
    "FrameError",
    "FrameReader",
    "FrameTooLarge",
    "HistoryError",
    "InternalError",
    "LegacyCursorCache",
    "StatusCode",
    "StoreAnswer",
    "answer_legacy_store",
    "answer_store_v3",
    "encode_frame",
    "legacy_store_too_many_requests",
    "serve_legacy_store",
    "serve_store_v3",
    "store_v3_too_many_requests",
]
