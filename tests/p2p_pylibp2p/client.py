"""The project's own libp2p client for request-response protocols (store v3, legacy store,
metadata): dial a multiaddr, open one stream per request, write one length-prefixed request,
close the write side, read the response until the peer closes.

The stream's protocol is selected lazily, as go-libp2p does for a protocol the peer
announced (``msmux.NewMSSelect``): the multistream-select header, the protocol and the
request leave together, and the peer's two echoes are checked before the response is read
(one round trip per request instead of three with py-libp2p's ``new_stream``). A peer that
answers ``na`` gets a typed error naming the protocol.

:class:`P2PClient` is a trio async context manager holding one connection;
:func:`request_once` dials, asks, and hangs up, from synchronous code (``trio.run``).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager

import trio
from libp2p.abc import IHost
from libp2p.peer.id import ID
from libp2p.peer.peerinfo import info_from_p2p_addr

from tests.p2p_pylibp2p.host import HostLimits, build_host
from tests.p2p_pylibp2p.streams import FrameStream, frame, read_all
from waku_legacy.errors import LimitExceeded, WakuLegacyError, innermost_error
from waku_legacy.p2p.errors import P2PError, P2PStreamError, P2PTimeout
from waku_legacy.p2p.keys import ephemeral_key_pair
from waku_legacy.p2p.multiaddrs import parse_multiaddr

__all__ = ["MAX_RESPONSE_BYTES", "P2PClient", "request_once"]

#: nwaku's store responses stay under its 10 MiB RPC cap (MaxRpcSize).
MAX_RESPONSE_BYTES = 10 * 1024 * 1024 + 64 * 1024
#: what the client's connection may hold received and unread: room for a whole response
#: (the server's default, 4 MiB, is for many peers; this was HostLimits' default until then)
CLIENT_MAX_BUFFERED_BYTES = 16 * 1024 * 1024


class P2PClient:
    def __init__(self, host: IHost, peer: ID, timeout: float) -> None:
        self.host = host
        self.peer = peer
        self.timeout = timeout

    @classmethod
    @asynccontextmanager
    async def dial(
        cls, address: str, *, muxers: Sequence[str] = ("yamux",), timeout: float = 20.0
    ) -> AsyncIterator[P2PClient]:
        """Connect to ``address`` (a multiaddr ending in ``/p2p/<peer id>``)."""
        target = parse_multiaddr(address, what="peer address")
        try:
            info = info_from_p2p_addr(target)
        except Exception as exc:
            raise P2PError(f"peer address {address} names no peer id (/p2p/…): {exc}") from None
        is_ws = "ws" in {p.name for p in target.protocols()}
        limits = HostLimits(
            dial_timeout=timeout, handshake_timeout=timeout,
            max_buffered_bytes=CLIENT_MAX_BUFFERED_BYTES,
        )  # fmt: skip
        host = build_host(ephemeral_key_pair(), [], limits=limits, muxers=muxers, websocket=is_ws)
        async with host.run(listen_addrs=[]):
            try:
                with trio.fail_after(timeout):
                    await host.connect(info)
            except trio.TooSlowError:
                raise P2PTimeout(f"no connection to {address} within {timeout} s") from None
            except P2PError:
                raise
            except Exception as exc:
                raise P2PError(
                    f"cannot connect to {address}: {exc} (is the node running and listening "
                    "there, and is the /p2p/ peer id its own? `serve` logs its multiaddrs)"
                ) from exc
            try:
                yield cls(host, info.peer_id, timeout)
            finally:
                with trio.move_on_after(2.0):
                    await host.disconnect(info.peer_id)

    async def request(
        self, protocol: str, body: bytes, *, max_bytes: int = MAX_RESPONSE_BYTES
    ) -> bytes:
        """Send ``body`` on a new ``protocol`` stream; the response body."""
        try:
            with trio.fail_after(self.timeout):
                stream = await self.host.get_network().new_stream(self.peer)
                try:
                    await stream.write(_select(protocol) + frame(body))
                    # the request ends here (NetStream has it; the interface does not say so)
                    await stream.close_write()  # type: ignore[attr-defined]
                    return await _read_response(stream, max_bytes, protocol)
                finally:
                    with trio.move_on_after(1.0):
                        await stream.close()
        except trio.TooSlowError:
            raise P2PTimeout(f"no {protocol} response within {self.timeout} s") from None
        except (P2PError, LimitExceeded):
            raise
        except Exception as exc:
            raise P2PError(f"{protocol} request failed: {exc}") from exc


_MULTISTREAM = b"/multistream/1.0.0\n"


def _select(protocol: str) -> bytes:
    """multistream-select's header and ``protocol``, each a length-prefixed line."""
    return frame(_MULTISTREAM) + frame(protocol.encode() + b"\n")


async def _read_response(stream: object, max_bytes: int, protocol: str) -> bytes:
    from libp2p.abc import INetStream
    from libp2p.network.stream.exceptions import StreamError

    assert isinstance(stream, INetStream)
    frames = FrameStream(stream, max_bytes, what=f"{protocol} response")
    try:
        header, chosen = await frames.next(), await frames.next()
    except StreamError:  # py-libp2p resets a stream that goes on after its "na"
        raise P2PStreamError(
            f"{protocol}: the peer reset the stream before it confirmed the protocol "
            "(it does not serve it?)"
        ) from None
    if header != _MULTISTREAM:
        raise P2PStreamError(f"{protocol}: the peer does not speak multistream-select 1.0.0")
    if chosen != protocol.encode() + b"\n":
        raise P2PStreamError(f"{protocol}: the peer does not serve it (answered {chosen[:64]!r})")
    body = await frames.next()
    if frames.buffered:
        raise P2PStreamError(f"{protocol} response: bytes after the one frame")
    rest = await read_all(stream, 16, what=f"{protocol} response")
    if rest:
        raise P2PStreamError(f"{protocol} response: bytes after the one frame")
    return body


def request_once(
    address: str,
    protocol: str,
    body: bytes,
    *,
    muxers: Sequence[str] = ("yamux",),
    timeout: float = 20.0,
) -> bytes:
    """Dial, ask once, hang up (blocking; any thread without a running trio loop)."""

    async def main() -> bytes:
        async with P2PClient.dial(address, muxers=muxers, timeout=timeout) as client:
            return await client.request(protocol, body)

    try:
        return trio.run(main)
    except BaseExceptionGroup as group:  # the host's nursery wraps the one failure
        inner = innermost_error(group, (WakuLegacyError,))
        if inner is group:
            raise
        raise inner from None
