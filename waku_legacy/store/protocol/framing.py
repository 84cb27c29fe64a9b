"""Length-prefixed frames as the Waku req/resp protocols send them over a libp2p stream.

nwaku (``conn.readLp`` / ``conn.writeLp`` of nim-libp2p) and js-waku (``it-length-prefixed``)
put each protobuf message behind its length as an unsigned varint (multiformats
``unsigned-varint``: 7 bits a byte, least significant group first, at most 9 bytes, minimal
encoding). A store stream carries one request frame and one response frame.

Sans-IO: :func:`encode_frame` gives the bytes to write; :class:`FrameReader` is fed whatever
the stream delivers and hands back complete frames. It checks the declared length against
its ``max_size`` as soon as the prefix is complete, before it buffers any of the body, and
refuses a malformed prefix as soon as it sees it.
"""

from __future__ import annotations

from typing import NoReturn

from waku_legacy.errors import DecodeError, LimitExceeded
from waku_legacy.proto.wire import encode_varint

__all__ = ["MAX_VARINT_BYTES", "FrameError", "FrameReader", "FrameTooLarge", "encode_frame"]

MAX_VARINT_BYTES = 9  # multiformats unsigned-varint: at most 63 bits


class FrameError(DecodeError):
    """A length prefix that is not an unsigned varint, or a stream that ended mid-frame."""


class FrameTooLarge(FrameError, LimitExceeded):
    """A frame whose declared length is over the reader's limit."""


def encode_frame(body: bytes) -> bytes:
    """``body`` behind its length as an unsigned varint."""
    return encode_varint(len(body)) + bytes(body)


class FrameReader:
    """Frames out of a byte stream, each at most ``max_size`` bytes.

    ``feed(data)`` returns the frames completed by ``data`` (often none, sometimes several)
    and raises :class:`FrameTooLarge` or :class:`FrameError`; after an error the reader
    refuses further input. ``finish()`` says the stream ended: it raises :class:`FrameError`
    when a frame was cut short. ``buffered`` is how many bytes wait for their frame's end."""

    def __init__(self, max_size: int) -> None:
        self.max_size = max_size
        self._prefix = bytearray()  # bytes of a length prefix not yet complete
        self._need: int | None = None  # body length of the frame being read
        self._body = bytearray()
        self._failed: FrameError | None = None
        self.offset = 0  # stream bytes consumed so far (for error messages)

    @property
    def buffered(self) -> int:
        return len(self._prefix) + len(self._body)

    def feed(self, data: bytes | bytearray | memoryview) -> list[bytes]:
        if self._failed is not None:
            raise self._failed
        frames: list[bytes] = []
        view = memoryview(bytes(data))
        at = 0
        while at < len(view):
            if self._need is None:
                at, length = self._read_prefix(view, at)
                if length == 0:
                    frames.append(b"")
                elif length is not None:
                    self._need = length
                continue
            take = min(self._need - len(self._body), len(view) - at)
            self._body += view[at : at + take]
            at += take
            self.offset += take
            if len(self._body) == self._need:
                frames.append(bytes(self._body))
                self._body.clear()
                self._need = None
        return frames

    def _read_prefix(self, view: memoryview, at: int) -> tuple[int, int | None]:
        """Consume prefix bytes from ``view[at:]``: the new offset and the frame length
        when the prefix ended (None while it goes on)."""
        while at < len(view):
            byte = view[at]
            at += 1
            self._prefix.append(byte)
            if byte & 0x80:
                if len(self._prefix) >= MAX_VARINT_BYTES:
                    self._fail(FrameError, "frame length", "varint longer than 9 bytes")
                continue
            if byte == 0 and len(self._prefix) > 1:
                self._fail(FrameError, "frame length", "varint not minimally encoded")
            length = 0
            for shift, b in enumerate(self._prefix):
                length |= (b & 0x7F) << (7 * shift)
            if length > self.max_size:
                reason = f"declares {length} bytes, over the {self.max_size}-byte limit"
                self._fail(FrameTooLarge, "frame", reason)
            self.offset += len(self._prefix)
            self._prefix.clear()
            return at, length
        return at, None

    def _fail(self, kind: type[FrameError], what: str, reason: str) -> NoReturn:
        self._failed = kind(what, reason, offset=self.offset)
        raise self._failed

    def finish(self) -> None:
        """The stream ended: :class:`FrameError` if it ended inside a frame."""
        if self._failed is not None:
            raise self._failed
        if self._prefix or self._need is not None:
            expected = "length prefix" if self._need is None else f"{self._need}-byte body"
            raise FrameError("frame", f"stream ended after {self.buffered} bytes of a {expected}")
