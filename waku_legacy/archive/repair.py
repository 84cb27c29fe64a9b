"""Catch-up archives: the messages an audit found missing, appended to a community's archives.

What status-go's members do with a new index (read in status-go at ``c72f491``, Oct 2024):

- ``ArchiveManager.DownloadHistoryArchivesByMagnetlink`` (``protocol/communities/
  manager_archive.go``) downloads the index, lists the archive ids the member already has
  (``Persistence.GetDownloadedMessageArchiveIDs``, table ``community_message_archive_hashes``),
  returns at once when their count equals the index's, and otherwise downloads every index
  entry whose id it does not have (newest ``from`` first: order only, nothing is skipped by
  window or time), pieces ``offset / pieceLength`` .. ``+ size / pieceLength``, then
  ``SaveMessageArchiveID``. Its anacrolix client (``torrent.NewClient``, ``manager_archive.go``;
  ``vendor/github.com/anacrolix/torrent/torrent.go`` ``onSetInfo``) hash-checks every piece
  whose completion it does not know, so the old pieces already on disk are found, not fetched.
- ``Messenger.importHistoryArchives`` (``protocol/messenger_communities.go``) imports every
  id ``GetMessageArchiveIDsToImport`` returns (``NOT(imported)``) with
  ``ExtractMessagesFromHistoryArchive`` (``manager_archive_file.go``: seek to ``offset``, read
  ``size - padding``), and marks it imported. Windows are never compared with each other.
- An archive id is ``keccak256`` of the serialized ``WakuMessageArchiveIndexMetadata``
  (``createHistoryArchiveTorrent``, ``manager_archive_file.go``), which holds the offset: an
  archive appended at a new offset has a new id even when its window is an old one.
- The archive creator itself (``createHistoryArchiveTorrent``) appends after the sum of the
  existing sizes, pads each archive to the piece length, and rewrites the index with the old
  entries kept.
- A link is taken when its clock is ``>=`` the last accepted one (``messenger_handler.go``,
  see :mod:`~waku_legacy.archive.clock`), and a link equal to the last seen one is ignored.

So a catch-up archive is an ordinary archive (same encoding, padding, index entry fields) for
a window already archived, or for a week that had none, appended after the existing bytes: a
member that imported the old archives downloads and imports only the new entries. A missing
message whose window already has an archive keeps that window exactly (parts of one window
do not overlap); one in a window without archive gets the audit's week, clipped to the gap
between its neighbours so that no two distinct windows overlap.
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import coincurve

from waku_legacy.archive import defaults
from waku_legacy.archive.build import link_signer, write_magnet_message, written_link_evidence
from waku_legacy.archive.canonical import canonical_archives
from waku_legacy.archive.clock import ClockEvidence, choose_link_clock
from waku_legacy.archive.data_files import (
    ArchiveIndex,
    append_archives,
    read_index,
    recorded_last_end,
    write_last_end,
)
from waku_legacy.archive.encode import EncodedArchive, Flavour
from waku_legacy.archive.errors import ArchiveError
from waku_legacy.archive.layout import CommunityLayout
from waku_legacy.archive.message import AnyArchiveMessage
from waku_legacy.archive.partition import MAX_ARCHIVE_BYTES
from waku_legacy.archive.topics import ArchiveTopics
from waku_legacy.archive.torrent import ANNOUNCE_LIST, build_torrent
from waku_legacy.faults import no_fault
from waku_legacy.identity.topics import CommunityId

__all__ = ["MissingMessage", "RepairReport", "catch_up_windows", "repair_archives"]


@dataclass(frozen=True, slots=True)
class MissingMessage:
    """A copy the archives lack, in its archived form, and the window the audit put it in."""

    window_from: int
    window_to: int
    message: AnyArchiveMessage


@dataclass(slots=True)
class RepairReport:
    community: str
    messages: int = 0
    archive_ids: list[str] = field(default_factory=list)
    windows: list[tuple[int, int]] = field(default_factory=list)
    old_data_length: int = 0
    data_length: int = 0
    info_hash: str | None = None
    magnet_uri: str | None = None
    torrent_path: str | None = None
    clock: dict[str, Any] | None = None
    magnet_message_paths: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def _clip(
    window: tuple[int, int], timestamp: int, index: ArchiveIndex, now: int
) -> tuple[int, int]:
    """``window`` as is when an archive has exactly it, else clipped to the gap around
    ``timestamp`` between the archived windows, and to ``now`` (as the builder ends its last
    window: messages after it are the next build's)."""
    archived = {(e.window_from, e.window_to) for e in index.entries}
    if window in archived:
        return window
    start, end = window[0], min(window[1], now)
    for low, high in archived:
        if low <= timestamp < high:
            raise ArchiveError(
                f"a missing message at {timestamp} lies in archived window {low}..{high}, "
                f"not in {start}..{end}"
            )
        if high <= timestamp:
            start = max(start, high)
        else:
            end = min(end, low)
    return start, end


def catch_up_windows(
    missing: Sequence[MissingMessage], index: ArchiveIndex, now: int
) -> dict[tuple[int, int], list[AnyArchiveMessage]]:
    """The catch-up archives' windows (see the module's notes) and their messages."""
    out: dict[tuple[int, int], list[AnyArchiveMessage]] = {}
    for item in missing:
        window = _clip((item.window_from, item.window_to), item.message.timestamp, index, now)
        if not window[0] <= item.message.timestamp < window[1]:
            raise ArchiveError(f"message at {item.message.timestamp} is outside {window}")
        out.setdefault(window, []).append(item.message)
    return out


def _encode(
    windows: dict[tuple[int, int], list[AnyArchiveMessage]],
    community: CommunityId,
    channel_topics: Sequence[bytes],
    archive_topics: ArchiveTopics | str,
    window_topics: Mapping[tuple[int, int], ArchiveTopics | str],
    flavour: Flavour,
    max_archive_bytes: int,
) -> list[EncodedArchive]:
    """One archive per window (several when too large, as the builder splits), encoded as
    the builder encodes (:func:`~waku_legacy.archive.canonical.canonical_archives`: the
    metadata topics of ``archive_topics``, whatever an earlier archive of the window lists)."""
    encoded = []
    for (start, end), messages in sorted(windows.items()):
        archives = canonical_archives(
            messages, channel_topics, community,
            window_topics.get((start, end), archive_topics), last_end=start, now=end,
            flavour=flavour, partition=end - start, max_archive_bytes=max_archive_bytes,
            relabelled=True,
        )  # fmt: skip
        if archives.plan.late or archives.plan.future:
            raise ArchiveError(f"catch-up window {start}..{end} does not hold its messages")
        encoded += archives.encoded
    return encoded


def repair_archives(
    archive_dir: str | os.PathLike[str],
    torrent_dir: str | os.PathLike[str],
    community: CommunityId | str,
    missing: Sequence[MissingMessage],
    channel_topics: Sequence[bytes],
    *,
    archive_topics: ArchiveTopics | str,
    window_topics: Mapping[tuple[int, int], ArchiveTopics | str] | None = None,
    community_key: coincurve.PrivateKey,
    payload_signer: coincurve.PrivateKey | None = None,
    pubsub_topic: str,
    archive_link_chats: str = defaults.ARCHIVE_LINK_CHATS,
    evidence: ClockEvidence | None = None,
    clock_ms: int | None = None,
    min_link_clock: int | None = None,
    now: int | None = None,
    flavour: Flavour | str = Flavour.STATUS_GO,
    announce_list: Sequence[str] = ANNOUNCE_LIST,
    max_archive_bytes: int = MAX_ARCHIVE_BYTES,
    fsync: bool = True,
) -> RepairReport:
    """Append catch-up archives holding exactly ``missing``, rebuild the torrent and sign the
    new link with a clock above every one found (``evidence``, the link message written last
    next to the torrent). Existing bytes of ``data`` are never rewritten. ``now`` (seconds,
    default the wall clock) ends a catch-up window past the last archive, as the builder's
    last window ends; a later build goes on from there (the state file's end)."""
    flavour = Flavour.parse(flavour)
    layout = CommunityLayout.of(archive_dir, community, torrent_dir)
    signer = link_signer(layout, community_key, pubsub_topic, archive_link_chats, payload_signer)
    assert signer is not None
    index = read_index(archive_dir, layout.community, flavour=flavour)
    report = RepairReport(layout.name, len(missing), old_data_length=index.data_length)
    if not missing:
        report.data_length = index.data_length
        return report
    windows = catch_up_windows(missing, index, int(time.time()) if now is None else now)
    encoded = _encode(windows, layout.community, channel_topics, archive_topics,
                      window_topics or {}, flavour, max_archive_bytes)  # fmt: skip
    last_end = recorded_last_end(layout, index)
    result = append_archives(archive_dir, layout.community, encoded, flavour=flavour,
                             fsync=fsync, catch_up=True)  # fmt: skip
    new_end = result.index.last_end
    if new_end is not None and (last_end is None or new_end > last_end):
        write_last_end(layout, new_end, fsync=fsync)  # the builder goes on after a new week
    report.archive_ids = result.archive_ids
    report.windows = sorted(windows)
    report.data_length = result.data_length
    torrent = build_torrent(archive_dir, torrent_dir, layout.community, flavour=flavour,
                            announce_list=announce_list, fsync=fsync)  # fmt: skip
    report.info_hash, report.magnet_uri = torrent.info_hash, torrent.magnet_uri
    report.torrent_path = str(torrent.path)
    found = written_link_evidence(layout).merge(evidence or ClockEvidence())
    base = clock_ms if clock_ms is not None else int(time.time() * 1000)
    choice = choose_link_clock(found, base=base, base_reason="wall clock",
                               archive_link=torrent.magnet_uri, minimum=min_link_clock)  # fmt: skip
    report.clock = choice.to_json()
    report.magnet_message_paths = write_magnet_message(
        layout, signer, torrent.magnet_uri, choice.clock, fault=no_fault, fsync=fsync
    )
    return report
