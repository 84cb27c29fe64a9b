"""libp2p over WebSocket (``/ws``), sans-IO on ``wsproto``: the listener's side
(:class:`WebSocketServer`) and the dialler's (:class:`WebSocketClient`).

js-libp2p's websockets transport (js-waku's only transport) opens ``ws://host:port/`` and
sends the libp2p byte stream as binary messages; message boundaries mean nothing. The HTTP
upgrade request is answered with 101 (any path); text messages and a close end the
connection; pings are answered by wsproto. Fragments are handed on as they arrive, so no
message is ever buffered whole. The HTTP request is at most 16 KiB (h11's default).

Whatever the peer's bytes make wsproto (or h11 under it) raise is a :class:`WebSocketError`:
its protocol errors, and the ``UnicodeError`` of its ASCII and IDNA decoding of header values
(bytes 0x80-0xFF in ``Host``, ``Connection``, ``Sec-WebSocket-Extensions``...)."""

from __future__ import annotations

from wsproto import ConnectionType, WSConnection
from wsproto.events import (
    AcceptConnection,
    BytesMessage,
    CloseConnection,
    Message,
    Ping,
    RejectConnection,
    Request,
    TextMessage,
)
from wsproto.utilities import LocalProtocolError, RemoteProtocolError

from waku_legacy.errors import DecodeError

__all__ = ["WebSocketClient", "WebSocketError", "WebSocketServer", "looks_like_http"]

#: what wsproto and h11 raise for bytes that break the protocol (UnicodeError is a
#: ValueError: header values that are not ASCII or not IDNA)
_PEER_ERRORS = (RemoteProtocolError, LocalProtocolError, ValueError)


class WebSocketError(DecodeError):
    def __init__(self, reason: str) -> None:
        super().__init__("websocket", reason)


def looks_like_http(first: bytes) -> bool:
    """A shared port's first bytes: an HTTP request (``GET``) or a libp2p dialler
    (multistream-select's header, whose first byte is its length, 19)."""
    return first[:3] == b"GET"


class WebSocketServer:
    def __init__(self) -> None:
        self._ws = WSConnection(ConnectionType.SERVER)
        self.open = False
        self.closed = False

    def feed(self, data: bytes) -> tuple[bytes, bytes]:
        """(libp2p bytes received, bytes to send back: the 101, pongs, a close)."""
        ws = self._ws
        try:
            ws.receive_data(data)
        except _PEER_ERRORS as exc:
            raise WebSocketError(f"{type(exc).__name__}: {exc}") from None
        received: list[bytes] = []
        reply: list[bytes] = []
        try:
            for event in ws.events():
                if isinstance(event, BytesMessage):
                    received.append(bytes(event.data))
                elif isinstance(event, Request):
                    reply.append(ws.send(AcceptConnection()))
                    self.open = True
                elif isinstance(event, Ping):
                    reply.append(ws.send(event.response()))
                elif isinstance(event, CloseConnection):
                    self.closed = True
                    if ws.state.name not in ("CLOSED", "LOCAL_CLOSING"):
                        reply.append(ws.send(event.response()))
                    break
                elif isinstance(event, (TextMessage, RejectConnection)):
                    raise WebSocketError(f"unexpected {type(event).__name__}")
        except _PEER_ERRORS as exc:
            raise WebSocketError(f"{type(exc).__name__}: {exc}") from None
        return b"".join(received), b"".join(reply)

    def wrap(self, data: bytes) -> bytes:
        """``data`` as one binary message (nothing when the socket is closing)."""
        if not data or not self.open or self.closed:
            return b""
        return self._ws.send(Message(data=data))


class WebSocketClient:
    """The dialler's side: the upgrade request for ``ws://host/`` first, then the libp2p
    bytes as binary messages (what js-libp2p's websockets transport sends)."""

    def __init__(self, host: str) -> None:
        self._ws = WSConnection(ConnectionType.CLIENT)
        self.open = False
        self.closed = False
        self._early: list[bytes] = []  # libp2p bytes written before the 101
        self.upgrade = self._ws.send(Request(host=host, target="/"))

    def feed(self, data: bytes) -> tuple[bytes, bytes]:
        """(libp2p bytes received, bytes to send: what waited for the 101, pongs...)."""
        ws = self._ws
        received: list[bytes] = []
        reply: list[bytes] = []
        try:
            ws.receive_data(data)
            for event in ws.events():
                if isinstance(event, BytesMessage):
                    received.append(bytes(event.data))
                elif isinstance(event, AcceptConnection):
                    self.open = True
                    reply += [ws.send(Message(data=early)) for early in self._early]
                    self._early.clear()
                elif isinstance(event, Ping):
                    reply.append(ws.send(event.response()))
                elif isinstance(event, CloseConnection):
                    self.closed = True
                    break
                elif isinstance(event, RejectConnection):
                    raise WebSocketError(f"the upgrade was refused ({event.status_code})")
                elif isinstance(event, TextMessage):
                    raise WebSocketError("unexpected TextMessage")
        except _PEER_ERRORS as exc:
            raise WebSocketError(f"{type(exc).__name__}: {exc}") from None
        return b"".join(received), b"".join(reply)

    def wrap(self, data: bytes) -> bytes:
        """``data`` as one binary message (held until the upgrade is accepted)."""
        if not data or self.closed:
            return b""
        if not self.open:
            self._early.append(data)
            return b""
        return self._ws.send(Message(data=data))
