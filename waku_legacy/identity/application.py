"""The application layer of a Status message: its signed wrapper, its author and its id (pure).

status-go (``protocol/v1/status_message.go`` ``HandleApplicationLayer`` and
``protocol/v1/message.go`` ``MessageID`` at ``c72f491``) opens the decrypted
26/WAKU-PAYLOAD data in two steps: the encryption layer (a ``ProtocolMessage`` whose
``public_message`` is the application bytes, or the bare bytes when that fails:
:func:`waku_legacy.proto.status_layers.open_layers`), then the ``ApplicationMetadataMessage``
``{signature, payload, type}``. The author is the key that ``signature`` recovers over
``keccak256(payload)`` (``utils.RecoverKey``), and the message id is
``keccak256(FromECDSAPub(author) || application bytes)``: the 65-byte uncompressed key and
the whole serialized ``ApplicationMetadataMessage``, as received.

The key's encoding: ``MessageID`` has hashed the 65-byte key (``crypto.FromECDSAPub``) since
status-protocol-go ``c2b7b02`` (2019-07-31, "move status-react compliant messages storage and
API", ``v1/message.go``); before it, from ``db4b212`` (2019-07-16) to ``28b2244``
(2019-07-26), it hashed the 33-byte compressed key (``crypto.CompressPubkey``). That code
moved into status-go unchanged (``ed5a5c154``, 2019-11-21, "Move to monorepo structure") and
has stayed so to ``c72f491`` (its doc comment still says "compressed"). Communities arrived in
2021, so every community message id is the 65-byte form; :func:`legacy_message_id` computes
the other so a reader can accept either for references written by a July 2019 client.

Every caller that needs a message's author or id (the members' preview, the readable
history) opens it here, so the rule lives in one place.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from waku_legacy.crypto.keccak import keccak256
from waku_legacy.crypto.secp256k1 import (
    compress_public_key,
    recover_public_key,
    uncompressed_public_key,
)
from waku_legacy.proto import application_metadata_pb2
from waku_legacy.proto.codec import parse_message
from waku_legacy.proto.status_layers import open_layers

__all__ = [
    "MAX_TEXT_LENGTH",
    "MAX_WHISPER_FUTURE_DRIFT_MS",
    "OpenedApplication",
    "legacy_message_id",
    "message_id",
    "open_application",
    "refuse_chat_message",
]

MAX_WHISPER_FUTURE_DRIFT_MS = 120_000  # maxWhisperFutureDriftMs
MAX_TEXT_LENGTH = 4096  # maxChatMessageTextLength (runes)
_UNKNOWN_MESSAGE_TYPES = (0, 4)  # UNKNOWN_MESSAGE_TYPE, SYSTEM_MESSAGE_PRIVATE_GROUP
_IMAGE, _DISCORD, _BRIDGE = 7, 12, 18  # ChatMessage.ContentType
_TRANSACTION_COMMAND = 5


def message_id(author_key: bytes, application: bytes) -> bytes:
    """status-go's ``MessageID``: ``keccak256(65-byte author key || application bytes)``.
    ``author_key`` may be 33, 64 or 65 bytes (it is normalised);
    :class:`~waku_legacy.errors.CryptoError` when it is no secp256k1 key."""
    return keccak256(uncompressed_public_key(bytes(author_key)) + bytes(application))


def legacy_message_id(author_key: bytes, application: bytes) -> bytes:
    """The id status-protocol-go computed before ``c2b7b02`` (July 2019): the 33-byte
    compressed key instead of the 65-byte one."""
    return keccak256(compress_public_key(bytes(author_key)) + bytes(application))


@dataclass(frozen=True, slots=True)
class OpenedApplication:
    author: bytes  # 65-byte uncompressed key recovered from the signature
    message_id: bytes  # 32 bytes, :func:`message_id`
    type: int  # ApplicationMetadataMessage.Type
    payload: bytes  # the application message (ChatMessage, EmojiReaction, ...)
    application: bytes  # the serialized ApplicationMetadataMessage, as received
    layering: str  # status_layers.PROTOCOL_MESSAGE or status_layers.BARE

    def legacy_message_id(self) -> bytes:
        """:func:`legacy_message_id` of this message; the recovered key is a valid point, so
        its compressed form is its parity byte and X (no parse)."""
        compressed = bytes([2 + (self.author[64] & 1)]) + self.author[1:33]
        return keccak256(compressed + self.application)


def open_application(data: bytes, what: str, *, max_size: int) -> OpenedApplication:
    """Open decrypted 26/WAKU-PAYLOAD data as status-go does: the encryption layer, the
    ``ApplicationMetadataMessage``, its signer and the message id.

    Raises :class:`~waku_legacy.proto.codec.ProtobufDecodeError` (not an
    ``ApplicationMetadataMessage``, or over ``max_size`` bytes) or
    :class:`~waku_legacy.errors.SignatureError` (no signature, or one that recovers no key).
    """
    layering, _, application = open_layers(bytes(data), what, max_size=max_size)
    wrapper = parse_message(
        application_metadata_pb2.ApplicationMetadataMessage, application,
        "ApplicationMetadataMessage", max_size=max_size,
    )  # fmt: skip
    author = recover_public_key(keccak256(wrapper.payload), wrapper.signature)
    # keccak256(author || application) is message_id(): the recovered key is already 65 bytes
    return OpenedApplication(
        author, keccak256(author + application), int(wrapper.type), bytes(wrapper.payload),
        application, layering,
    )  # fmt: skip


def refuse_chat_message(chat: Any, whisper_ms: int) -> tuple[str, str] | None:
    """The first of ``ValidateReceivedChatMessage``'s checks (``protocol/message_validator.go``)
    that a ``ChatMessage`` fails, as (reason, detail): reason ``"clock_skew"`` for a clock over
    120 s past the envelope's time (``whisper_ms``, milliseconds), ``"other"`` for the rest;
    None when it passes. The content payload checks (sticker hash, image and audio payloads,
    bridge fields) and the display name's are the readable history's
    (:mod:`waku_legacy.history.decode`), which reads those payloads."""
    if chat.clock == 0:
        return "other", "clock can't be 0"
    if chat.clock > whisper_ms and chat.clock - whisper_ms > MAX_WHISPER_FUTURE_DRIFT_MS:
        return "clock_skew", f"clock {chat.clock} ms is over 120 s past the envelope's {whisper_ms}"
    if chat.timestamp == 0:
        return "other", "timestamp can't be 0"
    content = int(chat.content_type)
    if content not in (_DISCORD, _BRIDGE) and (content != _IMAGE or chat.text != ""):
        if not chat.text.strip():
            return "other", "text can't be empty"
        if len(chat.text) > MAX_TEXT_LENGTH:
            return "other", f"text longer than {MAX_TEXT_LENGTH}"
    if not chat.chat_id:
        return "other", "chatId can't be empty"
    if int(chat.message_type) in _UNKNOWN_MESSAGE_TYPES:
        return "other", "unknown message type"
    if content == 0:
        return "other", "unknown content type"
    if content == _TRANSACTION_COMMAND:
        return "other", "transaction commands are refused from others"
    return None
