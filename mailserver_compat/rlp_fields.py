"""Typed reads of decoded RLP items, as strict as go-ethereum's ``rlp`` package.

status-go decodes every Waku v1 structure with go-ethereum's reflection-based RLP decoder,
which rejects what the ``rlp`` package here would silently hand back as bytes: integers
with leading zero bytes (including a single ``0x00``), integers wider than their Go type,
fixed-size byte arrays of the wrong length, lists where a string is expected and the
reverse. These helpers apply the same rules and raise the caller's
:class:`~waku_legacy.errors.DecodeError` subclass naming the field at fault.

``decode_rlp`` wraps the ``rlp`` package's own decoder (canonical prefixes, no trailing
bytes) with a size limit, so that no library exception escapes a public decoder.

Devp2p messages (RLPx) are forward compatible instead: EIP-8 handshake bodies are followed
by padding and every list may carry extra trailing elements, so ``decode_prefix`` takes the
first item of a buffer and ``list_at_least`` requires a minimum (not exact) list length.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeAlias

import rlp
from rlp.codec import consume_item

from waku_legacy.errors import DecodeError

__all__ = [
    "RlpItem",
    "as_bool",
    "as_bytes",
    "as_list",
    "as_uint",
    "decode_prefix",
    "decode_rlp",
    "describe",
    "encode_rlp",
    "list_at_least",
]

RlpItem: TypeAlias = "bytes | list[RlpItem]"

# The rlp package has no type information; its encoder, typed (no wrapper call on hot paths).
encode_rlp: Callable[[object], bytes] = rlp.encode


def describe(item: object) -> str:
    """Short description of a decoded item for error messages."""
    if isinstance(item, bytes):
        return f"a {len(item)}-byte string"
    if isinstance(item, list):
        return f"a list of {len(item)} items"
    return type(item).__name__


def decode_rlp(
    raw: bytes,
    what: str,
    error: type[DecodeError],
    *,
    max_size: int,
    too_large: type[DecodeError] | None = None,
) -> RlpItem:
    """Decode one complete RLP item (no trailing bytes) of at most ``max_size`` bytes."""
    if not isinstance(raw, bytes | bytearray | memoryview):
        raise error(what, f"expected bytes, got {type(raw).__name__}")
    if len(raw) > max_size:
        raise (too_large or error)(what, f"{len(raw)} bytes is over the {max_size}-byte limit")
    if not raw:
        raise error(what, "no bytes (empty input)")
    try:
        item: RlpItem = rlp.decode(bytes(raw), strict=True)
        return item
    except rlp.exceptions.DecodingError as exc:
        raise error(what, f"not valid RLP: {exc}") from None
    except RecursionError:
        raise error(what, "RLP lists nested too deeply") from None
    except Exception as exc:  # the rlp package raises a few bare types on odd input
        raise error(what, f"not valid RLP: {type(exc).__name__}: {exc}") from None


def as_list(
    item: RlpItem, what: str, field: str, error: type[DecodeError], *, size: int | None = None
) -> list[RlpItem]:
    if not isinstance(item, list):
        raise error(what, f"{field} must be an RLP list, got {describe(item)}")
    if size is not None and len(item) != size:
        raise error(what, f"{field} must hold exactly {size} items, got {len(item)}")
    return item


def as_bytes(
    item: RlpItem,
    what: str,
    field: str,
    error: type[DecodeError],
    *,
    size: int | None = None,
    max_size: int | None = None,
) -> bytes:
    if not isinstance(item, bytes):
        raise error(what, f"{field} must be an RLP string, got {describe(item)}")
    if size is not None and len(item) != size:
        raise error(what, f"{field} must be {size} bytes, got {len(item)}")
    if max_size is not None and len(item) > max_size:
        raise error(what, f"{field} is {len(item)} bytes, over the {max_size}-byte limit")
    return item


def as_uint(item: RlpItem, what: str, field: str, error: type[DecodeError], *, bits: int) -> int:
    """A minimal big-endian unsigned integer of at most ``bits`` bits (Go's uintN)."""
    if not isinstance(item, bytes):
        raise error(what, f"{field} must be an integer (RLP string), got {describe(item)}")
    if len(item) > bits // 8:
        raise error(what, f"{field} is {len(item)} bytes wide, more than a uint{bits}")
    if item[:1] == b"\x00":
        raise error(what, f"{field} is not a minimal integer (leading zero byte)")
    return int.from_bytes(item, "big")


def as_bool(item: RlpItem, what: str, field: str, error: type[DecodeError]) -> bool:
    """Go's RLP bool: empty string is false, ``0x01`` is true, anything else is an error."""
    if item == b"":
        return False
    if item == b"\x01":
        return True
    raise error(what, f"{field} must be a boolean (0x80 or 0x01), got {describe(item)}")


def decode_prefix(data: bytes, what: str, error: type[DecodeError]) -> RlpItem:
    """Decode the first RLP item in ``data``, ignoring whatever follows it (devp2p padding)."""
    try:
        item, _, _ = consume_item(data, 0)
    except (rlp.exceptions.RLPException, IndexError, ValueError, RecursionError) as exc:
        raise error(what, f"not RLP ({type(exc).__name__}: {exc})") from None
    item_: RlpItem = item
    return item_


def list_at_least(
    item: RlpItem, what: str, min_length: int, error: type[DecodeError]
) -> list[RlpItem]:
    """``item`` as a list of at least ``min_length`` elements (more are allowed, as devp2p's)."""
    fields = as_list(item, what, "the message", error)
    if len(fields) < min_length:
        raise error(what, f"list has {len(fields)} elements, need at least {min_length}")
    return fields
