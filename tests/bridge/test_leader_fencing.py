"""Bridges sharing a PostgreSQL store: one archiver at a time, fenced, and the link schedule
kept in the store across handovers (issue 38; bridge.leader, waku_legacy.store.role).

Every test runs real ``waku-legacy serve`` processes on one PostgreSQL database with one
shared ``archive_dir``/``torrent_dir`` (as the README recommends), each bridge publishing to
its own recording relay, so that who sent what, and when, is seen from outside.
"""

from __future__ import annotations

import asyncio
import json
import signal
import subprocess
import sys
import threading
import time
import urllib.request
import uuid
from pathlib import Path
from typing import Any

import psycopg
import pytest

from tests.bridge.support import FakeNwaku
from tests.bridge.test_workers import free_port, get, metric, wait_for
from tests.helpers import fresh_database, store_channel_messages
from waku_legacy.crypto.keccak import keccak256
from waku_legacy.crypto.secp256k1 import private_key_from_bytes
from waku_legacy.identity.topics import CommunityId

PUBSUB = "/waku/2/rs/16/200"
DAY = 86_400
TOKEN = "fencing-test-token-0123456789"
LOCK_HOLDER = (
    "SELECT a.pid FROM pg_stat_activity a JOIN pg_locks l ON l.pid = a.pid "
    "WHERE l.locktype = 'advisory' AND l.granted AND a.datname = current_database() "
    "AND a.application_name = 'waku-legacy bridge leader'"
)


def content_topic(chat_id: str) -> str:
    """status-go's content topic of a chat, written out: the first 4 bytes of
    keccak256(chat id), as ``/waku/1/0x<hex>/rfc26``."""
    return f"/waku/1/0x{keccak256(chat_id.encode())[:4].hex()}/rfc26"


class RecordingNwaku(FakeNwaku):
    """FakeNwaku that also notes when each publish arrived."""

    def __init__(self) -> None:
        super().__init__(store_relayed=False)
        self.times: list[float] = []

    async def _relay(self, request: Any) -> Any:
        response = await super()._relay(request)
        if response.status == 200:
            self.times.append(time.time())
        return response


class Relay:
    """A recording nwaku relay on a thread of its own."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.node = asyncio.run_coroutine_threadsafe(RecordingNwaku().start(), self.loop).result(10)
        assert isinstance(self.node, RecordingNwaku)
        self.url = self.node.url

    def sent(self, topic: str) -> list[tuple[float, dict[str, Any]]]:
        return [
            (at, body)
            for at, (_pubsub, body) in zip(self.node.times, self.node.published, strict=True)
            if body["contentTopic"] == topic
        ]

    def close(self) -> None:
        asyncio.run_coroutine_threadsafe(self.node.stop(), self.loop).result(10)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(5)


class Bridge:
    """One ``serve`` process on the shared store and folders, with its own relay."""

    def __init__(self, root: Path, name: str, dsn: str, community: str, channel: str,
                 *, interval: float, republish: str, second: str) -> None:  # fmt: skip
        self.name = name
        self.community = community
        self.relay = Relay()
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        folder = root / name
        folder.mkdir()
        config = folder / "bridge.toml"
        config.write_text(f"""
[server]
listen = "127.0.0.1:{self.port}"
workers = 1
shutdown_timeout = "5s"
[store]
url = "{dsn}"
leader_interval = "{interval:g}s"
[relay]
url = "{self.relay.url}"
retries = 0
[archive]
archive_dir = "{root / "shared" / "archives"}"
torrent_dir = "{root / "shared" / "torrents"}"
seed_listen = "127.0.0.1:0"
trackers = false
utp = false
republish_interval = "{republish}"
second_link_delay = "{second}"
[[community]]
id = "{community}"
channels = ["{channel}"]
shard = 200
key_file = "{root / "c.key"}"
[admin]
token = "{TOKEN}"
[logging]
level = "info"
""")
        self.log = folder / "bridge.log"
        with open(self.log, "wb") as log:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "waku_legacy.cli", "serve", "--config", str(config)],
                stdout=subprocess.DEVNULL, stderr=log,
            )  # fmt: skip

    def leader(self) -> bool | None:
        if self.process.poll() is not None:
            return None
        try:
            status, _, body = get(self.base, "/debug/v1/info", timeout=3)
        except OSError:
            return None
        return bool(json.loads(body)["leader"]) if status == 200 else None

    def communities(self) -> list[dict[str, Any]]:
        request = urllib.request.Request(
            self.base + "/admin/v1/communities", headers={"Authorization": f"Bearer {TOKEN}"}
        )
        with urllib.request.urlopen(request, timeout=5) as response:
            body = json.loads(response.read())
        return list(body["communities"] if isinstance(body, dict) else body)

    def metric(self, prefix: str) -> float:
        return metric(get(self.base, "/metrics", timeout=3)[2].decode(), prefix)

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(5)
        self.relay.close()


def _community(tmp_path: Path, seed: str) -> tuple[Any, str, str]:
    key = private_key_from_bytes(bytes.fromhex(seed * 32))
    community = str(CommunityId(key.public_key.format(compressed=True)))
    (tmp_path / "c.key").write_text(key.secret.hex())
    return key, community, str(uuid.UUID(int=int(seed, 16)))


def _leaders(bridges: list[Bridge]) -> list[Bridge]:
    return [b for b in bridges if b.leader()]


def _terminate_holder(dsn: str) -> int:
    """pg_terminate_backend of the leader lock's session; its pid (0: nobody held it)."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        rows = conn.execute(LOCK_HOLDER).fetchall()
        for (pid,) in rows:
            conn.execute("SELECT pg_terminate_backend(%s)", (pid,))
    return rows[0][0] if rows else 0


def _lock_waiters(dsn: str, table: str) -> int:
    with psycopg.connect(dsn, autocommit=True) as conn:
        row = conn.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
            "AND wait_event_type = 'Lock' AND query ILIKE %s",
            (f"%{table}%",),
        ).fetchone()
    return int(row[0]) if row else 0


class LeaderWatch:
    """Samples every bridge's ``leader`` flag all along; records any sample with two."""

    def __init__(self, bridges: list[Bridge]) -> None:
        self.bridges = bridges
        self.both: list[tuple[float, list[str]]] = []
        self.samples = 0
        self._stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while not self._stop.wait(0.1):
            leading = [b.name for b in self.bridges if b.leader()]
            self.samples += 1
            if len(leading) > 1:
                self.both.append((time.time(), leading))

    def stop(self) -> None:
        self._stop.set()
        self.thread.join(10)


@pytest.mark.postgres
@pytest.mark.network
@pytest.mark.torrent
def test_a_holder_cut_off_during_an_archive_run_writes_nothing(
    postgres_dsn: str, tmp_path: Path
) -> None:
    """pg_terminate_backend of the holder's lock session while its archive run reads the
    store: the old holder's run, released afterwards, must not write into the shared folder;
    the archives are byte-identical to one run's."""
    from waku_legacy.archive import CommunityLayout
    from waku_legacy.archive.verify import verify_store
    from waku_legacy.bridge.archiver import build_from_store
    from waku_legacy.bridge.config import parse_config
    from waku_legacy.store import open_store

    key, community, channel = _community(tmp_path, "5d")
    with fresh_database(postgres_dsn, "fence_") as dsn:
        store_channel_messages(
            dsn, CommunityId.parse(community), channel, int(time.time()) - 3 * DAY, 50, PUBSUB
        )
        # Each archive run reads the v1 envelopes of the messages it archives (after reading
        # the index, before writing anything): holding this table keeps a run mid-read.
        blocker = psycopg.connect(dsn)
        blocker.execute("LOCK TABLE v1_envelopes IN ACCESS EXCLUSIVE MODE")
        bridges: list[Bridge] = []
        try:
            old = Bridge(tmp_path, "a", dsn, community, channel, interval=2,
                         republish="300s", second="20s")  # fmt: skip
            bridges.append(old)
            wait_for(old.leader, "the first bridge to lead", 30)
            wait_for(lambda: _lock_waiters(dsn, "v1_envelopes") >= 1, "its run to read", 30)
            new = Bridge(tmp_path, "b", dsn, community, channel, interval=2,
                         republish="300s", second="20s")  # fmt: skip
            bridges.append(new)
            wait_for(lambda: new.leader() is False, "the second bridge to stand by", 30)
            assert _terminate_holder(dsn)
            wait_for(new.leader, "the second bridge to take over", 20)
            wait_for(lambda: _lock_waiters(dsn, "v1_envelopes") >= 2, "its run to read", 30)
            wait_for(lambda: old.leader() is False, "the old holder to step down", 20)
        finally:
            blocker.rollback()  # both runs go on from here
            blocker.close()
        try:
            wait_for(lambda: new.metric("waku_legacy_archive_runs_total{") >= 1,
                     "the new holder's run", 30)  # fmt: skip
            time.sleep(3)  # whatever the old holder's run would still write
            run = new.communities()[0]["lastRun"]
            assert run["error"] is None, run
        finally:
            for bridge in bridges:
                bridge.stop()
        old_log = old.log.read_text()

        # the same run alone, into a folder of its own
        alone = tmp_path / "alone"
        config = parse_config(
            {"store": {"url": dsn},
             "archive": {"archive_dir": str(alone / "archives"),
                         "torrent_dir": str(alone / "torrents"), "trackers": False},
             "community": [{"id": community, "channels": [channel], "shard": 200,
                            "key_file": str(tmp_path / "c.key")}]},
            base_dir=tmp_path, origin="alone.toml",
        )  # fmt: skip
        with open_store(dsn) as store:
            build_from_store(store, config.communities[0], config.archive,
                             now=int(run["started"]), clock_ms=1, key=key)  # fmt: skip
    shared = CommunityLayout.of(tmp_path / "shared" / "archives", community,
                                tmp_path / "shared" / "torrents")  # fmt: skip
    single = CommunityLayout.of(alone / "archives", community, alone / "torrents")
    for part in ("data", "index", "torrent"):
        got, want = getattr(shared, part), getattr(single, part)
        sizes = f"{got.stat().st_size} bytes, not {want.stat().st_size}"
        assert got.read_bytes() == want.read_bytes(), f"{part} differs from one run's: {sizes}"
    # and the archive audit of the shared folder finds nothing wrong (it raises otherwise)
    report = verify_store(tmp_path / "shared" / "archives", community,
                          torrent_dir=tmp_path / "shared" / "torrents")  # fmt: skip
    assert report.archives >= 1 and report.digests_checked == report.archives
    assert "archive run done" not in old_log
    assert "archive write refused" in old_log and "fencing token" in old_log  # and why


def _publications(bridges: list[Bridge], topic: str) -> list[tuple[float, str, int]]:
    """(arrival, bridge, link clock) of every signed link message sent on ``topic``."""
    from waku_legacy.archive.magnet import magnet_message_from_json, verify_magnet_message

    out = []
    for bridge in bridges:
        for at, body in bridge.relay.sent(topic):
            community = CommunityId.parse(bridge.community)
            link = verify_magnet_message(magnet_message_from_json(body), community)
            out.append((at, bridge.name, link.clock))
    return sorted(out)


@pytest.mark.postgres
@pytest.mark.network
@pytest.mark.torrent
def test_kill_and_sigterm_handovers_keep_the_link_schedule(
    postgres_dsn: str, tmp_path: Path
) -> None:
    """Three bridges; the leader publishes the link, is killed (SIGKILL), the next one is
    stopped (SIGTERM): the -memberUpdate copy went out once, and the -magnetlinks copy goes
    out at its due time, second_link_delay after the first, from the third bridge."""
    _key, community, channel = _community(tmp_path, "6e")
    member_update = content_topic(f"{community}-memberUpdate")
    magnetlinks = content_topic(f"{community}-magnetlinks")
    delay, interval = 20.0, 2.0
    with fresh_database(postgres_dsn, "fence_") as dsn:
        store_channel_messages(
            dsn, CommunityId.parse(community), channel, int(time.time()) - 3 * DAY, 5, PUBSUB
        )
        bridges: list[Bridge] = []
        try:
            bridges = [
                Bridge(tmp_path, name, dsn, community, channel, interval=interval,
                       republish="300s", second=f"{delay:g}s")
                for name in ("a", "b", "c")
            ]  # fmt: skip
            watch = LeaderWatch(bridges)
            first = wait_for(lambda: _publications(bridges, member_update), "the link", 60)[0]
            holder = wait_for(lambda: _leaders(bridges), "a leader")[0]
            assert holder.name == first[1]
            holder.process.send_signal(signal.SIGKILL)
            killed = time.monotonic()
            second = wait_for(lambda: _leaders(bridges), "a leader after SIGKILL", 20)[0]
            after_kill = time.monotonic() - killed
            time.sleep(1)
            second.process.send_signal(signal.SIGTERM)
            stopped = time.monotonic()
            third = wait_for(
                lambda: [b for b in _leaders(bridges) if b is not second],
                "a leader after SIGTERM", 20,
            )[0]  # fmt: skip
            after_term = time.monotonic() - stopped
            wait_for(lambda: _publications(bridges, magnetlinks), "the second copy",
                     first[0] + delay + 15 - time.time())  # fmt: skip
            time.sleep(2)
            watch.stop()
        finally:
            for bridge in bridges:
                bridge.stop()
    updates = _publications(bridges, member_update)
    copies = _publications(bridges, magnetlinks)
    assert len(updates) == 1, f"the link was re-sent on takeover: {updates}"
    assert len(copies) == 1, copies
    at, sender, clock = copies[0]
    assert clock == first[2]  # the same message's second copy
    assert sender == third.name
    assert first[0] + delay - 0.5 <= at <= first[0] + delay + 2 * interval + 2, at - first[0]
    assert watch.both == [], watch.both
    print(f"takeover after SIGKILL {after_kill:.2f} s, after SIGTERM {after_term:.2f} s; "
          f"second copy {at - first[0]:.2f} s after the first (due {delay:g} s)")  # fmt: skip


@pytest.mark.postgres
@pytest.mark.network
@pytest.mark.torrent
def test_a_flapping_connection_for_a_minute(postgres_dsn: str, tmp_path: Path) -> None:
    """The holder's lock session is terminated every 6 s for a minute: one leader at a time
    in every sample; the link sent at start and once more a republish_interval (60 s) later,
    never in between; each one's second copy 30 s after it, with its clock; the link message
    files carry the last clock published."""
    from waku_legacy.archive import CommunityLayout
    from waku_legacy.archive.build import written_link_evidence

    _key, community, channel = _community(tmp_path, "7f")
    member_update = content_topic(f"{community}-memberUpdate")
    magnetlinks = content_topic(f"{community}-magnetlinks")
    republish, delay, interval = 60.0, 30.0, 1.0
    # a cut just before a copy is due may delay it by one takeover (a try and the wait)
    late = 2 * interval + 3
    with fresh_database(postgres_dsn, "fence_") as dsn:
        store_channel_messages(
            dsn, CommunityId.parse(community), channel, int(time.time()) - 3 * DAY, 5, PUBSUB
        )
        bridges: list[Bridge] = []
        try:
            bridges = [
                Bridge(tmp_path, name, dsn, community, channel, interval=interval,
                       republish=f"{republish:g}s", second=f"{delay:g}s")
                for name in ("a", "b", "c")
            ]  # fmt: skip
            watch = LeaderWatch(bridges)
            first = wait_for(lambda: _publications(bridges, member_update), "the link", 60)[0]
            cuts = 0
            while time.time() + 6 < first[0] + republish:
                time.sleep(6)
                cuts += bool(_terminate_holder(dsn))
            wait_for(lambda: len(_publications(bridges, member_update)) >= 2, "the republish",
                     max(first[0] + republish + late - time.time(), 1))  # fmt: skip
            time.sleep(1)
            watch.stop()
        finally:
            for bridge in bridges:
                bridge.stop()
    updates = _publications(bridges, member_update)
    copies = _publications(bridges, magnetlinks)
    assert cuts >= 8
    assert len(updates) == 2, f"the link was re-sent on takeover: {updates}"
    assert first[0] + republish - 0.5 <= updates[1][0] <= first[0] + republish + late
    assert updates[1][2] > first[2]  # a fresh clock, above the last one
    assert len(copies) == 1 and copies[0][2] == first[2], copies
    assert first[0] + delay - 0.5 <= copies[0][0] <= first[0] + delay + late
    assert watch.both == [], watch.both
    assert watch.samples > 100
    layout = CommunityLayout.of(tmp_path / "shared" / "archives", community,
                                tmp_path / "shared" / "torrents")  # fmt: skip
    assert written_link_evidence(layout).link_clock == updates[1][2]
    print(f"{cuts} cuts in {republish:g} s; second copy {copies[0][0] - first[0]:.2f} s and "
          f"republish {updates[1][0] - first[0]:.2f} s after the first")  # fmt: skip


@pytest.mark.network
@pytest.mark.torrent
def test_a_restart_after_a_crash_continues_the_link_schedule(tmp_path: Path) -> None:
    """SQLite, one bridge: killed (SIGKILL) after it published the link, started again: it
    sends nothing before republish_interval and the second copy at its original due time."""
    _key, community, channel = _community(tmp_path, "4c")
    member_update = content_topic(f"{community}-memberUpdate")
    magnetlinks = content_topic(f"{community}-magnetlinks")
    delay = 12.0
    url = f"sqlite:///{tmp_path / 'store.sqlite3'}"
    store_channel_messages(
        url, CommunityId.parse(community), channel, int(time.time()) - 3 * DAY, 5, PUBSUB
    )
    bridges: list[Bridge] = []
    try:
        bridges.append(Bridge(tmp_path, "a", url, community, channel, interval=15,
                              republish="300s", second=f"{delay:g}s"))  # fmt: skip
        first = wait_for(lambda: _publications(bridges, member_update), "the link", 60)[0]
        bridges[0].process.send_signal(signal.SIGKILL)
        bridges[0].process.wait(10)
        bridges.append(Bridge(tmp_path, "b", url, community, channel, interval=15,
                              republish="300s", second=f"{delay:g}s"))  # fmt: skip
        wait_for(lambda: _publications(bridges, magnetlinks), "the second copy",
                 first[0] + delay + 15 - time.time())  # fmt: skip
        time.sleep(1)
    finally:
        for bridge in bridges:
            bridge.stop()
    updates = _publications(bridges, member_update)
    copies = _publications(bridges, magnetlinks)
    assert len(updates) == 1, f"the link was re-sent after the restart: {updates}"
    assert len(copies) == 1 and copies[0][1:] == ("b", first[2]), copies
    assert first[0] + delay - 0.5 <= copies[0][0] <= first[0] + delay + 3, copies[0][0] - first[0]
    print(f"second copy {copies[0][0] - first[0]:.2f} s after the first (due {delay:g} s)")
