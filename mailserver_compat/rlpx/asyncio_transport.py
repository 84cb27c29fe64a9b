"""A thin asyncio adapter running :class:`Connection` over TCP sockets.

:func:`dial` connects to an enode and :func:`listen` accepts peers; both hand back an
:class:`RlpxPeer` once the encryption handshake and Hello exchange are done (5 s limit, as
go-ethereum). A background task reads the socket: it answers pings, sends a ping every
``ping_interval`` seconds, disconnects with READ_TIMEOUT after ``read_timeout`` seconds of
silence, and queues capability messages for :meth:`RlpxPeer.recv`. Every failure ends in
one logged line and, whenever the keys allow, a Disconnect frame with the reason.

:func:`listen` enforces :class:`ConnectionLimits`: connections (handshaking ones included),
connections per source address (IPv6 by /64), handshakes in progress (in all and per
address, so stalled handshakes from a few hosts cannot hold every slot) and new connections
per second per address (a token bucket: reconnecting in a loop cannot buy ECIES work). A
connection over a cap is closed as soon as it is accepted, before any ECIES work, and
reported to ``on_refused(address, reason)``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

import coincurve

from waku_legacy.errors import WakuLegacyError
from waku_legacy.limits import ConnectionCounts, RateLimiter, address_key
from waku_legacy.mailserver_compat.rlpx import compression, p2p
from waku_legacy.mailserver_compat.rlpx.connection import Connection, State
from waku_legacy.mailserver_compat.rlpx.errors import ConnectionStateError
from waku_legacy.mailserver_compat.rlpx.events import (
    ConnectionFailed,
    DisconnectReceived,
    Event,
    HelloReceived,
    MessageReceived,
)
from waku_legacy.mailserver_compat.rlpx.reasons import DisconnectReason

__all__ = [
    "HANDSHAKE_TIMEOUT",
    "ConnectionLimits",
    "PeerDisconnected",
    "RlpxPeer",
    "dial",
    "listen",
]

log = logging.getLogger("waku_legacy.rlpx")

HANDSHAKE_TIMEOUT = 5.0  # go-ethereum handshakeTimeout
PING_INTERVAL = 15.0  # go-ethereum pingInterval
READ_TIMEOUT = 30.0  # go-ethereum frameReadTimeout
DISCONNECT_WRITE_TIMEOUT = 1.0  # go-ethereum discWriteTimeout
_READ_CHUNK = 1 << 16
# Flow control: the socket is not read while this many messages wait for recv() (nor while
# the stream buffer holds twice _STREAM_LIMIT bytes), so a peer sending faster than its
# handler works is slowed by TCP instead of growing this process's memory.
MAX_QUEUED_MESSAGES = 16
_STREAM_LIMIT = 1 << 17


class PeerDisconnected(WakuLegacyError):
    """The session ended: ``reason`` says why, ``remote`` whether the peer said so."""

    def __init__(self, reason: DisconnectReason, detail: str, *, remote: bool) -> None:
        who = "peer disconnected" if remote else "disconnected"
        super().__init__(f"{who}: {reason.description} ({detail})" if detail else who)
        self.reason = reason
        self.detail = detail
        self.remote = remote


class RlpxPeer:
    """An established (or establishing) RLPx session over asyncio streams."""

    def __init__(
        self,
        connection: Connection,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        *,
        ping_interval: float = PING_INTERVAL,
        read_timeout: float = READ_TIMEOUT,
    ) -> None:
        self.connection = connection
        self._reader = reader
        self._writer = writer
        self.ping_interval = ping_interval
        self.read_timeout = read_timeout
        peername = writer.get_extra_info("peername")
        self.address = f"{peername[0]}:{peername[1]}" if peername else "?"
        self.host: str = str(peername[0]) if peername else ""
        self._messages: asyncio.Queue[MessageReceived | None] = asyncio.Queue()
        self._room = asyncio.Event()  # set while fewer than MAX_QUEUED_MESSAGES wait
        self._room.set()
        self._tasks: list[asyncio.Task[None]] = []
        self.ended: PeerDisconnected | None = None
        self._closed = asyncio.Event()

    @property
    def remote_public_key(self) -> bytes | None:
        return self.connection.remote_public_key

    @property
    def name(self) -> str:
        key = self.remote_public_key
        return f"{key.hex()[:16] if key else '?'}@{self.address}"

    # -- writing ---------------------------------------------------------------------------

    def _write(self, data: bytes) -> None:
        if data and not self._writer.is_closing():
            self._writer.write(data)

    async def _drain(self) -> None:
        try:
            await self._writer.drain()
        except (ConnectionError, OSError) as exc:
            raise self._end(
                DisconnectReason.NETWORK_ERROR, f"write failed: {exc}", remote=False
            ) from exc

    async def send(self, capability: str, code: int, payload: bytes) -> None:
        """Send one capability message (raises :class:`PeerDisconnected` once closed)."""
        if self.ended is not None:
            raise self.ended
        self._write(self.connection.send_message(capability, code, payload))
        await self._drain()

    async def disconnect(
        self, reason: DisconnectReason = DisconnectReason.REQUESTED, detail: str = ""
    ) -> None:
        """Send Disconnect with ``reason`` (if the session allows) and close the socket."""
        if self.ended is None:
            if not self.connection.closed:
                self._write(self.connection.send_disconnect(reason))
            self._end(reason, detail or "local request", remote=False)
        await self._shutdown()

    # -- reading ---------------------------------------------------------------------------

    async def recv(self) -> MessageReceived:
        """The next capability message; :class:`PeerDisconnected` when the session ends."""
        message = await self._messages.get()
        if self._messages.qsize() < MAX_QUEUED_MESSAGES:
            self._room.set()
        if message is None:
            self._messages.put_nowait(None)  # every later recv() sees the end too
            raise self._session_end("recv")
        return message

    async def wait_closed(self) -> PeerDisconnected:
        await self._closed.wait()
        return self._session_end("wait_closed")

    def _handle(self, events: list[Event]) -> None:
        self._write(self.connection.data_to_send())
        for event in events:
            if isinstance(event, MessageReceived):
                self._messages.put_nowait(event)
            elif isinstance(event, DisconnectReceived):
                self._end(event.reason, f"code {event.code}", remote=True)
            elif isinstance(event, ConnectionFailed):
                log.warning(
                    "rlpx peer %s: disconnecting (%s): %s",
                    self.name,
                    event.reason.description,
                    event.error,
                )
                self._end(event.reason, event.error, remote=False)

    def _session_end(self, event: str) -> PeerDisconnected:
        """How the session ended, for ``event`` that only runs once it has (the end-of-queue
        marker and ``_closed`` are set by :meth:`_end` alone)."""
        if self.ended is None:
            raise ConnectionStateError(
                event, self.connection.state.value, "the session has not ended"
            )
        return self.ended

    def _end(self, reason: DisconnectReason, detail: str, *, remote: bool) -> PeerDisconnected:
        """End the session once (later calls keep the first reason); returns how it ended."""
        if self.ended is None:
            self.ended = PeerDisconnected(reason, detail, remote=remote)
            if remote:
                log.info("rlpx peer %s: peer disconnected: %s", self.name, reason.description)
            self._messages.put_nowait(None)
            self._closed.set()
            self._room.set()
        return self.ended

    async def _read_some(self, timeout: float) -> bytes:
        try:
            data = await asyncio.wait_for(self._reader.read(_READ_CHUNK), timeout)
        except TimeoutError:
            self._fail(DisconnectReason.READ_TIMEOUT, f"no data for {timeout:g} s")
            return b""
        except (ConnectionError, OSError) as exc:
            self._end(DisconnectReason.NETWORK_ERROR, f"read failed: {exc}", remote=False)
            return b""
        if not data:
            self._end(DisconnectReason.NETWORK_ERROR, "connection closed by peer", remote=True)
        return data

    def _fail(self, reason: DisconnectReason, detail: str) -> None:
        log.warning("rlpx peer %s: disconnecting (%s): %s", self.name, reason.description, detail)
        if not self.connection.closed:
            self._write(self.connection.send_disconnect(reason))
        self._end(reason, detail, remote=False)

    async def _establish(self, timeout: float) -> None:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while self.connection.state is not State.ESTABLISHED and self.ended is None:
            remaining = deadline - loop.time()
            if remaining <= 0:
                self._fail(DisconnectReason.READ_TIMEOUT, f"handshake not done in {timeout} s")
                break
            data = await self._read_some(remaining)
            if data:
                events = self.connection.receive_data(data)
                self._handle(events)
                for event in events:
                    if isinstance(event, HelloReceived):
                        log.debug("rlpx peer %s: hello from %r", self.name, event.hello.client_id)
            await self._drain_quietly()
        if self.ended is not None:
            await self._shutdown()
            raise self.ended
        self._tasks.append(asyncio.create_task(self._read_loop()))
        if self.ping_interval > 0:
            self._tasks.append(asyncio.create_task(self._ping_loop()))

    async def _drain_quietly(self) -> None:
        with contextlib.suppress(ConnectionError, OSError):
            await self._writer.drain()

    async def _read_loop(self) -> None:
        while self.ended is None:
            data = await self._read_some(self.read_timeout)
            if data:
                self._handle(self.connection.receive_data(data))
                await self._drain_quietly()
            if self._messages.qsize() >= MAX_QUEUED_MESSAGES and self.ended is None:
                self._room.clear()
                await self._room.wait()  # backpressure: stop reading until recv() catches up
        await self._shutdown()

    async def _ping_loop(self) -> None:
        while self.ended is None:
            await asyncio.sleep(self.ping_interval)
            if self.ended is None and not self.connection.closed:
                self._write(self.connection.send_ping())
                await self._drain_quietly()

    async def _shutdown(self) -> None:
        if not self._writer.is_closing():
            with contextlib.suppress(ConnectionError, OSError, TimeoutError):
                await asyncio.wait_for(self._writer.drain(), DISCONNECT_WRITE_TIMEOUT)
            self._writer.close()
        with contextlib.suppress(ConnectionError, OSError, TimeoutError):
            await asyncio.wait_for(self._writer.wait_closed(), DISCONNECT_WRITE_TIMEOUT)
        current = asyncio.current_task()
        for task in self._tasks:
            if task is not current:
                task.cancel()


def _message_size(max_message_size: int | None) -> int:
    """The connection's limit on a decompressed message (None: the RLPx default)."""
    return compression.MAX_DECOMPRESSED_SIZE if max_message_size is None else max_message_size


async def dial(
    host: str,
    port: int,
    remote_public_key: bytes,
    private_key: coincurve.PrivateKey,
    protocols: Sequence[p2p.ProtocolSpec],
    *,
    handshake_timeout: float = HANDSHAKE_TIMEOUT,
    max_message_size: int | None = None,
    ping_interval: float = PING_INTERVAL,
    read_timeout: float = READ_TIMEOUT,
    local_host: str | None = None,
) -> RlpxPeer:
    """Connect (from ``local_host`` when given), handshake and exchange Hellos; raises
    :class:`PeerDisconnected` or ``OSError`` (connection refused and the like)."""
    connection = Connection(
        private_key,
        protocols,
        remote_public_key=remote_public_key,
        max_message_size=_message_size(max_message_size),
    )
    local = None if local_host is None else (local_host, 0)
    reader, writer = await asyncio.wait_for(
        asyncio.open_connection(host, port, limit=_STREAM_LIMIT, local_addr=local),
        handshake_timeout,
    )
    peer = RlpxPeer(
        connection, reader, writer, ping_interval=ping_interval, read_timeout=read_timeout
    )
    peer._write(connection.initiate())
    await peer._establish(handshake_timeout)
    return peer


PeerHandler = Callable[[RlpxPeer], Awaitable[None]]


@dataclass(frozen=True, slots=True)
class ConnectionLimits:
    """Caps of a listener (``None``: no cap)."""

    max_peers: int | None = None  # connections, handshaking ones included
    max_per_address: int | None = None  # connections from one address (IPv6: one /64)
    max_pending: int | None = None  # handshakes in progress
    max_pending_per_address: int | None = None  # handshakes in progress from one address
    connect_rate: float = 0.0  # new connections per second per address (0: no limit)
    connect_burst: int = 1


class _ConnectionCounts(ConnectionCounts):
    """The listener's :class:`ConnectionCounts` under its :class:`ConnectionLimits`."""

    def __init__(self, limits: ConnectionLimits) -> None:
        super().__init__()
        self.limits = limits
        self.connects = RateLimiter(rate=limits.connect_rate, burst=limits.connect_burst)

    def refusal(self, key: str, now: float) -> str | None:
        limits = self.limits
        if limits.max_peers is not None and self.open >= limits.max_peers:
            return "too_many_peers"
        per_address = limits.max_per_address
        if per_address is not None and self.open_by_address[key] >= per_address:
            return "too_many_from_address"
        if limits.max_pending is not None and self.handshaking >= limits.max_pending:
            return "too_many_handshakes"
        if (
            limits.max_pending_per_address is not None
            and self.handshaking_by_address[key] >= limits.max_pending_per_address
        ):
            return "too_many_handshakes_from_address"
        if not self.connects.allow(key, now):
            return "connecting_too_often"
        return None

    def close(self, key: str, *, pending: bool) -> None:
        if pending:
            self.handshake_done(key)
        self.closed(key)


def _refuse(
    writer: asyncio.StreamWriter,
    host: str,
    refusal: str,
    on_refused: Callable[[str, str], None] | None,
) -> None:
    """Close a connection over a limit at once: no handshake work, no lingering socket."""
    writer.transport.abort()
    if on_refused is not None:
        on_refused(host, refusal)  # the owner counts and logs it
    else:
        log.info("rlpx: refused a connection from %s: %s", host, refusal)


async def listen(
    host: str,
    port: int,
    private_key: coincurve.PrivateKey,
    protocols: Sequence[p2p.ProtocolSpec],
    handler: PeerHandler,
    *,
    listen_port: int | None = None,
    handshake_timeout: float = HANDSHAKE_TIMEOUT,
    max_message_size: int | None = None,
    ping_interval: float = PING_INTERVAL,
    read_timeout: float = READ_TIMEOUT,
    limits: ConnectionLimits | None = None,
    on_refused: Callable[[str, str], None] | None = None,
) -> asyncio.Server:
    """Accept RLPx peers; ``handler(peer)`` runs per established peer in its own task.

    A failing handshake or a handler that raises only ends that peer's connection (with a
    Disconnect and a log line): the server keeps serving everyone else. A connection over
    one of ``limits`` is closed at once (no handshake work) and reported to ``on_refused``.
    """
    counts = _ConnectionCounts(limits or ConnectionLimits())

    async def on_connect(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        peername = writer.get_extra_info("peername")
        host = str(peername[0]) if peername else ""
        key = address_key(host)
        refusal = counts.refusal(key, asyncio.get_running_loop().time())
        if refusal is not None:
            _refuse(writer, host, refusal, on_refused)
            return
        counts.opened(key)
        pending = True
        try:
            pending = await _serve(reader, writer, key)
        finally:
            counts.close(key, pending=pending)

    async def _serve(
        reader: asyncio.StreamReader, writer: asyncio.StreamWriter, key: str
    ) -> bool:
        """Run one connection; returns whether it ended still handshaking."""
        connection = Connection(
            private_key,
            protocols,
            listen_port=listen_port or 0,
            max_message_size=_message_size(max_message_size),
        )
        peer = RlpxPeer(
            connection, reader, writer, ping_interval=ping_interval, read_timeout=read_timeout
        )
        try:
            await peer._establish(handshake_timeout)
        except PeerDisconnected as exc:
            log.info("rlpx: handshake with %s failed: %s", peer.address, exc)
            return True
        except asyncio.CancelledError:
            await peer._shutdown()
            return True
        counts.handshake_done(key)
        try:
            await handler(peer)
        except PeerDisconnected:
            pass
        except asyncio.CancelledError:
            # The event loop is shutting down this connection's task: say goodbye. Not
            # re-raised: this is the task's top level (start_server would log it as an error).
            await peer.disconnect(DisconnectReason.QUITTING, "shutting down")
        except Exception as exc:  # one peer's failure must not stop the server
            log.exception("rlpx peer %s: handler failed", peer.name)
            await peer.disconnect(DisconnectReason.SUBPROTOCOL_ERROR, f"internal error: {exc}")
        finally:
            if peer.ended is None:
                await peer.disconnect(DisconnectReason.REQUESTED, "handler finished")
            else:
                await peer._shutdown()
        return False

    return await asyncio.start_server(on_connect, host, port, limit=_STREAM_LIMIT)
