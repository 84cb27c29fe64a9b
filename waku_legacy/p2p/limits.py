"""The libp2p listener's bounds (:class:`ListenerLimits`, with the connection-level ones in
:class:`HostLimits`, named after py-libp2p's host where they began), apart from the
transports that enforce them: importing this imports no trio, libp2p or asyncio. A field
declared with :func:`~waku_legacy.config.keys.key` is the bridge's ``[libp2p]`` key of the
same name (:class:`~waku_legacy.bridge.config.Libp2pConfig` takes it from here)."""

from __future__ import annotations

from dataclasses import dataclass, field

from waku_legacy.config.keys import Kind, key

__all__ = [
    "ADDRESS_REQUEST_BURST_SECONDS",
    "HANDSHAKE_BURST_SECONDS",
    "MAX_BUFFERED_BYTES",
    "HostLimits",
    "ListenerLimits",
]

#: bytes one connection may hold received and unread, and waiting to be sent (the
#: ``[libp2p] max_buffered_bytes`` default; the native connection's too)
MAX_BUFFERED_BYTES = 4 * 1024 * 1024


@dataclass(frozen=True)
class HostLimits:
    """The connection-level bounds (what py-libp2p's swarm enforced when it served; the
    tests' py-libp2p peer still takes them). A field declared with ``key()`` is the
    bridge's ``[libp2p]`` key of the same name."""

    max_connections: int = key(
        200, min=1, max=100_000, doc="connections in total, counted from accept"
    )
    max_connections_per_peer: int = key(4, min=1, max=1000, doc="connections per peer id")
    #: Noise handshake plus muxer negotiation of an inbound connection (``[libp2p]
    #: handshake_timeout`` sets ``negotiation_timeout`` too).
    handshake_timeout: float = key(
        10.0,
        kind=Kind.DURATION,
        doc="Noise + muxer of a new connection, and a stream's protocol negotiation",
    )
    #: multistream-select of an inbound stream (a stream that names no protocol in time).
    negotiation_timeout: float = 10.0
    dial_timeout: float = 10.0
    #: yamux: bytes one connection may hold received and not yet read by its streams
    #: (each stream is also held to its receive window); mplex has its own backpressure
    #: (one message of at most 1 MiB waits per stream, then the reader blocks). The native
    #: server holds what it sends to the same number: while bytes wait for the peer (its
    #: yamux window, the socket), an answer that would take them past it resets its stream.
    #: 4 MiB (was 16 MiB here, while [libp2p] said 4 MiB: the served default won)
    max_buffered_bytes: int = key(
        MAX_BUFFERED_BYTES,
        min=256 * 1024,
        max=1024**3,
        doc="bytes one connection holds unread (yamux), and waiting to be sent (past it: reset)",
    )


#: an address's handshake bucket holds this many seconds of its rate, its request bucket this
#: many (the bursts no key sets)
HANDSHAKE_BURST_SECONDS = 2.0
ADDRESS_REQUEST_BURST_SECONDS = 5.0


@dataclass(frozen=True)
class ListenerLimits:
    """The listener's bounds. A field declared with ``key()`` is the bridge's ``[libp2p]``
    key of the same name (as are :class:`HostLimits`' own)."""

    host: HostLimits = field(default_factory=HostLimits)
    #: connections from one source address (IPv6: per /64), counted from accept, before
    #: any handshake; with ``host.max_connections`` as the budget of all
    max_connections_per_address: int = key(
        32, min=1, max=100_000, doc="per source address (IPv6: per /64)"
    )
    #: connections accepted whose Noise + muxer handshake is under way (``host.
    #: handshake_timeout`` each), in total and from one address
    max_handshakes: int = key(
        128, min=1, max=100_000, doc="connections in their Noise + muxer handshake"
    )
    max_handshakes_per_address: int = key(16, min=1, max=100_000, doc="handshakes from one address")
    #: the largest share of each budget (connections, handshakes) one address may hold
    address_share: float = key(
        0.5, above=0, max=1, doc="one address never holds more of either budget"
    )
    #: the share of each budget kept for addresses that hold no connection yet (so a few
    #: addresses at their caps cannot lock new clients out)
    reserved_share: float = key(
        0.1, min=0, max=0.5, doc="of either budget, kept for addresses that hold no connection"
    )
    #: new connections a second from one address (IPv6: per /64), each a Noise handshake
    #: on the listener's loop (0: no limit), and how many at once (0:
    #: HANDSHAKE_BURST_SECONDS of the rate)
    address_handshakes_per_second: float = key(
        20.0, min=0, doc="new connections (a Noise handshake each) per address (0: none), burst 2x"
    )
    address_handshake_burst: float = 0.0
    max_streams_per_connection: int = key(
        32, min=1, max=10_000, doc="store requests in flight on one connection"
    )
    max_request_bytes: int = key(
        65536, min=1024, max=1024 * 1024, doc="one store request (a frame over it: reset)"
    )
    #: from the stream's protocol being agreed to the whole request read
    read_timeout: float = key(
        30.0,
        kind=Kind.DURATION,
        doc="a stream's whole request (keep >= 30s: js-waku pre-opens streams)",
    )
    write_timeout: float = key(30.0, kind=Kind.DURATION, doc="a response's write")
    #: a connection on which no stream opened, ended or was answered for this long is
    #: closed, with or without open streams (a stream the peer never ends is no progress)
    idle_timeout: float = key(
        300.0,
        kind=Kind.DURATION,
        doc="a connection without progress (no stream opened, ended or answered) is closed",
    )
    #: requests a second per peer id (0: no limit), and the bucket size
    requests_per_second: float = key(
        20.0, min=0, doc="per peer id (0: no budget); a store v3 page's next page is free"
    )
    request_burst: int = key(40, min=1, max=1_000_000, doc="requests a peer may send at once")
    #: requests a second per source address (IPv6: per /64), whatever the peer ids: a
    #: client that makes up a new peer id per connection shares one budget (0: no limit);
    #: the bucket (0: ADDRESS_REQUEST_BURST_SECONDS of the rate; it was 200 here while
    #: [libp2p] gave 5x its 100/s: the served 500 won)
    address_requests_per_second: float = key(
        100.0, min=0, doc="per source address (IPv6: /64), burst 5x"
    )
    address_request_burst: float = 0.0
    workers: int = key(
        4, min=1, max=64, doc="threads answering store queries (one store connection each)"
    )
    stop_timeout: float = 5.0

    def __post_init__(self) -> None:
        # the bursts follow their rates unless given
        if not self.address_handshake_burst:
            burst = HANDSHAKE_BURST_SECONDS * self.address_handshakes_per_second
            object.__setattr__(self, "address_handshake_burst", burst)
        if not self.address_request_burst:
            burst = ADDRESS_REQUEST_BURST_SECONDS * self.address_requests_per_second
            object.__setattr__(self, "address_request_burst", burst)
