"""Hostile torrents (issue 10, item 4 and the torrent low items).

A history-archive torrent is one folder ``0x<community id>`` holding exactly ``data`` and
``index``. ``fetch`` refuses anything else -- ``..`` or absolute paths, extra files, another
name, a single file -- with a typed error before a byte is written (from a .torrent file:
before libtorrent sees it; from a magnet link: as soon as the metadata arrives, while the
torrent is still in upload mode), and it never opens a path outside the save directory.
Every field of a .torrent is checked with a typed error (negative lengths, wrong types).
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import pytest

from waku_legacy.archive import FetchOptions, SessionConfig, fetch_archives, load_torrent
from waku_legacy.archive.bencode import bencode
from waku_legacy.archive.encode import PIECE_LENGTH
from waku_legacy.archive.errors import ArchiveDecodeError, TorrentError, UnexpectedTorrentLayout
from waku_legacy.crypto.secp256k1 import private_key_from_bytes
from waku_legacy.errors import DecodeError, WakuLegacyError
from waku_legacy.identity.topics import CommunityId

pytestmark = [pytest.mark.torrent, pytest.mark.timeout(60)]

KEY = private_key_from_bytes(bytes.fromhex("45" * 32))
COMMUNITY = CommunityId(KEY.public_key.format(compressed=True))
NAME = str(COMMUNITY)
LOOPBACK = SessionConfig(listen="127.0.0.1:0", trackers=False, utp=False)


def _torrent(files: list[tuple[list[str], bytes]] | None, name: str = NAME, **info: Any) -> bytes:
    """A .torrent whose piece hashes match ``files``' contents (so only the layout is wrong)."""
    blob = b"".join(content for _, content in files or [])
    pieces = b"".join(
        hashlib.sha1(blob[i : i + PIECE_LENGTH]).digest() for i in range(0, len(blob), PIECE_LENGTH)
    )
    body: dict[str, Any] = {"name": name, "piece length": PIECE_LENGTH, "pieces": pieces}
    if files is not None:
        body["files"] = [{"length": len(c), "path": p} for p, c in files]
    body.update(info)
    return bencode({"info": body})


HOSTILE = {
    "dotdot": [(["data"], b"d" * 300), (["index"], b"i" * 200), (["..", "..", "outside"], b"x")],
    "dotdot-only": [(["..", "..", "outside"], b"x" * 100), (["index"], b"i" * 50)],
    "absolute": [(["data"], b"d" * 300), (["/tmp/waku-legacy-absolute"], b"x" * 10)],
    "extra-file": [(["data"], b"d" * 300), (["index"], b"i" * 200), (["notes"], b"n")],
    "nested": [(["sub", "data"], b"d" * 300), (["index"], b"i" * 200)],
    "swapped": [(["index"], b"i" * 200), (["data"], b"d" * 300)],
}


@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_fetch_refuses_a_hostile_torrent_file_before_writing(tmp_path: Path, case: str) -> None:
    save = tmp_path / "deep" / "save"
    save.mkdir(parents=True)
    outside = tmp_path / "outside"
    outside.write_bytes(b"x" * 100)  # what a `../../outside` entry would read
    source = tmp_path / "hostile.torrent"
    source.write_bytes(_torrent(HOSTILE[case]))
    options = FetchOptions(session=LOOPBACK, metadata_timeout=1, metadata_retries=0,
                           data_timeout=2)  # fmt: skip
    with pytest.raises(UnexpectedTorrentLayout, match="history-archive torrent"):
        fetch_archives(source, COMMUNITY, save, options)
    assert list(save.rglob("*")) == []  # nothing written
    assert outside.read_bytes() == b"x" * 100


def test_fetch_refuses_an_oversized_index_before_downloading(tmp_path: Path) -> None:
    from waku_legacy.archive.encode import MAX_INDEX_BYTES
    from waku_legacy.errors import LimitExceeded

    size = MAX_INDEX_BYTES + 1
    pieces = b"\0" * 20 * (-(-(300 + size) // PIECE_LENGTH))
    files = [{"length": 300, "path": ["data"]}, {"length": size, "path": ["index"]}]
    source = tmp_path / "big-index.torrent"
    source.write_bytes(bencode({"info": {"name": NAME, "piece length": PIECE_LENGTH,
                                         "pieces": pieces, "files": files}}))  # fmt: skip
    with pytest.raises(LimitExceeded, match="its index is"):
        fetch_archives(source, COMMUNITY, tmp_path / "save", FetchOptions(session=LOOPBACK))
    assert not (tmp_path / "save").exists() or list((tmp_path / "save").rglob("*")) == []


@pytest.mark.parametrize(
    ("name", "files"),
    [
        ("../" + NAME, [(["data"], b"d"), (["index"], b"i")]),
        (NAME, None),  # a single-file torrent named after the community
    ],
)
def test_fetch_refuses_other_names_and_single_files(tmp_path: Path, name: str, files) -> None:
    source = tmp_path / "hostile.torrent"
    extra = {"length": 5} if files is None else {}
    source.write_bytes(_torrent(files, name=name, **extra) if files else _hand_single(name))
    with pytest.raises(UnexpectedTorrentLayout):
        fetch_archives(source, COMMUNITY, tmp_path / "save", FetchOptions(session=LOOPBACK))
    assert list((tmp_path / "save").rglob("*")) == []


def _hand_single(name: str) -> bytes:
    return bencode({"info": {"name": name, "piece length": PIECE_LENGTH, "length": 5,
                             "pieces": hashlib.sha1(b"hello").digest()}})  # fmt: skip


@pytest.mark.filterwarnings("ignore:files\\(\\) is deprecated")
def test_fetch_by_magnet_refuses_hostile_metadata_from_a_peer(tmp_path: Path) -> None:
    """A real peer serves a torrent with a `..` entry: refused once the metadata is in, with
    nothing downloaded and nothing written."""
    import libtorrent as lt

    from waku_legacy.archive.session import make_session

    files = HOSTILE["dotdot"]
    raw = _torrent(files)
    info = lt.torrent_info(lt.bdecode(raw))
    seed_dir = tmp_path / "seeder"
    for i, (_, content) in enumerate(files):
        where = Path(info.files().file_path(i, str(seed_dir)))  # libtorrent's sanitised path
        assert where.resolve().is_relative_to(seed_dir.resolve())
        where.parent.mkdir(parents=True, exist_ok=True)
        where.write_bytes(content)
    session = make_session(LOOPBACK)
    params = lt.add_torrent_params()
    params.ti = info
    params.save_path = str(seed_dir)
    params.trackers = []
    handle = session.add_torrent(params)
    try:
        save = tmp_path / "deep" / "save"
        magnet = f"magnet:?xt=urn:btih:{info.info_hashes().v1}&dn={NAME}"
        options = FetchOptions(peers=(f"127.0.0.1:{session.listen_port()}",), session=LOOPBACK,
                               metadata_timeout=15, data_timeout=5)  # fmt: skip
        with pytest.raises(UnexpectedTorrentLayout, match=r"\.\./\.\./outside"):
            fetch_archives(magnet, COMMUNITY, save, options)
        assert [p for p in save.rglob("*") if p.is_file()] == []
        assert not (tmp_path / "outside").exists()
    finally:
        session.remove_torrent(handle)


# -- every field of a .torrent checked, with a typed error ------------------------------------


def _info(**changes: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "name": NAME,
        "piece length": PIECE_LENGTH,
        "pieces": b"\x00" * 20,
        "files": [{"length": 300, "path": ["data"]}, {"length": 200, "path": ["index"]}],
    }
    base.update(changes)
    return {k: v for k, v in base.items() if v is not None}


BAD_INFO = {
    "negative length": _info(
        files=[{"length": -5, "path": ["data"]}, {"length": 505, "path": ["index"]}]
    ),
    "negative single length": _info(files=None, length=-1),
    "length is a string": _info(files=[{"length": b"300", "path": ["data"]}]),
    "files is an integer": _info(files=7),
    "file entry is a list": _info(files=[[1, 2]]),
    "path is a string": _info(files=[{"length": 500, "path": b"data"}]),
    "empty path": _info(files=[{"length": 500, "path": []}]),
    "empty path part": _info(files=[{"length": 500, "path": [b""]}]),
    "path part is an integer": _info(files=[{"length": 500, "path": [5]}]),
    "name is an integer": _info(name=5),
    "no name": _info(name=None),
    "name not utf-8": _info(name=b"\xff\xfe"),
    "piece length zero": _info(**{"piece length": 0}),
    "piece length huge": _info(**{"piece length": 1 << 40}),
    "piece length negative": _info(**{"piece length": -16384}),
    "pieces not multiple of 20": _info(pieces=b"\x00" * 21),
    "pieces is a list": _info(pieces=[b"\x00" * 20]),
    "too few pieces": _info(pieces=b""),
    "length and files": _info(length=5),
    "huge length": _info(files=[{"length": 1 << 62, "path": ["data"]}]),
}


@pytest.mark.parametrize("case", sorted(BAD_INFO))
def test_every_torrent_field_is_checked(tmp_path: Path, case: str) -> None:
    raw = bencode({"info": BAD_INFO[case]})
    with pytest.raises(DecodeError):  # ArchiveDecodeError, or LimitExceeded for sizes
        load_torrent(raw)


def test_bad_metainfo_fields_and_files(tmp_path: Path) -> None:
    good = _info()
    with pytest.raises(ArchiveDecodeError, match="announce-list"):
        load_torrent(bencode({"announce-list": 5, "info": good}))
    with pytest.raises(ArchiveDecodeError):
        load_torrent(bencode({"info": 5}))
    with pytest.raises(ArchiveDecodeError):
        load_torrent(b"i-5e")
    with pytest.raises(TorrentError, match="does not exist"):
        load_torrent(tmp_path / "missing.torrent")
    with pytest.raises(TorrentError, match="is a directory"):
        load_torrent(tmp_path)
    for error in (ArchiveDecodeError, TorrentError):
        assert issubclass(error, WakuLegacyError)
