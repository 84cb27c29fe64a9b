"""Community history archives (61/Community History Archives), status-go flavour by default.

The API the migration and the CLI call (all exported here):

Planning and encoding (pure, deterministic; safe on Spark executors)
    plan_archives(messages, *, last_end: int | None, now: int, partition=WEEK_SECONDS,
                  max_archive_bytes=MAX_ARCHIVE_BYTES) -> ArchivePlan
        status-go's 7-day partition of archive-flavour messages (ArchiveMessage or
        status_archive_pb2.WakuMessage, any order). ArchivePlan.archives: list[PlannedArchive]
        (window, part, messages in (timestamp, hash) order); counts late/future/duplicates/
        oversize; new_last_end.
    plan_windows(start, now, *, partition=WEEK_SECONDS) -> list[Window]
    window_index(timestamp, start, now, partition=WEEK_SECONDS) -> int | None
    split_by_size(sizes, *, max_bytes=MAX_ARCHIVE_BYTES) -> (chunks, dropped)
    encode_archive(window_from, window_to, content_topics, messages, *,
                   flavour="status-go") -> bytes
    EncodedArchive.build(window_from, window_to, content_topics, messages, *, flavour)
    padding_for(raw_size) -> int; index_entry_for(encoded, offset) -> IndexEntry;
    encode_index(entries) -> bytes; decode_index(data, *, flavour, verify_keys=True);
    decode_archive(data, *, flavour) -> DecodedArchive; archive_id(metadata_bytes) -> str

Store (sequential, crash-safe)
    append_archives(archive_dir, community, encoded: Sequence[EncodedArchive], *,
                    flavour=None, fault=no_fault) -> AppendResult
    read_index(archive_dir, community, *, flavour="status-go") -> ArchiveIndex
    read_archive(archive_dir, community, archive_id_or_entry, *, flavour) -> DecodedArchive
"""

from __future__ import annotations

from waku_legacy.archive.encode import (
    PIECE_LENGTH,
    DecodedArchive,
    EncodedArchive,
    Flavour,
    IndexEntry,
    archive_id,
    decode_archive,
    decode_index,
    encode_archive,
    encode_index,
    index_entry_for,
    padding_for,
)
from waku_legacy.archive.errors import (
    ArchiveCorrupted,
    ArchiveDecodeError,
    ArchiveError,
)
from waku_legacy.archive.layout import CommunityLayout, FaultHook, no_fault
from waku_legacy.archive.message import ArchiveMessage
from waku_legacy.archive.partition import (
    MAX_ARCHIVE_BYTES,
    WEEK_SECONDS,
    ArchivePlan,
    PlannedArchive,
    Window,
    plan_archives,
    plan_windows,
    split_by_size,
    window_index,
)
from waku_legacy.archive.store import (
    AppendResult,
    ArchiveIndex,
    append_archives,
    read_archive,
    read_index,
)

__all__ = [
    "MAX_ARCHIVE_BYTES",
    "PIECE_LENGTH",
    "WEEK_SECONDS",
    "AppendResult",
    "ArchiveCorrupted",
    "ArchiveDecodeError",
    "ArchiveError",
    "ArchiveIndex",
    "ArchiveMessage",
    "ArchivePlan",
    "CommunityLayout",
    "DecodedArchive",
    "EncodedArchive",
    "FaultHook",
    "Flavour",
    "IndexEntry",
    "PlannedArchive",
    "Window",
    "append_archives",
    "archive_id",
    "decode_archive",
    "decode_index",
    "encode_archive",
    "encode_index",
    "index_entry_for",
    "no_fault",
    "padding_for",
    "plan_archives",
    "plan_windows",
    "read_archive",
    "read_index",
    "split_by_size",
    "window_index",
]
