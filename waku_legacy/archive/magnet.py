"""The archive-link message: how the community tells its members where the archives are.

Layers, inside out, as status-go's ``dispatchArchiveLinkMessage``
(``protocol/messenger_communities.go``) and ``SendPublic`` (``protocol/common/message_sender.go``)
emit it:

1. ``CommunityMessageArchiveLink{clock (ms), archive_link}`` (renamed from
   ``CommunityMessageArchiveMagnetlink{clock, magnet_uri}``: same field numbers, same bytes);
2. ``ApplicationMetadataMessage{signature, payload, type = 43}`` (type
   ``COMMUNITY_MESSAGE_ARCHIVE_LINK``, formerly ``COMMUNITY_ARCHIVE_MAGNETLINK``) with
   ``signature`` the 65-byte ``r || s || v`` secp256k1 signature of ``keccak256(payload)`` by
   the COMMUNITY key (``RawMessage.Sender = community.PrivateKey()``);
3. the encryption layer's ``ProtocolMessage{installation_id = 2, public_message = 102}``
   (``BuildPublicMessage``, ``protocol/encryption/protocol.go``): the archive-link message is
   not marked ``SkipEncryptionLayer``, so ``SendPublic`` wraps it. Receivers fall back to a
   bare ApplicationMetadataMessage when this layer does not parse (``HandleEncryptionLayer``),
   which is how the 2024-style messages this project used to publish are still read;
4. a 26/WAKU-PAYLOAD signed by the SENDING NODE's identity key (``Transport.SendPublic`` ->
   ``addSig``, ``protocol/transport/transport.go``; a receiver drops a payload without a
   signature: ``StatusMessage.HandleTransportLayer`` needs ``Sig``), symmetric-encrypted with
   the chat's key: PBKDF2 of the chat id (``FiltersManager.addSymmetric`` ->
   ``AddSymKeyFromPassword(chatID)``, ``protocol/transport/filters_manager.go``);
5. a v2 ``WakuMessage`` (version 1) on the chat's content topic (``keccak256(chat id)[:4]`` as
   ``/waku/1/0x…/rfc26``), ``meta`` set to empty bytes and ``ephemeral`` to false explicitly
   (``Post``, ``wakuv2/api.go``), published on the community's pubsub topic: as protobuf, or
   as the JSON body of nwaku's ``POST /relay/v1/messages/{urlencoded pubsub topic}``.

The chat: current status-go sends on the community's universal chat ``<id>-memberUpdate``
(``community.UniversalChatID()``); clients from 2024 read ``<id>-magnetlinks``, the newest ones
only the universal chat. :func:`build_archive_link_messages` builds one message per chat a
community's ``archive_link_chats`` setting asks for (default both).

Members accept it only when the signer of the ApplicationMetadataMessage is the community and
its clock is at least the last accepted one (:func:`verify_magnet_message`; status-go's
``clock >= lastArchiveLinkClock``; choosing a clock to publish with: :mod:`.clock`); the chat it
arrived on is not checked by status-go, so either topic is accepted here.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import urllib.parse
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

import coincurve
from google.protobuf.message import Message

from waku_legacy.archive.errors import ForgedMagnetMessage, MagnetMessageError, StaleMagnetMessage
from waku_legacy.archive.torrent import parse_magnet_uri
from waku_legacy.crypto.keccak import keccak256
from waku_legacy.crypto.payload import decode_payload, encode_payload
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
from waku_legacy.proto import (
    application_metadata_pb2,
    status_archive_pb2,
    waku_message_pb2,
)
from waku_legacy.proto.codec import ProtobufDecodeError, parse_message
from waku_legacy.proto.status_layers import (
    PROTOCOL_MESSAGE,
    open_layers,
    wrap_protocol_message,
)

__all__ = [
    "ARCHIVE_LINK_CHATS",
    "BOTH",
    "COMMUNITY_ARCHIVE_MAGNETLINK",
    "COMMUNITY_MESSAGE_ARCHIVE_LINK",
    "MAGNETLINKS",
    "MAX_MAGNET_MESSAGE_BYTES",
    "UNIVERSAL",
    "OpenedArchiveLink",
    "VerifiedMagnetLink",
    "archive_link_chat_id",
    "archive_link_chats",
    "build_archive_link_message",
    "build_archive_link_messages",
    "build_magnet_message",
    "installation_id_for",
    "magnet_message_from_json",
    "open_archive_link_message",
    "open_signed_archive_link",
    "relay_publish_body",
    "relay_publish_path",
    "verify_magnet_message",
    "wrap_application_message",
]

COMMUNITY_MESSAGE_ARCHIVE_LINK = (
    application_metadata_pb2.ApplicationMetadataMessage.COMMUNITY_MESSAGE_ARCHIVE_LINK
)
COMMUNITY_ARCHIVE_MAGNETLINK = COMMUNITY_MESSAGE_ARCHIVE_LINK  # the 2024 name of type 43
MAX_MAGNET_MESSAGE_BYTES = 64 * 1024  # a magnet link is ~250 bytes; anything huge is not one
WAKU_PAYLOAD_VERSION = 1

# Which chats an archive link goes to (the per-community ``archive_link_chats`` setting).
UNIVERSAL = "universal"  # <id>-memberUpdate: what current status-go sends and reads
MAGNETLINKS = "magnetlinks"  # <id>-magnetlinks: what clients from 2024 (and older) read
BOTH = "both"
ARCHIVE_LINK_CHATS = (BOTH, UNIVERSAL, MAGNETLINKS)

# How the 26/WAKU-PAYLOAD's plaintext was layered (what a reader saw).


_Message = TypeVar("_Message", bound=Message)


def _parse(cls: type[_Message], data: bytes, what: str) -> _Message:
    try:
        return parse_message(cls, data, what, max_size=MAX_MAGNET_MESSAGE_BYTES)
    except ProtobufDecodeError as exc:
        raise MagnetMessageError(what, exc.reason) from exc


def archive_link_chats(setting: str) -> tuple[str, ...]:
    """``"both"`` -> ``("universal", "magnetlinks")`` (universal first); one chat -> itself."""
    if setting == BOTH:
        return (UNIVERSAL, MAGNETLINKS)
    if setting in (UNIVERSAL, MAGNETLINKS):
        return (setting,)
    raise ConfigError(
        f"archive_link_chats must be one of {', '.join(map(repr, ARCHIVE_LINK_CHATS))}, "
        f"got {setting!r}"
    )


def archive_link_chat_id(community: CommunityId, chat: str) -> str:
    """The chat id an archive link is sent on: ``<id>-memberUpdate`` or ``<id>-magnetlinks``."""
    if chat == UNIVERSAL:
        return community.universal_chat_id
    if chat == MAGNETLINKS:
        return community.magnetlinks_chat_id
    raise ConfigError(f"archive-link chat must be {UNIVERSAL!r} or {MAGNETLINKS!r}, got {chat!r}")


def installation_id_for(signer: coincurve.PublicKey) -> str:
    """A stable device id for the payload signer (status-go's are random UUIDv4 strings).

    Receivers do not look at it for public messages (``Protocol.HandleMessage`` returns the
    public message before any use of the installation id); deriving it from the signer keeps
    reruns byte-identical.
    """
    digest = hashlib.sha256(
        b"waku-legacy installation id\x00" + signer.format(compressed=True)
    ).digest()
    return str(uuid.UUID(bytes=digest[:16], version=4))


def wrap_application_message(
    payload: bytes,
    key: coincurve.PrivateKey,
    message_type: application_metadata_pb2.ApplicationMetadataMessage.Type = (
        COMMUNITY_MESSAGE_ARCHIVE_LINK
    ),
) -> bytes:
    """``ApplicationMetadataMessage`` bytes, signed over keccak256(payload) with ``key``."""
    signature = sign_recoverable(keccak256(payload), key)
    return application_metadata_pb2.ApplicationMetadataMessage(
        signature=signature, payload=payload, type=message_type
    ).SerializeToString()


def _deterministic_random_source(
    community_key: coincurve.PrivateKey,
    magnet_uri: str,
    clock_ms: int,
    chat_id: str,
    payload_signer: coincurve.PrivateKey,
) -> Callable[[int], bytes]:
    """Padding, GCM nonce and ECIES randomness derived from what is being signed.

    The same (key, link, clock, chat, signer) then gives the same message bytes, so a rerun
    writes identical files; a different link, clock or chat gives a different nonce (a nonce
    is never reused with a different plaintext under the same key).
    """
    seed = hmac.new(
        community_key.secret,
        b"waku-legacy archive-link message\x00"
        + magnet_uri.encode()
        + b"\x00"
        + chat_id.encode()
        + b"\x00"
        + payload_signer.public_key.format(compressed=True)
        + clock_ms.to_bytes(8, "big"),
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


def build_archive_link_message(
    community_key: coincurve.PrivateKey,
    magnet_uri: str,
    clock_ms: int,
    *,
    pubsub_topic: str,
    chat: str = UNIVERSAL,
    payload_signer: coincurve.PrivateKey | None = None,
    installation_id: str | None = None,
    padding: bytes | None = None,
    random_source: Callable[[int], bytes] | None = None,
    backend: str = "torrent",
) -> waku_message_pb2.WakuMessage:
    """The v2 ``WakuMessage`` carrying an archive link on one chat, layered as status-go does.

    ``chat``: ``"universal"`` (``<id>-memberUpdate``, default) or ``"magnetlinks"``.
    ``pubsub_topic`` is where it is to be published (the community's shard); it is checked for
    form here and used by :func:`relay_publish_path`. ``payload_signer`` signs the
    26/WAKU-PAYLOAD (status-go: the sending node's identity key; here the configured operator
    key, default the community key). ``clock_ms`` is the link's clock, chosen by the caller.
    ``random_source`` defaults to a stream derived from the key, link, clock, chat and signer,
    so that the same inputs give the same bytes (reruns are byte-identical).
    """
    if not isinstance(pubsub_topic, str) or not pubsub_topic.startswith("/"):
        raise ConfigError(f"pubsub topic {pubsub_topic!r} does not look like /waku/2/...")
    if clock_ms <= 0:
        raise ConfigError(f"archive-link clock must be positive milliseconds, got {clock_ms}")
    _check_link(magnet_uri, backend)  # refuse to sign something that is not that kind of link
    community = CommunityId(community_key.public_key.format(compressed=True))
    chat_id = archive_link_chat_id(community, chat)
    signer = payload_signer or community_key
    inner = status_archive_pb2.CommunityMessageArchiveLink(
        clock=clock_ms, archive_link=magnet_uri
    ).SerializeToString()
    application = wrap_application_message(inner, community_key)
    layered = wrap_protocol_message(
        application, installation_id or installation_id_for(signer.public_key)
    )
    data = encode_payload(
        layered,
        sign_with=signer,
        symmetric_key=symmetric_key_for_chat(chat_id),
        padding=padding,
        random_source=random_source
        or _deterministic_random_source(community_key, magnet_uri, clock_ms, chat_id, signer),
    )
    return waku_message_pb2.WakuMessage(
        payload=data,
        content_topic=content_topic_of_chat(chat_id),
        version=WAKU_PAYLOAD_VERSION,
        timestamp=clock_ms * 1_000_000,  # nanoseconds
        meta=b"",  # status-go's Post sets both explicitly (present on the wire)
        ephemeral=False,
    )


build_magnet_message = build_archive_link_message  # the name callers used before issue 12


def _check_link(link: str, backend: str) -> str:
    """The info hash of a magnet link (torrent back end), "" for a Logos Storage CID.

    A link is only accepted for its own back end: a member reads the link with its back end,
    so a torrent member handed a CID (or the reverse) cancels its download and fails."""
    from waku_legacy.archive.logos_storage import LOGOS_STORAGE, TORRENT, check_cid

    if backend == LOGOS_STORAGE:
        if link.startswith("magnet:"):
            raise ConfigError(
                "the logos-storage back end publishes an index CID, not a magnet link"
            )
        check_cid(link, "archive link (Logos Storage index CID)")
        return ""
    if backend != TORRENT:
        raise ConfigError(f'archive back end must be "torrent" or "logos-storage", got {backend!r}')
    return parse_magnet_uri(link).info_hash


def build_archive_link_messages(
    community_key: coincurve.PrivateKey,
    magnet_uri: str,
    clock_ms: int,
    *,
    pubsub_topic: str,
    chats: str = BOTH,
    payload_signer: coincurve.PrivateKey | None = None,
    backend: str = "torrent",
) -> list[tuple[str, waku_message_pb2.WakuMessage]]:
    """``(chat, message)`` for every chat ``chats`` names (universal first), same clock."""
    out = []
    for chat in archive_link_chats(chats):
        message = build_archive_link_message(
            community_key, magnet_uri, clock_ms, pubsub_topic=pubsub_topic, chat=chat,
            payload_signer=payload_signer, backend=backend,
        )  # fmt: skip
        out.append((chat, message))
    return out


def relay_publish_body(message: waku_message_pb2.WakuMessage) -> dict[str, Any]:
    """JSON body of nwaku ``POST /relay/v1/messages/{pubsubTopic}`` (bytes as base64).

    ``meta`` and ``ephemeral`` are passed when the message has them (an archive-link message
    does: ``""`` and ``false``); nwaku re-encodes the message itself and leaves out zero values
    (``write3``, ``waku/waku_core/message/codec.nim``), which changes no message hash.
    """
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
    if "ephemeral" in body and not isinstance(body["ephemeral"], bool):
        raise MagnetMessageError("magnet-link message", "'ephemeral' must be true or false")
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
        if "ephemeral" in body:
            message.ephemeral = body["ephemeral"]
    except (KeyError, ValueError, TypeError, OverflowError) as exc:  # Overflow: int(1e400)
        raise MagnetMessageError("magnet-link message", f"bad JSON body ({exc!r})") from exc
    return message


@dataclass(frozen=True, slots=True)
class OpenedArchiveLink:
    """An archive-link message opened down to its ApplicationMetadataMessage (not yet checked
    against the community key)."""

    chat: str  # "universal" or "magnetlinks": which chat's topic (and key) it came on
    chat_id: str
    layering: str  # PROTOCOL_MESSAGE or BARE
    installation_id: str | None  # ProtocolMessage.installation_id (None when bare)
    payload_signer: bytes | None  # compressed key that signed the 26/WAKU-PAYLOAD
    application: application_metadata_pb2.ApplicationMetadataMessage


def open_archive_link_message(
    message: waku_message_pb2.WakuMessage | bytes, community: CommunityId
) -> OpenedArchiveLink:
    """Topic, version, decryption, payload signature and layering (both layerings read)."""
    what = "magnet-link message"
    if isinstance(message, bytes | bytearray | memoryview):
        if len(message) > MAX_MAGNET_MESSAGE_BYTES:
            raise MagnetMessageError(what, f"{len(message)} bytes is over the limit")
        message = _parse(waku_message_pb2.WakuMessage, bytes(message), what)
    topics = {archive_link_chat_id(community, c): c for c in (UNIVERSAL, MAGNETLINKS)}
    by_topic = {content_topic_of_chat(chat_id): chat_id for chat_id in topics}
    chat_id = by_topic.get(message.content_topic)
    if chat_id is None:
        expected = " nor ".join(f"{t!r} ({c})" for t, c in by_topic.items())
        raise MagnetMessageError(
            what, f"content topic {message.content_topic!r} is neither {expected}"
        )
    if message.version != WAKU_PAYLOAD_VERSION:
        raise MagnetMessageError(what, f"payload version {message.version}, expected 1")
    if len(message.payload) > MAX_MAGNET_MESSAGE_BYTES:
        raise MagnetMessageError(what, f"payload of {len(message.payload)} bytes is over the limit")
    decoded = decode_payload(
        message.payload, symmetric_key=symmetric_key_for_chat(chat_id)
    )
    if decoded.signer is None:
        raise MagnetMessageError(
            what,
            "the 26/WAKU-PAYLOAD is not signed; status-go drops such a message "
            "(HandleTransportLayer needs the signature)",
        )
    layering, installation_id, application_bytes = open_layers(
        bytes(decoded.payload), what, max_size=MAX_MAGNET_MESSAGE_BYTES
    )
    application = _parse(
        application_metadata_pb2.ApplicationMetadataMessage, application_bytes, what
    )
    return OpenedArchiveLink(
        chat=topics[chat_id],
        chat_id=chat_id,
        layering=layering,
        installation_id=installation_id,
        payload_signer=compress_public_key(decoded.signer),
        application=application,
    )


@dataclass(frozen=True, slots=True)
class VerifiedMagnetLink:
    clock: int  # milliseconds
    magnet_uri: str
    info_hash: str
    signer: bytes  # compressed key that signed the application message (= community id)
    chat: str = UNIVERSAL  # which chat it was on ("universal" or "magnetlinks")
    layering: str = PROTOCOL_MESSAGE  # PROTOCOL_MESSAGE or BARE
    payload_signer: bytes | None = None  # compressed key that signed the 26/WAKU-PAYLOAD
    installation_id: str | None = None


def open_signed_archive_link(
    message: waku_message_pb2.WakuMessage | bytes, community: CommunityId
) -> tuple[OpenedArchiveLink, Any, bytes]:
    """The opened layers, the ``CommunityMessageArchiveLink`` and its (compressed) signer of
    an archive-link message signed by the community key, whatever its clock and link kind.

    Raises MagnetMessageError (not an archive-link message) or ForgedMagnetMessage (not
    signed by the community key); decryption failures surface as CryptoError.
    """
    what = "magnet-link message"
    opened = open_archive_link_message(message, community)
    application = opened.application
    if application.type != COMMUNITY_MESSAGE_ARCHIVE_LINK:
        raise MagnetMessageError(
            what,
            f"application message type {application.type}, expected 43 "
            "(COMMUNITY_MESSAGE_ARCHIVE_LINK)",
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
    link = _parse(status_archive_pb2.CommunityMessageArchiveLink, application.payload, what)
    return opened, link, signer


def verify_magnet_message(
    message: waku_message_pb2.WakuMessage | bytes,
    community: CommunityId,
    *,
    last_clock: int | None = None,
    backend: str = "torrent",
) -> VerifiedMagnetLink:
    """Open and check an archive-link message as a member does.

    Accepted on either chat (``-memberUpdate`` or ``-magnetlinks``) and in either layering
    (``ProtocolMessage``-wrapped or bare). Raises MagnetMessageError (not an archive-link
    message: wrong topic, version, type, bytes, unsigned payload), ForgedMagnetMessage (not
    signed by the community key), StaleMagnetMessage (clock lower than ``last_clock``;
    equal is accepted, as status-go does);
    decryption failures surface as CryptoError.
    """
    what = "magnet-link message"
    opened, link, signer = open_signed_archive_link(message, community)
    # status-go accepts ``clock >= lastArchiveLinkClock`` (HandleHistoryArchiveLinkMessage,
    # protocol/messenger_handler.go): an equal clock is accepted, only a lower one is stale.
    if last_clock is not None and link.clock < last_clock:
        raise StaleMagnetMessage(
            what, f"clock {link.clock} is lower than the last accepted {last_clock}"
        )
    info_hash = _check_link(link.archive_link, backend)  # "" for a Logos Storage CID
    return VerifiedMagnetLink(
        link.clock, link.archive_link, info_hash, signer, opened.chat, opened.layering,
        opened.payload_signer, opened.installation_id,
    )  # fmt: skip
