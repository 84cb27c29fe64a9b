"""The libp2p side's typed errors (what a listener logs, what a client raises).

A connection that must end raises a :class:`Libp2pConnectionFailed` subclass; each carries,
as :mod:`waku_legacy.mailserver_compat.rlpx.errors` does with its disconnect reason, the
listener's counter it is counted under (``counter``: the key in ``stats()`` and
``/metrics``) and the GO_AWAY code sent before closing (``go_away``; None: nothing is sent,
the socket just closes, as always on mplex, which has no GO_AWAY). A stream that fails is
reset (yamux RST, mplex Reset: neither carries a code) and reported by kind instead.
"""

from __future__ import annotations

from enum import IntEnum
from typing import ClassVar

from waku_legacy.errors import WakuLegacyError

__all__ = [
    "CodecRefused",
    "GoAwayCode",
    "Libp2pConnectionFailed",
    "MplexProtocolError",
    "MplexUnreadOverflow",
    "P2PError",
    "P2PRefused",
    "P2PStreamError",
    "P2PTimeout",
    "PeerWentAway",
    "SendBudgetClosed",
    "UnsupportedPeerKey",
    "YamuxProtocolError",
    "YamuxUnreadOverflow",
]


class GoAwayCode(IntEnum):
    """Why a yamux session ends (GO_AWAY's ``length``)."""

    NORMAL = 0
    PROTOCOL_ERROR = 1
    INTERNAL_ERROR = 2


class P2PError(WakuLegacyError):
    """A libp2p host that cannot start, a peer that cannot be dialled, a stream that failed."""


class P2PTimeout(P2PError):
    """A peer that did not send (or take) a whole request or response in time."""


class P2PRefused(P2PError):
    """A stream refused by a listener limit (streams per connection, request rate)."""


class P2PStreamError(P2PError):
    """A stream whose bytes break the protocol (an oversize or truncated frame)."""


class Libp2pConnectionFailed(P2PError):
    """The connection must end; ``error`` is what the codec raised. The last words (GO_AWAY
    and its code, when there are any) are already in the connection's ``data_to_send()``."""

    #: the listener's counter (its name in ``stats()``; unchanged JSON keys)
    counter: ClassVar[str] = "connection_error"
    #: what the peer was told before the close (yamux); None: nothing
    go_away: ClassVar[GoAwayCode | None] = None

    def __init__(self, error: Exception) -> None:
        super().__init__(str(error))
        self.error = error

    @property
    def kind(self) -> str:
        return self.counter


class CodecRefused(Libp2pConnectionFailed):
    """Bytes a codec refuses before the muxer (multistream-select, Noise, frame prefixes,
    keys, the ``/ws`` upgrade): closed, nothing said."""


class UnsupportedPeerKey(Libp2pConnectionFailed):
    """A Noise identity key that parses but is not one we accept."""

    counter = "unsupported_key"


class YamuxProtocolError(Libp2pConnectionFailed):
    """yamux bytes that break the protocol (a bad header, a SYN for a stream that exists,
    DATA past the receive window)."""

    counter = "yamux_protocol_error"
    go_away = GoAwayCode.PROTOCOL_ERROR


class YamuxUnreadOverflow(YamuxProtocolError):
    """More received and unread on a yamux session than ``max_buffered_bytes``."""

    go_away = GoAwayCode.INTERNAL_ERROR


class MplexProtocolError(Libp2pConnectionFailed):
    """mplex bytes that break the protocol (an oversize message or varint, a stream opened
    twice, an unknown flag); mplex has no GO_AWAY."""

    counter = "mux_error"


class MplexUnreadOverflow(MplexProtocolError):
    """More received and unread on an mplex session than ``max_buffered_bytes``."""


class PeerWentAway(Libp2pConnectionFailed):
    """The peer ended the session (its GO_AWAY): nothing to say back."""

    counter = "peer_went_away"


class SendBudgetClosed(Libp2pConnectionFailed):
    """The peer keeps asking while not taking what waits for it (over the send budget once
    the refused stream is reset)."""

    counter = "send_budget_closed"
    go_away = GoAwayCode.INTERNAL_ERROR
