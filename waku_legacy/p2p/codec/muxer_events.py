"""What a stream muxer session (:mod:`~waku_legacy.p2p.codec.yamux`,
:mod:`~waku_legacy.p2p.codec.mplex`) reports of the bytes it is fed, and the error that ends
a session (sans-IO)."""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from waku_legacy.errors import DecodeError
from waku_legacy.p2p.errors import Libp2pConnectionFailed

__all__ = [
    "MuxError",
    "MuxEvent",
    "ReceiveSide",
    "SendSide",
    "StreamData",
    "StreamEnded",
    "StreamOpened",
    "StreamReset",
    "drain",
]


@dataclass(frozen=True, slots=True)
class StreamOpened:
    stream: int


@dataclass(frozen=True, slots=True)
class StreamData:
    stream: int
    data: bytes


@dataclass(frozen=True, slots=True)
class StreamEnded:
    """The peer closed its side (it sends no more)."""

    stream: int


@dataclass(frozen=True, slots=True)
class StreamReset:
    stream: int


MuxEvent = StreamOpened | StreamData | StreamEnded | StreamReset


class MuxError(DecodeError):
    """The session is over: ``failure`` is the connection's typed error (its counter, the
    GO_AWAY code already queued before closing, :mod:`waku_legacy.p2p.errors`)."""

    def __init__(self, muxer: str, failure: type[Libp2pConnectionFailed], reason: str) -> None:
        super().__init__(muxer, reason)
        self.failure = failure

    @property
    def kind(self) -> str:
        """The listener's counter name (``yamux_protocol_error``, ``mux_error``...)."""
        return self.failure.counter


class SendSide(Enum):
    """Our half of a stream (yamux and mplex streams are half-closed one side at a time)."""

    OPEN = 1  # we may write
    CLOSING = 2  # closed by us; the FIN (mplex: Close) waits behind bytes queued for the peer
    CLOSED = 3  # our FIN/Close is sent: we write no more


class ReceiveSide(Enum):
    """The peer's half of a stream."""

    OPEN = 1  # the peer may send
    CLOSED = 2  # the peer sent FIN/Close: it sends no more


def drain(parts: list[bytes]) -> bytes:
    """Everything queued in ``parts``, joined, and the queue emptied."""
    if not parts:
        return b""
    out = b"".join(parts)
    parts.clear()
    return out
