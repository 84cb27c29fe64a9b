"""The project's own libp2p client (:mod:`waku_legacy.p2p.transport.native_client`) over real
sockets against servers it does not share code with: py-libp2p's (an independent
implementation, trio) and, for completeness, our native listener; TCP and ``/ws``, yamux
and mplex (py-libp2p's WebSocket transport listens too); and js-libp2p's server (the stack
@waku/sdk ships) over ``/ws`` with mplex."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest

from tests.p2p_pylibp2p.listener import P2PListener
from waku_legacy.errors import LimitExceeded
from waku_legacy.p2p.errors import P2PError, P2PStreamError, P2PTimeout
from waku_legacy.p2p.keys import ephemeral_key_pair
from waku_legacy.p2p.limits import ListenerLimits
from waku_legacy.p2p.transport.native import NativeListener
from waku_legacy.p2p.transport.native_client import (
    MAX_RESPONSE_BYTES,
    NativeClient,
    native_request_once,
)

pytestmark = pytest.mark.network

ECHO = "/test/echo/1.0.0"
HUGE = "/test/huge/1.0.0"
SLOW = "/test/slow/1.0.0"


def _slow(body: bytes, origin: object) -> bytes:
    import time

    time.sleep(2.0)
    return body


@pytest.fixture(params=["py-libp2p", "native"], scope="module")
def server(request: pytest.FixtureRequest) -> Iterator[P2PListener]:
    cls = P2PListener if request.param == "py-libp2p" else NativeListener
    listener = cls(
        ephemeral_key_pair(),
        ["/ip4/127.0.0.1/tcp/0", "/ip4/127.0.0.1/tcp/0/ws"],
        {
            ECHO: (lambda body, origin: b"echo:" + body, None),
            HUGE: (lambda body, origin: b"x" * (MAX_RESPONSE_BYTES + 1), None),
            SLOW: (_slow, None),
        },
        cluster_id=16,
        shards=[32],
        limits=ListenerLimits(),
    )
    listener.start_blocking()
    yield listener
    listener.stop_blocking()


def _address(listener: P2PListener, ws: bool) -> str:
    return next(a for a in listener.multiaddrs if ("/ws/" in a) == ws)


@pytest.mark.parametrize("muxer", ["yamux", "mplex"])
@pytest.mark.parametrize("ws", [False, True], ids=["tcp", "ws"])
def test_requests_over_each_transport_and_muxer(server, muxer: str, ws: bool) -> None:
    async def main() -> list[bytes]:
        async with NativeClient.dial(_address(server, ws), muxers=(muxer,), timeout=10) as c:
            return [await c.request(ECHO, f"q{n}".encode()) for n in range(3)]

    assert asyncio.run(main()) == [b"echo:q0", b"echo:q1", b"echo:q2"]


def test_a_protocol_the_peer_does_not_serve_is_a_typed_error(server) -> None:
    with pytest.raises(P2PStreamError, match="not serve"):
        asyncio.run(native_request_once(_address(server, False), "/nope/1", b"x", timeout=10))


def test_a_response_over_the_cap_is_refused(server) -> None:
    with pytest.raises((LimitExceeded, P2PStreamError)):
        asyncio.run(native_request_once(_address(server, False), HUGE, b"x", timeout=20))


def test_a_slow_answer_times_out(server) -> None:
    with pytest.raises(P2PTimeout):
        asyncio.run(native_request_once(_address(server, False), SLOW, b"x", timeout=0.5))


def test_the_peer_must_prove_the_peer_id_its_address_names(server) -> None:
    other = P2PListener(ephemeral_key_pair(), ["/ip4/127.0.0.1/tcp/0"], {}, cluster_id=1,
                        shards=[0]).peer_id  # fmt: skip
    address = _address(server, False).rsplit("/p2p/", 1)[0] + f"/p2p/{other}"
    with pytest.raises(P2PError, match="proved peer id"):
        asyncio.run(native_request_once(address, ECHO, b"x", timeout=10))


def test_nobody_listening_is_a_dial_error() -> None:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    peer = P2PListener(ephemeral_key_pair(), ["/ip4/127.0.0.1/tcp/0"], {}, cluster_id=1,
                       shards=[0]).peer_id  # fmt: skip
    with pytest.raises(P2PError, match="cannot connect"):
        asyncio.run(native_request_once(f"/ip4/127.0.0.1/tcp/{port}/p2p/{peer}", ECHO, b"x"))


def test_requests_to_a_js_libp2p_server(node_bin: str) -> None:
    """js-libp2p 2.x (the stack @waku/sdk ships: WebSockets, Noise, mplex; Ed25519 peer
    id) serving an echo protocol (tests/interop/js/echo_server.mjs): three requests on one
    connection. (@waku/sdk has no store server, so a store query cannot be shown against
    js; js has no yamux or TCP package installed here.)"""
    import json
    import subprocess

    from tests.conftest import REPO_ROOT

    server = subprocess.Popen(
        [node_bin, str(REPO_ROOT / "tests" / "interop" / "js" / "echo_server.mjs")],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert server.stdout is not None
        address = json.loads(server.stdout.readline())["addrs"][0]
        assert "/ws/p2p/12D3Koo" in address  # an Ed25519 identity

        async def main() -> list[bytes]:
            async with NativeClient.dial(address, muxers=("mplex",), timeout=10) as client:
                return [await client.request(ECHO, f"js{n}".encode()) for n in range(3)]

        assert asyncio.run(main()) == [b"echo:js0", b"echo:js1", b"echo:js2"]
    finally:
        server.kill()
        server.wait(5)
