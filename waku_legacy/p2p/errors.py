"""The libp2p side's typed errors (what a listener logs, what a client raises)."""

from __future__ import annotations

from waku_legacy.errors import WakuLegacyError

__all__ = ["P2PError", "P2PRefused", "P2PStreamError", "P2PTimeout"]


class P2PError(WakuLegacyError):
    """A libp2p host that cannot start, a peer that cannot be dialled, a stream that failed."""


class P2PTimeout(P2PError):
    """A peer that did not send (or take) a whole request or response in time."""


class P2PRefused(P2PError):
    """A stream refused by a listener limit (streams per connection, request rate)."""


class P2PStreamError(P2PError):
    """A stream whose bytes break the protocol (an oversize or truncated frame)."""
