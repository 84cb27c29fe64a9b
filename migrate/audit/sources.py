"""The sources' side of an audit (:func:`read_sources`): every record read in plain Python
with the migration's own readers (:func:`~waku_legacy.migrate.sources.plan_source`,
:func:`~waku_legacy.migrate.sources.read_task`), decoded per record with
:func:`~waku_legacy.migrate.decode.decode_record` and deduplicated by ``dedup_key`` as the
migration does (v1 envelope first, then source rank, then location). The community's channel
messages are decrypted into archive messages by the migration's
:func:`~waku_legacy.migrate.archives.archive_fields` (what does not decrypt is never archived
and is only counted), and :func:`~waku_legacy.archive.topics.apply_archive_topics` says which
copies the archives should hold and with which hash ("channel", "universal", "both")."""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from waku_legacy.archive.message import AnyArchiveMessage, ArchiveMessage
from waku_legacy.archive.topics import apply_archive_topics
from waku_legacy.identity.topics import chat_topic
from waku_legacy.migrate.archives import archive_hash
from waku_legacy.migrate.audit.request import AuditRequest, channel_mapping

if TYPE_CHECKING:
    from waku_legacy.migrate.config import SourceConfig
    from waku_legacy.migrate.progress import SparkProgress

__all__ = ["ExpectedCopy", "SourceScan", "raw_records", "read_sources"]

_NANOS = 1_000_000_000


@dataclass(slots=True)
class ExpectedCopy:
    """One copy the archives should hold."""

    hash: bytes
    original: bytes  # the hash of the message it is a copy of
    channel: str
    timestamp: int  # seconds, as archived
    timestamp_ns: int
    sources: set[str]
    message: AnyArchiveMessage | None = None  # with ``keep_messages``


@dataclass(slots=True)
class SourceScan:
    expected: dict[bytes, ExpectedCopy] = field(default_factory=dict)  # archive hash -> copy
    elsewhere: dict[bytes, str] = field(default_factory=dict)  # hash on another topic -> source
    undecryptable: Counter[str] = field(default_factory=Counter)  # reason -> messages
    records: int = 0


def raw_records(source: SourceConfig, request: AuditRequest) -> Iterator[dict[str, Any]]:
    """Every RAW record of ``source``; a store-rest URL is asked for the channels only."""
    from waku_legacy.migrate.config import SourceKind
    from waku_legacy.migrate.sources import plan_source, read_task

    if source.kind is SourceKind.STORE_REST and source.url:
        source = dataclasses.replace(
            source, content_topics=tuple(channel_mapping(request).routes), partitions=None,
            state_file=None,
        )  # fmt: skip
    for task in plan_source(source, 1, str(Path(request.work_dir) / "audit")):
        for batch in read_task(task):
            yield from batch.to_pylist()


def _archive_hash(row: dict[str, Any]) -> bytes:
    """The hash an archive gives a stored row (:func:`archive_hash`)."""
    return archive_hash(row["message_hash"], row["db_key"])


def _kept_rows(
    request: AuditRequest, scan: SourceScan, progress: SparkProgress
) -> dict[bytes, tuple[dict[str, Any], set[str]]]:
    """The community's channel messages after dedup (dedup_key -> kept row, its sources);
    hashes on other topics go to ``scan.elsewhere``."""
    from waku_legacy.migrate.decode import decode_record

    mapping = channel_mapping(request)
    cid = str(request.community)
    kept: dict[bytes, tuple[dict[str, Any], set[str]]] = {}
    for source in request.sources:
        with progress.bar(f"audit: read {source.name}", unit="rec") as bar:
            for raw in raw_records(source, request):
                scan.records += 1
                bar.update(1)
                _keep(decode_record(raw, mapping), cid, scan, kept)
    return kept


def _keep(
    row: dict[str, Any],
    cid: str,
    scan: SourceScan,
    kept: dict[bytes, tuple[dict[str, Any], set[str]]],
) -> None:
    """One decoded record into ``kept`` (the migration's dedup) or ``scan.elsewhere``."""
    if row["quarantined"]:
        return
    if row["community"] != cid:
        scan.elsewhere.setdefault(_archive_hash(row), row["source"])
        return
    key = bytes(row["dedup_key"])
    previous = kept.get(key)
    if previous is None:
        kept[key] = (row, {row["source"]})
        return
    previous[1].add(row["source"])
    if _preference(row) < _preference(previous[0]):
        kept[key] = (row, previous[1])


def _preference(row: dict[str, Any]) -> tuple[bool, int, str, str]:
    """The migration's dedup order (:mod:`waku_legacy.migrate.dedup`): lowest wins."""
    return (row["from_v2"], row["rank"], row["source"], row["location"])


def read_sources(
    request: AuditRequest, progress: SparkProgress, archived: set[bytes] | None = None
) -> SourceScan:
    """The copies the archives should hold, from every source.

    A message whose every copy the archives hold (``archived``: their hashes) is counted
    without decrypting it: its copies' hashes and timestamps come from the stored row, as
    :func:`~waku_legacy.migrate.archives.archive_fields` computes them. Only the others are
    decrypted, to tell a missing message (the builder would have archived it) from one that
    does not decrypt (it never would), and to keep it whole for a repair. Decryption is
    most of an audit's work, so a complete community audits at the speed of reading it.
    """
    from waku_legacy.identity.topics import symmetric_key_for_chat

    scan = SourceScan()
    keys = {
        content_topic: symmetric_key_for_chat(request.community.channel_chat_id(route.channel))
        for content_topic, route in channel_mapping(request).routes.items()
    }
    channel_topics = [chat_topic(request.community.channel_chat_id(c)) for c in request.channels]
    for row, sources in _kept_rows(request, scan, progress).values():
        copies = _copies(request, channel_topics, _stored_form(row))
        if archived is None or any(bytes(c.hash) not in archived for c in copies):
            decrypted = _decrypted_form(row, keys[row["content_topic"]], scan)
            if decrypted is None:
                continue
            copies = _copies(request, channel_topics, decrypted)
            kept_whole = request.keep_messages
        else:
            kept_whole = False  # archived: a repair never needs it
        original = bytes(copies[0].hash)  # each mode's first copy keeps the original hash
        for copy in copies:
            digest = bytes(copy.hash)
            scan.expected[digest] = ExpectedCopy(
                digest, original, row["channel"], copy.timestamp, row["timestamp"],
                set(sources), copy if kept_whole else None,
            )  # fmt: skip
    return scan


def _stored_form(row: dict[str, Any]) -> ArchiveMessage:
    """The archived message's hash, topic and timestamp, read off the stored row (no
    payload: enough to name its copies)."""
    from waku_legacy.identity.topics import v1_topic_from_content_topic

    return ArchiveMessage(
        timestamp=row["timestamp"] // _NANOS, hash=_archive_hash(row),
        topic=v1_topic_from_content_topic(row["content_topic"]), payload=b"",
    )  # fmt: skip


def _decrypted_form(
    row: dict[str, Any], symmetric_key: bytes, scan: SourceScan
) -> ArchiveMessage | None:
    """The archived message whole (as the builder makes it), or None when it does not
    decrypt (counted by reason: the builder never archives it)."""
    from waku_legacy.migrate.archives import archive_fields

    fields = archive_fields(
        message_hash=row["message_hash"], content_topic=row["content_topic"],
        payload=row["payload"], version=row["version"], timestamp_ns=row["timestamp"],
        db_key=row["db_key"], symmetric_key=symmetric_key,
    )  # fmt: skip
    if not fields["ok"]:
        scan.undecryptable[fields["reason"]] += 1
        return None
    return ArchiveMessage(
        timestamp=fields["timestamp"], hash=fields["hash"], topic=fields["topic"],
        payload=fields["payload"], sig=fields["sig"], padding=fields["padding"],
    )  # fmt: skip


def _copies(
    request: AuditRequest, channel_topics: Sequence[bytes], message: ArchiveMessage
) -> Sequence[AnyArchiveMessage]:
    """The copies ``archive_topics`` makes of ``message`` (:mod:`waku_legacy.archive.topics`)."""
    mode = request.topics_at(message.timestamp)
    copies, _ = apply_archive_topics([message], channel_topics, request.community, mode)
    return copies
