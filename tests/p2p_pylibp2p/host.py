"""Building a py-libp2p host the way Waku peers expect one (trio side).

What the real clients need, read in their code (see the package docstring for sources):
TCP (go-waku, nwaku, status-go) and WebSocket (js-waku: ``webSockets`` is its only
transport), Noise (``/noise``, the only encrypter js-waku and nwaku's default), yamux
(``/yamux/1.0.0``, go-waku/status-go) and mplex (``/mplex/6.7.0``, the only muxer of
@waku/sdk 0.0.36), identify (``/ipfs/id/1.0.0``, whose ``protocols`` js-waku reads to decide
that a peer is a store node) and ping (``/ipfs/ping/1.0.0``). No other security transport is
offered: py-libp2p's default would also offer TLS, secio and *plaintext*.

A TCP and a WebSocket address on the same port share one socket (py-libp2p's port
demultiplexer), as go-libp2p does; on port 0 both get the same free port.
"""

from __future__ import annotations

import struct
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import multiaddr
import trio
import trio.testing
from libp2p import new_host
from libp2p.abc import IHost, IMuxedConn, ISecureConn
from libp2p.crypto.keys import KeyPair
from libp2p.crypto.x25519 import create_new_key_pair as new_noise_key_pair
from libp2p.custom_types import TMuxerOptions, TProtocol, TSecurityOptions
from libp2p.network.config import ConnectionConfig
from libp2p.peer.id import ID
from libp2p.security.noise.transport import PROTOCOL_ID as NOISE_PROTOCOL_ID
from libp2p.security.noise.transport import Transport as NoiseTransport
from libp2p.stream_muxer.mplex.exceptions import MplexUnavailable
from libp2p.stream_muxer.mplex.mplex import MPLEX_PROTOCOL_ID, Mplex
from libp2p.stream_muxer.muxer_multistream import MuxerMultistream
from libp2p.stream_muxer.yamux.yamux import (
    FLAG_RST,
    GO_AWAY_INTERNAL_ERROR,
    GO_AWAY_PROTOCOL_ERROR,
    TYPE_DATA,
    TYPE_GO_AWAY,
    TYPE_PING,
    TYPE_WINDOW_UPDATE,
    YAMUX_HEADER_FORMAT,
    Yamux,
)
from libp2p.stream_muxer.yamux.yamux import HEADER_SIZE as YAMUX_HEADER_SIZE
from libp2p.stream_muxer.yamux.yamux import PROTOCOL_ID as YAMUX_PROTOCOL_ID

from tests.p2p_pylibp2p.guard import OnRefused, YamuxReceiveMeter, bound_multistream_reads
from tests.p2p_pylibp2p.keys import libp2p_key_pair
from waku_legacy.errors import ConfigError
from waku_legacy.p2p.keys import KeyPair as NodeKeyPair
from waku_legacy.p2p.limits import HostLimits

__all__ = [
    "MUXERS",
    "CoalescingMplex",
    "CoalescingYamux",
    "HostLimits",
    "WriteBurst",
    "build_host",
    "muxer_options",
    "security_options",
]

#: Stream muxers by the name the config and the CLI use.
MUXERS = ("yamux", "mplex")


def security_options(pair: KeyPair | NodeKeyPair) -> TSecurityOptions:
    """Noise only (a fresh X25519 static key per host, signed by the identity key)."""
    noise = NoiseTransport(libp2p_key_pair(pair), noise_privkey=new_noise_key_pair().private_key)
    return {NOISE_PROTOCOL_ID: noise}


class WriteBurst:
    """One connection's outgoing writes, sent together: a write is queued, and the first of
    a burst starts a task in the connection's nursery that, once the trio loop idles (at most
    ``HOLD_SECONDS`` later), sends everything queued by then as one batch, in order, under
    ``lock``. :meth:`add` sends the queue before returning when asked to, when there is no
    nursery yet, or when the queue is over ``HIGH_WATER`` bytes (a writer faster than the
    socket waits for it). A failed send is kept in ``error`` for the connection to raise to
    its next writer. Shared by :class:`CoalescingYamux` and :class:`CoalescingMplex`."""

    HIGH_WATER = 256 * 1024
    HOLD_SECONDS = 0.001

    def __init__(
        self,
        send: Callable[[bytes], Awaitable[None]],
        lock: trio.Lock,
        join: Callable[[list[bytes]], bytes] = b"".join,
    ) -> None:
        self._send = send
        self._lock = lock
        self._join = join
        self._pending: list[bytes] = []
        self._pending_bytes = 0
        self._scheduled = False
        self.error: Exception | None = None

    async def add(self, data: bytes, nursery: trio.Nursery | None, *, now: bool = False) -> bool:
        """Queue ``data``; True when the queue was sent before returning."""
        self._pending.append(data)
        self._pending_bytes += len(data)
        if nursery is None or now or self._pending_bytes > self.HIGH_WATER:
            async with self._lock:
                await self._send_queue()
            return True
        if not self._scheduled:
            self._scheduled = True
            nursery.start_soon(self._send_later)
        return False

    async def drain(self, timeout: float) -> None:
        """Send what is queued (a closing connection), giving up after ``timeout`` s or on
        a send error."""
        if not self._pending or self.error is not None:
            return
        with trio.move_on_after(timeout):
            try:
                async with self._lock:
                    await self._send_queue()
            except Exception:  # closing anyway
                pass

    async def _send_queue(self) -> None:
        while self._pending:
            batch = self._join(self._pending)
            self._pending.clear()
            self._pending_bytes = 0
            await self._send(batch)

    async def _send_later(self) -> None:
        try:
            with trio.move_on_after(self.HOLD_SECONDS):
                await trio.testing.wait_all_tasks_blocked()
            async with self._lock:
                await self._send_queue()
        except Exception as exc:  # the socket broke: the next writer and the reader see it
            self.error = exc
        finally:
            self._scheduled = False


class CoalescingYamux(Yamux):
    """py-libp2p's yamux, whose frames leave in bursts: one Noise message and one socket
    write per burst instead of one per frame.

    py-libp2p writes every yamux frame (a 12-byte header alone for SYN, FIN, window updates)
    as its own Noise message and ``send``: a store request cost the server ~10 of each.
    Here a frame is queued and the first frame of a burst starts a task in the connection's
    nursery that writes everything queued by the time it runs (after the writer yields), so
    a response's DATA and FIN, or multistream-select's two answers, leave together. The
    order of frames never changes (one queue, written under py-libp2p's write lock). As in
    go-yamux (frames go through a send queue and a buffered writer), a frame is written
    after ``_write_frame`` returns; a write error is kept and raised to the next writer, and
    the connection's reader sees the broken socket. PING and GO_AWAY frames, frames before
    the muxer runs, and a queue over ``HIGH_WATER`` bytes are written before returning (the
    queue first), so a writer faster than the socket waits for it and ``close`` sends
    GO_AWAY before closing. Only ``_write_frame`` is overridden (the method every yamux frame
    goes through)."""

    _burst: WriteBurst
    _meter: YamuxReceiveMeter
    _on_refused: OnRefused | None

    @classmethod
    def adopt(
        cls,
        conn: Yamux,
        max_buffered: int = HostLimits.max_buffered_bytes,
        on_refused: OnRefused | None = None,
    ) -> CoalescingYamux:
        """``conn`` (a py-libp2p ``Yamux`` not yet started) as a ``CoalescingYamux``.
        py-libp2p builds its ``Yamux`` itself whatever class the muxer options name
        (``MuxerMultistream.new_conn``), so the class is switched on the new instance.

        Its reads are metered too (see :class:`_MeteredReads`): DATA past a stream's
        receive window resets the stream and ends the session with GO_AWAY (protocol
        error), as the yamux spec says; DATA that would make the connection hold more than
        ``max_buffered`` unread bytes ends it with GO_AWAY (internal error)."""
        conn.__class__ = cls
        assert isinstance(conn, cls)
        conn._burst = WriteBurst(conn._send_batch, conn._write_lock, _join_yamux_frames)
        conn._meter = YamuxReceiveMeter(max_buffered)
        conn._on_refused = on_refused
        conn.secured_conn = _MeteredReads(conn.secured_conn, conn)  # type: ignore[assignment]
        return conn

    async def _write_frame(self, data: bytes) -> None:
        if self._burst.error is not None:
            raise self._burst.error
        self._meter.sent(data)
        urgent = len(data) > 1 and data[1] in (TYPE_PING, TYPE_GO_AWAY)
        if await self._burst.add(data, self._nursery, now=urgent):
            await trio.lowlevel.checkpoint()

    async def _send_batch(self, batch: bytes) -> None:
        secured = self.secured_conn
        if isinstance(secured, _MeteredReads):
            await secured.inner.write(batch)
        else:
            await secured.write(batch)

    async def _frame_received(self, header: bytes) -> None:
        """A frame header the reader is about to act on; raises to end the session."""
        buffered = 0
        if header[1] == TYPE_DATA:
            buffered = sum(len(b) for b in self.stream_buffers.values())
        refused = self._meter.received(header, buffered)
        if len(self._meter) > len(self.streams) + 64:
            self._meter.forget_except(set(self.streams))
        if refused is None:
            return
        stream_id = int.from_bytes(header[4:8])
        past_window = "past the receive window" in refused
        with trio.move_on_after(1.0):
            try:
                if past_window:
                    reset = _yamux_header(TYPE_WINDOW_UPDATE, FLAG_RST, stream_id, 0)
                    await self._write_frame(reset)
                code = GO_AWAY_PROTOCOL_ERROR if past_window else GO_AWAY_INTERNAL_ERROR
                await self._write_frame(_yamux_header(TYPE_GO_AWAY, 0, 0, code))
            except Exception:  # closing anyway
                pass
        if self._on_refused is not None:
            address = str(self.peer_id)
            self._on_refused("yamux_protocol_error", address, refused)
        raise YamuxLimitExceeded(refused)


def _yamux_header(typ: int, flags: int, stream_id: int, length: int) -> bytes:
    return struct.pack(YAMUX_HEADER_FORMAT, 0, typ, flags, stream_id, length)


class YamuxLimitExceeded(Exception):
    """A yamux peer sent past a receive window or over the connection's buffer cap."""


class _MeteredReads:
    """A yamux connection's secured connection, whose reads pass the frame headers to the
    connection's meter before py-libp2p's reader acts on them.

    py-libp2p's reader (``Yamux.handle_incoming``, one long loop) reads a 12-byte header,
    then a DATA frame's body, with ``read_exactly``; following the same byte stream here
    sees every header, and raising from the read that completes a header makes py-libp2p
    close the session without reading the body. Everything else is the wrapped
    connection's."""

    def __init__(self, inner: ISecureConn, conn: CoalescingYamux) -> None:
        self.inner = inner
        self._conn = conn
        self._header = bytearray()
        self._body_left = 0

    async def read(self, n: int | None = None) -> bytes:
        data = await self.inner.read(n)
        view = memoryview(data)
        while view:
            if self._body_left:
                used = min(self._body_left, len(view))
                self._body_left -= used
                view = view[used:]
                continue
            take = min(YAMUX_HEADER_SIZE - len(self._header), len(view))
            self._header += view[:take]
            view = view[take:]
            if len(self._header) == YAMUX_HEADER_SIZE:
                header = bytes(self._header)
                self._header.clear()
                await self._conn._frame_received(header)
                if header[1] == TYPE_DATA:
                    self._body_left = int.from_bytes(header[8:12])
        return data

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


class CoalescingMplex(Mplex):
    """py-libp2p's mplex, whose messages leave in bursts as :class:`CoalescingYamux`'s
    frames do (mplex is the only muxer of @waku/sdk 0.0.36): a message is queued by
    ``write_to_stream`` (the method every mplex message goes through) and written, with
    the others queued by then, by a task of the connection once the trio loop idles (at
    most ``HOLD_SECONDS`` later), in order, under one lock. A queue over ``HIGH_WATER``
    bytes and messages before the connection runs are written before returning; ``close``
    writes the queue first; a write error is kept and raised to the next writer as
    py-libp2p's ``MplexUnavailable``. The flush tasks live in a nursery around py-libp2p's
    read loop (``start``) and end with it."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._burst = WriteBurst(self._send_batch, trio.Lock())
        self._burst_nursery: trio.Nursery | None = None

    async def start(self) -> None:
        async with trio.open_nursery() as nursery:
            self._burst_nursery = nursery
            try:
                await super().start()
            finally:
                self._burst_nursery = None
                nursery.cancel_scope.cancel()

    async def write_to_stream(self, _bytes: bytes) -> None:
        if self._burst.error is not None:
            raise MplexUnavailable("the connection's last write failed") from self._burst.error
        await self._burst.add(_bytes, self._burst_nursery)

    async def _send_batch(self, batch: bytes) -> None:
        await super().write_to_stream(batch)

    async def close(self) -> None:
        await self._burst.drain(1.0)
        await super().close()


def _join_yamux_frames(frames: list[bytes]) -> bytes:
    return b"".join(_merge_window_updates(frames))


def _merge_window_updates(frames: list[bytes]) -> list[bytes]:
    """``frames`` with each stream's plain window updates (no flags) summed into its first.

    py-libp2p sends a WINDOW_UPDATE after every read of a stream, however small (a
    multistream-select line is two reads), so a burst often holds several for one stream;
    the peer's window ends the same whether it gets them one by one or as one sum, and
    earlier is never wrong for credit that is already due."""
    if len(frames) < 2:
        return frames
    out: list[bytes] = []
    first: dict[bytes, int] = {}
    for data in frames:
        plain_update = data[1] == TYPE_WINDOW_UPDATE and data[2:4] == b"\0\0"
        if len(data) == YAMUX_HEADER_SIZE and plain_update:
            at = first.get(data[4:8])
            if at is not None:
                total = int.from_bytes(out[at][8:12]) + int.from_bytes(data[8:12])
                if total < 1 << 32:
                    out[at] = out[at][:8] + total.to_bytes(4)
                    continue
            first[data[4:8]] = len(out)
        out.append(data)
    return out


class _MuxerSelection(MuxerMultistream):
    """py-libp2p's muxer negotiation, whose yamux connections coalesce their writes and
    enforce receive windows."""

    max_buffered: int = HostLimits.max_buffered_bytes
    on_refused: OnRefused | None = None

    async def new_conn(self, conn: ISecureConn, peer_id: ID) -> IMuxedConn:
        muxed = await super().new_conn(conn, peer_id)
        if type(muxed) is Yamux:
            return CoalescingYamux.adopt(muxed, self.max_buffered, self.on_refused)
        return muxed


def muxer_options(muxers: Sequence[str] = MUXERS) -> TMuxerOptions:
    """The muxers in order of preference (a dialler proposes them in this order)."""
    table: dict[str, tuple[str, type[IMuxedConn]]] = {
        "yamux": (YAMUX_PROTOCOL_ID, Yamux),
        "mplex": (MPLEX_PROTOCOL_ID, CoalescingMplex),
    }
    options: dict[TProtocol, type[IMuxedConn]] = {}
    for name in muxers:
        if name not in table:
            raise ConfigError(f"unknown stream muxer {name!r}; known: {', '.join(MUXERS)}")
        protocol, muxer = table[name]
        options[TProtocol(protocol)] = muxer
    if not options:
        raise ConfigError("at least one stream muxer is needed")
    return options


def build_host(
    pair: KeyPair | NodeKeyPair,
    listen: Sequence[multiaddr.Multiaddr],
    *,
    limits: HostLimits = HostLimits(),
    muxers: Sequence[str] = MUXERS,
    websocket: bool = False,
    announce: Sequence[multiaddr.Multiaddr] = (),
    on_refused: OnRefused | None = None,
) -> IHost:
    """A host with Noise, the given muxers, identify and ping. Listens on ``listen`` once
    run (``host.run(listen)``); ``websocket=True`` lets a host without listen addresses dial
    ``/ws`` addresses; ``announce`` replaces the listen addresses in what the host tells
    peers (identify) and reports (``get_addrs``), as nwaku's ``--ext-multiaddr``.
    ``on_refused(kind, peer, reason)`` hears of yamux sessions ended for a broken limit.
    Multistream-select messages are capped
    (:func:`~tests.p2p_pylibp2p.guard.bound_multistream_reads`)."""
    # Watermarks 0 and an endless grace period switch off py-libp2p's auto-connector (it
    # would dial every peer in the peer store, clients included, towards the watermarks'
    # midpoint) and its pruner; max_connections is still enforced on accept, and the
    # listener closes idle connections itself.
    config = ConnectionConfig(
        max_connections=limits.max_connections,
        min_connections=0,
        low_watermark=0,
        high_watermark=0,
        grace_period=1e9,
        max_connections_per_peer=limits.max_connections_per_peer,
        dial_timeout=limits.dial_timeout,
        inbound_upgrade_timeout=limits.handshake_timeout,
        outbound_upgrade_timeout=limits.handshake_timeout,
        inbound_stream_protocol_negotiation_timeout=limits.negotiation_timeout,
        outbound_stream_protocol_negotiation_timeout=limits.negotiation_timeout,
    )
    has_ws = any("ws" in {p.name for p in addr.protocols()} for addr in listen)
    host = new_host(
        key_pair=libp2p_key_pair(pair),
        sec_opt=security_options(pair),
        muxer_opt=muxer_options(muxers),
        listen_addrs=list(listen) or None,
        connection_config=config,
        enable_tcp=True,
        enable_websocket=websocket or has_ws,
        announce_addrs=list(announce) or None,
    )
    upgrader = host.get_network().upgrader  # type: ignore[attr-defined]
    negotiation = upgrader.muxer_multistream
    selection = _MuxerSelection(
        muxer_options(muxers), negotiate_timeout=negotiation.negotiate_timeout
    )
    selection.max_buffered = limits.max_buffered_bytes
    selection.on_refused = on_refused
    upgrader.muxer_multistream = selection
    bound_multistream_reads()
    return host

