"""devp2p disconnect reasons (go-ethereum p2p/peer_error.go numbering)."""

from __future__ import annotations

from enum import IntEnum

__all__ = ["DisconnectReason"]


class DisconnectReason(IntEnum):
    REQUESTED = 0x00
    NETWORK_ERROR = 0x01
    PROTOCOL_ERROR = 0x02
    USELESS_PEER = 0x03
    TOO_MANY_PEERS = 0x04
    ALREADY_CONNECTED = 0x05
    INCOMPATIBLE_VERSION = 0x06
    INVALID_IDENTITY = 0x07
    QUITTING = 0x08
    UNEXPECTED_IDENTITY = 0x09
    SELF = 0x0A
    READ_TIMEOUT = 0x0B
    SUBPROTOCOL_ERROR = 0x10
    # Not on the wire: a reason code this implementation does not know.
    UNKNOWN = 0xFF

    @classmethod
    def from_code(cls, code: int) -> DisconnectReason:
        try:
            return cls(code)
        except ValueError:
            return cls.UNKNOWN

    @property
    def description(self) -> str:
        return _DESCRIPTIONS[self]


_DESCRIPTIONS = {
    DisconnectReason.REQUESTED: "disconnect requested",
    DisconnectReason.NETWORK_ERROR: "network error",
    DisconnectReason.PROTOCOL_ERROR: "breach of protocol",
    DisconnectReason.USELESS_PEER: "useless peer",
    DisconnectReason.TOO_MANY_PEERS: "too many peers",
    DisconnectReason.ALREADY_CONNECTED: "already connected",
    DisconnectReason.INCOMPATIBLE_VERSION: "incompatible p2p protocol version",
    DisconnectReason.INVALID_IDENTITY: "invalid node identity",
    DisconnectReason.QUITTING: "client quitting",
    DisconnectReason.UNEXPECTED_IDENTITY: "unexpected identity",
    DisconnectReason.SELF: "connected to self",
    DisconnectReason.READ_TIMEOUT: "read timeout",
    DisconnectReason.SUBPROTOCOL_ERROR: "subprotocol error",
    DisconnectReason.UNKNOWN: "unknown reason",
}
