"""Topics and chat identities of Status on Waku v1 and v2.

- v1 topic (4 bytes) <-> v2 content topic ``/waku/1/0x<8 lowercase hex>/rfc26``.
- Status chat topic: ``keccak256(chat_id UTF-8)[:4]``.
- Community id: ``0x`` + hex of a 33-byte compressed secp256k1 public key. A channel's chat
  id is ``<community id><channel uuid>``; the magnet-link chat is ``<community id>-magnetlinks``
  and the "universal" chat is ``<community id>-memberUpdate`` (status-go
  ``protocol/communities/community.go``: ``UniversalChatID()`` returns
  ``MemberUpdateChannelID()``; current clients send the archive link and, since PR #5864,
  every community chat message on it). Both are public chats: topic and key from the chat id.
- Public-chat symmetric key: PBKDF2 of the chat id (see ``crypto.symmetric``); the same
  derivation of ``status-offline-inbox`` is the default v1 mailserver request key.
"""

from __future__ import annotations

import functools
import re
import uuid
from dataclasses import dataclass

from waku_legacy.crypto.keccak import keccak256
from waku_legacy.crypto.secp256k1 import uncompressed_public_key
from waku_legacy.crypto.symmetric import key_from_password
from waku_legacy.errors import CryptoError, InvalidCommunityId, InvalidTopic

__all__ = [
    "MAILSERVER_REQUEST_PASSWORD",
    "V1_TOPIC_SIZE",
    "CommunityId",
    "chat_topic",
    "content_topic_of_chat",
    "mailserver_request_key",
    "symmetric_key_for_chat",
    "v1_topic_from_content_topic",
    "v1_topic_to_content_topic",
]

V1_TOPIC_SIZE = 4
MAILSERVER_REQUEST_PASSWORD = "status-offline-inbox"
_V1_CONTENT_TOPIC = re.compile(r"/waku/1/0x([0-9a-f]{8})/rfc26")
_COMMUNITY_ID = re.compile(r"0x([0-9a-fA-F]{66})")


def v1_topic_to_content_topic(topic: bytes) -> str:
    """``[1a 2b 3c 4d]`` -> ``/waku/1/0x1a2b3c4d/rfc26``."""
    if len(topic) != V1_TOPIC_SIZE:
        raise InvalidTopic("v1 topic", f"must be 4 bytes, got {len(topic)}")
    return f"/waku/1/0x{topic.hex()}/rfc26"


def v1_topic_from_content_topic(content_topic: str) -> bytes:
    """Inverse of :func:`v1_topic_to_content_topic`; only the canonical lowercase form."""
    match = _V1_CONTENT_TOPIC.fullmatch(content_topic)
    if match is None:
        raise InvalidTopic(
            "v1 content topic",
            f"{content_topic!r} is not of the form /waku/1/0x<8 lowercase hex>/rfc26",
        )
    return bytes.fromhex(match.group(1))


def is_v1_content_topic(content_topic: str) -> bool:
    return _V1_CONTENT_TOPIC.fullmatch(content_topic) is not None


def chat_topic(chat_id: str) -> bytes:
    """4-byte Waku v1 topic of a Status chat: first 4 bytes of keccak256(chat id)."""
    return keccak256(chat_id.encode("utf-8"))[:V1_TOPIC_SIZE]


def content_topic_of_chat(chat_id: str) -> str:
    """The v2 content topic carrying a Status chat's v1-era messages."""
    return v1_topic_to_content_topic(chat_topic(chat_id))


def symmetric_key_for_chat(chat_id: str) -> bytes:
    """Public-chat style symmetric key of a chat (status-go's password derivation)."""
    return key_from_password(chat_id)


def mailserver_request_key() -> bytes:
    """Default symmetric key of deprecated (encrypted-envelope) mailserver requests."""
    return key_from_password(MAILSERVER_REQUEST_PASSWORD)


@dataclass(frozen=True, slots=True)
class CommunityId:
    """A Status community, identified by its 33-byte compressed public key."""

    public_key: bytes

    def __post_init__(self) -> None:
        if len(self.public_key) != 33 or self.public_key[0] not in (2, 3):
            raise InvalidCommunityId(
                "community id", "must be a 33-byte compressed secp256k1 key (02/03 prefix)"
            )
        try:
            uncompressed_public_key(self.public_key)
        except CryptoError as exc:
            raise InvalidCommunityId("community id", "the key is not a point on secp256k1") from exc

    @classmethod
    def parse(cls, text: str) -> CommunityId:
        """Parse ``0x`` + 66 hex digits (case-insensitive)."""
        if not isinstance(text, str):
            raise InvalidCommunityId(
                "community id", f"expected a string, got {type(text).__name__}"
            )
        match = _COMMUNITY_ID.fullmatch(text.strip())
        if match is None:
            raise InvalidCommunityId(
                "community id",
                f"{text[:80]!r} is not 0x followed by 66 hex digits (a compressed public key)",
            )
        return cls(bytes.fromhex(match.group(1)))

    def __str__(self) -> str:
        return "0x" + self.public_key.hex()

    @property
    def uncompressed(self) -> bytes:
        return uncompressed_public_key(self.public_key)

    @property
    def chat_id(self) -> str:
        """The community's own chat id (its id string); its topic carries descriptions."""
        return str(self)

    def channel_chat_id(self, channel_uuid: str) -> str:
        try:
            canonical = str(uuid.UUID(channel_uuid))
        except (ValueError, AttributeError, TypeError) as exc:
            raise InvalidTopic("channel uuid", f"{channel_uuid!r} is not a UUID") from exc
        if canonical != channel_uuid.lower():
            raise InvalidTopic(
                "channel uuid", f"{channel_uuid!r} is not in canonical 8-4-4-4-12 form"
            )
        return f"{self}{canonical}"

    def channel_of(self, chat_id: str) -> str | None:
        """The channel uuid of a chat id ``<id><uuid>`` (a ChatMessage's ``chat_id``), or None
        when it is not one of this community's channel chats (canonical uuid only).
        Remembered per (community, chat id): a community's messages name a few channels
        over and over, and reading the uuid cost ~1.8 us a message; only ids of a channel
        chat's length are remembered (a stranger's long ids never fill the memory)."""
        if len(chat_id) != _CHANNEL_CHAT_ID_LENGTH:
            return None
        return _channel_of(self, chat_id)

    @property
    def magnetlinks_chat_id(self) -> str:
        """``<id>-magnetlinks``: where 2024 clients (and older) read archive links."""
        return f"{self}-magnetlinks"

    @property
    def universal_chat_id(self) -> str:
        """``<id>-memberUpdate``, status-go's ``UniversalChatID()`` (the member-update chat).

        Current clients subscribe to it (``DefaultFilters``) and not to ``-magnetlinks``;
        ``dispatchArchiveLinkMessage`` sends the archive link here.
        """
        return f"{self}-memberUpdate"

    @property
    def universal_content_topic(self) -> str:
        """v2 content topic of :attr:`universal_chat_id` (``/waku/1/0x<keccak[:4]>/rfc26``)."""
        return content_topic_of_chat(self.universal_chat_id)


#: ``0x`` + 66 hex digits of the key, then a canonical uuid
_CHANNEL_CHAT_ID_LENGTH = 2 + 66 + 36


@functools.lru_cache(maxsize=1024)
def _channel_of(community: CommunityId, chat_id: str) -> str | None:
    prefix = str(community)
    if not chat_id.lower().startswith(prefix):
        return None
    rest = chat_id[len(prefix) :]
    try:
        value = str(uuid.UUID(rest))
    except ValueError:
        return None
    return value if value == rest.lower() else None
