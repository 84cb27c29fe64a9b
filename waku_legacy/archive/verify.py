"""Check a community's archive store end to end (what ``waku-legacy archive verify`` runs).

Without a torrent: every index key is the keccak256 of its metadata; archives tile ``data``
from offset 0 with piece-multiple sizes; ``data`` is exactly as long as the index accounts for
(longer means an interrupted build, shorter means lost bytes); every archive parses, carries
its index entry's window and topics, holds only messages inside the window, in (timestamp,
hash) order, with status-go's field sizes and no hash twice; the padding after it is zeros;
and its bytes hash to the SHA-256 recorded when this tool wrote it (``.0x<id>.digests.json``;
archives written before digests were recorded, or by another tool, have none).
With the torrent as well: it names the community's folder and its piece hashes cover every
byte of ``data`` and ``index``.

The report lists what was checked and what was not, so "ok" never claims more than that.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
from collections.abc import Sequence
from dataclasses import dataclass, field

from waku_legacy.archive.data_files import (
    inspect_archive_data,
    read_archive_bytes,
    recorded_digests,
)
from waku_legacy.archive.encode import DecodedArchive, Flavour, IndexEntry, decode_archive
from waku_legacy.archive.errors import ArchiveCorrupted, TorrentError
from waku_legacy.archive.layout import CommunityLayout
from waku_legacy.archive.message import ArchiveMessage
from waku_legacy.archive.torrent import describe_mismatch, load_torrent
from waku_legacy.identity.topics import CommunityId

__all__ = ["VerifyReport", "check_archive_contents", "verify_store"]

TOPIC_BYTES = 4
HASH_BYTES = 32
SIG_BYTES = (0, 65)  # absent, or the signer's uncompressed public key


@dataclass(slots=True)
class VerifyReport:
    community: str
    archives: int = 0
    messages: int = 0
    data_length: int = 0
    torrent_checked: bool = False
    info_hash: str | None = None
    digests_checked: int = 0  # archives whose bytes matched their recorded SHA-256
    windows: list[tuple[int, int]] = field(default_factory=list)
    checked: list[str] = field(default_factory=list)  # what was verified, in words
    not_checked: list[str] = field(default_factory=list)  # what could not be, and why


def _check_message_fields(what: str, message: ArchiveMessage, seen: set[bytes]) -> None:
    label = f"message 0x{message.hash.hex()}" if message.hash else "a message"
    if len(message.topic) != TOPIC_BYTES:
        raise ArchiveCorrupted(what, f"{label} has a {len(message.topic)}-byte topic, not 4")
    if len(message.hash) != HASH_BYTES:
        raise ArchiveCorrupted(what, f"{label} has a {len(message.hash)}-byte hash, not 32")
    if len(message.sig) not in SIG_BYTES:
        raise ArchiveCorrupted(what, f"{label} has a {len(message.sig)}-byte sig, not 0 or 65")
    if message.hash in seen:
        raise ArchiveCorrupted(what, f"{label} is archived twice")
    seen.add(message.hash)


def verify_store(
    archive_dir: str | os.PathLike[str],
    community: CommunityId | str,
    *,
    torrent_dir: str | os.PathLike[str] | None = None,
    flavour: Flavour | str = Flavour.STATUS_GO,
) -> VerifyReport:
    """Raise ArchiveCorrupted (naming the file and what disagrees) at the first problem.

    The store must exist (ArchiveError otherwise). With ``torrent_dir`` the torrent must exist
    too (TorrentError otherwise): asking for a check that cannot be done is an error.
    """
    flavour = Flavour.parse(flavour)
    layout = CommunityLayout.of(archive_dir, community, torrent_dir)
    layout.check_directories(existing=True)
    # 1. the index: keys, tiling, and data exactly as long as it accounts for
    status = inspect_archive_data(layout, flavour)
    if status.torn_tail:
        raise ArchiveCorrupted(
            "archive data",
            f"{layout.data} has {status.torn_tail} bytes beyond what {layout.index} accounts "
            "for (an interrupted build; `archive build` repairs it)",
        )
    report = VerifyReport(layout.name, data_length=status.data_length)
    report.checked.append(
        "index: every key is the keccak256 of its entry, archives tile data from offset 0, "
        "data is exactly as long as the index accounts for"
    )
    # 2. every archive: recorded digest, contents, padding
    _verify_archives(layout, status.index.entries, flavour, report)
    # 3. the torrent over data and index, when asked for
    unrecorded = report.archives - report.digests_checked
    if torrent_dir is not None:
        _verify_torrent(layout, report)
    elif unrecorded:
        report.not_checked.append(
            f"message contents (payloads, sigs) of {unrecorded} archive(s) with no recorded "
            "SHA-256: only the torrent's piece hashes cover them (give --torrent-dir)"
        )
    if torrent_dir is None:
        report.not_checked.append("the torrent (no --torrent-dir given)")
    return report


def _verify_archives(
    layout: CommunityLayout,
    entries: Sequence[IndexEntry],
    flavour: Flavour,
    report: VerifyReport,
) -> None:
    digests = recorded_digests(layout)
    seen: set[bytes] = set()
    with contextlib.ExitStack() as stack:
        if entries:
            handle = stack.enter_context(open(layout.data, "rb"))
        for entry in entries:
            what = f"archive {entry.archive_id} in {layout.data}"
            raw = read_archive_bytes(layout.data, entry)
            recorded = digests.get(entry.archive_id)
            if recorded is not None:
                if hashlib.sha256(raw).hexdigest() != recorded:
                    raise ArchiveCorrupted(
                        what,
                        f"its bytes do not match the SHA-256 recorded when it was written "
                        f"({layout.digests})",
                    )
                report.digests_checked += 1
            archive = decode_archive(raw, flavour=flavour, what=what)
            check_archive_contents(what, entry, archive, seen)
            if entry.padding:
                handle.seek(entry.offset + entry.archive_length)
                if handle.read(entry.padding).strip(b"\0"):
                    raise ArchiveCorrupted(what, "the padding after the archive is not zeros")
            report.archives += 1
            report.messages += len(archive.messages)
            report.windows.append((entry.window_from, entry.window_to))
    report.checked.append(
        f"{report.archives} archives decode, carry their index entry's window and topics, hold "
        "only messages inside it in (timestamp, hash) order with 4-byte topics, 32-byte hashes, "
        "0- or 65-byte sigs and no hash twice; padding is zeros"
    )
    if report.digests_checked:
        report.checked.append(
            f"{report.digests_checked} of {report.archives} archives match the SHA-256 recorded "
            "when they were written"
        )


def check_archive_contents(
    what: str, entry: IndexEntry, archive: DecodedArchive, seen: set[bytes]
) -> None:
    """The archive carries its index entry's window and topics; its messages lie inside the
    window, in (timestamp, hash) order, with status-go's field sizes and no hash twice."""
    if (archive.window_from, archive.window_to, archive.content_topics) != (
        entry.window_from, entry.window_to, entry.content_topics,
    ):  # fmt: skip
        raise ArchiveCorrupted(what, "metadata differs from its index entry")
    previous = None
    for message in archive.messages:
        if not entry.window_from <= message.timestamp < entry.window_to:
            raise ArchiveCorrupted(what, f"message at {message.timestamp} is outside its window")
        key = (message.timestamp, message.hash)
        if previous is not None and key < previous:
            raise ArchiveCorrupted(what, "messages are not in (timestamp, hash) order")
        previous = key
        _check_message_fields(what, message, seen)


def _verify_torrent(layout: CommunityLayout, report: VerifyReport) -> None:
    """The torrent must exist and its piece hashes cover every byte of data and index."""
    if not layout.torrent.exists():
        raise TorrentError(f"no torrent to check: {layout.torrent} does not exist")
    torrent = load_torrent(layout.torrent)
    problem = describe_mismatch(layout, torrent) if report.archives else "no archives"
    if problem is not None:
        raise ArchiveCorrupted(
            "torrent",
            f"{layout.torrent} does not describe the current data and index: {problem}",
        )
    report.torrent_checked = True
    report.info_hash = torrent.info_hash
    report.checked.append(f"torrent {torrent.info_hash}: every piece hash matches data and index")
