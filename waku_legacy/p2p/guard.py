"""Bounds py-libp2p lacks, added around it (trio side): inbound connection admission before
any handshake, capped multistream-select messages, and yamux receive windows enforced.

* :class:`InboundGate` (sans-IO) counts every accepted TCP/WebSocket connection by source
  address (IPv6: per /64) from the moment it is accepted, in two phases with their own
  budgets: *handshaking* (multistream-select, Noise, muxer: ``max_handshakes``, per address
  ``max_handshakes_per_address``) and *open* (all admitted connections, ``max_connections``,
  per address ``max_connections_per_address``). One address never gets more than
  ``address_share`` of either budget, so a share always stays for the others.
  :func:`guard_inbound` puts it in front of py-libp2p's swarm: a connection over a limit is
  closed at once, before a byte is read (no crypto work); a handshake that does not finish
  within ``handshake_timeout`` is dropped.
* :func:`bound_multistream_reads`: a multistream-select message longer than
  :data:`MULTISTREAM_MAX_MESSAGE_BYTES` ends the negotiation (and the connection) as soon as
  its length prefix is read; py-libp2p's ``read_delim`` would read any announced length.
* :class:`YamuxReceiveMeter` (sans-IO) follows each yamux stream's receive window from the
  frames the connection sends (WINDOW_UPDATE credit) and receives (DATA): DATA past the
  window is a protocol error (yamux spec, "Flow Control"), and the bytes a connection holds
  unread are capped. py-libp2p logs a warning per frame past the window and keeps the bytes.
"""

from __future__ import annotations

import math
import struct
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import trio
from libp2p.abc import IMuxedConn, INetwork
from libp2p.exceptions import ParseError
from libp2p.io.exceptions import IOException
from libp2p.network.connection.raw_connection import RawConnection
from libp2p.protocol_muxer.exceptions import MultiselectCommunicatorError
from libp2p.protocol_muxer.multiselect_communicator import MultiselectCommunicator
from libp2p.stream_muxer.yamux.yamux import (
    DEFAULT_WINDOW_SIZE,
    FLAG_RST,
    HEADER_SIZE,
    TYPE_DATA,
    TYPE_WINDOW_UPDATE,
)
from libp2p.utils.varint import read_varint_prefixed_bytes_limited
from multiaddr import Multiaddr

from waku_legacy.limits import address_key

__all__ = [
    "MULTISTREAM_MAX_MESSAGE_BYTES",
    "GateLimits",
    "InboundGate",
    "YamuxReceiveMeter",
    "bound_multistream_reads",
    "guard_inbound",
]

#: The longest multistream-select message read (length prefix included in neither).
#: go-multistream refuses longer messages with ErrTooLarge, and js-libp2p's
#: multistream-select has ``MAX_PROTOCOL_LENGTH = 1024`` "conforming to go-libp2p"
#: (libp2p/js-libp2p packages/multistream-select/src/constants.ts).
MULTISTREAM_MAX_MESSAGE_BYTES = 1024

_HEADER = struct.Struct("!BBHII")

#: ``(kind, address, reason)``: a refusal or a dropped handshake, for counting and logging
OnRefused = Callable[[str, str, str], None]


# -- multistream-select ------------------------------------------------------------------


async def _bounded_read(self: MultiselectCommunicator) -> str:
    try:
        data = await read_varint_prefixed_bytes_limited(
            self.read_writer, MULTISTREAM_MAX_MESSAGE_BYTES
        )
    except (ParseError, IOException) as exc:  # MessageTooLarge is an IOException
        raise MultiselectCommunicatorError(f"multistream-select read: {exc}") from exc
    if data[-1:] != b"\n":
        raise MultiselectCommunicatorError("multistream-select message without newline")
    try:
        return data[:-1].decode()
    except UnicodeDecodeError as exc:
        raise MultiselectCommunicatorError("multistream-select message is not UTF-8") from exc


def bound_multistream_reads() -> None:
    """Make every multistream-select read in this process bounded (idempotent).

    py-libp2p builds its ``MultiselectCommunicator`` itself in five places (connection
    security and muxer negotiation, stream negotiation, ping), so its one ``read`` method
    is replaced rather than the class subclassed."""
    MultiselectCommunicator.read = _bounded_read  # type: ignore[method-assign]


# -- inbound admission -------------------------------------------------------------------


@dataclass(frozen=True)
class GateLimits:
    #: connections admitted and not yet closed (handshaking or open)
    max_connections: int = 200
    max_connections_per_address: int = 32
    #: connections admitted whose Noise and muxer handshake has not finished
    max_handshakes: int = 128
    max_handshakes_per_address: int = 16
    #: the largest share of each budget one address may hold
    address_share: float = 0.5
    handshake_timeout: float = 10.0

    def per_address(self, configured: int, budget: int) -> int:
        return max(1, min(configured, math.floor(budget * self.address_share)))


class InboundGate:
    """Who may hold a connection slot (sans-IO; one per listener, trio thread only)."""

    def __init__(self, limits: GateLimits) -> None:
        self.limits = limits
        self.max_per_address = limits.per_address(
            limits.max_connections_per_address, limits.max_connections
        )
        self.max_handshakes_per_address = limits.per_address(
            limits.max_handshakes_per_address, limits.max_handshakes
        )
        self.open = 0
        self.handshaking = 0
        self.open_by_address: Counter[str] = Counter()
        self.handshaking_by_address: Counter[str] = Counter()

    def admit(self, address: str) -> str | None:
        """Take a handshake slot for a new connection from ``address``, or say why not."""
        limits = self.limits
        if self.open >= limits.max_connections:
            return f"{limits.max_connections} connections open"
        if self.open_by_address[address] >= self.max_per_address:
            return f"{self.max_per_address} connections open from {address}"
        if self.handshaking >= limits.max_handshakes:
            return f"{limits.max_handshakes} handshakes under way"
        if self.handshaking_by_address[address] >= self.max_handshakes_per_address:
            return f"{self.max_handshakes_per_address} handshakes under way from {address}"
        self.open += 1
        self.handshaking += 1
        self.open_by_address[address] += 1
        self.handshaking_by_address[address] += 1
        return None

    def handshake_done(self, address: str) -> None:
        """The connection's handshake ended (done or failed); it keeps its open slot."""
        self.handshaking -= 1
        _decrement(self.handshaking_by_address, address)

    def closed(self, address: str) -> None:
        self.open -= 1
        _decrement(self.open_by_address, address)


def _decrement(counter: Counter[str], key: str) -> None:
    counter[key] -= 1
    if counter[key] <= 0:
        del counter[key]


def remote_address_of(conn: Any) -> str:
    """The address key (IPv6: its /64) of a raw connection's peer, or ``"unknown"``."""
    try:
        remote = conn.get_remote_address()
    except Exception:
        remote = None
    return address_key(str(remote[0])) if remote else "unknown"


async def _close_raw(conn: Any) -> None:
    try:
        with trio.move_on_after(1.0):
            await conn.close()
    except Exception:
        pass


def guard_inbound(swarm: INetwork, gate: InboundGate, on_refused: OnRefused) -> None:
    """Put ``gate`` in front of every inbound connection of ``swarm`` (TCP and WebSocket).

    Replaces the swarm's ``_handle_inbound_connection`` (what each transport listener
    calls with a just-accepted connection): the admission is decided before py-libp2p
    reads a byte, a refused connection is closed at once, an admitted one is upgraded
    (multistream-select, Noise, muxer) within ``handshake_timeout`` and keeps its slot
    until its muxer closes. py-libp2p's own inbound limiter is not used: it held a slot
    until the swarm stopped, not until the connection closed."""
    timeout = gate.limits.handshake_timeout

    async def handle(raw: Any, maddr: Multiaddr) -> None:
        address = remote_address_of(raw)
        refused = gate.admit(address)
        if refused is not None:
            await _close_raw(raw)
            on_refused("connection_refused", address, f"over the limit: {refused}")
            return
        handshaking = True
        try:
            with trio.move_on_after(timeout) as scope:
                upgrade: Callable[[Any, Multiaddr], Awaitable[IMuxedConn]]
                upgrade = swarm.upgrade_inbound_raw_conn
                muxed = await upgrade(RawConnection(raw, False), maddr)
            gate.handshake_done(address)
            handshaking = False
            if scope.cancelled_caught:
                await _close_raw(raw)
                on_refused("handshake_timeout", address, f"no handshake within {timeout} s")
                return
            await _wait_closed(muxed)
        except Exception as exc:
            await _close_raw(raw)
            if handshaking:  # py-libp2p's own upgrade timeout (the same) raises
                kind = "handshake_timeout" if "timeout" in str(exc).lower() else "handshake_failed"
                on_refused(kind, address, f"{type(exc).__name__}: {exc}")
        finally:
            if handshaking:
                gate.handshake_done(address)
            gate.closed(address)

    swarm._handle_inbound_connection = handle  # type: ignore[attr-defined]


async def _wait_closed(muxed: IMuxedConn) -> None:
    closed = getattr(muxed, "event_closed", None)
    if isinstance(closed, trio.Event):
        await closed.wait()
        return
    while not muxed.is_closed:  # a muxer without the event: poll
        await trio.sleep(1.0)


# -- yamux receive windows ---------------------------------------------------------------


class YamuxReceiveMeter:
    """One yamux connection's receive windows and unread bytes (sans-IO).

    :meth:`sent` sees every frame header the connection writes, :meth:`received` every
    frame header it reads (before the body). A stream's window starts at 256 KiB and grows
    by each WINDOW_UPDATE we send for it; each DATA frame received uses up its length."""

    def __init__(self, max_buffered: int, initial_window: int = DEFAULT_WINDOW_SIZE) -> None:
        self.max_buffered = max_buffered
        self.initial_window = initial_window
        self._window: dict[int, int] = {}

    def sent(self, header: bytes) -> None:
        if len(header) < HEADER_SIZE:
            return
        _, typ, flags, stream_id, length = _HEADER.unpack_from(header)
        if typ == TYPE_WINDOW_UPDATE and stream_id:
            self._window[stream_id] = self._window.get(stream_id, self.initial_window) + length
        if flags & FLAG_RST:
            self._window.pop(stream_id, None)

    def received(self, header: bytes, buffered: int) -> str | None:
        """Why the frame with ``header`` is refused (``buffered``: bytes the connection
        holds unread), or None."""
        _, typ, flags, stream_id, length = _HEADER.unpack_from(header)
        if flags & FLAG_RST:
            self._window.pop(stream_id, None)
        if typ != TYPE_DATA or not length:
            return None
        left = self._window.get(stream_id, self.initial_window) - length
        if left < 0:
            return f"stream {stream_id}: DATA {-left} bytes past the receive window"
        self._window[stream_id] = left
        if buffered + length > self.max_buffered:
            return f"over {self.max_buffered} bytes received and not read"
        return None

    def forget_except(self, live: set[int]) -> None:
        """Drop the windows of streams that ended (bounded memory)."""
        for stream_id in [s for s in self._window if s not in live]:
            del self._window[stream_id]

    def __len__(self) -> int:
        return len(self._window)
