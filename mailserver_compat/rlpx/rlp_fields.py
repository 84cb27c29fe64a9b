"""RLP reads the devp2p layer needs beyond :mod:`waku_legacy.mailserver_compat.rlp_fields`.

Devp2p messages are forward compatible: EIP-8 handshake bodies are followed by padding and
every list may carry extra trailing elements, so readers take the first item of a buffer
and require a minimum (not exact) list length. Field reads themselves use the shared,
go-ethereum-strict helpers.
"""

from __future__ import annotations

import rlp
from rlp.codec import consume_item

from waku_legacy.mailserver_compat.rlp_fields import RlpItem, as_list
from waku_legacy.mailserver_compat.rlpx.errors import RlpxDecodeError

__all__ = ["decode_prefix", "list_at_least"]


def decode_prefix(data: bytes, what: str) -> RlpItem:
    """Decode the first RLP item in ``data``, ignoring whatever follows it."""
    try:
        item, _, _ = consume_item(data, 0)
    except (rlp.exceptions.RLPException, IndexError, ValueError, RecursionError) as exc:
        raise RlpxDecodeError(what, f"not RLP ({type(exc).__name__}: {exc})") from None
    return item


def list_at_least(item: RlpItem, what: str, min_length: int) -> list[RlpItem]:
    fields = as_list(item, what, "the message", RlpxDecodeError)
    if len(fields) < min_length:
        raise RlpxDecodeError(what, f"list has {len(fields)} elements, need at least {min_length}")
    return fields
