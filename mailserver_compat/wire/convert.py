"""Conversions between Waku v1 envelopes, Waku v2 messages and status-go archive messages.

- v1 -> v2 (nwaku ``wakubridge.toWakuMessage``): payload = the envelope data unchanged (a
  26/WAKU-PAYLOAD, so version 1), content topic ``/waku/1/0x<topic>/rfc26``, timestamp =
  ``(expiry - ttl) * 10**9`` nanoseconds (int64 arithmetic, as nwaku: no uint32 wrap).
- v2 -> v1 (nwaku ``toWakuV1``): only version-1 messages on a v1-form content topic are
  bridged; the data is the payload unchanged, TTL 5 s, expiry ``now + ttl``, sealed to the
  bridge's PoW target (nwaku's default 0.002).
- v2 history -> v1 history (:func:`bridged_history_envelope`): a version-1 message that
  started on v2 is served to v1 clients as the envelope the bridge posted when it relayed
  it: the same ``toWakuV1`` conversion with "now" = the message's own timestamp (whole
  seconds), so expiry = sent + 5, TTL 5, nonce the first one reaching the PoW target
  (deterministic: the same message always gives the same envelope, DB key and cursor).
- decrypted v1 payload -> status-go archive ``WakuMessage`` (community history archives):
  ``sig`` is the signer's 65-byte uncompressed key (empty when unsigned), ``payload`` and
  ``padding`` the decrypted parts, ``topic`` 4 bytes, ``timestamp`` in seconds, ``hash``
  the message hash (envelope keccak256 for v1-era messages).
"""

from __future__ import annotations

import time

from waku_legacy.crypto.payload import DecodedPayload
from waku_legacy.errors import DecodeError, LimitExceeded
from waku_legacy.identity.topics import (
    V1_TOPIC_SIZE,
    v1_topic_from_content_topic,
    v1_topic_to_content_topic,
)
from waku_legacy.mailserver_compat.wire.envelope import DEFAULT_MAX_ENVELOPE_SIZE, Envelope
from waku_legacy.mailserver_compat.wire.pow import DEFAULT_MAX_ITERATIONS, seal
from waku_legacy.proto import status_archive_pb2, waku_message_pb2

__all__ = [
    "BRIDGE_POW",
    "BRIDGE_TTL",
    "PAYLOAD_VERSION_WAKU1",
    "ConversionError",
    "archive_message",
    "bridged_history_envelope",
    "envelope_to_waku_message",
    "waku_message_to_envelope",
]

PAYLOAD_VERSION_WAKU1 = 1
BRIDGE_TTL = 5  # nwaku wakubridge DefaultTTL, seconds
BRIDGE_POW = 0.002  # nwaku wakubridge default powRequirement
_NANOS = 10**9
_U64 = (1 << 64) - 1


class ConversionError(DecodeError):
    """A message that cannot be carried over to the other protocol version."""


def envelope_to_waku_message(envelope: Envelope) -> waku_message_pb2.WakuMessage:
    """The v2 message nwaku's bridge publishes for a v1 envelope."""
    return waku_message_pb2.WakuMessage(
        payload=envelope.data,
        content_topic=v1_topic_to_content_topic(envelope.topic),
        version=PAYLOAD_VERSION_WAKU1,
        timestamp=(envelope.expiry - envelope.ttl) * _NANOS,
    )


def waku_message_to_envelope(
    message: waku_message_pb2.WakuMessage,
    *,
    ttl: int = BRIDGE_TTL,
    target_pow: float = BRIDGE_POW,
    now: int | None = None,
    max_size: int = DEFAULT_MAX_ENVELOPE_SIZE,
    max_iterations: int = DEFAULT_MAX_ITERATIONS,
) -> Envelope:
    """The v1 envelope nwaku's bridge posts for a version-1 v2 message.

    ``ConversionError`` for other payload versions, ``InvalidTopic`` for content topics
    that are not ``/waku/1/0x<8 hex>/rfc26``, ``LimitExceeded`` for oversized payloads.
    """
    version = message.version if message.HasField("version") else 0
    if version != PAYLOAD_VERSION_WAKU1:
        raise ConversionError(
            "v2 message",
            f"payload version {version} cannot be bridged; only version 1 (26/WAKU-PAYLOAD) "
            "is meaningful to v1 nodes",
        )
    topic = v1_topic_from_content_topic(message.content_topic)
    if len(message.payload) > max_size:
        raise LimitExceeded(
            "v2 message", f"payload of {len(message.payload)} bytes is over {max_size} bytes"
        )
    current = int(time.time()) if now is None else now
    return seal(
        current + ttl, ttl, topic, bytes(message.payload), target_pow, max_iterations=max_iterations
    )


def bridged_history_envelope(
    *, content_topic: str, payload: bytes, version: int, timestamp: int | None
) -> Envelope:
    """The v1 envelope the v1<->v2 bridge built for a stored v2 message (see the module
    docstring): expiry = ``timestamp // 10**9 + BRIDGE_TTL``, sealed to ``BRIDGE_POW``.

    ``ConversionError`` for payload versions other than 1 and for timestamps a v1 envelope
    cannot carry (missing, negative, or past 2106); ``InvalidTopic`` for content topics that
    are not ``/waku/1/0x<8 hex>/rfc26``; ``LimitExceeded`` for oversized payloads.
    """
    if not timestamp or timestamp < 0:
        raise ConversionError(
            "v2 message", f"timestamp {timestamp!r}: a v1 envelope needs a positive sent time"
        )
    sent = timestamp // _NANOS
    if sent + BRIDGE_TTL > 0xFFFFFFFF:
        raise ConversionError(
            "v2 message", f"timestamp {timestamp} ns is past what a v1 expiry (uint32) holds"
        )
    message = waku_message_pb2.WakuMessage(
        payload=payload, content_topic=content_topic, version=version
    )
    return waku_message_to_envelope(message, now=sent)


def archive_message(
    *, message_hash: bytes, topic: bytes, timestamp: int, decoded: DecodedPayload
) -> status_archive_pb2.WakuMessage:
    """The status-go archive ``WakuMessage`` of a decrypted message (timestamp in seconds)."""
    if not isinstance(message_hash, bytes) or len(message_hash) != 32:
        raise ConversionError("archive message", "message hash must be 32 bytes")
    if not isinstance(topic, bytes) or len(topic) != V1_TOPIC_SIZE:
        raise ConversionError("archive message", f"topic must be {V1_TOPIC_SIZE} bytes")
    if not isinstance(timestamp, int) or not 0 <= timestamp <= _U64:
        raise ConversionError("archive message", f"timestamp {timestamp!r} is not a uint64")
    if timestamp > 1 << 40:  # ~ year 36812 in seconds: surely milli- or nanoseconds
        raise ConversionError(
            "archive message", f"timestamp {timestamp} looks like ms or ns, not seconds"
        )
    return status_archive_pb2.WakuMessage(
        sig=decoded.signer or b"",
        timestamp=timestamp,
        topic=topic,
        payload=decoded.payload,
        padding=decoded.padding,
        hash=message_hash,
    )
