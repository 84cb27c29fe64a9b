"""Protobuf wire format by hand, for tests that check codecs against field numbers read from
the published .proto files rather than against the generated classes they use."""

from __future__ import annotations

from typing import Any


def varint(value: int) -> bytes:
    value &= (1 << 64) - 1  # negative int64 as protobuf writes it (ten bytes)
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def zigzag(value: int) -> int:
    return (value << 1) ^ (value >> 63)


def field_varint(number: int, value: int) -> bytes:
    return varint(number << 3) + varint(value)


def field_sint64(number: int, value: int) -> bytes:
    return field_varint(number, zigzag(value))


def field_bytes(number: int, value: bytes | str) -> bytes:
    raw = value.encode() if isinstance(value, str) else value
    return varint(number << 3 | 2) + varint(len(raw)) + raw


def _read_varint(data: bytes, at: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        byte = data[at]
        at += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, at
        shift += 7


def fields(data: bytes) -> list[tuple[int, Any]]:
    """``(field number, value)`` of the top level: ints for varints, bytes for the rest."""
    out: list[tuple[int, Any]] = []
    at = 0
    while at < len(data):
        tag, at = _read_varint(data, at)
        number, wire = tag >> 3, tag & 7
        if wire == 0:
            value, at = _read_varint(data, at)
        elif wire == 2:
            length, at = _read_varint(data, at)
            value, at = data[at : at + length], at + length
        elif wire == 1:
            value, at = data[at : at + 8], at + 8
        elif wire == 5:
            value, at = data[at : at + 4], at + 4
        else:
            raise ValueError(f"wire type {wire}")
        out.append((number, value))
    return out


def first(data: bytes, number: int) -> Any:
    return next((v for n, v in fields(data) if n == number), None)


def every(data: bytes, number: int) -> list[Any]:
    return [v for n, v in fields(data) if n == number]


def unzigzag(value: int) -> int:
    return (value >> 1) ^ -(value & 1)
