"""The libp2p listener's server side of our own, on an asyncio loop (the bridge's).

:class:`NativeListener` serves each connection with the sans-IO
:class:`~waku_legacy.p2p.codec.connection.ListenerConnection` (multistream-select, Noise XX,
yamux, mplex) behind one :class:`asyncio.Protocol`, and holds a
:class:`~waku_legacy.p2p.policy.ListenerPolicy` for every decision that is not about bytes
(protocols, limits, rates, counters, refusals): composition, as httpcore's backends take a
pool. It replaced py-libp2p's server in a trio thread (removed 2026-11-29, issue 36), whose
per-frame and per-stream Python cost 3-5 ms of server CPU per store request against REST's
1-1.8 ms (bench/README.md, ``load_p2p_store.py``); here a request is a few function calls
and one Noise message each way.

``await start()`` serves on the running loop; ``start_blocking()`` runs a loop of its own
in a thread (tests, tools). Handlers run on ``workers`` threads. The bounds: per-address and
total connection and handshake slots taken at accept, before a byte is read
(:class:`~waku_legacy.p2p.codec.gate.InboundGate`, the policy's); the handshake
(multistream, Noise, muxer; on ``/ws`` the HTTP upgrade too) within ``handshake_timeout``;
connections per peer id; multistream messages of at most 1024 bytes; yamux windows (GO_AWAY
protocol error) and unread bytes (``max_buffered_bytes``, GO_AWAY internal error); streams
per connection; each stream's protocol within ``handshake_timeout`` and request within
``read_timeout``; a peer that does not take its answers for ``write_timeout`` is dropped
(and nothing more is read from it meanwhile); what waits to be sent is bounded by
``max_buffered_bytes`` and a stream whose window the peer keeps shut for ``write_timeout`` is
reset (:mod:`~waku_legacy.p2p.codec.connection`); connections without progress (what the peer
took, streams opened or ended) for ``idle_timeout`` are closed; handshakes per second per
address (at accept), request rates per peer id and per address. A TCP port shared by TCP
and ``/ws`` tells them apart by the first three bytes (``GET``).

Whatever a peer's bytes make a codec or key parser raise is a typed refusal, counted by kind
(``connection_error``, ``unsupported_key``...) and logged at most once per kind and source
address per 10 s; an exception that still gets through (a bug) is counted in
``internal_errors`` and logged under the same throttle, with the address and peer id."""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from functools import partial
from typing import Any

from multiaddr import Multiaddr

from waku_legacy.errors import DecodeError, LimitExceeded
from waku_legacy.limits import address_key
from waku_legacy.p2p.codec.connection import (
    Libp2pConnectionLimits,
    ListenerConnection,
    Muxed,
    Request,
    Secured,
    StreamFailed,
)
from waku_legacy.p2p.codec.identify import IDENTIFY_CODEC, PING_CODEC, encode_identify
from waku_legacy.p2p.codec.metadata import METADATA_CODEC, METADATA_MAX_BYTES, Metadata
from waku_legacy.p2p.codec.noise import secp256k1_identity
from waku_legacy.p2p.codec.websocket import WebSocketError, WebSocketServer, looks_like_http
from waku_legacy.p2p.enr import enr_of_listener
from waku_legacy.p2p.errors import (
    CodecRefused,
    Libp2pConnectionFailed,
    P2PError,
    P2PTimeout,
    PeerWentAway,
    SendBudgetClosed,
    YamuxProtocolError,
)
from waku_legacy.p2p.keys import KeyPair, peer_id_of
from waku_legacy.p2p.limits import ListenerLimits
from waku_legacy.p2p.multiaddrs import parse_multiaddr
from waku_legacy.p2p.policy import (
    ListenerPolicy,
    ProtocolHandlers,
    RequestOrigin,
    ServedProtocol,
    default_extra,
)
from waku_legacy.p2p.transport.worker_pool import LoopWorkers

__all__ = ["NativeListener"]

AGENT = "waku-legacy"
#: the longest a multistream answer waits to leave with its stream's response
FLUSH_DELAY = 0.005
#: how long a connection we end with GO_AWAY waits for the peer to close after our FIN
LINGER = 1.0


class _Conn(asyncio.Protocol):
    """One accepted socket: admission, the WebSocket layer when there is one, the libp2p
    connection, and the hand-off of requests to the worker pool."""

    def __init__(self, listener: NativeListener, kinds: frozenset[str]) -> None:
        self.listener = listener
        self.kinds = kinds
        self.transport: asyncio.Transport | None = None
        self.address = "unknown"
        self.peer = "unknown"
        self.conn: ListenerConnection | None = None
        self.ws: WebSocketServer | None = None
        self.sniff = b""
        self.handshaking = False
        self.admitted = False
        self.timer: asyncio.TimerHandle | None = None
        self.paused_since: float | None = None
        self.counted_peer = False
        self.flush_timer: asyncio.TimerHandle | None = None
        self.ending = False  # our last words are written: nothing more is read or sent

    # -- asyncio's calls ----------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        listener = self.listener
        peername = transport.get_extra_info("peername")
        self.address = address_key(str(peername[0])) if peername else "unknown"
        refused = listener.policy.gate.admit(self.address)
        if refused is not None:
            transport.abort()
            listener.policy.refused(
                "connection_refused", self.address, f"over the limit: {refused}"
            )
            return
        self.transport = transport
        self.admitted = self.handshaking = True
        listener._live.add(self)
        self.timer = listener._loop_now().call_later(
            listener.limits.host.handshake_timeout, self._handshake_timed_out
        )
        self.conn = ListenerConnection(
            listener._identity, listener._conn_limits, listener._identify, paced=True
        )
        if self.kinds == frozenset({"ws"}):
            self.ws = WebSocketServer()

    def data_received(self, data: bytes) -> None:
        if self.transport is None or self.conn is None or self.ending:
            return
        try:
            self._received(data)
        except Libp2pConnectionFailed as exc:
            self._failed(exc)
        except (WebSocketError, DecodeError) as exc:
            self._failed(CodecRefused(exc))
        except Exception as exc:  # a bug here must close this connection, not the loop
            self.listener.policy.internal_error(
                "libp2p connection failed", self.address, self.peer, exc
            )
            self._close(abort=True)

    def eof_received(self) -> bool | None:
        return None  # close

    def pause_writing(self) -> None:
        # the peer does not read its answers: read no more requests from it meanwhile
        self.paused_since = time.monotonic()
        if self.transport is not None:
            self.transport.pause_reading()

    def resume_writing(self) -> None:
        self.paused_since = None
        if self.transport is not None and not self.transport.is_closing():
            self.transport.resume_reading()
            if self.conn is not None and self.conn.queued and not self.ending:
                self._flush()  # mplex: what waited for the socket's room

    def connection_lost(self, exc: Exception | None) -> None:
        listener = self.listener
        if self.timer is not None:
            self.timer.cancel()
        if self.flush_timer is not None:
            self.flush_timer.cancel()
            self.flush_timer = None
        if self.admitted:
            self.admitted = False
            if self.handshaking:
                self.handshaking = False
                listener.policy.gate.handshake_done(self.address)
            listener.policy.gate.closed(self.address)
        if self.counted_peer:
            self.counted_peer = False
            listener._by_peer[self.peer] -= 1
            if listener._by_peer[self.peer] <= 0:
                del listener._by_peer[self.peer]
        listener._live.discard(self)
        self.transport = None

    # -- the libp2p side ----------------------------------------------------------------

    def _received(self, data: bytes) -> None:
        conn = self.conn
        assert conn is not None and self.transport is not None
        if len(self.kinds) == 2:  # a shared port: three bytes tell HTTP from libp2p
            self.sniff += data
            if len(self.sniff) < 3:
                return
            data, self.sniff = self.sniff, b""
            self.kinds = frozenset({"ws"}) if looks_like_http(data) else frozenset({"tcp"})
            if looks_like_http(data):
                self.ws = WebSocketServer()
        if self.ws is not None:
            data, reply = self.ws.feed(data)
            if reply:
                self.transport.write(reply)
            if self.ws.closed:
                self._close()
                return
            if not data:
                return
        now = time.monotonic()
        handed_off = False
        for event in conn.receive(data, now):
            if type(event) is Request:
                handed_off = self._request(event) or handed_off
            elif type(event) is StreamFailed:
                self._stream_failed(event)
            elif type(event) is Secured:
                self._secured(event)
            elif type(event) is Muxed:
                self._muxed()
            if self._gone():  # an event closed it
                return
        if handed_off:
            # a lazy dialler's request came with its protocol: the multistream answer can
            # leave with the response (one Noise message and one send instead of two), and
            # does at the latest FLUSH_DELAY later
            if self.flush_timer is None:
                self.flush_timer = self.listener._loop_now().call_later(FLUSH_DELAY, self._flush)
        else:
            self._flush()

    def _gone(self) -> bool:
        return self.transport is None or self.ending or self.transport.is_closing()

    def _flush(self) -> None:
        if self.flush_timer is not None:
            self.flush_timer.cancel()
            self.flush_timer = None
        conn, transport = self.conn, self.transport
        if conn is None or transport is None:
            return
        # mplex (paced) sends what the socket takes until its buffer passes the high-water
        # mark; pause_writing then, and resume_writing sends the rest (yamux: one round)
        high = transport.get_write_buffer_limits()[1]
        while True:
            room = max(0, high + 1 - transport.get_write_buffer_size())
            conn.socket_room(room, time.monotonic())
            out = conn.data_to_send()
            if not out:
                return
            if self.ws is not None:
                out = self.ws.wrap(out)
            transport.write(out)
            if not conn.queued or transport.get_write_buffer_size() > high:
                return

    def _secured(self, event: Secured) -> None:
        listener = self.listener
        self.peer = event.peer.peer_id
        limit = listener.limits.host.max_connections_per_peer
        if listener._by_peer[self.peer] >= limit:
            reason = f"over the limit: {limit} connections of peer {self.peer}"
            listener.policy.refused("connection_refused", self.address, reason)
            self._close(abort=True)
            return
        listener._by_peer[self.peer] += 1
        self.counted_peer = True

    def _muxed(self) -> None:
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None
        if self.handshaking:
            self.handshaking = False
            self.listener.policy.gate.handshake_done(self.address)
        self.listener.policy.count("connections_accepted")

    def _request(self, event: Request) -> bool:
        """Answer ``event`` or hand it to the workers (True)."""
        listener = self.listener
        conn = self.conn
        assert conn is not None
        name = event.protocol
        if name == METADATA_CODEC:
            try:
                answer = listener.policy.metadata_answer(self.peer, event.body)
            except DecodeError as exc:
                conn.reset(event.stream)
                self._note("stream_error", exc, protocol=name, level=logging.INFO)
                return False
            if self._respond(event.stream, answer, name):
                listener.policy.count("metadata_answered")
            return False
        protocol = listener.protocols[name]
        allowed, refused = listener.policy.admit_request(
            self.peer, self.address, name, protocol, event.body
        )
        if not allowed:
            if refused is None:
                conn.reset(event.stream)
            else:
                self._respond(event.stream, refused, name)
            return False
        assert self.transport is not None
        waiting = conn.queued + self.transport.get_write_buffer_size()
        if waiting > conn.limits.max_unsent:  # its answer would be refused: not computed
            error = LimitExceeded(
                f"{name} request", f"{waiting} bytes wait to be sent, over {conn.limits.max_unsent}"
            )
            self._note("send_budget_exceeded", error, protocol=name)
            self._refuse(event.stream)
            return False
        assert listener._workers is not None
        origin = RequestOrigin(self.address, self.peer)
        listener._workers.submit(
            lambda body: protocol.answer(body, origin),
            event.body,
            partial(self._answered, event.stream, name),
        )
        return True

    def _answered(self, stream: int, name: str, result: Any, error: BaseException | None) -> None:
        listener = self.listener
        if self._gone() or self.conn is None:
            return
        if error is not None:
            listener.policy.internal_error(
                "libp2p handler failed", self.address, self.peer, error, protocol=name
            )
            self.conn.reset(stream)
        else:
            body = listener.policy.issue(self.peer, result)
            if self._respond(stream, body, name):
                listener.policy.count("requests_answered")
        self._flush()

    def _respond(self, stream: int, body: bytes, protocol: str) -> bool:
        """``body`` on ``stream``, or the stream reset when over the send budget (noted)."""
        assert self.conn is not None and self.transport is not None
        unsent = self.transport.get_write_buffer_size()
        waiting = self.conn.queued + unsent
        try:
            if self.conn.respond(stream, body, time.monotonic(), unsent):
                return True
            ended = None
        except Libp2pConnectionFailed as exc:  # still over the budget: the connection ends
            ended = exc
        budget = self.conn.limits.max_unsent
        error = LimitExceeded(
            f"{protocol} answer", f"{len(body)} bytes while {waiting} wait to be sent, over "
            f"{budget} (the peer does not take what it asked for)",
        )  # fmt: skip
        self._note("send_budget_exceeded", error, protocol=protocol)
        if ended is not None:
            self._failed(ended)
        return False

    def _refuse(self, stream: int) -> None:
        """``stream`` reset for the send budget; the connection ended (GO_AWAY) when what
        waits stays over it."""
        assert self.conn is not None and self.transport is not None
        try:
            self.conn.refuse(stream, self.transport.get_write_buffer_size())
        except Libp2pConnectionFailed as exc:
            self._failed(exc)

    def _note(
        self, kind: str, error: Exception, *, level: int = logging.WARNING, **values: Any
    ) -> None:
        """A refusal or failure on this connection: counted, logged by source address (once
        per kind and address per 10 s), the peer id beside it."""
        self.listener.policy.note(
            kind, self.address, error, level=level, peer_id=self.peer, **values
        )

    def _stream_failed(self, event: StreamFailed) -> None:
        level = logging.INFO if event.kind == "stream_error" else logging.WARNING
        self._note(event.kind, event.error, protocol=event.protocol, level=level)

    # -- ending ---------------------------------------------------------------------------

    def _failed(self, failure: Libp2pConnectionFailed) -> None:
        """The connection ends with ``failure``, counted under its own counter; logged
        (throttled) by source address: a peer id costs an attacker nothing."""
        listener = self.listener
        if isinstance(failure, YamuxProtocolError):
            listener.policy.refused(failure.counter, self.address, str(failure.error))
        elif isinstance(failure, SendBudgetClosed):  # the peer asks for what it does not take
            self._note(failure.counter, failure.error)
            self._close(linger=True)  # its GO_AWAY must reach the peer
            return
        elif not isinstance(failure, PeerWentAway):
            self._note(failure.counter, failure.error, level=logging.INFO)
        self._close()

    def _close(self, *, abort: bool = False, linger: bool = False) -> None:
        """Close once what is written has left (``abort``: at once). ``linger``: our last
        words (GO_AWAY) then FIN, and the socket closed when the peer closes or LINGER
        later: a close with the peer's requests unread would send RST, and the peer's
        kernel would drop the GO_AWAY before it is read."""
        transport = self.transport
        if transport is None or (self.ending and not abort):
            return
        if not abort:
            try:
                self._flush()
            except Exception:  # closing anyway
                pass
        self.ending = True
        if linger and not abort and transport.can_write_eof():
            transport.write_eof()
            self.listener._loop_now().call_later(LINGER, transport.abort)
            return
        if abort:
            transport.abort()
        else:
            transport.close()
        # connection_lost releases the slots; it runs soon (abort) or once written (close)

    def _handshake_timed_out(self) -> None:
        self.timer = None
        if self.handshaking and self.transport is not None:
            timeout = self.listener.limits.host.handshake_timeout
            self.listener.policy.refused(
                "handshake_timeout", self.address, f"no handshake within {timeout} s"
            )
            self._close(abort=True)

    def sweep(self, now: float) -> None:
        """Idle connections, streams past their deadlines, peers that do not read."""
        conn = self.conn
        listener = self.listener
        limits = listener.limits
        if conn is None or self.transport is None or self.handshaking or self.ending:
            return
        if self.paused_since is not None and now - self.paused_since > limits.write_timeout:
            timeout = limits.write_timeout
            error = P2PTimeout(f"the peer did not take the response within {timeout} s")
            self._note("stream_timeout", error)
            self._close(abort=True)
            return
        shut = conn.stalled_sends(now)
        if shut:
            timeout = limits.write_timeout
            error = P2PTimeout(f"the peer kept its window shut for {timeout} s")
            for _ in shut:
                self._note("send_timeout", error)
        if now - conn.last_active > limits.idle_timeout:
            stalled = conn.open_streams > 0
            listener.policy.count(
                "connections_stalled_closed" if stalled else "connections_idle_closed"
            )
            conn.go_away()
            self._close()
            return
        late = conn.expired(now)
        for _, protocol in late:
            error = P2PTimeout(f"no whole request within {limits.read_timeout} s")
            self._note("stream_timeout", error, protocol=protocol)
        if late or shut:
            self._flush()


class NativeListener:
    """The libp2p listener served by this package's own sans-IO protocol stack on an
    asyncio loop (see the module docstring). Its :class:`~waku_legacy.p2p.policy.
    ListenerPolicy` (:attr:`policy`) decides what to answer and within which bounds, and
    holds the counters; the listener moves the bytes."""

    def __init__(
        self,
        pair: KeyPair,
        listen: Sequence[str],
        protocols: Mapping[str, ProtocolHandlers],
        *,
        cluster_id: int,
        shards: Sequence[int],
        limits: ListenerLimits = ListenerLimits(),
        announce: Sequence[str] = (),
        logger: logging.Logger | None = None,
        extra: Callable[..., Mapping[str, Any]] = default_extra,
    ) -> None:
        if not listen:
            raise P2PError("the libp2p listener needs at least one listen address")
        if not isinstance(pair, KeyPair):
            raise P2PError("the native libp2p listener needs a secp256k1 key")
        self.policy = ListenerPolicy(
            protocols, cluster_id=cluster_id, shards=shards, limits=limits, logger=logger,
            extra=extra,
        )  # fmt: skip
        self.pair = pair
        self.peer_id = peer_id_of(pair)
        self.listen = tuple(parse_multiaddr(a, what="libp2p listen address") for a in listen)
        self.announce = tuple(parse_multiaddr(a, what="libp2p announce address") for a in announce)
        self._addrs: list[str] = []
        #: where the sockets listen (ports resolved), without /p2p/
        self.bound: list[str] = []
        #: the node's ENR (31/WAKU2-ENR) from the announced addresses, once started
        self.enr: str | None = None
        #: why the listener ended by itself (None while it runs or after stop())
        self.failure: str | None = None
        self._thread: threading.Thread | None = None
        self._identity = secp256k1_identity(pair.private_key)
        requests = {name: limits.max_request_bytes for name in self.policy.protocols}
        requests[METADATA_CODEC] = METADATA_MAX_BYTES
        self._conn_limits = Libp2pConnectionLimits(
            requests=requests,
            max_streams=limits.max_streams_per_connection,
            max_buffered=limits.host.max_buffered_bytes,
            max_unsent=limits.host.max_buffered_bytes,
            negotiation_timeout=limits.host.negotiation_timeout,
            read_timeout=limits.read_timeout,
            write_timeout=limits.write_timeout,
        )
        self._live: set[_Conn] = set()
        self._by_peer: Counter[str] = Counter()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._servers: list[asyncio.Server] = []
        self._sweeper: asyncio.Task[None] | None = None
        self._identify_message = b""
        self._own_loop: asyncio.AbstractEventLoop | None = None
        self._workers: LoopWorkers | None = None

    # -- what the bridge reads ------------------------------------------------------------

    @property
    def limits(self) -> ListenerLimits:
        return self.policy.limits

    @property
    def protocols(self) -> dict[str, ServedProtocol]:
        return self.policy.protocols

    @property
    def metadata(self) -> Metadata:
        return self.policy.metadata

    @property
    def log(self) -> logging.Logger:
        return self.policy.log

    @property
    def multiaddrs(self) -> list[str]:
        """What the listener announces (``announce``, else where it listens), each ending
        in ``/p2p/<peer id>``."""
        return list(self._addrs)

    def stats(self) -> dict[str, int]:
        return self.policy.stats()

    def _make_enr(self) -> str | None:
        return enr_of_listener(
            self.pair.private_key,
            int(time.time()),  # seq: a later start never has a lower one
            self._addrs,
            cluster_id=self.metadata.cluster_id or 0,
            shards=self.metadata.shards,
        )

    def _loop_now(self) -> asyncio.AbstractEventLoop:
        assert self._loop is not None
        return self._loop

    def _identify(self) -> bytes:
        return self._identify_message

    @property
    def running(self) -> bool:
        return bool(self._servers) and all(s.is_serving() for s in self._servers)

    # -- on the serving loop ------------------------------------------------------------

    async def start(self, timeout: float = 30.0) -> None:
        """Listen on the running loop; return once listening."""
        if self._loop is not None:
            raise P2PError("the libp2p listener was already started")
        self._loop = asyncio.get_running_loop()
        self._workers = LoopWorkers(self._loop, self.limits.workers, "p2p-worker")
        try:
            await self._listen()
        except OSError as exc:
            await self._close_all()
            raise P2PError(f"the libp2p listener could not listen: {exc}") from exc
        self._identify_message = encode_identify(
            self._identity.public_key,
            [Multiaddr(a.split("/p2p/")[0]).to_bytes() for a in self._addrs],
            sorted({METADATA_CODEC, IDENTIFY_CODEC, PING_CODEC, *self.protocols}),
            agent=AGENT,
        )
        try:
            self.enr = self._make_enr()
        except Exception as exc:  # an ENR is an extra: never a reason not to serve
            self.log.warning("libp2p: no ENR", extra=self.policy.extra(error=str(exc)))
        self._sweeper = asyncio.create_task(self._sweep())

    async def _listen(self) -> None:
        groups: dict[tuple[str, int], set[str]] = {}
        for address in self.listen:
            names = {p.name for p in address.protocols()}
            host = str(address.value_for_protocol("ip6" if "ip6" in names else "ip4"))
            port = int(address.value_for_protocol("tcp"))
            groups.setdefault((host, port), set()).add("ws" if "ws" in names else "tcp")
        loop = self._loop_now()
        for (host, port), kinds in groups.items():
            frozen = frozenset(kinds)
            factory: Callable[[], asyncio.Protocol] = partial(_Conn, self, frozen)
            server = await loop.create_server(
                factory, host, port, reuse_port=frozen == {"tcp"}, backlog=1024
            )
            self._servers.append(server)
            for sock in server.sockets:
                bound_host, bound_port = sock.getsockname()[:2]
                ip = "ip6" if ":" in bound_host else "ip4"
                for kind in sorted(kinds, key=lambda k: k == "ws"):
                    suffix = "/ws" if kind == "ws" else ""
                    self.bound.append(f"/{ip}/{bound_host}/tcp/{bound_port}{suffix}")
        shown = [str(a) for a in self.announce] or self.bound
        self._addrs = [a if "/p2p/" in a else f"{a}/p2p/{self.peer_id}" for a in shown]

    async def _sweep(self) -> None:
        limits = self.limits
        shortest = min(limits.idle_timeout, limits.read_timeout, limits.write_timeout)
        period = max(0.05, min(1.0, shortest / 4))
        while True:
            await asyncio.sleep(period)
            now = time.monotonic()
            for conn in list(self._live):
                try:
                    conn.sweep(now)
                except Exception as exc:  # a bug: this connection ends, the sweeper goes on
                    self.policy.internal_error("libp2p sweep failed", conn.address, conn.peer, exc)
                    conn._close(abort=True)

    async def stop(self) -> bool:
        """Stop listening and close every connection (on the serving loop)."""
        if self._own_loop is not None and asyncio.get_running_loop() is not self._own_loop:
            return await asyncio.to_thread(self.stop_blocking)
        await self._close_all()
        return True

    async def _close_all(self) -> None:
        if self._sweeper is not None:
            self._sweeper.cancel()
            self._sweeper = None
        for server in self._servers:
            server.close()
        for conn in list(self._live):
            conn._close(abort=True)
        self._servers.clear()
        if self._workers is not None:
            self._workers.shutdown()
            self._workers = None

    # -- a loop of its own ---------------------------------------------------------------

    def start_blocking(self, timeout: float = 30.0) -> None:
        """Serve on a loop of its own in a daemon thread; return once listening."""
        if self._thread is not None:
            raise P2PError("the libp2p listener was already started")
        loop = self._own_loop = asyncio.new_event_loop()
        done = threading.Event()
        error: list[BaseException] = []

        def main() -> None:
            asyncio.set_event_loop(loop)
            try:
                loop.run_until_complete(self.start(timeout))
            except BaseException as exc:  # reported to the caller
                error.append(exc)
                done.set()
                return
            done.set()
            loop.run_forever()
            loop.run_until_complete(self._close_all())
            loop.close()

        self._thread = threading.Thread(target=main, name="p2p-native", daemon=True)
        self._thread.start()
        if not done.wait(timeout):
            raise P2PError(f"the libp2p listener did not start listening within {timeout} s")
        if error:
            raise error[0] if isinstance(error[0], P2PError) else P2PError(str(error[0]))

    def stop_blocking(self) -> bool:
        thread, loop = self._thread, self._own_loop
        if thread is None or loop is None:
            if self._loop is not None:
                future = asyncio.run_coroutine_threadsafe(self._close_all(), self._loop)
                future.result(self.limits.stop_timeout)
            return True
        loop.call_soon_threadsafe(loop.stop)
        thread.join(self.limits.stop_timeout)
        return not thread.is_alive()
