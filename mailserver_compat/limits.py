"""What a Waku v1 node allows one peer and one source address: rates, bursts, connections
and the work of one request.

:class:`RateLimiter` keeps one token bucket per key (a peer's public key or a source
address): ``rate`` tokens a second up to ``burst``; an action costs one token (or
``cost``). Buckets of keys not seen for a while are forgotten first when the table is full.

:func:`address_key` groups source addresses the way an operator thinks of "one machine":
an IPv4 address as is (IPv4-mapped IPv6 included), an IPv6 address by its /64 (a host gets
a whole /64; new addresses from it must not buy new budgets).

:class:`V1Limits` collects every knob with defaults that never stop honest use (a
status-go client paging history or sending its chat messages stays far below them) and
reads them from a config mapping (the bridge's ``[v1.limits]`` table) or the
``waku-legacy v1 serve`` options.
"""

from __future__ import annotations

import argparse
import ipaddress
import math
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass, fields, replace
from typing import Any, ClassVar

from waku_legacy.errors import ConfigError

__all__ = ["RateLimiter", "V1Limits", "address_key"]


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


def allow_all(checks: list[tuple[RateLimiter, Any]], now: float, cost: float = 1.0) -> int:
    """Spend from every ``(limiter, key)`` only if all have the tokens; the index of the
    first that has not (``-1``: allowed and spent)."""
    for index, (limiter, key) in enumerate(checks):
        if not limiter.has(key, now, cost):
            return index
    for limiter, key in checks:
        limiter.take(key, now, cost)
    return -1


@dataclass(frozen=True)
class _Knob:
    kind: type
    low: float
    help: str


@dataclass(frozen=True)
class V1Limits:
    """Per-peer and per-address limits of the v1 mailserver (0 disables a rate).

    Requests: the per-peer rate is ``MailServerConfig.rate_limit`` (seconds per request,
    status-go's setting) with a burst of ``request_burst``; a source address gets
    ``address_request_rate`` a second with ``address_request_burst``. Only fresh requests
    spend tokens: a request continuing from a cursor this server handed the same peer for
    the same query is a page of an answered request and is never refused.
    """

    request_burst: int = 10
    address_request_rate: float = 5.0
    address_request_burst: int = 50
    live_rate: float = 20.0
    live_burst: int = 200
    address_live_rate: float = 50.0
    address_live_burst: int = 500
    max_peers: int = 500
    max_peers_per_address: int = 16
    max_pending_handshakes: int = 256
    max_pending_handshakes_per_address: int = 4
    address_connect_rate: float = 2.0
    address_connect_burst: int = 20
    handshake_timeout: float = 5.0
    scan_limit: int = 5000

    _KNOBS: ClassVar[dict[str, _Knob]] = {
        "request_burst": _Knob(int, 1, "fresh history requests a peer may send at once"),
        "address_request_rate": _Knob(float, 0, "fresh requests per second per address"),
        "address_request_burst": _Knob(int, 1, "fresh requests an address may send at once"),
        "live_rate": _Knob(float, 0, "live envelopes per second per peer"),
        "live_burst": _Knob(int, 1, "live envelopes a peer may send at once"),
        "address_live_rate": _Knob(float, 0, "live envelopes per second per address"),
        "address_live_burst": _Knob(int, 1, "live envelopes an address may send at once"),
        "max_peers": _Knob(int, 1, "connected peers (handshaking included)"),
        "max_peers_per_address": _Knob(int, 1, "connections from one address (IPv6: /64)"),
        "max_pending_handshakes": _Knob(int, 1, "connections still handshaking"),
        "max_pending_handshakes_per_address": _Knob(
            int, 1, "connections still handshaking from one address"
        ),
        "address_connect_rate": _Knob(float, 0, "new connections per second per address"),
        "address_connect_burst": _Knob(int, 1, "new connections an address may open at once"),
        "handshake_timeout": _Knob(float, 0.1, "seconds for the RLPx and waku handshakes"),
        "scan_limit": _Knob(int, 1, "store rows one request may examine (partial page)"),
    }

    def __post_init__(self) -> None:
        for name, knob in self._KNOBS.items():
            value = getattr(self, name)
            if not isinstance(value, int | float) or isinstance(value, bool):
                raise ConfigError(f"v1 limit {name} must be a number, got {value!r}")
            if knob.kind is int and value != int(value):
                raise ConfigError(f"v1 limit {name} must be an integer, got {value!r}")
            if not math.isfinite(value) or value < knob.low:
                raise ConfigError(f"v1 limit {name} must be at least {knob.low:g}, got {value!r}")

    @classmethod
    def names(cls) -> tuple[str, ...]:
        return tuple(f.name for f in fields(cls))

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any] | None, where: str = "[v1.limits]") -> V1Limits:
        """Read a config table; unknown keys and bad values are :class:`ConfigError`\\ s
        naming the key."""
        if data is None:
            return cls()
        if not isinstance(data, Mapping):
            raise ConfigError(f"{where} must be a table, got {type(data).__name__}")
        unknown = sorted(set(data) - set(cls._KNOBS))
        if unknown:
            raise ConfigError(
                f"{where}: unknown key(s) {', '.join(map(repr, unknown))}; expected some of "
                f"{', '.join(cls.names())}"
            )
        values = {}
        for name, value in data.items():
            knob = cls._KNOBS[name]
            ok = isinstance(value, int | float) and not isinstance(value, bool)
            if ok and knob.kind is int:
                ok = isinstance(value, int)
            if not ok or not math.isfinite(value) or value < knob.low:
                kind = "an integer" if knob.kind is int else "a number"
                raise ConfigError(
                    f"{where}: key '{name}' must be {kind} >= {knob.low:g} ({knob.help}), "
                    f"got {value!r}"
                )
            values[name] = value
        return cls(**values)

    @classmethod
    def add_arguments(cls, parser: argparse.ArgumentParser) -> None:
        """One ``--NAME`` option per limit (``--max-peers-per-address`` …)."""
        defaults = cls()
        for name, knob in cls._KNOBS.items():
            parser.add_argument(
                "--" + name.replace("_", "-"),
                type=knob.kind,
                default=None,
                metavar="N",
                help=f"{knob.help} (default {getattr(defaults, name)})",
            )

    @classmethod
    def from_arguments(cls, args: argparse.Namespace) -> V1Limits:
        values = {n: getattr(args, n) for n in cls._KNOBS if getattr(args, n, None) is not None}
        try:
            return replace(cls(), **values)
        except ConfigError as exc:
            raise ConfigError(str(exc).replace("v1 limit ", "--").replace("_", "-")) from None
