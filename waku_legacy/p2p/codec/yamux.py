"""yamux (``/yamux/1.0.0``, hashicorp/yamux ``spec.md``), one session, sans-IO.

A frame is a 12-byte header (version 0, type, flags, stream id, length, big-endian) and, for
DATA, ``length`` bytes. Types: DATA 0, WINDOW_UPDATE 1, PING 2, GO_AWAY 3; flags SYN 1,
ACK 2, FIN 4, RST 8. The dialler's streams have odd ids, the listener's even ones. Each
stream's receive window starts at 256 KiB: the receiver grants more with WINDOW_UPDATE as
it consumes, and DATA past the window is a protocol error (the spec: "the receiving side
must ... GO_AWAY with a protocol error"); a SYN WINDOW_UPDATE's length is credit on top of
the initial window. A PING with SYN is answered with ACK and the same opaque value.

:class:`YamuxSession` takes received bytes (:meth:`~YamuxSession.feed` -> events) and
queues the frames to send; :meth:`~YamuxSession.data_to_send` takes them all at once, so
one call's frames leave in one Noise message. Our writes wait for the peer's window.
Bounds: DATA past a stream's window resets it and ends the session with GO_AWAY (protocol
error), and so does DATA past the window of a stream we reset (or more than a window's
worth, in all, to streams the peer itself closed); a stream opened while ``max_streams`` are
open is reset at once (as go-yamux does); a header with another version or type ends the
session too. What waits for the peer's window is counted (:attr:`~YamuxSession.queued`, and
per stream) and what left in DATA too (:meth:`~YamuxSession.waiting`), so the connection can
bound the one and put a deadline on the other (:mod:`~waku_legacy.p2p.codec.connection`)."""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from enum import Enum, IntEnum, IntFlag

from waku_legacy.p2p.codec.muxer_events import (
    MuxError,
    MuxEvent,
    ReceiveSide,
    SendSide,
    StreamData,
    StreamEnded,
    StreamOpened,
    StreamReset,
    drain,
)
from waku_legacy.p2p.errors import (
    GoAwayCode,
    Libp2pConnectionFailed,
    PeerWentAway,
    YamuxProtocolError,
)

__all__ = ["INITIAL_WINDOW", "YAMUX_PROTOCOL_ID", "Flag", "FrameType", "GoAwayCode", "YamuxSession"]

YAMUX_PROTOCOL_ID = "/yamux/1.0.0"
INITIAL_WINDOW = 256 * 1024


class FrameType(IntEnum):
    """A frame header's type (spec: "Type")."""

    DATA = 0  # ``length`` bytes of a stream follow the header
    WINDOW_UPDATE = 1  # ``length`` more bytes the stream may send us (0: flags alone)
    PING = 2  # ``length`` is an opaque value, echoed with ACK
    GO_AWAY = 3  # the session ends; ``length`` is a :class:`GoAwayCode`


class Flag(IntFlag):
    """A frame header's flags (spec: "Flags")."""

    SYN = 1  # opens a stream (or asks a ping)
    ACK = 2  # accepts a stream (or answers a ping)
    FIN = 4  # the sender's side of the stream is done
    RST = 8  # the stream ends at once, both sides


# plain ints for the per-frame code: an IntFlag operand makes ``flags & SYN`` build an
# IntFlag object on every frame
DATA, WINDOW_UPDATE, PING, GO_AWAY = (int(t) for t in FrameType)
SYN, ACK, FIN, RST = (int(f) for f in Flag)
GO_AWAY_NORMAL, GO_AWAY_PROTOCOL_ERROR, GO_AWAY_INTERNAL_ERROR = (int(c) for c in GoAwayCode)
_HEADER = struct.Struct(">BBHII")
HEADER_SIZE = 12
_MAX_FRAME_DATA = 64 * 1024  # what one DATA frame we send carries at most


def header(typ: int, flags: int, stream: int, length: int) -> bytes:
    return _HEADER.pack(0, typ, flags, stream, length)


class Greeting(Enum):
    """The flag a stream's first frame from us carries."""

    NONE = 0  # sent already (or none owed)
    SYN = 1  # we opened the stream
    ACK = 2  # the peer opened it: we accept it


@dataclass(slots=True)
class _YamuxStream:
    receive_window: int = INITIAL_WINDOW
    consumed: int = 0  # bytes consumed since our last WINDOW_UPDATE
    send_window: int = INITIAL_WINDOW
    pending: list[memoryview] = field(default_factory=list)  # waiting for send window
    pending_bytes: int = 0
    sent: int = 0  # DATA bytes sent (what the peer's window let through)
    greeting: Greeting = Greeting.NONE  # the flag our next frame on it owes
    send: SendSide = SendSide.OPEN
    receive: ReceiveSide = ReceiveSide.OPEN


class YamuxSession:
    """One yamux session; ``client=True`` for the dialler (odd stream ids)."""

    def __init__(self, *, client: bool = False, max_streams: int = 1024) -> None:
        self._streams: dict[int, _YamuxStream] = {}
        self._out: list[bytes] = []
        self._unacked: list[int] = []
        #: streams we reset: the receive window each had left (DATA in flight may follow)
        self._reset_windows: dict[int, int] = {}
        #: DATA a peer may send to streams it had closed, in all (none is legitimate)
        self._stray_budget = INITIAL_WINDOW
        self._buffer = b""
        self._next_id = 1 if client else 2
        self._client = client
        self.max_streams = max_streams
        self.closed = False
        #: bytes waiting for the peer's window, over all streams
        self.queued = 0
        #: DATA bytes sent, over all streams (grows when the peer makes room)
        self.sent = 0

    # -- what the peer sent -----------------------------------------------------------

    def feed(self, data: bytes) -> list[MuxEvent]:
        if self.closed:
            return []
        buffer = self._buffer + data if self._buffer else data
        events: list[MuxEvent] = []
        pos = 0
        size = len(buffer)
        unpack = _HEADER.unpack_from
        while size - pos >= HEADER_SIZE:
            version, typ, flags, stream_id, length = unpack(buffer, pos)
            if version != 0 or typ > GO_AWAY:
                raise self._failed(YamuxProtocolError, f"version {version} type {typ}")
            if typ == DATA:
                end = pos + HEADER_SIZE + length
                if end > size:  # refuse a body past the window before buffering it
                    self._check_window(stream_id, flags, length, events)
                    break
                body = buffer[pos + HEADER_SIZE : end]
                pos = end
            else:
                body = b""
                pos += HEADER_SIZE
            self._frame(typ, flags, stream_id, length, body, events)
        self._buffer = buffer[pos:] if pos < size else b""
        return events

    @property
    def buffered(self) -> int:
        return len(self._buffer)

    def _frame(
        self, typ: int, flags: int, stream_id: int, length: int, body: bytes,
        events: list[MuxEvent],
    ) -> None:  # fmt: skip
        if typ == PING:
            if flags & SYN:
                self._out.append(header(PING, ACK, 0, length))
            return
        if typ == GO_AWAY:
            self.closed = True
            raise MuxError("yamux", PeerWentAway, f"GO_AWAY {length}")
        stream = self._streams.get(stream_id)
        if flags & SYN:
            if stream is not None or stream_id == 0 or (stream_id & 1) == self._next_id & 1:
                raise self._failed(YamuxProtocolError, f"SYN for stream {stream_id}")
            if len(self._streams) >= self.max_streams:  # refused, as go-yamux does
                self._out.append(header(WINDOW_UPDATE, RST, stream_id, 0))
                return
            stream = self._streams[stream_id] = _YamuxStream(greeting=Greeting.ACK)
            self._unacked.append(stream_id)
            events.append(StreamOpened(stream_id))
        elif stream is None:  # forgotten (reset, or both sides closed): its data is dropped
            if typ == DATA and length:  # ... up to the window it had (or a little, after FIN)
                self._check_window(stream_id, flags, length, events)
                if stream_id in self._reset_windows:
                    self._reset_windows[stream_id] -= length
                else:
                    self._stray_budget -= length
            if flags & (RST | FIN):
                self._reset_windows.pop(stream_id, None)
            return
        if typ == WINDOW_UPDATE:
            if length:
                stream.send_window += length
                self._flush(stream_id, stream)
        else:
            self._check_window(stream_id, flags, length, events)
            stream.receive_window -= length
            if body:
                events.append(StreamData(stream_id, body))
        if flags & RST:
            self._drop(stream_id)
            events.append(StreamReset(stream_id))
            return
        if flags & FIN and stream.receive is ReceiveSide.OPEN:
            stream.receive = ReceiveSide.CLOSED
            events.append(StreamEnded(stream_id))
            self._forget_if_done(stream_id, stream)

    def _check_window(
        self, stream_id: int, flags: int, length: int, events: list[MuxEvent]
    ) -> None:
        stream = self._streams.get(stream_id)
        if stream is not None:
            window = stream.receive_window
        elif flags & SYN:
            window = INITIAL_WINDOW
        else:
            window = self._reset_windows.get(stream_id, self._stray_budget)
        if length <= window:
            return
        self._out.append(header(WINDOW_UPDATE, RST, stream_id, 0))
        raise self._failed(
            YamuxProtocolError,
            f"stream {stream_id}: {length} bytes past the receive window ({window} left)",
        )

    # -- what we send -----------------------------------------------------------------

    def open_stream(self) -> int:
        stream_id = self._next_id
        self._next_id += 2
        self._streams[stream_id] = _YamuxStream(greeting=Greeting.SYN)
        return stream_id

    def consumed(self, stream_id: int, size: int) -> None:
        """``size`` bytes of the stream were used: credit them back, in steps of half a
        window (as go-yamux does)."""
        stream = self._streams.get(stream_id)
        if stream is None or stream.receive is ReceiveSide.CLOSED:
            return
        stream.consumed += size
        if stream.consumed >= INITIAL_WINDOW // 2:
            self._out.append(header(WINDOW_UPDATE, self._flags(stream), stream_id, stream.consumed))
            stream.receive_window += stream.consumed
            stream.consumed = 0

    def send_room(self, stream_id: int) -> int | None:
        """What a write to the stream may hold without waiting for the peer's window (0 for
        a stream that is gone or closed on our side)."""
        stream = self._streams.get(stream_id)
        if stream is None or stream.send is not SendSide.OPEN or stream.pending:
            return 0
        return stream.send_window

    def stream_queued(self, stream_id: int) -> int:
        stream = self._streams.get(stream_id)
        return stream.pending_bytes if stream is not None else 0

    def waiting(self) -> list[tuple[int, int]]:
        """(stream, DATA bytes it sent so far) of each stream with bytes waiting for the
        peer's window."""
        return [(sid, s.sent) for sid, s in self._streams.items() if s.pending_bytes]

    def write(self, stream_id: int, data: bytes) -> None:
        stream = self._streams.get(stream_id)
        if stream is None or stream.send is not SendSide.OPEN:
            return
        if stream.pending or len(data) > stream.send_window:
            stream.pending.append(memoryview(data))
            stream.pending_bytes += len(data)
            self.queued += len(data)
            self._flush(stream_id, stream)
            return
        stream.send_window -= len(data)
        stream.sent += len(data)
        self.sent += len(data)
        if len(data) <= _MAX_FRAME_DATA:
            self._out.append(header(DATA, self._flags(stream), stream_id, len(data)))
            self._out.append(data)
        else:
            self._data_frames(stream_id, stream, data, 0)

    def close_stream(self, stream_id: int) -> None:
        """Our side is done (FIN, after what waits for the window)."""
        stream = self._streams.get(stream_id)
        if stream is None or stream.send is not SendSide.OPEN:
            return
        if stream.pending:
            stream.send = SendSide.CLOSING
            return
        self._send_fin(stream_id, stream)

    def reset_stream(self, stream_id: int) -> None:
        stream = self._drop(stream_id)
        if stream is not None:
            self._out.append(header(WINDOW_UPDATE, RST | self._flags(stream), stream_id, 0))
            # what the peer sent before it saw the RST may still come: up to the window
            self._reset_windows[stream_id] = stream.receive_window
            if len(self._reset_windows) > 1024:
                del self._reset_windows[next(iter(self._reset_windows))]

    def go_away(self, code: int = GO_AWAY_NORMAL) -> None:
        self._go_away(code)

    def data_to_send(self) -> bytes:
        if self._unacked:
            for stream_id in self._unacked:  # accepted streams we had nothing to say on yet
                stream = self._streams.get(stream_id)
                if stream is not None and stream.greeting is Greeting.ACK:
                    stream.greeting = Greeting.NONE
                    self._out.append(header(WINDOW_UPDATE, ACK, stream_id, 0))
            self._unacked.clear()
        return drain(self._out)

    @property
    def stream_count(self) -> int:
        return len(self._streams)

    def _flags(self, stream: _YamuxStream) -> int:
        greeting = stream.greeting
        if greeting is Greeting.NONE:
            return 0
        stream.greeting = Greeting.NONE
        return ACK if greeting is Greeting.ACK else SYN

    def _drop(self, stream_id: int) -> _YamuxStream | None:
        stream = self._streams.pop(stream_id, None)
        if stream is not None and stream.pending_bytes:
            self.queued -= stream.pending_bytes
            stream.pending.clear()
            stream.pending_bytes = 0
        return stream

    def _data_frames(
        self, stream_id: int, stream: _YamuxStream, data: bytes | memoryview, flags: int
    ) -> None:
        view = memoryview(data)
        for at in range(0, len(data), _MAX_FRAME_DATA):
            chunk = bytes(view[at : at + _MAX_FRAME_DATA])
            self._out.append(header(DATA, flags | self._flags(stream), stream_id, len(chunk)))
            self._out.append(chunk)
            flags = 0

    def _flush(self, stream_id: int, stream: _YamuxStream) -> None:
        while stream.pending and stream.send_window > 0:
            data = stream.pending[0]
            take = min(len(data), stream.send_window)
            if take < len(data):  # views: the rest of a large answer is not copied
                stream.pending[0] = data[take:]
                data = data[:take]
            else:
                stream.pending.pop(0)
            stream.send_window -= take
            stream.pending_bytes -= take
            stream.sent += take
            self.queued -= take
            self.sent += take
            self._data_frames(stream_id, stream, data, 0)
        if not stream.pending and stream.send is SendSide.CLOSING:
            self._send_fin(stream_id, stream)

    def _send_fin(self, stream_id: int, stream: _YamuxStream) -> None:
        stream.send = SendSide.CLOSED
        self._out.append(header(WINDOW_UPDATE, FIN | self._flags(stream), stream_id, 0))
        self._forget_if_done(stream_id, stream)

    def _forget_if_done(self, stream_id: int, stream: _YamuxStream) -> None:
        if stream.send is SendSide.CLOSED and stream.receive is ReceiveSide.CLOSED:
            self._streams.pop(stream_id, None)

    def _failed(self, failure: type[Libp2pConnectionFailed], reason: str) -> MuxError:
        """The session ends with ``failure``: its GO_AWAY code queued, the error to raise."""
        if failure.go_away is not None:
            self._go_away(failure.go_away)
        return MuxError("yamux", failure, reason)

    def _go_away(self, code: int) -> None:
        if not self.closed:
            self.closed = True
            self._out.append(header(GO_AWAY, 0, 0, code))
            # the session is over: what waited for a window will not be sent
            for stream in self._streams.values():
                stream.pending.clear()
                stream.pending_bytes = 0
            self.queued = 0
