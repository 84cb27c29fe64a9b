"""One audit end to end (:func:`audit_community`, and :func:`audit_missing` for a repair):
the archives' published mode read first, then the archives scanned
(:mod:`~waku_legacy.migrate.audit.archives`), the sources read
(:mod:`~waku_legacy.migrate.audit.sources`; a message whose every copy is archived is not
decrypted), and the two compared (:mod:`~waku_legacy.migrate.audit.compare`)."""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

from waku_legacy.migrate.audit.archives import scan_archives, with_published_archive_topics
from waku_legacy.migrate.audit.compare import compare
from waku_legacy.migrate.audit.request import AuditRequest
from waku_legacy.migrate.audit.sources import SourceScan, read_sources

if TYPE_CHECKING:
    from waku_legacy.archive.repair import MissingMessage
    from waku_legacy.migrate.progress import SparkProgress

__all__ = ["audit_community", "audit_missing"]


def audit_community(request: AuditRequest, progress: SparkProgress | None = None) -> dict[str, Any]:
    """Audit the community's archives against its sources: the contract's JSON document.
    ``progress``: a bar per source and for the archives on a terminal, log lines otherwise."""
    return _audit(request, progress)[0]


def audit_missing(
    request: AuditRequest, progress: SparkProgress | None = None
) -> tuple[dict[str, Any], list[MissingMessage]]:
    """The audit's document and its missing copies whole, each with the window it was
    reported in (what :func:`~waku_legacy.archive.repair.repair_archives` archives)."""
    from waku_legacy.archive.repair import MissingMessage

    request = with_published_archive_topics(request, request.archive_topics)
    document, scan = _audit(dataclasses.replace(request, keep_messages=True), progress)
    ends = {w["start"]: w["end"] for w in document["windows"]}
    missing = []
    for item in document["missing"]:
        message = scan.expected[bytes.fromhex(item["hash"][2:])].message
        assert message is not None
        missing.append(MissingMessage(item["window"], ends[item["window"]], message))
    return document, missing


def _audit(
    request: AuditRequest, progress: SparkProgress | None
) -> tuple[dict[str, Any], SourceScan]:
    from waku_legacy.migrate.progress import SparkProgress

    progress = progress or SparkProgress(enabled=False)
    if not request.window_topics:
        request = with_published_archive_topics(request, request.archive_topics)
    archives, store_problems = scan_archives(
        request.archive_dir, request.community, request.flavour, progress
    )
    scan = read_sources(request, progress, {bytes(m.hash) for a in archives for m in a.messages})
    progress.log(
        f"sources: {len({c.original for c in scan.expected.values()})} message(s), "
        f"{len(scan.expected)} archive cop(ies) expected, from {scan.records} record(s)"
        + (f"; {sum(scan.undecryptable.values())} channel message(s) do not decrypt"
           if scan.undecryptable else "")
    )  # fmt: skip
    return compare(request, scan, archives, store_problems), scan
