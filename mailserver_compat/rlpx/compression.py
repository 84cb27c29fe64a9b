"""Snappy block compression of devp2p message payloads (p2p version >= 5).

The decompressed size is declared up front as a varint; it is checked against the limit
*before* decompressing, so a small "snappy bomb" never allocates its claimed size.
"""

from __future__ import annotations

import snappy

from waku_legacy.mailserver_compat.rlpx.errors import MessageTooLarge, RlpxDecodeError

__all__ = ["MAX_DECOMPRESSED_SIZE", "compress", "declared_length", "decompress"]

# go-ethereum refuses decompressed payloads that do not fit 24 bits (16 MiB).
MAX_DECOMPRESSED_SIZE = (1 << 24) - 1


def declared_length(data: bytes) -> int:
    """The uncompressed length a snappy block declares (its leading varint)."""
    value = 0
    for index in range(min(len(data), 5)):
        byte = data[index]
        value |= (byte & 0x7F) << (7 * index)
        if not byte & 0x80:
            return value
    raise RlpxDecodeError("snappy block", "bad or truncated length varint")


def compress(data: bytes) -> bytes:
    compressed: bytes = snappy.compress(data)  # python-snappy has no type information
    return compressed


def decompress(data: bytes, limit: int = MAX_DECOMPRESSED_SIZE) -> bytes:
    size = declared_length(data)
    if size > limit:
        raise MessageTooLarge(
            "snappy block", f"declares {size} bytes decompressed, over the {limit}-byte limit"
        )
    try:
        out: bytes = snappy.uncompress(data)
    except Exception as exc:  # snappy.UncompressError and friends
        raise RlpxDecodeError("snappy block", f"corrupt ({exc})") from exc
    if len(out) != size:
        raise RlpxDecodeError("snappy block", f"declared {size} bytes, produced {len(out)}")
    return out
