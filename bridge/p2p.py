"""The bridge's libp2p listener: the store protocols for Waku v2 clients that do not speak
REST (js-waku over WebSocket, go-waku and status-go over TCP).

``[libp2p]`` (:class:`~waku_legacy.bridge.config.Libp2pConfig`) configures it. It answers
store v3 (``/vac/waku/store-query/3.0.0``) and the legacy store
(``/vac/waku/store/2.0.0-beta4``) with :mod:`waku_legacy.store.protocol`, from the same v2
store connections (:class:`~waku_legacy.bridge.store_threads.ThreadLocalStore`) and the
same query code as the REST API, plus metadata, identify and ping. The listener is the
project's own libp2p stack on the bridge's asyncio loop
(:class:`~waku_legacy.p2p.transport.native.NativeListener`, holding a
:class:`~waku_legacy.p2p.policy.ListenerPolicy`); its handlers run on ``[libp2p] workers``
threads. The primary process runs it, and each REST worker process on the primary's
TCP ports (:mod:`waku_legacy.bridge.workers`).
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections import Counter
from typing import TYPE_CHECKING, Any

from waku_legacy.bridge.config import Libp2pConfig
from waku_legacy.bridge.logs import fields
from waku_legacy.bridge.store_threads import ThreadLocalStore
from waku_legacy.config.keys import declared_keys
from waku_legacy.errors import DecodeError
from waku_legacy.limits import LogThrottle
from waku_legacy.p2p.keys import load_key_pair
from waku_legacy.p2p.limits import HostLimits, ListenerLimits
from waku_legacy.p2p.multiaddrs import ensure_ports_free, parse_multiaddr
from waku_legacy.p2p.policy import Answered, Continues, Refusal, RequestHandler, RequestOrigin

if TYPE_CHECKING:
    from waku_legacy.p2p.transport.native import NativeListener
    from waku_legacy.store.legacy_query import LegacyCursorCache
    from waku_legacy.store.protocol.handlers import StoreAnswer

__all__ = ["listener_limits", "start_p2p_listener", "store_protocols"]

log = logging.getLogger("waku_legacy.bridge")


def listener_limits(config: Libp2pConfig) -> ListenerLimits:
    """The listener's limits from ``[libp2p]``: each key is the limit of the same name."""

    def named(cls: type) -> dict[str, Any]:
        return {d.name: getattr(config, d.name) for d in declared_keys(cls)}

    host = HostLimits(**named(HostLimits), negotiation_timeout=config.handshake_timeout)
    return ListenerLimits(host=host, **named(ListenerLimits))


def store_protocols(
    stores: ThreadLocalStore, cursor_cache: LegacyCursorCache | None
) -> dict[str, tuple[RequestHandler, Refusal | None, Continues | None]]:
    """Store v3 and the legacy store, answered by the shared store protocol code (an answer
    that carries an error is logged here, on the worker thread). A store v3 page's next page
    is free of the rate limits for the peer it was answered to, as on the REST API."""
    from waku_legacy.store import StoreUnavailable
    from waku_legacy.store.protocol import (
        LEGACY_STORE_CODEC,
        STORE_V3_CODEC,
        legacy_store_too_many_requests,
        serve_legacy_store,
        serve_store_v3,
        store_v3_too_many_requests,
    )
    from waku_legacy.store.protocol.store_v3 import request_cursor
    from waku_legacy.store.query import StoreQueryError

    throttle = LogThrottle()
    held_back: Counter[tuple[str, int, str, str]] = Counter()
    lock = threading.Lock()

    def logged(protocol: str, answer: StoreAnswer, origin: RequestOrigin) -> bytes:
        body: bytes = answer.body
        error = answer.error
        if error is not None and not isinstance(error, StoreUnavailable):
            # (an outage is logged once by the store's health, not once per query.) A peer
            # makes as many failed queries as it likes: one line per kind and source
            # address every 10 s, as for the listener's refusals, with how many were held
            # back since; the address and the peer id (whom to block), none of the peer's
            # own fields (its request_id) and only our own words of the error
            kind = (protocol, answer.status, type(error).__name__, origin.address)
            with lock:
                if not throttle.should_log(kind, time.monotonic()):
                    held_back[kind] += 1
                    if len(held_back) > throttle.size:  # addresses gone quiet: forgotten
                        del held_back[next(iter(held_back))]
                    return body
                repeated = held_back.pop(kind, 0)
            reason = str(error) if isinstance(error, StoreQueryError) else None
            what = error.what if isinstance(error, DecodeError) else None
            log.warning(
                "libp2p store query failed",
                extra=fields(
                    protocol=protocol, status=answer.status, error_type=kind[2],
                    reason=reason or what, held_back=repeated, peer=origin.address,
                    peer_id=origin.peer_id,
                ),
            )  # fmt: skip
        return body

    def v3(request: bytes, origin: RequestOrigin) -> Answered:
        answer = serve_store_v3(request, stores)
        return Answered(logged(STORE_V3_CODEC, answer, origin), answer.next_cursor)

    def legacy(request: bytes, origin: RequestOrigin) -> bytes:
        answer = serve_legacy_store(request, stores, cursor_cache)
        return logged(LEGACY_STORE_CODEC, answer, origin)

    def v3_refused(request: bytes, reason: str) -> bytes:
        body: bytes = store_v3_too_many_requests()
        return body

    def legacy_refused(request: bytes, reason: str) -> bytes:
        body: bytes = legacy_store_too_many_requests()
        return body

    return {
        STORE_V3_CODEC: (v3, v3_refused, request_cursor),
        LEGACY_STORE_CODEC: (legacy, legacy_refused, None),
    }


async def start_p2p_listener(
    config: Libp2pConfig,
    stores: ThreadLocalStore,
    cursor_cache: LegacyCursorCache | None,
    *,
    exclusive: bool = False,
) -> NativeListener:
    """Load (or create) the key, start listening, log the multiaddrs. ``exclusive``: first
    refuse ports another process listens on (the listener would share them through
    SO_REUSEPORT; the REST worker processes share the primary's on purpose)."""
    from waku_legacy.p2p.transport.native import NativeListener

    if exclusive:
        ensure_ports_free([parse_multiaddr(a) for a in config.listen])
    pair, created = await asyncio.to_thread(load_key_pair, config.key_file)
    listener = NativeListener(
        pair,
        config.listen,
        store_protocols(stores, cursor_cache),
        cluster_id=config.cluster_id,
        shards=config.shards,
        limits=listener_limits(config),
        announce=config.announce,
        logger=log,
        extra=fields,
    )
    if created:
        log.info("created a libp2p key", extra=fields(path=config.key_file))
    await listener.start()
    log.info(
        "libp2p listening",
        extra=fields(
            peer_id=listener.peer_id, multiaddrs=listener.multiaddrs, enr=listener.enr,
            cluster_id=config.cluster_id, shards=list(config.shards),
        ),
    )  # fmt: skip
    return listener
