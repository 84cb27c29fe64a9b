"""Bounds py-libp2p lacks, added around it (trio side): inbound connection admission before
any handshake, capped multistream-select messages, and yamux receive windows enforced.

* :class:`~waku_legacy.p2p.codec.gate.InboundGate` (sans-IO, its own module) admits connections;
  :func:`guard_inbound` puts it in front of py-libp2p's swarm: a connection over a limit is
  closed at once, before a byte is read (no crypto work); a handshake that does not finish
  within ``handshake_timeout`` is dropped. A ``/ws`` connection, and any connection to a
  port TCP and WebSocket share, is counted at TCP accept, before its HTTP upgrade (or the
  3-byte classification of a shared port), and only once.
* :func:`bound_multistream_reads`: a multistream-select message longer than
  :data:`MULTISTREAM_MAX_MESSAGE_BYTES` ends the negotiation (and the connection) as soon as
  its length prefix is read; py-libp2p's ``read_delim`` would read any announced length.
* :class:`YamuxReceiveMeter` (sans-IO) follows each yamux stream's receive window from the
  frames the connection sends (WINDOW_UPDATE credit) and receives (DATA): DATA past the
  window is a protocol error (yamux spec, "Flow Control"), and the bytes a connection holds
  unread are capped. py-libp2p logs a warning per frame past the window and keeps the bytes.
"""

from __future__ import annotations

import struct
import weakref
from collections.abc import Awaitable, Callable
from functools import partial
from typing import Any

import libp2p.transport.websocket.listener as ws_listener_module
import trio
import trio_websocket
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
from libp2p.transport.websocket.transport import WebsocketTransport
from libp2p.utils.varint import read_varint_prefixed_bytes_limited
from multiaddr import Multiaddr
from trio_websocket._impl import CONN_TIMEOUT, MAX_MESSAGE_SIZE, MESSAGE_QUEUE_SIZE, RECEIVE_BYTES

from waku_legacy.limits import address_key
from waku_legacy.p2p.codec.gate import GateLimits, InboundGate
from waku_legacy.p2p.codec.multistream import MULTISTREAM_MAX_MESSAGE_BYTES

__all__ = [
    "MULTISTREAM_MAX_MESSAGE_BYTES",
    "GateLimits",
    "InboundGate",
    "YamuxReceiveMeter",
    "bound_multistream_reads",
    "gated_serve_websocket",
    "guard_inbound",
    "serve_admitted",
]


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


class Admission:
    """One connection's slots in a gate: released once each, whatever closes first."""

    def __init__(self, gate: InboundGate, address: str, stream: Any = None) -> None:
        self.gate = gate
        self.address = address
        self.stream = stream
        self.handshaking = True
        self.open = True
        if stream is not None:
            _ADMITTED[id(stream)] = self

    def handshake_done(self) -> None:
        if self.handshaking:
            self.handshaking = False
            self.gate.handshake_done(self.address)

    def close(self) -> None:
        self.handshake_done()
        if self.open:
            self.open = False
            self.gate.closed(self.address)
            if self.stream is not None and _ADMITTED.get(id(self.stream)) is self:
                del _ADMITTED[id(self.stream)]


#: connections admitted at TCP accept (WebSocket, shared port), by their accepted stream's id
_ADMITTED: dict[int, Admission] = {}
#: attributes leading from what py-libp2p hands the swarm to the accepted stream
#: (P2PWebSocketConnection._ws, WebSocketConnection._stream, TrioTCPStream.stream,
#: PeekableStream.stream)
_INNER = ("_ws", "_stream", "stream")


def _admission_of(raw: Any) -> Admission | None:
    """The accept-time admission of the stream under ``raw``, if it had one."""
    seen = raw
    for _ in range(6):
        found = _ADMITTED.get(id(seen))
        if found is not None and found.stream is seen:
            return found
        seen = next((getattr(seen, n) for n in _INNER if getattr(seen, n, None) is not None), None)
        if seen is None:
            return None
    return None


def remote_address_of(conn: Any) -> str:
    """The address key (IPv6: its /64) of a raw connection's peer, or ``"unknown"``."""
    try:
        remote = conn.get_remote_address()
    except Exception:
        remote = None
    return address_key(str(remote[0])) if remote else "unknown"


def _peer_of(stream: Any) -> str:
    """The address key of an accepted trio stream's peer (SocketStream or SSLStream)."""
    sock = getattr(getattr(stream, "transport_stream", stream), "socket", None)
    try:
        return address_key(str(sock.getpeername()[0])) if sock is not None else "unknown"
    except OSError:
        return "unknown"


async def _close_raw(conn: Any) -> None:
    try:
        with trio.move_on_after(1.0):
            await conn.close()
    except Exception:
        pass


async def serve_admitted(
    gate: InboundGate,
    on_refused: OnRefused,
    stream: trio.abc.Stream,
    serve: Callable[[], Awaitable[None]],
) -> None:
    """Admit a just-accepted ``stream`` before anything is read from it, then ``serve()``
    it; its slots are released when ``serve`` returns (or earlier, by the swarm's guard
    once its muxer closes). Over a limit it is closed at once; still in its handshake
    (HTTP upgrade, Noise, muxer) ``handshake_timeout`` after accept, it is closed."""
    address = _peer_of(stream)
    refused = gate.admit(address)
    if refused is not None:
        transport = getattr(stream, "transport_stream", stream)  # no TLS close_notify
        with trio.move_on_after(1.0):
            await transport.aclose()
        on_refused("connection_refused", address, f"over the limit: {refused}")
        return
    admission = Admission(gate, address, stream)
    timeout = gate.limits.handshake_timeout

    async def serve_then_stop(nursery: trio.Nursery) -> None:
        try:
            await serve()
        except Exception:  # the callers' own handlers end here too: nothing to add
            pass
        finally:
            nursery.cancel_scope.cancel()

    async def drop_if_handshaking(nursery: trio.Nursery) -> None:
        # py-libp2p's shared-port WebSocket upgrade waits for the HTTP request unbounded
        await trio.sleep(timeout)
        if admission.handshaking:
            on_refused("handshake_timeout", address, f"no handshake within {timeout} s")
            with trio.move_on_after(1.0):
                await getattr(stream, "transport_stream", stream).aclose()
            nursery.cancel_scope.cancel()  # the shared port waits for a close callback

    try:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(drop_if_handshaking, nursery)
            nursery.start_soon(serve_then_stop, nursery)
    finally:
        admission.close()


class GatedWebSocketServer(trio_websocket.WebSocketServer):
    """trio-websocket's server, counting each TCP connection in ``gate`` at accept."""

    def __init__(self, *args: Any, gate: InboundGate, on_refused: OnRefused, **kw: Any) -> None:
        super().__init__(*args, **kw)
        self._gate = gate
        self._on_refused = on_refused

    async def _handle_connection(self, stream: trio.abc.Stream) -> None:
        serve = partial(super()._handle_connection, stream)
        await serve_admitted(self._gate, self._on_refused, stream, serve)


#: the gate of each py-libp2p WebsocketListener a guarded swarm created
_WS_GATES: weakref.WeakKeyDictionary[Any, tuple[InboundGate, OnRefused]] = (
    weakref.WeakKeyDictionary()
)
_serve_websocket = trio_websocket.serve_websocket


async def gated_serve_websocket(
    handler: Any,
    host: Any,
    port: int,
    ssl_context: Any,
    *,
    handler_nursery: trio.Nursery | None = None,
    message_queue_size: int = MESSAGE_QUEUE_SIZE,
    max_message_size: int = MAX_MESSAGE_SIZE,
    receive_buffer_size: int | None = RECEIVE_BYTES,
    connect_timeout: float = CONN_TIMEOUT,
    disconnect_timeout: float = CONN_TIMEOUT,
    task_status: Any = trio.TASK_STATUS_IGNORED,
) -> None:
    """``trio_websocket.serve_websocket`` as py-libp2p's WebSocket listener calls it, with
    the same listeners and settings, serving through :class:`GatedWebSocketServer` when the
    listener belongs to a guarded swarm (whose ``handshake_timeout`` then also bounds the
    wait for the HTTP upgrade request)."""
    settings: dict[str, Any] = {
        "handler_nursery": handler_nursery,
        "message_queue_size": message_queue_size,
        "max_message_size": max_message_size,
        "receive_buffer_size": receive_buffer_size,
        "connect_timeout": connect_timeout,
        "disconnect_timeout": disconnect_timeout,
    }
    guard = _WS_GATES.get(getattr(handler, "__self__", None))
    if guard is None:
        await _serve_websocket(
            handler, host, port, ssl_context, task_status=task_status, **settings
        )
    else:
        listeners: list[Any]
        if ssl_context is None:
            listeners = list(await trio.open_tcp_listeners(port, host=host))
        else:
            listeners = list(
                await trio.open_ssl_over_tcp_listeners(
                    port, ssl_context, host=host, https_compatible=True
                )
            )
        gate, on_refused = guard
        # trio-websocket waits for the HTTP request until connect_timeout (60 s) even after
        # the peer has gone: the upgrade is part of the handshake, so it gets its bound
        settings["connect_timeout"] = min(connect_timeout, gate.limits.handshake_timeout)
        server = GatedWebSocketServer(
            handler, listeners, gate=gate, on_refused=on_refused, **settings
        )
        await server.run(task_status=task_status)


def _gate_accepts(swarm: INetwork, gate: InboundGate, on_refused: OnRefused) -> None:
    """Count connections at TCP accept where py-libp2p hands them to the swarm only later:
    its WebSocket listeners (after the HTTP upgrade) and a port TCP and WebSocket share
    (after the 3-byte classification; both kinds)."""
    setattr(ws_listener_module, "serve_websocket", gated_serve_websocket)  # noqa: B010
    manager = getattr(swarm, "transport_manager", None)
    transports = manager.get_transports() if manager is not None else []
    for transport in transports:
        if isinstance(transport, WebsocketTransport):
            create = transport.create_listener

            def create_gated(handler: Any, _create: Any = create) -> Any:
                listener = _create(handler)
                _WS_GATES[listener] = (gate, on_refused)
                return listener

            transport.create_listener = create_gated  # type: ignore[method-assign]
    demuxers = dict(getattr(manager, "_port_demuxers", None) or {})
    single = getattr(manager, "_port_demux", None)
    if single is not None:
        demuxers[(single.host, single.port)] = single
    for demux in demuxers.values():
        route = demux._classify_and_route

        async def classify(stream: trio.SocketStream, _route: Any = route) -> None:
            await serve_admitted(gate, on_refused, stream, partial(_route, stream))

        demux._classify_and_route = classify


def guard_inbound(swarm: INetwork, gate: InboundGate, on_refused: OnRefused) -> None:
    """Put ``gate`` in front of every inbound connection of ``swarm`` (TCP and WebSocket).

    Replaces the swarm's ``_handle_inbound_connection`` (what each transport listener
    calls with a just-accepted connection): the admission is decided before py-libp2p
    reads a byte, a refused connection is closed at once, an admitted one is upgraded
    (multistream-select, Noise, muxer) within ``handshake_timeout`` and keeps its slot
    until its muxer closes. A connection already admitted at TCP accept (WebSocket, shared
    port: :func:`serve_admitted`) keeps that admission. py-libp2p's own inbound limiter is
    not used: it held a slot until the swarm stopped, not until the connection closed."""
    timeout = gate.limits.handshake_timeout
    _gate_accepts(swarm, gate, on_refused)

    async def handle(raw: Any, maddr: Multiaddr) -> None:
        admission = _admission_of(raw)
        if admission is None:
            address = remote_address_of(raw)
            refused = gate.admit(address)
            if refused is not None:
                await _close_raw(raw)
                on_refused("connection_refused", address, f"over the limit: {refused}")
                return
            admission = Admission(gate, address)
        address = admission.address
        try:
            with trio.move_on_after(timeout) as scope:
                upgrade: Callable[[Any, Multiaddr], Awaitable[IMuxedConn]]
                upgrade = swarm.upgrade_inbound_raw_conn
                muxed = await upgrade(RawConnection(raw, False), maddr)
            admission.handshake_done()
            if scope.cancelled_caught:
                await _close_raw(raw)
                on_refused("handshake_timeout", address, f"no handshake within {timeout} s")
                return
            await _wait_closed(muxed)
        except Exception as exc:
            await _close_raw(raw)
            if admission.handshaking:  # py-libp2p's own upgrade timeout (the same) raises
                kind = "handshake_timeout" if "timeout" in str(exc).lower() else "handshake_failed"
                on_refused(kind, address, f"{type(exc).__name__}: {exc}")
        finally:
            admission.close()

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
