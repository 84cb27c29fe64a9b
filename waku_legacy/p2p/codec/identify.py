"""The identify message (``/ipfs/id/1.0.0``, libp2p specs ``identify/README.md``), sans-IO.

``Identify { bytes publicKey = 1; repeated bytes listenAddrs = 2; repeated string protocols
= 3; bytes observedAddr = 4; string protocolVersion = 5; string agentVersion = 6; }``, sent
by the listener as one length-prefixed message, after which it closes the stream. js-waku
reads ``protocols`` to decide that a peer is a store node, and ``listenAddrs`` (binary
multiaddrs) to know where to dial it again."""

from __future__ import annotations

from collections.abc import Iterable

from waku_legacy.proto.wire import len_field

__all__ = ["IDENTIFY_CODEC", "PING_CODEC", "PROTOCOL_VERSION", "encode_identify"]

IDENTIFY_CODEC = "/ipfs/id/1.0.0"
PING_CODEC = "/ipfs/ping/1.0.0"
PROTOCOL_VERSION = "ipfs/0.1.0"


def encode_identify(
    public_key: bytes,
    listen_addrs: Iterable[bytes],
    protocols: Iterable[str],
    *,
    agent: str,
    observed_addr: bytes = b"",
) -> bytes:
    out = [len_field(1, public_key)]
    out += [len_field(2, addr) for addr in listen_addrs]
    out += [len_field(3, name.encode()) for name in protocols]
    out.append(len_field(4, observed_addr))
    out.append(len_field(5, PROTOCOL_VERSION.encode()))
    out.append(len_field(6, agent.encode()))
    return b"".join(out)
