"""Events a :class:`~waku_legacy.mailserver_compat.rlpx.connection.Connection` reports."""

from __future__ import annotations

from dataclasses import dataclass

from waku_legacy.mailserver_compat.rlpx.p2p import Hello, SharedCapability
from waku_legacy.mailserver_compat.rlpx.reasons import DisconnectReason

__all__ = [
    "ConnectionFailed",
    "DisconnectReceived",
    "Event",
    "HandshakeComplete",
    "HelloReceived",
    "MessageReceived",
    "PingReceived",
    "PongReceived",
]


@dataclass(frozen=True, slots=True)
class HandshakeComplete:
    """Auth/ack done; ``remote_public_key`` is the peer's 64-byte static node key."""

    remote_public_key: bytes


@dataclass(frozen=True, slots=True)
class HelloReceived:
    hello: Hello
    shared_capabilities: tuple[SharedCapability, ...]


@dataclass(frozen=True, slots=True)
class PingReceived:
    """A Pong has been queued already (see ``Connection.data_to_send``)."""


@dataclass(frozen=True, slots=True)
class PongReceived:
    pass


@dataclass(frozen=True, slots=True)
class DisconnectReceived:
    reason: DisconnectReason
    code: int


@dataclass(frozen=True, slots=True)
class MessageReceived:
    """A capability message; ``code`` is relative to the capability (waku status = 0)."""

    capability: str
    version: int
    code: int
    payload: bytes


@dataclass(frozen=True, slots=True)
class ConnectionFailed:
    """This side found the peer's bytes unacceptable and closed the connection.

    A Disconnect frame carrying ``reason`` is queued when the session keys allow it (after
    the handshake); ``error`` says what was wrong, for the log.
    """

    reason: DisconnectReason
    error: str


Event = (
    HandshakeComplete
    | HelloReceived
    | PingReceived
    | PongReceived
    | DisconnectReceived
    | MessageReceived
    | ConnectionFailed
)
