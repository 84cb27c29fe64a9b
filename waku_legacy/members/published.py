"""What a member's client hears besides the archives: the community's signed descriptions and
archive-link messages, read from v2 messages (a store's rows or protobuf ``WakuMessage``).

Descriptions are opened by :func:`~waku_legacy.identity.descriptions.open_description_payload`
(the community's own chat, signed by its key); archive-link messages are only collected here
(both link chats), and judged per generation by :func:`.preview.judge_link`.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from waku_legacy.archive.clock import (
    STORE_EVIDENCE_LIMIT,
    NewestMessages,
    RawMessage,
    evidence_topics,
    open_description_message,
)
from waku_legacy.archive.encode import Flavour
from waku_legacy.errors import WakuLegacyError
from waku_legacy.identity.descriptions import SignedDescription
from waku_legacy.identity.topics import CommunityId
from waku_legacy.members.preview import ArchivedEntry, LinkCandidate

__all__ = [
    "Published",
    "folder_entries",
    "read_link_file",
    "read_published",
    "read_store_published",
]

MAX_LINK_FILE_BYTES = 1 << 20  # a link message is ~1 KB; its JSON file a few


@dataclass(slots=True)
class Published:
    descriptions: list[SignedDescription] = field(default_factory=list)
    links: list[LinkCandidate] = field(default_factory=list)
    unreadable_descriptions: int = 0  # on the community's chat, not a description it signed

    def merge(self, other: Published) -> None:
        self.descriptions += other.descriptions
        self.links += other.links
        self.unreadable_descriptions += other.unreadable_descriptions


def read_published(
    messages: Iterable[RawMessage], community: CommunityId, where: str
) -> Published:
    """Descriptions signed by the community key and every message on a link chat."""
    own, *links = evidence_topics(community)  # the community's chat, then the link chats
    out = Published()
    for message in messages:
        topic = message.content_topic
        if topic == own:
            try:
                out.descriptions.append(open_description_message(message, community))
            except (WakuLegacyError, ValueError):
                out.unreadable_descriptions += 1
        elif topic in links:
            out.links.append(
                LinkCandidate(topic, bytes(message.payload), int(message.version or 0), where)
            )
    return out


def read_store_published(
    store: NewestMessages, community: CommunityId, where: str, *, limit: int = STORE_EVIDENCE_LIMIT
) -> Published:
    """The same from a v2 store: the newest ``limit`` messages of the community's chat and of
    each link chat (descriptions and links are republished; the newest count)."""
    rows: list[RawMessage] = []
    for topic in evidence_topics(community):
        rows.extend(store.newest(topic, limit))
    return read_published(rows, community, where)


def read_link_file(path: str | Path) -> list[LinkCandidate]:
    """The archive-link messages of a file ``archive build`` writes: ``.pb`` (one protobuf
    WakuMessage) or ``.json`` (every chat's nwaku relay body under ``"messages"``, or one
    body)."""
    from waku_legacy.archive.magnet import magnet_message_from_json
    from waku_legacy.files import read_small_file
    from waku_legacy.proto import waku_message_pb2
    from waku_legacy.proto.codec import parse_message

    path = Path(path)
    raw = read_small_file(str(path), what="link message", max_size=MAX_LINK_FILE_BYTES)
    if path.suffix != ".json":
        messages = [parse_message(waku_message_pb2.WakuMessage, raw, f"link message {path}",
                                  max_size=MAX_LINK_FILE_BYTES)]  # fmt: skip
    else:
        body = json.loads(raw)
        bodies = body.get("messages") if isinstance(body, dict) else None
        if not isinstance(bodies, list) or not bodies:
            bodies = [body]
        messages = [
            magnet_message_from_json(item.get("body", item) if isinstance(item, dict) else item)
            for item in bodies
        ]
    return [
        LinkCandidate(m.content_topic, bytes(m.payload), int(m.version), str(path))
        for m in messages
    ]


def folder_entries(
    archive_dir: str | Path, community: CommunityId, flavour: Flavour | str
) -> list[ArchivedEntry]:
    """Every message of the community's archives in ``archive_dir`` (``0x<id>/data`` and
    ``index``), in import order: archives oldest window first, messages as archived."""
    from waku_legacy.archive.data_files import read_archive, read_index

    index = read_index(archive_dir, community, flavour=flavour)
    out: list[ArchivedEntry] = []
    for entry in sorted(index.entries, key=lambda e: (e.window_from, e.offset)):
        archive = read_archive(archive_dir, community, entry, flavour=flavour)
        out.extend(ArchivedEntry(entry.window_from, m, entry.window_to) for m in archive.messages)
    return out
