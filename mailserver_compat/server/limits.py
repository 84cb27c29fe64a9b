"""What a Waku v1 node allows one peer and one source address: rates, bursts, connections
and the work of one request.

The token buckets and the address grouping are the core's (:mod:`waku_legacy.limits`).

:class:`V1Limits` collects every knob with defaults that never stop honest use (a
status-go client paging history or sending its chat messages stays far below them) and
reads them from a config mapping (the bridge's ``[v1.limits]`` table) or the
``waku-legacy v1 serve`` options.
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Mapping
from dataclasses import dataclass, fields, replace
from typing import Any, ClassVar

from waku_legacy.errors import ConfigError

__all__ = ["V1Limits"]


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
    def add_arguments(cls, parser: argparse._ActionsContainer) -> None:
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
