"""mplex (``/mplex/6.7.0``, libp2p specs ``mplex/README.md``), one session, sans-IO.

A message is a varint header ``stream id << 3 | flag``, a varint length and the data. Flags:
NewStream 0, MessageReceiver 1, MessageInitiator 2, CloseReceiver 3, CloseInitiator 4,
ResetReceiver 5, ResetInitiator 6. The opener of a stream writes the *Initiator* flags, the
other side the *Receiver* ones, so the two sides' stream ids do not collide: a stream is
known here by ``id << 1`` when the peer opened it and ``id << 1 | 1`` when we did. Close is
a half-close. There is no flow control; a message is at most 1 MiB (the spec's limit, and
@waku/sdk's ``maxMsgSize``); a stream opened while ``max_streams`` are open is reset at
once.

Without windows, what a peer does not read would wait in the socket's buffer, out of our
hands. A session made with ``paced=True`` (the listener's) keeps it instead: it sends no
more than the room it is given (:meth:`MplexSession.allow`, what the socket takes now),
the streams in turn, and the rest waits per stream, counted as yamux's wait for a window
(:attr:`~MplexSession.queued`, :meth:`~MplexSession.waiting`): the connection bounds it
and resets a stream whose bytes make no progress for ``write_timeout``
(:mod:`~waku_legacy.p2p.codec.connection`). Unpaced (the dialler's), every write is sent at
once."""

from __future__ import annotations

from dataclasses import dataclass, field

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
from waku_legacy.p2p.errors import MplexProtocolError
from waku_legacy.proto.wire import encode_varint

__all__ = ["MAX_MESSAGE_BYTES", "MPLEX_PROTOCOL_ID", "MplexSession"]

MPLEX_PROTOCOL_ID = "/mplex/6.7.0"
MAX_MESSAGE_BYTES = 1024 * 1024
NEW_STREAM, MESSAGE_RECEIVER, MESSAGE_INITIATOR = 0, 1, 2
CLOSE_RECEIVER, CLOSE_INITIATOR, RESET_RECEIVER, RESET_INITIATOR = 3, 4, 5, 6


def _varint(buffer: bytes, pos: int) -> tuple[int, int]:
    """(value, next position), or (-1, pos) when the varint is not all there."""
    value = shift = 0
    size = len(buffer)
    while pos < size:
        byte = buffer[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, pos
        shift += 7
        if shift > 63:
            raise MuxError("mplex", MplexProtocolError, "a varint over 9 bytes")
    return -1, pos


#: what one stream sends at most per turn when several wait for the socket's room
_TURN_BYTES = 64 * 1024


@dataclass(slots=True)
class _MplexStream:
    send: SendSide = SendSide.OPEN
    receive: ReceiveSide = ReceiveSide.OPEN
    pending: list[memoryview] = field(default_factory=list)  # waiting for the socket's room
    pending_bytes: int = 0
    sent: int = 0  # bytes of messages sent (grows as the socket takes them)


class MplexSession:
    def __init__(self, *, max_streams: int = 1024, paced: bool = False) -> None:
        self._streams: dict[int, _MplexStream] = {}
        self._out: list[bytes] = []
        self._buffer = b""
        self._next_id = 0
        self.max_streams = max_streams
        self.closed = False
        #: paced: what may still be sent before the next :meth:`allow` (None: unpaced)
        self.room: int | None = 0 if paced else None
        #: bytes waiting for the socket's room, over all streams (as YamuxSession's)
        self.queued = 0
        #: message bytes sent, over all streams
        self.sent = 0

    def feed(self, data: bytes) -> list[MuxEvent]:
        if self.closed:
            return []
        buffer = self._buffer + data if self._buffer else data
        events: list[MuxEvent] = []
        pos = 0
        size = len(buffer)
        while pos < size:
            head, at = _varint(buffer, pos)
            if head < 0:
                break
            length, at = _varint(buffer, at)
            if length < 0:
                break
            if length > MAX_MESSAGE_BYTES:
                self.closed = True
                raise MuxError("mplex", MplexProtocolError, f"a message of {length} bytes")
            end = at + length
            if end > size:
                break
            self._message(head >> 3, head & 7, buffer[at:end], events)
            pos = end
        self._buffer = buffer[pos:] if pos < size else b""
        return events

    @property
    def buffered(self) -> int:
        return len(self._buffer)

    def _message(self, number: int, flag: int, body: bytes, events: list[MuxEvent]) -> None:
        # the peer's Initiator flags name streams it opened; its Receiver flags ours
        key = number << 1 if flag in (NEW_STREAM, 2, 4, 6) else number << 1 | 1
        if flag == NEW_STREAM:
            if key in self._streams:
                self.closed = True
                raise MuxError("mplex", MplexProtocolError, f"stream {number} opened twice")
            if len(self._streams) >= self.max_streams:  # refused: reset at once
                self._out += [self._head(key, RESET_INITIATOR), b"\0"]
                return
            self._streams[key] = _MplexStream()
            events.append(StreamOpened(key))
            return
        if flag > RESET_INITIATOR:
            self.closed = True
            raise MuxError("mplex", MplexProtocolError, f"flag {flag}")
        state = self._streams.get(key)
        if state is None:
            return  # a stream already forgotten: ignore (as the spec's implementations do)
        if flag in (MESSAGE_RECEIVER, MESSAGE_INITIATOR):
            if body and state.receive is ReceiveSide.OPEN:
                events.append(StreamData(key, body))
        elif flag in (CLOSE_RECEIVER, CLOSE_INITIATOR):
            if state.receive is ReceiveSide.OPEN:
                state.receive = ReceiveSide.CLOSED
                events.append(StreamEnded(key))
                if state.send is SendSide.CLOSED:
                    del self._streams[key]
        else:
            self._drop(key)
            events.append(StreamReset(key))

    def _head(self, key: int, initiator_flag: int) -> bytes:
        # our writes on the peer's streams carry the Receiver flag (one less)
        flag = initiator_flag if key & 1 else initiator_flag - 1
        return encode_varint((key >> 1) << 3 | flag)

    def open_stream(self) -> int:
        number = self._next_id
        self._next_id += 1
        key = number << 1 | 1
        self._streams[key] = _MplexStream()
        name = str(number).encode()
        self._out += [encode_varint(number << 3 | NEW_STREAM), encode_varint(len(name)), name]
        return key

    def consumed(self, stream_id: int, size: int) -> None:
        """No flow control in mplex."""

    def send_room(self, key: int) -> int | None:
        """None: no window (a write is sent, or waits for the socket's room); 0 while the
        stream's earlier bytes still wait, or it is gone or closed on our side."""
        state = self._streams.get(key)
        if state is None or state.send is not SendSide.OPEN or state.pending:
            return 0
        return None

    def stream_queued(self, key: int) -> int:
        state = self._streams.get(key)
        return state.pending_bytes if state is not None else 0

    def waiting(self) -> list[tuple[int, int]]:
        """(stream, bytes it sent so far) of each stream with bytes waiting."""
        return [(key, s.sent) for key, s in self._streams.items() if s.pending_bytes]

    def allow(self, room: int) -> None:
        """The socket takes ``room`` bytes now (paced): what waits leaves up to it, the
        streams in turn, ``_TURN_BYTES`` each."""
        if self.room is None:
            return
        self.room = room
        while self.queued and self.room > 0:
            for key, state in list(self._streams.items()):
                if state.pending and self.room > 0:
                    self._send_pending(key, state, min(self.room, _TURN_BYTES))

    def _send_pending(self, key: int, state: _MplexStream, budget: int) -> None:
        while state.pending and budget > 0:
            data = state.pending[0]
            take = min(len(data), budget)
            if take < len(data):
                state.pending[0] = data[take:]
                data = data[:take]
            else:
                state.pending.pop(0)
            state.pending_bytes -= take
            self.queued -= take
            budget -= take
            self._send_message(key, state, bytes(data))
        if not state.pending and state.send is SendSide.CLOSING:
            self._send_close(key, state)

    def write(self, key: int, data: bytes) -> None:
        state = self._streams.get(key)
        if state is None or state.send is not SendSide.OPEN:
            return
        room = self.room
        if room is not None and (state.pending or len(data) > room):
            now = 0 if state.pending else room
            if now:
                self._send_message(key, state, data[:now])
            rest = memoryview(data)[now:]
            state.pending.append(rest)
            state.pending_bytes += len(rest)
            self.queued += len(rest)
            return
        self._send_message(key, state, data)

    def _send_message(self, key: int, state: _MplexStream, data: bytes) -> None:
        head = self._head(key, MESSAGE_INITIATOR)
        for at in range(0, len(data), MAX_MESSAGE_BYTES):
            chunk = data[at : at + MAX_MESSAGE_BYTES]
            self._out += [head, encode_varint(len(chunk)), chunk]
        state.sent += len(data)
        self.sent += len(data)
        if self.room is not None:
            self.room = max(0, self.room - len(data))

    def close_stream(self, key: int) -> None:
        """Our side is done (Close, after what waits for the socket's room)."""
        state = self._streams.get(key)
        if state is None or state.send is not SendSide.OPEN:
            return
        if state.pending:
            state.send = SendSide.CLOSING
            return
        self._send_close(key, state)

    def _send_close(self, key: int, state: _MplexStream) -> None:
        state.send = SendSide.CLOSED
        self._out += [self._head(key, CLOSE_INITIATOR), b"\0"]
        if state.receive is ReceiveSide.CLOSED:
            del self._streams[key]

    def reset_stream(self, key: int) -> None:
        if self._drop(key) is not None:
            self._out += [self._head(key, RESET_INITIATOR), b"\0"]

    def _drop(self, key: int) -> _MplexStream | None:
        state = self._streams.pop(key, None)
        if state is not None and state.pending_bytes:
            self.queued -= state.pending_bytes
            state.pending.clear()
            state.pending_bytes = 0
        return state

    def go_away(self, code: int = 0) -> None:
        """mplex has no GO_AWAY: the connection just closes (and nothing waits more)."""
        self.closed = True
        for state in self._streams.values():
            state.pending.clear()
            state.pending_bytes = 0
        self.queued = 0

    def data_to_send(self) -> bytes:
        if self.room is not None:
            self.room = 0  # the room given was for this send: the next one says anew
        return drain(self._out)

    @property
    def stream_count(self) -> int:
        return len(self._streams)
