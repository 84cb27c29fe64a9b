"""Typed field access on decoded RLP (the ``rlp`` package's nested bytes/lists).

Devp2p messages are forward compatible: extra list elements are ignored, so decoders read
the fields they know by position and never require an exact length.
"""

from __future__ import annotations

from typing import Any

import rlp
from rlp.codec import consume_item

from waku_legacy.mailserver_compat.rlpx.errors import RlpxDecodeError

__all__ = [
    "RlpItem",
    "decode_prefix",
    "decode_strict",
    "field_bytes",
    "field_int",
    "field_list",
]

RlpItem = bytes | list[Any]


def decode_prefix(data: bytes, what: str) -> RlpItem:
    """Decode the first RLP item in ``data``, ignoring whatever follows (EIP-8 padding)."""
    try:
        item, _, _ = consume_item(data, 0)
    except (rlp.exceptions.RLPException, IndexError, ValueError) as exc:
        raise RlpxDecodeError(what, f"not RLP ({exc})") from exc
    return item


def decode_strict(data: bytes, what: str) -> RlpItem:
    """Decode exactly one RLP item spanning all of ``data``."""
    try:
        return rlp.decode(data, strict=True)
    except (rlp.exceptions.RLPException, IndexError, ValueError) as exc:
        raise RlpxDecodeError(what, f"not RLP ({exc})") from exc


def field_list(item: RlpItem, what: str, min_length: int = 0) -> list[Any]:
    if not isinstance(item, list):
        raise RlpxDecodeError(what, "expected an RLP list, got a byte string")
    if len(item) < min_length:
        raise RlpxDecodeError(what, f"list has {len(item)} elements, need at least {min_length}")
    return item


def field_bytes(item: RlpItem, what: str, size: int | None = None) -> bytes:
    if not isinstance(item, bytes):
        raise RlpxDecodeError(what, "expected a byte string, got a list")
    if size is not None and len(item) != size:
        raise RlpxDecodeError(what, f"expected {size} bytes, got {len(item)}")
    return item


def field_int(item: RlpItem, what: str, max_bits: int = 64) -> int:
    """An RLP unsigned integer (big-endian); leading zero bytes are tolerated on receive."""
    raw = field_bytes(item, what)
    value = int.from_bytes(raw, "big")
    if value.bit_length() > max_bits:
        raise RlpxDecodeError(what, f"integer wider than {max_bits} bits")
    return value
