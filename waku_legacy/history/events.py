"""What one Waku message of a community says at the Status application layer, decoded.

The contract between :mod:`.decode` (bytes -> one of these, as a member's client decodes them)
and the fold that builds the readable history (edits, deletes, reactions, pins and identities
applied to chat messages). Ids are ``"0x…"`` lowercase hex; keys are ``"0x04…"`` uncompressed
lowercase hex (status-go's ``PubkeyToHex``).
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = [
    "ChatMessageEvent",
    "DeleteEvent",
    "EditEvent",
    "Event",
    "IdentityEvent",
    "PinEvent",
    "ReactionEvent",
    "Undecodable",
    "WakuFacts",
]


@dataclass(frozen=True, slots=True)
class WakuFacts:
    """Where a decoded message came from (its provenance)."""

    waku_hash: str  # "0x…" deterministic v2 hash (v1 envelope hash for archived v1-era ones)
    content_topic: str
    pubsub_topic: str  # "" from archives
    whisper_timestamp: int  # seconds
    payload_signer: str  # "0x04…" 26/WAKU-PAYLOAD signer ("" when unsigned)
    archive_window: tuple[int, int] | None = None
    source: str = ""


@dataclass(frozen=True, slots=True)
class ChatMessageEvent:
    id: str
    author: str  # the ApplicationMetadataMessage signer
    chat_id: str  # "<community id><channel uuid>" as sent
    channel_id: str  # the uuid part ("" when the chat id is no channel of this community)
    clock: int
    timestamp_ms: int
    content_type: int
    text: str
    response_to: str = ""
    ens_name: str = ""
    display_name: str = ""  # from a ChatIdentity carried in the message, when present
    sticker_hash: str = ""
    image_type: str = ""  # "" unless the bytes sniff as jpeg/png/webp/gif
    image: bytes = b""  # the image bytes (capped; empty when refused)
    audio_duration_ms: int = 0
    discord_author: str = ""
    discord_timestamp: str = ""
    facts: WakuFacts | None = None
    # status-protocol-go's id before July 2019 (33-byte key): a reference may name it
    legacy_id: str = ""
    album_id: str = ""  # IMAGE: a delete of one image of an album deletes the whole album
    image_size: int = 0  # IMAGE: the payload's size as sent (also when refused)
    bridge_name: str = ""  # BRIDGE_MESSAGE: the bridge ("discord", ...) (untrusted)
    bridge_author: str = ""  # BRIDGE_MESSAGE: the author's name on the other side (untrusted)


@dataclass(frozen=True, slots=True)
class EditEvent:
    id: str
    author: str
    target_id: str  # EditMessage.message_id
    chat_id: str
    clock: int
    text: str
    facts: WakuFacts | None = None
    content_type: int = 0  # EditMessage.content_type; 0 keeps the original's


@dataclass(frozen=True, slots=True)
class DeleteEvent:
    id: str
    author: str
    target_id: str  # DeleteMessage.message_id
    chat_id: str
    clock: int
    facts: WakuFacts | None = None


@dataclass(frozen=True, slots=True)
class ReactionEvent:
    id: str
    author: str
    target_id: str  # EmojiReaction.message_id
    chat_id: str
    clock: int
    emoji: str  # status-go's emoji for EmojiReaction.Type
    retracted: bool
    facts: WakuFacts | None = None


@dataclass(frozen=True, slots=True)
class PinEvent:
    id: str
    author: str
    target_id: str  # PinMessage.message_id
    chat_id: str
    clock: int
    pinned: bool
    facts: WakuFacts | None = None


@dataclass(frozen=True, slots=True)
class IdentityEvent:
    author: str
    clock: int
    display_name: str
    facts: WakuFacts | None = None
    ens_name: str = ""  # the sender's ENS claim (unverified: shown marked as a claim)


@dataclass(frozen=True, slots=True)
class Undecodable:
    reason: str  # a short kind ("no signature", "not a status message", "protobuf", …)
    detail: str
    facts: WakuFacts | None = None


Event = (
    ChatMessageEvent
    | EditEvent
    | DeleteEvent
    | ReactionEvent
    | PinEvent
    | IdentityEvent
    | Undecodable
)
