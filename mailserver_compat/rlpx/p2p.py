"""The devp2p base protocol: Hello, Disconnect, Ping, Pong, and capability negotiation.

Message codes 0x00-0x0f belong to the base protocol; capabilities shared by both peers get
consecutive code ranges from 0x10 on, in order of name then version (go-ethereum's
matchProtocols), so ``waku/1`` alone occupies 0x10-0x8f.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from waku_legacy.mailserver_compat.rlp_fields import (
    as_bytes,
    as_list,
    as_uint,
    decode_prefix,
    encode_rlp,
    list_at_least,
)
from waku_legacy.mailserver_compat.rlpx.errors import ProtocolViolation, RlpxDecodeError
from waku_legacy.mailserver_compat.rlpx.reasons import DisconnectReason

__all__ = [
    "BASE_PROTOCOL_LENGTH",
    "DISCONNECT",
    "HELLO",
    "MAX_HELLO_SIZE",
    "P2P_VERSION",
    "PING",
    "PING_PAYLOAD",
    "PONG",
    "SNAPPY_MIN_VERSION",
    "Capability",
    "Hello",
    "ProtocolSpec",
    "SharedCapability",
    "decode_disconnect",
    "encode_disconnect",
    "negotiate",
]

P2P_VERSION = 5
SNAPPY_MIN_VERSION = 5
HELLO, DISCONNECT, PING, PONG = 0x00, 0x01, 0x02, 0x03
BASE_PROTOCOL_LENGTH = 16
MAX_HELLO_SIZE = 2 * 1024  # go-ethereum's baseProtocolMaxMsgSize
PING_PAYLOAD = encode_rlp([])


@dataclass(frozen=True, slots=True)
class Capability:
    name: str
    version: int


@dataclass(frozen=True, slots=True)
class ProtocolSpec:
    """A capability this node runs: name, version and how many message codes it uses."""

    name: str
    version: int
    length: int

    @property
    def capability(self) -> Capability:
        return Capability(self.name, self.version)


@dataclass(frozen=True, slots=True)
class SharedCapability:
    name: str
    version: int
    offset: int
    length: int


@dataclass(frozen=True, slots=True)
class Hello:
    version: int
    client_id: str
    capabilities: tuple[Capability, ...]
    listen_port: int
    node_id: bytes  # 64-byte public key

    def encode(self) -> bytes:
        return encode_rlp(
            [
                self.version,
                self.client_id.encode("utf-8"),
                [[cap.name.encode("ascii"), cap.version] for cap in self.capabilities],
                self.listen_port,
                self.node_id,
            ]
        )

    @classmethod
    def decode(cls, payload: bytes) -> Hello:
        if len(payload) > MAX_HELLO_SIZE:
            raise RlpxDecodeError("devp2p Hello", f"{len(payload)} bytes is over 2 KiB")
        what = "devp2p Hello"
        item = decode_prefix(payload, what, RlpxDecodeError)
        fields = list_at_least(item, what, 5, RlpxDecodeError)
        caps = []
        for index, entry in enumerate(as_list(fields[2], what, "capabilities", RlpxDecodeError)):
            pair = list_at_least(entry, what, 2, RlpxDecodeError)
            name = as_bytes(pair[0], what, f"capability #{index} name", RlpxDecodeError)
            version = as_uint(
                pair[1], what, f"capability #{index} version", RlpxDecodeError, bits=32
            )
            caps.append(Capability(name.decode("ascii", errors="replace"), version))
        node_id = as_bytes(fields[4], what, "node id", RlpxDecodeError)
        if len(node_id) != 64 or not any(node_id):
            raise ProtocolViolation(
                what,
                f"node id must be a 64-byte public key, got {len(node_id)} bytes",
                disconnect_reason=DisconnectReason.INVALID_IDENTITY,
            )
        return cls(
            version=as_uint(fields[0], what, "version", RlpxDecodeError, bits=64),
            client_id=as_bytes(fields[1], what, "client id", RlpxDecodeError).decode(
                "utf-8", "replace"
            ),
            capabilities=tuple(caps),
            listen_port=as_uint(fields[3], what, "listen port", RlpxDecodeError, bits=16),
            node_id=node_id,
        )


def encode_disconnect(reason: DisconnectReason) -> bytes:
    return encode_rlp([int(reason)])


def decode_disconnect(payload: bytes) -> tuple[DisconnectReason, int]:
    """``(reason, raw code)``; accepts ``[reason]``, a bare reason and an empty list."""
    item = decode_prefix(payload, "devp2p Disconnect", RlpxDecodeError) if payload else []
    if isinstance(item, list):
        if not item:
            return DisconnectReason.REQUESTED, 0
        item = item[0]
    if isinstance(item, list):
        raise RlpxDecodeError("devp2p Disconnect", "reason is a list")
    code = int.from_bytes(item, "big") if len(item) <= 2 else 0xFFFF
    return DisconnectReason.from_code(code), code


def negotiate(ours: Sequence[ProtocolSpec], theirs: Sequence[Capability]) -> list[SharedCapability]:
    """Shared capabilities with their message-code offsets (highest common version wins)."""
    chosen: dict[str, ProtocolSpec] = {}
    for cap in sorted(theirs, key=lambda c: (c.name, c.version)):
        for spec in ours:
            if spec.name == cap.name and spec.version == cap.version:
                chosen[cap.name] = spec
    shared = []
    offset = BASE_PROTOCOL_LENGTH
    for name in sorted(chosen):
        spec = chosen[name]
        shared.append(SharedCapability(spec.name, spec.version, offset, spec.length))
        offset += spec.length
    return shared
