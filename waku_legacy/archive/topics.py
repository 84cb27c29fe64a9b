"""Which 4-byte topics a community's archived channel messages carry (issue 12).

status-go imports an archived message only when it has a filter for the message's exact
4-byte topic (``handleArchiveMessages``: ``ChatFilterByTopic(message.Topic)``, no filter ->
skipped). Since status-go PR #5993 a member has filters only for ``<id>``,
``<id>-memberUpdate`` and the community key topics, never for a channel's
``keccak256(<id><uuid>)[:4]``, so current clients import no v1-era channel message; clients
from before #5993 have the channel filters. Import does not decrypt and routes a message by
the ``chat_id`` inside its ChatMessage, so a channel message relabelled with the
``-memberUpdate`` topic still lands in its channel (see docs/compat/archive-topics.md).

Per community, ``archive_topics``:

- ``"channel"``: messages keep their channel topics (the archives as before).
- ``"universal"``: every channel message carries the community's ``-memberUpdate`` topic
  instead, and the archive metadata lists that topic instead of the channel topics.
- ``"both"``: each channel message is archived twice, on its channel topic and on
  ``-memberUpdate``; the metadata lists the channel topics and ``-memberUpdate``. A client with
  both filters imports both copies and keeps one (same application-layer message id).

The relabelled copy keeps ``payload``, ``sig``, ``padding``, ``timestamp`` (seconds) and
``thirdPartyId``. Its ``hash``: status-go fills the archive hash from the transport message
it stored (``waku_messages``, keyed by hash; for v2 the deterministic message hash of the
envelope as received, which depends on the content topic); no envelope ever carried the
relabelled copy, so there is no such hash to take. It keeps the original hash when it is
the message's only copy ("universal": it names the same message; the migration's late-message
check compares these hashes with the existing archives), and in "both" it is
``keccak256(original hash || universal 4-byte topic)``, so that no hash occurs twice in an
archive (status-go's table could not hold that; ``archive verify`` refuses it). status-go uses
the hash on import only as the processed-envelope key, never to find or check the message.

This module is the one place that relabels; :func:`apply_archive_topics` runs before the
archives are planned, so the size limit and the (timestamp, hash) order see every copy.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Sequence

from waku_legacy.archive.message import AnyArchiveMessage, ArchiveMessage, as_archive_message
from waku_legacy.crypto.keccak import keccak256
from waku_legacy.errors import ConfigError
from waku_legacy.identity.topics import CommunityId, chat_topic

__all__ = [
    "ArchiveTopics",
    "apply_archive_topics",
    "archive_metadata_topics",
    "archive_topics_of",
    "relabelled_hash",
    "universal_topic",
]


class ArchiveTopics(enum.StrEnum):
    CHANNEL = "channel"
    UNIVERSAL = "universal"
    BOTH = "both"

    @classmethod
    def parse(cls, value: str | ArchiveTopics) -> ArchiveTopics:
        try:
            return cls(value)
        except ValueError:
            raise ConfigError(
                f"archive_topics must be 'channel' (the channels' own topics: clients from "
                f"before status-go PR #5993), 'universal' (the community's <id>-memberUpdate "
                f"topic: current clients) or 'both', got {value!r}"
            ) from None


def universal_topic(community: CommunityId | str) -> bytes:
    """4-byte topic of ``<id>-memberUpdate`` (status-go ``UniversalChatID()``)."""
    if not isinstance(community, CommunityId):
        community = CommunityId.parse(community)
    return chat_topic(community.universal_chat_id)


def relabelled_hash(original: bytes, topic: bytes) -> bytes:
    """Hash of the second, relabelled copy in "both": keccak256(original hash || topic)."""
    return keccak256(bytes(original) + bytes(topic))


def archive_metadata_topics(
    channel_topics: Sequence[bytes], community: CommunityId | str, mode: ArchiveTopics | str
) -> tuple[bytes, ...]:
    """The topics an archive's metadata lists for ``mode`` (``channel_topics`` in order, then
    ``-memberUpdate``; "universal" drops the channel topics)."""
    mode = ArchiveTopics.parse(mode)
    topics = tuple(bytes(t) for t in channel_topics)
    if mode is ArchiveTopics.CHANNEL:
        return topics
    universal = universal_topic(community)
    if mode is ArchiveTopics.UNIVERSAL:
        return (universal,)
    return topics if universal in topics else (*topics, universal)


def apply_archive_topics(
    messages: Iterable[AnyArchiveMessage],
    channel_topics: Sequence[bytes],
    community: CommunityId | str,
    mode: ArchiveTopics | str,
) -> tuple[list[AnyArchiveMessage], tuple[bytes, ...]]:
    """(messages to archive, metadata topics) for ``mode``.

    Messages on one of ``channel_topics`` are relabelled as the module docstring says; other
    messages (and every message with "channel") pass unchanged.
    """
    mode = ArchiveTopics.parse(mode)
    metadata = archive_metadata_topics(channel_topics, community, mode)
    if mode is ArchiveTopics.CHANNEL:
        return list(messages), metadata
    universal = universal_topic(community)
    channels = {bytes(t) for t in channel_topics} - {universal}
    out: list[AnyArchiveMessage] = []
    for message in messages:
        if bytes(message.topic) not in channels:
            out.append(message)
            continue
        original = as_archive_message(message)
        if mode is ArchiveTopics.BOTH:
            out.append(original)
            digest = relabelled_hash(original.hash, universal)
        else:
            digest = original.hash
        relabelled = ArchiveMessage(
            timestamp=original.timestamp, hash=digest, topic=universal,
            payload=original.payload, sig=original.sig, padding=original.padding,
            third_party_id=original.third_party_id,
        )  # fmt: skip
        out.append(relabelled)
    return out, metadata


def archive_topics_of(
    metadata_topics: Sequence[bytes],
    community: CommunityId | str,
    message_topics: Iterable[bytes] = (),
) -> ArchiveTopics | None:
    """The mode an archive was written in, from its metadata's topics (as
    :func:`archive_metadata_topics` lists them), else -- metadata without topics -- from its
    messages' topics; None when neither says (no topic at all)."""
    universal = universal_topic(community)
    topics = {bytes(t) for t in metadata_topics} or {bytes(t) for t in message_topics}
    if not topics:
        return None
    if universal not in topics:
        return ArchiveTopics.CHANNEL
    return ArchiveTopics.UNIVERSAL if topics == {universal} else ArchiveTopics.BOTH
