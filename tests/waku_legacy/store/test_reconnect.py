"""Store outages are survived without a restart and without loss (issue 21, item 4).

Over real PostgreSQL (sessions terminated with ``pg_terminate_backend``; a throwaway server
of our own stopped and started again; a ``waku-legacy serve`` process killed with SIGKILL
during an outage) and real SQLite (the file locked by another process): live v1 envelopes
sent over RLPx while the store is away are all stored exactly once when it is back, the
REST API answers 503 (never 500) meanwhile, ``/health`` says why, and the bridge recovers
without a restart. Deadlines are generous (a loaded 2-core machine); outcomes are asserted.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from tests.bridge.support import bridge_config
from tests.helpers import OwnPostgres, fresh_database, wait_until
from waku_legacy.bridge.live import read_spool
from waku_legacy.bridge.service import BridgeService
from waku_legacy.crypto.secp256k1 import generate_private_key
from waku_legacy.mailserver_compat.waku_peer import connect
from waku_legacy.mailserver_compat.wire.pow import seal
from waku_legacy.mailserver_compat.wire.waku_protocol import StatusOptions

pytestmark = pytest.mark.network
TOPIC = bytes.fromhex("0badcafe")
V3 = "/store/v3/messages?includeData=true&pageSize=5&contentTopics=/waku/1/0x0badcafe/rfc26"


def _envelopes(n: int, tag: str) -> list[bytes]:
    now = int(time.time())
    return [
        seal(now + 60, 60, TOPIC, f"{tag} envelope {i}".encode(), 0.002).encode()
        for i in range(n)
    ]


def _v1_sections(tmp_path: Path) -> dict[str, Any]:
    return {"v1": {"listen": "127.0.0.1:0", "node_key_file": str(tmp_path / "nodekey"),
                   "rate_limit": 0, "min_pow": 0.001}}  # fmt: skip


async def _v1_peer(enode: Any) -> Any:
    status = StatusOptions(pow_requirement=0.0, light_node=False, topic_interest=None)
    return await connect(enode, generate_private_key(), status=status)


async def _bridge(
    tmp_path: Path, url: str, **sections: Any
) -> tuple[BridgeService, RestProbe, Any]:
    """A started bridge on ``url`` with a v1 listener, a REST probe and a v1 peer."""
    sections.update(_v1_sections(tmp_path))
    service = BridgeService(bridge_config(tmp_path, url, **sections))
    await service.start()
    probe = RestProbe(f"http://127.0.0.1:{service.rest_port}").start()
    peer = await _v1_peer(service.mailserver.enode)
    await wait_until(lambda: len(service.mailserver.peers) == 1, what="v1 peer")
    return service, probe, peer


def _pg_count(dsn: str) -> tuple[int, int, int]:
    """(messages, distinct message hashes, v1 envelopes) in the store at ``dsn``."""
    import psycopg

    with psycopg.connect(dsn, connect_timeout=5) as conn:
        messages, distinct = conn.execute(
            "SELECT count(*), count(DISTINCT messageHash) FROM messages"
        ).fetchone()  # type: ignore[misc]
        envelopes = conn.execute("SELECT count(*) FROM v1_envelopes").fetchone()[0]  # type: ignore[index]
    return int(messages), int(distinct), int(envelopes)


class RestProbe:
    """GETs a store page and /health every ``interval`` seconds, keeping what it saw."""

    def __init__(self, base: str, interval: float = 0.05) -> None:
        self.base = base
        self.interval = interval
        self.statuses: list[tuple[float, int]] = []
        self.health: list[tuple[float, dict[str, Any]]] = []
        self._task: asyncio.Task[None] | None = None

    async def _run(self) -> None:
        timeout = aiohttp.ClientTimeout(total=10)
        async with aiohttp.ClientSession(timeout=timeout) as session:
            while True:
                async with session.get(self.base + V3) as response:
                    await response.read()
                    self.statuses.append((time.monotonic(), response.status))
                async with session.get(self.base + "/health") as response:
                    self.health.append((time.monotonic(), await response.json()))
                await asyncio.sleep(self.interval)

    def start(self) -> RestProbe:
        self._task = asyncio.create_task(self._run())
        return self

    async def stop(self) -> None:
        assert self._task is not None
        self._task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._task

    def codes(self) -> set[int]:
        return {status for _, status in self.statuses}


# -- a PostgreSQL server this test may stop -------------------------------------------------


@pytest.fixture
def own_postgres() -> Iterator[OwnPostgres]:
    server = OwnPostgres()
    try:
        yield server
    finally:
        server.cleanup()


# -- (a) sessions terminated ------------------------------------------------------------------


def _terminate_sessions(admin_dsn: str, database: str) -> int:
    import psycopg

    with psycopg.connect(admin_dsn, autocommit=True) as admin:
        rows = admin.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
            "WHERE datname = %s AND pid <> pg_backend_pid()",
            [database],
        ).fetchall()
    return sum(1 for (ok,) in rows if ok)


async def test_terminated_sessions_are_replaced_and_no_live_envelope_is_lost(
    tmp_path, postgres_dsn
):
    from tests.conftest import database_of

    with fresh_database(postgres_dsn, "outage_a_") as dsn:
        service, probe, peer = await _bridge(tmp_path, dsn)
        envelopes = await asyncio.to_thread(_envelopes, 120, "terminate")
        try:
            terminated = 0
            for at in range(0, len(envelopes), 10):
                await peer.send_envelopes(envelopes[at : at + 10])
                await asyncio.sleep(0.05)
                if at % 30 == 0:  # four times, while rows and queries are in flight
                    terminated += await asyncio.to_thread(
                        _terminate_sessions, postgres_dsn, database_of(dsn)
                    )
            assert terminated >= 4  # the bridge's sessions (readers, writer, leader lock)
            bridged = service.metrics.envelopes_bridged
            await wait_until(lambda: bridged.value("v1_to_v2") == 120, what="all accepted",
                             timeout=60)  # fmt: skip
            await asyncio.wait_for(service.live.writer.flush(), 60)
            await wait_until(lambda: probe.statuses and probe.statuses[-1][1] == 200,
                             what="REST answering again", timeout=60)  # fmt: skip
        finally:
            await probe.stop()
            await peer.disconnect()
            await service.stop()
        unavailable = sum(1 for _, status in probe.statuses if status == 503)
        print(f"\n{terminated} sessions terminated: {unavailable} of {len(probe.statuses)} "
              "REST answers 503, the rest 200")  # fmt: skip
        assert probe.codes() <= {200, 503}, probe.codes()  # never a 500
        assert await asyncio.to_thread(_pg_count, dsn) == (120, 120, 120)
        assert not (tmp_path / "live-spool.rlp").exists()


# -- (b) the server stopped and started again ---------------------------------------------------


async def test_server_restart_is_survived_with_503_health_and_every_row_stored(
    tmp_path, own_postgres
):
    with fresh_database(own_postgres.dsn, "outage_b_") as dsn:
        libp2p = {"listen": ["/ip4/127.0.0.1/tcp/0"], "key_file": str(tmp_path / "p2p.key")}
        service, probe, peer = await _bridge(tmp_path, dsn, libp2p=libp2p)
        before = await asyncio.to_thread(_envelopes, 20, "before")
        during = await asyncio.to_thread(_envelopes, 100, "during")
        spool = tmp_path / "live-spool.rlp"
        try:
            await peer.send_envelopes(before)
            bridged = service.metrics.envelopes_bridged
            await wait_until(lambda: bridged.value("v1_to_v2") == 20, what="first 20")
            await asyncio.wait_for(service.live.writer.flush(), 60)

            await asyncio.to_thread(own_postgres.stop)
            stopped = time.monotonic()
            for at in range(0, len(during), 10):
                await peer.send_envelopes(during[at : at + 10])
                await asyncio.sleep(0.05)
            await wait_until(lambda: bridged.value("v1_to_v2") == 120, what="all accepted")
            # accepted while the server is away: on disk, not only in memory
            await wait_until(lambda: spool.exists() and len(read_spool(spool.read_bytes())[0])
                             >= 100, what="rows spooled", timeout=60)  # fmt: skip
            await wait_until(lambda: any(s == 503 for t, s in probe.statuses if t > stopped),
                             what="a 503 during the outage", timeout=60)  # fmt: skip
            await wait_until(lambda: probe.health and probe.health[-1][1]["nodeHealth"]
                             == "NOT_READY", what="health NOT_READY", timeout=60)  # fmt: skip
            outage_health = probe.health[-1][1]
            assert service.metrics.store_reachable.samples() == [
                "waku_legacy_store_reachable 0"
            ]
            spooled = service.metrics.live_spooled  # counted once the append has returned
            await wait_until(lambda: spooled.value() >= 100, what="spooled rows counted")
            base = f"http://127.0.0.1:{service.rest_port}"
            async with aiohttp.ClientSession() as session:
                async with session.get(base + "/") as response:
                    page = await response.text()
                async with session.get(base + "/debug/v1/status") as response:
                    status = await response.json()
            other_answers = await _other_protocols(service, base)
            await asyncio.sleep(1.0)  # the outage lasts a while

            await asyncio.to_thread(own_postgres.start)
            started = time.monotonic()
            await wait_until(lambda: probe.health and probe.health[-1][1]["nodeHealth"]
                             == "READY", what="health READY again", timeout=60)  # fmt: skip
            await wait_until(lambda: probe.statuses[-1][1] == 200 and probe.statuses[-1][0]
                             > started, what="REST 200 again", timeout=60)  # fmt: skip
            await asyncio.wait_for(service.live.writer.flush(), 60)
            recovered = time.monotonic() - started
            await wait_until(lambda: not spool.exists(), what="spool drained", timeout=30)
            answers_after = await _other_protocols(service, base)
            assert service.metrics.store_reachable.samples() == [
                "waku_legacy_store_reachable 1"
            ]
        finally:
            await probe.stop()
            await peer.disconnect()
            await service.stop()
        # the legacy REST API, store v3 over libp2p and the v1 mailserver during the outage
        assert other_answers == (503, 503, "SERVICE_UNAVAILABLE", True), other_answers
        assert answers_after == (200, 200, "OK", False), answers_after
        print(f"\nserver restart: REST and writes back {recovered:.2f} s after the server")
        assert probe.codes() <= {200, 503}, probe.codes()  # never a 500
        store = next(e for e in outage_health["protocolsHealth"] if "Store" in e)
        assert store["Store"] == "NOT_READY" and "store unreachable" in store["desc"], store
        assert "store unreachable" in page and "NOT_READY" in page  # the status page says so
        assert "store unreachable" in json.dumps(status)
        assert await asyncio.to_thread(_pg_count, dsn) == (120, 120, 120)


async def _other_protocols(service: BridgeService, base: str) -> tuple[int, int, str, bool]:
    """What the other store interfaces answer: the legacy REST status, store v3 over libp2p
    (a real TCP + Noise + yamux connection): status code and description, and whether the
    v1 mailserver's request completion failed (with the SERVICE_UNAVAILABLE text when it
    did)."""
    import trio

    from tests.p2p_pylibp2p.client import P2PClient
    from waku_legacy.mailserver_compat.client.mailserver_client import (
        HistoryQuery,
        MailServerClient,
    )
    from waku_legacy.p2p.store_client import StoreQueryArgs, query_pages

    async with aiohttp.ClientSession() as session:
        async with session.get(base + "/store/v1/messages?pageSize=5") as response:
            legacy = response.status
    args = StoreQueryArgs(content_topics=["/waku/1/0x0badcafe/rfc26"], page_size=5)

    def libp2p_query() -> Any:
        async def main() -> Any:
            async with P2PClient.dial(service.p2p.multiaddrs[0]) as client:
                (page,) = [page async for page in query_pages(client, args)]
                return page

        return trio.run(main)

    decoded = await asyncio.to_thread(libp2p_query)
    now = int(time.time())
    async with MailServerClient(service.mailserver.enode) as client:
        _, complete = await client.request_page(
            HistoryQuery(lower=now - 3600, upper=now + 3600, topics=(TOPIC,), limit=5), b""
        )
    assert not complete.failed or "SERVICE_UNAVAILABLE" in complete.error, complete.error
    return legacy, decoded.status_code, decoded.status_desc, complete.failed


# -- (c) kill -9 of `waku-legacy serve` during an outage ----------------------------------------


def _serve(config: Path, log: Path) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "waku_legacy.cli", "serve", "--config", str(config)],
        stdout=log.open("ab"), stderr=subprocess.STDOUT, start_new_session=True,
    )  # fmt: skip


async def _ready(base: str, process: subprocess.Popen[bytes], log: Path) -> dict[str, Any]:
    """Wait for ``/health`` READY; the node's info."""
    deadline = time.monotonic() + 90
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=5)) as session:
        while time.monotonic() < deadline:
            assert process.poll() is None, log.read_text()[-3000:]
            with contextlib.suppress(aiohttp.ClientError, OSError, asyncio.TimeoutError):
                async with session.get(base + "/health") as response:
                    if (await response.json())["nodeHealth"] == "READY":
                        async with session.get(base + "/debug/v1/info") as info:
                            return dict(await info.json())
            await asyncio.sleep(0.2)
    raise AssertionError("serve did not become ready:\n" + log.read_text()[-3000:])


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def test_kill_9_during_an_outage_loses_no_accepted_envelope(tmp_path, own_postgres):
    from waku_legacy.mailserver_compat.rlpx.enode import Enode

    with fresh_database(own_postgres.dsn, "outage_c_") as dsn:
        port = _free_port()
        config = tmp_path / "bridge.toml"
        config.write_text(
            f'[server]\nlisten = "127.0.0.1:{port}"\n'
            f"[store]\nurl = {json.dumps(dsn)}\n"
            f'[v1]\nlisten = "127.0.0.1:0"\nnode_key_file = "{tmp_path}/nodekey"\n'
            "rate_limit = 0\nmin_pow = 0.001\n"
            '[logging]\nlevel = "info"\n'
        )
        base = f"http://127.0.0.1:{port}"
        log = tmp_path / "serve.log"
        spool = tmp_path / "live-spool.rlp"
        process = _serve(config, log)
        try:
            info = await _ready(base, process, log)
            peer = await _v1_peer(Enode.parse(info["enode"]))
            envelopes = await asyncio.to_thread(_envelopes, 100, "kill")
            await asyncio.to_thread(own_postgres.stop)
            for at in range(0, len(envelopes), 10):
                await peer.send_envelopes(envelopes[at : at + 10])
                await asyncio.sleep(0.05)
            # every envelope accepted is on disk before the kill (the spool's fsync'd appends)
            await wait_until(lambda: spool.exists() and len(read_spool(spool.read_bytes())[0])
                             == 100, what="100 rows spooled", timeout=60)  # fmt: skip
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(30)
            with contextlib.suppress(Exception):
                await peer.disconnect()
        finally:
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait(30)
        assert len(read_spool(spool.read_bytes())[0]) == 100

        await asyncio.to_thread(own_postgres.start)
        process = _serve(config, log)
        try:
            await _ready(base, process, log)
            await wait_until(lambda: not spool.exists(), what="spool drained", timeout=60)
            counts = await asyncio.to_thread(_pg_count, dsn)
        finally:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(60)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait(30)
        assert counts == (100, 100, 100), counts


# -- (d) SQLite: the file locked by another process ---------------------------------------------


async def test_sqlite_file_locked_then_released_stores_every_row_once(tmp_path):
    import sqlite3

    path = tmp_path / "store.sqlite3"
    service, probe, peer = await _bridge(tmp_path, f"sqlite:///{path}?busy_timeout=200")
    envelopes = await asyncio.to_thread(_envelopes, 60, "sqlite")
    spool = tmp_path / "live-spool.rlp"
    # Another process's connection takes the write lock and keeps it.
    holder = subprocess.Popen(
        [sys.executable, "-c",
         "import sqlite3, sys, time\n"
         f"db = sqlite3.connect({str(path)!r}, isolation_level=None)\n"
         "db.execute('BEGIN EXCLUSIVE')\nprint('locked', flush=True)\nsys.stdin.readline()\n"
         "db.execute('ROLLBACK')\n"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE,
    )  # fmt: skip
    try:
        assert holder.stdout is not None and holder.stdin is not None
        assert await asyncio.to_thread(holder.stdout.readline) == b"locked\n"
        await peer.send_envelopes(envelopes[:30])
        await peer.send_envelopes(envelopes[30:])
        bridged = service.metrics.envelopes_bridged
        await wait_until(lambda: bridged.value("v1_to_v2") == 60, what="all accepted")
        await wait_until(lambda: spool.exists() and len(read_spool(spool.read_bytes())[0])
                         == 60, what="rows spooled while locked", timeout=60)  # fmt: skip
        assert service.live.writer.failures >= 1
        holder.stdin.write(b"\n")
        holder.stdin.flush()
        await asyncio.to_thread(holder.wait, 30)
        await asyncio.wait_for(service.live.writer.flush(), 60)
        await wait_until(lambda: not spool.exists(), what="spool drained", timeout=30)
    finally:
        if holder.poll() is None:
            holder.kill()
        await probe.stop()
        await peer.disconnect()
        await service.stop()
    assert probe.codes() <= {200, 503}, probe.codes()
    with contextlib.closing(sqlite3.connect(path)) as db:
        assert db.execute("SELECT count(*), count(DISTINCT messageHash) FROM Message"
                          ).fetchone() == (60, 60)  # fmt: skip
        assert db.execute("SELECT count(*) FROM v1_envelopes").fetchone() == (60,)


# -- the pieces: reconnect schedule, error classes, a torn spool --------------------------------


def test_reconnect_schedule_backs_off_with_jitter_and_reports_each_outage_once():
    from waku_legacy.store.reconnect import Reconnect

    now = [100.0]
    events: list[tuple[str, Any]] = []

    class Recorded(Reconnect):
        def on_down(self, reason: str) -> None:
            events.append(("down", reason))

        def on_still_down(self, reason: str, down_for: float, attempts: int) -> None:
            events.append(("still", attempts))

        def on_up(self, down_for: float, attempts: int) -> None:
            events.append(("up", (round(down_for, 3), attempts)))

    schedule = Recorded(initial=0.25, maximum=2.0, jitter=0.2, report_every=3.0,
                        clock=lambda: now[0])  # fmt: skip
    assert schedule.may_connect() and not schedule.down
    waits = []
    for _ in range(7):
        schedule.connect_failed("connection refused")
        wait = schedule.retry_in()
        waits.append(wait)
        assert not schedule.may_connect()  # nobody connects before the wait is over
        now[0] += wait
        assert schedule.may_connect()  # one caller gets the attempt...
        assert not schedule.may_connect()  # ...and the others keep waiting
    expected = [0.25, 0.5, 1.0, 2.0, 2.0, 2.0, 2.0]  # doubling, bounded
    assert all(0.8 * e - 1e-9 <= w <= e + 1e-9 for w, e in zip(waits, expected, strict=True))
    schedule.connected()
    assert not schedule.down and schedule.may_connect() and schedule.retry_in() == 0
    kinds = [kind for kind, _ in events]
    assert kinds[0] == "down" and kinds[-1] == "up" and kinds.count("down") == 1
    assert 1 <= kinds.count("still") <= 3  # every 3 s of an outage of ~8 s, not per attempt
    assert events[-1][1][1] == 7


def test_postgres_errors_are_told_apart_and_a_terminated_session_is_replaced(postgres_dsn):
    import psycopg

    from waku_legacy.store import open_store
    from waku_legacy.store.postgres import is_connection_error
    from waku_legacy.store.reconnect import Reconnect

    with fresh_database(postgres_dsn, "outage_e_") as dsn:
        schedule = Reconnect()
        store = open_store(dsn, reconnect=schedule)
        try:
            with pytest.raises(psycopg.errors.UndefinedTable) as caught:
                store._fetch("SELECT * FROM no_such_table", [])  # type: ignore[attr-defined]
            assert not is_connection_error(caught.value)  # a statement error: no reconnect
            assert store.count() == 0  # the same connection goes on
            pid = store._conn.info.backend_pid  # type: ignore[attr-defined]
            with psycopg.connect(postgres_dsn, autocommit=True) as admin:
                admin.execute("SELECT pg_terminate_backend(%s)", [pid])
            assert store.count() == 0  # replaced at once: the caller never saw the loss
            assert store._conn.info.backend_pid != pid  # type: ignore[attr-defined]
            assert not schedule.down
        finally:
            store.close()
    shutdown = psycopg.errors.AdminShutdown("terminating connection")
    assert is_connection_error(shutdown)
    assert is_connection_error(psycopg.OperationalError("server closed the connection"))
    assert not is_connection_error(psycopg.errors.QueryCanceled("statement timeout"))


def test_a_torn_spool_gives_its_good_rows_and_is_kept_aside(tmp_path):
    from tests.bridge.support import make_rows
    from waku_legacy.bridge.live import BatchWriter, encode_spool
    from waku_legacy.bridge.store_threads import StoreAccess

    rows = make_rows(30)
    spool = tmp_path / "live-spool.rlp"
    torn = encode_spool(rows[20:])
    spool.write_bytes(encode_spool(rows[:10]) + encode_spool(rows[10:20]) + torn[:-7])
    assert read_spool(spool.read_bytes())[0] == rows[:20]

    async def run() -> int:
        store = StoreAccess(f"sqlite:///{tmp_path}/s.sqlite3", readers=1)
        writer = BatchWriter(store, spool=spool)
        writer.start()
        try:
            await asyncio.wait_for(writer.flush(), 30)
            return await store.read(lambda s: s.count())
        finally:
            await writer.close()
            await store.close()

    assert asyncio.run(run()) == 20  # the appends before the torn one
    assert (tmp_path / "live-spool.rlp.bad").exists() and not spool.exists()
