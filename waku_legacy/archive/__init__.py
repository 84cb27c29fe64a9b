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
    verify_store(archive_dir, community, *, torrent_dir=None, flavour) -> VerifyReport

Torrent and magnet link
    build_torrent(archive_dir, torrent_dir, community, *, flavour, announce_list,
                  created_by, creation_date=None) -> TorrentInfo(info_hash, magnet_uri, path, ...)
    load_torrent(path_or_bytes) -> TorrentFile; magnet_uri(info_hash, name, trackers) -> str
    build_magnet_message(community_key, magnet_uri, clock_ms, *, pubsub_topic,
                         chat="universal", payload_signer=None) -> waku_message_pb2.WakuMessage
        (= build_archive_link_message: status-go's layering, on <id>-memberUpdate or
        <id>-magnetlinks); build_archive_link_messages(..., chats="both") -> [(chat, message)]
    relay_publish_body(message) -> dict; relay_publish_path(pubsub_topic) -> str
    verify_magnet_message(message, community, *, last_clock=None) -> VerifiedMagnetLink

One call
    build_community_archives(archive_dir, torrent_dir, community, content_topics, messages, *,
                             now, flavour="status-go", community_key=None,
                             pubsub_topic=DEFAULT_NON_PROTECTED_PUBSUB_TOPIC, clock_ms=None,
                             last_end=None, fault=no_fault) -> BuildReport

Seeding and fetching (libtorrent, imported lazily)
    Seeder(archive_dir, SessionConfig(...)).seed(torrent_path) / .refresh(torrent_dir) / .stats()
    fetch_archives(magnet_or_torrent, community, save_dir, FetchOptions(...)) -> FetchResult
    fetch_from_magnet_message(message, community, save_dir, options, *, last_clock=None)

Modules, one concept each:

- ``partition``: status-go's 7-day windows; ``encode``: archive bytes, padding, index
  metadata and keys; ``message``: the archive-flavour message; ``canonical``: the one
  function that decides an archive's bytes; ``topics``: which 4-byte topics archived channel
  messages carry (``archive_topics``); ``copies``: messages, not copies, in every report.
- ``layout``: where archive files live; ``data_files``: the crash-safe ``data``/``index``
  store of one community; ``fence``: the writers' fencing hook; ``verify``: the store checked
  end to end; ``repair``: catch-up archives of what an audit found missing.
- ``build``: one call for a community's archive run; ``settings``: the archive keys both
  applications share; ``defaults``: the one default of each archive setting.
- ``bencode``: canonical bencoding; ``torrent``: the info dictionary, ``.torrent`` and magnet
  link; ``magnet``: the signed archive-link message; ``clock``: the clock it is signed with;
  ``logos_storage``: the Logos Storage back end.
- ``session``: libtorrent settings; ``seeder``: seeding the latest torrent of each community;
  ``fetch``: the member side, fetching archives; ``output``: where fetched messages go.
- ``errors``: the package's errors; ``cli``: ``waku-legacy archive|seed|fetch``.
"""

from __future__ import annotations

from waku_legacy.archive.build import (
    BuildReport,
    FinishReport,
    build_community_archives,
    finish_interrupted_build,
)
from waku_legacy.archive.data_files import (
    AppendResult,
    ArchiveIndex,
    append_archives,
    read_archive,
    read_index,
)
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
from waku_legacy.archive.fetch import (
    FetchedArchive,
    FetchOptions,
    FetchResult,
    Selection,
    fetch_archives,
    fetch_from_magnet_message,
)
from waku_legacy.archive.layout import CommunityLayout
from waku_legacy.archive.magnet import (
    VerifiedMagnetLink,
    build_archive_link_messages,
    build_magnet_message,
    relay_publish_body,
    relay_publish_path,
    verify_magnet_message,
)
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
from waku_legacy.archive.seeder import Seeder, SeedStats
from waku_legacy.archive.session import SessionConfig
from waku_legacy.archive.torrent import (
    ANNOUNCE_LIST,
    TorrentFile,
    TorrentInfo,
    build_torrent,
    load_torrent,
    magnet_uri,
)
from waku_legacy.archive.verify import VerifyReport, verify_store
from waku_legacy.faults import FaultHook, no_fault

__all__ = [
    "ANNOUNCE_LIST",
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
    "BuildReport",
    "CommunityLayout",
    "DecodedArchive",
    "EncodedArchive",
    "FaultHook",
    "FetchOptions",
    "FetchResult",
    "FetchedArchive",
    "FinishReport",
    "Flavour",
    "IndexEntry",
    "PlannedArchive",
    "SeedStats",
    "Seeder",
    "Selection",
    "SessionConfig",
    "TorrentFile",
    "TorrentInfo",
    "VerifiedMagnetLink",
    "VerifyReport",
    "Window",
    "append_archives",
    "archive_id",
    "build_archive_link_messages",
    "build_community_archives",
    "build_magnet_message",
    "build_torrent",
    "decode_archive",
    "decode_index",
    "encode_archive",
    "encode_index",
    "fetch_archives",
    "fetch_from_magnet_message",
    "finish_interrupted_build",
    "index_entry_for",
    "load_torrent",
    "magnet_uri",
    "no_fault",
    "padding_for",
    "plan_archives",
    "plan_windows",
    "read_archive",
    "read_index",
    "relay_publish_body",
    "relay_publish_path",
    "split_by_size",
    "verify_magnet_message",
    "verify_store",
    "window_index",
]
