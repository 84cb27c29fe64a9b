"""The magnet-link message: how the community tells its members where the archives are.

Layers, inside out (status-go ``dispatchMagnetlinkMessage``):

1. ``CommunityMessageArchiveMagnetlink{clock (ms), magnet_uri}``;
2. ``ApplicationMetadataMessage{signature, payload, type = 43}`` with ``signature`` the
   65-byte ``r || s || v`` secp256k1 signature of ``keccak256(payload)`` by the COMMUNITY key;
3. a 26/WAKU-PAYLOAD (signed, padded) encrypted with the magnet-link chat's symmetric key
   (PBKDF2 of ``<community id>-magnetlinks``);
4. a v2 ``WakuMessage`` (version 1) on that chat's content topic, published on the community's
   pubsub topic: as protobuf, or as the JSON body of nwaku's
   ``POST /relay/v1/messages/{urlencoded pubsub topic}``.

Members accept it only when the signer's compressed key is the community id and its clock is
newer than the last accepted one (:func:`verify_magnet_message`).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import urllib.parse
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import coincurve

from waku_legacy.archive.errors import ForgedMagnetMessage, MagnetMessageError, StaleMagnetMessage
from waku_legacy.archive.torrent import parse_magnet_uri
from waku_legacy.crypto.keccak import keccak256
from waku_legacy.crypto.secp256k1 import (
    compress_public_key,
    recover_public_key,
    sign_recoverable,
)
from waku_legacy.errors import ConfigError, CryptoError, DecodeError
from waku_legacy.identity.topics import (
    CommunityId,
    content_topic_of_chat,
    symmetric_key_for_chat,
)
from waku_legacy.proto import application_metadata_pb2, status_archive_pb2, waku_message_pb2
from waku_legacy.proto.codec import ProtobufDecodeError, parse_message

__all__ = [
    "COMMUNITY_ARCHIVE_MAGNETLINK",
    "MAX_MAGNET_MESSAGE_BYTES",
    "VerifiedMagnetLink",
    "build_magnet_message",
    "magnet_message_from_json",
    "relay_publish_body",
    "relay_publish_path",
    "verify_magnet_message",
    "wrap_application_message",
]

COMMUNITY_ARCHIVE_MAGNETLINK = (
    application_metadata_pb2.ApplicationMetadataMessage.COMMUNITY_ARCHIVE_MAGNETLINK
)
MAX_MAGNET_MESSAGE_BYTES = 64 * 1024  # a magnet link is ~250 bytes; anything huge is not one
WAKU_PAYLOAD_VERSION = 1


def _payload_codec() -> Any:
    from waku_legacy.mailserver_compat import payload  # 26/WAKU-PAYLOAD lives there

    return payload


def _parse(cls: Any, data: bytes, what: str) -> Any:
    try:
        return parse_message(cls, data, what, max_size=MAX_MAGNET_MESSAGE_BYTES)
    except ProtobufDecodeError as exc:
        raise MagnetMessageError(what, exc.reason) from exc


def wrap_application_message(
    payload: bytes, key: coincurve.PrivateKey, message_type: int = COMMUNITY_ARCHIVE_MAGNETLINK
) -> bytes:
    """``ApplicationMetadataMessage`` bytes, signed over keccak256(payload) with ``key``."""
    signature = sign_recoverable(keccak256(payload), key)
    return application_metadata_pb2.ApplicationMetadataMessage(
        signature=signature, payload=payload, type=message_type
    ).SerializeToString()


def _deterministic_random_source(
    community_key: coincurve.PrivateKey, magnet_uri: str, clock_ms: int
) -> Callable[[int], bytes]:
    """Padding, GCM nonce and ECIES randomness derived from what is being signed.

    The same (key, magnet link, clock) then gives the same message bytes, so a rerun writes
    identical files; a different link or clock gives a different nonce (a nonce is never
    reused with a different plaintext under the same key).
    """
    seed = hmac.new(
        community_key.secret,
        b"waku-legacy magnet-link message\x00" + magnet_uri.encode() + clock_ms.to_bytes(8, "big"),
        hashlib.sha256,
    ).digest()
    counter = 0

    def take(size: int) -> bytes:
        nonlocal counter
        out = bytearray()
        while len(out) < size:
            counter += 1
            out += hmac.new(seed, counter.to_bytes(8, "big"), hashlib.sha256).digest()
        return bytes(out[:size])

    return take


def build_magnet_message(
    community_key: coincurve.PrivateKey,
    magnet_uri: str,
    clock_ms: int,
    *,
    pubsub_topic: str,
    payload_signer: coincurve.PrivateKey | None = None,
    padding: bytes | None = None,
    random_source: Callable[[int], bytes] | None = None,
) -> waku_message_pb2.WakuMessage:
    """The v2 ``WakuMessage`` carrying a magnet link, signed by the community key.

    ``pubsub_topic`` is where it is to be published (the community's shard); it is checked for
    form here and used by :func:`relay_publish_path`. ``payload_signer`` signs the
    26/WAKU-PAYLOAD (status-go uses the sending node's identity; default: the community key).
    ``random_source`` defaults to a stream derived from the key, link and clock, so that the
    same inputs give the same bytes (reruns are byte-identical).
    """
    if not isinstance(pubsub_topic, str) or not pubsub_topic.startswith("/"):
        raise ConfigError(f"pubsub topic {pubsub_topic!r} does not look like /waku/2/...")
    if clock_ms <= 0:
        raise ConfigError(f"magnet-link clock must be positive milliseconds, got {clock_ms}")
    parse_magnet_uri(magnet_uri)  # refuse to sign something that is not a magnet link
    community = CommunityId(community_key.public_key.format(compressed=True))
    chat_id = community.magnetlinks_chat_id
    inner = status_archive_pb2.CommunityMessageArchiveMagnetlink(
        clock=clock_ms, magnet_uri=magnet_uri
    ).SerializeToString()
    application = wrap_application_message(inner, community_key)
    data = _payload_codec().encode_payload(
        application,
        sign_with=payload_signer or community_key,
        symmetric_key=symmetric_key_for_chat(chat_id),
        padding=padding,
        random_source=random_source
        or _deterministic_random_source(community_key, magnet_uri, clock_ms),
    )
    return waku_message_pb2.WakuMessage(
        payload=data,
        content_topic=content_topic_of_chat(chat_id),
        version=WAKU_PAYLOAD_VERSION,
        timestamp=clock_ms * 1_000_000,  # nanoseconds
    )


def relay_publish_body(message: waku_message_pb2.WakuMessage) -> dict[str, Any]:
    """JSON body of nwaku ``POST /relay/v1/messages/{pubsubTopic}`` (bytes as base64)."""
    body: dict[str, Any] = {
        "payload": base64.b64encode(message.payload).decode(),
        "contentTopic": message.content_topic,
    }
    if message.HasField("version"):
        body["version"] = message.version
    if message.HasField("timestamp"):
        body["timestamp"] = message.timestamp
    if message.HasField("meta"):
        body["meta"] = base64.b64encode(message.meta).decode()
    if message.HasField("ephemeral"):
        body["ephemeral"] = message.ephemeral
    return body


def relay_publish_path(pubsub_topic: str) -> str:
    """``/relay/v1/messages/<pubsub topic, URL-encoded>``."""
    return "/relay/v1/messages/" + urllib.parse.quote(pubsub_topic, safe="")


def magnet_message_from_json(body: Any) -> waku_message_pb2.WakuMessage:
    """Inverse of :func:`relay_publish_body` (e.g. a message read back from a REST store)."""
    if not isinstance(body, dict):
        raise MagnetMessageError("magnet-link message", "JSON body is not an object")
    if not isinstance(body.get("contentTopic"), str):
        raise MagnetMessageError("magnet-link message", "'contentTopic' must be a string")
    try:
        message = waku_message_pb2.WakuMessage(
            payload=base64.b64decode(body["payload"], validate=True),
            content_topic=body["contentTopic"],
        )
        if "version" in body:
            message.version = int(body["version"])
        if "timestamp" in body:
            message.timestamp = int(body["timestamp"])
        if "meta" in body:
            message.meta = base64.b64decode(body["meta"], validate=True)
    except (KeyError, ValueError, TypeError, OverflowError) as exc:  # Overflow: int(1e400)
        raise MagnetMessageError("magnet-link message", f"bad JSON body ({exc!r})") from exc
    return message


@dataclass(frozen=True, slots=True)
class VerifiedMagnetLink:
    clock: int  # milliseconds
    magnet_uri: str
    info_hash: str
    signer: bytes  # compressed key that signed the application message (= community id)


def verify_magnet_message(
    message: waku_message_pb2.WakuMessage | bytes,
    community: CommunityId,
    *,
    last_clock: int | None = None,
) -> VerifiedMagnetLink:
    """Open and check a magnet-link message as a member does.

    Raises MagnetMessageError (not a magnet-link message: wrong topic, version, type, bytes),
    ForgedMagnetMessage (not signed by the community key), StaleMagnetMessage (clock not newer
    than ``last_clock``); decryption failures surface as CryptoError.
    """
    what = "magnet-link message"
    if isinstance(message, bytes | bytearray | memoryview):
        if len(message) > MAX_MAGNET_MESSAGE_BYTES:
            raise MagnetMessageError(what, f"{len(message)} bytes is over the limit")
        message = _parse(waku_message_pb2.WakuMessage, bytes(message), what)
    chat_id = community.magnetlinks_chat_id
    expected_topic = content_topic_of_chat(chat_id)
    if message.content_topic != expected_topic:
        raise MagnetMessageError(
            what, f"content topic {message.content_topic!r} is not {expected_topic!r}"
        )
    if message.version != WAKU_PAYLOAD_VERSION:
        raise MagnetMessageError(what, f"payload version {message.version}, expected 1")
    if len(message.payload) > MAX_MAGNET_MESSAGE_BYTES:
        raise MagnetMessageError(what, f"payload of {len(message.payload)} bytes is over the limit")
    decoded = _payload_codec().decode_payload(
        message.payload, symmetric_key=symmetric_key_for_chat(chat_id)
    )
    application = _parse(
        application_metadata_pb2.ApplicationMetadataMessage, bytes(decoded.payload), what
    )
    if application.type != COMMUNITY_ARCHIVE_MAGNETLINK:
        raise MagnetMessageError(
            what, f"application message type {application.type}, expected 43 (archive magnet link)"
        )
    try:
        signer = compress_public_key(
            recover_public_key(keccak256(application.payload), application.signature)
        )
    except (CryptoError, DecodeError) as exc:
        raise ForgedMagnetMessage(f"{what}: signature does not recover ({exc})") from exc
    if signer != community.public_key:
        raise ForgedMagnetMessage(
            f"{what}: signed by 0x{signer.hex()}, not by the community {community}"
        )
    link = _parse(status_archive_pb2.CommunityMessageArchiveMagnetlink, application.payload, what)
    if last_clock is not None and link.clock <= last_clock:
        raise StaleMagnetMessage(
            what, f"clock {link.clock} is not newer than the last accepted {last_clock}"
        )
    parsed = parse_magnet_uri(link.magnet_uri)
    return VerifiedMagnetLink(link.clock, link.magnet_uri, parsed.info_hash, signer)
