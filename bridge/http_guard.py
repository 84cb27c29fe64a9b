"""Limits of the bridge's HTTP side: connections, timeouts and a per-address request budget.

aiohttp closes a connection that sends no complete request within its keep-alive timeout
(``idle_timeout`` here, counted from the connection's start and from the end of each
answer), but it has no header timeout separate from that, no connection cap and no budget.
This module adds them:

- :class:`GuardedServer` makes aiohttp's protocol handlers count connections: over
  ``max_connections`` open connections, or ``max_connections_per_address`` from one IP
  address, a new connection is answered ``503`` and closed before anything is read. A
  request head (first byte to last header) must arrive within ``header_timeout`` or the
  connection is closed (slowloris); the request body within ``body_timeout`` (see the
  middleware in :mod:`waku_legacy.bridge.http_api`).
- :class:`RequestBudget`: a token bucket per client address (``requests_per_second``, burst
  ``request_burst``; bounded memory). A request that continues a page this server answered
  to the same address (its ``cursor`` is that page's cursor) costs nothing: paging at full
  speed is never refused, a flood of fresh queries is (``429`` with ``Retry-After``).

Every refusal is counted in ``waku_legacy_http_refused_total{reason}`` and logged (at most
one line per reason and address every ``LOG_EVERY`` seconds, so a flood cannot flood logs).
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import Any

from aiohttp import web
from aiohttp.http_exceptions import LineTooLong
from aiohttp.web_protocol import RequestHandler

from waku_legacy.bridge.logs import fields
from waku_legacy.bridge.metrics import BridgeMetrics
from waku_legacy.config.keys import Kind, key
from waku_legacy.limits import Continuations, LogThrottle, RateLimiter, address_key

__all__ = [
    "ConnectionGuard",
    "GuardedHandler",
    "GuardedRunner",
    "GuardedServer",
    "HttpLimits",
    "RefusalLog",
    "RequestBudget",
]

log = logging.getLogger("waku_legacy.bridge.http")

LOG_EVERY = 10.0
_REFUSED_BODY = b"too many connections; retry later\n"
_REFUSED = (
    b"HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/plain\r\nConnection: close\r\n"
    b"Retry-After: 1\r\nContent-Length: %d\r\n\r\n%s" % (len(_REFUSED_BODY), _REFUSED_BODY)
)


@dataclass(frozen=True, slots=True)
class HttpLimits:
    """The REST API's bounds; each is a ``[server]`` key of the same name, declared here."""

    max_connections: int = key(
        1000,
        min=1,
        max=1_000_000,
        example=1000,
        doc="open HTTP connections; more are answered 503 and closed",
    )
    max_connections_per_address: int = key(
        64, min=1, max=1_000_000, example=64, doc="per client IP address (behind a proxy: raise it)"
    )
    header_timeout: float = key(
        10.0,
        kind=Kind.DURATION,
        example="10s",
        doc="from a request's first byte to its last header",
    )
    idle_timeout: float = key(
        30.0,
        kind=Kind.DURATION,
        example="30s",
        doc="keep-alive connections idle this long are closed",
    )
    body_timeout: float = key(
        10.0, kind=Kind.DURATION, example="10s", doc="a request body must arrive within this"
    )
    requests_per_second: float = key(
        50.0,
        min=0,
        example=50,
        doc="per client IP address (0: no budget); cursor continuations of answered pages are free",
    )
    request_burst: int = key(
        200, min=1, max=1_000_000, example=200, doc="requests one address may send at once"
    )

    @classmethod
    def from_config(cls, server: Any) -> HttpLimits:
        return cls(**{name: getattr(server, name) for name in cls.__dataclass_fields__})


class RefusalLog:
    """Counts every refusal; logs one line per (reason, address) per ``every`` seconds."""

    def __init__(self, metrics: BridgeMetrics, *, every: float = LOG_EVERY, size: int = 4096):
        self.metrics = metrics
        self.throttle = LogThrottle(every, size=size)

    def __call__(self, reason: str, address: str, **extra: Any) -> None:
        self.metrics.http_refused.inc(1, reason)
        if self.throttle.should_log((reason, address), time.monotonic()):
            log.warning("http refused", extra=fields(reason=reason, address=address, **extra))


def peer_address(transport: Any) -> str:
    peer = transport.get_extra_info("peername") if transport is not None else None
    if isinstance(peer, tuple | list) and peer:
        return str(peer[0])
    return str(peer or "unknown")


class ConnectionGuard:
    """Open connections, in total and per address (one per event loop; not thread-safe)."""

    def __init__(self, limits: HttpLimits, refused: RefusalLog) -> None:
        self.limits = limits
        self.refused = refused
        self.total = 0
        self.by_address: dict[str, int] = {}

    def admit(self, address: str) -> bool:
        limits = self.limits
        if self.total >= limits.max_connections:
            self.refused("connections", address, open=self.total)
            return False
        if self.by_address.get(address, 0) >= limits.max_connections_per_address:
            self.refused("address_connections", address, open=self.by_address[address])
            return False
        self.total += 1
        self.by_address[address] = self.by_address.get(address, 0) + 1
        self.refused.metrics.http_connections.set(self.total)
        return True

    def release(self, address: str) -> None:
        self.total -= 1
        left = self.by_address.get(address, 1) - 1
        if left > 0:
            self.by_address[address] = left
        else:
            self.by_address.pop(address, None)
        self.refused.metrics.http_connections.set(self.total)


class GuardedHandler(RequestHandler):
    """aiohttp's protocol handler, counted by a :class:`ConnectionGuard`, with a header
    timeout (a request head that takes longer than ``header_timeout`` closes the
    connection)."""

    guard: ConnectionGuard

    def __init__(self, *args: Any, guard: ConnectionGuard, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.guard = guard
        self.address = "unknown"
        self.admitted = False
        self.busy = False  # a request of this connection is being handled
        self._head_timer: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.address = peer_address(transport)
        if not self.guard.admit(self.address):
            try:
                transport.write(_REFUSED)  # type: ignore[attr-defined]  # typeshed: BaseTransport
            finally:
                transport.close()
            return
        self.admitted = True
        # aiohttp's keep-alive timer (idle_timeout) starts now: a connection that sends
        # nothing is closed by it; the header timer starts with a request's first byte.
        super().connection_made(transport)

    def connection_lost(self, exc: BaseException | None) -> None:
        if not self.admitted:
            return
        self.admitted = False
        self._stop_head_timer()
        self.guard.release(self.address)
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        if not self.admitted:
            return
        super().data_received(data)
        if self._messages:  # a whole request head arrived
            self._stop_head_timer()
        elif data and not self.busy and self._head_timer is None:
            self._start_head_timer()  # the first bytes of a request head

    def request_started(self) -> None:
        self.busy = True
        self._stop_head_timer()

    def request_finished(self) -> None:
        self.busy = False

    def _start_head_timer(self) -> None:
        self._head_timer = self._loop.call_later(
            self.guard.limits.header_timeout, self._head_timed_out
        )

    def _stop_head_timer(self) -> None:
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None

    def _head_timed_out(self) -> None:
        self._head_timer = None
        if self.busy or self._messages or self.transport is None:
            return
        self.guard.refused("header_timeout", self.address)
        self.force_close()

    def handle_error(
        self,
        request: Any,
        status: int = 500,
        exc: BaseException | None = None,
        message: str | None = None,
    ) -> web.StreamResponse:
        if isinstance(exc, LineTooLong):
            # nwaku (chronos httpserver getRequest): a request head beyond its limit is
            # "431 Request Header Fields Too Large" with an empty body, connection closed
            self.guard.refused("head_too_long", self.address)
            response = web.Response(status=431, body=b"", content_type="text/plain")
            response.force_close()
            return response
        return super().handle_error(request, status, exc, message)


class GuardedServer(web.Server):
    """``web.Server`` whose connections are :class:`GuardedHandler`s."""

    def __init__(self, *args: Any, guard: ConnectionGuard, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.guard = guard

    def __call__(self) -> RequestHandler:
        return GuardedHandler(self, loop=self._loop, guard=self.guard, **self._kwargs)


class GuardedRunner(web.AppRunner):
    """An ``AppRunner`` serving through a :class:`GuardedServer`."""

    def __init__(self, app: web.Application, *, guard: ConnectionGuard, **kwargs: Any) -> None:
        super().__init__(app, **kwargs)
        self.guard = guard

    async def _make_server(self) -> web.Server:
        server = await super()._make_server()
        return GuardedServer(
            server.request_handler, request_factory=server.request_factory,
            handler_cancellation=server.handler_cancellation, loop=server._loop,
            guard=self.guard, **server._kwargs,
        )  # fmt: skip


# -- the per-address request budget -------------------------------------------------------------


class RequestBudget:
    """Token buckets per client address (:class:`waku_legacy.limits.RateLimiter`; IPv6 by
    its /64) plus free continuations of answered pages.

    Memory is bounded: at most ``max_keys`` buckets (least recently used first out; a bucket
    that was evicted starts full again, which only ever favours the client) and at most
    ``max_continuations`` remembered cursors."""

    def __init__(
        self,
        rate: float,
        burst: int,
        *,
        clock: Callable[[], float] = time.monotonic,
        max_keys: int = 100_000,
        max_continuations: int = 100_000,
        continuation_ttl: float = 600.0,
    ) -> None:
        self.buckets = RateLimiter(rate=rate, burst=burst, max_keys=max_keys)
        self.clock = clock
        self.continuations = Continuations(max_continuations, ttl=continuation_ttl)

    @property
    def enabled(self) -> bool:
        return self.buckets.enabled

    def take(self, key: str) -> float:
        """0.0 when a request of ``key`` may go ahead (one token taken), else the seconds
        until a token will be available."""
        now = self.clock()
        bucket = address_key(key)
        if self.buckets.allow(bucket, now):
            return 0.0
        return self.buckets.wait(bucket, now)

    def issued(self, key: str, cursor: Hashable) -> None:
        """A page answered to ``key`` carried ``cursor``: its continuation will be free."""
        if self.enabled:
            self.continuations.issue((key, cursor), self.clock())

    def continues(self, key: str, cursor: Hashable) -> bool:
        """Is this the (first) continuation of a page answered to ``key``? (Consumes it.)"""
        return self.continuations.redeem((key, cursor), self.clock())


def retry_after(seconds: float) -> str:
    return str(max(1, math.ceil(seconds)))
