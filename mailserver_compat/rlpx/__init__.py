"""RLPx (devp2p) transport: sans-IO handshake, framing and p2p base protocol, asyncio adapter.

Modules: ``handshake`` (EIP-8 auth/ack, secrets), ``frame`` (AES-CTR + keccak MACs),
``compression`` (snappy with a size guard), ``p2p`` (Hello, Disconnect, Ping/Pong,
capability offsets), ``connection`` (the state machine), ``events``, ``reasons``,
``errors``, ``enode`` (enode URLs); ``asyncio_transport`` runs a connection over real sockets.
"""

from waku_legacy.mailserver_compat.rlpx.connection import Connection, State
from waku_legacy.mailserver_compat.rlpx.p2p import Capability, Hello, ProtocolSpec
from waku_legacy.mailserver_compat.rlpx.reasons import DisconnectReason

__all__ = ["Capability", "Connection", "DisconnectReason", "Hello", "ProtocolSpec", "State"]
