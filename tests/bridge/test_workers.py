"""The REST API served by several processes (``[server] workers``, bridge.workers).

The real ``waku-legacy serve`` runs as a separate process with ``workers = 2``: the primary
and one worker share the listening socket. Every request goes over a fresh connection (the
kernel hands each to whichever process accepts first), and ``X-Bridge-Process`` names the
process that answered.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from tests.bridge.support import CONTENT, PUBSUB, make_rows
from waku_legacy.store import open_store

STORE_PATH = "/store/v3/messages"
STORE_ROUTE = 'route="/store/v3/messages",method="GET",status="200"'


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def get(base: str, path: str, timeout: float = 10.0) -> tuple[int, dict[str, str], bytes]:
    """One request on a fresh connection: status, headers, body."""
    try:
        with urllib.request.urlopen(base + path, timeout=timeout) as response:
            return response.status, dict(response.headers), response.read()
    except urllib.error.HTTPError as exc:
        return exc.code, dict(exc.headers), exc.read()


def metric(text: str, prefix: str) -> float:
    for line in text.splitlines():
        if line.startswith(prefix):
            return float(line.rsplit(" ", 1)[1])
    return 0.0


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # a zombie (exited, not yet reaped by a parent that died) counts as gone
    stat = Path(f"/proc/{pid}/stat")
    return not stat.exists() or stat.read_text().rsplit(")", 1)[1].split()[0] != "Z"


def wait_for(condition: Any, what: str, timeout: float = 20.0) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            value = condition()
        except (OSError, urllib.error.URLError, ValueError):
            value = None
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


class Served:
    """``waku-legacy serve`` with two REST processes on a small SQLite store."""

    def __init__(self, tmp_path: Path, extra: str = "") -> None:
        tmp_path.mkdir(parents=True, exist_ok=True)
        store = tmp_path / "store.sqlite3"
        with open_store(f"sqlite:///{store}") as opened:
            opened.insert_messages(make_rows(300))
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        config = tmp_path / "bridge.toml"
        config.write_text(
            f'[server]\nlisten = "127.0.0.1:{self.port}"\nworkers = 2\nshutdown_timeout = "5s"\n'
            f"requests_per_second = 0\n"
            f'[store]\nurl = "sqlite:///{store}"\n[logging]\nlevel = "warning"\n{extra}'
        )
        self.process = subprocess.Popen(
            [sys.executable, "-m", "waku_legacy.cli", "serve", "--config", str(config)],
            stdout=subprocess.DEVNULL,
            stderr=(tmp_path / "bridge.log").open("wb"),
        )

    def info(self) -> dict[str, Any]:
        status, _, body = get(self.base, "/debug/v1/info")
        assert status == 200
        return dict(json.loads(body))

    def workers(self) -> list[int]:
        return list(self.info()["processes"]["workers"])

    def answering_pids(self, want: set[int], tries: int = 400) -> set[int]:
        """Send store requests until every pid in ``want`` answered one (or give up)."""
        seen: set[int] = set()
        for _ in range(tries):
            status, headers, _ = get(self.base, f"{STORE_PATH}?pageSize=1")
            assert status == 200
            seen.add(int(headers["X-Bridge-Process"]))
            if want <= seen:
                break
            time.sleep(0.01)
        return seen

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait(10)


@pytest.fixture
def served(tmp_path: Path) -> Any:
    service = Served(tmp_path)
    try:
        wait_for(lambda: get(service.base, "/health")[0] == 200, "the bridge to answer")
        yield service
    finally:
        service.stop()


@pytest.mark.network
def test_requests_are_answered_by_both_processes_with_one_service_view(served: Served) -> None:
    primary = served.info()["processes"]["primary"]
    assert primary == served.process.pid
    [worker] = wait_for(served.workers, "the worker to start")
    seen = served.answering_pids({primary, worker})
    assert seen == {primary, worker}, "both processes accept from the shared socket"

    # The same page whichever process reads it (the worker from its own read-only store).
    query = f"{STORE_PATH}?pubsubTopic={PUBSUB}&contentTopics={CONTENT[1]}&pageSize=20"
    bodies: dict[int, Any] = {}
    for _ in range(400):
        status, headers, body = get(served.base, query)
        assert status == 200
        page = json.loads(body)
        del page["requestId"]  # each answer's own
        bodies[int(headers["X-Bridge-Process"])] = page
        if len(bodies) == 2:
            break
    assert len(bodies) == 2 and bodies[primary] == bodies[worker]
    assert len(bodies[worker]["messages"]) == 20

    # /metrics, /health and /debug/v1/info answer for the whole service from either process.
    before = None
    scraped: dict[int, str] = {}
    for _ in range(400):
        _, headers, body = get(served.base, "/metrics")
        pid = int(headers["X-Bridge-Process"])
        text = body.decode()
        count = metric(text, "waku_legacy_http_requests_total{" + STORE_ROUTE)
        # No request in between: every scrape counts every store request of both processes.
        assert before is None or count == before
        before = count
        scraped[pid] = text
        if len(scraped) == 2:
            break
    assert set(scraped) == {primary, worker}
    for text in scraped.values():
        assert metric(text, "waku_legacy_http_processes ") == 2
    # every store request above was answered and counted, by one process or the other
    assert before is not None and before >= len(seen) + len(bodies)
    status, _, body = get(served.base, "/debug/v1/status")
    assert status == 200 and json.loads(body)["service"]["state"] == "Ready"
    healths = set()
    for _ in range(50):
        status, headers, body = get(served.base, "/health")
        assert status == 200
        healths.add((headers["X-Bridge-Process"], json.loads(body)["nodeHealth"]))
    assert {h for _, h in healths} == {"READY"}


@pytest.mark.network
def test_store_counts_add_up_across_processes(served: Served) -> None:
    primary = served.info()["processes"]["primary"]
    [worker] = wait_for(served.workers, "the worker to start")
    served.answering_pids({primary, worker})  # both are accepting now
    _, _, body = get(served.base, "/metrics")
    start = metric(body.decode(), "waku_legacy_http_requests_total{" + STORE_ROUTE)
    by_pid: dict[int, int] = {}
    for _ in range(60):
        _, headers, _ = get(served.base, f"{STORE_PATH}?pageSize=5")
        pid = int(headers["X-Bridge-Process"])
        by_pid[pid] = by_pid.get(pid, 0) + 1
    for _ in range(6):  # scrapes reach either process: each counts all 60
        _, _, body = get(served.base, "/metrics")
        assert metric(body.decode(), "waku_legacy_http_requests_total{" + STORE_ROUTE) == (
            start + 60
        )
    assert sum(by_pid.values()) == 60


@pytest.mark.network
def test_a_killed_worker_is_restarted_and_its_counts_kept(served: Served) -> None:
    primary = served.info()["processes"]["primary"]
    [worker] = wait_for(served.workers, "the worker to start")
    served.answering_pids({primary, worker})
    time.sleep(1.2)  # the worker writes its values every second
    _, _, body = get(served.base, "/metrics")
    counted = metric(body.decode(), "waku_legacy_http_requests_total{" + STORE_ROUTE)
    os.kill(worker, signal.SIGKILL)

    def replaced() -> list[int]:
        workers = served.workers()
        return workers if workers and workers != [worker] else []

    [new_worker] = wait_for(replaced, "a new worker")
    assert new_worker != worker and not alive(worker)
    assert served.answering_pids({primary, new_worker}) == {primary, new_worker}
    _, _, body = get(served.base, "/metrics")
    text = body.decode()
    assert metric(text, "waku_legacy_worker_restarts_total ") == 1
    # what the dead worker answered is still counted (counters never go back)
    assert metric(text, "waku_legacy_http_requests_total{" + STORE_ROUTE) >= counted


@pytest.mark.network
def test_sigterm_stops_every_process_and_the_primary_dying_stops_workers(
    served: Served, tmp_path: Path
) -> None:
    [worker] = wait_for(served.workers, "the worker to start")
    served.answering_pids({served.process.pid, worker})
    served.process.send_signal(signal.SIGTERM)
    assert served.process.wait(20) == 0
    wait_for(lambda: not alive(worker), "the worker to stop")
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", served.port), timeout=2).close()

    # A primary killed outright: its workers notice (their stdin pipe closes) and stop.
    other = Served(tmp_path / "second")
    try:
        wait_for(lambda: get(other.base, "/health")[0] == 200, "the second bridge")
        [orphan] = wait_for(other.workers, "its worker")
        other.process.kill()
        other.process.wait(10)
        wait_for(lambda: not alive(orphan), "the orphaned worker to stop", timeout=10)
    finally:
        other.stop()


def test_worker_store_connections_refuse_writes(tmp_path: Path) -> None:
    from waku_legacy.bridge.store_threads import ThreadLocalStore
    from waku_legacy.errors import WakuLegacyError

    url = f"sqlite:///{tmp_path}/s.sqlite3"
    with open_store(url) as store:
        store.insert_messages(make_rows(10))
    reader = ThreadLocalStore(url, read_only=True)
    try:
        assert reader.count() == 10
        with pytest.raises(WakuLegacyError):
            reader.insert_messages(make_rows(3, seed=9))
        assert reader.count() == 10
    finally:
        reader.close()


def listening_pids(port: int) -> set[int]:
    """The processes holding a TCP socket that listens on ``port`` (Linux /proc)."""
    inodes = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            if int(fields[1].rsplit(":", 1)[1], 16) == port and fields[3] == "0A":  # LISTEN
                inodes.add(fields[9])
    pids = set()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            links = {os.readlink(fd) for fd in (entry / "fd").iterdir()}
        except OSError:
            continue
        if any(f"socket:[{inode}]" in links for inode in inodes):
            pids.add(int(entry.name))
    return pids


@pytest.mark.network
def test_the_libp2p_store_is_served_by_the_workers_too(tmp_path: Path) -> None:
    import trio

    from tests.p2p_pylibp2p.client import P2PClient
    from waku_legacy.p2p.store_client import StoreQueryArgs, query_pages

    served = Served(
        tmp_path,
        '[libp2p]\nlisten = ["/ip4/127.0.0.1/tcp/0"]\nkey_file = "libp2p.key"\nshards = [128]\n',
    )
    try:
        wait_for(lambda: get(served.base, "/health")[0] == 200, "the bridge to answer")
        [worker] = wait_for(served.workers, "the worker to start")
        served.answering_pids({served.process.pid, worker})  # the worker is up
        [address] = served.info()["libp2p"]["multiaddrs"]
        port = int(address.split("/tcp/")[1].split("/")[0])
        # one peer id, one port, two listening processes (SO_REUSEPORT; the worker's
        # libp2p listener starts after its REST side)
        both = {served.process.pid, worker}
        wait_for(lambda: listening_pids(port) == both, "both processes to listen on libp2p")

        async def query(times: int) -> list[int]:
            counts = []
            for _ in range(times):  # a new connection each time: either process may take it
                async with P2PClient.dial(address) as client:
                    args = StoreQueryArgs(pubsub_topic=PUBSUB, page_size=7)
                    pages = [page async for page in query_pages(client, args, max_pages=1)]
                    counts.append(len(pages[0].messages))
            return counts

        assert trio.run(query, 16) == [7] * 16
        _, _, body = get(served.base, "/metrics")
        text = body.decode()
        # both processes' listeners counted on one scrape
        assert metric(text, 'waku_legacy_libp2p_events{event="requests_answered"}') == 16
    finally:
        served.stop()


@pytest.mark.network
def test_no_worker_binds_the_websocket_port(tmp_path: Path) -> None:
    """Issue 24: with [libp2p] on TCP and WebSocket, every worker start logged "WebSocket
    server error: [Errno 98] Address already in use" and failed (py-libp2p binds WebSocket
    without SO_REUSEPORT): with a WebSocket address the primary alone serves libp2p."""
    tcp, ws = free_port(), free_port()  # two ports, as deployed (port 0 makes them one)
    served = Served(
        tmp_path,
        f'[libp2p]\nlisten = ["/ip4/127.0.0.1/tcp/{tcp}", "/ip4/127.0.0.1/tcp/{ws}/ws"]\n'
        'key_file = "libp2p.key"\nshards = [128]\n',
    )
    try:
        wait_for(lambda: get(served.base, "/health")[0] == 200, "the bridge to answer")
        [worker] = wait_for(served.workers, "the worker to start")
        addresses = served.info()["libp2p"]["multiaddrs"]
        tcp = next(a for a in addresses if "/ws" not in a)
        ws = next(a for a in addresses if "/ws" in a)
        tcp_port, ws_port = (int(a.split("/tcp/")[1].split("/")[0]) for a in (tcp, ws))
        served.answering_pids({served.process.pid, worker})  # the worker is up
        time.sleep(3)  # a worker starts libp2p after its REST side: give it the time to try
        for port in (tcp_port, ws_port):
            assert listening_pids(port) == {served.process.pid}
    finally:
        served.stop()
    log = (tmp_path / "bridge.log").read_text()
    assert "Address already in use" not in log, log[-2000:]
    assert "libp2p listener not started" not in log, log[-2000:]


def test_workers_and_leader_interval_config() -> None:
    from waku_legacy.bridge.config import parse_config
    from waku_legacy.errors import ConfigError

    store = {"url": "sqlite:///s.sqlite3"}
    config = parse_config({"store": store})
    assert config.server.workers == (os.cpu_count() or 1)
    assert config.store.leader_interval == 15.0
    config = parse_config({"server": {"workers": 3}, "store": {**store, "leader_interval": "2s"}})
    assert config.server.workers == 3 and config.store.leader_interval == 2.0
    with pytest.raises(ConfigError, match="workers"):
        parse_config({"server": {"workers": 0}, "store": store})
    with pytest.raises(ConfigError, match="leader_interval"):
        parse_config({"store": {**store, "leader_interval": 0}})
