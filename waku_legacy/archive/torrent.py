"""The community's torrent: a hand-built v1 info dictionary, the .torrent file, the magnet link.

status-go (anacrolix/torrent) builds ``info`` from the folder ``<archive dir>/0x<id>``:
``{files: [{length, path: ["data"]}, {length, path: ["index"]}], name: "0x<id>",
"piece length": 102400, pieces}``: v1 only (anacrolix reads v1 only), files sorted by path.
libtorrent's ``create_torrent`` refuses 102400 (not a multiple of 16 KiB) but loads, checks and
seeds such a dictionary, so it is built here by hand. The metainfo carries status-go's
announce list. Its magnet link is ``magnet:?xt=urn:btih:<hex>&dn=0x<id>&tr=<escaped>&tr=...``
(Go's ``url.Values.Encode``: keys sorted, values query-escaped).

Reproducible: ``creation date`` is the end of the newest archive window, not the wall clock,
so the same archives give the same .torrent bytes on any machine.
"""

from __future__ import annotations

import base64
import hashlib
import os
import urllib.parse
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from waku_legacy.archive.bencode import MAX_TORRENT_BYTES, bdecode, bencode, decode_at
from waku_legacy.archive.data_files import inspect_archive_data
from waku_legacy.archive.encode import MAX_INDEX_BYTES, PIECE_LENGTH, Flavour
from waku_legacy.archive.errors import ArchiveDecodeError, TorrentError, UnexpectedTorrentLayout
from waku_legacy.archive.layout import CommunityLayout
from waku_legacy.durable import write_atomic
from waku_legacy.errors import LimitExceeded
from waku_legacy.faults import FaultHook, no_fault
from waku_legacy.identity.topics import CommunityId

__all__ = [
    "ANNOUNCE_LIST",
    "TorrentFile",
    "TorrentInfo",
    "build_info_dict",
    "build_torrent",
    "check_archive_torrent_layout",
    "describe_mismatch",
    "load_torrent",
    "magnet_uri",
    "parse_magnet_uri",
    "piece_hashes",
    "torrent_from_info_bytes",
]

ANNOUNCE_LIST: tuple[str, ...] = (
    "udp://tracker.opentrackr.org:1337/announce",
    "udp://tracker.openbittorrent.com:6969/announce",
)
DEFAULT_CREATED_BY = "waku-legacy"
_READ_BYTES = 8 * 1024 * 1024  # read per system call while hashing (whole pieces, at least one)
# BitTorrent clients use 16 KiB .. 16 MiB pieces; status-go 100 KiB. Anything outside is refused
# (a huge one would also make hashing buffers huge).
MIN_PIECE_LENGTH = 1024
MAX_PIECE_LENGTH = 64 * 1024 * 1024
MAX_FILE_LENGTH = 1 << 50  # far beyond any archive; keeps sums and offsets sane
ARCHIVE_TORRENT_FILES = ("data", "index")  # a history-archive torrent holds these, nothing else


@dataclass(frozen=True, slots=True)
class TorrentInfo:
    info_hash: str  # 40 lowercase hex
    magnet_uri: str
    path: Path  # the .torrent file
    name: str
    piece_length: int
    piece_count: int
    data_length: int
    index_length: int


def piece_hashes(paths: Sequence[Path], piece_length: int = PIECE_LENGTH) -> bytes:
    """SHA-1 of every piece of the files' concatenation (BEP 3 ``pieces``)."""
    out = bytearray()
    buffer = bytearray(piece_length * max(1, _READ_BYTES // piece_length))
    view = memoryview(buffer)
    sha1 = hashlib.sha1
    partial = None  # running hash of a piece that straddles two files
    filled = 0
    for path in paths:
        with open(path, "rb", buffering=0) as handle:
            while True:
                got = handle.readinto(buffer)
                if not got:
                    break
                pos = 0
                if partial is not None:
                    take = min(piece_length - filled, got)
                    partial.update(view[:take])
                    filled += take
                    pos = take
                    if filled == piece_length:
                        out += partial.digest()
                        partial, filled = None, 0
                while got - pos >= piece_length:
                    out += sha1(view[pos : pos + piece_length]).digest()
                    pos += piece_length
                if pos < got:
                    partial = sha1(view[pos:got])
                    filled = got - pos
    if partial is not None:
        out += partial.digest()
    return bytes(out)


def build_info_dict(layout: CommunityLayout, *, piece_length: int = PIECE_LENGTH) -> dict[str, Any]:
    """The v1 info dictionary of the community's folder (files ``data`` then ``index``)."""
    files = [layout.data, layout.index]
    lengths = []
    for path in files:
        try:
            lengths.append(path.stat().st_size)
        except FileNotFoundError:
            raise TorrentError(f"cannot build the torrent: {path} does not exist") from None
    return {
        "files": [
            {"length": lengths[0], "path": ["data"]},
            {"length": lengths[1], "path": ["index"]},
        ],
        "name": layout.name,
        "piece length": piece_length,
        "pieces": piece_hashes(files, piece_length),
    }


def magnet_uri(info_hash_hex: str, name: str, trackers: Sequence[str] = ANNOUNCE_LIST) -> str:
    """status-go's magnet link (anacrolix ``Magnet.String``)."""
    params = [("dn", name)] if name else []
    params += [("tr", t) for t in trackers]
    params.sort(key=lambda kv: kv[0])  # Go's url.Values.Encode sorts keys (stable within one)
    query = urllib.parse.urlencode(params, quote_via=urllib.parse.quote_plus, safe="")
    uri = f"magnet:?xt=urn:btih:{info_hash_hex.lower()}"
    return f"{uri}&{query}" if query else uri


@dataclass(frozen=True, slots=True)
class ParsedMagnet:
    info_hash: str
    name: str
    trackers: tuple[str, ...]
    peers: tuple[str, ...]  # x.pe peer addresses ("host:port")


def parse_magnet_uri(uri: str) -> ParsedMagnet:
    if not isinstance(uri, str) or not uri.startswith("magnet:?"):
        raise ArchiveDecodeError("magnet link", "must start with 'magnet:?'")
    query = urllib.parse.parse_qs(uri[len("magnet:?") :], keep_blank_values=True)
    xts = [x for x in query.get("xt", []) if x.lower().startswith("urn:btih:")]
    if not xts:
        raise ArchiveDecodeError("magnet link", "has no xt=urn:btih:<info-hash>")
    digest = xts[0][len("urn:btih:") :]
    if len(digest) == 32:
        try:
            digest = base64.b32decode(digest.upper()).hex()
        except ValueError:
            raise ArchiveDecodeError("magnet link", "bad base32 info-hash") from None
    if len(digest) != 40 or any(c not in "0123456789abcdefABCDEF" for c in digest):
        raise ArchiveDecodeError("magnet link", f"info-hash {digest!r} is not 40 hex digits")
    return ParsedMagnet(
        digest.lower(),
        query.get("dn", [""])[0],
        tuple(query.get("tr", [])),
        tuple(query.get("x.pe", [])),
    )


def build_torrent(
    archive_dir: str | os.PathLike[str],
    torrent_dir: str | os.PathLike[str],
    community: CommunityId | str,
    *,
    flavour: Flavour | str = Flavour.STATUS_GO,
    announce_list: Sequence[str] = ANNOUNCE_LIST,
    created_by: str = DEFAULT_CREATED_BY,
    creation_date: int | None = None,
    piece_length: int = PIECE_LENGTH,
    fault: FaultHook = no_fault,
    fsync: bool = True,
) -> TorrentInfo:
    """Write ``<torrent dir>/0x<id>.torrent`` for the community's archives (atomically).

    Refuses a store whose ``data`` and ``index`` disagree (run the archive build, which
    repairs a torn tail, first).
    """
    layout = CommunityLayout.of(archive_dir, community, torrent_dir)
    status = inspect_archive_data(layout, flavour)
    if not status.index.entries:
        raise TorrentError(f"no archives in {layout.root}: nothing to put in a torrent")
    if status.torn_tail:
        raise TorrentError(
            f"{layout.data} has {status.torn_tail} bytes the index does not account for "
            "(an interrupted build); rerun the build to repair it"
        )
    info = build_info_dict(layout, piece_length=piece_length)
    info_bytes = bencode(info)
    info_hash = hashlib.sha1(info_bytes).hexdigest()
    if creation_date is None:
        creation_date = status.index.last_end or 0
    metainfo: dict[str, Any] = {"info": info}
    if announce_list:
        metainfo["announce-list"] = [[t] for t in announce_list]
    if created_by:
        metainfo["created by"] = created_by
    if creation_date:
        metainfo["creation date"] = creation_date
    torrent_bytes = bencode(metainfo)
    assert info_bytes in torrent_bytes
    layout.torrent.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(layout.torrent, torrent_bytes, fault=fault, step="torrent", fsync=fsync)
    return TorrentInfo(
        info_hash=info_hash,
        magnet_uri=magnet_uri(info_hash, layout.name, announce_list),
        path=layout.torrent,
        name=layout.name,
        piece_length=piece_length,
        piece_count=len(info["pieces"]) // 20,
        data_length=info["files"][0]["length"],
        index_length=info["files"][1]["length"],
    )


def describe_mismatch(layout: CommunityLayout, torrent: TorrentFile) -> str | None:
    """None when ``torrent`` describes the community's current ``data`` and ``index`` exactly
    (name, files, lengths, every piece hash); otherwise what disagrees, for an error message."""
    if torrent.name != layout.name:
        return f"it is named {torrent.name!r}, not {layout.name!r}"
    files = []
    for name, path in (("data", layout.data), ("index", layout.index)):
        try:
            files.append((name, path.stat().st_size))
        except FileNotFoundError:
            return f"{path} does not exist"
    if torrent.files != tuple(files):
        return (
            f"it lists files {list(torrent.files)} but {layout.root} holds "
            f"data {files[0][1]} bytes and index {files[1][1]} bytes"
        )
    pieces = piece_hashes([layout.data, layout.index], torrent.piece_length)
    if pieces != torrent.pieces:
        bad = next(
            i for i in range(len(pieces) // 20) if pieces[i * 20 : i * 20 + 20] !=
            torrent.piece_hash(i)
        )  # fmt: skip
        return f"piece {bad} of the files does not match its SHA-1 in the torrent"
    return None


@dataclass(frozen=True, slots=True)
class TorrentFile:
    """A loaded .torrent: the raw info bytes (what the info-hash covers) and its fields."""

    metainfo: dict[bytes, Any]
    info: dict[bytes, Any]
    info_bytes: bytes
    info_hash: str
    name: str
    piece_length: int
    pieces: bytes
    files: tuple[tuple[str, int], ...]  # (path, length) in order
    trackers: tuple[str, ...]

    @property
    def piece_count(self) -> int:
        return len(self.pieces) // 20

    def piece_hash(self, index: int) -> bytes:
        return self.pieces[index * 20 : index * 20 + 20]

    def file_span(self, path: str) -> tuple[int, int]:
        """(offset, length) of a file in the torrent's byte stream."""
        offset = 0
        for name, length in self.files:
            if name == path:
                return offset, length
            offset += length
        raise TorrentError(f"torrent {self.name} has no file {path!r}")

    def pieces_of(self, offset: int, length: int) -> range:
        """Pieces overlapping ``[offset, offset + length)``."""
        if length <= 0:
            return range(0)
        return range(offset // self.piece_length, -(-(offset + length) // self.piece_length))

    @property
    def magnet_uri(self) -> str:
        return magnet_uri(self.info_hash, self.name, self.trackers)

    def metainfo_bytes(self) -> bytes:
        """A bencoded metainfo holding the exact info bytes (for libtorrent)."""
        return b"d4:info" + self.info_bytes + b"e"


def _info_span(data: bytes) -> tuple[int, int]:
    """Start and end of the ``info`` value inside a bencoded metainfo (hash the raw bytes)."""
    if not data.startswith(b"d"):
        raise ArchiveDecodeError(".torrent", "not a bencoded dictionary")
    pos = 1
    while pos < len(data) and data[pos] != ord("e"):
        key, pos = decode_at(data, pos, ".torrent", 1)
        start = pos
        _, pos = decode_at(data, pos, ".torrent", 1)
        if key == b"info":
            return start, pos
    raise ArchiveDecodeError(".torrent", "has no info dictionary")


def _field(info: dict[bytes, Any], key: bytes, kind: type, what: str) -> Any:
    if key not in info:
        raise ArchiveDecodeError(what, f"has no {key.decode()!r}")
    value = info[key]
    if not isinstance(value, kind):
        raise ArchiveDecodeError(
            what, f"{key.decode()!r} is {_kind(value)}, not {_kind_name(kind)}"
        )
    return value


def _kind(value: Any) -> str:
    return {int: "an integer", bytes: "a string", list: "a list", dict: "a dictionary"}.get(
        type(value), type(value).__name__
    )


def _kind_name(kind: type) -> str:
    return {int: "an integer", bytes: "a string", list: "a list", dict: "a dictionary"}[kind]


def _text(value: bytes, what: str, field_name: str) -> str:
    try:
        return value.decode("utf-8")
    except UnicodeDecodeError:
        raise ArchiveDecodeError(what, f"{field_name} is not UTF-8") from None


def _length(value: Any, what: str, field_name: str) -> int:
    if not isinstance(value, int):
        raise ArchiveDecodeError(what, f"{field_name} is {_kind(value)}, not an integer")
    if value < 0:
        raise ArchiveDecodeError(what, f"{field_name} {value} is negative")
    if value > MAX_FILE_LENGTH:
        raise LimitExceeded(what, f"{field_name} {value} is over {MAX_FILE_LENGTH}")
    return value


def _parse_files(info: dict[bytes, Any], name: str, what: str) -> tuple[tuple[str, int], ...]:
    if b"files" not in info:
        return (
            (
                name,
                _length(_field(info, b"length", int, what), what, "length"),
            ),
        )
    if b"length" in info:
        raise ArchiveDecodeError(what, "has both 'length' and 'files'")
    files = _field(info, b"files", list, what)
    if not files:
        raise ArchiveDecodeError(what, "'files' is empty")
    out = []
    for number, entry in enumerate(files):
        label = f"files[{number}]"
        if not isinstance(entry, dict):
            raise ArchiveDecodeError(what, f"{label} is {_kind(entry)}, not a dictionary")
        length = _length(entry.get(b"length"), what, f"{label} length")
        path = entry.get(b"path")
        if not isinstance(path, list) or not path:
            raise ArchiveDecodeError(what, f"{label} path is not a non-empty list")
        parts = []
        for part in path:
            if not isinstance(part, bytes) or not part:
                raise ArchiveDecodeError(what, f"{label} path has an empty or non-string part")
            parts.append(_text(part, what, f"{label} path"))
        out.append(("/".join(parts), length))
    return tuple(out)


def _torrent_from_info(
    info_bytes: bytes, metainfo: dict[bytes, Any], trackers: Sequence[str]
) -> TorrentFile:
    what = "torrent info dictionary"
    info = bdecode(info_bytes, what=what)
    if not isinstance(info, dict):
        raise ArchiveDecodeError(what, f"is {_kind(info)}, not a dictionary")
    name = _text(_field(info, b"name", bytes, what), what, "name")
    piece_length = _field(info, b"piece length", int, what)
    if not MIN_PIECE_LENGTH <= piece_length <= MAX_PIECE_LENGTH:
        raise ArchiveDecodeError(
            what, f"piece length {piece_length} is outside {MIN_PIECE_LENGTH}..{MAX_PIECE_LENGTH}"
        )
    pieces = _field(info, b"pieces", bytes, what)
    if len(pieces) % 20:
        raise ArchiveDecodeError(what, f"'pieces' is {len(pieces)} bytes, not a multiple of 20")
    files = _parse_files(info, name, what)
    total = sum(length for _, length in files)
    if len(pieces) // 20 != -(-total // piece_length):
        raise ArchiveDecodeError(
            what, f"{len(pieces) // 20} piece hashes for {total} bytes of files"
        )
    return TorrentFile(
        metainfo, info, info_bytes, hashlib.sha1(info_bytes).hexdigest(), name,
        piece_length, pieces, files, tuple(trackers),
    )  # fmt: skip


def check_archive_torrent_layout(torrent: TorrentFile, community: CommunityId) -> None:
    """Refuse a torrent that is not a history archive of ``community``.

    status-go's archive torrent is one folder named ``0x<community id>`` holding exactly the
    files ``data`` and ``index`` (in that order). Anything else -- another name, a single-file
    torrent, more or other files, ``..`` or absolute paths -- is refused here, before a byte of
    it is written or read, with :class:`UnexpectedTorrentLayout`.
    """
    expected = str(community)
    if torrent.name != expected:
        raise UnexpectedTorrentLayout(
            "history-archive torrent", f"it is named {torrent.name!r}, not {expected!r}"
        )
    names = tuple(name for name, _ in torrent.files)
    if names != ARCHIVE_TORRENT_FILES or torrent.info.get(b"files") is None:
        shown = ", ".join(repr(n) for n in names[:5]) + (", ..." if len(names) > 5 else "")
        raise UnexpectedTorrentLayout(
            "history-archive torrent",
            f"its files are [{shown}], not exactly {expected}/data and {expected}/index",
        )
    index_length = torrent.files[1][1]
    if index_length > MAX_INDEX_BYTES:  # refused before a byte of it is downloaded
        raise LimitExceeded(
            "history-archive torrent", f"its index is {index_length} bytes, over {MAX_INDEX_BYTES}"
        )


def torrent_from_info_bytes(info_bytes: bytes, trackers: Sequence[str] = ()) -> TorrentFile:
    """A TorrentFile from a bare info dictionary (what a magnet fetch receives from peers)."""
    return _torrent_from_info(bytes(info_bytes), {}, trackers)


def load_torrent(source: str | os.PathLike[str] | bytes) -> TorrentFile:
    """Parse and check a .torrent (ours or status-go's): v1 info with pieces; the info-hash is
    the SHA-1 of the info dictionary's exact bytes."""
    data = source if isinstance(source, bytes) else _read_torrent_file(Path(source))
    metainfo = bdecode(data, what=".torrent")
    if not isinstance(metainfo, dict) or not isinstance(metainfo.get(b"info"), dict):
        raise ArchiveDecodeError(".torrent", "has no info dictionary")
    start, end = _info_span(data)
    trackers: list[str] = []
    tiers = metainfo.get(b"announce-list", [])
    if not isinstance(tiers, list):
        raise ArchiveDecodeError(".torrent", f"'announce-list' is {_kind(tiers)}, not a list")
    for tier in tiers:
        for url in tier if isinstance(tier, list) else []:
            if isinstance(url, bytes) and url.decode("utf-8", "replace") not in trackers:
                trackers.append(url.decode("utf-8", "replace"))
    if not trackers and isinstance(metainfo.get(b"announce"), bytes):
        trackers.append(metainfo[b"announce"].decode("utf-8", "replace"))
    return _torrent_from_info(data[start:end], metainfo, trackers)


def _read_torrent_file(path: Path) -> bytes:
    """The bytes of a .torrent file (a bounded read of a regular file), or a TorrentError
    saying why not."""
    from waku_legacy.errors import ConfigError
    from waku_legacy.files import read_small_file

    try:
        return read_small_file(path, what="torrent", max_size=MAX_TORRENT_BYTES)
    except ConfigError as exc:
        raise TorrentError(str(exc)) from None
