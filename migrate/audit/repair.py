"""``waku-legacy audit --repair``: archive what the audit found missing, then audit again.

The catch-up archives, the torrent and the signed link are made by
:func:`~waku_legacy.archive.repair.repair_archives` (its notes say what status-go's members
do with them). Here: the clock evidence the community already published -- the signed
descriptions and archive-link messages the sources hold on the community's own chat and its
two archive-link chats, and the ``--store``'s newest there -- so that the new link's clock is
above every earlier one (:mod:`waku_legacy.archive.clock`).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from waku_legacy.archive.clock import ClockEvidence, evidence_topics, read_evidence

if TYPE_CHECKING:
    import coincurve

    from waku_legacy.archive.repair import RepairReport
    from waku_legacy.migrate.audit.request import AuditRequest
    from waku_legacy.migrate.progress import SparkProgress

__all__ = ["RepairKeys", "link_evidence", "repair_community", "repair_lines"]


@dataclass(frozen=True, slots=True)
class RepairKeys:
    community_key: coincurve.PrivateKey
    operator_key: coincurve.PrivateKey | None  # signs the link's 26/WAKU-PAYLOAD
    torrent_dir: Path
    archive_link_chats: str
    min_link_clock: int | None = None


@dataclass(frozen=True, slots=True)
class _Raw:
    content_topic: str
    payload: bytes
    version: int


def link_evidence(request: AuditRequest) -> ClockEvidence:
    """Descriptions and archive-link messages of the community in the sources and the store."""
    from waku_legacy.archive.clock import read_store_evidence
    from waku_legacy.migrate.audit.request import channel_mapping
    from waku_legacy.migrate.audit.sources import raw_records
    from waku_legacy.migrate.decode import decode_record

    topics = set(evidence_topics(request.community))
    mapping = channel_mapping(request)
    found = []
    for source in request.sources:
        for raw in raw_records(source, request):
            row = decode_record(raw, mapping)
            if not row["quarantined"] and row["content_topic"] in topics:
                found.append(_Raw(row["content_topic"], bytes(row["payload"]), row["version"]))
    evidence = read_evidence(found, request.community)
    if request.store_url:
        from waku_legacy.store import open_store

        with open_store(request.store_url) as store:
            evidence = evidence.merge(read_store_evidence(store, request.community))
    return evidence


def repair_community(
    request: AuditRequest, keys: RepairKeys, progress: SparkProgress
) -> tuple[RepairReport, dict[str, Any], dict[str, Any]]:
    """Audit, append the catch-up archives, sign the new link; then the second audit.
    (what was appended, the first audit's document, the second's)"""
    from waku_legacy.archive.repair import repair_archives
    from waku_legacy.identity.topics import chat_topic
    from waku_legacy.migrate.audit.archives import with_published_archive_topics
    from waku_legacy.migrate.audit.run import audit_community, audit_missing

    request = with_published_archive_topics(request, request.archive_topics)
    first, missing = audit_missing(request, progress)
    channel_topics = [chat_topic(request.community.channel_chat_id(c)) for c in request.channels]
    progress.log(f"repair: {_copies_of_messages(first)} to archive")
    report = repair_archives(
        request.archive_dir, keys.torrent_dir, request.community, missing, channel_topics,
        archive_topics=request.new_window_topics(),
        window_topics={(s, e): m for s, e, m in request.window_topics},
        community_key=keys.community_key,
        payload_signer=keys.operator_key,
        pubsub_topic=request.pubsub_topic, archive_link_chats=keys.archive_link_chats,
        evidence=link_evidence(request) if missing else None, flavour=request.flavour,
        min_link_clock=keys.min_link_clock,
    )  # fmt: skip
    return report, first, audit_community(request, progress)


def _copies_of_messages(audit: dict[str, Any]) -> str:
    """The first audit's missing copies as "N message(s) (M missing cop(ies))": a message
    with one of its copies archived is not missing, and its other copy is appended too."""
    copies = audit["missing"]
    messages = len({item["message"] for item in copies})
    return f"{messages} message(s) ({len(copies)} missing cop(ies) of them)"


def repair_lines(report: RepairReport, first: dict[str, Any]) -> list[str]:
    """What the repair did, for stderr (``first``: the audit that found the gaps)."""
    if not report.archive_ids:
        return ["repair: nothing missing, nothing appended"]
    clock = report.clock or {}
    return [
        f"repair: {len(report.archive_ids)} catch-up archive(s) for {_copies_of_messages(first)} "
        f"appended (data {report.old_data_length} -> {report.data_length} bytes)",
        f"repair: torrent {report.torrent_path}",
        f"repair: magnet {report.magnet_uri}",
        f"repair: link message {', '.join(report.magnet_message_paths)} "
        f"(clock {clock.get('clock')}: {clock.get('reason')})",
    ]
