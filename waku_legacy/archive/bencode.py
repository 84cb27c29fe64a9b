"""Bencoding (BEP 3): a canonical encoder and a strict, bounded decoder.

Dictionaries are written with keys sorted as raw bytes, integers without leading zeros, so the
same value always gives the same bytes (the info-hash depends on it).
"""

from __future__ import annotations

from typing import Any

from waku_legacy.archive.errors import ArchiveDecodeError
from waku_legacy.errors import LimitExceeded

__all__ = ["MAX_TORRENT_BYTES", "bdecode", "bencode", "decode_at"]

MAX_TORRENT_BYTES = 64 * 1024 * 1024
_MAX_DEPTH = 64

BValue = int | bytes | list[Any] | dict[bytes, Any]  # what bdecode returns


def bencode(value: Any) -> bytes:
    """Encode ints, bytes, str (UTF-8), lists/tuples and dicts (str or bytes keys)."""
    out = bytearray()
    _encode(value, out)
    return bytes(out)


def _encode(value: Any, out: bytearray) -> None:
    if isinstance(value, bool):
        raise TypeError("bencode has no booleans")
    if isinstance(value, int):
        out += b"i%de" % value
    elif isinstance(value, bytes | bytearray | memoryview):
        raw = bytes(value)
        out += b"%d:" % len(raw)
        out += raw
    elif isinstance(value, str):
        _encode(value.encode("utf-8"), out)
    elif isinstance(value, list | tuple):
        out += b"l"
        for item in value:
            _encode(item, out)
        out += b"e"
    elif isinstance(value, dict):
        items = [
            (k.encode("utf-8") if isinstance(k, str) else bytes(k), v) for k, v in value.items()
        ]
        items.sort(key=lambda kv: kv[0])
        if len({key for key, _ in items}) != len(items):
            raise ValueError("duplicate dictionary key")
        out += b"d"
        for key, item in items:
            _encode(key, out)
            _encode(item, out)
        out += b"e"
    else:
        raise TypeError(f"cannot bencode {type(value).__name__}")


def bdecode(data: bytes, *, what: str = "bencoded data") -> BValue:
    """Decode one complete value; trailing bytes, bad integers and unsorted keys are errors."""
    if len(data) > MAX_TORRENT_BYTES:
        raise LimitExceeded(what, f"{len(data)} bytes is over {MAX_TORRENT_BYTES}")
    value, end = decode_at(data, 0, what, 0)
    if end != len(data):
        raise ArchiveDecodeError(what, "trailing bytes after the value", offset=end)
    return value


def decode_at(data: bytes, pos: int, what: str, depth: int = 0) -> tuple[BValue, int]:
    """Decode the value starting at ``pos``; returns it and the position after it."""
    if depth > _MAX_DEPTH:
        raise ArchiveDecodeError(what, "nested too deeply", offset=pos)
    if pos >= len(data):
        raise ArchiveDecodeError(what, "truncated", offset=pos)
    lead = data[pos]
    if lead == ord("i"):
        end = data.find(b"e", pos + 1)
        if end < 0:
            raise ArchiveDecodeError(what, "unterminated integer", offset=pos)
        text = data[pos + 1 : end]
        if (
            not text
            or text == b"-0"
            or (text.lstrip(b"-").startswith(b"0") and text not in (b"0",))
        ):
            raise ArchiveDecodeError(what, f"non-canonical integer {text!r}", offset=pos)
        try:
            return int(text), end + 1
        except ValueError:
            raise ArchiveDecodeError(what, f"bad integer {text!r}", offset=pos) from None
    if lead == ord("l"):
        items: list[Any] = []
        pos += 1
        while True:
            if pos >= len(data):
                raise ArchiveDecodeError(what, "unterminated list", offset=pos)
            if data[pos] == ord("e"):
                return items, pos + 1
            item, pos = decode_at(data, pos, what, depth + 1)
            items.append(item)
    if lead == ord("d"):
        result: dict[bytes, Any] = {}
        previous: bytes | None = None
        pos += 1
        while True:
            if pos >= len(data):
                raise ArchiveDecodeError(what, "unterminated dictionary", offset=pos)
            if data[pos] == ord("e"):
                return result, pos + 1
            key_at = pos
            key, pos = decode_at(data, pos, what, depth + 1)
            if not isinstance(key, bytes):
                raise ArchiveDecodeError(what, "dictionary key is not a string", offset=key_at)
            if previous is not None and key <= previous:
                raise ArchiveDecodeError(
                    what, f"dictionary keys not sorted at {key!r}", offset=key_at
                )
            previous = key
            result[key], pos = decode_at(data, pos, what, depth + 1)
    if ord("0") <= lead <= ord("9"):
        colon = data.find(b":", pos)
        if colon < 0 or colon - pos > 20:
            raise ArchiveDecodeError(what, "bad string length", offset=pos)
        text = data[pos:colon]
        if not text.isdigit() or (len(text) > 1 and text.startswith(b"0")):
            raise ArchiveDecodeError(what, f"bad string length {text!r}", offset=pos)
        length = int(text)
        start = colon + 1
        if start + length > len(data):
            raise ArchiveDecodeError(what, "string runs past the end", offset=pos)
        return data[start : start + length], start + length
    raise ArchiveDecodeError(what, f"unexpected byte {lead:#04x}", offset=pos)
