"""Length-prefixed messages on a libp2p stream (trio side).

Every Waku request-response protocol (store, metadata) and identify send one protobuf per
frame: an unsigned varint length, then that many bytes (nwaku ``writeLp``/``readLp``,
js-waku ``it-length-prefixed``). :func:`read_frame` refuses a length over the caller's cap
before reading the body, so an oversize frame costs the listener at most 10 bytes of reading.
"""

from __future__ import annotations

from libp2p.abc import INetStream
from libp2p.network.stream.exceptions import StreamEOF

from waku_legacy.errors import LimitExceeded
from waku_legacy.p2p.errors import P2PStreamError

__all__ = ["encode_varint", "frame", "read_all", "read_frame"]

_MAX_VARINT = 10


def encode_varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def frame(body: bytes) -> bytes:
    """``body`` with its varint length in front."""
    return encode_varint(len(body)) + body


async def _read_exact(stream: INetStream, size: int, what: str) -> bytes:
    chunks = bytearray()
    while len(chunks) < size:
        try:
            data = await stream.read(size - len(chunks))
        except StreamEOF:
            data = b""
        if not data:
            raise P2PStreamError(f"{what}: stream closed after {len(chunks)} of {size} bytes")
        chunks += data
    return bytes(chunks)


async def read_frame(stream: INetStream, max_bytes: int, *, what: str = "frame") -> bytes:
    """One length-prefixed body of at most ``max_bytes`` bytes.

    Raises :class:`LimitExceeded` for a longer declared length (nothing more is read),
    :class:`P2PStreamError` for a stream that ends early or a varint over 10 bytes."""
    length = shift = 0
    for _ in range(_MAX_VARINT):
        byte = (await _read_exact(stream, 1, f"{what} length"))[0]
        length |= (byte & 0x7F) << shift
        shift += 7
        if not byte & 0x80:
            break
    else:
        raise P2PStreamError(f"{what}: length prefix longer than {_MAX_VARINT} bytes")
    if length > max_bytes:
        raise LimitExceeded(what, f"declared length {length} bytes, over the cap of {max_bytes}")
    return await _read_exact(stream, length, what)


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
