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


def varint(n: int) -> bytes:
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
    return varint(len(body)) + body


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
    sock.sendall(ms_line("/multistream/1.0.0") + varint(2**31))
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

    from tests.p2p_pylibp2p.host import muxer_options, security_options
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


# -- a libp2p dialler of its own (issue 37) ------------------------------------------------

#: yamux frame types and flags (hashicorp/yamux spec.md), written here again on purpose
Y_DATA, Y_WINDOW_UPDATE, Y_PING, Y_GO_AWAY = 0, 1, 2, 3
Y_SYN, Y_ACK, Y_FIN, Y_RST = 1, 2, 4, 8
YAMUX_WINDOW = 256 * 1024
PING = "/ipfs/ping/1.0.0"


def pb_bytes(number: int, value: bytes) -> bytes:
    """A protobuf length-delimited field."""
    return varint(number << 3 | 2) + varint(len(value)) + value


def libp2p_public_key(key_type: int, data: bytes) -> bytes:
    """libp2p's ``PublicKey { KeyType Type = 1; bytes Data = 2; }`` (peer-ids spec)."""
    return bytes((0x08, key_type)) + pb_bytes(2, data)


def secp256k1_identity() -> tuple[bytes, Any]:
    """(encoded public key, sign): a fresh secp256k1 identity (ECDSA over SHA-256, DER)."""
    import coincurve

    key = coincurve.PrivateKey()
    return libp2p_public_key(2, key.public_key.format(compressed=True)), key.sign


def frame_of(body: bytes) -> bytes:
    """A varint length-prefixed message (a store request on its stream)."""
    return varint(len(body)) + body


class RawLibp2p:
    """A libp2p dialler written apart from the project's code: a blocking socket from
    ``source``, multistream-select by hand, Noise XX on the ``noiseprotocol`` package (the
    identity payload by hand), yamux frames by hand. A thread reads everything the server
    sends (TCP never stalls) and notes per yamux stream the DATA bytes, window updates,
    FIN and RST, and GO_AWAY. It never grants window itself unless told to (``grant``)."""

    def __init__(
        self,
        target: tuple[str, int],
        *,
        source: str = ATTACKER,
        identity: tuple[bytes, Any] | None = None,
        timeout: float = 10.0,
    ) -> None:
        self.sock = connect_from(source, target, timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # as libp2p's do
        self.identity = identity or secp256k1_identity()
        self._noise: Any = None
        self._plain = bytearray()
        self._raw = bytearray()
        self.data: dict[int, int] = {}
        #: what came on each stream, past its multistream answers (``keep=True`` only)
        self.received: dict[int, bytearray] = {}
        self.keep = False
        self.updates: dict[int, int] = {}
        self.sent: dict[int, int] = {}
        self.granted: dict[int, int] = {}  # DATA bytes of each stream we gave back
        self.rst: set[int] = set()
        self.fin: set[int] = set()
        self.go_away: int | None = None
        self.closed = False
        self.ended_by: Exception | None = None  # what ended the reader
        self._next = 1
        self._reader: threading.Thread | None = None

    # -- the handshake ----------------------------------------------------------------

    def _recv_exact(self, n: int) -> bytes:
        while len(self._raw) < n:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise ConnectionError("closed by the server")
            self._raw += chunk
        out = bytes(self._raw[:n])
        del self._raw[:n]
        return out

    def _recv_ms_lines(self, count: int, read: Any) -> list[bytes]:
        lines = []
        for _ in range(count):
            length = read(1)[0]  # every line here is under 128 bytes
            lines.append(read(length))
        return lines

    def noise(self, *, signature: bytes | None = None) -> None:
        """multistream-select to /noise and the XX handshake; message 3 carries our identity
        (``signature``: sent instead of the real one)."""
        from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey
        from noise.connection import Keypair, NoiseConnection

        self.sock.sendall(ms_line("/multistream/1.0.0") + ms_line("/noise"))
        answers = self._recv_ms_lines(2, self._recv_exact)
        assert answers[1] == b"/noise\n", answers
        static = X25519PrivateKey.generate()
        noise = NoiseConnection.from_name(b"Noise_XX_25519_ChaChaPoly_SHA256")
        noise.set_as_initiator()
        noise.set_keypair_from_private_bytes(Keypair.STATIC, static.private_bytes_raw())
        noise.start_handshake()
        self._send_noise(noise.write_message())
        noise.read_message(self._recv_noise())
        key, sign = self.identity
        signed = b"noise-libp2p-static-key:" + static.public_key().public_bytes_raw()
        payload = pb_bytes(1, key) + pb_bytes(2, sign(signed) if signature is None else signature)
        self._send_noise(noise.write_message(payload))
        self._noise = noise

    def _send_noise(self, message: bytes) -> None:
        self.sock.sendall(struct.pack(">H", len(message)) + message)

    def _recv_noise(self) -> bytes:
        (length,) = struct.unpack(">H", self._recv_exact(2))
        return self._recv_exact(length)

    def closed_by_server(self, within: float) -> bool:
        """Whether the server closes the connection within ``within`` s (reading all)."""
        deadline = time.monotonic() + within
        while time.monotonic() < deadline:
            self.sock.settimeout(max(0.01, deadline - time.monotonic()))
            try:
                if not self.sock.recv(65536):
                    return True
            except TimeoutError:
                return False
            except OSError:
                return True
        return False

    # -- inside Noise -------------------------------------------------------------------

    def write(self, plain: bytes) -> None:
        for at in range(0, len(plain), 65519):
            self._send_noise(self._noise.encrypt(plain[at : at + 65519]))

    def yamux(self) -> None:
        """Agree on yamux and start reading frames."""
        self.write(ms_line("/multistream/1.0.0") + ms_line("/yamux/1.0.0"))
        self.sock.settimeout(None)
        self._reader = threading.Thread(target=self._read_frames, daemon=True)
        self._reader.start()

    def _read_plain(self, n: int) -> bytes:
        while len(self._plain) < n:
            self._plain += self._noise.decrypt(self._recv_noise())
        out = bytes(self._plain[:n])
        del self._plain[:n]
        return out

    def _read_frames(self) -> None:
        try:
            self._recv_ms_lines(2, self._read_plain)  # the muxer's multistream answers
            while True:
                _, typ, flags, sid, length = YAMUX.unpack(self._read_plain(12))
                if typ == Y_DATA:
                    body = self._read_plain(length)
                    self.data[sid] = self.data.get(sid, 0) + length
                    if self.keep:
                        self.received.setdefault(sid, bytearray()).extend(body)
                elif typ == Y_WINDOW_UPDATE:
                    self.updates[sid] = self.updates.get(sid, 0) + length
                elif typ == Y_GO_AWAY:
                    self.go_away = length
                if flags & Y_RST:
                    self.rst.add(sid)
                if flags & Y_FIN:
                    self.fin.add(sid)
        except Exception as exc:
            self.ended_by = exc
            self.closed = True

    def open_stream(self, protocol: str, first: bytes = b"") -> int:
        """A new stream (SYN), multistream-select to ``protocol`` and ``first`` on it."""
        sid = self._next
        self._next += 2
        self.sent[sid] = 0
        self.write(yamux_frame(Y_WINDOW_UPDATE, Y_SYN, sid, 0))
        self.send(sid, ms_line("/multistream/1.0.0") + ms_line(protocol) + first)
        return sid

    def send(self, sid: int, data: bytes) -> None:
        for at in range(0, len(data), 65536):
            chunk = data[at : at + 65536]
            self.write(yamux_frame(Y_DATA, 0, sid, len(chunk), chunk))
            self.sent[sid] += len(chunk)

    def grant(self, sid: int) -> None:
        """Give the server back the window its DATA on ``sid`` used (a reader at full
        speed), in steps of half a window."""
        got = self.data.get(sid, 0)
        given = self.granted.get(sid, 0)
        if got - given >= YAMUX_WINDOW // 2:
            self.write(yamux_frame(Y_WINDOW_UPDATE, 0, sid, got - given))
            self.granted[sid] = got

    def credit(self, sid: int) -> int:
        """What the server's window lets us send on ``sid`` now."""
        return YAMUX_WINDOW + self.updates.get(sid, 0) - self.sent.get(sid, 0)

    def wait(self, done: Any, within: float) -> bool:
        deadline = time.monotonic() + within
        while time.monotonic() < deadline:
            if done():
                return True
            time.sleep(0.02)
        return bool(done())

    def close(self) -> None:
        try:  # shutdown first: a close alone sends no FIN while the reader waits in recv
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.sock.close()

    def answer(self, sid: int) -> bytes:
        """The one length-prefixed message after the two multistream answers on ``sid``
        (``keep=True``, once the stream ended)."""
        data = bytes(self.received.get(sid, b""))
        for _ in range(2):  # "/multistream/1.0.0\n", the protocol's line
            data = data[1 + data[0] :]
        length = shift = at = 0
        while True:
            byte = data[at]
            length |= (byte & 0x7F) << shift
            at += 1
            shift += 7
            if not byte & 0x80:
                return data[at : at + length]


def raw_query(
    target: tuple[str, int], protocol: str, request: bytes, *, source: str = "127.0.0.1"
) -> bytes:
    """One request on a new connection from ``source`` with :class:`RawLibp2p` (an honest
    client of a few milliseconds, whose latency shows the server's): the answer."""
    peer = RawLibp2p(target, source=source)
    try:
        peer.keep = True
        peer.noise()
        peer.yamux()
        # the server's window: a full-speed client grants it as it reads
        sid = peer.open_stream(protocol, frame_of(request))
        deadline = time.monotonic() + 20
        while sid not in peer.fin and time.monotonic() < deadline:
            if sid in peer.rst or peer.closed:
                raise ConnectionError(f"stream reset or connection closed ({peer.go_away})")
            peer.grant(sid)
            time.sleep(0.0005)
        if sid not in peer.fin:
            raise TimeoutError("no answer within 20 s")
        return peer.answer(sid)
    finally:
        peer.close()


def websocket_upgrade(host: bytes) -> bytes:
    """An HTTP upgrade to WebSocket (RFC 6455 4.1) with ``host`` as its Host header."""
    return (
        b"GET / HTTP/1.1\r\nHost: " + host + b"\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
        b"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n"
    )


def ecdsa_key_on_unknown_curve() -> bytes:
    """A PKIX ECDSA public key naming curve 1.2.840.10045.3.1.8 (no such named curve:
    ``cryptography`` raises UnsupportedAlgorithm), as libp2p key type 3."""
    spki = bytes.fromhex("3059301306072a8648ce3d020106082a8648ce3d03010803420004") + bytes(
        range(1, 65)
    )
    return libp2p_public_key(3, spki)


def rsa_key(modulus_bits: int, exponent: int) -> bytes:
    """A PKIX RSA public key (libp2p key type 0) with a random odd modulus of
    ``modulus_bits`` bits and ``exponent``: nobody holds its private key; the listener must
    refuse or check it, which is what an attacker's key costs."""
    import random

    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import rsa

    modulus = random.getrandbits(modulus_bits) | (1 << (modulus_bits - 1)) | 1
    public = rsa.RSAPublicNumbers(exponent, modulus).public_key()
    der = public.public_bytes(
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    return libp2p_public_key(0, der)


def store_v3_request(
    request_id: str,
    pubsub_topic: str,
    content_topic: str,
    *,
    limit: int = 20,
    cursor: bytes | None = None,
) -> bytes:
    """A store v3 ``StoreQueryRequest`` (13/WAKU2-STORE) by hand: request_id = 1,
    include_data = 2, pubsub_topic = 10, content_topics = 11, pagination_cursor = 51,
    pagination_limit = 53."""
    body = pb_bytes(1, request_id.encode()) + bytes((0x10, 1))
    body += pb_bytes(10, pubsub_topic.encode()) + pb_bytes(11, content_topic.encode())
    if cursor is not None:
        body += pb_bytes(51, cursor)
    return body + varint(53 << 3) + varint(limit)
