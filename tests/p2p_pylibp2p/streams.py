"""Length-prefixed messages on a libp2p stream (trio side).

Every Waku request-response protocol (store, metadata) and identify send one protobuf per
frame: an unsigned varint length, then that many bytes (nwaku ``writeLp``/``readLp``,
js-waku ``it-length-prefixed``, go-waku ``pbio``). The frame format has one owner,
:mod:`waku_legacy.store.protocol.framing` (sans-IO: :func:`encode_frame`,
:class:`FrameReader`); this module only feeds it what a stream delivers. A declared length
over the caller's cap is refused as soon as the prefix is complete, before the body is read.
"""

from __future__ import annotations

from libp2p.abc import INetStream
from libp2p.network.stream.exceptions import StreamEOF

from waku_legacy.errors import LimitExceeded
from waku_legacy.p2p.errors import P2PStreamError
from waku_legacy.proto.wire import encode_varint
from waku_legacy.store.protocol.framing import FrameReader, encode_frame

__all__ = ["FrameStream", "encode_varint", "frame", "read_all", "read_frame"]

_CHUNK = 65536


def frame(body: bytes) -> bytes:
    """``body`` with its varint length in front."""
    return encode_frame(body)


async def read_frame(stream: INetStream, max_bytes: int, *, what: str = "frame") -> bytes:
    """One length-prefixed body of at most ``max_bytes`` bytes (a peer sends one per stream;
    anything after it is not read).

    Raises :class:`~waku_legacy.store.protocol.framing.FrameTooLarge` (a
    :class:`LimitExceeded`) for a longer declared length and
    :class:`~waku_legacy.store.protocol.framing.FrameError` for a malformed prefix or a stream
    that ends mid-frame."""
    reader = FrameReader(max_bytes)
    while True:
        try:
            data = await stream.read(_CHUNK)
        except StreamEOF:
            data = b""
        if not data:
            reader.finish()  # raises FrameError when the stream ended mid-frame
            raise P2PStreamError(f"{what}: the stream ended before a frame")
        frames = reader.feed(data)
        if frames:
            return frames[0]


class FrameStream:
    """Length-prefixed bodies read one after the other from a stream, each at most
    ``max_bytes`` (the peer may send several in one write; what follows a frame waits in
    the reader for the next call)."""

    def __init__(self, stream: INetStream, max_bytes: int, *, what: str = "frame") -> None:
        self.stream = stream
        self.what = what
        self._reader = FrameReader(max_bytes)
        self._ready: list[bytes] = []

    async def next(self) -> bytes:
        while not self._ready:
            try:
                data = await self.stream.read(_CHUNK)
            except StreamEOF:
                data = b""
            if not data:
                self._reader.finish()
                raise P2PStreamError(f"{self.what}: the stream ended before a frame")
            self._ready += self._reader.feed(data)
        return self._ready.pop(0)

    @property
    def buffered(self) -> int:
        """Bytes read and not yet returned."""
        return self._reader.buffered + sum(len(f) + 1 for f in self._ready)


async def read_all(stream: INetStream, max_bytes: int, *, what: str = "response") -> bytes:
    """Every byte until the peer closes its side, at most ``max_bytes``."""
    data = bytearray()
    while True:
        try:
            chunk = await stream.read(65536)
        except StreamEOF:
            break
        if not chunk:
            break
        data += chunk
        if len(data) > max_bytes:
            raise LimitExceeded(what, f"over {max_bytes} bytes")
    return bytes(data)
