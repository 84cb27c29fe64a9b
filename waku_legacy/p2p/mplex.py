"""mplex (``/mplex/6.7.0``, libp2p specs ``mplex/README.md``), one session, sans-IO.

A message is a varint header ``stream id << 3 | flag``, a varint length and the data. Flags:
NewStream 0, MessageReceiver 1, MessageInitiator 2, CloseReceiver 3, CloseInitiator 4,
ResetReceiver 5, ResetInitiator 6. The opener of a stream writes the *Initiator* flags, the
other side the *Receiver* ones, so the two sides' stream ids do not collide: a stream is
known here by ``id << 1`` when the peer opened it and ``id << 1 | 1`` when we did. Close is
a half-close. There is no flow control; a message is at most 1 MiB (the spec's limit, and
@waku/sdk's ``maxMsgSize``); a stream opened while ``max_streams`` are open is reset at
once."""

from __future__ import annotations

from waku_legacy.p2p.muxer_events import (
    MuxError,
    MuxEvent,
    StreamData,
    StreamEnded,
    StreamOpened,
    StreamReset,
    drain,
)
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
            raise MuxError("mplex", "mux_error", "a varint over 9 bytes")
    return -1, pos


class MplexSession:
    def __init__(self, *, max_streams: int = 1024) -> None:
        #: stream key -> [local side closed, remote side closed]
        self._streams: dict[int, list[bool]] = {}
        self._out: list[bytes] = []
        self._buffer = b""
        self._next_id = 0
        self.max_streams = max_streams
        self.closed = False
        #: nothing waits here: without flow control every write goes to the socket, whose
        #: buffer the connection counts instead (the same names as YamuxSession's)
        self.queued = 0
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
                raise MuxError("mplex", "mux_error", f"a message of {length} bytes")
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
                raise MuxError("mplex", "mux_error", f"stream {number} opened twice")
            if len(self._streams) >= self.max_streams:  # refused: reset at once
                self._out += [self._head(key, RESET_INITIATOR), b"\0"]
                return
            self._streams[key] = [False, False]
            events.append(StreamOpened(key))
            return
        if flag > RESET_INITIATOR:
            self.closed = True
            raise MuxError("mplex", "mux_error", f"flag {flag}")
        state = self._streams.get(key)
        if state is None:
            return  # a stream already forgotten: ignore (as the spec's implementations do)
        if flag in (MESSAGE_RECEIVER, MESSAGE_INITIATOR):
            if body and not state[1]:
                events.append(StreamData(key, body))
        elif flag in (CLOSE_RECEIVER, CLOSE_INITIATOR):
            if not state[1]:
                state[1] = True
                events.append(StreamEnded(key))
                if state[0]:
                    del self._streams[key]
        else:
            del self._streams[key]
            events.append(StreamReset(key))

    def _head(self, key: int, initiator_flag: int) -> bytes:
        # our writes on the peer's streams carry the Receiver flag (one less)
        flag = initiator_flag if key & 1 else initiator_flag - 1
        return encode_varint((key >> 1) << 3 | flag)

    def open_stream(self) -> int:
        number = self._next_id
        self._next_id += 1
        key = number << 1 | 1
        self._streams[key] = [False, False]
        name = str(number).encode()
        self._out += [encode_varint(number << 3 | NEW_STREAM), encode_varint(len(name)), name]
        return key

    def consumed(self, stream_id: int, size: int) -> None:
        """No flow control in mplex."""

    def send_room(self, key: int) -> int | None:
        """None: no window (what is written waits in the socket's buffer, if anywhere)."""
        return None

    def stream_queued(self, key: int) -> int:
        return 0

    def waiting(self) -> list[tuple[int, int]]:
        return []

    def write(self, key: int, data: bytes) -> None:
        state = self._streams.get(key)
        if state is None or state[0]:
            return
        head = self._head(key, MESSAGE_INITIATOR)
        for at in range(0, len(data), MAX_MESSAGE_BYTES):
            chunk = data[at : at + MAX_MESSAGE_BYTES]
            self._out += [head, encode_varint(len(chunk)), chunk]

    def close_stream(self, key: int) -> None:
        state = self._streams.get(key)
        if state is None or state[0]:
            return
        state[0] = True
        self._out += [self._head(key, CLOSE_INITIATOR), b"\0"]
        if state[1]:
            del self._streams[key]

    def reset_stream(self, key: int) -> None:
        if self._streams.pop(key, None) is not None:
            self._out += [self._head(key, RESET_INITIATOR), b"\0"]

    def go_away(self, code: int = 0) -> None:
        self.closed = True  # mplex has no GO_AWAY: the connection just closes

    def data_to_send(self) -> bytes:
        return drain(self._out)

    @property
    def stream_count(self) -> int:
        return len(self._streams)
