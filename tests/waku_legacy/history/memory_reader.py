"""An in-memory :class:`~waku_legacy.history.model.HistoryReader` over hand-built messages,
for the pages', the viewer's and the exports' tests (they test rendering and serving; the
reader over the store's tables has its own tests), and a small realistic community."""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

import coincurve
from eth_hash.auto import keccak

from waku_legacy.history.model import (
    Author,
    ChannelSummary,
    CommunitySummary,
    ContentType,
    Provenance,
    Reaction,
    ReadableMessage,
    SearchHit,
    ViewPolicy,
)

PNG_1X1 = bytes.fromhex(
    "89504e470d0a1a0a0000000d4948445200000001000000010806000000"
    "1f15c4890000000d49444154789c6360f8cfc0f01f0005000201a5f1e5f30000000049454e44ae426082"
)


@dataclass
class MemoryHistory:
    """What a real index would hold: communities and their shown-or-not messages."""

    communities: list[CommunitySummary]
    messages: list[ReadableMessage]
    images: dict[str, tuple[str, bytes]] = field(default_factory=dict)
    banned: frozenset[str] = frozenset()  # "0x04…" authors banned in the description

    def reader(self, policy: ViewPolicy | None = None) -> MemoryReader:
        return MemoryReader(self, policy or ViewPolicy())


class MemoryReader:
    def __init__(self, history: MemoryHistory, policy: ViewPolicy) -> None:
        self.history = history
        self.policy = policy

    def _shown(self, message: ReadableMessage) -> bool:
        key = message.author.public_key
        if self.policy.hide_banned and key in self.history.banned:
            return False
        return message.id not in self.policy.takedown_ids and key not in (
            self.policy.takedown_authors
        )

    def _messages(self, community_id: str) -> list[ReadableMessage]:
        found = [m for m in self.history.messages if m.community_id == community_id]
        found = [m for m in found if self._shown(m)]
        return sorted(found, key=lambda m: (m.channel_id, m.timestamp_ms, m.clock, m.id))

    def _summary(self, summary: CommunitySummary) -> CommunitySummary:
        shown = self._messages(summary.id)
        channels = []
        for channel in summary.channels:
            mine = [m for m in shown if m.channel_id == channel.id]
            channels.append(
                dataclasses.replace(
                    channel,
                    messages=len(mine),
                    first_ms=mine[0].timestamp_ms if mine else 0,
                    last_ms=mine[-1].timestamp_ms if mine else 0,
                )
            )
        return dataclasses.replace(summary, channels=tuple(channels), messages=len(shown))

    def communities(self) -> Sequence[CommunitySummary]:
        return [self._summary(s) for s in self.history.communities]

    def community(self, community_id: str) -> CommunitySummary | None:
        for summary in self.history.communities:
            if summary.id == community_id:
                return self._summary(summary)
        return None

    def days(self, community_id: str, channel_id: str) -> Sequence[dt.date]:
        found = {m.day for m in self._messages(community_id) if m.channel_id == channel_id}
        return sorted(found)

    def day(self, community_id: str, channel_id: str, day: dt.date) -> Sequence[ReadableMessage]:
        return [
            m for m in self._messages(community_id) if m.channel_id == channel_id and m.day == day
        ]

    def message(self, community_id: str, message_id: str) -> ReadableMessage | None:
        for message in self._messages(community_id):
            if message.id == message_id:
                return message
        return None

    def search(
        self, community_id: str, query: str, *, limit: int = 50, offset: int = 0
    ) -> Sequence[SearchHit]:
        words = [w.lower() for w in query.split() if w]
        found = [
            m
            for m in self._messages(community_id)
            if words and all(w in m.text.lower() for w in words)
        ]
        found.sort(key=lambda m: m.timestamp_ms, reverse=True)
        return [SearchHit(m, m.text[:200]) for m in found[offset : offset + limit]]

    def image(self, community_id: str, message_id: str) -> tuple[str, bytes] | None:
        message = self.message(community_id, message_id)
        if message is None:
            return None
        return self.history.images.get(message_id)

    def iter_messages(
        self,
        community_id: str,
        channel_id: str | None = None,
        *,
        after_ms: int | None = None,
        before_ms: int | None = None,
        author: str | None = None,
    ) -> Iterator[ReadableMessage]:
        for message in self._messages(community_id):
            if channel_id is not None and message.channel_id != channel_id:
                continue
            if after_ms is not None and message.timestamp_ms < after_ms:
                continue
            if before_ms is not None and message.timestamp_ms >= before_ms:
                continue
            if author is not None and message.author.public_key != author:
                continue
            yield message


# -- a small realistic community --------------------------------------------------------------

COMMUNITY = "0x" + coincurve.PrivateKey(b"\x35" * 32).public_key.format(compressed=True).hex()
INFO_HASH = keccak(b"the sample's archives").hex()[:40]
GENERAL = "6f3c9a4e-2b1d-4c8e-9f10-3a7b2c1d0e01"
DEV = "a1b2c3d4-e5f6-4789-abcd-ef0123456789"
DAY1 = dt.datetime(2024, 3, 12, tzinfo=dt.UTC)
DAY2 = dt.datetime(2024, 3, 14, tzinfo=dt.UTC)


def key(n: int) -> str:
    """A real member key (a curve point: mentions of it resolve as status-go's do)."""
    return "0x" + coincurve.PrivateKey(bytes([n]) * 32).public_key.format(False).hex()


ALICE = Author(
    key(9), "zQ3shTFEGV8WixKXTA1kBgCkWsuHXxAeJrrYf57uA635Ma8ea",
    "Active Curly Goat", display_name="Alice", ens_name="alice.eth", shown_name="Alice",
)  # fmt: skip
BOB = Author(
    key(22), "zQ3shYjU5rMzNhXoshMP7rGtkedaNbMz3aV11jrLpZAPe8YuZ",
    "Fond Bossy Buck", shown_name="Fond Bossy Buck",
)  # fmt: skip
CAROL = Author(
    key(41), "zQ3shkrRfei2rsHqrkoSM7X21hE66pMKqS555FyfmRytu5UmB",
    "Brisk Medical Goral", ens_name="carol.eth", shown_name="carol.eth",
)  # fmt: skip
MALLORY = Author(
    key(27), "zQ3shnTfFUsqaTaDkbXuzw29mSPri51NUYsEoduT16YQW3W7F",
    "Grim Blaring Mullet", display_name="Mallory", shown_name="Mallory",
)  # fmt: skip


def mid(n: int) -> str:
    """Message n's id: 32 bytes that look like status-go's (keccak256 of the number)."""
    return "0x" + keccak(b"message %d" % n).hex()


def waku_hash(n: int) -> str:
    """Message n's Waku message hash (keccak256 of the number, another domain)."""
    return "0x" + keccak(b"waku %d" % n).hex()


def provenance(n: int, seconds: int, signer: str) -> Provenance:
    return Provenance(
        waku_hash=waku_hash(n),
        content_topic="/waku/1/0x1a2b3c4d/rfc26",
        pubsub_topic="/waku/2/rs/16/32",
        signer=signer,
        whisper_timestamp=seconds,
        archive_window=(seconds - seconds % 604800, seconds - seconds % 604800 + 604800),
        source="store",
    )


def message(
    n: int,
    author: Author,
    at: dt.datetime,
    text: str,
    *,
    channel: str = GENERAL,
    **extra: object,
) -> ReadableMessage:
    ms = int(at.timestamp() * 1000)
    return ReadableMessage(
        id=mid(n), community_id=COMMUNITY, channel_id=channel, author=author, clock=ms,
        timestamp_ms=ms, content_type=int(extra.pop("content_type", ContentType.TEXT_PLAIN)),  # type: ignore[call-overload]
        text=text, provenance=provenance(n, ms // 1000, author.public_key), **extra,  # type: ignore[arg-type]
    )  # fmt: skip


def sample_history() -> MemoryHistory:
    """A week of a small community: replies, reactions, an edit, a pin, an image, a sticker,
    a voice message, a Discord import, mentions, an ENS claim, a banned member."""
    t = DAY1.replace(hour=9, minute=2)
    minute = dt.timedelta(minutes=1)
    messages = [
        message(
            1, ALICE, t, "Good morning everyone! The **v2 migration** of our history is done 🎉"
        ),
        message(2, ALICE, t + minute, "Old channels are readable again, see https://status.app"),
        message(
            3,
            BOB,
            t + 3 * minute,
            "Nice! Does it keep replies and reactions?",
            reactions=(Reaction("❤️", 2, (key(9), key(41))), Reaction("👍", 1, (key(9),))),
        ),
        message(
            4,
            CAROL,
            t + 5 * minute,
            f"@{key(22)} yes, and edits too. Pinned the guide.",
            response_to=mid(3),
            edited=True,
            edited_at_ms=int((t + 9 * minute).timestamp() * 1000),
            mentions={key(22): "Fond Bossy Buck"},
        ),
        message(
            5,
            ALICE,
            t + 12 * minute,
            "Migration guide: `waku-legacy migrate --config c.toml`",
            pinned=True,
            pinned_by=key(9),
        ),
        message(
            6,
            BOB,
            t + 20 * minute,
            "",
            content_type=ContentType.IMAGE,
            image_type="png",
            image_size=len(PNG_1X1),
        ),
        message(
            7,
            CAROL,
            t + 22 * minute,
            "",
            content_type=ContentType.STICKER,
            sticker_hash="e30101701220aa",
        ),
        message(
            8, BOB, t + 25 * minute, "", content_type=ContentType.AUDIO, audio_duration_ms=14_000
        ),
        message(9, ALICE, t + 26 * minute, "🔥", content_type=ContentType.EMOJI),
        message(
            10,
            ALICE,
            t + 40 * minute,
            "Welcome to the server, imported from our old Discord.",
            content_type=ContentType.DISCORD_MESSAGE,
            discord_author="oldtimer#1234",
            discord_timestamp="2021-06-01T10:00:00Z",
        ),
        message(11, MALLORY, t + 41 * minute, "buy cheap tokens at scam.example"),
        message(12, BOB, DAY2.replace(hour=18, minute=30), "Anyone up for a call on the archives?"),
        message(
            13, CAROL, DAY2.replace(hour=18, minute=33), "Sure, after dinner", response_to=mid(12)
        ),
        message(
            14,
            BOB,
            DAY1.replace(hour=11),
            "The bridge serves the store on port 8645",
            channel=DEV,
        ),
    ]
    summary = CommunitySummary(
        id=COMMUNITY, name="Status Builders", description="Builders of the Status network: "
        "migration, bridges, archives.",
        channels=(
            ChannelSummary(GENERAL, "general", "Say hi", 0, 0, 0),
            ChannelSummary(DEV, "dev", "Code and releases", 0, 0, 0),
        ),
        messages=0, archive_link=f"magnet:?xt=urn:btih:{INFO_HASH}&dn={COMMUNITY}",
        last_archived_s=int(DAY2.timestamp()), description_clock=42,
    )  # fmt: skip
    return MemoryHistory(
        [summary], messages, images={mid(6): ("png", PNG_1X1)}, banned=frozenset({key(27)})
    )
