"""The ``[[community]]`` table the migration and the bridge both read: a community's id,
channels and shard, its keys, where its archive link goes and which back end holds its
archives; and ``[logos_storage]``, which that back end needs. Each key is declared once on
:class:`CommunityConfig` and :class:`LogosStorageConfig` (defaults:
:mod:`waku_legacy.archive.defaults`); the key tables (docs/configuration.md) and the example
configs are generated from them (:mod:`waku_legacy.config.docs`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import coincurve

from waku_legacy.archive import defaults
from waku_legacy.config.keys import KeyReader, KeyRef, Kind, key, read_table
from waku_legacy.errors import ConfigError, WakuLegacyError
from waku_legacy.identity.shards import community_pubsub_topic
from waku_legacy.identity.topics import (
    CommunityId,
    chat_topic,
    symmetric_key_for_chat,
    v1_topic_to_content_topic,
)

__all__ = [
    "CommunityConfig",
    "LogosStorageConfig",
    "load_community_key",
    "load_operator_key",
    "parse_communities",
    "parse_community",
    "parse_logos_storage",
]


def _community_id(text: str, ref: KeyRef) -> CommunityId:
    try:
        return CommunityId.parse(text)
    except WakuLegacyError:
        raise ref.error("0x followed by 66 hex digits (a compressed public key)", text) from None


def _shard(shard: int, ref: KeyRef) -> int:
    try:
        community_pubsub_topic(shard)
    except WakuLegacyError as exc:
        raise ConfigError(f"{ref.where}: key 'shard': {exc}") from None
    return shard


def _backend(value: Any, ref: KeyRef) -> str:
    from waku_legacy.archive.logos_storage import parse_backend

    return parse_backend(value, ref.where)


def _node_url(value: str, ref: KeyRef) -> str:
    from waku_legacy.archive.logos_storage import parse_node_url

    return parse_node_url(value, ref.where)


@dataclass(frozen=True, slots=True)
class CommunityConfig:
    """One table per community (repeat the table): its history is migrated, archived and
    published"""

    id: CommunityId = key(
        kind=Kind.STRING,
        parse=_community_id,
        hint="0x02…",
        doc="the community's compressed public key, 0x + 66 hex",
    )
    channels: tuple[str, ...] = key(
        hint=["aaaaaaaa-bbbb-4ccc-8ddd-eeeeeeeeeeee"], doc="its channels' UUIDs (8-4-4-4-12)"
    )
    shard: int = key(
        min=0, max=1023, parse=_shard, hint=128, doc="its relay shard: /waku/2/rs/16/<shard>"
    )
    key_file: str | None = key(
        None,
        kind=Kind.PATH,
        hint="community.key",
        doc="the community's private key (hex): signs the archive link (needed to publish it)",
    )
    name: str | None = key(None, hint="My community", doc="a label")
    archive_link_chats: str = key(
        defaults.ARCHIVE_LINK_CHATS,
        choices=("both", "universal", "magnetlinks"),
        expected='"both", "universal" (<id>-memberUpdate, read by current Status clients) or '
        '"magnetlinks" (<id>-magnetlinks, read by clients from 2024)',
        doc="where the archive link is sent: <id>-memberUpdate (universal, current clients), "
        "<id>-magnetlinks (2024 clients) or both",
    )
    # signs the archive-link message's 26/WAKU-PAYLOAD
    operator_key_file: str | None = key(
        None,
        kind=Kind.PATH,
        hint="operator.key",
        shown="key_file",
        doc="signs the link's 26/WAKU-PAYLOAD (status-go: the node's own key)",
    )
    backend: str = key(
        defaults.BACKEND,
        kind=Kind.ANY,
        parse=_backend,
        choices=("torrent", "logos-storage"),
        doc="logos-storage: archives uploaded to [logos_storage], the link is "
        "the index CID (one kind of link per community)",
    )
    archive_topics: str = key(
        defaults.ARCHIVE_TOPICS,
        choices=("channel", "universal", "both"),
        expected='"channel" (the channels\' own topics, imported by clients from before '
        'status-go PR #5993), "universal" (<id>-memberUpdate, imported by current Status '
        'clients) or "both"',
        doc="archived channel messages on their channel topics (clients before status-go "
        "PR #5993), on <id>-memberUpdate (current clients), or both",
    )
    # the lowest clock (ms) a new archive-link message may have: links members already hold
    # that no store or file here shows (a Status client published them); docs/compat/link-clock.md
    min_link_clock: int | None = key(
        None,
        min=0,
        max=2**63 - 1,
        hint=1730000000000,
        doc="archive links signed at least at this clock (ms): "
        "above links a Status client published",
    )

    @property
    def pubsub_topic(self) -> str:
        return community_pubsub_topic(self.shard)

    def channel_chat_ids(self) -> dict[str, str]:
        """channel uuid -> chat id."""
        return {c: self.id.channel_chat_id(c) for c in self.channels}

    def channel_topics(self) -> dict[bytes, str]:
        """4-byte v1 topic -> channel uuid, for every channel."""
        return {chat_topic(chat): uuid for uuid, chat in self.channel_chat_ids().items()}

    def channel_keys(self) -> dict[str, bytes]:
        """Content topic -> the channel's symmetric key, for every channel."""
        return {
            v1_topic_to_content_topic(chat_topic(chat)): symmetric_key_for_chat(chat)
            for chat in self.channel_chat_ids().values()
        }


def parse_community(raw: Any, number: int, base: Path) -> CommunityConfig:
    reader = KeyReader(CommunityConfig, raw, f"[[community]] #{number}", base=base)
    community = reader.value("id")
    reader.where = f"[[community]] {raw['id'][:12]}…"
    values = reader.values()
    if not values["channels"]:
        raise ConfigError(f"{reader.where}: key 'channels' must list at least one channel uuid")
    for channel in values["channels"]:
        try:
            community.channel_chat_id(channel)
        except WakuLegacyError:
            raise reader.ref("channels").error(
                "canonical lowercase UUIDs (8-4-4-4-12)", channel
            ) from None
    return CommunityConfig(**values)


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


@dataclass(frozen=True, slots=True)
class LogosStorageConfig:
    """The Logos Storage node (needed when a community has backend = "logos-storage")"""

    url: str = key(
        parse=_node_url,
        hint="http://127.0.0.1:8080",
        doc="the node's REST root (/api/storage/v1 under it)",
    )


def parse_communities(
    data: Mapping[str, Any], base: Path, origin: str
) -> tuple[CommunityConfig, ...]:
    """Every ``[[community]]`` of a config: each valid, no community twice, and no channel
    topic claimed by two communities (a message's shard must be unambiguous)."""
    raw_communities = data.get("community") or []
    if not isinstance(raw_communities, list):
        raise KeyRef(origin, "community", base).error(
            "an array of tables ([[community]])", raw_communities
        )
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
    data: Mapping[str, Any], communities: tuple[CommunityConfig, ...], origin: str
) -> str | None:
    """``[logos_storage] url``; required when a community's backend is "logos-storage"."""
    from waku_legacy.archive.logos_storage import LOGOS_STORAGE

    raw = data.get("logos_storage")
    users = [str(c.id) for c in communities if c.backend == LOGOS_STORAGE]
    if raw is None:
        if users:
            raise ConfigError(
                f'{origin}: community {users[0]} has backend = "logos-storage" but there is '
                "no [logos_storage] table with the node's url"
            )
        return None
    config: LogosStorageConfig = read_table(LogosStorageConfig, raw, "[logos_storage]")
    return config.url
