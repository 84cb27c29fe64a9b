"""The one function that decides an archive's bytes (issue 22).

Every writer of archives -- the migration (per window, on Spark executors), ``export`` (the
migration), ``archive build`` and the bridge (:func:`~waku_legacy.archive.build.
build_community_archives`), and ``audit --repair`` (:mod:`~waku_legacy.archive.repair`) --
hands its messages to :func:`canonical_archives`, which decides:

- the metadata's ``contentTopic`` list: the channel topics **sorted** (bytewise), then the
  community's ``-memberUpdate`` topic when ``archive_topics`` asks for it
  (:func:`~waku_legacy.archive.topics.archive_metadata_topics`). The migration has always
  sorted them and has published the most archives; the bridge used to keep its config order,
  which gave other bytes (other archive ids, torrent and CIDs) for the same window;
- which copies of each channel message are archived and with which hash
  (:func:`~waku_legacy.archive.topics.apply_archive_topics`);
- the windows, the split at the size limit and the message order (``(timestamp, hash)``,
  duplicates kept once): :func:`~waku_legacy.archive.partition.plan_archives`.

So the same messages, window bounds and settings give the same bytes whichever tool writes
them. Archives already published are never rewritten (append-only); only archives written
from now on follow this order.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from waku_legacy.archive.encode import EncodedArchive, Flavour
from waku_legacy.archive.message import AnyArchiveMessage
from waku_legacy.archive.partition import (
    MAX_ARCHIVE_BYTES,
    WEEK_SECONDS,
    ArchivePlan,
    plan_archives,
)
from waku_legacy.archive.topics import (
    ArchiveTopics,
    apply_archive_topics,
    archive_metadata_topics,
)
from waku_legacy.identity.topics import CommunityId

__all__ = ["CanonicalArchives", "canonical_archives", "canonical_metadata_topics"]


@dataclass(slots=True)
class CanonicalArchives:
    plan: ArchivePlan[AnyArchiveMessage]  # windows, parts and the counts (late, future, ...)
    metadata_topics: tuple[bytes, ...]
    encoded: list[EncodedArchive]


def canonical_metadata_topics(
    channel_topics: Iterable[bytes], community: CommunityId | str, mode: ArchiveTopics | str
) -> tuple[bytes, ...]:
    """The metadata ``contentTopic`` list of every archive written for ``mode``."""
    return archive_metadata_topics(sorted(bytes(t) for t in channel_topics), community, mode)


def canonical_archives(
    messages: Iterable[AnyArchiveMessage],
    channel_topics: Iterable[bytes],
    community: CommunityId | str,
    archive_topics: ArchiveTopics | str,
    *,
    last_end: int | None,
    now: int,
    flavour: Flavour | str,
    partition: int = WEEK_SECONDS,
    max_archive_bytes: int = MAX_ARCHIVE_BYTES,
    progress: Callable[[int, int], None] | None = None,
    relabelled: bool = False,
) -> CanonicalArchives:
    """Plan and encode the archives of ``messages`` (a community's channel messages in their
    archive form, any order) from ``last_end`` (None: the oldest message) up to ``now``.

    ``relabelled``: ``messages`` are already the copies ``archive_topics`` makes (an audit's
    missing copies), archived as they are."""
    flavour = Flavour.parse(flavour)
    channels: Sequence[bytes] = sorted(bytes(t) for t in channel_topics)
    if relabelled:
        copies = list(messages)
        topics = archive_metadata_topics(channels, community, archive_topics)
    else:
        copies, topics = apply_archive_topics(messages, channels, community, archive_topics)
    plan = plan_archives(
        copies, last_end=last_end, now=now, partition=partition,
        max_archive_bytes=max_archive_bytes,
    )  # fmt: skip
    encoded = []
    for number, planned in enumerate(plan.archives):
        if progress is not None:
            progress(number, len(plan.archives))
        encoded.append(
            EncodedArchive.build(
                planned.window_from, planned.window_to, topics, planned.messages, flavour=flavour
            )
        )
    if progress is not None:
        progress(len(plan.archives), len(plan.archives))
    return CanonicalArchives(plan, topics, encoded)
