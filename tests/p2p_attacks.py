"""Hostile libp2p peers over real loopback sockets, for
tests/waku_legacy/p2p/test_listener_hostile.py and bench/hostile_p2p.py: a connection flood
from one source address (idle TCP, or Noise
handshakes abandoned after their first message), a multistream-select message announcing
2^31 bytes, and yamux DATA past a stream's receive window. Loopback is 127.0.0.0/8: binding
the attacker's sockets to 127.0.0.2 makes it another address than the honest 127.0.0.1."""

from __future__ import annotations

import os
import selectors
import socket
import struct
import threading
import time
from dataclasses import dataclass
from typing import Any

from multiaddr import Multiaddr

ATTACKER = "127.0.0.2"


def rss_bytes(pid: int | None = None) -> int:
    """Resident set size of ``pid`` (default: this process), from /proc."""
    with open(f"/proc/{pid or 'self'}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError("no VmRSS in /proc status")


def tcp_target(address: str) -> tuple[str, int]:
    ma = Multiaddr(address)
    return str(ma.value_for_protocol("ip4")), int(ma.value_for_protocol("tcp"))


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        byte = n & 0x7F
        n >>= 7
        if n:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def ms_line(text: str) -> bytes:
    """One multistream-select message."""
    body = text.encode() + b"\n"
    return _varint(len(body)) + body


#: what a Noise initiator sends first: multistream-select to /noise, then Noise XX message
#: 1 (its 32-byte ephemeral key, in a 2-byte length-prefixed Noise message)
NOISE_FIRST_MESSAGE = (
    ms_line("/multistream/1.0.0") + ms_line("/noise") + struct.pack(">H", 32) + os.urandom(32)
)


def connect_from(source: str, target: tuple[str, int], timeout: float = 5.0) -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.settimeout(timeout)
    sock.bind((source, 0))
    sock.connect(target)
    return sock


@dataclass
class FloodStats:
    opened: int = 0
    dropped_by_server: int = 0
    connect_failed: int = 0


class ConnectionFlood:
    """``count`` connections from ``source`` kept open: each sends ``first`` (nothing: an
    idle TCP connection) and is re-opened as soon as the server drops it."""

    def __init__(
        self, target: tuple[str, int], count: int, *, first: bytes = b"", source: str = ATTACKER
    ) -> None:
        self.target = target
        self.count = count
        self.first = first
        self.source = source
        self.stats = FloodStats()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="flood", daemon=True)

    def __enter__(self) -> ConnectionFlood:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(10)

    def _open(self, selector: selectors.BaseSelector) -> None:
        try:
            sock = connect_from(self.source, self.target)
            if self.first:
                sock.sendall(self.first)
            sock.setblocking(False)
        except OSError:
            self.stats.connect_failed += 1
            time.sleep(0.01)
            return
        self.stats.opened += 1
        selector.register(sock, selectors.EVENT_READ)

    def _run(self) -> None:
        selector = selectors.DefaultSelector()
        try:
            while not self._stop.is_set():
                while len(selector.get_map()) < self.count and not self._stop.is_set():
                    self._open(selector)
                for key, _ in selector.select(0.05):
                    sock = key.fileobj
                    assert isinstance(sock, socket.socket)
                    try:
                        data = sock.recv(65536)
                    except BlockingIOError:
                        continue
                    except OSError:
                        data = b""
                    if not data:  # dropped by the server: re-open
                        self.stats.dropped_by_server += 1
                        selector.unregister(sock)
                        sock.close()
        finally:
            for key in list(selector.get_map().values()):
                key.fileobj.close()  # type: ignore[union-attr]
            selector.close()


def multistream_bomb(
    target: tuple[str, int], *, seconds: float = 3.0, source: str = ATTACKER
) -> tuple[int, bool]:
    """Start multistream-select, announce a 2^31-byte message and send data for up to
    ``seconds``: (bytes of it sent, whether the server closed the connection)."""
    sock = connect_from(source, target)
    sock.sendall(ms_line("/multistream/1.0.0") + _varint(2**31))
    chunk = b"\0" * 65536
    sent = 0
    closed = False
    deadline = time.monotonic() + seconds
    sock.settimeout(0.5)
    try:
        while time.monotonic() < deadline:
            try:
                sent += sock.send(chunk)
            except TimeoutError:
                pass
    except OSError:  # reset or broken pipe: the server closed it
        closed = True
    if not closed:
        sock.settimeout(max(0.5, deadline - time.monotonic()))
        try:
            while sock.recv(65536):
                pass
            closed = True
        except TimeoutError:
            closed = False
        except OSError:
            closed = True
    sock.close()
    return sent, closed


YAMUX = struct.Struct("!BBHII")


def yamux_frame(typ: int, flags: int, stream_id: int, length: int, body: bytes = b"") -> bytes:
    return YAMUX.pack(0, typ, flags, stream_id, length) + body


async def yamux_past_window(
    address: str,
    *,
    first: bytes = b"",
    total: int = 64 * 1024 * 1024,
    seconds: float = 10.0,
) -> tuple[int, int | None]:
    """Open a yamux stream, send ``first`` on it (say, a request the server answers), then
    DATA frames past its 256 KiB window (never waiting for window updates) until ``total``
    bytes, the server closing, or ``seconds``: (bytes sent, the GO_AWAY code the server sent
    or None)."""
    import trio

    conn = await secured(address)
    await conn.write(ms_line("/multistream/1.0.0") + ms_line("/yamux/1.0.0"))
    sent = 0
    code: int | None = None
    received = bytearray()

    async def read_frames() -> None:
        nonlocal code
        while True:
            data = await conn.read()  # one Noise message (read(n) waits for n bytes)
            if not data:
                return
            received.extend(data)
            # skip the two multistream answers, then walk yamux frames
            while received and code is None:
                if received[0] in (0x13, 0x0D):  # a multistream line; yamux's version is 0
                    if len(received) < received[0] + 1:
                        break
                    del received[: received[0] + 1]
                    continue
                if len(received) < 12:
                    break
                _, typ, _, _, length = YAMUX.unpack_from(received)
                body = length if typ == 0 else 0
                if len(received) < 12 + body:
                    break
                if typ == 3:
                    code = length
                del received[: 12 + body]

    with trio.move_on_after(seconds):
        async with trio.open_nursery() as nursery:

            async def reader() -> None:
                try:
                    await read_frames()
                except Exception:
                    pass
                nursery.cancel_scope.cancel()

            nursery.start_soon(reader)
            payload = b"x" * 65536
            try:
                await conn.write(yamux_frame(1, 1, 1, 0))  # SYN: stream 1
                if first:
                    await conn.write(yamux_frame(0, 0, 1, len(first), first))
                    await trio.sleep(0.5)  # answered
                while sent < total:
                    await conn.write(yamux_frame(0, 0, 1, len(payload), payload))
                    sent += len(payload)
            except Exception:
                pass  # the server closed the connection
            await trio.sleep(1.0)  # its GO_AWAY may still be on the way
            nursery.cancel_scope.cancel()
    try:
        await conn.close()
    except Exception:
        pass
    return sent, code


async def secured(address: str) -> Any:
    """A Noise session to ``address`` (a multiaddr with /p2p/), nothing negotiated on it."""
    from libp2p.peer.id import ID
    from libp2p.transport.tcp.tcp import TCP
    from libp2p.transport.upgrader import TransportUpgrader

    from waku_legacy.p2p.host import muxer_options, security_options
    from waku_legacy.p2p.keys import ephemeral_key_pair

    target = Multiaddr(address)
    peer = ID.from_base58(target.value_for_protocol("p2p"))
    raw = await TCP().dial(target.decapsulate(Multiaddr(f"/p2p/{peer}")))
    upgrader = TransportUpgrader(security_options(ephemeral_key_pair()), muxer_options())
    return await upgrader.upgrade_security(raw, True, peer)


async def yamux_cut_mid_frame(address: str) -> None:
    """Agree on yamux, send half a frame header and hang up: py-libp2p logs a warning
    ("closed unexpectedly") for each such connection, and an error for the identify
    stream it fails to open to us."""
    conn = await secured(address)
    await conn.write(ms_line("/multistream/1.0.0") + ms_line("/yamux/1.0.0") + b"\0\0\0")
    await conn.close()
