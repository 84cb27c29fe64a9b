"""multistream-select 1.0.0, the listener's side (sans-IO).

Each message is a varint length, then a UTF-8 line ending in ``\\n`` (the length counts
the newline). The dialler sends the header ``/multistream/1.0.0`` and a protocol; the
listener answers the header and either echoes the protocol (agreed: what follows on the
stream is the protocol's) or ``na``, after which the dialler may propose another. A lazy
dialler (go-libp2p, this project's client) sends header, protocol and its first protocol
bytes in one write, so the bytes after the agreed line are handed on, not dropped.

A message over :data:`MULTISTREAM_MAX_MESSAGE_BYTES` is refused as
soon as its length prefix is read (go-multistream's ErrTooLarge, js-libp2p's
``MAX_PROTOCOL_LENGTH``), and so is a dialler that proposes more than ``max_proposals``
protocols."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from waku_legacy.errors import DecodeError
from waku_legacy.proto.wire import encode_varint

__all__ = [
    "HEADER",
    "MULTISTREAM_MAX_MESSAGE_BYTES",
    "MultistreamDialler",
    "MultistreamError",
    "MultistreamListener",
    "Negotiated",
    "message",
]

#: The longest multistream-select message read (length prefix included in neither).
#: go-multistream refuses longer messages with ErrTooLarge, and js-libp2p's
#: multistream-select has ``MAX_PROTOCOL_LENGTH = 1024`` "conforming to go-libp2p"
#: (libp2p/js-libp2p packages/multistream-select/src/constants.ts).
MULTISTREAM_MAX_MESSAGE_BYTES = 1024

HEADER = "/multistream/1.0.0"


class MultistreamError(DecodeError):
    """A message too long, not a line, or a negotiation that does not end."""

    def __init__(self, reason: str) -> None:
        super().__init__("multistream-select", reason)


def message(text: str) -> bytes:
    """One multistream-select message: length, ``text``, newline."""
    body = text.encode() + b"\n"
    return encode_varint(len(body)) + body


_HEADER_MESSAGE = message(HEADER)
_NA = message("na")


@dataclass(frozen=True, slots=True)
class Negotiated:
    """The protocol agreed on, and the bytes the dialler sent after its line."""

    protocol: str
    rest: bytes


class MultistreamListener:
    """The listener's side of one negotiation: :meth:`feed` the dialler's bytes; it returns
    the bytes to answer and, once a protocol ``accepts`` agrees to, :class:`Negotiated`."""

    def __init__(self, accepts: Callable[[str], bool], max_proposals: int = 16) -> None:
        self._accepts = accepts
        self._buffer = b""
        self._header_seen = False
        self._proposals_left = max_proposals
        self.done = False

    @property
    def buffered(self) -> int:
        return len(self._buffer)

    def feed(self, data: bytes) -> tuple[bytes, Negotiated | None]:
        buffer = self._buffer + data if self._buffer else data
        out = b""
        while True:
            line, used = _next_line(buffer)
            if line is None:
                self._buffer = buffer
                return out, None
            buffer = buffer[used:]
            if not self._header_seen:
                if line != HEADER:
                    raise MultistreamError(f"expected {HEADER!r}, got {line[:64]!r}")
                self._header_seen = True
                out += _HEADER_MESSAGE
                continue
            if line == "ls" or not self._accepts(line):
                self._proposals_left -= 1
                if self._proposals_left < 0:
                    raise MultistreamError("too many protocols proposed")
                out += _NA
                continue
            self.done = True
            self._buffer = b""
            return out + message(line), Negotiated(line, buffer)


class MultistreamDialler:
    """The dialler's side, optimistic (one protocol, sent with the header before any
    answer, as go-libp2p does for a protocol the peer announced): :meth:`proposal` is what
    to send; :meth:`feed` the answer returns :class:`Negotiated` once the listener echoed
    the protocol, and raises :class:`MultistreamError` when it said ``na``."""

    def __init__(self, protocol: str) -> None:
        self.protocol = protocol
        self._buffer = b""
        self._header_seen = False

    def proposal(self) -> bytes:
        return _HEADER_MESSAGE + message(self.protocol)

    def feed(self, data: bytes) -> Negotiated | None:
        buffer = self._buffer + data if self._buffer else data
        while True:
            line, used = _next_line(buffer)
            if line is None:
                self._buffer = buffer
                return None
            buffer = buffer[used:]
            if not self._header_seen:
                if line != HEADER:
                    raise MultistreamError(f"expected {HEADER!r}, got {line[:64]!r}")
                self._header_seen = True
            elif line == self.protocol:
                self._buffer = b""
                return Negotiated(line, buffer)
            else:
                raise MultistreamError(f"{self.protocol!r} refused ({line[:64]!r})")


def _next_line(buffer: bytes) -> tuple[str | None, int]:
    """The first whole message of ``buffer`` (without its newline) and the bytes it used,
    or (None, 0) when it is not all there yet."""
    length = 0
    shift = 0
    pos = 0
    while True:
        if pos >= len(buffer):
            return None, 0
        byte = buffer[pos]
        pos += 1
        length |= (byte & 0x7F) << shift
        if length > MULTISTREAM_MAX_MESSAGE_BYTES:
            raise MultistreamError(f"a message over {MULTISTREAM_MAX_MESSAGE_BYTES} bytes")
        if not byte & 0x80:
            break
        shift += 7
        if shift > 14:
            raise MultistreamError(f"a message over {MULTISTREAM_MAX_MESSAGE_BYTES} bytes")
    end = pos + length
    if len(buffer) < end:
        return None, 0
    body = buffer[pos:end]
    if body[-1:] != b"\n":
        raise MultistreamError("a message without its newline")
    try:
        return body[:-1].decode(), end
    except UnicodeDecodeError:
        raise MultistreamError("a message that is not UTF-8") from None
