"""Yamux write coalescing (tests.p2p_pylibp2p.host.CoalescingYamux) and the client's lazy
multistream-select, on real connections: frames and socket writes counted per request."""

from __future__ import annotations

import struct
from collections.abc import Iterator

import pytest
import trio
from libp2p.stream_muxer.mplex.mplex import Mplex
from libp2p.stream_muxer.yamux.yamux import (
    FLAG_FIN,
    TYPE_DATA,
    TYPE_WINDOW_UPDATE,
    YAMUX_HEADER_FORMAT,
)

from tests.p2p_pylibp2p import host as host_module
from tests.p2p_pylibp2p.client import P2PClient
from tests.p2p_pylibp2p.host import CoalescingMplex, CoalescingYamux, _merge_window_updates
from tests.p2p_pylibp2p.listener import P2PListener
from tests.waku_legacy.p2p.test_listener import ECHO, listening, tcp_addr
from waku_legacy.p2p.errors import P2PStreamError

pytestmark = pytest.mark.network


def _frame(kind: int, flags: int, stream: int, length: int, body: bytes = b"") -> bytes:
    return struct.pack(YAMUX_HEADER_FORMAT, 0, kind, flags, stream, length) + body


def test_window_updates_of_one_stream_are_summed_into_the_first() -> None:
    wu = TYPE_WINDOW_UPDATE
    frames = [
        _frame(wu, 0, 1, 5),
        _frame(TYPE_DATA, 0, 1, 3, b"abc"),
        _frame(wu, 0, 3, 7),
        _frame(wu, 0, 1, 11),
        _frame(wu, FLAG_FIN, 1, 0),  # flagged: kept as it is, in its place
        _frame(wu, 0, 3, 1),
    ]
    assert _merge_window_updates(frames) == [
        _frame(wu, 0, 1, 16),
        _frame(TYPE_DATA, 0, 1, 3, b"abc"),
        _frame(wu, 0, 3, 8),
        _frame(wu, FLAG_FIN, 1, 0),
    ]
    # a sum that would not fit in 32 bits is not merged
    big = [_frame(wu, 0, 1, 2**32 - 1), _frame(wu, 0, 1, 1)]
    assert _merge_window_updates(big) == big


@pytest.fixture
def listener(monkeypatch: pytest.MonkeyPatch) -> Iterator[P2PListener]:
    # A burst is sent when its trio loop idles, or HOLD_SECONDS (1 ms) after its first
    # frame if the loop is still busy then. Another thread holding the GIL (the listener's
    # own loop, or threads earlier tests left) can make the 1 ms pass before the loop gets
    # to idle, which splits bursts by the clock rather than by the loop: these tests count
    # writes per frame, so they hold bursts until the loop idles (the rule under test).
    monkeypatch.setattr(host_module.WriteBurst, "HOLD_SECONDS", 0.5)
    started = listening(listener_class=P2PListener)  # py-libp2p at both ends
    yield started
    assert started.stop_blocking()


def test_client_connection_coalesces_and_answers(
    listener: P2PListener, monkeypatch: pytest.MonkeyPatch
) -> None:
    frames: list[bytes] = []
    writes: list[bytes] = []
    queue = CoalescingYamux._write_frame
    write = CoalescingYamux._send_batch

    async def counting_queue(self: CoalescingYamux, data: bytes) -> None:
        frames.append(data)
        await queue(self, data)

    async def counting_write(self: CoalescingYamux, batch: bytes) -> None:
        writes.append(batch)
        await write(self, batch)

    monkeypatch.setattr(CoalescingYamux, "_write_frame", counting_queue)
    monkeypatch.setattr(CoalescingYamux, "_send_batch", counting_write)

    async def main() -> list[bytes]:
        answers = []
        async with P2PClient.dial(tcp_addr(listener), timeout=10) as client:
            conn = client.host.get_network().get_connections(client.peer)[0].muxed_conn
            assert type(conn) is CoalescingYamux
            await trio.sleep(0.2)  # identify and the rest of the connection's start
            frames.clear()
            writes.clear()
            for n in range(10):
                answers.append(await client.request(ECHO, b"%d" % n))
        return answers

    assert trio.run(main) == [b"echo:%d" % n for n in range(10)]
    # both ends are in this process: the client's SYN, lazily selected protocol with the
    # request, FIN and window update; the server's echoes, window updates, answer and FIN
    # (about ten frames a request), in one or two writes each side
    assert len(frames) >= 100
    assert 2 * len(writes) <= len(frames)


def test_mplex_connection_coalesces_and_answers(
    listener: P2PListener, monkeypatch: pytest.MonkeyPatch
) -> None:
    messages: list[bytes] = []
    writes: list[bytes] = []
    queue = CoalescingMplex.write_to_stream
    write = Mplex.write_to_stream

    async def counting_queue(self: CoalescingMplex, data: bytes) -> None:
        messages.append(data)
        await queue(self, data)

    async def counting_write(self: Mplex, data: bytes) -> None:
        writes.append(data)
        await write(self, data)

    monkeypatch.setattr(CoalescingMplex, "write_to_stream", counting_queue)
    monkeypatch.setattr(Mplex, "write_to_stream", counting_write)

    async def main() -> list[bytes]:
        answers = []
        async with P2PClient.dial(tcp_addr(listener), muxers=("mplex",), timeout=10) as client:
            conn = client.host.get_network().get_connections(client.peer)[0].muxed_conn
            assert type(conn) is CoalescingMplex
            await trio.sleep(0.2)
            messages.clear()
            writes.clear()
            for n in range(10):
                answers.append(await client.request(ECHO, b"%d" % n))
        return answers

    assert trio.run(main) == [b"echo:%d" % n for n in range(10)]
    # both ends: NewStream, the request, close; the echoes, the answer, close
    assert len(messages) >= 50
    assert 2 * len(writes) <= len(messages)


def test_lazy_select_refused_protocol_is_a_typed_error(listener: P2PListener) -> None:
    async def main() -> None:
        async with P2PClient.dial(tcp_addr(listener), timeout=10) as client:
            with pytest.raises(P2PStreamError, match="does not serve it"):
                await client.request("/test/nobody/1.0.0", b"x")
            assert await client.request(ECHO, b"after") == b"echo:after"

    trio.run(main)


def test_host_module_names_the_class() -> None:
    assert {"CoalescingMplex", "CoalescingYamux"} <= set(host_module.__all__)
