"""``audit --repair``: catch-up archives for what the audit found missing (issue 14).

The damaged archives of tests/migrate/test_audit.py (messages removed from week 0, no archive for
week 2) are repaired; then the second audit finds nothing missing, the old bytes and pieces
are untouched, and a plain libtorrent session that holds the old torrent's files fetches
only the new pieces and, importing the index entries it had not seen (as status-go does),
gets every message once.
"""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path

import pytest

from tests.migrate.test_audit import CID, COMMUNITY, _sources, damaged, sample  # noqa: F401 (fixtures)
from waku_legacy.archive.build import LinkSigner, write_magnet_message
from waku_legacy.archive.data_files import ArchiveIndex, read_archive_bytes, read_index
from waku_legacy.archive.encode import PIECE_LENGTH, IndexEntry, decode_archive
from waku_legacy.archive.errors import ArchiveError
from waku_legacy.archive.layout import CommunityLayout
from waku_legacy.archive.magnet import verify_magnet_message
from waku_legacy.archive.message import ArchiveMessage
from waku_legacy.archive.repair import MissingMessage, catch_up_windows
from waku_legacy.archive.seeder import Seeder
from waku_legacy.archive.session import SessionConfig
from waku_legacy.archive.torrent import build_torrent, load_torrent
from waku_legacy.cli import main
from waku_legacy.crypto.secp256k1 import private_key_from_bytes
from waku_legacy.faults import no_fault
from waku_legacy.proto import waku_message_pb2

LOOPBACK = SessionConfig(listen="127.0.0.1:0", trackers=False, utp=False)
OLD_CLOCK = int(time.time() * 1000) + 10**9  # an earlier link signed far above the wall clock


@pytest.fixture
def repaired(sample, damaged, tmp_path: Path, capsys):  # noqa: F811
    """The damaged archives copied, their old torrent and link, then ``audit --repair``."""
    out, _channel, _public, _start = sample
    archive_dir = tmp_path / "archives"
    shutil.copytree(damaged[0], archive_dir)
    torrents = tmp_path / "torrents"
    old = build_torrent(archive_dir, torrents, CID)
    old_torrent = load_torrent(old.path)
    old_dir = tmp_path / "old"  # the old torrent's files, as a member holds them
    shutil.copytree(archive_dir / CID, old_dir / CID)
    key = private_key_from_bytes(COMMUNITY.secret)
    layout = CommunityLayout.of(archive_dir, CID, torrents)
    signer = LinkSigner(key, "/waku/2/rs/16/64", "both", None)
    write_magnet_message(layout, signer, old.magnet_uri, OLD_CLOCK, fault=no_fault, fsync=False)
    key_file = tmp_path / "community.key"
    key_file.write_text(COMMUNITY.secret.hex())
    argv = ["audit", "--shard", "64", "--community", CID, "--archive-dir", str(archive_dir),
            *[a for s in _sources(out) for a in ("--source", s)], "--quiet", "--json",
            "--repair", "--key-file", str(key_file), "--torrent-dir", str(torrents)]  # fmt: skip
    started = time.monotonic()
    code = main(argv)
    document = json.loads(capsys.readouterr().out)
    return {"code": code, "seconds": time.monotonic() - started, "archive_dir": archive_dir,
            "torrents": torrents, "old_torrent": old_torrent, "old_dir": old_dir,
            "layout": layout, "argv": argv, "document": document}  # fmt: skip


def test_repair_then_audit_is_clean_and_append_only(sample, damaged, repaired, capsys) -> None:  # noqa: F811
    _dir, damage = damaged
    document = repaired["document"]
    assert repaired["code"] == 0, document["totals"]
    assert document["complete"] and document["totals"]["missing"] == 0
    assert document["totals"]["windows_without_archive"] == 0
    assert document["archive_problems"] == []  # catch-up archives break no index rule
    # a third run from scratch agrees, and a repair with nothing missing changes nothing
    layout = repaired["layout"]
    data = layout.data.read_bytes()
    assert main(repaired["argv"]) == 0
    assert layout.data.read_bytes() == data
    # append-only: the old data is a prefix, the old pieces hash the same
    old_data = (repaired["old_dir"] / CID / "data").read_bytes()
    assert data.startswith(old_data) and len(data) > len(old_data)
    old, new = repaired["old_torrent"], load_torrent(layout.torrent)
    assert len(old_data) % PIECE_LENGTH == 0
    for piece in range(len(old_data) // PIECE_LENGTH):
        assert old.piece_hash(piece) == new.piece_hash(piece)
    # the old index entries are kept; the new ones hold exactly the missing copies
    old_index = read_index(repaired["old_dir"], CID)
    new_index = read_index(repaired["archive_dir"], CID)
    assert new_index.entries[: len(old_index.entries)] == old_index.entries
    missing = {m.hash for m in damage["removed"] + damage["week2"]}
    added = _messages(layout.data, new_index.entries[len(old_index.entries) :])
    assert sorted(m.hash for m in added) == sorted(missing)
    # the signed link names the new torrent, with a clock above the earlier link's
    message = waku_message_pb2.WakuMessage()
    message.ParseFromString(layout.magnet_message_pb.read_bytes())
    link = verify_magnet_message(message, COMMUNITY.id, last_clock=OLD_CLOCK)
    assert link.clock == OLD_CLOCK + 1
    assert link.info_hash == new.info_hash != old.info_hash


def _messages(data: Path, entries):
    return [
        m
        for entry in entries
        for m in decode_archive(read_archive_bytes(data, entry), what="test").messages
    ]


def test_a_member_with_the_old_torrent_fetches_only_the_new_pieces(damaged, repaired) -> None:  # noqa: F811
    """A plain libtorrent session (not the project's fetch) that holds the old files."""
    import libtorrent as lt

    _dir, damage = damaged
    layout = repaired["layout"]
    new = load_torrent(layout.torrent)
    old_length = (repaired["old_dir"] / CID / "data").stat().st_size
    old_pieces = old_length // PIECE_LENGTH
    old_ids = {e.archive_id for e in read_index(repaired["old_dir"], CID).entries}
    member = lt.session({"listen_interfaces": "127.0.0.1:0", "enable_dht": False,
                         "enable_lsd": False, "enable_upnp": False, "enable_natpmp": False,
                         "enable_outgoing_utp": False, "enable_incoming_utp": False})  # fmt: skip
    with Seeder(repaired["archive_dir"], LOOPBACK) as seeder:
        seeder.seed(layout.torrent)
        params = lt.add_torrent_params()
        params.ti = lt.torrent_info(str(layout.torrent))
        params.save_path = str(repaired["old_dir"])
        params.trackers = []
        handle = member.add_torrent(params)
        status = _wait(handle, lambda s: s.state not in (s.checking_files, s.checking_resume_data))
        have = list(status.pieces)
        assert status.total_payload_download == 0
        assert have[:old_pieces] == [True] * old_pieces  # found by its hash check
        assert not any(have[old_pieces : new.piece_count - 1])  # new data and index: not yet
        handle.connect_peer(("127.0.0.1", seeder.listen_port))
        status = _wait(handle, lambda s: s.is_seeding)
    new_bytes = (new.piece_count - old_pieces) * PIECE_LENGTH
    assert new_bytes - PIECE_LENGTH <= status.total_payload_download <= new_bytes
    # the member's import: every entry of the new index it had not seen (status-go's ids)
    index = read_index(repaired["old_dir"], CID)
    fresh = [e for e in index.entries if e.archive_id not in old_ids]
    old_entries = [e for e in index.entries if e.archive_id in old_ids]
    imported_before = _messages(repaired["old_dir"] / CID / "data", old_entries)
    imported_now = _messages(repaired["old_dir"] / CID / "data", fresh)
    assert {m.hash for m in imported_now}.isdisjoint(m.hash for m in imported_before)
    missing = sorted(m.hash for m in damage["removed"] + damage["week2"])
    assert sorted(m.hash for m in imported_now) == missing  # each once, nothing else
    everything = {m.hash for m in imported_before} | {m.hash for m in imported_now}
    assert {m.hash for m in damage["channel"]} <= everything


def _wait(handle, done, timeout: float = 30.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        status = handle.status()
        if done(status):
            return status
        time.sleep(0.05)
    raise AssertionError(f"timed out: {handle.status().state}")


@pytest.mark.torrent
@pytest.mark.timeout(90)
def test_repair_of_archives_fetched_by_torrent(sample, damaged, tmp_path: Path, capsys) -> None:  # noqa: F811
    """With --torrent the archives are fetched into --save-dir and repaired there."""
    out, _channel, _public, _start = sample
    seeded = tmp_path / "seeded"
    shutil.copytree(damaged[0], seeded)
    old = build_torrent(seeded, tmp_path / "old-torrents", CID)
    key_file = tmp_path / "community.key"
    key_file.write_text(COMMUNITY.secret.hex())
    save_dir, torrents = tmp_path / "fetched", tmp_path / "torrents"
    with Seeder(seeded, LOOPBACK) as seeder:
        seeder.seed(old.path)
        argv = ["audit", "--shard", "64", "--community", CID, "--torrent", str(old.path),
                *[a for s in _sources(out) for a in ("--source", s)],
                "--peer", f"127.0.0.1:{seeder.listen_port}", "--listen", "127.0.0.1:0",
                "--no-trackers", "--no-utp", "--metadata-timeout", "10", "--timeout", "20",
                "--quiet", "--json", "--save-dir", str(save_dir), "--repair",
                "--key-file", str(key_file), "--torrent-dir", str(torrents)]  # fmt: skip
        assert main(argv) == 0
    document = json.loads(capsys.readouterr().out)
    assert document["complete"] and document["totals"]["missing"] == 0
    repaired = load_torrent(torrents / f"{CID}.torrent")
    assert repaired.info_hash != old.info_hash
    old_data = (seeded / CID / "data").read_bytes()
    assert (save_dir / CID / "data").read_bytes().startswith(old_data)


def _entry(start: int, end: int, offset: int) -> IndexEntry:
    return IndexEntry(f"0x{offset:064x}", start, end, (), offset, PIECE_LENGTH, 1, b"")


def test_catch_up_windows_keep_archived_windows_and_clip_new_ones() -> None:
    index = ArchiveIndex((_entry(100, 200, 0), _entry(250, 350, PIECE_LENGTH)), 2 * PIECE_LENGTH)

    def message(at: int) -> ArchiveMessage:
        return ArchiveMessage(at, at.to_bytes(32, "big"), b"\x01\x02\x03\x04", b"x")

    missing = [
        MissingMessage(100, 200, message(150)),  # an archived window: kept as is
        MissingMessage(180, 280, message(210)),  # a week across its neighbours: the gap
        MissingMessage(350, 450, message(360)),  # after the last archive: ends at now
    ]
    windows = catch_up_windows(missing, index, now=400)
    assert sorted(windows) == [(100, 200), (200, 250), (350, 400)]
    with pytest.raises(ArchiveError, match="outside"):
        catch_up_windows([MissingMessage(350, 450, message(420))], index, now=400)


def test_repair_needs_its_keys(tmp_path: Path, capsys) -> None:
    argv = ["audit", "--community", CID, "--archive-dir", str(tmp_path), "--shard", "64",
            "--source", f"dump:{tmp_path / 'none.dump'}", "--repair"]  # fmt: skip
    assert main(argv) == 2
    assert "--key-file and --torrent-dir" in capsys.readouterr().err


@pytest.mark.parametrize("mode", ["channel", "universal", "both"])
def test_repair_in_each_mode_appends_what_the_builder_writes(
    sample, tmp_path: Path, capsys, mode: str  # noqa: F811
) -> None:
    """Issue 22: ``audit --repair`` without ``--archive-topics`` reads the archives' mode, and
    every catch-up archive is byte for byte what the builder writes for its window and
    messages in that mode (metadata topics, copies, hashes, order, padding)."""
    from tests.migrate.test_audit import TOPICS, _week
    from waku_legacy.archive.build import build_community_archives
    from waku_legacy.archive.partition import WEEK_SECONDS
    from waku_legacy.archive.topics import universal_topic

    out, channel, _public, start = sample
    week0, week1 = _week(channel, start, 0), _week(channel, start, 1)
    removed = [week0[1], week0[5], week1[2]]
    kept = [m for m in week0 + week1 if m not in removed]
    archive_dir, torrents = tmp_path / "archives", tmp_path / "torrents"
    build_community_archives(archive_dir, torrents, CID, TOPICS, kept,
                             now=start + 2 * WEEK_SECONDS, archive_topics=mode)  # fmt: skip
    old_entries = read_index(archive_dir, CID).entries
    key_file = tmp_path / "community.key"
    key_file.write_text(COMMUNITY.secret.hex())
    argv = ["audit", "--shard", "64", "--community", CID, "--archive-dir", str(archive_dir),
            *[a for s in _sources(out) for a in ("--source", s)], "--quiet", "--json",
            "--repair", "--key-file", str(key_file), "--torrent-dir", str(torrents)]  # fmt: skip
    assert main(argv) == 0
    document = json.loads(capsys.readouterr().out)
    totals = document["totals"]
    assert document["complete"] and (totals["extra"], totals["missing"]) == (0, 0)
    index = read_index(archive_dir, CID)
    assert index.entries[: len(old_entries)] == old_entries
    new_entries = index.entries[len(old_entries) :]
    # removed messages in weeks 0 and 1, and weeks 2 and 3 that had no archive
    assert {(e.window_from - start) // WEEK_SECONDS for e in new_entries} == {0, 1, 2, 3}
    missing = removed + [m for m in channel if m.timestamp >= start + 2 * WEEK_SECONDS]
    universal = universal_topic(CID)
    data = CommunityLayout.of(archive_dir, CID).data
    for number, entry in enumerate(new_entries):
        assert (universal in entry.content_topics) == (mode != "channel")
        messages = [m for m in missing if entry.window_from <= m.timestamp < entry.window_to]
        reference = tmp_path / f"builder-{number}"
        build_community_archives(
            reference, tmp_path / f"builder-torrents-{number}", CID, TOPICS, messages,
            now=entry.window_to, last_end=entry.window_from,
            partition=entry.window_to - entry.window_from, archive_topics=mode,
        )  # fmt: skip
        [built] = read_index(reference, CID).entries
        assert built.content_topics == entry.content_topics
        assert read_archive_bytes(CommunityLayout.of(reference, CID).data, built) == (
            read_archive_bytes(data, entry)
        )
