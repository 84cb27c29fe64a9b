"""What an audit audits (:class:`AuditRequest`): one community, its channels, its sources,
its archive folder, and the archive-topics mode of each archived window; and the topic
mapping of the audited channels (:func:`channel_mapping`)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from waku_legacy.archive import defaults
from waku_legacy.archive.encode import Flavour
from waku_legacy.archive.topics import ArchiveTopics
from waku_legacy.identity.topics import CommunityId, chat_topic, v1_topic_to_content_topic

if TYPE_CHECKING:
    from waku_legacy.identity.topic_mapping import TopicMapping
    from waku_legacy.migrate.config import SourceConfig

__all__ = ["DEFAULT_ARCHIVE_TOPICS", "DEFAULT_FLAVOUR", "AuditRequest", "channel_mapping"]

DEFAULT_ARCHIVE_TOPICS = ArchiveTopics(defaults.ARCHIVE_TOPICS)
DEFAULT_FLAVOUR = Flavour(defaults.FLAVOUR)


@dataclass(frozen=True, slots=True)
class AuditRequest:
    """What to audit: one community, its channels, its sources and its archive folder."""

    community: CommunityId
    channels: tuple[str, ...]
    sources: Sequence[SourceConfig]
    archive_dir: Path  # the folder holding ``0x<id>/data`` and ``0x<id>/index``
    origin: str  # how the archives were given (magnet link, .torrent, folder), for the report
    work_dir: str  # scratch for sources that save pages (store-rest)
    pubsub_topic: str  # the community's shard: the message hashes depend on it
    # of windows without archive; None: read from the archives (with_published_archive_topics)
    archive_topics: ArchiveTopics | None = None
    flavour: Flavour = DEFAULT_FLAVOUR
    store_url: str | None = None  # a v2 store: its messages count as live v2 traffic
    keep_messages: bool = False  # keep each expected copy whole (a repair archives them)
    # (from, to) -> the mode an archived window was written in (with_published_archive_topics)
    window_topics: tuple[tuple[int, int, ArchiveTopics], ...] = ()

    def topics_at(self, timestamp: int) -> ArchiveTopics:
        """The mode of the archived window holding ``timestamp``, else ``archive_topics``."""
        for start, end, mode in self.window_topics:
            if start <= timestamp < end:
                return mode
        return self.new_window_topics()

    def new_window_topics(self) -> ArchiveTopics:
        """The mode of a window without archive (what the builder writes now)."""
        return self.archive_topics or DEFAULT_ARCHIVE_TOPICS


def channel_mapping(request: AuditRequest) -> TopicMapping:
    """The topic mapping of the audited community's channels only (the repair reads the
    same sources with it for the link's clock evidence)."""
    from waku_legacy.identity.topic_mapping import ChannelRoute, TopicMapping

    cid = str(request.community)
    routes = {
        v1_topic_to_content_topic(chat_topic(request.community.channel_chat_id(uuid))):
            ChannelRoute(cid, uuid, request.pubsub_topic)
        for uuid in request.channels
    }  # fmt: skip
    return TopicMapping(request.pubsub_topic, routes)
