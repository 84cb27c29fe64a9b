"""The inbound gate, sans-IO: :class:`InboundGate` counts every accepted TCP/WebSocket
connection by source address (IPv6: per /64) from the moment it is accepted, in two phases
with their own budgets: *handshaking* (multistream-select, Noise, muxer: ``max_handshakes``,
per address ``max_handshakes_per_address``) and *open* (all admitted connections,
``max_connections``, per address ``max_connections_per_address``). One address never gets
more than ``address_share`` of either budget, so a share always stays for the others; and
the last ``reserved_share`` of each budget is kept for addresses that hold no connection
yet, so a few addresses at their caps (seven, at the defaults, fill 200 connections) cannot
lock new clients out. An address opens at most ``address_handshake_rate`` connections a
second (burst ``address_handshake_burst``): each costs a Noise handshake, whose CPU is the
listener's loop's (about 0.6 ms with a secp256k1 key), so one address cannot hold the loop.
What the global caps protect: file descriptors, the memory each connection may hold
(``max_buffered_bytes`` received and as much unsent) and the loop's handshake CPU.

The transport (:mod:`~waku_legacy.p2p.transport.native`; the tests' py-libp2p peer too)
asks :meth:`InboundGate.admit` at accept and reports the handshake's end and the close."""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

from waku_legacy.config.keys import default_of
from waku_legacy.limits import ConnectionCounts, RateLimiter
from waku_legacy.p2p.limits import HANDSHAKE_BURST_SECONDS, HostLimits, ListenerLimits

__all__ = ["GateLimits", "InboundGate"]


@dataclass(frozen=True)
class GateLimits:
    """The gate's share of :class:`ListenerLimits` (built from it by the policy; the defaults
    are the declared ones, never written again here)."""

    #: connections admitted and not yet closed (handshaking or open)
    max_connections: int = default_of(HostLimits, "max_connections")
    max_connections_per_address: int = default_of(ListenerLimits, "max_connections_per_address")
    #: connections admitted whose Noise and muxer handshake has not finished
    max_handshakes: int = default_of(ListenerLimits, "max_handshakes")
    max_handshakes_per_address: int = default_of(ListenerLimits, "max_handshakes_per_address")
    #: the largest share of each budget one address may hold
    address_share: float = default_of(ListenerLimits, "address_share")
    handshake_timeout: float = default_of(HostLimits, "handshake_timeout")
    #: connections a second one address may open (0: no limit), and at once
    address_handshake_rate: float = default_of(ListenerLimits, "address_handshakes_per_second")
    address_handshake_burst: float = HANDSHAKE_BURST_SECONDS * address_handshake_rate
    #: the share of each budget kept for addresses that hold no connection
    reserved_share: float = default_of(ListenerLimits, "reserved_share")

    def per_address(self, configured: int, budget: int) -> int:
        return max(1, min(configured, math.floor(budget * self.address_share)))


class InboundGate(ConnectionCounts):
    """Who may hold a connection slot (sans-IO; one per listener, trio thread only)."""

    def __init__(self, limits: GateLimits) -> None:
        super().__init__()
        self.limits = limits
        self.max_per_address = limits.per_address(
            limits.max_connections_per_address, limits.max_connections
        )
        self.max_handshakes_per_address = limits.per_address(
            limits.max_handshakes_per_address, limits.max_handshakes
        )
        #: what addresses already holding a connection may fill of each budget
        self.shared_connections = limits.max_connections - math.floor(
            limits.max_connections * limits.reserved_share
        )
        self.shared_handshakes = limits.max_handshakes - math.floor(
            limits.max_handshakes * limits.reserved_share
        )
        self._rate = RateLimiter(
            rate=limits.address_handshake_rate, burst=limits.address_handshake_burst
        )

    def admit(self, address: str, now: float | None = None) -> str | None:
        """Take a handshake slot for a new connection from ``address``, or say why not."""
        limits = self.limits
        if self.open >= limits.max_connections:
            return f"{limits.max_connections} connections open"
        held = self.open_by_address.get(address, 0)
        if held >= self.max_per_address:
            return f"{self.max_per_address} connections open from {address}"
        if held and self.open >= self.shared_connections:
            kept = limits.max_connections - self.shared_connections
            return f"{self.open} connections open, the last {kept} kept for addresses holding none"
        if self.handshaking >= limits.max_handshakes:
            return f"{limits.max_handshakes} handshakes under way"
        handshaking = self.handshaking_by_address.get(address, 0)
        if handshaking >= self.max_handshakes_per_address:
            return f"{self.max_handshakes_per_address} handshakes under way from {address}"
        if held and self.handshaking >= self.shared_handshakes:
            kept = limits.max_handshakes - self.shared_handshakes
            return (
                f"{self.handshaking} handshakes under way, the last {kept} kept for new addresses"
            )
        if not self._rate.allow(address, time.monotonic() if now is None else now):
            return f"over {limits.address_handshake_rate:g} new connections/s from {address}"
        self.opened(address)
        return None
