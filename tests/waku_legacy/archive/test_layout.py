"""The archive store and its torrent: append-only data, crash safety, corruption, torrent form.

No network here: libtorrent is only used as an independent parser of the .torrent we build.
"""

from __future__ import annotations

import hashlib
import os
import random
import shutil
from pathlib import Path

import pytest

from waku_legacy.archive import (
    PIECE_LENGTH,
    WEEK_SECONDS,
    ArchiveCorrupted,
    ArchiveDecodeError,
    ArchiveMessage,
    EncodedArchive,
    append_archives,
    build_community_archives,
    load_torrent,
    read_archive,
    read_index,
    verify_store,
)
from waku_legacy.archive.data_files import inspect_archive_data
from waku_legacy.archive.layout import CommunityLayout
from waku_legacy.archive.torrent import ANNOUNCE_LIST, build_torrent
from waku_legacy.crypto.secp256k1 import private_key_from_bytes
from waku_legacy.errors import WakuLegacyError
from waku_legacy.identity.topics import CommunityId
from waku_legacy.proto import status_archive_pb2

KEY = private_key_from_bytes(bytes.fromhex("11" * 32))
COMMUNITY = CommunityId(KEY.public_key.format(compressed=True))
TOPICS = [b"\x0a\x0b\x0c\x0d", b"\x01\x02\x03\x04"]
T0 = 1_650_000_000
W = WEEK_SECONDS


def make_messages(weeks: int, per_week: int = 40, seed: int = 1) -> list[ArchiveMessage]:
    rng = random.Random(seed)
    out = []
    for i in range(weeks * per_week):
        ts = T0 + (i * W) // per_week + rng.randrange(60)
        out.append(
            ArchiveMessage(
                timestamp=ts,
                hash=hashlib.sha256(f"{seed}-{i}".encode()).digest(),
                topic=TOPICS[i % 2],
                payload=rng.randbytes(rng.randrange(100, 3000)),
                sig=b"\x04" + rng.randbytes(64),
            )
        )
    return out


def build(root: Path, messages: list[ArchiveMessage], now: int, **kw: object):
    return build_community_archives(
        root / "archives", root / "torrents", COMMUNITY, TOPICS, messages, now=now, **kw
    )


def snapshot(root: Path) -> dict[str, bytes]:
    """Every file except the magnet-link message (encrypted with a random nonce)."""
    return {
        str(p.relative_to(root)): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file() and "magnet-message" not in p.name
    }


def test_build_append_and_read_back(tmp_path: Path) -> None:
    messages = make_messages(3)
    report = build(tmp_path, messages, now=T0 + 3 * W)
    assert report.archives_added == 3 and report.messages_archived == len(messages)
    index = read_index(tmp_path / "archives", COMMUNITY)
    assert [e.offset for e in index.entries] == [
        0,
        *(e.offset + e.size for e in index.entries[:-1]),
    ]
    assert all(e.size % PIECE_LENGTH == 0 for e in index.entries)
    back = [
        m for e in index.entries for m in read_archive(tmp_path / "archives", COMMUNITY, e).messages
    ]
    assert sorted(back, key=lambda m: m.hash) == sorted(messages, key=lambda m: m.hash)
    assert (
        verify_store(tmp_path / "archives", COMMUNITY, torrent_dir=tmp_path / "torrents").archives
        == 3
    )

    # nothing new: a rerun adds nothing and reports the old messages as late
    again = build(tmp_path, messages, now=T0 + 3 * W)
    assert again.archives_added == 0 and again.late_messages == len(messages)
    assert again.info_hash == report.info_hash


def test_appending_a_week_keeps_earlier_pieces(tmp_path: Path) -> None:
    messages = make_messages(4)
    first = build(tmp_path, [m for m in messages if m.timestamp < T0 + 3 * W], now=T0 + 3 * W)
    layout = CommunityLayout.of(tmp_path / "archives", COMMUNITY, tmp_path / "torrents")
    data_before = layout.data.read_bytes()
    pieces_before = load_torrent(layout.torrent).pieces
    second = build(tmp_path, messages, now=T0 + 4 * W)
    assert second.archives_added == 1 and second.late_messages == first.messages_archived
    data_after = layout.data.read_bytes()
    assert data_after[: len(data_before)] == data_before
    data_pieces = len(data_before) // PIECE_LENGTH
    pieces_after = load_torrent(layout.torrent).pieces
    assert pieces_after[: data_pieces * 20] == pieces_before[: data_pieces * 20]
    # and independently: SHA-1 of each earlier piece of the new data file
    for i in range(data_pieces):
        piece = data_after[i * PIECE_LENGTH : (i + 1) * PIECE_LENGTH]
        assert hashlib.sha1(piece).digest() == pieces_before[i * 20 : i * 20 + 20]
    assert second.info_hash != first.info_hash


def test_shuffled_input_same_bytes_and_info_hash(tmp_path: Path) -> None:
    messages = make_messages(3)
    shuffled = messages[:]
    random.Random(7).shuffle(shuffled)
    one = build(tmp_path / "a", messages, now=T0 + 3 * W)
    two = build(tmp_path / "b", shuffled, now=T0 + 3 * W)
    assert one.info_hash == two.info_hash and one.magnet_uri == two.magnet_uri
    assert snapshot(tmp_path / "a") == snapshot(tmp_path / "b")


def test_torrent_matches_libtorrent_and_hand_magnet(tmp_path: Path) -> None:
    import libtorrent as lt

    report = build(tmp_path, make_messages(2), now=T0 + 2 * W)
    layout = CommunityLayout.of(tmp_path / "archives", COMMUNITY, tmp_path / "torrents")
    raw = layout.torrent.read_bytes()
    info = lt.torrent_info(lt.bdecode(raw))
    files = info.layout()
    assert info.name() == str(COMMUNITY)
    assert info.piece_length() == 102400
    assert [files.file_path(i) for i in range(files.num_files())] == [
        f"{COMMUNITY}/data",
        f"{COMMUNITY}/index",
    ]
    assert files.file_size(0) == layout.data.stat().st_size
    assert files.file_size(1) == layout.index.stat().st_size
    assert str(info.info_hashes().v1) == report.info_hash
    assert not info.info_hashes().has_v2()  # v1 only, as anacrolix/torrent reads
    # piece hashes computed here over data || index
    stream = layout.data.read_bytes() + layout.index.read_bytes()
    assert info.num_pieces() == -(-len(stream) // 102400)
    for i in range(info.num_pieces()):
        expected = hashlib.sha1(stream[i * 102400 : (i + 1) * 102400]).digest()
        assert bytes(info.hash_for_piece(i)) == expected
    assert lt.bdecode(raw)[b"announce-list"] == [[t.encode()] for t in ANNOUNCE_LIST]
    # the info-hash is SHA-1 of the info dictionary's bencoded bytes inside the file
    start = raw.index(b"4:info") + len(b"4:info")
    assert hashlib.sha1(raw[start:-1]).hexdigest() == report.info_hash
    # status-go's magnet form: xt first, then url.Values.Encode (dn, tr...; query-escaped)
    assert report.magnet_uri == (
        f"magnet:?xt=urn:btih:{report.info_hash}&dn={COMMUNITY}"
        "&tr=udp%3A%2F%2Ftracker.opentrackr.org%3A1337%2Fannounce"
        "&tr=udp%3A%2F%2Ftracker.openbittorrent.com%3A6969%2Fannounce"
    )
    parsed = lt.parse_magnet_uri(report.magnet_uri)
    assert str(parsed.info_hashes.v1) == report.info_hash and parsed.name == str(COMMUNITY)
    assert list(parsed.trackers) == list(ANNOUNCE_LIST)
    # deterministic metadata: creation date is the newest archive end, not the wall clock
    assert load_torrent(raw).metainfo[b"creation date"] == T0 + 2 * W


class InjectedFault(Exception):
    pass


def _steps(root: Path, messages: list[ArchiveMessage], now: int) -> list[str]:
    seen: list[str] = []
    build(root, messages, now=now, community_key=KEY, clock_ms=1, fault=seen.append)
    return seen


@pytest.mark.parametrize("scenario", ["fresh", "append"])
def test_killed_build_reruns_to_identical_bytes(tmp_path: Path, scenario: str) -> None:
    messages = make_messages(4, per_week=12)
    base = tmp_path / "base"
    base.mkdir()
    if scenario == "append":
        build(base, [m for m in messages if m.timestamp < T0 + 2 * W], now=T0 + 2 * W)
    now = T0 + 4 * W

    reference = tmp_path / "reference"
    shutil.copytree(base, reference)
    build(reference, messages, now=now, community_key=KEY, clock_ms=1)
    expected = snapshot(reference)

    recording = tmp_path / "recording"
    shutil.copytree(base, recording)
    steps = _steps(recording, messages, now)
    assert any(s.startswith("data:append") for s in steps) and "torrent:rename" in steps

    for k, step in enumerate(steps):
        run = tmp_path / f"run{k}"
        shutil.copytree(base, run)
        calls = 0

        def fault(name: str, k: int = k) -> None:
            nonlocal calls
            calls += 1
            if calls - 1 == k:
                raise InjectedFault(name)

        with pytest.raises(InjectedFault):
            build(run, messages, now=now, community_key=KEY, clock_ms=1, fault=fault)
        # the previous state is still readable after the kill
        read_index(run / "archives", COMMUNITY)

        def kill_repair(name: str) -> None:
            if name.startswith("repair:"):
                raise InjectedFault(name)

        try:  # a second kill while the rerun repairs the torn tail
            build(run, messages, now=now, community_key=KEY, clock_ms=2, fault=kill_repair)
        except InjectedFault:
            pass
        build(run, messages, now=now, community_key=KEY, clock_ms=3)
        assert snapshot(run) == expected, f"rerun after a kill at step {k} ({step}) differs"
        shutil.rmtree(run)


def test_torn_tail_is_repaired_by_next_append(tmp_path: Path) -> None:
    build(tmp_path, make_messages(1), now=T0 + W)
    layout = CommunityLayout.of(tmp_path / "archives", COMMUNITY, tmp_path / "torrents")
    good = layout.data.read_bytes()
    with open(layout.data, "ab") as handle:
        handle.write(b"half an archive")
    status = inspect_archive_data(layout, "status-go")
    assert status.torn_tail == len(b"half an archive")
    with pytest.raises(ArchiveCorrupted, match="interrupted build"):
        verify_store(layout.archive_dir, COMMUNITY)
    with pytest.raises(WakuLegacyError, match="interrupted"):
        build_torrent(layout.archive_dir, tmp_path / "torrents", COMMUNITY)
    result = append_archives(layout.archive_dir, COMMUNITY, [])
    assert result.repaired_bytes == len(b"half an archive")
    assert layout.data.read_bytes() == good


def test_corrupted_data_is_detected(tmp_path: Path) -> None:
    build(tmp_path, make_messages(2), now=T0 + 2 * W)
    layout = CommunityLayout.of(tmp_path / "archives", COMMUNITY, tmp_path / "torrents")
    original = layout.data.read_bytes()
    index = read_index(layout.archive_dir, COMMUNITY)

    # a payload byte: the archive still parses, but its recorded SHA-256 and the torrent's
    # piece hashes no longer match
    flipped = bytearray(original)
    flipped[index.entries[0].archive_length // 2] ^= 0xFF
    layout.data.write_bytes(bytes(flipped))
    with pytest.raises(ArchiveCorrupted, match="SHA-256 recorded when it was written"):
        verify_store(layout.archive_dir, COMMUNITY)
    digests = layout.digests.read_bytes()
    layout.digests.unlink()  # a store written before digests were recorded: the torrent tells
    with pytest.raises(ArchiveCorrupted, match="does not describe the current data"):
        verify_store(layout.archive_dir, COMMUNITY, torrent_dir=layout.torrent_dir)
    layout.digests.write_bytes(digests)

    # the first bytes of the second archive: it no longer parses
    broken = bytearray(original)
    broken[index.entries[1].offset : index.entries[1].offset + 4] = b"\xff\xff\xff\xff"
    layout.data.write_bytes(bytes(broken))
    with pytest.raises(ArchiveDecodeError, match=index.entries[1].archive_id):
        verify_store(layout.archive_dir, COMMUNITY)

    # non-zero padding
    padded = bytearray(original)
    padded[index.entries[0].offset + index.entries[0].archive_length] = 1
    layout.data.write_bytes(bytes(padded))
    with pytest.raises(ArchiveCorrupted, match="padding"):
        verify_store(layout.archive_dir, COMMUNITY)

    # truncated data: the index accounts for more than there is
    layout.data.write_bytes(original[: len(original) - PIECE_LENGTH])
    with pytest.raises(ArchiveCorrupted, match="ends before archive"):
        read_archive(layout.archive_dir, COMMUNITY, index.entries[-1])
    with pytest.raises(ArchiveCorrupted, match="truncated or replaced"):
        build(tmp_path, make_messages(3), now=T0 + 3 * W)


def test_corrupted_index_is_detected(tmp_path: Path) -> None:
    build(tmp_path, make_messages(2), now=T0 + 2 * W)
    layout = CommunityLayout.of(tmp_path / "archives", COMMUNITY, tmp_path / "torrents")
    original = layout.index.read_bytes()

    layout.index.write_bytes(b"\x0a\xff\x01garbage")
    with pytest.raises(ArchiveCorrupted, match=str(layout.index)):
        read_index(layout.archive_dir, COMMUNITY)

    # a window end changed inside one entry (with the generated classes): it parses, but its
    # key is no longer the keccak256 of its metadata
    tampered = status_archive_pb2.WakuMessageArchiveIndex.FromString(original)
    key = sorted(tampered.archives)[0]
    tampered.archives[key].metadata.to += 1
    layout.index.write_bytes(tampered.SerializeToString())
    with pytest.raises(ArchiveCorrupted, match="not keccak256 of its metadata"):
        verify_store(layout.archive_dir, COMMUNITY)

    # an index whose archives do not tile data (one entry removed from the middle)
    layout.index.write_bytes(original)
    entries = read_index(layout.archive_dir, COMMUNITY).entries
    from waku_legacy.archive.encode import encode_index

    layout.index.write_bytes(encode_index(entries[1:]))
    with pytest.raises(ArchiveCorrupted, match="expected 0"):
        read_index(layout.archive_dir, COMMUNITY)


def test_split_parts_of_one_window_keep_order_and_retry_is_idempotent(tmp_path: Path) -> None:
    messages = make_messages(1, per_week=30)
    a = EncodedArchive.build(T0, T0 + W, TOPICS, messages[:10])
    b = EncodedArchive.build(T0, T0 + W, TOPICS, messages[10:])
    root = tmp_path / "archives"
    first = append_archives(root, COMMUNITY, [a, b])
    assert [e.offset for e in first.added] == [0, first.added[0].size]
    retry = append_archives(root, COMMUNITY, [a, b])
    assert retry.added == [] and retry.skipped == 2
    assert read_index(root, COMMUNITY).entries == first.index.entries


def test_state_file_lives_outside_the_torrent_folder(tmp_path: Path) -> None:
    build(tmp_path, make_messages(1), now=T0 + W + 5)
    folder = tmp_path / "archives" / str(COMMUNITY)
    assert sorted(os.listdir(folder)) == ["data", "index"]  # status-go torrents every file here


def test_trailing_empty_windows_are_recorded_as_archived(tmp_path: Path) -> None:
    # week 1 has messages, weeks 2-3 none: status-go records now as the end, so a message
    # that shows up later for week 2 is late (its window was passed), not archived
    week1 = make_messages(1)
    first = build(tmp_path, week1, now=T0 + 3 * W)
    assert first.archives_added == 1 and first.last_end == T0 + 3 * W
    late = ArchiveMessage(timestamp=T0 + W + 5, hash=b"\x99" * 32, topic=TOPICS[0], payload=b"x")
    second = build(tmp_path, [*week1, late], now=T0 + 3 * W + 10)
    assert second.archives_added == 0 and second.late_messages == len(week1) + 1
