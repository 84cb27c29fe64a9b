"""Which clock to sign an archive-link message with, so that members accept it (pure).

status-go's member-side rules (``HandleHistoryArchiveLinkMessage``, formerly
``HandleHistoryArchiveMagnetlinkMessage``, ``protocol/messenger_handler.go``; the description
side in ``protocol/communities/manager.go``, where a received description's
``archive_magnetlink_clock`` -- field 9, now ``archive_link_clock`` -- raises the stored clock
when it is higher):

- a link is accepted when its clock is ``>=`` the last accepted one (stored per community);
- every ``CommunityDescription`` a member receives raises that stored clock to the
  description's field 9 (``UpdateMagnetlinkMessageClock`` when ``cdMagnetlinkClock > stored``);
- a link with a lower clock is dropped without a word; the same link seen twice is ignored
  (``lastSeenArchiveLink == archiveLink``); a newer link cancels a download in progress.

So before publishing, the highest clock the community has already used must be found: the
field 9 of its signed descriptions and the clock of every archive-link message it signed, in
the v2 store and on the store nodes. :func:`choose_link_clock` takes what the caller's
adapter read (raw v2 messages on the community's own chat and its two archive-link chats,
:func:`evidence_topics`) and answers ``max(base, highest found + 1)`` with the reason. A
found link naming the very link about to be published needs no ``+ 1`` (members have it or
take it again at the same clock), so a rerun that finds its own earlier message signs the
same bytes again. The answer depends only on its inputs: reruns with nothing new are
byte-identical.

Messages are checked as a member checks them: descriptions with
:func:`~waku_legacy.identity.descriptions.read_signed_description` (community signature),
links with :func:`~waku_legacy.archive.magnet.open_signed_archive_link` (community
signature) (any link kind: a Logos Storage CID raises members' clocks as a magnet link does).
Anything else on those topics is counted by reason and left out.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from google.protobuf.message import DecodeError as ProtobufDecodeError

from waku_legacy.archive.errors import ForgedMagnetMessage
from waku_legacy.archive.magnet import (
    MAGNETLINKS,
    UNIVERSAL,
    archive_link_chat_id,
    open_signed_archive_link,
)
from waku_legacy.errors import WakuLegacyError
from waku_legacy.identity.descriptions import SignedDescription, open_description_payload
from waku_legacy.identity.topics import CommunityId, content_topic_of_chat
from waku_legacy.proto import waku_message_pb2

__all__ = [
    "ClockChoice",
    "ClockEvidence",
    "NewestMessages",
    "RawMessage",
    "choose_link_clock",
    "evidence_topics",
    "open_description_message",
    "read_evidence",
    "read_store_evidence",
]

STORE_EVIDENCE_LIMIT = 2000  # newest messages read per topic from a v2 store


class RawMessage(Protocol):
    """A v2 message as a store (``StoredMessage``) or a protobuf ``WakuMessage`` holds it."""

    @property
    def content_topic(self) -> str: ...
    @property
    def payload(self) -> bytes: ...
    @property
    def version(self) -> int: ...


@dataclass(slots=True)
class ClockEvidence:
    """The clocks a community has used, as read from the messages given."""

    description_clock: int | None = None  # highest field 9 of a signed description
    description_version: int | None = None  # that description's own clock
    descriptions: int = 0
    link_clock: int | None = None  # highest clock of a community-signed archive-link message
    link: str | None = None  # the link that clock came with
    links: int = 0
    rejected: dict[str, int] = field(default_factory=dict)  # reason -> count

    def merge(self, other: ClockEvidence) -> ClockEvidence:
        out = ClockEvidence(
            descriptions=self.descriptions + other.descriptions,
            links=self.links + other.links,
            rejected=dict(Counter(self.rejected) + Counter(other.rejected)),
        )
        for part in (self, other):
            if part.description_clock is not None and (
                out.description_clock is None
                or (part.description_clock, part.description_version or 0)
                > (out.description_clock, out.description_version or 0)
            ):
                out.description_clock = part.description_clock
                out.description_version = part.description_version
            if part.link_clock is not None and (
                out.link_clock is None
                or (part.link_clock, part.link or "") > (out.link_clock, out.link or "")
            ):
                out.link_clock, out.link = part.link_clock, part.link
        return out


@dataclass(frozen=True, slots=True)
class ClockChoice:
    clock: int  # milliseconds, to sign the archive-link message with
    reason: str  # which input decided it, e.g. "description field 9 = X (+1)"
    base: int  # what the caller would have used without this check
    base_reason: str  # e.g. "wall clock", "run clock (--now)"
    evidence: ClockEvidence

    def to_json(self) -> dict[str, Any]:
        e = self.evidence
        return {
            "clock": self.clock,
            "reason": self.reason,
            "base": self.base,
            "base_reason": self.base_reason,
            "description_field9": e.description_clock,
            "descriptions_read": e.descriptions,
            "previous_link_clock": e.link_clock,
            "previous_link": e.link,
            "links_read": e.links,
            "rejected": dict(sorted(e.rejected.items())),
        }


def evidence_topics(community: CommunityId) -> tuple[str, ...]:
    """Content topics to read: the community's own chat (descriptions), then ``-memberUpdate``
    and ``-magnetlinks`` (archive-link messages)."""
    return (
        content_topic_of_chat(community.chat_id),
        content_topic_of_chat(archive_link_chat_id(community, UNIVERSAL)),
        content_topic_of_chat(archive_link_chat_id(community, MAGNETLINKS)),
    )


_UNREADABLE = (WakuLegacyError, ProtobufDecodeError, ValueError)


def _reason(exc: Exception) -> str:
    if isinstance(exc, ForgedMagnetMessage):
        return "signed by another key"
    text = getattr(exc, "reason", None) or str(exc)
    return text.split(":")[0][:80] or type(exc).__name__


def _link_of(message: RawMessage, community: CommunityId) -> tuple[int, str]:
    """(clock, link) of a community-signed archive-link message; raises otherwise."""
    wm = waku_message_pb2.WakuMessage(
        payload=bytes(message.payload), content_topic=message.content_topic,
        version=int(message.version or 0),
    )  # fmt: skip
    _, link, _ = open_signed_archive_link(wm, community)
    return link.clock, link.archive_link


def open_description_message(message: RawMessage, community: CommunityId) -> SignedDescription:
    """The description a message on the community's own chat holds (only a version 1,
    26/WAKU-PAYLOAD, payload holds one); the payload codec's typed errors otherwise."""
    if int(message.version or 0) != 1:
        raise WakuLegacyError("payload version is not 1")
    return open_description_payload(bytes(message.payload), community)


def read_evidence(messages: Iterable[RawMessage], community: CommunityId) -> ClockEvidence:
    """Read descriptions and archive-link messages among ``messages`` (others are skipped)."""
    own, universal, magnetlinks = evidence_topics(community)
    out = ClockEvidence()
    rejected: Counter[str] = Counter()
    for message in messages:
        topic = message.content_topic
        if topic == own:
            try:
                described = open_description_message(message, community)
            except _UNREADABLE as exc:  # left out, counted by reason
                rejected[f"description: {_reason(exc)}"] += 1
                continue
            out.descriptions += 1
            key = (described.archive_clock, described.clock)
            if out.description_clock is None or key > (
                out.description_clock,
                out.description_version or 0,
            ):
                out.description_clock, out.description_version = key
        elif topic in (universal, magnetlinks):
            try:
                clock, link = _link_of(message, community)
            except _UNREADABLE as exc:
                rejected[f"archive link: {_reason(exc)}"] += 1
                continue
            out.links += 1
            if out.link_clock is None or (clock, link) > (out.link_clock, out.link or ""):
                out.link_clock, out.link = clock, link
    out.rejected = dict(rejected)
    return out


class NewestMessages(Protocol):
    """What the clock reads from a v2 store (:class:`~waku_legacy.store.MessageStore`)."""

    def newest(self, content_topic: str, limit: int) -> Sequence[RawMessage]: ...


def read_store_evidence(
    store: NewestMessages, community: CommunityId, *, limit: int = STORE_EVIDENCE_LIMIT
) -> ClockEvidence:
    """The same from a v2 store (a :class:`~waku_legacy.store.MessageStore`, any shard): the
    newest ``limit`` messages of each of :func:`evidence_topics` (descriptions are republished
    often; the newest carry the highest field 9)."""
    rows: list[RawMessage] = []
    for topic in evidence_topics(community):
        rows.extend(store.newest(topic, limit))
    return read_evidence(rows, community)


def choose_link_clock(
    evidence: ClockEvidence,
    *,
    base: int,
    base_reason: str,
    archive_link: str | None = None,
    minimum: int | None = None,
) -> ClockChoice:
    """``max(base, description field 9 + 1, previous link clock + 1, minimum)`` and why.

    A previous link equal to ``archive_link`` counts without the ``+ 1``. ``minimum`` is the
    operator's ``min_link_clock`` (a clock the community's members may already hold that no
    message here shows: links a Status client published). On a tie the base wins the
    reason (nothing forced the clock up).
    """
    candidates = [(base, 0, f"{base_reason} = {base}")]
    if minimum is not None:
        candidates.append((minimum, 4, f"min_link_clock = {minimum} (operator)"))
    if evidence.description_clock:
        x = evidence.description_clock
        candidates.append((x + 1, 2, f"description field 9 = {x} (+1)"))
    if evidence.link_clock is not None:
        y = evidence.link_clock
        if archive_link is not None and evidence.link == archive_link:
            candidates.append((y, 1, f"same link already published with clock {y}"))
        else:
            candidates.append((y + 1, 3, f"previous link clock {y} (+1)"))
    clock, _, reason = max(candidates, key=lambda c: (c[0], -c[1]))
    return ClockChoice(clock, reason, base, base_reason, evidence)
