"""Minimal protobuf wire-format writer and reader: varints, fields, a top-level field walk.

The one home of the wire format below protobuf's generated classes: the archive encoder,
the store protocol's hand-written responses and frames, the libp2p metadata codec and the
parse-error diagnosis of :mod:`waku_legacy.proto.codec` all use it.

Why hand-rolled: building one generated protobuf object per message costs several
microseconds, and a migration encodes millions of archive messages; this writer produces the
same bytes (field order by number, proto3 defaults omitted, minimal varints), which the tests
check against the generated classes. The reader walks fields without building objects so that
index keys can be checked against the exact bytes that were hashed.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from waku_legacy.errors import DecodeError

__all__ = [
    "CONTINUED_PAIRS",
    "SMALL_VARINTS",
    "WireField",
    "encode_varint",
    "iter_fields",
    "len_field",
    "read_varint",
    "varint_field",
    "varint_size",
]

# Varints below 2**14 are cached: lengths of payloads, hashes and topics are almost all small.
SMALL_VARINTS: tuple[bytes, ...] = tuple(
    bytes((n,)) if n < 0x80 else bytes(((n & 0x7F) | 0x80, n >> 7)) for n in range(1 << 14)
)
#: 14 bits as two varint bytes that both say "more follows"
CONTINUED_PAIRS: tuple[bytes, ...] = tuple(
    bytes(((n & 0x7F) | 0x80, (n >> 7) | 0x80)) for n in range(1 << 14)
)

WIRE_VARINT = 0
WIRE_I64 = 1
WIRE_LEN = 2
WIRE_I32 = 5


def encode_varint(value: int) -> bytes:
    """Base-128 varint of a non-negative integer below 2**64."""
    if value < 16384:
        if value < 0:
            raise ValueError(f"varint of a negative number ({value})")
        return SMALL_VARINTS[value]
    if value >= 1 << 64:
        raise ValueError(f"varint of {value} does not fit 64 bits")
    # 14 bits at a time from a table (a store v3 page writes a 9-byte timestamp per message:
    # 8x faster than a byte at a time)
    parts = []
    while value >= 16384:
        parts.append(CONTINUED_PAIRS[value & 0x3FFF])
        value >>= 14
    parts.append(SMALL_VARINTS[value])
    return b"".join(parts)


def varint_size(value: int) -> int:
    """Number of bytes of ``encode_varint(value)``."""
    size = 1
    while value >= 0x80:
        value >>= 7
        size += 1
    return size


def varint_field(field_number: int, value: int) -> bytes:
    """A varint field, or nothing for 0 (proto3 omits defaults)."""
    if not value:
        return b""
    return encode_varint(field_number << 3 | WIRE_VARINT) + encode_varint(value)


def len_field(field_number: int, value: bytes) -> bytes:
    """A length-delimited field, or nothing for empty bytes (proto3 omits defaults)."""
    if not value:
        return b""
    return encode_varint(field_number << 3 | WIRE_LEN) + encode_varint(len(value)) + value


@dataclass(frozen=True, slots=True)
class WireField:
    number: int
    wire_type: int
    value: int | bytes  # int for varint/fixed, bytes for length-delimited
    start: int  # offset of the tag in the buffer
    end: int  # offset after the value


def read_varint(
    data: bytes | bytearray | memoryview,
    pos: int,
    what: str,
    error: type[DecodeError] = DecodeError,
) -> tuple[int, int]:
    """(value, offset after it) of the varint at ``pos``; ``error`` (naming ``what``) when
    it runs off the end, is longer than 10 bytes or does not fit 64 bits."""
    result = 0
    shift = 0
    start = pos
    while True:
        if pos >= len(data):
            raise error(what, "truncated varint", offset=start)
        byte = data[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            break
        shift += 7
        if shift >= 70:
            raise error(what, "varint longer than 10 bytes", offset=start)
    if result >= 1 << 64:
        raise error(what, "varint does not fit 64 bits", offset=start)
    return result, pos


def iter_fields(
    data: bytes | memoryview, what: str, error: type[DecodeError] = DecodeError
) -> Iterator[WireField]:
    """Walk the top-level fields of one protobuf message; ``error`` (naming ``what``, with
    the offset) on malformed input."""
    pos = 0
    size = len(data)
    while pos < size:
        start = pos
        key, pos = read_varint(data, pos, what, error)
        number, wire_type = key >> 3, key & 7
        if number == 0:
            raise error(what, "field number 0", offset=start)
        if wire_type == WIRE_VARINT:
            value, pos = read_varint(data, pos, what, error)
            yield WireField(number, wire_type, value, start, pos)
        elif wire_type == WIRE_LEN:
            length, pos = read_varint(data, pos, what, error)
            if pos + length > size:
                raise error(
                    what, f"field {number} claims {length} bytes, {size - pos} left", offset=start
                )
            yield WireField(number, wire_type, bytes(data[pos : pos + length]), start, pos + length)
            pos += length
        elif wire_type in (WIRE_I64, WIRE_I32):
            width = 8 if wire_type == WIRE_I64 else 4
            if pos + width > size:
                raise error(what, f"truncated fixed{width * 8} field", offset=start)
            value = int.from_bytes(data[pos : pos + width], "little")
            pos += width
            yield WireField(number, wire_type, value, start, pos)
        else:
            raise error(what, f"unsupported wire type {wire_type}", offset=start)
