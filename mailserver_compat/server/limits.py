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
from dataclasses import dataclass, replace
from typing import Any

from waku_legacy.config.keys import Kind, declared_keys, key, read_table
from waku_legacy.errors import ConfigError

__all__ = ["V1Limits"]


@dataclass(frozen=True)
class V1Limits:
    """Per-peer and per-address limits of the v1 mailserver (0 disables a rate).

    Requests: the per-peer rate is ``MailServerConfig.rate_limit`` (seconds per request,
    status-go's setting) with a burst of ``request_burst``; a source address gets
    ``address_request_rate`` a second with ``address_request_burst``. Only fresh requests
    spend tokens: a request continuing from a cursor this server handed the same peer for
    the same query is a page of an answered request and is never refused.
    """

    request_burst: int = key(10, min=1, doc="fresh history requests a peer may send at once")
    address_request_rate: float = key(5.0, min=0, doc="fresh requests per second per address")
    address_request_burst: int = key(50, min=1, doc="fresh requests an address may send at once")
    live_rate: float = key(20.0, min=0, doc="live envelopes per second per peer")
    live_burst: int = key(200, min=1, doc="live envelopes a peer may send at once")
    address_live_rate: float = key(50.0, min=0, doc="live envelopes per second per address")
    address_live_burst: int = key(500, min=1, doc="live envelopes an address may send at once")
    max_peers: int = key(500, min=1, doc="connected peers (handshaking included)")
    max_peers_per_address: int = key(16, min=1, doc="connections from one address (IPv6: /64)")
    max_pending_handshakes: int = key(256, min=1, doc="connections still handshaking")
    max_pending_handshakes_per_address: int = key(
        4, min=1, doc="connections still handshaking from one address"
    )
    address_connect_rate: float = key(2.0, min=0, doc="new connections per second per address")
    address_connect_burst: int = key(20, min=1, doc="new connections an address may open at once")
    handshake_timeout: float = key(5.0, min=0.1,
                                   doc="seconds for the RLPx and waku handshakes")  # fmt: skip
    scan_limit: int = key(5000, min=1, doc="store rows one request may examine (partial page)")

    def __post_init__(self) -> None:
        # values built in code (the `v1 serve` options), checked as the config reader checks
        for declared in declared_keys(V1Limits):
            name, low = declared.name, declared.spec.min or 0
            value = getattr(self, name)
            if not isinstance(value, int | float) or isinstance(value, bool):
                raise ConfigError(f"v1 limit {name} must be a number, got {value!r}")
            if declared.kind is Kind.INTEGER and value != int(value):
                raise ConfigError(f"v1 limit {name} must be an integer, got {value!r}")
            if not math.isfinite(value) or value < low:
                raise ConfigError(f"v1 limit {name} must be at least {low:g}, got {value!r}")

    @classmethod
    def names(cls) -> tuple[str, ...]:
        return tuple(d.name for d in declared_keys(cls))

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any] | None, where: str = "[v1.limits]") -> V1Limits:
        """Read a config table; unknown keys and bad values are :class:`ConfigError`\\ s
        naming the key."""
        if data is None:
            return cls()
        limits: V1Limits = read_table(cls, data, where)
        return limits

    @classmethod
    def add_arguments(cls, parser: argparse._ActionsContainer) -> None:
        """One ``--NAME`` option per limit (``--max-peers-per-address`` …)."""
        for declared in declared_keys(cls):
            parser.add_argument(
                "--" + declared.name.replace("_", "-"),
                type=int if declared.kind is Kind.INTEGER else float,
                default=None,
                metavar="N",
                help=f"{declared.doc} (default {declared.default})",
            )

    @classmethod
    def from_arguments(cls, args: argparse.Namespace) -> V1Limits:
        values = {n: getattr(args, n) for n in cls.names() if getattr(args, n, None) is not None}
        try:
            return replace(cls(), **values)
        except ConfigError as exc:
            raise ConfigError(str(exc).replace("v1 limit ", "--").replace("_", "-")) from None
