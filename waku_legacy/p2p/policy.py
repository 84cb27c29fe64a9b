"""The libp2p listener's policy, apart from any transport: which protocols it answers and
how, its limits, request rates, counters and logging (:class:`ListenerPolicy`).

A transport (:class:`~waku_legacy.p2p.transport.native.NativeListener`; the tests' py-libp2p peer)
*holds* one and calls it for each decision: admit a connection (:attr:`ListenerPolicy.gate`),
admit a request (:meth:`~ListenerPolicy.admit_request`: the continuation of an answered
page is free, else the per-peer and per-address rates), answer metadata, note a refusal or
a failure (counted, logged at most once per kind and key per 10 s). Importing this imports
no trio, libp2p or asyncio: the counters are behind a lock, read from any thread."""

from __future__ import annotations

import logging
import threading
import time
from collections import Counter
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from waku_legacy.limits import Continuations, LogThrottle, RateLimiter, allow_all
from waku_legacy.p2p.codec.gate import GateLimits, InboundGate
from waku_legacy.p2p.codec.metadata import Metadata, decode_metadata, encode_metadata
from waku_legacy.p2p.errors import P2PRefused
from waku_legacy.p2p.limits import ListenerLimits

__all__ = [
    "Answered", "Continues", "Counters", "ListenerPolicy", "ProtocolHandlers", "Refusal",
    "RequestHandler", "RequestOrigin", "ServedProtocol",
]  # fmt: skip


@dataclass(frozen=True)
class Answered:
    """A response body and the cursor that continues it: the peer's request with that
    cursor (its next page) passes the rate limits for free, once, as on the REST API (a
    client paging at full speed is honest; its first request of a query pays)."""

    body: bytes
    next_cursor: Hashable | None = None


@dataclass(frozen=True, slots=True)
class RequestOrigin:
    """Who asked: the connection's source address (the key of the per-address limits and
    of the log throttle) and the peer id its Noise handshake proved. Neither is a field the
    peer writes freely: the address is the socket's, the peer id derived from a key."""

    address: str
    peer_id: str


#: ``(request body, who asked) -> response``; runs on a worker thread; must not raise for
#: bad input.
RequestHandler = Callable[[bytes, RequestOrigin], "bytes | Answered"]
#: ``request body -> the cursor it continues from`` (None: a fresh request); cheap, on the
#: transport's thread, before the rate limits; must not raise.
Continues = Callable[[bytes], "Hashable | None"]
#: ``(request body, reason) -> response body`` saying "refused" in the protocol's own terms
#: (store v3: status 429), or None to reset the stream instead.
Refusal = Callable[[bytes, str], "bytes | None"]
#: what a protocol name maps to: its handler, its refusal and (optionally) its cursor
ProtocolHandlers = (
    tuple[RequestHandler, Refusal | None] | tuple[RequestHandler, Refusal | None, Continues | None]
)


@dataclass(frozen=True)
class ServedProtocol:
    answer: RequestHandler
    refuse: Refusal | None
    continues: Continues | None = None


@dataclass
class Counters:
    """The listener's counters: written on the transport's thread, read from any."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    counters: Counter[str] = field(default_factory=Counter)

    def count(self, name: str, by: int = 1) -> None:
        with self.lock:
            self.counters[name] += by

    def snapshot(self) -> dict[str, int]:
        with self.lock:
            return dict(self.counters)


def default_extra(**values: Any) -> dict[str, Any]:
    return {"p2p": values}


class ListenerPolicy:
    """What the listener serves and within which bounds; every transport decision that is
    not about bytes (see the module docstring)."""

    def __init__(
        self,
        protocols: Mapping[str, ProtocolHandlers],
        *,
        cluster_id: int,
        shards: Sequence[int],
        limits: ListenerLimits = ListenerLimits(),
        logger: logging.Logger | None = None,
        extra: Callable[..., Mapping[str, Any]] = default_extra,
    ) -> None:
        self.protocols = {name: ServedProtocol(*handlers) for name, handlers in protocols.items()}
        self.metadata = Metadata(cluster_id, tuple(sorted(set(shards))))
        self.limits = limits
        self.log = logger or logging.getLogger("waku_legacy.p2p")
        self.extra = extra
        self.counters = Counters()
        #: (peer id, cursor) of pages answered: their next page is free, once, for 10 min
        self.continuations = Continuations(100_000, ttl=600.0)
        #: connection and handshake slots per address, taken at accept
        self.gate = InboundGate(
            GateLimits(
                max_connections=limits.host.max_connections,
                max_connections_per_address=limits.max_connections_per_address,
                max_handshakes=limits.max_handshakes,
                max_handshakes_per_address=limits.max_handshakes_per_address,
                address_share=limits.address_share,
                handshake_timeout=limits.host.handshake_timeout,
                address_handshake_rate=limits.address_handshakes_per_second,
                address_handshake_burst=limits.address_handshake_burst,
                reserved_share=limits.reserved_share,
            )
        )
        self.rate = RateLimiter(rate=limits.requests_per_second, burst=limits.request_burst)
        self.address_rate = RateLimiter(
            rate=limits.address_requests_per_second, burst=limits.address_request_burst
        )
        self.throttle = LogThrottle()

    def count(self, name: str, by: int = 1) -> None:
        self.counters.count(name, by)

    def stats(self) -> dict[str, int]:
        return self.counters.snapshot()

    def note(
        self,
        kind: str,
        key: str,
        error: BaseException | str,
        *,
        level: int = logging.WARNING,
        **values: Any,
    ) -> None:
        """Count a refusal or failure; log it at most once per kind and key per 10 s."""
        self.count(kind)
        if self.throttle.should_log((kind, key), time.monotonic()):
            self.log.log(
                level,
                "libp2p " + kind.replace("_", " "),
                extra=self.extra(
                    error=str(error), error_type=type(error).__name__, peer=key, **values
                ),
            )

    def refused(self, kind: str, key: str, reason: str) -> None:
        """A connection refused or ended by a limit of the transport or the inbound gate."""
        self.note(kind, key, P2PRefused(reason))

    def internal_error(
        self, message: str, address: str, peer: str, error: BaseException, **values: Any
    ) -> None:
        """An exception nothing typed caught (a bug): counted in ``internal_errors``, logged
        with its traceback at most once per address every 10 s."""
        self.count("internal_errors")
        if self.throttle.should_log(("internal_errors", address), time.monotonic()):
            self.log.error(
                message,
                extra=self.extra(
                    peer=address, peer_id=peer, error=str(error),
                    error_type=type(error).__name__, **values,
                ),
                exc_info=error,
            )  # fmt: skip

    def metadata_answer(self, peer: str, request: bytes) -> bytes:
        """Our metadata, whatever the peer's cluster (noted when another); raises
        :class:`~waku_legacy.errors.DecodeError` for a request that does not decode."""
        theirs = decode_metadata(request)
        if theirs.cluster_id != self.metadata.cluster_id:
            self.note(
                "metadata_other_cluster",
                peer,
                f"peer on cluster {theirs.cluster_id}, ours {self.metadata.cluster_id}",
            )
        return encode_metadata(self.metadata)

    def admit_request(
        self, peer: str, address: str, name: str, protocol: ServedProtocol, request: bytes
    ) -> tuple[bool, bytes | None]:
        """(True, None) when ``request`` is to be answered: the next page of an answer
        given to ``peer``, or within the rate limits of the peer and of its source address;
        else (False, the protocol's refusal, None: reset the stream), the refusal counted."""
        now = time.monotonic()
        cursor = protocol.continues(request) if protocol.continues else None
        if cursor is not None and self.continuations.redeem((peer, cursor), now):
            return True, None
        over = allow_all([(self.rate, peer), (self.address_rate, address)], now)
        if over < 0:
            return True, None
        limits = self.limits
        limit = limits.requests_per_second if over == 0 else limits.address_requests_per_second
        refusal = P2PRefused(
            f"over {limit} requests/s from " + ("this peer" if over == 0 else address)
        )
        self.note("request_rate_limited", peer, refusal, protocol=name)
        return False, protocol.refuse(request, str(refusal)) if protocol.refuse else None

    def issue(self, peer: str, result: bytes | Answered) -> bytes:
        """The response body; an answer's continuation becomes free for ``peer``."""
        if isinstance(result, bytes):
            return result
        if result.next_cursor is not None:
            self.continuations.issue((peer, result.next_cursor), time.monotonic())
        return result.body
