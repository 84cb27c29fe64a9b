"""Check a community's archive store end to end (what ``waku-legacy archive verify`` runs).

Every index key is the keccak256 of its metadata; archives tile ``data`` from offset 0 with
piece-multiple sizes; ``data`` is exactly as long as the index accounts for (longer means an
interrupted build, shorter means lost bytes); every archive parses, carries its index entry's
window and topics, holds only messages inside the window, in (timestamp, hash) order; the
padding after it is zeros; and the .torrent, when present, hashes to the current files.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from waku_legacy.archive.encode import Flavour, decode_archive
from waku_legacy.archive.errors import ArchiveCorrupted
from waku_legacy.archive.layout import CommunityLayout
from waku_legacy.archive.store import inspect_store, read_archive_bytes
from waku_legacy.archive.torrent import build_info_dict, load_torrent
from waku_legacy.identity.topics import CommunityId

__all__ = ["VerifyReport", "verify_store"]


@dataclass(slots=True)
class VerifyReport:
    community: str
    archives: int = 0
    messages: int = 0
    data_length: int = 0
    torrent_checked: bool = False
    info_hash: str | None = None
    windows: list[tuple[int, int]] = field(default_factory=list)


def verify_store(
    archive_dir: str | os.PathLike[str],
    community: CommunityId | str,
    *,
    torrent_dir: str | os.PathLike[str] | None = None,
    flavour: Flavour | str = Flavour.STATUS_GO,
) -> VerifyReport:
    """Raise ArchiveCorrupted (naming the file and what disagrees) at the first problem."""
    flavour = Flavour.parse(flavour)
    layout = CommunityLayout.of(archive_dir, community, torrent_dir)
    status = inspect_store(layout, flavour)
    if status.torn_tail:
        raise ArchiveCorrupted(
            "archive data",
            f"{layout.data} has {status.torn_tail} bytes beyond what {layout.index} accounts "
            "for (an interrupted build; `archive build` repairs it)",
        )
    report = VerifyReport(layout.name, data_length=status.data_length)
    if not status.index.entries:
        return report
    with open(layout.data, "rb") as handle:
        for entry in status.index.entries:
            what = f"archive {entry.archive_id} in {layout.data}"
            archive = decode_archive(
                read_archive_bytes(layout.data, entry), flavour=flavour, what=what
            )
            if (archive.window_from, archive.window_to, archive.content_topics) != (
                entry.window_from, entry.window_to, entry.content_topics,
            ):  # fmt: skip
                raise ArchiveCorrupted(what, "metadata differs from its index entry")
            previous = None
            for message in archive.messages:
                if not entry.window_from <= message.timestamp < entry.window_to:
                    raise ArchiveCorrupted(
                        what, f"message at {message.timestamp} is outside its window"
                    )
                key = (message.timestamp, message.hash)
                if previous is not None and key < previous:
                    raise ArchiveCorrupted(what, "messages are not in (timestamp, hash) order")
                previous = key
            if entry.padding:
                handle.seek(entry.offset + entry.archive_length)
                if handle.read(entry.padding).strip(b"\0"):
                    raise ArchiveCorrupted(what, "the padding after the archive is not zeros")
            report.archives += 1
            report.messages += len(archive.messages)
            report.windows.append((entry.window_from, entry.window_to))
    if torrent_dir is not None and layout.torrent.exists():
        torrent = load_torrent(layout.torrent)
        info = build_info_dict(layout, piece_length=torrent.piece_length)
        files = tuple((f["path"][0], f["length"]) for f in info["files"])
        if (
            info["pieces"] != torrent.pieces
            or torrent.name != layout.name
            or files != torrent.files
        ):
            raise ArchiveCorrupted(
                "torrent", f"{layout.torrent} does not describe the current data and index"
            )
        report.torrent_checked = True
        report.info_hash = torrent.info_hash
    return report
