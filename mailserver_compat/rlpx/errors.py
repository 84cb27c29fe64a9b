"""Errors of the RLPx transport.

Each carries the devp2p disconnect reason a peer should be told (when a frame can still be
sent) so that the connection state machine turns any failure into one clean Disconnect.
"""

from __future__ import annotations

from waku_legacy.errors import DecodeError, LimitExceeded, WakuLegacyError
from waku_legacy.mailserver_compat.rlpx.reasons import DisconnectReason

__all__ = [
    "ConnectionStateError",
    "FrameAuthenticationError",
    "HandshakeError",
    "MessageTooLarge",
    "ProtocolViolation",
    "RlpxDecodeError",
]


class RlpxDecodeError(DecodeError):
    """Bytes from a peer that are not valid RLPx / devp2p."""

    # ``reason`` (inherited) is the text; this is what the peer is told.
    disconnect_reason: DisconnectReason = DisconnectReason.PROTOCOL_ERROR


class HandshakeError(RlpxDecodeError):
    """The EIP-8 / pre-EIP-8 auth or ack could not be read or verified."""


class FrameAuthenticationError(RlpxDecodeError):
    """A frame header or body MAC did not verify (tampering, wrong keys, lost sync)."""


class MessageTooLarge(LimitExceeded, RlpxDecodeError):
    """A frame or a decompressed message over the configured size limit."""


class ProtocolViolation(RlpxDecodeError):
    """A well-formed message the protocol does not allow here (wrong order, bad identity)."""

    def __init__(
        self,
        what: str,
        reason_text: str,
        *,
        disconnect_reason: DisconnectReason = DisconnectReason.PROTOCOL_ERROR,
    ) -> None:
        super().__init__(what, reason_text)
        self.disconnect_reason = disconnect_reason


class ConnectionStateError(WakuLegacyError):
    """A local call the connection cannot honour in its current state (a caller bug or a
    send after the connection closed), like wsproto's ``LocalProtocolError``: it names the
    call (``event``), the connection's state and why. Never a peer's fault, so it is raised
    to the caller and never turned into a Disconnect."""

    def __init__(self, event: str, state: str, reason: str) -> None:
        self.event = event
        self.state = state
        self.reason = reason
        super().__init__(f"{event} in state {state}: {reason}")
