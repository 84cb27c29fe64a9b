"""Rate limits every listener shares: token buckets per key, source-address grouping, and
log throttling for refusals.

:class:`RateLimiter` keeps one token bucket per key (a peer's public key or a source
address): ``rate`` tokens a second up to ``burst``; an action costs one token (or
``cost``). Buckets of keys not seen for a while are forgotten first when the table is full,
so memory stays bounded whatever a flood sends (a forgotten key starts full again, which
only ever favours the client).

:func:`address_key` groups source addresses the way an operator thinks of "one machine":
an IPv4 address as is (IPv4-mapped IPv6 included), an IPv6 address by its /64 (a host gets
a whole /64; new addresses from it must not buy new budgets).

:class:`Continuations` remembers the pages a server answered, so that the request for the
next page (its cursor) can go free of the rate limit: paging at full speed is honest use.

:class:`LogThrottle` says whether a refusal is worth a log line: at most one per key (for
example reason and address) per ``every`` seconds, so a flood cannot flood the logs while
every refusal is still counted in the metrics.

The v1 mailserver (RLPx) and the bridge's HTTP side both use these.

:class:`ConnectionCounts` counts a listener's connections, in total and per address, and
how many of them are still in their handshake; the RLPx listener and the libp2p gate each
put their own caps on it.

:data:`MAX_MESSAGE_SIZE` is status-go's ``MaxMessageSize``: the largest packet, envelope or
26/WAKU-PAYLOAD a node ever accepts.
"""

from __future__ import annotations

import ipaddress
import logging
import math
import threading
import time
from collections import Counter, OrderedDict
from collections.abc import Hashable
from typing import Any

__all__ = [
    "ConnectionCounts",
    "Continuations",
    "LogThrottle",
    "RateLimiter",
    "address_key",
    "allow_all",
]

# status-go's MaxMessageSize (10 MiB).
MAX_MESSAGE_SIZE = 10 * 1024 * 1024


def address_key(host: str) -> str:
    """The rate-limit key of a source address (IPv6 grouped by /64)."""
    try:
        address = ipaddress.ip_address(host.split("%", 1)[0])
    except ValueError:
        return host
    if isinstance(address, ipaddress.IPv6Address):
        if address.ipv4_mapped is not None:
            return str(address.ipv4_mapped)
        return str(ipaddress.IPv6Network((address, 64), strict=False))
    return str(address)


class ConnectionCounts:
    """A listener's connections: all it holds (``open``) and those still in their
    handshake (``handshaking``), in total and per address key (sans-IO; one thread)."""

    def __init__(self) -> None:
        self.open = 0
        self.handshaking = 0
        self.open_by_address: Counter[str] = Counter()
        self.handshaking_by_address: Counter[str] = Counter()

    def opened(self, key: str) -> None:
        """A connection from ``key`` was accepted: it holds a slot and is handshaking."""
        self.open += 1
        self.handshaking += 1
        self.open_by_address[key] += 1
        self.handshaking_by_address[key] += 1

    def handshake_done(self, key: str) -> None:
        """The connection's handshake ended (done or failed); it keeps its open slot."""
        self.handshaking -= 1
        _decrement(self.handshaking_by_address, key)

    def closed(self, key: str) -> None:
        self.open -= 1
        _decrement(self.open_by_address, key)


def _decrement(counter: Counter[str], key: str) -> None:
    counter[key] -= 1
    if counter[key] <= 0:
        del counter[key]  # bounded: only addresses that hold a slot stay


class RateLimiter:
    """Token buckets per key: ``rate`` tokens a second, at most ``burst`` saved.

    ``RateLimiter(interval)`` is status-go's one-request-per-interval limiter (rate
    ``1/interval``, burst 1); ``interval <= 0`` (or ``rate <= 0``) disables the limiter.
    """

    def __init__(
        self,
        interval: float = 0.0,
        *,
        rate: float | None = None,
        burst: float = 1.0,
        max_keys: int = 100_000,
    ) -> None:
        if rate is None:
            rate = 1.0 / interval if interval > 0 else 0.0
        self.rate = float(rate)
        self.burst = max(1.0, float(burst))
        self._buckets: OrderedDict[Any, tuple[float, float]] = OrderedDict()
        self._max_keys = max_keys

    @property
    def enabled(self) -> bool:
        return self.rate > 0 and math.isfinite(self.rate)

    def tokens(self, key: Any, now: float) -> float:
        """Tokens ``key`` has at ``now``."""
        if not self.enabled:
            return math.inf
        saved = self._buckets.get(key)
        if saved is None:
            return self.burst
        tokens, at = saved
        return min(self.burst, tokens + max(0.0, now - at) * self.rate)

    def has(self, key: Any, now: float, cost: float = 1.0) -> bool:
        return self.tokens(key, now) >= cost

    def take(self, key: Any, now: float, cost: float = 1.0) -> None:
        """Spend ``cost`` tokens (the balance may not go below zero)."""
        if not self.enabled:
            return
        self._buckets[key] = (max(0.0, self.tokens(key, now) - cost), now)
        self._buckets.move_to_end(key)
        while len(self._buckets) > self._max_keys:
            self._buckets.popitem(last=False)

    def allow(self, key: Any, now: float, cost: float = 1.0) -> bool:
        """Spend ``cost`` tokens if ``key`` has them."""
        if not self.has(key, now, cost):
            return False
        self.take(key, now, cost)
        return True

    def wait(self, key: Any, now: float, cost: float = 1.0) -> float:
        """Seconds until ``key`` will have ``cost`` tokens (0.0: it has them now)."""
        missing = cost - self.tokens(key, now)
        return 0.0 if missing <= 0 else missing / self.rate


def allow_all(checks: list[tuple[RateLimiter, Any]], now: float, cost: float = 1.0) -> int:
    """Spend from every ``(limiter, key)`` only if all have the tokens; the index of the
    first that has not (``-1``: allowed and spent)."""
    for index, (limiter, key) in enumerate(checks):
        if not limiter.has(key, now, cost):
            return index
    for limiter, key in checks:
        limiter.take(key, now, cost)
    return -1


class LogThrottle:
    """At most one log line per key every ``every`` seconds; at most ``size`` keys kept."""

    def __init__(self, every: float = 10.0, *, size: int = 4096) -> None:
        self.every = every
        self.size = size
        self._last: OrderedDict[Hashable, float] = OrderedDict()

    def should_log(self, key: Hashable, now: float) -> bool:
        last = self._last.get(key)
        if last is not None and now - last < self.every:
            return False
        self._last[key] = now
        self._last.move_to_end(key)
        while len(self._last) > self.size:
            self._last.popitem(last=False)
        return True


class ThrottledRecords(logging.Filter):
    """A handler filter passing at most one record per kind every ``every`` seconds, as
    :class:`LogThrottle` does for our own refusal logs: for third-party loggers that log
    once per frame or connection (py-libp2p), whose messages are formatted before they
    reach us, a kind is the call site (logger, file, line, level). What is held back is
    counted in ``suppressed`` (by logger name). Thread-safe."""

    def __init__(self, every: float = 10.0, *, size: int = 4096) -> None:
        super().__init__()
        self._throttle = LogThrottle(every, size=size)
        self._lock = threading.Lock()
        self.suppressed: Counter[str] = Counter()

    def filter(self, record: logging.LogRecord) -> bool:
        kind = (record.name, record.pathname, record.lineno, record.levelno)
        with self._lock:
            if self._throttle.should_log(kind, time.monotonic()):
                return True
            self.suppressed[record.name] += 1
            return False


class Continuations:
    """One-use tickets for "the next page of a query this server answered to this client".

    :meth:`issue` records ``key`` (client and cursor handed out) with the ``query`` it
    belongs to; :meth:`redeem` is true once for the same key and query before ``ttl``
    seconds pass (a forged, repeated, expired or other-query cursor is a fresh request).
    At most ``size`` tickets are kept, the oldest forgotten first.
    """

    def __init__(self, size: int = 100_000, *, ttl: float = math.inf) -> None:
        self.size = size
        self.ttl = ttl
        self._tickets: OrderedDict[Hashable, tuple[Hashable, float]] = OrderedDict()

    def issue(self, key: Hashable, now: float, query: Hashable = None) -> None:
        self._tickets.pop(key, None)
        self._tickets[key] = (query, now + self.ttl)
        while len(self._tickets) > self.size:
            self._tickets.popitem(last=False)

    def redeem(self, key: Hashable, now: float, query: Hashable = None) -> bool:
        ticket = self._tickets.get(key)
        if ticket is None or ticket[0] != query:
            return False  # a mismatch does not use up the client's ticket
        del self._tickets[key]
        return ticket[1] >= now

    def __len__(self) -> int:
        return len(self._tickets)
