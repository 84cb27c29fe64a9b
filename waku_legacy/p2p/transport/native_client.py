"""The project's libp2p client: its own sans-IO dialler
(:class:`~waku_legacy.p2p.codec.dialler.DiallerConnection`: multistream-select, Noise XX,
yamux or mplex, on the codecs the listener uses) behind one :class:`asyncio.Protocol`, over
TCP or ``/ws``. ``store query --peer`` and the REST API's ``peerAddr`` ask other nodes with
it.

:class:`NativeClient` is an async context manager holding one connection; each
:meth:`~NativeClient.request` opens a stream, writes the protocol proposal and one
length-prefixed request at once and closes our side (go-libp2p's lazy multistream-select,
as js-waku does), then reads one response until the peer closes. Bounds, as the server's: the
dial and the handshake within ``timeout``; a response within ``timeout`` and at most
:data:`MAX_RESPONSE_BYTES` (nwaku's 10 MiB RPC cap); what a stream may send us is the
yamux window (256 KiB) or one mplex message (1 MiB) at a time. The peer must prove the peer
id its address names (``/p2p/<id>``), before any request is written."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import Any

import coincurve
from multiaddr import Multiaddr

from waku_legacy.errors import DecodeError, LimitExceeded
from waku_legacy.p2p.codec.dialler import Answer, DiallerConnection
from waku_legacy.p2p.codec.multistream import MultistreamError
from waku_legacy.p2p.codec.noise import secp256k1_identity
from waku_legacy.p2p.codec.websocket import WebSocketClient
from waku_legacy.p2p.errors import P2PError, P2PStreamError, P2PTimeout

__all__ = ["MAX_RESPONSE_BYTES", "NativeClient", "native_request_once"]

#: nwaku's store responses stay under its 10 MiB RPC cap (MaxRpcSize).
MAX_RESPONSE_BYTES = 10 * 1024 * 1024 + 64 * 1024
_HOSTS = ("ip4", "ip6", "dns", "dns4", "dns6")


def _target(address: str) -> tuple[str, int, bool, str]:
    """(host, port, over WebSocket, the peer id named) of a peer's multiaddr."""
    try:
        names = [p.name for p in Multiaddr(address).protocols()]
        target = Multiaddr(address)
    except Exception as exc:
        raise P2PError(f"peer address {address[:200]!r} is not a multiaddr: {exc}") from None
    host_kind = next((n for n in names if n in _HOSTS), None)
    if host_kind is None or "tcp" not in names:
        raise P2PError(f"peer address {address}: no TCP address (/ip4, /ip6 or /dns…, /tcp)")
    if "p2p" not in names:
        raise P2PError(f"peer address {address} names no peer id (/p2p/…)")
    host = str(target.value_for_protocol(host_kind))
    return (
        host,
        int(target.value_for_protocol("tcp")),
        "ws" in names,
        str(target.value_for_protocol("p2p")),
    )


class _Connection(asyncio.Protocol):
    """One dialled socket: the WebSocket layer when there is one and the dialler."""

    def __init__(self, conn: DiallerConnection, ws: WebSocketClient | None) -> None:
        self.conn = conn
        self.ws = ws
        self.transport: asyncio.Transport | None = None
        loop = asyncio.get_running_loop()
        self.ready: asyncio.Future[None] = loop.create_future()
        self.waiting: dict[int, asyncio.Future[Answer]] = {}
        self.error: Exception | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        if self.ws is not None:
            transport.write(self.ws.upgrade)
        self.flush()

    def flush(self) -> None:
        if self.transport is None or self.transport.is_closing():
            return
        out = self.conn.data_to_send()
        if out and self.ws is not None:
            out = self.ws.wrap(out)
        if out:
            self.transport.write(out)

    def data_received(self, data: bytes) -> None:
        try:
            if self.ws is not None:
                data, reply = self.ws.feed(data)
                if reply and self.transport is not None:
                    self.transport.write(reply)
                if self.ws.closed:
                    raise P2PError("the peer closed the WebSocket")
            answers = self.conn.receive(data) if data else []
        except (DecodeError, P2PError) as exc:  # the peer broke a protocol: we hang up
            self.fail(exc if isinstance(exc, P2PError) else P2PError(f"the peer: {exc}"))
            return
        self.flush()
        if self.conn.ready and not self.ready.done():
            self.ready.set_result(None)
        for answer in answers:
            future = self.waiting.pop(answer.stream, None)
            if future is not None and not future.done():
                future.set_result(answer)

    def fail(self, error: Exception) -> None:
        self.error = self.error or error
        if self.transport is not None:
            self.transport.abort()
        self.connection_lost(None)

    def connection_lost(self, exc: Exception | None) -> None:
        error = self.error or P2PError(f"the peer closed the connection ({exc or 'EOF'})")
        futures: list[asyncio.Future[Any]] = [self.ready, *self.waiting.values()]
        for future in futures:
            if not future.done():
                future.set_exception(error)
        self.waiting.clear()
        self.transport = None


class NativeClient:
    def __init__(self, connection: _Connection, timeout: float) -> None:
        self._connection = connection
        self.timeout = timeout

    @classmethod
    @asynccontextmanager
    async def dial(
        cls, address: str, *, muxers: Sequence[str] = ("yamux",), timeout: float = 20.0
    ) -> AsyncIterator[NativeClient]:
        """Connect to ``address`` (a multiaddr ending in ``/p2p/<peer id>``)."""
        host, port, over_ws, expected = _target(address)
        conn = DiallerConnection(
            secp256k1_identity(coincurve.PrivateKey()), muxers[0], MAX_RESPONSE_BYTES
        )
        ws = WebSocketClient(f"{host}:{port}") if over_ws else None
        loop = asyncio.get_running_loop()
        connection: _Connection | None = None
        try:
            async with asyncio.timeout(timeout):
                _, connection = await loop.create_connection(
                    lambda: _Connection(conn, ws), host, port
                )
                await connection.ready
        except TimeoutError:
            if connection is not None and connection.transport is not None:
                connection.transport.abort()
            raise P2PTimeout(f"no libp2p connection to {address} within {timeout} s") from None
        except OSError as exc:
            raise P2PError(
                f"cannot connect to {address}: {exc} (is the node running and listening "
                "there, and is the /p2p/ peer id its own? `serve` logs its multiaddrs)"
            ) from None
        except P2PError as exc:
            raise P2PError(f"cannot connect to {address}: {exc}") from None
        try:
            proved = conn.remote.peer_id if conn.remote is not None else None
            if proved != expected:
                raise P2PError(
                    f"cannot connect to {address}: the peer there proved peer id {proved}, "
                    "not the one the address names (is the /p2p/ peer id its own? `serve` "
                    "logs its multiaddrs)"
                )
            yield cls(connection, timeout)
        finally:
            if connection.transport is not None:
                connection.transport.close()

    async def request(
        self, protocol: str, body: bytes, *, max_bytes: int = MAX_RESPONSE_BYTES
    ) -> bytes:
        """Send ``body`` on a new ``protocol`` stream; the response body."""
        connection = self._connection
        if connection.transport is None:
            raise connection.error or P2PError("the connection is closed")
        sid = connection.conn.request(protocol, body)
        future: asyncio.Future[Answer] = asyncio.get_running_loop().create_future()
        connection.waiting[sid] = future
        connection.flush()
        try:
            async with asyncio.timeout(self.timeout):
                answer = await future
        except TimeoutError:
            raise P2PTimeout(f"no {protocol} response within {self.timeout} s") from None
        finally:
            connection.waiting.pop(sid, None)
        error = answer.error
        if isinstance(error, MultistreamError):
            raise P2PStreamError(f"{protocol}: the peer does not serve it ({error})")
        if isinstance(error, LimitExceeded):
            raise error
        if isinstance(error, P2PStreamError):
            raise P2PStreamError(f"{protocol}: {error}")
        if error is not None:
            raise P2PStreamError(f"{protocol} response: {error}")
        assert answer.body is not None
        if len(answer.body) > max_bytes:
            raise LimitExceeded(f"{protocol} response", f"over {max_bytes} bytes")
        return answer.body


async def native_request_once(
    address: str,
    protocol: str,
    body: bytes,
    *,
    muxers: Sequence[str] = ("yamux",),
    timeout: float = 20.0,
) -> bytes:
    """Dial, ask once, hang up."""
    async with NativeClient.dial(address, muxers=muxers, timeout=timeout) as client:
        response: bytes = await client.request(protocol, body)
    return response
