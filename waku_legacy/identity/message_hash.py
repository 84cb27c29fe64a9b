"""Every message identity the project uses, in one place.

- :func:`deterministic_hash`: 14/WAKU2-MESSAGE, what nwaku and go-waku stores key on:
  ``sha256(pubsub_topic || payload || content_topic || meta || timestamp_be64)``; absent meta
  is empty, an unset timestamp still contributes 8 zero bytes (nwaku; js-waku differs).
- :func:`envelope_hash`: Waku v1, keccak256 of the envelope's RLP encoding.
- :func:`store_v2_digest`: legacy store v2-beta4 ``Index.digest``, ``sha256(content_topic ||
  payload)``.
- :func:`muid`: the codex ADR 0001 message unique id (not deployed), kept as an option.
"""

from __future__ import annotations

import hashlib
import struct
from typing import TYPE_CHECKING

from waku_legacy.crypto.keccak import keccak256

if TYPE_CHECKING:
    from waku_legacy.proto.waku_message_pb2 import WakuMessage

__all__ = [
    "deterministic_hash",
    "envelope_hash",
    "message_hash",
    "muid",
    "store_v2_digest",
]

_BE64 = struct.Struct(">q")


def deterministic_hash(
    pubsub_topic: str,
    payload: bytes,
    content_topic: str,
    meta: bytes = b"",
    timestamp: int = 0,
) -> bytes:
    """The 32-byte 14/WAKU2-MESSAGE deterministic hash (nwaku / go-waku flavour)."""
    h = hashlib.sha256(pubsub_topic.encode())
    h.update(payload)
    h.update(content_topic.encode())
    h.update(meta)
    h.update(_BE64.pack(timestamp))
    return h.digest()


def message_hash(pubsub_topic: str, message: WakuMessage) -> bytes:
    """Deterministic hash of a protobuf ``WakuMessage`` published on ``pubsub_topic``."""
    return deterministic_hash(
        pubsub_topic, message.payload, message.content_topic, message.meta, message.timestamp
    )


def envelope_hash(envelope_rlp: bytes) -> bytes:
    """Waku v1 envelope hash: keccak256 of the envelope's RLP bytes."""
    return keccak256(envelope_rlp)


def store_v2_digest(content_topic: str, payload: bytes) -> bytes:
    """Legacy store (v2-beta4) cursor digest."""
    return hashlib.sha256(content_topic.encode() + payload).digest()


def muid(network_topic: str, content_topic: str, meta: bytes, payload: bytes) -> bytes:
    """Codex ADR 0001 MUID: ``sha256(network_topic || content_topic || meta || payload)``
    followed by ``meta``, so that the application-chosen part stays readable."""
    digest = hashlib.sha256(
        network_topic.encode() + content_topic.encode() + meta + payload
    ).digest()
    return digest + meta
