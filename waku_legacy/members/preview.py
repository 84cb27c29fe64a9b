"""A member's client of each generation, applied to a community's published history (pure).

Given the archives' messages, the newest signed ``CommunityDescription`` and the archive-link
messages found, say per generation whether the link is acted on and, per archived message,
whether the client imports it or why not. Every rule is status-go's, read in its code (paths
are status-go's; "2024" is the snapshot ``c72f491`` of Oct 2024, read with ``git show`` in a
clone; "current" is the version with Logos Storage, read through the search index):

Link (``HandleHistoryArchiveMagnetlinkMessage`` at ``c72f491`` and
``HandleHistoryArchiveLinkMessage`` current, ``protocol/messenger_handler.go``):
  the community is the one whose compressed key is the ApplicationMetadataMessage's signer,
  so a link signed by another key is for no community the member knows; the member acts when
  ``clock >= lastClock`` (the stored clock, which every description raises to its field 9:
  ``protocol/communities/manager.go``) and the link is not the last one seen. The message only
  reaches the handler on a chat the client has a filter for (see below). Opening and checking
  it is :func:`waku_legacy.archive.magnet.open_signed_archive_link` (both layerings, a signed
  26/WAKU-PAYLOAD, type 43).

Filters (``DefaultFilters`` and ``initCommunityChats``, ``protocol/messenger_communities.go``):
  2024: ``<id>``, ``<id>-ping`` (``StatusUpdatesChannelID``), ``<id>-magnetlinks``,
  ``<id>-memberUpdate``, the community key (``PubkeyToHex(key)[2:]``) and one per channel of
  the description (``CreateCommunityChats``); current (since PR #5993): ``<id>``,
  ``<id>-memberUpdate`` and the community key only. A filter's topic is
  ``keccak256(chat id)[:4]``. ``handleArchiveMessages`` keeps an archived message only when
  ``FilterByTopic(message.Topic)`` (current ``ChatFilterByTopic``) finds one: ``no_filter``.
  A deleted channel's filter is removed with its chat (``DeleteChat`` ->
  ``RemoveFilterByChatID``), so a 2024 client has no filter for a channel the description no
  longer lists: reported as ``deleted_channel`` when the message's own ``chat_id`` names that
  channel and its topic is that channel's (current clients would have no filter either way).

Decoding (``handleRetrievedMessages``, ``protocol/messenger.go``; ``v1/status_message.go``):
  the archive holds the 26/WAKU-PAYLOAD already decrypted; ``HandleTransportLayer`` takes
  ``sig`` as the payload signer's 65-byte key (``UnmarshalPubkey``), ``HandleEncryptionLayer``
  opens the ``ProtocolMessage`` (or falls back to the bare message,
  :func:`waku_legacy.proto.status_layers.open_layers`), ``HandleApplicationLayer`` recovers
  the ApplicationMetadataMessage's signer (the author) and the message id
  ``keccak256(FromECDSAPub(author) || application bytes)`` (``MessageID``,
  ``protocol/v1/message.go``): anything that fails is ``undecodable``.
Duplicates (``messageExists``, ``shouldSkipDuplicate``): an id seen before in the import is
  skipped (only COMMUNITY_DESCRIPTION may repeat); the id is recorded before the message is
  checked further, so the second copy of a refused message is a ``duplicate`` too.
Validation (``ValidateReceivedChatMessage``, ``protocol/message_validator.go``):
  ``clock > whisperTimestamp + 120000`` ms (``maxWhisperFutureDriftMs``, the archived
  ``timestamp`` in seconds * 1000) is ``clock_skew``; a zero clock or timestamp, empty or
  over-long (4096) text, an empty chat id, an unknown message or content type are ``other``.
Routing (``matchChatEntity``): a ``COMMUNITY_CHAT`` message goes to the chat named by its
  ``chat_id`` (``<id><uuid>``); a chat the description does not list does not exist
  ("non-existing chat"): ``deleted_channel`` for this community's channel ids, ``other``
  for anything else; then ``CanPost(author, uuid, CHAT_MESSAGE)``.
Membership (``CanView``/``CanPost``, ``protocol/communities/community.go`` at ``c72f491``;
  the current file is not in the search index, so both generations use these): the control
  node (the community key) always may; a key in ``ban_list`` or ``banned_members`` is
  ``banned``; one not in ``members`` is ``departed`` (left or removed); one missing from the
  channel's members or with ``CHANNEL_ROLE_VIEWER`` is ``other``.

Application messages other than CHAT_MESSAGE (reactions, edits, pins ...) have their own
handlers; they are counted as ``other`` with their type, not previewed further.

Messages, not copies (issue 34, :mod:`waku_legacy.archive.copies`): with ``archive_topics =
"both"`` each message is archived twice, and the client judges each copy. The counts are of
messages (one per original hash): a message's fate is the best of its copies' fates
(:data:`FATE_ORDER`: imported first, then how far a refused copy got), so the channel-topic
copy a current client has no filter for is no message lost when it imports the
``-memberUpdate`` one; a message is ``duplicate`` only when every copy is (its id came with
another message). The copies' own fates are counted apart (``copies_imported``,
``copies_skipped``).

What no archive can change, and this preview therefore assumes: the member's client must be
built with an archive back end (status-go's ``USE_TORRENT`` / ``USE_LOGOS_STORAGE`` make
variables, default false, set the build tags ``use_torrent`` / ``use_logos_storage``:
``protocol/communities/archive/README.md`` at ``8d31cf52``,
``archive_manager_torrent_backend_enabled.go`` ``//go:build !disable_history_archives &&
use_torrent`` at ``1d73a227``), the back end switched on (``TorrentConfig.Enabled`` is false
in a new account's node config, ``api/defaults.go``, and status-app creates accounts with
``torrentConfigEnabled: some(false)``, ``src/app_service/service/accounts/service.nim``), and
the community's ``HistoryArchiveSupportEnabled`` setting on; the handler does nothing
otherwise (``archiveManager.IsReady()``, current ``IsStarted()``, ``&&
settings.HistoryArchiveSupportEnabled``).
"""

from __future__ import annotations

import enum
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from waku_legacy.archive.copies import best_copies, describe_modes, message_keys
from waku_legacy.archive.message import ArchiveMessage
from waku_legacy.crypto.secp256k1 import uncompressed_public_key
from waku_legacy.errors import WakuLegacyError
from waku_legacy.identity.application import refuse_chat_message as _invalid
from waku_legacy.identity.descriptions import SignedDescription
from waku_legacy.identity.topics import CommunityId, chat_topic

__all__ = [
    "FATE_ORDER",
    "IMPORTED",
    "REASONS",
    "ArchivedEntry",
    "Fate",
    "Generation",
    "GenerationPreview",
    "LinkCandidate",
    "LinkVerdict",
    "filter_chat_ids",
    "judge_link",
    "judge_message",
    "preview_community",
    "preview_generation",
    "status_summary",
]

IMPORTED = "imported"
REASONS = (
    "departed", "banned", "deleted_channel", "no_filter", "duplicate", "clock_skew",
    "undecodable", "other",
)  # fmt: skip
# a message's fate is its best copy's: imported, then the refusals of a copy the client read
# furthest (membership, routing, validation), the id seen before, not decoded, not heard
FATE_ORDER = (
    IMPORTED, "departed", "banned", "deleted_channel", "clock_skew", "other", "duplicate",
    "undecodable", "no_filter",
)  # fmt: skip
VERSION = 2  # 2: counts are messages, copies_* count copies (issue 34)

CHAT_MESSAGE = 1  # ApplicationMetadataMessage.Type
COMMUNITY_DESCRIPTION = 25
COMMUNITY_CHAT = 5  # MessageType
CHANNEL_ROLE_VIEWER = 1
MAX_APPLICATION_BYTES = 16 * 1024 * 1024  # an archived payload; the archive limit is 30 MB


class Generation(enum.StrEnum):
    Y2024 = "2024"  # status-go c72f491, Oct 2024
    CURRENT = "current"


def filter_chat_ids(
    community: CommunityId, description: SignedDescription | None, generation: Generation
) -> tuple[str, ...]:
    """The chat ids a joined member has filters for (``DefaultFilters`` +
    ``initCommunityChats``); an archived message is kept only on one of their topics."""
    key_chat = community.uncompressed.hex()  # PubkeyToHex(key)[2:]
    if generation is Generation.CURRENT:
        return (community.chat_id, community.universal_chat_id, key_chat)
    channels = description.channel_uuids if description is not None else ()
    return (
        community.chat_id, f"{community}-ping", community.magnetlinks_chat_id,
        community.universal_chat_id, key_chat,
        *(community.channel_chat_id(c) for c in channels),
    )  # fmt: skip


# -- the link --------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class LinkCandidate:
    """An archive-link message found somewhere (a WakuMessage's topic, version, payload)."""

    content_topic: str
    payload: bytes
    version: int
    where: str  # a file, "store", a source name


@dataclass(frozen=True, slots=True)
class LinkVerdict:
    acted_on: bool
    reason: str  # why (not)
    clock: int | None = None
    link: str | None = None
    chat: str | None = None  # "universal" or "magnetlinks"
    where: str | None = None
    layering: str | None = None  # "protocol-message" or "bare" (both are read)

    def to_json(self) -> dict[str, Any]:
        return {
            "acted_on": self.acted_on, "reason": self.reason, "clock": self.clock,
            "link": self.link, "chat": self.chat, "where": self.where,
            "layering": self.layering,
        }  # fmt: skip


def judge_link(
    candidates: Iterable[LinkCandidate],
    community: CommunityId,
    description: SignedDescription | None,
    generation: Generation,
) -> LinkVerdict:
    """Would a joined member of ``generation`` act on the newest link among ``candidates``?

    Only messages on a chat the generation has a filter for reach it; of those signed by the
    community key the highest clock wins; it is acted on when that clock is at least the
    description's field 9 (the clock a member already holds: ``clock >= lastClock``).
    """
    from waku_legacy.archive.magnet import open_signed_archive_link
    from waku_legacy.identity.topics import content_topic_of_chat
    from waku_legacy.proto import waku_message_pb2

    heard = {content_topic_of_chat(c) for c in filter_chat_ids(community, description, generation)}
    refused: Counter[str] = Counter()
    best: tuple[int, str, str, str, str] | None = None  # clock, link, chat, where, layering
    seen = 0
    for candidate in candidates:
        seen += 1
        if candidate.content_topic not in heard:
            refused["on a chat this generation has no filter for"] += 1
            continue
        message = waku_message_pb2.WakuMessage(
            payload=candidate.payload, content_topic=candidate.content_topic,
            version=candidate.version,
        )  # fmt: skip
        try:
            opened, link, _ = open_signed_archive_link(message, community)
        except (WakuLegacyError, ValueError) as exc:
            refused[(getattr(exc, "reason", None) or str(exc)).split(":")[0][:80]] += 1
            continue
        key = (
            int(link.clock), str(link.archive_link), opened.chat, candidate.where,
            opened.layering,
        )  # fmt: skip
        if best is None or key[:2] > best[:2]:
            best = key
    if best is None:
        why = "; ".join(f"{n} {r}" for r, n in sorted(refused.items()))
        return LinkVerdict(
            False,
            "no signed archive-link message found" if not seen
            else f"no archive-link message this client accepts ({why})",
        )  # fmt: skip
    clock, link_text, chat, where, layering = best
    floor = description.archive_clock if description is not None else 0
    if clock < floor:
        return LinkVerdict(
            False,
            f"clock {clock} is below {floor}, the description's archive_link_clock (field 9) "
            "that members already hold: dropped (clock >= lastClock)",
            clock, link_text, chat, where, layering,
        )  # fmt: skip
    return LinkVerdict(True, f"signed by the community key, clock {clock} >= {floor}",
                       clock, link_text, chat, where, layering)  # fmt: skip


# -- the messages ----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ArchivedEntry:
    """One message as an archive holds it, with its archive's window [from, to) in seconds
    (``window_to`` None: not known to whoever built the entry)."""

    window_from: int
    message: ArchiveMessage
    window_to: int | None = None


@dataclass(frozen=True, slots=True)
class Fate:
    """What a client does with one archived message: ``IMPORTED`` or a reason in REASONS."""

    outcome: str
    detail: str = ""
    author: str | None = None  # "0x04…" (PubkeyToHex), when the message decodes
    message_id: bytes | None = None
    chat_id: str | None = None


@dataclass(frozen=True, slots=True)
class _Opened:
    author: str
    message_id: bytes
    type: int
    payload: bytes


def _open(message: ArchiveMessage) -> _Opened | str:
    """The author, id and payload of an archived message, or why it does not decode
    (:func:`waku_legacy.identity.application.open_application` opens it)."""
    from waku_legacy.identity.application import open_application

    if len(message.sig) != 65:
        return f"sig is {len(message.sig)} bytes, not the payload signer's 65-byte key"
    try:
        uncompressed_public_key(message.sig)  # UnmarshalPubkey
        opened = open_application(
            message.payload, "archived message", max_size=MAX_APPLICATION_BYTES
        )
    except WakuLegacyError as exc:
        return (getattr(exc, "reason", None) or str(exc))[:120]
    return _Opened("0x" + opened.author.hex(), opened.message_id, opened.type, opened.payload)


def _chat_message(payload: bytes) -> Any:
    from waku_legacy.proto import chat_message_pb2
    from waku_legacy.proto.codec import parse_message

    return parse_message(
        chat_message_pb2.ChatMessage, payload, "ChatMessage", max_size=MAX_APPLICATION_BYTES
    )


def _channel_of(chat_id: str, community: CommunityId) -> str | None:
    """The channel uuid of ``<id><uuid>``, or None when it is not one of this community's."""
    return community.channel_of(chat_id)


def _may_post(author: str, channel: str, community: CommunityId,
              description: SignedDescription) -> tuple[str, str] | None:  # fmt: skip
    """``CanPost(author, channel, CHAT_MESSAGE)``'s refusal as (reason, detail), or None."""
    if author == "0x" + community.uncompressed.hex():
        return None  # the control node always may
    if author in description.banned:
        return "banned", "author is banned"
    if author not in description.members:
        return "departed", "author is not a member any more"
    described = next(c for c in description.channels if c.uuid == channel)
    member = described.members.get(author)
    if member is None:
        return "other", "author is not a member of the channel"
    if member.channel_role == CHANNEL_ROLE_VIEWER:
        return "other", "author has the viewer role in the channel"
    return None


def judge_message(
    entry: ArchiveMessage,
    community: CommunityId,
    description: SignedDescription,
    filter_topics: frozenset[bytes],
    seen_ids: set[bytes],
    generation: Generation,
) -> Fate:
    """The fate of one archived message, in status-go's order (see the module docstring).
    ``seen_ids`` is the import's ``ExistingMessagesMap``: updated as status-go does."""
    listed = set(description.channel_uuids)
    if entry.topic not in filter_topics:
        # only a 2024 client had a filter per channel: say when the channel is the cause
        opened = _open(entry) if generation is Generation.Y2024 else "not opened"
        if not isinstance(opened, str) and opened.type == CHAT_MESSAGE:
            try:
                chat_id = _chat_message(opened.payload).chat_id
            except WakuLegacyError:
                chat_id = ""
            channel = _channel_of(chat_id, community)
            if channel is not None and channel not in listed and entry.topic == chat_topic(chat_id):
                return Fate("deleted_channel", "its channel's filter went with the channel",
                            opened.author, opened.message_id, chat_id)  # fmt: skip
        return Fate("no_filter", f"no filter for topic 0x{entry.topic.hex()}")
    opened = _open(entry)
    if isinstance(opened, str):
        return Fate("undecodable", opened)
    outcome = _decoded_outcome(opened, entry, community, description, seen_ids)
    return Fate(outcome[0], outcome[1], opened.author, opened.message_id, outcome[2])


def _decoded_outcome(
    opened: _Opened,
    entry: ArchiveMessage,
    community: CommunityId,
    description: SignedDescription,
    seen_ids: set[bytes],
) -> tuple[str, str, str | None]:
    """(outcome, detail, chat id) of a message that decodes."""
    if opened.message_id in seen_ids and opened.type != COMMUNITY_DESCRIPTION:
        return "duplicate", "message id seen before (messageExists)", None
    seen_ids.add(opened.message_id)
    if opened.type != CHAT_MESSAGE:
        return "other", f"application message type {opened.type}, not a chat message", None
    try:
        chat = _chat_message(opened.payload)
    except WakuLegacyError as exc:
        return "undecodable", f"not a ChatMessage ({exc})"[:120], None
    refusal = _invalid(chat, entry.timestamp * 1000)
    if refusal is None and int(chat.message_type) != COMMUNITY_CHAT:
        refusal = ("other", f"message type {int(chat.message_type)} is not COMMUNITY_CHAT")
    channel = _channel_of(chat.chat_id, community)
    if refusal is None and (channel is None or channel not in description.channel_uuids):
        refusal = (
            ("deleted_channel", "the description lists no such channel") if channel is not None
            else ("other", "not a chat of this community")
        )  # fmt: skip
    if refusal is None:
        assert channel is not None
        refusal = _may_post(opened.author, channel, community, description)
    if refusal is not None:
        return refusal[0], refusal[1], chat.chat_id
    return IMPORTED, "", chat.chat_id


@dataclass(slots=True)
class GenerationPreview:
    """One generation's view: the link verdict and every archived message's fate (its best
    copy's), with the copies' own fates counted apart."""

    generation: Generation
    link: LinkVerdict
    imported: int = 0
    skipped: Counter[str] = field(default_factory=Counter)
    copies: Counter[str] = field(default_factory=Counter)  # outcome -> copies
    lost_authors: Counter[str] = field(default_factory=Counter)  # author -> messages refused
    weeks: dict[int, Counter[str]] = field(default_factory=dict)  # window start -> outcomes
    details: Counter[tuple[str, str]] = field(default_factory=Counter)  # (reason, detail)

    def add(self, window_from: int, fate: Fate) -> None:
        self.weeks.setdefault(window_from, Counter())[fate.outcome] += 1
        if fate.outcome == IMPORTED:
            self.imported += 1
            return
        self.skipped[fate.outcome] += 1
        self.details[(fate.outcome, fate.detail)] += 1
        # duplicates lose nothing: the first copy had its own fate
        if fate.author is not None and fate.outcome != "duplicate":
            self.lost_authors[fate.author] += 1

    def to_json(self) -> dict[str, Any]:
        return {
            "link_acted_on": self.link.acted_on,
            "link": self.link.to_json(),
            "imported": self.imported,
            "members_receive": self.imported if self.link.acted_on else 0,
            "skipped": {reason: self.skipped[reason] for reason in REASONS},
            "copies_imported": self.copies[IMPORTED],
            "copies_skipped": {reason: self.copies[reason] for reason in REASONS},
            "skip_details": [
                {"reason": r, "detail": d, "count": n}
                for (r, d), n in sorted(self.details.items(), key=lambda x: (-x[1], x[0]))
            ],
            "lost_authors": [
                {"author": a, "messages": n}
                for a, n in sorted(self.lost_authors.items(), key=lambda x: (-x[1], x[0]))
            ],
            "weeks": [
                {
                    "start": start,
                    "imported": counts[IMPORTED],
                    **{reason: counts[reason] for reason in REASONS},
                }
                for start, counts in sorted(self.weeks.items())
            ],
        }


def preview_generation(
    entries: Sequence[ArchivedEntry],
    community: CommunityId,
    description: SignedDescription,
    links: Sequence[LinkCandidate],
    generation: Generation,
) -> GenerationPreview:
    """Every entry's fate for a member of ``generation``, in the order given (the import's
    order: archives oldest first, messages as archived); each message counted once, with its
    best copy's fate and window, the copies apart."""
    topics = frozenset(chat_topic(c) for c in filter_chat_ids(community, description, generation))
    result = GenerationPreview(generation, judge_link(links, community, description, generation))
    seen: set[bytes] = set()
    key_of = _message_keys(entries, community)
    judged = []
    for entry in entries:
        fate = judge_message(entry.message, community, description, topics, seen, generation)
        result.copies[fate.outcome] += 1
        judged.append((key_of[bytes(entry.message.hash)], (entry.window_from, fate)))
    for window_from, fate in best_copies(judged, FATE_ORDER, lambda c: c[1].outcome).values():
        result.add(window_from, fate)
    return result


def _message_keys(entries: Sequence[ArchivedEntry], community: CommunityId) -> dict[bytes, bytes]:
    """copy hash -> its message's (:func:`waku_legacy.archive.copies.message_keys`)."""
    return message_keys(((e.message.hash, e.message.topic) for e in entries), community)


def archive_topics_found(entries: Sequence[ArchivedEntry], community: CommunityId) -> str:
    """The archive-topics mode of the archives previewed, read from each window's topics."""
    from waku_legacy.archive.topics import archive_topics_of

    windows: dict[int, set[bytes]] = {}
    for entry in entries:
        windows.setdefault(entry.window_from, set()).add(bytes(entry.message.topic))
    return describe_modes(archive_topics_of((), community, t) for t in windows.values())


def preview_community(
    entries: Sequence[ArchivedEntry],
    community: CommunityId,
    description: SignedDescription,
    links: Sequence[LinkCandidate],
    *,
    origin: str = "",
) -> dict[str, Any]:
    """The preview document (version 2) for both generations."""
    generations = {
        g.value: preview_generation(entries, community, description, links, g).to_json()
        for g in Generation
    }
    return {
        "version": VERSION,
        "community": str(community),
        "generations": generations,
        "archived_messages": len(set(_message_keys(entries, community).values())),
        "copies_archived": len(entries),
        "archive_topics": archive_topics_found(entries, community),
        "archives": {"origin": origin, "windows": len({e.window_from for e in entries})},
        "description": {
            "clock": description.clock,
            "archive_link_clock": description.archive_clock,
            "members": len(description.members),
            "banned": len(description.banned),
            "channels": list(description.channel_uuids),
        },
        "links_found": len(links),
        "warnings": _warnings(description, links),
        "assumes": ASSUMPTIONS,
    }


def _warnings(description: SignedDescription, links: Sequence[LinkCandidate]) -> list[str]:
    """What makes the answer less useful than it looks."""
    out = []
    if not description.members:
        out.append(
            "the newest description lists no members: every author but the control node counts "
            "as departed (status-go's CanView needs the author in members)"
        )
    if not links:
        out.append("no archive-link message found: give --link-message, --store or --source")
    return out


#: What no archive can change: said in every report (see the module docstring for the code).
ASSUMPTIONS = (
    "the member's Status build has an archive back end compiled in (status-go make "
    "USE_TORRENT=true or USE_LOGOS_STORAGE=true; both default to false)",
    "the back end is switched on (new accounts: TorrentConfig.Enabled = false in status-go's "
    "defaults, status-app creates accounts with torrentConfigEnabled false) and the "
    "community's history archive support setting is on",
    "the member has joined the community; messages of departed or banned authors and of "
    "deleted channels are refused by the client whatever the archives hold",
)


def status_summary(document: dict[str, Any]) -> dict[str, Any]:
    """The preview in brief, camelCase, for the bridge's status report: per generation the
    link verdict, imported, refused by reason, and how many authors lose messages (messages;
    the copies apart)."""
    return {
        "archivedMessages": document["archived_messages"],
        "copiesArchived": document["copies_archived"],
        "archiveTopics": document["archive_topics"],
        "descriptionClock": document["description"]["clock"],
        "generations": {
            name: {
                "linkActedOn": view["link_acted_on"],
                "linkReason": view["link"]["reason"],
                "imported": view["imported"],
                "membersReceive": view["members_receive"],
                "skipped": dict(view["skipped"]),
                "copiesImported": view["copies_imported"],
                "authorsLosingMessages": len(view["lost_authors"]),
            }
            for name, view in document["generations"].items()
        },
    }
