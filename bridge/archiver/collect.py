"""One archive run's input and files, from the v2 store: the community's channel messages
(decrypted, as status-go archive messages), the clocks it already used (from the store or a
store node), and :func:`build_from_store`."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import coincurve

from waku_legacy.archive import (
    BuildReport,
    CommunityLayout,
    build_community_archives,
    read_index,
)
from waku_legacy.archive.clock import (
    ClockEvidence,
    evidence_topics,
    read_evidence,
    read_store_evidence,
)
from waku_legacy.archive.data_files import recorded_last_end
from waku_legacy.bridge.config import ArchiveConfig, CommunityConfig
from waku_legacy.crypto.keccak import keccak256
from waku_legacy.crypto.payload import decode_payload
from waku_legacy.errors import CryptoError, DecodeError, WakuLegacyError
from waku_legacy.faults import FaultHook, no_fault
from waku_legacy.identity.topics import symmetric_key_for_chat, v1_topic_to_content_topic
from waku_legacy.mailserver_compat.wire.convert import archive_message
from waku_legacy.proto import status_archive_pb2
from waku_legacy.store import MessageStore, StoreQuery

__all__ = [
    "CLOCK_EVIDENCE_LIMIT",
    "CollectStats",
    "build_from_store",
    "collect_archive_messages",
    "node_clock_evidence",
    "store_clock_evidence",
]


NS = 1_000_000_000
CLOCK_EVIDENCE_LIMIT = 2000  # messages read from a store node when looking for used clocks


@dataclass(slots=True)
class CollectStats:
    read: int = 0
    archived_input: int = 0
    undecryptable: int = 0
    from_envelopes: int = 0


def collect_archive_messages(
    store: MessageStore,
    community: CommunityConfig,
    start: int | None,
    end: int,
    *,
    batch: int = 1000,
) -> tuple[list[status_archive_pb2.WakuMessage], CollectStats]:
    """Archive messages of ``community``'s channels with ``start <= t < end`` (seconds)."""
    channels = community.channel_topics()  # topic -> uuid
    keys = {t: symmetric_key_for_chat(community.id.channel_chat_id(u)) for t, u in channels.items()}
    by_content = {v1_topic_to_content_topic(t): t for t in channels}
    stats = CollectStats()
    out: list[status_archive_pb2.WakuMessage] = []
    cursor = None
    while True:
        page = store.query(
            StoreQuery(
                content_topics=list(by_content), start_time=None if start is None else start * NS,
                end_time=end * NS - 1, cursor=cursor, ascending=True, limit=batch,
            )
        )  # fmt: skip
        envelopes = store.get_envelopes([m.message_hash for m in page.messages])
        for m in page.messages:
            stats.read += 1
            topic = by_content[m.content_topic]
            try:
                decoded = decode_payload(m.payload, symmetric_key=keys[topic])
            except (CryptoError, DecodeError):
                stats.undecryptable += 1
                continue
            envelope = envelopes.get(bytes(m.message_hash))
            if envelope is not None:
                stats.from_envelopes += 1
                digest = keccak256(envelope)
            else:
                digest = m.message_hash
            out.append(
                archive_message(
                    message_hash=digest, topic=topic, timestamp=m.timestamp // NS, decoded=decoded
                )
            )
        if page.cursor is None:
            break
        cursor = page.cursor
    stats.archived_input = len(out)
    return out, stats


def store_clock_evidence(store: MessageStore, community: CommunityConfig) -> ClockEvidence:
    """Clocks ``community`` already used, from the local v2 store (the core's reader)."""
    return read_store_evidence(store, community.id)


def node_clock_evidence(
    node: str, community: CommunityConfig, *, timeout: float = 30.0, retries: int = 2
) -> ClockEvidence:
    """The same from a store node, through its REST store API (store.rest_client's pager): its
    first ``3 * CLOCK_EVIDENCE_LIMIT`` messages on the three topics."""
    from waku_legacy.store.rest_client import StorePager, fetch_pages
    from waku_legacy.store.rest_json import parse_key_value

    pager = StorePager(
        pubsub_topic=community.pubsub_topic, content_topics=evidence_topics(community.id)
    )
    messages: list[Any] = []
    for page in fetch_pages(node, pager, timeout=timeout, retries=retries):
        for raw in page.messages:
            try:
                entry = parse_key_value(raw, f"{node} store entry")
            except WakuLegacyError:
                continue
            if entry.message is not None:
                messages.append(entry.message)
        if len(messages) >= 3 * CLOCK_EVIDENCE_LIMIT:
            break
    return read_evidence(messages, community.id)


def build_from_store(
    store: MessageStore,
    community: CommunityConfig,
    config: ArchiveConfig,
    *,
    now: int,
    clock_ms: int,
    key: coincurve.PrivateKey | None,
    operator_key: coincurve.PrivateKey | None = None,
    logos_storage: Any = None,
    fault: FaultHook = no_fault,
) -> tuple[BuildReport, CollectStats]:
    """One archive run's files: the channel messages since the recorded end, read from
    ``store``, archived by :func:`build_community_archives` (the bytes every other writer
    makes for the same window: :mod:`waku_legacy.archive.canonical`). ``fault`` is called
    before each change to a file (a bridge's fencing check: :mod:`waku_legacy.archive.fence`).
    """
    layout = CommunityLayout.of(config.archive_dir, community.id, config.torrent_dir)
    index = read_index(config.archive_dir, community.id, flavour=config.flavour)
    last_end = recorded_last_end(layout, index)
    messages, stats = collect_archive_messages(store, community, last_end, now)
    report = build_community_archives(
        config.archive_dir, config.torrent_dir, community.id,
        list(community.channel_topics()), messages, now=now,
        flavour=config.flavour, community_key=key,
        pubsub_topic=community.pubsub_topic, clock_ms=clock_ms,
        archive_link_chats=community.archive_link_chats,
        payload_signer=operator_key,
        logos_storage=logos_storage,
        archive_topics=community.archive_topics,  # channel/universal/both
        fault=fault,
    )  # fmt: skip
    return report, stats
