"""py-libp2p's listener, kept in the tests as an independent libp2p server (the bridge's own
is :class:`waku_legacy.p2p.transport.native.NativeListener`): the same
:class:`~waku_legacy.p2p.policy.ListenerPolicy` (protocols, limits, rates, counters) on
py-libp2p in a trio thread.

py-libp2p runs on trio and the bridge on asyncio (aiohttp). The listener therefore owns a
thread that runs ``trio.run``: :meth:`P2PListener.start` (asyncio) starts it and returns once
the host listens (or raises the :class:`~waku_legacy.p2p.errors.P2PError` it failed with),
and :meth:`P2PListener.stop` cancels the trio side and waits for the thread, at most
``stop_timeout`` seconds (the thread is a daemon, so a host that will not close never keeps
the process alive). The two loops share nothing but immutable config, a thread-safe
counter table and the handlers.

Each protocol's handler is a *synchronous* function ``request body -> response body``. It
runs on a fixed pool of ``workers`` threads (never on trio's thread): the store handlers
query the v2 store through one connection per worker thread, the same store and the same
query code as the REST API. A stream carries one request: the listener reads one
length-prefixed request within ``read_timeout`` and under ``max_request_bytes``, runs the
handler, writes one length-prefixed response and closes the stream (js-waku reads until
the stream ends). Limits: connections in total, per source address and in the handshake
phase, counted from accept on, before any byte is read (:mod:`tests.p2p_pylibp2p.guard`), per
peer id (py-libp2p's swarm), concurrent streams per connection and per-peer request rate
(here), the Noise/muxer handshake and stream protocol negotiation timeouts, capped
multistream-select messages, yamux receive windows and unread bytes (the host), and
connections without progress for ``idle_timeout`` (idle, or streams that never end) are
closed. Every refusal and failure is counted and logged
(throttled) with its typed error; nothing a peer sends ends the listener.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, TypeVar

import trio
from libp2p.abc import IHost, INetConn, INetStream, INetwork, INotifee
from libp2p.crypto.keys import KeyPair
from libp2p.custom_types import TProtocol
from libp2p.peer.id import ID
from multiaddr import Multiaddr

from tests.p2p_pylibp2p.guard import guard_inbound
from tests.p2p_pylibp2p.host import build_host
from tests.p2p_pylibp2p.keys import libp2p_key_pair
from tests.p2p_pylibp2p.streams import frame, read_frame
from waku_legacy.errors import LimitExceeded, WakuLegacyError
from waku_legacy.limits import address_key
from waku_legacy.p2p.codec.metadata import METADATA_CODEC, METADATA_MAX_BYTES
from waku_legacy.p2p.errors import P2PError, P2PRefused, P2PTimeout
from waku_legacy.p2p.keys import KeyPair as NodeKeyPair
from waku_legacy.p2p.limits import ListenerLimits
from waku_legacy.p2p.multiaddrs import parse_multiaddr
from waku_legacy.p2p.policy import (
    ListenerPolicy,
    ProtocolHandlers,
    RequestOrigin,
    ServedProtocol,
    default_extra,
)

__all__ = ["P2PListener"]

T = TypeVar("T")


@dataclass
class _ConnState:
    address: str
    last_active: float
    streams: int = 0


class _Notifee(INotifee):
    def __init__(self, listener: P2PListener) -> None:
        self.listener = listener

    async def connected(self, network: INetwork, conn: INetConn) -> None:
        await self.listener._on_connected(conn)

    async def disconnected(self, network: INetwork, conn: INetConn) -> None:
        self.listener._on_disconnected(conn)

    async def opened_stream(self, network: INetwork, stream: INetStream) -> None:
        state = self.listener._conns.get(id(stream.muxed_conn))
        if state is not None:
            state.last_active = time.monotonic()

    async def closed_stream(self, network: INetwork, stream: INetStream) -> None:
        state = self.listener._conns.get(id(stream.muxed_conn))
        if state is not None:
            state.last_active = time.monotonic()

    async def listen(self, network: INetwork, multiaddr: Multiaddr) -> None:
        return None

    async def listen_close(self, network: INetwork, multiaddr: Multiaddr) -> None:
        return None


class P2PListener:
    """A libp2p host in its own trio thread: metadata, identify, ping and the given
    request-response protocols."""

    def __init__(
        self,
        pair: KeyPair | NodeKeyPair,
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
        self.policy = ListenerPolicy(
            protocols, cluster_id=cluster_id, shards=shards, limits=limits, logger=logger,
            extra=extra,
        )  # fmt: skip
        self.pair = libp2p_key_pair(pair)
        self.peer_id = ID.from_pubkey(self.pair.public_key).to_base58()
        self.listen = tuple(parse_multiaddr(a, what="libp2p listen address") for a in listen)
        self.announce = tuple(parse_multiaddr(a, what="libp2p announce address") for a in announce)
        self.limits = limits
        self.protocols = self.policy.protocols
        self.metadata = self.policy.metadata
        self.log = self.policy.log
        self._extra = extra
        self._gate = self.policy.gate
        self._addrs: list[str] = []
        self.bound: list[str] = []
        self.enr: str | None = None
        self.failure: str | None = None
        self._thread: threading.Thread | None = None
        self._ready = threading.Event()
        self._error: BaseException | None = None
        self._token: trio.lowlevel.TrioToken | None = None
        self._scope: trio.CancelScope | None = None
        self._pool: ThreadPoolExecutor | None = None
        self._conns: dict[int, _ConnState] = {}

    # -- the asyncio side ---------------------------------------------------------------

    @property
    def multiaddrs(self) -> list[str]:
        """What the listener announces (``announce``, else where it listens), each ending
        in ``/p2p/<peer id>``."""
        return list(self._addrs)

    @property
    def running(self) -> bool:
        """Started, listening, and its trio thread alive."""
        thread = self._thread
        return (
            thread is not None and thread.is_alive() and self._ready.is_set()
            and self._error is None
        )  # fmt: skip

    def stats(self) -> dict[str, int]:
        return self.policy.stats()

    def start_blocking(self, timeout: float = 30.0) -> None:
        """Start the trio thread and wait until the host listens (any thread)."""
        if self._thread is not None:
            raise P2PError("the libp2p listener was already started")
        self._pool = ThreadPoolExecutor(self.limits.workers, thread_name_prefix="p2p-worker")
        self._thread = threading.Thread(target=self._thread_main, name="p2p-trio", daemon=True)
        self._thread.start()
        if not self._ready.wait(timeout):
            raise P2PError(f"the libp2p host did not start listening within {timeout} s")
        if self._error is None:
            try:
                self.enr = self._make_enr()
            except Exception as exc:  # an ENR is an extra: never a reason not to serve
                self.log.warning("libp2p: no ENR", extra=self._extra(error=str(exc)))
        if self._error is not None:
            self._thread.join(self.limits.stop_timeout)
            self._pool.shutdown(wait=False)
            error = self._error
            if isinstance(error, P2PError):
                raise error
            raise P2PError(f"the libp2p host did not start: {error}") from error

    def _make_enr(self) -> str | None:
        from libp2p.crypto.secp256k1 import Secp256k1PrivateKey

        from waku_legacy.p2p.enr import enr_of_listener

        private = self.pair.private_key
        if not isinstance(private, Secp256k1PrivateKey):  # never: the key is ours
            return None
        return enr_of_listener(
            private.impl,
            int(time.time()),  # seq: a later start never has a lower one
            self._addrs,
            cluster_id=self.metadata.cluster_id or 0,
            shards=self.metadata.shards,
        )

    async def start(self, timeout: float = 30.0) -> None:
        """Start and return once listening (asyncio)."""
        import asyncio

        await asyncio.to_thread(self.start_blocking, timeout)

    def stop_blocking(self) -> bool:
        """Cancel the trio side and wait for it (at most ``stop_timeout``); True if it ended."""
        thread, token, scope = self._thread, self._token, self._scope
        if thread is None:
            return True
        if token is not None and scope is not None:
            try:
                token.run_sync_soon(scope.cancel)
            except trio.RunFinishedError:
                pass
        thread.join(self.limits.stop_timeout)
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)
        return not thread.is_alive()

    async def stop(self) -> bool:
        import asyncio

        return await asyncio.to_thread(self.stop_blocking)

    # -- the trio side --------------------------------------------------------------------

    def _thread_main(self) -> None:
        try:
            trio.run(self._main)
        except BaseException as exc:  # reported through start(); the thread must end quietly
            if not self._ready.is_set():
                self._error = exc
            else:
                self.failure = f"{type(exc).__name__}: {exc}"
                self.log.error(
                    "libp2p listener ended", extra=self._extra(error=str(exc)), exc_info=exc
                )
        finally:
            self._ready.set()

    async def _main(self) -> None:
        host = build_host(
            self.pair,
            self.listen,
            limits=self.limits.host,
            announce=self.announce,
            on_refused=self._refused,
        )
        guard_inbound(host.get_network(), self._gate, self._refused)
        host.get_network().register_notifee(_Notifee(self))
        host.set_stream_handler(TProtocol(METADATA_CODEC), self._serve_metadata)
        for name, protocol in self.protocols.items():
            host.set_stream_handler(TProtocol(name), self._handler_for(name, protocol))
        self._token = trio.lowlevel.current_trio_token()
        with trio.CancelScope() as scope:
            self._scope = scope
            async with host.run(listen_addrs=list(self.listen)), trio.open_nursery() as nursery:
                self._addrs = [self._with_peer_id(addr) for addr in host.get_addrs()]
                self.bound = [str(addr) for addr in host.get_transport_addrs()]
                if not self._addrs:
                    raise P2PError("the libp2p host listens on no address")
                nursery.start_soon(self._reap_idle, host)
                self._ready.set()
                await trio.sleep_forever()

    def _with_peer_id(self, addr: Multiaddr) -> str:
        text = str(addr)
        return text if "/p2p/" in text else f"{text}/p2p/{self.peer_id}"

    def _note(self, kind: str, key: str, error: BaseException | str, **values: Any) -> None:
        self.policy.note(kind, key, error, **values)

    # connections

    def _refused(self, kind: str, key: str, reason: str) -> None:
        self.policy.refused(kind, key, reason)

    async def _on_connected(self, conn: INetConn) -> None:
        # per-address and total limits hold from accept on (guard.InboundGate)
        address = _remote_address(conn)
        self._conns[id(conn.muxed_conn)] = _ConnState(address, time.monotonic())
        self.policy.count("connections_accepted")

    def _on_disconnected(self, conn: INetConn) -> None:
        self._conns.pop(id(conn.muxed_conn), None)

    async def _reap_idle(self, host: IHost) -> None:
        period = max(0.05, min(5.0, self.limits.idle_timeout / 4))
        while True:
            await trio.sleep(period)
            now = time.monotonic()
            for conns in list(host.get_network().get_connections_map().values()):
                for conn in list(conns):
                    state = self._conns.get(id(conn.muxed_conn))
                    if state is None or now - state.last_active <= self.limits.idle_timeout:
                        continue
                    stalled = bool(conn.get_streams())
                    self.policy.count(
                        "connections_stalled_closed" if stalled else "connections_idle_closed"
                    )
                    await _close_quietly(conn)

    # streams

    async def _serve_metadata(self, stream: INetStream) -> None:
        peer = str(stream.muxed_conn.peer_id)
        try:
            with trio.fail_after(self.limits.read_timeout):
                request = await read_frame(stream, METADATA_MAX_BYTES, what="metadata request")
            answer = self.policy.metadata_answer(peer, request)
            with trio.fail_after(self.limits.write_timeout):
                await stream.write(frame(answer))
                await stream.close()
            self.policy.count("metadata_answered")
        except BaseException as exc:
            await self._stream_failed(stream, peer, METADATA_CODEC, exc)

    def _handler_for(self, name: str, protocol: ServedProtocol) -> Callable[[INetStream], Any]:
        async def handle(stream: INetStream) -> None:
            await self._serve_request(stream, name, protocol)

        return handle

    async def _serve_request(self, stream: INetStream, name: str, protocol: ServedProtocol) -> None:
        conn = stream.muxed_conn
        peer = str(conn.peer_id)
        state = self._conns.get(id(conn))
        if state is not None and state.streams >= self.limits.max_streams_per_connection:
            limit = self.limits.max_streams_per_connection
            self._note("stream_refused", peer, P2PRefused(f"over {limit} streams"), protocol=name)
            await _reset_quietly(stream)
            return
        if state is not None:
            state.streams += 1
        try:
            await self._answer(stream, peer, name, protocol)
        except BaseException as exc:
            await self._stream_failed(stream, peer, name, exc)
        finally:
            if state is not None:
                state.streams -= 1
                state.last_active = time.monotonic()

    async def _answer(
        self, stream: INetStream, peer: str, name: str, protocol: ServedProtocol
    ) -> None:
        try:
            with trio.fail_after(self.limits.read_timeout):
                request = await read_frame(
                    stream, self.limits.max_request_bytes, what=f"{name} request"
                )
        except trio.TooSlowError:
            raise P2PTimeout(f"no whole request within {self.limits.read_timeout} s") from None
        state = self._conns.get(id(stream.muxed_conn))
        address = state.address if state is not None else "unknown"
        allowed, refused = self.policy.admit_request(peer, address, name, protocol, request)
        if allowed:
            origin = RequestOrigin(address, peer)
            result = await self._in_pool(lambda body: protocol.answer(body, origin), request)
            response = self.policy.issue(peer, result)
            self.policy.count("requests_answered")
        elif refused is None:
            await _reset_quietly(stream)
            return
        else:
            response = refused
        with trio.fail_after(self.limits.write_timeout):
            await stream.write(frame(response))
            await stream.close()

    async def _stream_failed(
        self, stream: INetStream, peer: str, name: str, exc: BaseException
    ) -> None:
        await _reset_quietly(stream)
        if isinstance(exc, trio.Cancelled):
            raise exc
        if isinstance(exc, trio.TooSlowError):
            timeout = self.limits.write_timeout
            exc = P2PTimeout(f"the peer did not take the response within {timeout} s")
        if isinstance(exc, LimitExceeded):
            self._note("request_too_large", peer, exc, protocol=name)
        elif isinstance(exc, P2PTimeout):
            self._note("stream_timeout", peer, exc, protocol=name)
        elif isinstance(exc, (WakuLegacyError, OSError, EOFError)) or _is_libp2p_io(exc):
            # a peer that resets or closes a stream it opened (js-waku does so with the
            # streams it pre-opened when it stops) is ordinary: info, not warning
            self._note("stream_error", peer, exc, protocol=name, level=logging.INFO)
        elif isinstance(exc, Exception):
            self.policy.count("internal_errors")
            self.log.error(
                "libp2p handler failed",
                extra=self._extra(peer=peer, protocol=name, error=str(exc)),
                exc_info=exc,
            )
        else:
            raise exc

    async def _in_pool(self, fn: Callable[[bytes], T], request: bytes) -> T:
        """``fn(request)`` on a worker thread; trio waits without blocking its loop."""
        pool = self._pool
        if pool is None:
            raise P2PError("the libp2p listener is not running")
        token = trio.lowlevel.current_trio_token()
        done = trio.Event()

        def wake(_: Future[T]) -> None:
            try:
                token.run_sync_soon(done.set)
            except trio.RunFinishedError:
                pass

        future = pool.submit(fn, request)
        future.add_done_callback(wake)
        await done.wait()
        return future.result()


def _is_libp2p_io(exc: BaseException) -> bool:
    from libp2p.io.exceptions import IOException

    return isinstance(exc, IOException)


def _remote_address(conn: INetConn) -> str:
    for addr in conn.get_transport_addresses():
        for proto in ("ip4", "ip6"):
            try:
                value = addr.value_for_protocol(proto)
            except Exception:
                continue
            if value:
                return address_key(str(value))
    return "unknown"


async def _close_quietly(conn: INetConn) -> None:
    try:
        with trio.move_on_after(2.0):
            await conn.close()
    except Exception:
        pass


async def _reset_quietly(stream: INetStream) -> None:
    try:
        with trio.move_on_after(2.0):
            await stream.reset()
    except Exception:
        pass
