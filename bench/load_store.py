"""Load on the bridge's REST store: many concurrent clients from a second process.

    .venv/bin/python bench/load_store.py                       # 100k-message store, 60 s
    .venv/bin/python bench/load_store.py --duration 10         # a quick run
    .venv/bin/python bench/load_store.py --messages 1000000    # the 1M-message target
    .venv/bin/python bench/load_store.py --think 0             # closed loop: saturation
    .venv/bin/python bench/load_store.py --workers 1,2         # one process, then two

One run loads the server once per ``--workers`` entry (default: 1, then the number of
cores), the same clients each time, and prints each beside the first: requests/s and the
latency figures of one process and of several (``[server] workers``: the primary and its
worker processes sharing the listening socket; CPU and memory summed over all of them).

What runs: this process builds (or reuses) a SQLite v2 store of ``--messages`` messages in
nwaku's schema (``--store``; regenerated when its size differs), starts the bridge as a
SEPARATE process (``waku-legacy serve --config …``, the real service, REST only) and holds
``--clients`` concurrent store clients against it on loopback for ``--duration`` seconds or
``--max-requests`` requests, whichever comes first. Each client does what a Status client
catching up does: pick a content topic and its shard, a start time, a direction, and page
through up to ``--pages`` pages of ``--page-size`` messages with ``includeData=true``
following ``paginationCursor``; then waits ``--think`` seconds (per client) and starts over.

Printed: requests/s, p50/p90/p99/max latency and the error count (every non-200 answer and
every connection error counts; the run fails with exit 1 on any), the server's resident
memory (RSS) when the load starts, at its peak (sampled every 0.5 s) and when it ends, beside
two baselines
measured in the same run on the same pages (a sample of the exact requests the clients made,
replayed afterwards in this process):

- raw SQLite: the same SELECT (cursor lookup + page query) through ``sqlite3`` directly;
- store + JSON: the bridge's own page function (``store.query`` and nwaku's JSON), i.e. the
  server's work for one request without HTTP.

The server runs with its default HTTP limits except two that a single load generator would
trip by design (every client shares one source address): ``max_connections_per_address`` is
raised to ``--clients`` + 16 and the per-address request budget is ``--requests-per-second``
(default 0: off; with a budget, cursor continuations stay free and only session starts are
charged).

Target (issue 6): p99 under 50 ms for 100-message pages on a 1,000,000-message store with
200 concurrent clients. Target (issue 15): at ``--think 0``, the multi-process requests/s at
least 1.7x the one-process figure on 2 cores, in the same run. Note that client and server
share this machine's cores: the load generator's own CPU time is part of what the latency
sees.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import os
import random
import shutil
import signal
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import aiohttp

if TYPE_CHECKING:
    from waku_legacy.store import MessageStore

PUBSUB_TOPICS = [f"/waku/2/rs/16/{s}" for s in (32, 64, 128, 129)]
NS = 1_000_000_000
SPAN = 30 * 86_400  # messages spread over 30 days
MMAP = 1 << 30  # server and baselines read the file through memory-mapped I/O


def content_topics(count: int) -> list[str]:
    return [f"/waku/1/0x{hashlib.sha256(b'%d' % i).hexdigest()[:8]}/rfc26" for i in range(count)]


def pubsub_of(index: int) -> str:
    return PUBSUB_TOPICS[index % len(PUBSUB_TOPICS)]


# -- the store --------------------------------------------------------------------------------


def build_store(path: Path, messages: int, topics: list[str], payload_size: int, t0: int) -> None:
    from waku_legacy.identity.message_hash import deterministic_hash
    from waku_legacy.store import StoredMessage, open_store

    if path.exists():
        path.unlink()
    for suffix in ("-wal", "-shm"):
        Path(str(path) + suffix).unlink(missing_ok=True)
    rnd = random.Random(42)
    started = time.monotonic()
    with open_store(f"sqlite:///{path}") as store, store.bulk_load():
        batch = []
        for i in range(messages):
            t = rnd.randrange(len(topics))
            pubsub, content = pubsub_of(t), topics[t]
            size = max(1, int(rnd.gauss(payload_size, payload_size / 4)))
            payload = rnd.randbytes(size)
            ts = t0 * NS + rnd.randrange(SPAN * 1000) * 1_000_000
            digest = deterministic_hash(pubsub, payload, content, b"", ts)
            batch.append(StoredMessage(digest, pubsub, content, payload, 1, ts))
            if len(batch) == 50_000:
                store.insert_messages(batch, batch_size=50_000)
                batch = []
                print(f"  generated {i + 1:,} messages ({time.monotonic() - started:.0f} s)",
                      file=sys.stderr)  # fmt: skip
        store.insert_messages(batch, batch_size=50_000)
    print(f"  store ready: {messages:,} messages in {time.monotonic() - started:.0f} s",
          file=sys.stderr)  # fmt: skip


def store_count(path: Path) -> int:
    if not path.exists():
        return -1
    try:
        with sqlite3.connect(path) as db:
            return int(db.execute("SELECT count(*) FROM Message").fetchone()[0])
    except sqlite3.Error:
        return -1


# -- the server process ------------------------------------------------------------------------


def start_server(
    store: Path, workdir: Path, port: int, readers: int, *, clients: int, rate: float,
    workers: int = 1,
) -> subprocess.Popen:  # fmt: skip
    config = workdir / "bridge.toml"
    config.write_text(
        f'[server]\nlisten = "127.0.0.1:{port}"\nreader_threads = {readers}\n'
        f"workers = {workers}\n"
        f"max_connections_per_address = {clients + 16}\nrequests_per_second = {rate}\n"
        f'[store]\nurl = "sqlite:///{store}?mmap_size={MMAP}"\n[logging]\nlevel = "warning"\n'
    )
    cmd = [sys.executable, "-m", "waku_legacy.cli", "serve", "--config", str(config)]
    return subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


async def wait_ready(
    base: str, server: subprocess.Popen, workers: int = 1, timeout: float = 60.0
) -> None:
    """Until /health answers and every one of ``workers`` processes has answered a request."""
    deadline = time.monotonic() + timeout
    answered: set[str] = set()
    connector = aiohttp.TCPConnector(force_close=True)  # each request a new connection
    async with aiohttp.ClientSession(connector=connector) as http:
        while time.monotonic() < deadline:
            if server.poll() is not None:
                raise SystemExit(f"server exited: {server.stderr.read().decode()[-2000:]}")
            try:
                async with http.get(base + "/health") as response:
                    answered.add(response.headers.get("X-Bridge-Process", "one"))
                    if response.status == 200 and len(answered) >= workers:
                        return
            except aiohttp.ClientError:
                pass
            await asyncio.sleep(0.2 if not answered else 0.02)
    raise SystemExit("server did not become ready")


def process_tree(pid: int) -> list[int]:
    """``pid`` and its descendants (the bridge's worker processes; Linux /proc)."""
    out, todo = [], [pid]
    while todo:
        current = todo.pop()
        out.append(current)
        try:
            children = Path(f"/proc/{current}/task/{current}/children").read_text().split()
        except OSError:
            continue
        todo += [int(c) for c in children]
    return out


def process_cpu(pid: int) -> float:
    """CPU seconds (user + system) a process and its children have used (Linux /proc; 0
    elsewhere). Children that exited are not counted (the bridge's workers live as long as
    the load)."""
    total = 0.0
    for member in process_tree(pid):
        try:
            fields = Path(f"/proc/{member}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return total


def process_rss(pid: int, kind: str = "VmRSS") -> int:
    """Resident memory of a process and its children in bytes (Linux /proc; 0 elsewhere):
    ``VmRSS`` in all, ``RssAnon`` the heap and stacks, ``RssFile`` mapped files (the
    memory-mapped store, shared with the page cache: counted once per process)."""
    total = 0
    for member in process_tree(pid):
        try:
            for line in Path(f"/proc/{member}/status").read_text().splitlines():
                if line.startswith(kind + ":"):
                    total += int(line.split()[1]) * 1024
        except OSError:
            pass
    return total


def rss_now(pid: int) -> dict[str, float]:
    return {k: process_rss(pid, k) / 2**20 for k in ("VmRSS", "RssAnon", "RssFile")}


async def sample_rss(pid: int, stop: asyncio.Event, peak: list[int]) -> None:
    while not stop.is_set():
        peak[0] = max(peak[0], process_rss(pid))
        peak[1] = max(peak[1], process_rss(pid, "RssAnon"))
        try:
            await asyncio.wait_for(stop.wait(), 0.5)
        except TimeoutError:
            pass


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# -- the clients -------------------------------------------------------------------------------


@dataclass
class Stats:
    latencies: list[float] = field(default_factory=list)
    statuses: dict[int, int] = field(default_factory=dict)
    connection_errors: int = 0
    messages: int = 0
    samples: list[dict[str, str]] = field(default_factory=list)

    @property
    def errors(self) -> int:
        return self.connection_errors + sum(n for s, n in self.statuses.items() if s != 200)


CURSOR_KEY = b'"paginationCursor":"'


def cursor_of(body: bytes) -> str | None:
    """The response's paginationCursor, read without parsing the whole page."""
    at = body.rfind(CURSOR_KEY)
    if at < 0:
        return None
    start = at + len(CURSOR_KEY)
    return body[start : body.index(b'"', start)].decode()


async def _pause(stop: asyncio.Event, seconds: float) -> bool:
    """Sleep ``seconds`` unless the run stops first; True when it stopped."""
    try:
        await asyncio.wait_for(stop.wait(), seconds)
    except TimeoutError:
        return False
    return True


async def client(
    number: int, http: aiohttp.ClientSession, base: str, args: argparse.Namespace,
    topics: list[str], t0: int, stats: Stats, stop: asyncio.Event, budget: list[int],
) -> None:  # fmt: skip
    rnd = random.Random(number)
    url = base + "/store/v3/messages"
    # Clients arrive spread over the first think period (a ramp, not a thundering herd).
    if await _pause(stop, rnd.uniform(0, args.think or 0)):
        return
    while not stop.is_set():
        t = rnd.randrange(len(topics))
        ascending = rnd.random() < 0.5
        params = {
            "pubsubTopic": pubsub_of(t), "contentTopics": topics[t], "includeData": "true",
            "pageSize": str(args.page_size), "ascending": "true" if ascending else "false",
        }  # fmt: skip
        edge = t0 * NS + rnd.randrange(SPAN) * NS
        params["startTime" if ascending else "endTime"] = str(edge)
        for _ in range(args.pages):
            if stop.is_set() or budget[0] <= 0:
                stop.set()
                return
            budget[0] -= 1
            started = time.perf_counter()
            try:
                async with http.get(url, params=params) as response:
                    body = await response.read()
                    status = response.status
            except (aiohttp.ClientError, OSError, TimeoutError):
                stats.connection_errors += 1
                break
            stats.latencies.append(time.perf_counter() - started)
            stats.statuses[status] = stats.statuses.get(status, 0) + 1
            if status != 200:
                break
            stats.messages += body.count(b'"messageHash"')
            if len(stats.samples) < args.samples:
                stats.samples.append(dict(params))
            cursor = cursor_of(body)
            if cursor is None:
                break
            params = dict(params, cursor=cursor)
        if args.think and await _pause(stop, rnd.uniform(0.5, 1.5) * args.think):
            return


async def run_load(
    base: str, args: argparse.Namespace, topics: list[str], t0: int, pid: int, peak: list[int]
) -> tuple:
    stats = Stats()
    stop = asyncio.Event()
    sampler = asyncio.create_task(sample_rss(pid, stop, peak))
    budget = [args.max_requests]
    connector = aiohttp.TCPConnector(limit=args.clients, limit_per_host=args.clients)
    timeout = aiohttp.ClientTimeout(total=30)
    async with aiohttp.ClientSession(connector=connector, timeout=timeout) as http:
        # warm up: every client connects and makes one small request first
        async with http.get(base + "/store/v3/messages?pageSize=1") as response:
            await response.read()
        started = time.perf_counter()
        tasks = [
            asyncio.create_task(client(n, http, base, args, topics, t0, stats, stop, budget))
            for n in range(args.clients)
        ]
        try:
            await asyncio.wait_for(stop.wait(), timeout=args.duration)
        except TimeoutError:
            pass
        stop.set()
        await asyncio.gather(*tasks, sampler)
        elapsed = time.perf_counter() - started
    return stats, elapsed


# -- the baselines -----------------------------------------------------------------------------

PAGE_SQL = (
    "SELECT messageHash, pubsubTopic, contentTopic, payload, version, timestamp, meta "
    "FROM Message WHERE {where} ORDER BY timestamp {order}, messageHash {order} LIMIT ?"
)


def raw_sqlite_page(db: sqlite3.Connection, params: dict[str, str]) -> int:
    """The same page through sqlite3 directly: cursor lookup, then the page query."""
    ascending = params["ascending"] == "true"
    where = ["pubsubTopic = ?", "contentTopic = ?"]
    args: list[object] = [params["pubsubTopic"].encode(), params["contentTopics"].encode()]
    if "cursor" in params:
        cursor = bytes.fromhex(params["cursor"][2:])
        (ts,) = db.execute(
            "SELECT timestamp FROM Message WHERE messageHash = ?", (cursor,)
        ).fetchone()
        where.append(f"(timestamp, messageHash) {'>' if ascending else '<'} (?, ?)")
        args += [ts, cursor]
    if "startTime" in params:
        where.append("timestamp >= ?")
        args.append(int(params["startTime"]))
    if "endTime" in params:
        where.append("timestamp <= ?")
        args.append(int(params["endTime"]))
    order = "ASC" if ascending else "DESC"
    args.append(int(params["pageSize"]) + 1)
    rows = db.execute(PAGE_SQL.format(where=" AND ".join(where), order=order), args).fetchall()
    return len(rows)


def store_json_page(store: MessageStore, params: dict[str, str]) -> int:
    from waku_legacy.bridge.store_rest_server import parse_v3_query, run_v3_query

    return len(run_v3_query(store, parse_v3_query(params), "bench"))


def time_calls(fn, items: list) -> list[float]:  # type: ignore[no-untyped-def]
    out = []
    for item in items:
        started = time.perf_counter()
        fn(item)
        out.append(time.perf_counter() - started)
    return out


def percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def summary(values: list[float]) -> dict[str, float]:
    return {
        "p50_ms": percentile(values, 0.50) * 1000,
        "p90_ms": percentile(values, 0.90) * 1000,
        "p99_ms": percentile(values, 0.99) * 1000,
        "max_ms": max(values) * 1000 if values else float("nan"),
        "mean_ms": statistics.fmean(values) * 1000 if values else float("nan"),
    }


# -- main ----------------------------------------------------------------------------------------


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--messages", type=int, default=100_000, help="store size (1000000: target)"
    )
    parser.add_argument("--store", type=Path, help="SQLite file (default: in the temp dir)")
    parser.add_argument("--topics", type=int, default=100, help="content topics")
    parser.add_argument("--payload-size", type=int, default=256, help="mean payload bytes")
    parser.add_argument("--clients", type=int, default=200)
    parser.add_argument("--duration", type=float, default=60.0, help="seconds (upper bound)")
    parser.add_argument("--max-requests", type=int, default=1_000_000, help="request budget")
    parser.add_argument("--page-size", type=int, default=100)
    parser.add_argument("--pages", type=int, default=5, help="pages per client session")
    parser.add_argument(
        "--think",
        type=float,
        default=2.0,
        help="mean pause (s) between a client's sessions; 0 = closed loop",
    )
    parser.add_argument(
        "--readers", default="2",
        help="server reader threads per process (0: inline); a comma list gives one per "
        "--workers entry",
    )  # fmt: skip
    parser.add_argument(
        "--requests-per-second", type=float, default=0.0,
        help="the server's per-address request budget (0: off; all clients share one address)",
    )  # fmt: skip
    parser.add_argument(
        "--workers", default=f"1,{os.cpu_count() or 1}",
        help="server runs, one per [server] workers value (default: 1, then the cores)",
    )  # fmt: skip
    parser.add_argument(
        "--rounds", type=int, default=1,
        help="repeat the --workers runs, alternating; req/s compared as medians",
    )  # fmt: skip
    parser.add_argument("--samples", type=int, default=2000, help="requests replayed for baselines")
    parser.add_argument("--json", action="store_true", help="print one JSON document")
    return parser.parse_args()


@dataclass
class ServerRun:
    """What the load did to the server process: CPU seconds and memory (MB)."""

    stats: Stats
    elapsed: float
    server_cpu: float
    own_cpu: float
    rss_start: dict[str, float]
    rss_end: dict[str, float]
    peak: list[int]


def load_server(
    store: Path, args: argparse.Namespace, topics: list[str], t0: int, workers: int = 1,
    readers: int = 2,
) -> ServerRun:  # fmt: skip
    """Start the bridge on ``store`` as its own process(es), hold the load, stop it."""
    workdir = Path(tempfile.mkdtemp(prefix="waku-legacy-load-"))
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    server = start_server(
        store, workdir, port, readers, clients=args.clients, rate=args.requests_per_second,
        workers=workers,
    )  # fmt: skip
    peak = [0, 0]
    try:
        asyncio.run(wait_ready(base, server, workers))
        rss_start = rss_now(server.pid)
        print(
            f"load: {args.clients} clients, up to {args.duration:.0f} s / "
            f"{args.max_requests:,} requests, think {args.think} s…",
            file=sys.stderr,
        )
        server_cpu = process_cpu(server.pid)
        own_cpu = time.process_time()
        stats, elapsed = asyncio.run(run_load(base, args, topics, t0, server.pid, peak))
        server_cpu = process_cpu(server.pid) - server_cpu
        rss_end = rss_now(server.pid)
        own_cpu = time.process_time() - own_cpu
    finally:
        server.send_signal(signal.SIGTERM)
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()
        shutil.rmtree(workdir, ignore_errors=True)
    return ServerRun(stats, elapsed, server_cpu, own_cpu, rss_start, rss_end, peak)


def baselines(store: Path, samples: list[dict[str, str]]) -> tuple[list[float], list[float]]:
    """The same pages (a sample of the requests made) replayed here: raw SQLite, and the
    bridge's store + JSON page function."""
    from waku_legacy.store import open_store

    db = sqlite3.connect(store)
    db.execute(f"PRAGMA mmap_size={MMAP}")  # as the server's store URL asks
    raw = time_calls(lambda p: raw_sqlite_page(db, p), samples)
    raw = time_calls(lambda p: raw_sqlite_page(db, p), samples)  # second pass: warm cache
    db.close()
    with open_store(f"sqlite:///{store}?mmap_size={MMAP}") as opened:
        store_json = time_calls(lambda p: store_json_page(opened, p), samples)
    return raw, store_json


def run_result(workers: int, run: ServerRun) -> dict[str, Any]:
    stats, elapsed = run.stats, run.elapsed
    rss_start, rss_end, peak = run.rss_start, run.rss_end, run.peak
    http_summary = summary(stats.latencies)
    return {
        "workers": workers, "seconds": round(elapsed, 2),
        "requests": len(stats.latencies), "requests_per_s": len(stats.latencies) / elapsed,
        "messages_per_s": stats.messages / elapsed, "errors": stats.errors,
        "statuses": stats.statuses, "connection_errors": stats.connection_errors,
        "http": http_summary,
        "server_cpu_percent": 100 * run.server_cpu / elapsed,
        "load_generator_cpu_percent": 100 * run.own_cpu / elapsed,
        "target_met": http_summary["p99_ms"] < 50.0,
        "load_average": os.getloadavg(),
        "server_rss_mb": {"start": rss_start["VmRSS"], "peak": peak[0] / 2**20,
                          "end": rss_end["VmRSS"], "anon_start": rss_start["RssAnon"],
                          "anon_peak": peak[1] / 2**20, "anon_end": rss_end["RssAnon"],
                          "file_end": rss_end["RssFile"]},
    }  # fmt: skip


def main() -> int:
    args = parse_args()
    topics = content_topics(args.topics)
    t0 = 1_700_000_000
    store = args.store or Path(tempfile.gettempdir()) / f"waku-legacy-load-{args.messages}.sqlite3"
    count = store_count(store)
    if count != args.messages:
        print(f"building {store} ({args.messages:,} messages)…", file=sys.stderr)
        build_store(store, args.messages, topics, args.payload_size, t0)

    counts = [int(w) for w in args.workers.split(",")]
    threads = [int(r) for r in args.readers.split(",")]
    threads = threads if len(threads) == len(counts) else threads[:1] * len(counts)
    runs: list[dict[str, Any]] = []
    samples: list[dict[str, str]] = []
    for round_number in range(args.rounds):  # alternated: a busy spell hits both alike
        for workers, readers in zip(counts, threads, strict=True):
            print(f"round {round_number + 1}: server with workers = {workers}…", file=sys.stderr)
            run = load_server(store, args, topics, t0, workers, readers)
            samples = samples or run.stats.samples
            runs.append(run_result(workers, run) | {"readers": readers})
    raw, store_json = baselines(store, samples)
    median_rps = {
        w: statistics.median(r["requests_per_s"] for r in runs if r["workers"] == w) for w in counts
    }
    result = {
        "store": str(store), "messages": args.messages, "clients": args.clients,
        "think_s": args.think, "page_size": args.page_size, "cpus": os.cpu_count(),
        "readers": args.readers, "runs": runs, "raw_sqlite": summary(raw),
        "store_json": summary(store_json), "baseline_pages": len(samples),
        "target_p99_ms": 50.0, "median_requests_per_s": median_rps,
        "speedup": median_rps[counts[-1]] / median_rps[counts[0]],
    }  # fmt: skip
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        print_report(args, result)
    return 1 if any(r["errors"] for r in runs) else 0


def print_report(args: argparse.Namespace, result: dict[str, Any]) -> None:
    """The human-readable summary: one block per server run, then the baselines."""
    print(
        f"store {args.messages:,} messages, {args.clients} clients, think {args.think} s, "
        f"{args.page_size}-message pages, {os.cpu_count()} CPUs"
    )
    header = f"  {'':34}{'p50':>9}{'p90':>9}{'p99':>9}{'max':>9}  (ms)"
    first = result["runs"][0]
    for run in result["runs"]:
        rss = run["server_rss_mb"]
        load = "/".join(f"{x:.2f}" for x in run["load_average"])
        print(f"workers = {run['workers']}, reader_threads = {run['readers']} "
              f"({run['seconds']:.1f} s, load average {load} after)")  # fmt: skip
        print(f"  HTTP    {run['requests']:>8,} requests  {run['requests_per_s']:8.1f} req/s"
              f"  {run['messages_per_s']:10.0f} msgs/s  errors {run['errors']}"
              f"  ({run['requests_per_s'] / first['requests_per_s']:.2f}x workers = "
              f"{first['workers']})")  # fmt: skip
        print(header)
        s = run["http"]
        print(f"  {'HTTP latency (client-side)':34}{s['p50_ms']:9.2f}{s['p90_ms']:9.2f}"
              f"{s['p99_ms']:9.2f}{s['max_ms']:9.2f}")  # fmt: skip
        print(
            f"  server RSS (all processes): start {rss['start']:.1f} MB, peak "
            f"{rss['peak']:.1f} MB, end {rss['end']:.1f} MB; heap (RssAnon) peak "
            f"{rss['anon_peak']:.1f} MB, mapped store file (RssFile) {rss['file_end']:.1f} MB"
        )
        per_cpu = run["requests_per_s"] / max(run["server_cpu_percent"] / 100, 1e-9)
        print(f"  CPU: server {run['server_cpu_percent']:.0f}%, load generator "
              f"{run['load_generator_cpu_percent']:.0f}% (100% = one core); "
              f"{per_cpu:.0f} requests per server CPU-second")  # fmt: skip
        print(f"  target p99 < 50 ms: {'met' if run['target_met'] else 'NOT met'}")
    print(f"baselines on {result['baseline_pages']} of the pages served, in this process:")
    print(header)
    for label, key in (("store+JSON (server work, no HTTP)", "store_json"),
                       ("raw SQLite (same pages)", "raw_sqlite")):  # fmt: skip
        s = result[key]
        print(f"  {label:34}{s['p50_ms']:9.2f}{s['p90_ms']:9.2f}{s['p99_ms']:9.2f}"
              f"{s['max_ms']:9.2f}")  # fmt: skip
    medians = result["median_requests_per_s"]
    last = result["runs"][-1]["workers"]
    print(f"requests/s (median of {args.rounds} run(s) each): "
          + ", ".join(f"workers = {w}: {rps:.1f}" for w, rps in medians.items())
          + f"; workers = {last} over workers = {first['workers']}: "
          f"{result['speedup']:.2f}x")  # fmt: skip


if __name__ == "__main__":
    sys.exit(main())
