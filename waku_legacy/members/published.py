"""What a member's client hears besides the archives: the community's signed descriptions and
archive-link messages, read from v2 messages (a store's rows or protobuf ``WakuMessage``).

Descriptions are opened by :func:`~waku_legacy.identity.descriptions.open_description_payload`
(the community's own chat, signed by its key); archive-link messages are only collected here
(both link chats), and judged per generation by :func:`.preview.judge_link`.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from waku_legacy.archive.clock import STORE_EVIDENCE_LIMIT, NewestMessages, RawMessage
from waku_legacy.errors import WakuLegacyError
from waku_legacy.identity.descriptions import SignedDescription, open_description_payload
from waku_legacy.identity.topics import CommunityId, content_topic_of_chat
from waku_legacy.members.preview import LinkCandidate

__all__ = ["Published", "read_published", "read_store_published"]


@dataclass(slots=True)
class Published:
    descriptions: list[SignedDescription] = field(default_factory=list)
    links: list[LinkCandidate] = field(default_factory=list)
    unreadable_descriptions: int = 0  # on the community's chat, not a description it signed

    def merge(self, other: Published) -> None:
        self.descriptions += other.descriptions
        self.links += other.links
        self.unreadable_descriptions += other.unreadable_descriptions


def link_topics(community: CommunityId) -> tuple[str, str]:
    """The content topics of ``<id>-memberUpdate`` and ``<id>-magnetlinks``."""
    return (
        content_topic_of_chat(community.universal_chat_id),
        content_topic_of_chat(community.magnetlinks_chat_id),
    )


def read_published(
    messages: Iterable[RawMessage], community: CommunityId, where: str
) -> Published:
    """Descriptions signed by the community key and every message on a link chat."""
    own = content_topic_of_chat(community.chat_id)
    links = link_topics(community)
    out = Published()
    for message in messages:
        topic = message.content_topic
        if topic == own:
            try:
                if int(message.version or 0) != 1:
                    raise WakuLegacyError("payload version is not 1")
                out.descriptions.append(open_description_payload(bytes(message.payload), community))
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
    for topic in (content_topic_of_chat(community.chat_id), *link_topics(community)):
        rows.extend(store.newest(topic, limit))
    return read_published(rows, community, where)
