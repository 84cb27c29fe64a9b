"""Two bridge instances on one PostgreSQL store: exactly one archives (bridge.leader).

Both are real ``waku-legacy serve`` processes with their own archive folders. The first to
take the advisory lock archives and seeds; the other serves reads and waits. Killing the
holder outright (SIGKILL: no goodbye) ends its session, and the other takes the lock at its
next try, within ``[store] leader_interval``, waits one more interval (the fencing wait:
the old holder never handed the role back) and then archives.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
from pathlib import Path

import pytest

from tests.bridge.test_workers import free_port, get, metric, wait_for
from tests.helpers import fresh_database, store_channel_messages
from waku_legacy.bridge.leader import lock_key
from waku_legacy.crypto.secp256k1 import private_key_from_bytes
from waku_legacy.identity.topics import CommunityId

INTERVAL = 1.0  # [store] leader_interval in this test
PUBSUB = "/waku/2/rs/16/200"
DAY = 86_400
TOKEN = "leader-test-token-0123456789"


class Instance:
    def __init__(self, root: Path, name: str, dsn: str, community: str, channel: str) -> None:
        folder = root / name
        folder.mkdir()
        (folder / "c.key").write_text((root / "c.key").read_text())
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.archive_dir = folder / "archives"
        config = folder / "bridge.toml"
        config.write_text(f"""
[server]
listen = "127.0.0.1:{self.port}"
workers = 1
shutdown_timeout = "5s"
[store]
url = "{dsn}"
leader_interval = "{INTERVAL:g}s"
[archive]
archive_dir = "archives"
torrent_dir = "torrents"
seed_listen = "127.0.0.1:0"
trackers = false
utp = false
[[community]]
id = "{community}"
channels = ["{channel}"]
shard = 200
key_file = "c.key"
[admin]
token = "{TOKEN}"
[logging]
level = "warning"
""")
        self.process = subprocess.Popen(
            [sys.executable, "-m", "waku_legacy.cli", "serve", "--config", str(config)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )

    def leader(self) -> bool | None:
        status, _, body = get(self.base, "/debug/v1/info", timeout=3)
        return bool(json.loads(body)["leader"]) if status == 200 else None

    def metrics(self) -> str:
        return get(self.base, "/metrics", timeout=3)[2].decode()

    def archive_runs(self) -> float:
        text = self.metrics()
        return sum(
            float(line.rsplit(" ", 1)[1])
            for line in text.splitlines()
            if line.startswith("waku_legacy_archive_runs_total{")
        )

    def archived(self) -> list[str]:
        return (
            sorted(p.name for p in self.archive_dir.glob("*")) if self.archive_dir.exists() else []
        )

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(5)


def test_lock_key_is_fixed() -> None:
    # the first 8 bytes of SHA-256("waku-legacy bridge singletons"), as a signed bigint
    import hashlib

    digest = hashlib.sha256(b"waku-legacy bridge singletons").digest()
    assert lock_key() == int.from_bytes(digest[:8], "big", signed=True)
    assert -(2**63) <= lock_key() < 2**63


@pytest.mark.postgres
@pytest.mark.network
@pytest.mark.torrent
def test_one_instance_archives_and_the_other_takes_over_when_it_is_killed(
    postgres_dsn: str, tmp_path: Path
) -> None:
    key = private_key_from_bytes(bytes.fromhex("5d" * 32))
    community = str(CommunityId(key.public_key.format(compressed=True)))
    channel = str(uuid.UUID(int=7))
    (tmp_path / "c.key").write_text(key.secret.hex())
    with fresh_database(postgres_dsn, "leader_") as dsn:
        store_channel_messages(
            dsn, CommunityId.parse(community), channel, int(time.time()) - 3 * DAY, 5, PUBSUB
        )
        instances: list[Instance] = []
        try:
            instances = [Instance(tmp_path, n, dsn, community, channel) for n in ("a", "b")]
            wait_for(lambda: all(i.leader() is not None for i in instances), "both to answer")
            holder = wait_for(lambda: [i for i in instances if i.leader()], "one instance to lead")[
                0
            ]
            other = instances[1 - instances.index(holder)]
            wait_for(lambda: holder.archive_runs() >= 1, "the holder's first archive run", 30)
            time.sleep(3 * INTERVAL)  # the other keeps trying all along, and fails
            assert holder.leader() and other.leader() is False
            assert metric(holder.metrics(), "waku_legacy_leader ") == 1
            assert metric(other.metrics(), "waku_legacy_leader ") == 0
            assert other.archive_runs() == 0 and other.archived() == []
            assert holder.archived() != []
            health = json.loads(get(other.base, "/health")[2])
            assert {"Archives": "NOT_READY", "desc": "Standby: another instance on this store "
                    "archives"} in health["protocolsHealth"]  # fmt: skip
            request = urllib.request.Request(
                other.base + "/admin/v1/archive", method="POST",
                headers={"Authorization": f"Bearer {TOKEN}"},
            )  # fmt: skip
            with pytest.raises(urllib.error.HTTPError) as refused:
                urllib.request.urlopen(request, timeout=5)
            assert refused.value.code == 503  # archiving now: ask the holder

            holder.process.send_signal(signal.SIGKILL)
            holder.process.wait(10)
            killed = time.monotonic()
            wait_for(other.leader, "the other instance to take over", timeout=10 * INTERVAL)
            took = time.monotonic() - killed
            # its next try after the holder's session ended (one interval), the fencing wait
            # (one more), plus the try (and slack for a loaded 2-core CI machine)
            assert INTERVAL <= took < 2 * INTERVAL + 4.0, f"takeover took {took:.2f} s"
            wait_for(lambda: other.archive_runs() >= 1, "the new holder's archive run", 30)
            assert other.archived() != []
            assert metric(other.metrics(), "waku_legacy_leader ") == 1
        finally:
            for instance in instances:
                instance.stop()
        print(f"takeover after SIGKILL: {took:.2f} s (interval {INTERVAL:g} s)")


@pytest.mark.postgres
@pytest.mark.network
@pytest.mark.torrent
def test_a_hung_holder_loses_the_role_and_steps_down_when_it_wakes(
    postgres_dsn: str, tmp_path: Path
) -> None:
    """SIGSTOP: the holder's connection stays open but its heartbeat stops; the server ends
    its idle session after three intervals (idle_session_timeout), the other takes the role,
    and the holder, woken, finds its session gone and stops its singletons."""
    key = private_key_from_bytes(bytes.fromhex("6e" * 32))
    community = str(CommunityId(key.public_key.format(compressed=True)))
    channel = str(uuid.UUID(int=8))
    (tmp_path / "c.key").write_text(key.secret.hex())
    with fresh_database(postgres_dsn, "leader_") as dsn:
        instances: list[Instance] = []
        try:
            instances = [Instance(tmp_path, n, dsn, community, channel) for n in ("a", "b")]
            wait_for(lambda: all(i.leader() is not None for i in instances), "both to answer")
            holder = wait_for(lambda: [i for i in instances if i.leader()], "one instance to lead")[
                0
            ]
            other = instances[1 - instances.index(holder)]
            holder.process.send_signal(signal.SIGSTOP)
            stopped = time.monotonic()
            try:
                wait_for(other.leader, "the other to take over", timeout=10 * INTERVAL + 10)
                took = time.monotonic() - stopped
                # three intervals of silence end the session (the silence began at the
                # holder's last heartbeat, up to one interval before SIGSTOP), then up to one
                # interval to the other's next try
                assert 2 * INTERVAL <= took < 5 * INTERVAL + 2.0, f"took {took:.2f} s"
            finally:
                holder.process.send_signal(signal.SIGCONT)
            # woken: its next heartbeat fails, it steps down; one leader again
            wait_for(lambda: holder.leader() is False, "the old holder to step down", 10)
            assert other.leader() is True
            assert metric(holder.metrics(), "waku_legacy_leader ") == 0
        finally:
            for instance in instances:
                instance.stop()
        print(f"takeover from a stopped holder: {took:.2f} s (interval {INTERVAL:g} s)")
