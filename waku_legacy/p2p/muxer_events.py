"""What a stream muxer session (:mod:`~waku_legacy.p2p.yamux`, :mod:`~waku_legacy.p2p.mplex`)
reports of the bytes it is fed, and the error that ends a session (sans-IO)."""

from __future__ import annotations

from dataclasses import dataclass

from waku_legacy.errors import DecodeError

__all__ = [
    "MuxError",
    "MuxEvent",
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
    """The session is over: ``kind`` is the listener's counter name (``yamux_protocol_error``,
    ``mux_error``, ``peer_went_away``); what to send before closing is already queued."""

    def __init__(self, muxer: str, kind: str, reason: str) -> None:
        super().__init__(muxer, reason)
        self.kind = kind


def drain(parts: list[bytes]) -> bytes:
    """Everything queued in ``parts``, joined, and the queue emptied."""
    if not parts:
        return b""
    out = b"".join(parts)
    parts.clear()
    return out
