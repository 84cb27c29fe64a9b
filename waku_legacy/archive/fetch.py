"""Member side: fetch a community's archives from peers, only the pieces that are needed.

Like status-go (``DownloadHistoryArchivesByMagnetlink``): get the torrent metadata (from the
magnet link's peers, with a timeout and retries, or from a .torrent), download the ``index``
file, choose archives (all, the latest window, a time range, or those not fetched before),
download exactly their pieces ``[offset / piece, (offset + size) / piece)``, and read them
oldest first. The torrent is added in upload mode so that nothing is requested before the
piece priorities are set.

Checks: the torrent is named after the community; every index key is the keccak256 of its
metadata and the archives tile ``data``; every fetched piece's SHA-1 matches the torrent
(libtorrent checks on arrival; this module re-reads and checks again); each archive parses,
carries the window its index entry says, and holds only messages inside that window; a
magnet-link message, when given, is signed by the community key and its clock is not lower
than the last accepted one (status-go takes ``clock >= last``).
"""

from __future__ import annotations

import enum
import hashlib
import os
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from waku_legacy.archive.data_files import ArchiveIndex, read_archive_bytes
from waku_legacy.archive.encode import (
    DecodedArchive,
    Flavour,
    IndexEntry,
    check_contiguous,
    decode_archive,
    decode_index,
)
from waku_legacy.archive.errors import ArchiveCorrupted, FetchError, FetchTimeout
from waku_legacy.archive.layout import check_directory
from waku_legacy.archive.magnet import VerifiedMagnetLink, verify_magnet_message
from waku_legacy.archive.message import ArchiveMessage
from waku_legacy.archive.session import SessionConfig, make_session, parse_peer
from waku_legacy.archive.torrent import (
    TorrentFile,
    check_archive_torrent_layout,
    load_torrent,
    parse_magnet_uri,
    torrent_from_info_bytes,
)
from waku_legacy.identity.topics import CommunityId
from waku_legacy.proto import waku_message_pb2

if TYPE_CHECKING:
    import libtorrent as lt

__all__ = [
    "FetchOptions",
    "FetchResult",
    "FetchedArchive",
    "Selection",
    "fetch_archives",
    "fetch_from_magnet_message",
    "select_archives",
]

Progress = Callable[[str, int, int], None]


class Selection(enum.StrEnum):
    ALL = "all"
    LATEST = "latest"
    RANGE = "range"
    NEW = "new"  # not fetched before (ids in FetchOptions.known_ids)


@dataclass(frozen=True, slots=True)
class FetchOptions:
    selection: Selection = Selection.ALL
    since: int | None = None  # RANGE: archives whose window overlaps [since, until) seconds
    until: int | None = None
    known_ids: frozenset[str] = frozenset()  # NEW: archive ids already fetched
    peers: tuple[str, ...] = ()  # "host:port" to connect to (besides the magnet's x.pe)
    metadata_timeout: float = 20.0  # status-go waits 20 s
    metadata_retries: int = 1
    data_timeout: float = 600.0
    flavour: Flavour = Flavour.STATUS_GO
    session: SessionConfig = field(default_factory=SessionConfig)
    verify_pieces: bool = True


@dataclass(frozen=True, slots=True)
class FetchedArchive:
    entry: IndexEntry
    archive: DecodedArchive


@dataclass(slots=True)
class FetchResult:
    info_hash: str
    name: str
    save_dir: Path
    index: ArchiveIndex
    selected: list[IndexEntry]
    archives: list[FetchedArchive]  # oldest first
    wanted_pieces: list[int]
    have_pieces: list[int]  # pieces the fetching session ended up with
    bytes_downloaded: int
    metadata_seconds: float
    data_seconds: float  # from asking for the archive pieces to having them all
    seconds: float

    def messages(self) -> Iterator[tuple[str, ArchiveMessage]]:
        for fetched in self.archives:
            for message in fetched.archive.messages:
                yield fetched.entry.archive_id, message

    @property
    def message_count(self) -> int:
        return sum(len(f.archive.messages) for f in self.archives)


def select_archives(index: ArchiveIndex, options: FetchOptions) -> list[IndexEntry]:
    """The archives a selection asks for, oldest first."""
    entries = sorted(index.entries, key=lambda e: (e.window_from, e.offset))
    if options.selection is Selection.ALL:
        return entries
    if options.selection is Selection.LATEST:
        return sorted(index.latest, key=lambda e: e.offset)
    if options.selection is Selection.RANGE:
        low = options.since if options.since is not None else 0
        high = options.until if options.until is not None else 1 << 64
        return [e for e in entries if e.window_from < high and e.window_to > low]
    known = {k.lower() for k in options.known_ids}
    return [e for e in entries if e.archive_id not in known]


def _no_progress(stage: str, done: int, total: int) -> None:
    pass


def _verify_pieces(torrent: TorrentFile, root: Path, pieces: Sequence[int]) -> None:
    """Re-read pieces from disk and compare their SHA-1 with the torrent."""
    paths = [(root / name, length) for name, length in torrent.files]
    stream_offsets = []
    offset = 0
    for path, length in paths:
        stream_offsets.append((offset, length, path))
        offset += length
    total = offset
    for piece in pieces:
        start = piece * torrent.piece_length
        end = min(start + torrent.piece_length, total)
        digest = hashlib.sha1()
        for file_start, length, path in stream_offsets:
            lo, hi = max(start, file_start), min(end, file_start + length)
            if lo >= hi:
                continue
            with open(path, "rb") as handle:
                handle.seek(lo - file_start)
                chunk = handle.read(hi - lo)
            if len(chunk) != hi - lo:
                raise ArchiveCorrupted("fetched data", f"{path} is short at piece {piece}")
            digest.update(chunk)
        if digest.digest() != torrent.piece_hash(piece):
            raise ArchiveCorrupted("fetched data", f"piece {piece} does not match its SHA-1")


def _check_archive(entry: IndexEntry, archive: DecodedArchive) -> None:
    if (archive.window_from, archive.window_to) != (entry.window_from, entry.window_to):
        raise ArchiveCorrupted(
            f"archive {entry.archive_id}",
            f"covers {archive.window_from}..{archive.window_to} but the index says "
            f"{entry.window_from}..{entry.window_to}",
        )
    if archive.content_topics != entry.content_topics:
        raise ArchiveCorrupted(
            f"archive {entry.archive_id}", "content topics differ from its index entry"
        )
    for message in archive.messages:
        if not entry.window_from <= message.timestamp < entry.window_to:
            raise ArchiveCorrupted(
                f"archive {entry.archive_id}",
                f"message 0x{message.hash.hex()} at {message.timestamp} is outside the window "
                f"{entry.window_from}..{entry.window_to}",
            )


def _torrent_params(
    source: str | os.PathLike[str], community: CommunityId, save: Path, options: FetchOptions
) -> tuple[list[tuple[str, int]], lt.add_torrent_params, TorrentFile | None]:
    """(peers to connect to, what to add to the session, the checked .torrent if one is given).

    A .torrent is refused before libtorrent sees it: nothing of a hostile torrent is ever
    written. The torrent goes in upload mode: nothing is requested until the piece priorities
    are in place.
    """
    import libtorrent as lt

    peers = [parse_peer(p) for p in options.peers]
    text = os.fspath(source)
    known_torrent: TorrentFile | None = None
    if text.startswith("magnet:"):
        magnet = parse_magnet_uri(text)
        peers += [parse_peer(p) for p in magnet.peers]
        _check_peers_can_be_found(peers, magnet.trackers, options.session)
        params = lt.parse_magnet_uri(text)
    else:
        known_torrent = load_torrent(text)
        check_archive_torrent_layout(known_torrent, community)
        params = lt.add_torrent_params()
        params.ti = lt.torrent_info(known_torrent.metainfo_bytes())
    params.save_path = str(save)
    if not options.session.trackers:
        params.trackers = []
    params.flags |= lt.torrent_flags.upload_mode
    params.flags &= ~lt.torrent_flags.auto_managed
    params.flags &= ~lt.torrent_flags.paused
    return peers, params, known_torrent


#: The way out when no seeder is known: the bridge seeds on its [archive] torrent port.
PEER_HINT = "give --peer HOST:PORT of a seeder (the bridge's torrent listen port)"


def _check_peers_can_be_found(
    peers: Sequence[tuple[str, int]], trackers: Sequence[str], session: SessionConfig
) -> None:
    """Refuse at once a magnet link nothing can find a seeder for: no peer given or in the
    link (``x.pe``), no tracker to ask and DHT and LSD off (waiting for metadata then only
    runs out the timeout)."""
    if peers or session.dht or session.lsd or (trackers and session.trackers):
        return
    where = "the magnet link names no tracker" if not trackers else "trackers are off"
    raise FetchError(
        f"no peer to fetch from: none given, none in the magnet link (x.pe), {where}, "
        f"and DHT and LSD are off; {PEER_HINT}"
    )


def no_peer_notice(source: str | os.PathLike[str], options: FetchOptions) -> str | None:
    """What to tell the user before the wait when a magnet link is to be fetched without a
    known peer (trackers, DHT or LSD may still find one, slowly), or None."""
    text = os.fspath(source)
    if not text.startswith("magnet:") or options.peers:
        return None
    magnet = parse_magnet_uri(text)
    if magnet.peers:
        return None
    _check_peers_can_be_found([], magnet.trackers, options.session)  # nothing to search with
    wait = (options.metadata_retries + 1) * options.metadata_timeout
    return (
        f"no peer given and none in the magnet link: looking for seeders through trackers/DHT "
        f"for up to {wait:.0f} s; {PEER_HINT}"
    )


@dataclass(slots=True)
class _Transfer:
    """One torrent in its own libtorrent session, and the waits of fetching from it."""

    session: lt.session
    handle: lt.torrent_handle
    peers: list[tuple[str, int]]
    options: FetchOptions
    progress: Progress
    priorities: list[int] = field(default_factory=list)  # per piece; 0 = not wanted
    stage: tuple[str, int, int] = ("metadata", 0, 1)  # the last one reported

    def report(self, stage: str, done: int, total: int) -> None:
        self.stage = (stage, done, total)
        self.progress(stage, done, total)

    def connect(self) -> None:
        for host, port in self.peers:
            self.handle.connect_peer((host, port))

    def wait(self, condition: Callable[[], bool], timeout: float, what: str) -> bool:
        """Poll ``condition`` until true (True) or ``timeout`` (False); a torrent error raises."""
        deadline = time.monotonic() + timeout
        while True:
            if condition():
                return True
            # the stage is still where it was: a progress reader hears so (at its pace)
            self.report(*self.stage)
            status = self.handle.status()
            if status.errc.value():
                raise FetchError(f"{what}: {status.errc.message()}")
            if time.monotonic() > deadline:
                return False
            time.sleep(0.05)

    def have_count(self, pieces: Sequence[int]) -> int:
        # one status call per poll: have_piece() per piece is a round trip into the session
        # thread each and slows the transfer itself down
        import libtorrent as lt

        bits = self.handle.status(lt.torrent_handle.query_pieces).pieces
        return sum(1 for p in pieces if bits[p])

    def have_and_downloaded(self) -> tuple[list[int], int]:
        """(pieces the session ended up with, payload bytes it downloaded), one status."""
        import libtorrent as lt

        status = self.handle.status(lt.torrent_handle.query_pieces)
        have = [i for i, bit in enumerate(status.pieces) if bit]
        return have, int(status.total_payload_download)

    def flush(self) -> None:
        """Wait until libtorrent has written every finished piece to disk.

        A piece counts as had once its hash checks out, which can be before its blocks reach
        the file; reading the file right then may see zeros. ``flush_cache`` posts a
        ``cache_flushed_alert`` when the outstanding writes are done.
        """
        import libtorrent as lt

        timeout = self.options.data_timeout
        self.handle.flush_cache()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            self.session.wait_for_alert(100)
            for alert in self.session.pop_alerts():
                if isinstance(alert, lt.cache_flushed_alert) and alert.handle == self.handle:
                    return
        raise FetchTimeout(f"libtorrent did not finish writing to disk in {timeout:.0f} s")

    def fetch_metadata(self, community: CommunityId) -> None:
        """The torrent's metadata, from peers when the source was a magnet link."""
        options = self.options
        self.connect()
        self.report("metadata", 0, 1)
        for attempt in range(options.metadata_retries + 1):
            if self.wait(lambda: self.handle.status().has_metadata, options.metadata_timeout,
                         "fetching torrent metadata"):  # fmt: skip
                break
            if attempt == options.metadata_retries:
                raise FetchTimeout(
                    f"no torrent metadata for {community} after "
                    f"{options.metadata_retries + 1} x {options.metadata_timeout:.0f} s "
                    f"(peers: {', '.join(f'{h}:{p}' for h, p in self.peers) or 'none given'})"
                    + ("" if self.peers else f"; {PEER_HINT}")
                )
            self.connect()
            if options.session.trackers:
                self.handle.force_reannounce()
        self.report("metadata", 1, 1)

    def torrent_from_metadata(self) -> TorrentFile:
        info = self.handle.torrent_file()
        if info is None:  # has_metadata was seen: libtorrent holds the info section
            raise FetchError("libtorrent has no metadata for the torrent")
        return torrent_from_info_bytes(bytes(info.info_section()))

    def fetch_index(self, torrent: TorrentFile, root: Path, community: CommunityId) -> ArchiveIndex:
        """Download only the index's pieces, then check the index against the torrent's data."""
        import libtorrent as lt

        options = self.options
        _, data_length = torrent.file_span("data")
        index_offset, index_length = torrent.file_span("index")
        self.priorities = [0] * torrent.piece_count
        index_pieces = list(torrent.pieces_of(index_offset, index_length))
        for piece in index_pieces:
            self.priorities[piece] = 7
        self.handle.prioritize_pieces(self.priorities)
        self.handle.unset_flags(lt.torrent_flags.upload_mode)
        self.report("index", 0, len(index_pieces))
        if not self.wait(lambda: self.have_count(index_pieces) == len(index_pieces),
                         options.data_timeout, "fetching the index"):  # fmt: skip
            raise FetchTimeout(f"index of {community} did not arrive in {options.data_timeout} s")
        self.report("index", len(index_pieces), len(index_pieces))
        self.flush()
        if options.verify_pieces:
            _verify_pieces(torrent, root, index_pieces)
        index_bytes = (root / "index").read_bytes()
        entries = decode_index(index_bytes, flavour=options.flavour, verify_keys=True)
        accounted = check_contiguous(entries, torrent.piece_length)
        if accounted != data_length:
            raise ArchiveCorrupted(
                "archive index",
                f"accounts for {accounted} bytes of data but the torrent's data has {data_length}",
            )
        return ArchiveIndex(tuple(sorted(entries.values(), key=lambda e: e.offset)), accounted)

    def fetch_pieces(
        self, torrent: TorrentFile, root: Path, wanted: Sequence[int], community: CommunityId
    ) -> float:
        """Download ``wanted`` pieces (on disk and checked on return); the seconds it took."""
        options = self.options
        for piece in wanted:
            self.priorities[piece] = 4
        self.handle.prioritize_pieces(self.priorities)
        total = len(wanted)
        started = time.monotonic()

        def progress_done() -> bool:
            done = self.have_count(wanted)
            self.report("archives", done, total)
            return done == total

        if wanted and not self.wait(progress_done, options.data_timeout, "fetching archives"):
            raise FetchTimeout(
                f"archives of {community} did not arrive in {options.data_timeout:.0f} s"
            )
        seconds = time.monotonic() - started
        self.flush()
        if options.verify_pieces:
            _verify_pieces(torrent, root, wanted)
        return seconds


def _read_archives(
    root: Path, selected: Sequence[IndexEntry], flavour: Flavour
) -> list[FetchedArchive]:
    """Decode the selected archives from the fetched ``data`` and check each against the index."""
    fetched = []
    for entry in selected:
        raw = read_archive_bytes(root / "data", entry)
        archive = decode_archive(raw, flavour=flavour, what=f"archive {entry.archive_id}")
        _check_archive(entry, archive)
        fetched.append(FetchedArchive(entry, archive))
    return fetched


def fetch_archives(
    source: str | os.PathLike[str],
    community: CommunityId | str,
    save_dir: str | os.PathLike[str],
    options: FetchOptions | None = None,
    *,
    progress: Progress | None = None,
) -> FetchResult:
    """Fetch archives from a magnet link or a .torrent file into ``save_dir/0x<id>/``."""
    options = options or FetchOptions()
    if isinstance(community, str):
        community = CommunityId.parse(community)
    save = Path(save_dir)
    check_directory(save, "save directory", must_exist=False)
    save.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    peers, params, known_torrent = _torrent_params(source, community, save, options)
    session = make_session(options.session)
    handle = session.add_torrent(params)
    transfer = _Transfer(session, handle, peers, options, progress or _no_progress)
    try:
        # 1. metadata: from peers for a magnet link (still in upload mode: nothing requested
        #    or written until the layout is checked)
        transfer.fetch_metadata(community)
        metadata_seconds = time.monotonic() - started
        torrent = known_torrent or transfer.torrent_from_metadata()
        check_archive_torrent_layout(torrent, community)
        root = save / str(community)  # checked above: the torrent's one folder
        # 2. the index, then the archives it selects: only their pieces
        index = transfer.fetch_index(torrent, root, community)
        selected = select_archives(index, options)
        wanted = sorted({p for e in selected for p in e.pieces(torrent.piece_length)})
        data_seconds = transfer.fetch_pieces(torrent, root, wanted, community)
        # 3. read and check them, oldest first
        fetched = _read_archives(root, selected, options.flavour)
        have, downloaded = transfer.have_and_downloaded()
        return FetchResult(
            info_hash=torrent.info_hash,
            name=torrent.name,
            save_dir=save,
            index=index,
            selected=selected,
            archives=fetched,
            wanted_pieces=wanted,
            have_pieces=have,
            bytes_downloaded=downloaded,
            metadata_seconds=metadata_seconds,
            data_seconds=data_seconds,
            seconds=time.monotonic() - started,
        )
    finally:
        session.remove_torrent(handle)
        del session


def fetch_from_magnet_message(
    message: waku_message_pb2.WakuMessage | bytes,
    community: CommunityId | str,
    save_dir: str | os.PathLike[str],
    options: FetchOptions | None = None,
    *,
    last_clock: int | None = None,
    progress: Progress | None = None,
) -> tuple[VerifiedMagnetLink, FetchResult]:
    """Verify a magnet-link message (community signature, newer clock), then fetch."""
    if isinstance(community, str):
        community = CommunityId.parse(community)
    link = verify_magnet_message(message, community, last_clock=last_clock)
    return link, fetch_archives(link.magnet_uri, community, save_dir, options, progress=progress)
