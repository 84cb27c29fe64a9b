"""What one Waku message of a community says at the Status application layer, decoded.

The contract between :mod:`.decode` (bytes -> one of these, as a member's client decodes them)
and the fold that builds the readable history (edits, deletes, reactions, pins and identities
applied to chat messages). Ids are ``"0x…"`` lowercase hex; keys are ``"0x04…"`` uncompressed
lowercase hex (status-go's ``PubkeyToHex``).
"""

from __future__ import annotations

import operator
from dataclasses import dataclass, fields
from typing import Any

__all__ = [
    "EVENT_TYPES",
    "ChatMessageEvent",
    "DeleteEvent",
    "EditEvent",
    "Event",
    "IdentityEvent",
    "PinEvent",
    "ReactionEvent",
    "Undecodable",
    "WakuFacts",
    "event_from_values",
    "event_values",
    "whisper_timestamp_of",
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


#: every event type, in the order :func:`event_values` numbers them
EVENT_TYPES: tuple[type[Event], ...] = (
    ChatMessageEvent, EditEvent, DeleteEvent, ReactionEvent, PinEvent, IdentityEvent, Undecodable,
)  # fmt: skip
_CODES = {cls: code for code, cls in enumerate(EVENT_TYPES)}
# per type: its fields but ``facts`` read at once, and where ``facts`` goes among them
_OTHERS = {
    cls: operator.attrgetter(*(f.name for f in fields(cls) if f.name != "facts"))
    for cls in EVENT_TYPES
}
_FACTS_AT = {cls: [f.name for f in fields(cls)].index("facts") for cls in EVENT_TYPES}
_FACT_VALUES = operator.attrgetter(*(f.name for f in fields(WakuFacts)))
_WINDOW_AT = [f.name for f in fields(WakuFacts)].index("archive_window")
_WHISPER_AT = [f.name for f in fields(WakuFacts)].index("whisper_timestamp")


def event_values(event: Event) -> tuple[Any, ...]:
    """``event`` as plain values: (its type's number in :data:`EVENT_TYPES`, its facts'
    fields as a tuple or None, its other fields in order): str, int, bool, bytes, tuples
    and None only, which ``marshal`` writes and reads back many times faster than ``pickle``
    writes and reads the dataclasses. :func:`event_from_values` is the inverse."""
    cls = type(event)
    facts = event.facts
    return (_CODES[cls], None if facts is None else _FACT_VALUES(facts), *_OTHERS[cls](event))


def whisper_timestamp_of(values: tuple[Any, ...] | list[Any]) -> int | None:
    """The envelope time (seconds) in the facts of :func:`event_values`' ``values``, read
    without building the event; None for an event without facts."""
    facts = values[1]
    return None if facts is None else int(facts[_WHISPER_AT])


_KEEP: Any = object()


def event_from_values(
    values: tuple[Any, ...] | list[Any], archive_window: tuple[int, int] | None = _KEEP
) -> Event:
    """The event :func:`event_values` made ``values`` of; ``archive_window``, when given, in
    place of its facts' (an event without facts stays without)."""
    cls: Any = EVENT_TYPES[values[0]]
    facts = values[1]
    if facts is not None:
        if archive_window is not _KEEP:
            facts = (*facts[:_WINDOW_AT], archive_window, *facts[_WINDOW_AT + 1 :])
        facts = WakuFacts(*facts)
    at = _FACTS_AT[cls] + 2
    event: Event = cls(*values[2:at], facts, *values[at:])
    return event
