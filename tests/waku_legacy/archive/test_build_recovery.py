"""A build killed at any step: data, index, torrent and magnet-link message are made to agree
again before anything is seeded or published (issue 10, item 3).

The kill is the build's own fault hook raising at step k (every write step has one): what is on
disk then is exactly what a kill -9 at that point leaves (files are written in order, and a
replaced file is renamed into place whole).
"""

from __future__ import annotations

import contextlib
import json
import shutil
import sqlite3
import uuid
from pathlib import Path

import aiohttp
import pytest

from tests.helpers import store_channel_messages, wait_until
from tests.waku_legacy.archive.test_layout import (
    COMMUNITY,
    KEY,
    T0,
    TOPICS,
    InjectedFault,
    W,
    make_messages,
)
from waku_legacy.archive import (
    ArchiveCorrupted,
    build_community_archives,
    load_torrent,
    verify_magnet_message,
    verify_store,
)
from waku_legacy.archive.layout import CommunityLayout
from waku_legacy.archive.magnet import magnet_message_from_json

DAY = 86_400


def _build(root: Path, messages, now: int, **kw: object):
    return build_community_archives(
        root / "archives", root / "torrents", COMMUNITY, TOPICS, messages, now=now,
        community_key=KEY, fsync=False, **kw,
    )  # fmt: skip


def _kill_at(k: int):
    calls = 0

    def fault(name: str) -> None:
        nonlocal calls
        calls += 1
        if calls - 1 == k:
            raise InjectedFault(name)

    return fault


def _assert_consistent(root: Path) -> str:
    """The torrent describes the files; both magnet-link files carry its link. Returns it."""
    layout = CommunityLayout.of(root / "archives", COMMUNITY, root / "torrents")
    report = verify_store(root / "archives", COMMUNITY, torrent_dir=root / "torrents")
    assert report.torrent_checked
    uri = load_torrent(layout.torrent).magnet_uri
    assert verify_magnet_message(layout.magnet_message_pb.read_bytes(), COMMUNITY).magnet_uri == uri
    body = json.loads(layout.magnet_message_json.read_bytes())["body"]
    assert verify_magnet_message(magnet_message_from_json(body), COMMUNITY).magnet_uri == uri
    return uri


def test_finish_interrupted_build_after_a_kill_at_every_step(tmp_path: Path) -> None:
    from waku_legacy.archive import finish_interrupted_build

    messages = make_messages(3, per_week=10)
    base = tmp_path / "base"
    _build(base, [m for m in messages if m.timestamp < T0 + W], now=T0 + W, clock_ms=1)
    old_hash = load_torrent(base / "torrents" / f"{COMMUNITY}.torrent").info_hash

    steps: list[str] = []
    recording = tmp_path / "recording"
    shutil.copytree(base, recording)
    _build(recording, messages, now=T0 + 3 * W, clock_ms=2, fault=steps.append)
    assert "index:rename" in steps and "torrent:rename" in steps and "magnet-json:done" in steps

    for k, step in enumerate(steps):
        run = tmp_path / f"run{k}"
        shutil.copytree(base, run)
        with pytest.raises(InjectedFault):
            _build(run, messages, now=T0 + 3 * W, clock_ms=2, fault=_kill_at(k))
        report = finish_interrupted_build(
            run / "archives", run / "torrents", COMMUNITY, community_key=KEY, clock_ms=3,
            fsync=False,
        )  # fmt: skip
        uri = _assert_consistent(run)
        index_replaced = steps.index("index:rename") < k
        if index_replaced and k <= steps.index("torrent:rename"):
            # the case of the issue: a new index beside the old torrent
            assert report.torrent_rebuilt and old_hash not in uri, step
        # a second pass finds nothing to do
        again = finish_interrupted_build(
            run / "archives", run / "torrents", COMMUNITY, community_key=KEY, clock_ms=4,
            fsync=False,
        )  # fmt: skip
        assert not again.changed, (step, again)
        shutil.rmtree(run)


def test_finish_refuses_what_it_cannot_finish(tmp_path: Path) -> None:
    from waku_legacy.archive import finish_interrupted_build

    _build(tmp_path, make_messages(2, per_week=10), now=T0 + 2 * W, clock_ms=1)
    layout = CommunityLayout.of(tmp_path / "archives", COMMUNITY, tmp_path / "torrents")
    with open(layout.data, "r+b") as handle:  # lost bytes: the index accounts for more
        handle.truncate(layout.data.stat().st_size - 10)
    with pytest.raises(ArchiveCorrupted, match="truncated"):
        finish_interrupted_build(tmp_path / "archives", tmp_path / "torrents", COMMUNITY)


# -- the bridge: restart after the kill ---------------------------------------------------------


def _bridge_setup(tmp_path: Path):
    from tests.bridge.support import bridge_config
    from waku_legacy.crypto.secp256k1 import private_key_from_bytes
    from waku_legacy.identity.topics import CommunityId

    key = private_key_from_bytes(bytes.fromhex("3d" * 32))
    community = CommunityId(key.public_key.format(compressed=True))
    channel = str(uuid.UUID(int=7))
    (tmp_path / "c.key").write_text(key.secret.hex())
    url = f"sqlite:///{tmp_path}/store.sqlite3"
    return key, community, channel, url, bridge_config


def _bridge_build(config, key, url: str, now: int, fault=None):
    """What CommunityArchiver._build does, with the build's fault hook."""
    from waku_legacy.archive.data_files import read_index, recorded_last_end
    from waku_legacy.bridge.archiver import collect_archive_messages
    from waku_legacy.store import open_store

    archive, community = config.archive, config.communities[0]
    layout = CommunityLayout.of(archive.archive_dir, community.id, archive.torrent_dir)
    last_end = recorded_last_end(layout, read_index(archive.archive_dir, community.id))
    with open_store(url) as store:
        messages, _ = collect_archive_messages(store, community, last_end, now)
    extra = {} if fault is None else {"fault": fault}
    return build_community_archives(
        archive.archive_dir, archive.torrent_dir, community.id,
        list(community.channel_topics()), messages, now=now, community_key=key,
        pubsub_topic=community.pubsub_topic, clock_ms=now * 1000, fsync=False, **extra,
    )  # fmt: skip


@pytest.mark.network
@pytest.mark.torrent
async def test_restarted_bridge_seeds_and_publishes_a_matching_torrent_after_a_kill(tmp_path):
    from tests.bridge.support import FakeNwaku
    from waku_legacy.bridge.clock import ManualClock
    from waku_legacy.bridge.service import BridgeService

    key, community, channel, url, bridge_config = _bridge_setup(tmp_path)
    pubsub = "/waku/2/rs/16/201"
    t0 = 1_750_000_000
    store_channel_messages(url, community, channel, t0 - 2 * DAY, 4, pubsub)
    store_channel_messages(url, community, channel, t0 + 2 * DAY, 3, pubsub)
    nwaku = await FakeNwaku().start()
    config = bridge_config(
        tmp_path, url, relay={"url": nwaku.url},
        archive={"archive_dir": str(tmp_path / "a"), "torrent_dir": str(tmp_path / "t"),
                 "seed_listen": "127.0.0.1:0", "trackers": False, "utp": False},
        community=[{"id": str(community), "channels": [channel], "shard": 201,
                    "key_file": "c.key"}],
    )  # fmt: skip
    layout = CommunityLayout.of(config.archive.archive_dir, community, config.archive.torrent_dir)
    now = t0 + 8 * DAY  # the second week's run
    # the state before the run that gets killed: last week's archive, torrent, message
    _bridge_build(config, key, url, t0)
    before = tmp_path / "before"
    shutil.copytree(tmp_path / "a", before / "a")
    shutil.copytree(tmp_path / "t", before / "t")
    steps: list[str] = []
    _bridge_build(config, key, url, now, fault=steps.append)
    assert "index:rename" in steps and "torrent:rename" in steps

    try:
        for k, step in enumerate(steps):
            for name in ("a", "t"):
                shutil.rmtree(tmp_path / name)
                shutil.copytree(before / name, tmp_path / name)
            # The state before the run includes the store's record of what was published
            # (nothing yet): the previous iteration's restart published this same link, and a
            # restart does not re-send a link it already sent (issue 38).
            with contextlib.closing(sqlite3.connect(tmp_path / "store.sqlite3")) as db, db:
                db.execute("DROP TABLE IF EXISTS link_publication")
            with pytest.raises(InjectedFault):
                _bridge_build(config, key, url, now, fault=_kill_at(k))
            published = len(nwaku.published)
            service = BridgeService(config, clock=ManualClock(now))
            await service.start()
            try:
                archiver = service.archive.archivers[str(community)]

                def seeding(service: BridgeService = service) -> list:
                    return [s for s in service.seeder.stats() if "seeding" in s.state]

                def done(published: int = published) -> bool:
                    return len(nwaku.published) > published and bool(seeding())

                await wait_until(done, what=step)
                # what is seeded and published is the torrent of the files on disk
                verify_store(layout.archive_dir, community, torrent_dir=layout.torrent_dir)
                torrent = load_torrent(layout.torrent)
                assert [s.info_hash for s in seeding()] == [torrent.info_hash], step
                _, body = nwaku.published[-1]
                link = verify_magnet_message(magnet_message_from_json(body), community)
                assert link.magnet_uri == torrent.magnet_uri, step
                assert archiver.degraded is None and archiver.last_end() >= t0 + 7 * DAY, step
                node, _ = service.health()
                assert node == "Ready"
            finally:
                await service.stop()
    finally:
        await nwaku.stop()


@pytest.mark.network
@pytest.mark.torrent
async def test_health_is_degraded_while_the_build_cannot_be_finished(tmp_path):
    from waku_legacy.bridge.clock import ManualClock
    from waku_legacy.bridge.service import BridgeService

    key, community, channel, url, bridge_config = _bridge_setup(tmp_path)
    t0 = 1_750_000_000
    store_channel_messages(url, community, channel, t0 - 2 * DAY, 4, "/waku/2/rs/16/202")
    config = bridge_config(
        tmp_path, url,
        archive={"archive_dir": str(tmp_path / "a"), "torrent_dir": str(tmp_path / "t"),
                 "seed_listen": "127.0.0.1:0", "trackers": False, "utp": False},
        community=[{"id": str(community), "channels": [channel], "shard": 202,
                    "key_file": "c.key"}],
    )  # fmt: skip
    _bridge_build(config, key, url, t0)
    layout = CommunityLayout.of(config.archive.archive_dir, community, config.archive.torrent_dir)
    with open(layout.data, "r+b") as handle:  # bytes the index accounts for are gone
        handle.truncate(100)
    service = BridgeService(config, clock=ManualClock(t0 + DAY))
    await service.start()
    try:
        archiver = service.archive.archivers[str(community)]
        await wait_until(lambda: archiver.degraded is not None, what="degraded")
        assert service.seeder.stats() == []  # the torrent that does not match is not seeded
        async with (
            aiohttp.ClientSession() as http,
            http.get(f"http://127.0.0.1:{service.rest_port}/health") as response,
        ):
            doc = await response.json()
        assert response.status == 503 and doc["nodeHealth"] == "Degraded"
        archives = next(p for p in doc["protocolsHealth"] if "Archives" in p)
        assert archives["Archives"] == "NOT_READY"  # nwaku's shape: status, and why in desc
        assert archives["desc"].startswith("Degraded") and "truncated" in archives["desc"]
    finally:
        await service.stop()


@pytest.mark.torrent
def test_seed_command_finishes_the_interrupted_build(tmp_path: Path, capsys) -> None:
    """`waku-legacy seed` over a store killed between its index and its torrent: the torrent
    is rebuilt from the files and seeded. (The old torrent still verifies against a prefix
    of the new files, so libtorrent alone would seed it: the stale link stays current.)"""
    from waku_legacy.cli import main

    messages = make_messages(2, per_week=10)
    _build(tmp_path, [m for m in messages if m.timestamp < T0 + W], now=T0 + W, clock_ms=1)
    steps: list[str] = []
    probe = tmp_path / "probe"
    shutil.copytree(tmp_path, probe)
    _build(probe, messages, now=T0 + 2 * W, clock_ms=2, fault=steps.append)
    with pytest.raises(InjectedFault):  # killed after the index, before the torrent
        _build(tmp_path, messages, now=T0 + 2 * W, clock_ms=2,
               fault=_kill_at(steps.index("torrent:rename")))  # fmt: skip
    argv = ["seed", "--archive-dir", str(tmp_path / "archives"), "--torrent-dir",
            str(tmp_path / "torrents"), "--once", "--json", "--listen", "127.0.0.1:0",
            "--no-trackers", "--no-utp"]  # fmt: skip
    code = main(argv)
    out, err = capsys.readouterr()
    assert code == 0, err
    assert '"event": "repaired"' in err and '"torrent_rebuilt": true' in err
    seeding = json.loads(out.splitlines()[-1])["torrents"]
    report = verify_store(tmp_path / "archives", COMMUNITY, torrent_dir=tmp_path / "torrents")
    assert [(t["infoHash"], t["state"]) for t in seeding] == [(report.info_hash, "seeding")]

    # a store that cannot be repaired: one line per torrent on stderr, exit 2 with --once
    data = tmp_path / "archives" / str(COMMUNITY) / "data"
    with open(data, "r+b") as handle:
        handle.truncate(100)
    assert main(argv) == 2
    _, err = capsys.readouterr()
    assert '"event": "cannot-seed"' in err and "truncated" in err and "not seeded" in err
