"""One outbound libp2p connection, the dialler's side, sans-IO: a request-response client
(one stream per request, as go-waku and js-waku do) on the same codecs as the listener's
side (:mod:`~waku_legacy.p2p.codec.connection`).

Every step is optimistic, as go-libp2p's lazy multistream-select: the first write holds
the multistream proposal of ``/noise`` and Noise message 1; Noise message 3 goes with the
muxer's proposal; a request's stream opens with its protocol proposal and the request in one
write, and our side is closed at once (js-waku does the same). :meth:`~DiallerConnection.
receive` returns :class:`Answer` (a stream's length-prefixed response, or the error that
ended it) once the listener has answered and closed the stream."""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from waku_legacy.errors import DecodeError
from waku_legacy.p2p.codec.connection import MUXER_IDS
from waku_legacy.p2p.codec.mplex import MplexSession
from waku_legacy.p2p.codec.multistream import MultistreamDialler
from waku_legacy.p2p.codec.muxer_events import MuxError, StreamData, StreamEnded, StreamReset
from waku_legacy.p2p.codec.noise import (
    NOISE_PROTOCOL_ID,
    NoiseHandshake,
    NoiseIdentity,
    NoiseReader,
)
from waku_legacy.p2p.codec.peer_key import PeerKey
from waku_legacy.p2p.codec.yamux import YamuxSession
from waku_legacy.p2p.errors import P2PStreamError
from waku_legacy.store.protocol.framing import FrameReader, encode_frame

__all__ = ["Answer", "DiallerConnection"]


class _Phase(Enum):
    SECURITY = 1
    NOISE = 2
    MUXER = 3
    OPEN = 4


@dataclass(frozen=True, slots=True)
class Answer:
    stream: int
    body: bytes | None
    error: Exception | None = None


@dataclass(slots=True)
class _Pending:
    negotiator: MultistreamDialler
    reader: FrameReader
    negotiated: bool = False
    body: bytes | None = None


class DiallerConnection:
    def __init__(
        self, identity: NoiseIdentity, muxer: str = "yamux", max_response: int = 16 << 20
    ) -> None:
        self._noise = NoiseHandshake(identity, initiator=True)
        self._negotiator = MultistreamDialler(NOISE_PROTOCOL_ID)
        self._muxer_id = MUXER_IDS[muxer]
        self._mux: YamuxSession | MplexSession = (
            YamuxSession(client=True) if muxer == "yamux" else MplexSession()
        )
        self._reader: NoiseReader | None = None
        self._phase = _Phase.SECURITY
        self._raw_out = [self._negotiator.proposal() + self._noise.start()]
        self._plain_out: list[bytes] = []
        self._pending: dict[int, _Pending] = {}
        self._max_response = max_response
        self.remote: PeerKey | None = None

    @property
    def ready(self) -> bool:
        """The muxer is agreed (requests written before go out with the muxer proposal)."""
        return self._phase is _Phase.OPEN

    def request(self, protocol: str, body: bytes) -> int:
        """Open a stream for ``body``; its :class:`Answer` comes from :meth:`receive`."""
        sid = self._mux.open_stream()
        negotiator = MultistreamDialler(protocol)
        self._pending[sid] = _Pending(negotiator, FrameReader(self._max_response))
        self._mux.write(sid, negotiator.proposal() + encode_frame(body))
        self._mux.close_stream(sid)
        return sid

    def receive(self, data: bytes) -> list[Answer]:
        answers: list[Answer] = []
        if self._reader is not None:
            data = self._reader.feed(data)
        if self._phase is _Phase.SECURITY:
            agreed = self._negotiator.feed(data)
            if agreed is None:
                return answers
            self._phase = _Phase.NOISE
            data = agreed.rest
        if self._phase is _Phase.NOISE:
            noise = self._noise
            self._raw_out.append(noise.feed(data))
            if not noise.done:
                return answers
            assert noise.receive_cipher is not None
            self.remote = noise.remote
            self._reader = NoiseReader(noise.receive_cipher)
            self._negotiator = MultistreamDialler(self._muxer_id)
            self._plain_out.append(self._negotiator.proposal())
            self._phase = _Phase.MUXER
            data = self._reader.feed(noise.rest)
        if self._phase is _Phase.MUXER:
            agreed = self._negotiator.feed(data)
            if agreed is None:
                return answers
            self._phase = _Phase.OPEN
            data = agreed.rest
        if data:
            self._muxed(data, answers)
        return answers

    def _muxed(self, data: bytes, answers: list[Answer]) -> None:
        mux = self._mux
        try:
            events = mux.feed(data)
        except MuxError as exc:
            for sid in list(self._pending):
                answers.append(Answer(sid, None, exc))
            self._pending.clear()
            raise
        for event in events:
            pending = self._pending.get(event.stream)
            if pending is None:
                continue
            if type(event) is StreamData:
                mux.consumed(event.stream, len(event.data))
                self._stream_data(event.stream, pending, event.data, answers)
            elif type(event) is StreamEnded:
                del self._pending[event.stream]
                if pending.body is None:
                    error = P2PStreamError("the stream ended before its response")
                    answers.append(Answer(event.stream, None, error))
                else:
                    answers.append(Answer(event.stream, pending.body))
            elif type(event) is StreamReset:
                del self._pending[event.stream]
                reason = (
                    "stream reset"
                    if pending.negotiated
                    else "the peer reset the stream before it confirmed the protocol (it does "
                    "not serve it?)"
                )
                answers.append(Answer(event.stream, None, P2PStreamError(reason)))

    def _stream_data(self, sid: int, pending: _Pending, data: bytes, answers: list[Answer]) -> None:
        try:
            if not pending.negotiated:
                agreed = pending.negotiator.feed(data)
                if agreed is None:
                    return
                pending.negotiated = True
                data = agreed.rest
            frames = pending.reader.feed(data)
        except DecodeError as exc:
            del self._pending[sid]
            self._mux.reset_stream(sid)
            answers.append(Answer(sid, None, exc))
            return
        if frames and pending.body is None:
            pending.body = frames[0]

    def data_to_send(self) -> bytes:
        raw = b"".join(self._raw_out)
        self._raw_out.clear()
        if self._reader is None:
            return raw
        plain = self._plain_out
        muxed = self._mux.data_to_send()  # after the muxer's proposal, if still unanswered
        if muxed:
            plain.append(muxed)
        if not plain:
            return raw
        cipher = self._noise.send_cipher
        assert cipher is not None
        sealed = cipher.encrypt(b"".join(plain))
        plain.clear()
        return raw + sealed
