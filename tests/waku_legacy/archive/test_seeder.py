"""Real libtorrent sessions on 127.0.0.1: seed, then fetch as a member would.

DHT, LSD, UPnP, NAT-PMP and trackers are off; the fetcher is told the seeder's address (the
peer hint a magnet link's x.pe would carry).
"""

from __future__ import annotations

import hashlib
import random
import shutil
import time
from pathlib import Path

import pytest

from waku_legacy.archive import (
    WEEK_SECONDS,
    ArchiveMessage,
    FetchOptions,
    Seeder,
    Selection,
    SessionConfig,
    build_community_archives,
    build_magnet_message,
    fetch_archives,
    fetch_from_magnet_message,
    read_index,
)
from waku_legacy.archive.errors import FetchTimeout, ForgedMagnetMessage, SeederError
from waku_legacy.archive.layout import CommunityLayout
from waku_legacy.archive.magnet import wrap_application_message
from waku_legacy.crypto.payload import encode_payload
from waku_legacy.crypto.secp256k1 import private_key_from_bytes
from waku_legacy.identity.topics import CommunityId, content_topic_of_chat, symmetric_key_for_chat
from waku_legacy.proto import status_archive_pb2, waku_message_pb2

pytestmark = [pytest.mark.torrent, pytest.mark.timeout(60)]

KEY = private_key_from_bytes(bytes.fromhex("44" * 32))
COMMUNITY = CommunityId(KEY.public_key.format(compressed=True))
TOPICS = [b"\xaa\xbb\xcc\xdd"]
T0 = 1_660_000_000
W = WEEK_SECONDS
LOOPBACK = SessionConfig(listen="127.0.0.1:0", trackers=False, utp=False)


def make_messages(weeks: int, per_week: int = 60) -> list[ArchiveMessage]:
    rng = random.Random(weeks)
    return [
        ArchiveMessage(
            timestamp=T0 + (i * W) // per_week,
            hash=hashlib.sha256(i.to_bytes(4, "big")).digest(),
            topic=TOPICS[0],
            payload=rng.randbytes(4000),  # ~240 KB a week: each archive spans 3 pieces
        )
        for i in range(weeks * per_week)
    ]


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory):
    root = tmp_path_factory.mktemp("seeded")
    report = build_community_archives(
        root / "archives", root / "torrents", COMMUNITY, TOPICS, make_messages(4), now=T0 + 4 * W
    )
    return root, report


@pytest.fixture(scope="module")
def seeder(store):
    root, report = store
    with Seeder(root / "archives", LOOPBACK) as running:
        running.seed(report.torrent_path)
        yield running


def options(seeder: Seeder, **kw: object) -> FetchOptions:
    return FetchOptions(
        peers=(f"127.0.0.1:{seeder.listen_port}",),
        session=LOOPBACK,
        metadata_timeout=10,
        data_timeout=20,
        **kw,
    )


def test_fetch_all_by_magnet_gives_identical_bytes(store, seeder, tmp_path: Path) -> None:
    root, report = store
    result = fetch_archives(report.magnet_uri, COMMUNITY, tmp_path, options(seeder))
    source = CommunityLayout.of(root / "archives", COMMUNITY)
    fetched = CommunityLayout.of(tmp_path, COMMUNITY)
    assert fetched.data.read_bytes() == source.data.read_bytes()
    assert fetched.index.read_bytes() == source.index.read_bytes()
    assert result.info_hash == report.info_hash
    assert len(result.archives) == 4 and result.message_count == 240
    assert [f.entry.window_from for f in result.archives] == sorted(
        f.entry.window_from for f in result.archives
    )
    stats = seeder.stats()[0]
    assert stats.uploaded > 0 and stats.state == "seeding"


def test_fetch_latest_downloads_only_its_pieces(store, seeder, tmp_path: Path) -> None:
    root, report = store
    index = read_index(root / "archives", COMMUNITY)
    latest = max(index.entries, key=lambda e: e.window_from)
    result = fetch_archives(
        report.magnet_uri, COMMUNITY, tmp_path, options(seeder, selection=Selection.LATEST)
    )
    data_pieces = index.data_length // 102400
    total_pieces = -(-(index.data_length + (root / "archives" / str(COMMUNITY) / "index")
                       .stat().st_size) // 102400)  # fmt: skip
    expected = set(latest.pieces()) | set(range(data_pieces, total_pieces))
    assert set(result.have_pieces) == expected
    assert len(latest.pieces()) == 3 and len(expected) < total_pieces
    assert [f.entry.archive_id for f in result.archives] == [latest.archive_id]
    assert all(
        latest.window_from <= m.timestamp < latest.window_to
        for m in result.archives[0].archive.messages
    )
    assert result.bytes_downloaded < index.data_length


def test_fetch_range_then_new_from_torrent_file(store, seeder, tmp_path: Path) -> None:
    from waku_legacy.archive.output import FetchRecord, write_jsonl, write_sqlite

    _, report = store
    record = FetchRecord(tmp_path / "record.json")
    first = fetch_archives(
        report.torrent_path,
        COMMUNITY,
        tmp_path / "one",
        options(seeder, selection=Selection.RANGE, since=T0 + W, until=T0 + 2 * W),
    )
    assert [(f.entry.window_from, f.entry.window_to) for f in first.archives] == [
        (T0 + W, T0 + 2 * W)
    ]
    record.add(str(COMMUNITY), [f.entry.archive_id for f in first.archives])
    record.save()
    known = FetchRecord(tmp_path / "record.json").fetched(str(COMMUNITY))
    rest = fetch_archives(
        report.torrent_path,
        COMMUNITY,
        tmp_path / "two",
        options(seeder, selection=Selection.NEW, known_ids=frozenset(known)),
    )
    assert len(rest.archives) == 3 and not known & {f.entry.archive_id for f in rest.archives}
    assert write_jsonl(tmp_path / "m.jsonl", rest.messages(), community_id=str(COMMUNITY)) == 180
    assert write_sqlite(tmp_path / "m.db", rest.messages(), community_id=str(COMMUNITY)) == 180


def test_fetch_from_signed_magnet_message_and_refuse_forgery(store, seeder, tmp_path: Path) -> None:
    _, report = store
    message = build_magnet_message(KEY, report.magnet_uri, 5, pubsub_topic="/waku/2/rs/16/64")
    link, result = fetch_from_magnet_message(
        message, COMMUNITY, tmp_path, options(seeder, selection=Selection.LATEST)
    )
    assert link.info_hash == result.info_hash == report.info_hash
    # a forger who knows the (public) chat key, signing with its own key
    forger = private_key_from_bytes(bytes.fromhex("66" * 32))
    chat_id = COMMUNITY.magnetlinks_chat_id
    inner = status_archive_pb2.CommunityMessageArchiveLink(
        clock=10, archive_link=report.magnet_uri
    ).SerializeToString()
    forged = waku_message_pb2.WakuMessage(
        payload=encode_payload(
            wrap_application_message(inner, forger),
            sign_with=forger,
            symmetric_key=symmetric_key_for_chat(chat_id),
        ),
        content_topic=content_topic_of_chat(chat_id),
        version=1,
    )
    with pytest.raises(ForgedMagnetMessage):
        fetch_from_magnet_message(forged, COMMUNITY, tmp_path / "forged", options(seeder))
    assert not (tmp_path / "forged").exists()  # refused before any download


def test_metadata_timeout_with_retry(tmp_path: Path, store) -> None:
    _, report = store
    started = time.monotonic()
    with pytest.raises(FetchTimeout, match=r"2 x 1 s"):
        fetch_archives(
            report.magnet_uri,
            COMMUNITY,
            tmp_path,
            # a peer that does not answer: with none at all the fetch is refused at once
            FetchOptions(session=LOOPBACK, metadata_timeout=0.6, metadata_retries=1,
                         peers=("127.0.0.1:1",)),
        )  # fmt: skip
    assert time.monotonic() - started < 10


def test_seeder_replaces_torrent_on_new_build(tmp_path: Path) -> None:
    archives, torrents = tmp_path / "archives", tmp_path / "torrents"
    messages = make_messages(3)
    old = build_community_archives(
        archives, torrents, COMMUNITY, TOPICS,
        [m for m in messages if m.timestamp < T0 + 2 * W], now=T0 + 2 * W,
    )  # fmt: skip
    with Seeder(archives, LOOPBACK) as seeding:
        seeding.refresh(torrents)
        assert seeding.seeding() == {str(COMMUNITY): old.info_hash}
        new = build_community_archives(
            archives, torrents, COMMUNITY, TOPICS, messages, now=T0 + 3 * W
        )
        seeding.refresh(torrents)
        assert seeding.seeding() == {str(COMMUNITY): new.info_hash}
        assert len(seeding.stats()) == 1 and seeding.stats()[0].state == "seeding"
        result = fetch_archives(
            new.magnet_uri,
            COMMUNITY,
            tmp_path / "member",
            options(seeding, selection=Selection.LATEST),
        )
        assert result.archives[0].entry.window_from == T0 + 2 * W


def test_seeder_refuses_files_that_do_not_match(tmp_path: Path, store) -> None:
    root, report = store
    copy = tmp_path / "archives"
    shutil.copytree(root / "archives", copy)
    data = CommunityLayout.of(copy, COMMUNITY).data
    raw = bytearray(data.read_bytes())
    raw[1000] ^= 0xFF
    data.write_bytes(bytes(raw))
    with Seeder(copy, LOOPBACK) as seeding, pytest.raises(SeederError, match="do not match"):
        seeding.seed(report.torrent_path, wait=20)
