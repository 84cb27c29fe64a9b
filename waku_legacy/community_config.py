"""The ``[[community]]`` table the migration and the bridge both read: a community's id,
channels and shard, its keys, where its archive link goes and which back end holds its
archives; and ``[logos_storage]``, which that back end needs.

    [[community]]                       # repeat
    id = "0x02…"                        # compressed public key, 0x + 66 hex
    channels = ["<uuid>", …]
    shard = 128                         # its relay shard: /waku/2/rs/16/<shard>
    key_file = "community.key"          # optional: hex private key, signs the archive link
    archive_link_chats = "both"         # "universal" (<id>-memberUpdate), "magnetlinks"
                                        #   (<id>-magnetlinks, 2024 clients) or "both"
                                        #   (defaults: waku_legacy.archive.defaults)
    operator_key_file = "operator.key"  # optional: signs the link's 26/WAKU-PAYLOAD
    backend = "torrent"                 # or "logos-storage"
    archive_topics = "both"             # "channel", "universal" or "both"
    min_link_clock = 1730000000000      # optional: sign archive links at least at this clock
    name = "…"                          # optional label

The full description of each key is in :mod:`waku_legacy.migrate.config`.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import coincurve

from waku_legacy.archive import defaults
from waku_legacy.config import ConfigTable, resolve_path
from waku_legacy.errors import ConfigError, WakuLegacyError
from waku_legacy.identity.shards import community_pubsub_topic
from waku_legacy.identity.topics import CommunityId, chat_topic

__all__ = [
    "CommunityConfig",
    "load_community_key",
    "load_operator_key",
    "parse_communities",
    "parse_community",
    "parse_logos_storage",
]


@dataclass(frozen=True, slots=True)
class CommunityConfig:
    id: CommunityId
    channels: tuple[str, ...]
    shard: int
    key_file: str | None = None
    name: str | None = None
    archive_link_chats: str = defaults.ARCHIVE_LINK_CHATS  # "both" | "universal" | "magnetlinks"
    operator_key_file: str | None = None  # signs the archive-link message's 26/WAKU-PAYLOAD
    backend: str = defaults.BACKEND  # "torrent" | "logos-storage" (issue 12)
    archive_topics: str = defaults.ARCHIVE_TOPICS  # "channel" | "universal" | "both"
    # the lowest clock (ms) a new archive-link message may have: links members already hold
    # that no store or file here shows (a Status client published them); README "The link's
    # clock"
    min_link_clock: int | None = None

    @property
    def pubsub_topic(self) -> str:
        return community_pubsub_topic(self.shard)

    def channel_chat_ids(self) -> dict[str, str]:
        """channel uuid -> chat id."""
        return {c: self.id.channel_chat_id(c) for c in self.channels}

    def channel_topics(self) -> dict[bytes, str]:
        """4-byte v1 topic -> channel uuid, for every channel."""
        return {chat_topic(chat): uuid for uuid, chat in self.channel_chat_ids().items()}


def parse_community(raw: Any, number: int, base: Path) -> CommunityConfig:
    t = ConfigTable(raw, f"[[community]] #{number}")
    text = t.string("id", required=True)
    try:
        community = CommunityId.parse(text)
    except WakuLegacyError:
        raise t.error(
            "id", "0x followed by 66 hex digits (a compressed public key)", text
        ) from None
    t.where = f"[[community]] {text[:12]}…"
    channels = t.strings("channels", required=True)
    if not channels:
        raise ConfigError(f"{t.where}: key 'channels' must list at least one channel uuid")
    for channel in channels:
        try:
            community.channel_chat_id(channel)
        except WakuLegacyError:
            raise t.error("channels", "canonical lowercase UUIDs (8-4-4-4-12)", channel) from None
    shard = t.integer("shard", required=True, low=0, high=1023)
    try:
        community_pubsub_topic(shard)
    except WakuLegacyError as exc:
        raise ConfigError(f"{t.where}: key 'shard': {exc}") from None
    key_file = resolve_path(base, t.string("key_file"))
    name = t.string("name")
    link_chats = t.string("archive_link_chats", default=defaults.ARCHIVE_LINK_CHATS)
    if link_chats not in ("both", "universal", "magnetlinks"):
        raise t.error(
            "archive_link_chats",
            '"both", "universal" (<id>-memberUpdate, read by current Status clients) or '
            '"magnetlinks" (<id>-magnetlinks, read by clients from 2024)',
            link_chats,
        )
    operator_key_file = resolve_path(base, t.string("operator_key_file"))
    from waku_legacy.archive.logos_storage import parse_backend

    backend = parse_backend(t.raw("backend"), t.where)
    from waku_legacy.archive.topics import ArchiveTopics

    archive_topics = t.string("archive_topics", default=defaults.ARCHIVE_TOPICS)
    if archive_topics not in set(ArchiveTopics):
        raise t.error(
            "archive_topics",
            '"channel" (the channels\' own topics, imported by clients from before status-go '
            'PR #5993), "universal" (<id>-memberUpdate, imported by current Status clients) or '
            '"both"',
            archive_topics,
        )
    min_link_clock = t.integer("min_link_clock", low=0, high=2**63 - 1)
    t.done()
    return CommunityConfig(
        community, channels, shard, key_file, name,
        archive_link_chats=link_chats, operator_key_file=operator_key_file, backend=backend,
        archive_topics=archive_topics, min_link_clock=min_link_clock,
    )  # fmt: skip


def load_operator_key(community: CommunityConfig) -> coincurve.PrivateKey | None:
    """The key that signs the archive-link message's 26/WAKU-PAYLOAD (``operator_key_file``),
    or None: then the community key signs it as well. status-go signs that layer with the
    sending node's identity key (``Transport.addSig``)."""
    if community.operator_key_file is None:
        return None
    from waku_legacy.crypto.key_file import load_node_key

    try:
        return load_node_key(community.operator_key_file, what="operator key file")
    except WakuLegacyError as exc:
        raise ConfigError(f"[[community]] {community.id}: operator_key_file: {exc}") from None


def load_community_key(community: CommunityConfig) -> coincurve.PrivateKey | None:
    """The community's private key (``key_file``: it signs the archive link), or None when
    none is configured; a ConfigError naming the community key file when it is missing,
    malformed or holds another community's key."""
    if community.key_file is None:
        return None
    from waku_legacy.crypto.key_file import load_node_key

    try:
        key = load_node_key(community.key_file, what="community key file")
    except WakuLegacyError as exc:
        raise ConfigError(f"[[community]] {community.id}: key_file: {exc}") from None
    if CommunityId(key.public_key.format(compressed=True)) != community.id:
        raise ConfigError(
            f"[[community]] {community.id}: key_file {community.key_file} holds the key of "
            "another community"
        )
    return key


def parse_communities(top: ConfigTable, base: Path, origin: str) -> tuple[CommunityConfig, ...]:
    """Every ``[[community]]`` of a config: each valid, no community twice, and no channel
    topic claimed by two communities (a message's shard must be unambiguous)."""
    raw_communities = top.raw("community") or []
    if not isinstance(raw_communities, list):
        raise top.error("community", "an array of tables ([[community]])", raw_communities)
    communities = tuple(parse_community(c, i + 1, base) for i, c in enumerate(raw_communities))
    if len({str(c.id) for c in communities}) != len(communities):
        raise ConfigError(f"{origin}: a community is configured twice")
    seen: dict[bytes, str] = {}
    for community in communities:
        for topic in community.channel_topics():
            if topic in seen:
                raise ConfigError(
                    f"{origin}: channel topic 0x{topic.hex()} belongs to two communities"
                )
            seen[topic] = str(community.id)
    return communities


def parse_logos_storage(
    top: ConfigTable, communities: tuple[CommunityConfig, ...], origin: str
) -> str | None:
    """``[logos_storage] url``; required when a community's backend is "logos-storage"."""
    from waku_legacy.archive.logos_storage import LOGOS_STORAGE, parse_node_url

    raw = top.raw("logos_storage")
    users = [str(c.id) for c in communities if c.backend == LOGOS_STORAGE]
    if raw is None:
        if users:
            raise ConfigError(
                f"{origin}: community {users[0]} has backend = \"logos-storage\" but there is "
                "no [logos_storage] table with the node's url"
            )
        return None
    table = ConfigTable(raw, "[logos_storage]")
    url = parse_node_url(table.raw("url"), "[logos_storage]")
    table.done()
    return url
