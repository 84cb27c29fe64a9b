"""One inbound libp2p connection, the listener's side, sans-IO: multistream-select to
``/noise``, the Noise XX handshake, multistream-select to a muxer (yamux or mplex) inside
the Noise channel, then per stream multistream-select to a protocol and that protocol.

:meth:`ListenerConnection.receive` takes the bytes the socket delivered (``now``: a
monotonic clock) and returns events; :meth:`~ListenerConnection.data_to_send` gives
everything to write, encrypted in as few Noise messages as fit (one, for a store answer).
A request-response stream reads one length-prefixed request (at most the protocol's
``max_request``) and is answered with :meth:`~ListenerConnection.respond` (the answer
and FIN) or :meth:`~ListenerConnection.reset`. Identify is answered here (one message,
then FIN); ping echoes.

Raises a :class:`~waku_legacy.p2p.errors.Libp2pConnectionFailed` subclass (with the
listener's counter name and the GO_AWAY code it sent) when the connection must close; its
last words (yamux GO_AWAY) are in ``data_to_send()`` by then. A stream's own failure (a
request too large, a bad multistream message, a stream ended before its request, over
``max_streams`` requests at once) resets that stream and is reported as
:class:`StreamFailed`. Bounds: what each stream holds unread is capped by its protocol
(multistream lines, ``max_request``); the sum over the connection by ``max_buffered``
(yamux: GO_AWAY internal error); yamux DATA past a window ends the session.

What we send is bounded too. An answer is already in memory when it is written, so an answer
on a connection with nothing waiting is queued whole (a store page is its own bound); while
anything waits (for the peer's yamux window, or in the socket's buffer: ``unsent``), an
answer that would make the bytes waiting exceed ``max_unsent`` resets its stream instead
(:meth:`ListenerConnection.respond` says False); if what waits is still over the budget once
that stream is reset, the connection ends with GO_AWAY (``send_budget_closed``: the peer asks
for more while not taking what it has). A stream whose bytes wait for a window the
peer keeps shut for ``write_timeout`` is reset (:meth:`ListenerConnection.stalled_sends`).
Ping echoes only what the peer's window takes (the stream is reset when more comes; mplex:
while the connection's waiting bytes are within the budget). A paced mplex session (the
native server's) keeps what the socket has no room for per stream, as yamux keeps what
waits for a window: the same budget and the same ``write_timeout`` per stream hold.
Progress for the idle timeout is what the peer took (DATA it made room for, answers within
its window), streams opened and ended; not answers queued for a peer that takes nothing."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from enum import Enum

from waku_legacy.config.keys import default_of
from waku_legacy.errors import DecodeError, LimitExceeded
from waku_legacy.p2p.codec.identify import IDENTIFY_CODEC, PING_CODEC
from waku_legacy.p2p.codec.mplex import MPLEX_PROTOCOL_ID, MplexSession
from waku_legacy.p2p.codec.multistream import MultistreamListener
from waku_legacy.p2p.codec.muxer_events import (
    MuxError,
    StreamData,
    StreamEnded,
    StreamOpened,
    StreamReset,
)
from waku_legacy.p2p.codec.noise import (
    NOISE_PROTOCOL_ID,
    NoiseHandshake,
    NoiseIdentity,
    NoiseReader,
)
from waku_legacy.p2p.codec.peer_key import PeerKey, UnsupportedKey
from waku_legacy.p2p.codec.yamux import YAMUX_PROTOCOL_ID, YamuxSession
from waku_legacy.p2p.errors import (
    CodecRefused,
    GoAwayCode,
    Libp2pConnectionFailed,
    MplexUnreadOverflow,
    P2PStreamError,
    SendBudgetClosed,
    UnsupportedPeerKey,
    YamuxUnreadOverflow,
)
from waku_legacy.p2p.limits import MAX_BUFFERED_BYTES, HostLimits, ListenerLimits
from waku_legacy.store.protocol.framing import FrameReader, FrameTooLarge, encode_frame

__all__ = [
    "Libp2pConnectionFailed",
    "ListenerConnection",
    "Muxed",
    "Request",
    "Secured",
    "StreamFailed",
]

MUXER_IDS = {"yamux": YAMUX_PROTOCOL_ID, "mplex": MPLEX_PROTOCOL_ID}


class Phase(Enum):
    SECURITY = 1  # multistream-select to /noise
    NOISE = 2
    MUXER = 3  # multistream-select to a muxer, inside Noise
    OPEN = 4


@dataclass(frozen=True, slots=True)
class Secured:
    """The Noise handshake is done: the peer's identity key, checked."""

    peer: PeerKey


@dataclass(frozen=True, slots=True)
class Muxed:
    """The muxer is agreed: the connection's handshake is over."""

    muxer: str


@dataclass(frozen=True, slots=True)
class Request:
    stream: int
    protocol: str
    body: bytes


@dataclass(frozen=True, slots=True)
class StreamFailed:
    stream: int
    protocol: str
    kind: str  # request_too_large, stream_refused, stream_error, send_budget_exceeded
    error: Exception


ConnectionEvent = Secured | Muxed | Request | StreamFailed


class StreamPhase(Enum):
    """Where a stream the peer opened is."""

    NEGOTIATING = 1  # multistream-select to a protocol (``negotiator``), until ``deadline``
    READING = 2  # a request-response protocol: its request is read (``reader``), in flight
    ANSWERING = 3  # its request was read (a Request event): the answer is awaited, in flight
    ECHOING = 4  # ping: what comes is echoed within the peer's window


@dataclass(slots=True)
class _ServedStream:
    negotiator: MultistreamListener | None  # while NEGOTIATING
    deadline: float  # NEGOTIATING: the protocol's; READING: the request's
    phase: StreamPhase = StreamPhase.NEGOTIATING
    protocol: str = ""
    reader: FrameReader | None = None  # while READING
    held: int = 0  # bytes the negotiator or reader hold

    @property
    def in_flight(self) -> bool:
        """A request read or being read, its answer not yet written (``max_streams``)."""
        return self.phase is StreamPhase.READING or self.phase is StreamPhase.ANSWERING


@dataclass(frozen=True)
class Libp2pConnectionLimits:
    #: largest request body per request-response protocol
    requests: Mapping[str, int] = field(default_factory=dict)
    #: requests in flight at once
    max_streams: int = default_of(ListenerLimits, "max_streams_per_connection")
    max_open_streams: int = 1024  # streams the muxer keeps at once (more: reset)
    max_buffered: int = MAX_BUFFERED_BYTES
    #: bytes waiting to leave (for the peer's window, in the socket's buffer) past which a
    #: further answer resets its stream
    max_unsent: int = MAX_BUFFERED_BYTES
    negotiation_timeout: float = default_of(HostLimits, "negotiation_timeout")
    read_timeout: float = default_of(ListenerLimits, "read_timeout")
    #: a stream whose bytes wait this long for a window the peer keeps shut is reset
    write_timeout: float = default_of(ListenerLimits, "write_timeout")


class ListenerConnection:
    def __init__(
        self,
        identity: NoiseIdentity,
        limits: Libp2pConnectionLimits,
        identify: Callable[[], bytes],
        muxers: tuple[str, ...] = ("yamux", "mplex"),
        *,
        paced: bool = False,
    ) -> None:
        """``paced``: mplex sends only what :meth:`socket_room` says the socket takes and
        keeps the rest (see :mod:`~waku_legacy.p2p.codec.mplex`); without it, everything at once."""
        self.limits = limits
        self._paced = paced
        self._identity = identity
        self._identify = identify
        self._muxer_ids = {MUXER_IDS[m]: m for m in muxers}
        self.phase = Phase.SECURITY
        self._negotiator = MultistreamListener(lambda p: p == NOISE_PROTOCOL_ID, max_proposals=4)
        self._noise: NoiseHandshake | None = None
        self._reader: NoiseReader | None = None
        self._mux: YamuxSession | MplexSession | None = None
        self._streams: dict[int, _ServedStream] = {}
        self._raw_out: list[bytes] = []
        self._plain_out: list[bytes] = []
        self._held = 0
        self._in_flight = 0
        self.peer: PeerKey | None = None
        self.muxer: str | None = None
        self.last_active = 0.0
        #: stream -> (DATA bytes it had sent, since when) while bytes of it wait
        self._send_marks: dict[int, tuple[int, float]] = {}

    # -- in -------------------------------------------------------------------------------

    def receive(self, data: bytes, now: float) -> list[ConnectionEvent]:
        events: list[ConnectionEvent] = []
        try:
            if self.phase is Phase.OPEN:
                assert self._reader is not None
                self._muxed(self._reader.feed(data), now, events)
            elif self._reader is not None:  # the muxer's negotiation, inside Noise
                self._handshake(self._reader.feed(data), now, events)
            else:
                self._handshake(data, now, events)
        except MuxError as exc:
            raise exc.failure(exc) from None
        except UnsupportedKey as exc:  # the Noise identity: parsed, not one we accept
            raise UnsupportedPeerKey(exc) from None
        except DecodeError as exc:  # multistream, noise, frame prefixes, keys
            raise CodecRefused(exc) from None
        return events

    def _handshake(self, data: bytes, now: float, events: list[ConnectionEvent]) -> None:
        if self.phase is Phase.SECURITY:
            answer, agreed = self._negotiator.feed(data)
            self._raw_out.append(answer)
            if agreed is None:
                return
            self.phase = Phase.NOISE
            self._noise = NoiseHandshake(self._identity, initiator=False)
            data = agreed.rest
        if self.phase is Phase.NOISE:
            noise = self._noise
            assert noise is not None
            self._raw_out.append(noise.feed(data))
            if not noise.done:
                return
            assert noise.receive_cipher is not None and noise.remote is not None
            self.peer = noise.remote
            events.append(Secured(noise.remote))
            self._reader = NoiseReader(noise.receive_cipher)
            self.phase = Phase.MUXER
            self._negotiator = MultistreamListener(self._muxer_ids.__contains__, max_proposals=4)
            data = self._reader.feed(noise.rest)
        if self.phase is Phase.MUXER:
            if not data:
                return
            answer, agreed = self._negotiator.feed(data)
            self._plain_out.append(answer)
            if agreed is None:
                return
            self.muxer = self._muxer_ids[agreed.protocol]
            max_open = self.limits.max_open_streams
            self._mux = (
                YamuxSession(max_streams=max_open)
                if self.muxer == "yamux"
                else MplexSession(max_streams=max_open, paced=self._paced)
            )
            self.phase = Phase.OPEN
            self.last_active = now
            events.append(Muxed(self.muxer))
            if agreed.rest:
                self._muxed(agreed.rest, now, events)
        elif self.phase is Phase.OPEN:
            self._muxed(data, now, events)

    def _muxed(self, data: bytes, now: float, events: list[ConnectionEvent]) -> None:
        if not data:
            return
        mux = self._mux
        assert mux is not None
        sent = mux.sent
        for event in mux.feed(data):
            if type(event) is StreamData:
                self._stream_data(event.stream, event.data, now, events)
            elif type(event) is StreamOpened:
                self.last_active = now
                self._streams[event.stream] = _ServedStream(
                    MultistreamListener(self._accepts), now + self.limits.negotiation_timeout
                )
            elif type(event) is StreamEnded:
                self._stream_ended(event.stream, now, events)
            elif type(event) is StreamReset:
                self.last_active = now
                self._forget(event.stream)
        if mux.sent != sent:  # the peer made room and took what waited: progress
            self.last_active = now
        if self._held > self.limits.max_buffered:
            failure = YamuxUnreadOverflow if self.muxer == "yamux" else MplexUnreadOverflow
            mux.go_away(failure.go_away or GoAwayCode.NORMAL)  # mplex: closed, no code
            raise MuxError(
                self.muxer or "muxer",
                failure,
                f"{self._held} bytes received and not read, over {self.limits.max_buffered}",
            )

    def _accepts(self, protocol: str) -> bool:
        return protocol in self.limits.requests or protocol in (IDENTIFY_CODEC, PING_CODEC)

    def _stream_data(
        self, sid: int, data: bytes, now: float, events: list[ConnectionEvent]
    ) -> None:
        stream = self._streams.get(sid)
        if stream is None:
            return
        mux = self._mux
        assert mux is not None
        held = stream.held
        if stream.phase is StreamPhase.NEGOTIATING:
            negotiator = stream.negotiator
            assert negotiator is not None
            try:
                answer, agreed = negotiator.feed(data)
            except DecodeError as exc:
                self._fail(sid, "", "stream_error", exc, events)
                return
            mux.consumed(sid, len(data))
            if answer:
                mux.write(sid, answer)
            if agreed is None:
                self._held += negotiator.buffered - held
                stream.held = negotiator.buffered
                return
            self._held -= held
            stream.held = held = 0
            stream.negotiator = None
            if not self._agreed(sid, stream, agreed.protocol, now, events):
                return
            data = agreed.rest
            if not data:
                return
        else:
            mux.consumed(sid, len(data))
        if stream.phase is StreamPhase.READING:
            reader = stream.reader
            assert reader is not None
            try:
                frames = reader.feed(data)
            except FrameTooLarge as exc:
                self._fail(sid, stream.protocol, "request_too_large", exc, events)
                return
            except DecodeError as exc:
                self._fail(sid, stream.protocol, "stream_error", exc, events)
                return
            if not frames:
                self._held += reader.buffered - held
                stream.held = reader.buffered
                return
            self._held -= held
            stream.held = 0
            stream.reader = None
            stream.phase = StreamPhase.ANSWERING
            events.append(Request(sid, stream.protocol, frames[0]))
        elif stream.phase is StreamPhase.ECHOING:
            room = mux.send_room(sid)
            fits = len(data) <= room if room is not None else mux.queued < self.limits.max_unsent
            if fits:
                mux.write(sid, data)
            else:  # the peer does not take its echoes: no more than its window is held
                error = LimitExceeded("ping", f"an echo past the peer's window ({room} bytes)")
                self._fail(sid, PING_CODEC, "send_budget_exceeded", error, events)
        # else: bytes after the request: dropped (yamux: no credit given back for them)

    def _agreed(
        self,
        sid: int,
        stream: _ServedStream,
        protocol: str,
        now: float,
        events: list[ConnectionEvent],
    ) -> bool:
        stream.protocol = protocol
        mux = self._mux
        assert mux is not None
        if protocol == IDENTIFY_CODEC:
            mux.write(sid, encode_frame(self._identify()))
            mux.close_stream(sid)
            self._forget(sid)
            return False
        if protocol == PING_CODEC:
            stream.phase = StreamPhase.ECHOING
            return True
        if self._in_flight >= self.limits.max_streams:
            reason = f"over {self.limits.max_streams} streams"
            self._fail(sid, protocol, "stream_refused", LimitExceeded("streams", reason), events)
            return False
        self._in_flight += 1
        stream.phase = StreamPhase.READING
        stream.deadline = now + self.limits.read_timeout
        stream.reader = FrameReader(self.limits.requests[protocol])
        return True

    def _stream_ended(self, sid: int, now: float, events: list[ConnectionEvent]) -> None:
        self.last_active = now
        stream = self._streams.get(sid)
        if stream is None:
            return
        if stream.phase is StreamPhase.READING:
            error = P2PStreamError(f"{stream.protocol} request: the stream ended before a frame")
            self._fail(sid, stream.protocol, "stream_error", error, events)
        elif stream.phase is StreamPhase.NEGOTIATING or stream.phase is StreamPhase.ECHOING:
            assert self._mux is not None
            self._mux.close_stream(sid)
            self._forget(sid)

    def _fail(
        self, sid: int, protocol: str, kind: str, error: Exception, events: list[ConnectionEvent]
    ) -> None:
        self.reset(sid)
        events.append(StreamFailed(sid, protocol, kind, error))

    def _forget(self, sid: int) -> None:
        stream = self._streams.pop(sid, None)
        if stream is not None:
            self._held -= stream.held
            if stream.in_flight:
                self._in_flight -= 1

    # -- out ------------------------------------------------------------------------------

    def respond(self, sid: int, body: bytes, now: float, unsent: int = 0) -> bool:
        """The answer on ``sid``, then our side closed; False when it was over the send
        budget (see the module docstring) and the stream was reset instead (and raises
        :class:`Libp2pConnectionFailed` when the connection must end, see :meth:`refuse`).
        ``unsent``: bytes written to the socket that it has not taken yet."""
        mux = self._mux
        if sid not in self._streams or mux is None:
            return True
        message = encode_frame(body)
        room = mux.send_room(sid) or 0
        # what waits on other streams (this one's own multistream answer may wait too)
        waiting = mux.queued - mux.stream_queued(sid) + unsent
        if waiting and waiting + len(message) - room > self.limits.max_unsent:
            self.refuse(sid, unsent)
            return False
        mux.write(sid, message)
        mux.close_stream(sid)
        self._forget(sid)
        if not mux.stream_queued(sid):  # all within the peer's window: progress
            self.last_active = now
        return True

    def refuse(self, sid: int, unsent: int = 0) -> None:
        """Reset ``sid``, whose answer would take what waits to be sent past the budget.
        When what waits is still over the budget once it is reset (an answer queued whole
        that the peer does not make room for, and it asks for more), the connection ends:
        GO_AWAY internal error (mplex: closed), raising :class:`Libp2pConnectionFailed`
        (``send_budget_closed``)."""
        self.reset(sid)
        waiting = self.queued + unsent
        if waiting > self.limits.max_unsent and self._mux is not None:
            self._mux.go_away(SendBudgetClosed.go_away)
            error = LimitExceeded(
                "send budget",
                f"{waiting} bytes wait for the peer to take them, over "
                f"{self.limits.max_unsent}, and it asks for more",
            )
            raise SendBudgetClosed(error)

    def stalled_sends(self, now: float) -> list[int]:
        """Streams whose bytes waited ``write_timeout`` for a window the peer kept shut
        (reset here)."""
        mux = self._mux
        if mux is None:
            return []
        marks = self._send_marks
        waiting = mux.waiting()
        if not waiting and not marks:
            return []
        seen: dict[int, tuple[int, float]] = {}
        late = []
        for sid, sent in waiting:
            mark = marks.get(sid)
            if mark is None or mark[0] != sent:
                mark = (sent, now)
            elif now - mark[1] > self.limits.write_timeout:
                late.append(sid)
                continue
            seen[sid] = mark
        self._send_marks = seen
        for sid in late:
            self.reset(sid)
        return late

    def socket_room(self, room: int, now: float) -> None:
        """The socket takes ``room`` bytes now: a paced mplex session sends what waits up
        to it (progress for the idle timeout when some left)."""
        mux = self._mux
        if isinstance(mux, MplexSession):
            sent = mux.sent
            mux.allow(room)
            if mux.sent != sent:
                self.last_active = now

    @property
    def queued(self) -> int:
        """Bytes waiting for the peer's window (yamux) or the socket's room (paced mplex)."""
        return self._mux.queued if self._mux is not None else 0

    def reset(self, sid: int) -> None:
        if self._mux is not None:
            self._mux.reset_stream(sid)
        self._forget(sid)

    def expired(self, now: float) -> list[tuple[int, str]]:
        """Streams still negotiating or reading their request past their deadline (reset
        here): (stream, protocol)."""
        late = [
            (sid, s.protocol)
            for sid, s in self._streams.items()
            if (s.phase is StreamPhase.NEGOTIATING or s.phase is StreamPhase.READING)
            and s.deadline < now
        ]
        for sid, _ in late:
            self.reset(sid)
        return late

    @property
    def open_streams(self) -> int:
        return len(self._streams)

    def go_away(self) -> None:
        if self._mux is not None:
            self._mux.go_away()

    def data_to_send(self) -> bytes:
        raw = b"".join(self._raw_out) if self._raw_out else b""
        self._raw_out.clear()
        plain = self._plain_out
        if self._mux is not None:
            muxed = self._mux.data_to_send()
            if muxed:
                plain.append(muxed)
        if not plain:
            return raw
        noise = self._noise
        assert noise is not None and noise.send_cipher is not None
        sealed = noise.send_cipher.encrypt(b"".join(plain))
        plain.clear()
        return raw + sealed if raw else sealed
