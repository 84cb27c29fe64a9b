"""The readable history's model: what a page, a search hit and an export row are made of.

This module is the contract between the layer that builds the readable history (decoding the
Status application layer, folding edits, deletes, reactions and pins, naming authors; see the
package docstring) and the layers that show it (the bridge's ``[viewer]``, ``history
export``). Everything here is plain data; :class:`HistoryReader` is what both read through.

Times are UTC. ``timestamp_ms`` is the ChatMessage's own ``timestamp`` (what status-go shows);
``whisper_timestamp`` the Waku message's (seconds), kept for provenance. Everything a stranger
wrote (``text``, names, image bytes, channel and community names) is untrusted: renderers
escape it.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Protocol

__all__ = [
    "Author",
    "ChannelSummary",
    "CommunitySummary",
    "ContentType",
    "HistoryReader",
    "Provenance",
    "Reaction",
    "ReadableMessage",
    "SearchHit",
    "ViewPolicy",
]


class ContentType:
    """status-go's ``ChatMessage.ContentType`` values (``protocol/protobuf/enums.proto``)."""

    UNKNOWN = 0
    TEXT_PLAIN = 1
    STICKER = 2
    STATUS = 3
    EMOJI = 4
    TRANSACTION_COMMAND = 5
    SYSTEM_MESSAGE_CONTENT_PRIVATE_GROUP = 6
    IMAGE = 7
    AUDIO = 8
    COMMUNITY = 9
    SYSTEM_MESSAGE_GAP = 10
    CONTACT_REQUEST = 11
    DISCORD_MESSAGE = 12
    IDENTITY_VERIFICATION = 13
    SYSTEM_MESSAGE_PINNED_MESSAGE = 14
    SYSTEM_MESSAGE_MUTUAL_EVENT_SENT = 15
    SYSTEM_MESSAGE_MUTUAL_EVENT_ACCEPTED = 16
    SYSTEM_MESSAGE_MUTUAL_EVENT_REMOVED = 17
    BRIDGE_MESSAGE = 18


@dataclass(frozen=True, slots=True)
class Author:
    public_key: str  # "0x04…" uncompressed, lowercase hex: the ApplicationMetadataMessage signer
    compressed: str  # "zQ3…" as status-go shows it (base58btc multibase of the 33-byte key)
    alias: str  # the three-word name status-go derives from the key
    display_name: str = ""  # newest ChatIdentity display name, "" when none was seen
    ens_name: str = ""  # claimed ENS name ("" when none); unverified: shown marked as a claim
    # The name a reader sees first: display name, else the ENS claim, else the alias
    shown_name: str = ""


@dataclass(frozen=True, slots=True)
class Reaction:
    emoji: str  # the emoji as status-go maps EmojiReaction.Type (LOVE -> "❤️", …)
    count: int
    authors: tuple[str, ...]  # "0x04…" keys of who reacted (not retracted)


@dataclass(frozen=True, slots=True)
class Provenance:
    waku_hash: str  # "0x…" deterministic Waku message hash (or the v1 envelope hash)
    content_topic: str
    pubsub_topic: str  # "" when read from an archive (archives carry no pubsub topic)
    signer: str  # "0x04…" the recovered ApplicationMetadataMessage signer
    whisper_timestamp: int  # the Waku/archive timestamp, seconds
    archive_window: tuple[int, int] | None = None  # [from, to) seconds of its archive, if archived
    source: str = ""  # "store", "archive-dir", "torrent", "logos-storage", …


@dataclass(frozen=True, slots=True)
class ReadableMessage:
    id: str  # "0x…" status-go message id (keccak256(author key || application bytes))
    community_id: str  # "0x02…"/"0x03…" compressed community key
    channel_id: str  # the channel's uuid (canonical 8-4-4-4-12)
    author: Author
    clock: int  # ChatMessage.clock (Lamport, ms)
    timestamp_ms: int  # ChatMessage.timestamp (ms): what status-go shows as the time
    content_type: int  # ContentType value
    text: str  # the current text (after a valid edit); Markdown source, never HTML
    response_to: str = ""  # "0x…" id of the message replied to ("" when none)
    edited: bool = False
    edited_at_ms: int = 0  # the edit's clock (ms) when edited
    pinned: bool = False
    pinned_by: str = ""  # "0x04…" who pinned it, when pinned
    reactions: tuple[Reaction, ...] = ()
    # Content-type specific, all optional
    sticker_hash: str = ""  # STICKER: the sticker's content hash ("e301…" multihash, as given)
    image_type: str = ""  # IMAGE: "jpeg" | "png" | "webp" | "gif" when the bytes sniff as one
    image_size: int = 0  # IMAGE: bytes; the bytes themselves through HistoryReader.image()
    audio_duration_ms: int = 0  # AUDIO
    discord_author: str = ""  # DISCORD_MESSAGE: the Discord author's name (untrusted)
    discord_timestamp: str = ""  # DISCORD_MESSAGE: its original timestamp as given
    # "0x04…" key -> name to show, for the "@0x04…" mentions in ``text``
    mentions: dict[str, str] = field(default_factory=dict)
    provenance: Provenance | None = None

    @property
    def day(self) -> dt.date:
        return dt.datetime.fromtimestamp(self.timestamp_ms / 1000, dt.UTC).date()


@dataclass(frozen=True, slots=True)
class ChannelSummary:
    id: str  # uuid
    name: str  # from the newest signed description ("" when it has none)
    description: str
    messages: int  # shown messages (deleted, banned and taken-down ones excluded)
    first_ms: int  # first shown message's timestamp (ms), 0 when none
    last_ms: int
    deleted: bool = False  # the newest description no longer lists it


@dataclass(frozen=True, slots=True)
class CommunitySummary:
    id: str  # "0x02…"/"0x03…"
    name: str  # from the newest signed description ("" when none was found)
    description: str
    channels: tuple[ChannelSummary, ...]
    messages: int
    archive_link: str = ""  # the newest archive link (magnet URI or Logos Storage CID)
    last_archived_s: int = 0  # end of the newest archive window, seconds (0: unknown)
    description_clock: int = 0


@dataclass(frozen=True, slots=True)
class SearchHit:
    message: ReadableMessage
    snippet: str  # plain text around the match (never HTML); renderers mark ``query`` terms


class HistoryReader(Protocol):
    """What the viewer and the exports read. Implementations never return a message that is
    deleted, by a banned author (when the policy hides them), or on the takedown list."""

    def communities(self) -> Sequence[CommunitySummary]: ...

    def community(self, community_id: str) -> CommunitySummary | None: ...

    def days(self, community_id: str, channel_id: str) -> Sequence[dt.date]:
        """The UTC days on which the channel has shown messages, oldest first."""
        ...

    def day(self, community_id: str, channel_id: str, day: dt.date) -> Sequence[ReadableMessage]:
        """That day's shown messages, oldest first (by timestamp_ms, then clock, then id)."""
        ...

    def message(self, community_id: str, message_id: str) -> ReadableMessage | None: ...

    def search(
        self, community_id: str, query: str, *, limit: int = 50, offset: int = 0
    ) -> Sequence[SearchHit]:
        """Full-text search of shown messages, newest first; ``query`` is a user's words
        (never passed to the engine as syntax)."""
        ...

    def image(self, community_id: str, message_id: str) -> tuple[str, bytes] | None:
        """(``image_type``, bytes) of an IMAGE message whose bytes sniffed as JPEG/PNG/WebP/GIF
        within the size cap, else None."""
        ...

    def iter_messages(
        self,
        community_id: str,
        channel_id: str | None = None,
        *,
        after_ms: int | None = None,
        before_ms: int | None = None,
        author: str | None = None,
    ) -> Iterator[ReadableMessage]:
        """Shown messages in (channel, time) order, streamed in bounded batches (exports)."""
        ...


@dataclass(frozen=True, slots=True)
class ViewPolicy:
    """What a reader hides besides deleted messages (the viewer's and the exports' policy)."""

    hide_banned: bool = True  # authors banned in the newest signed description
    takedown_ids: frozenset[str] = frozenset()  # "0x…" message ids the owner took down
    takedown_authors: frozenset[str] = frozenset()  # "0x04…" keys the owner took down
