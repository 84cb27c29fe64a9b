"""Store queries over libp2p beside the REST API, on the same store, in one run.

    .venv/bin/python bench/load_p2p_store.py                    # 100k messages, 2 x 20 s
    .venv/bin/python bench/load_p2p_store.py --duration 5       # a quick run
    .venv/bin/python bench/load_p2p_store.py --clients 50 --muxer mplex

One bridge process (``waku-legacy serve``, REST in the primary only: ``[server] workers = 1``,
``[libp2p]`` on a loopback TCP port) serves a SQLite v2 store of ``--messages`` messages
(built and reused exactly as ``bench/load_store.py`` does, whose helpers this imports). The
same ``--clients`` clients then load it twice, one protocol after the other, for
``--duration`` seconds each (closed loop, no think time):

- REST: aiohttp, ``GET /store/v3/messages`` with ``includeData=true``, following
  ``paginationCursor``;
- libp2p: one connection per client (``--client``: the project's own dialler, or a
  py-libp2p node, the tests' peer; TCP, Noise, yamux or mplex),
  a ``StoreQueryRequest`` per page on ``/vac/waku/store-query/3.0.0`` (one stream each, as
  go-waku and js-waku do; the protocol selected lazily, in the request's write, as go-libp2p
  does for a protocol the peer announced), following ``pagination_cursor``.

Each client pages through up to ``--pages`` pages of ``--page-size`` messages of a random
content topic from a random start time and direction, then starts over; both protocols get
the same sequence of sessions (same seeds). Printed per protocol: requests/s, messages/s,
p50/p90/p99/max latency, errors (non-200 answers, failed requests), the server's CPU
seconds per request and the load generators' (this process's; for libp2p including the
connections' set-up), and the machine's load average. The server answers both from the
same reader threads' store code (``reader_threads`` = ``[libp2p] workers`` = ``--readers``).

The load generators run in this process and share the machine's cores with the server;
with ``--client py-libp2p`` (pure-Python yamux/mplex framing and Noise transport) its own
CPU cost is part of what the libp2p latency shows.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp

sys.path.insert(0, str(Path(__file__).resolve().parent))
from load_store import (
    MMAP,
    NS,
    SPAN,
    build_store,
    content_topics,
    free_port,
    process_cpu,
    pubsub_of,
    store_count,
    summary,
    wait_ready,
)

T0 = 1_700_000_000


@dataclass
class Stats:
    latencies: list[float] = field(default_factory=list)
    errors: int = 0
    messages: int = 0


@dataclass(frozen=True)
class Session:
    pubsub: str
    content: str
    forward: bool
    edge_ns: int


def sessions(number: int, topics: list[str]) -> Any:
    """Client ``number``'s endless sequence of sessions (the same for both protocols)."""
    rnd = random.Random(number)
    while True:
        t = rnd.randrange(len(topics))
        yield Session(
            pubsub_of(t), topics[t], rnd.random() < 0.5, T0 * NS + rnd.randrange(SPAN) * NS
        )


def start_server(
    store: Path, workdir: Path, args: argparse.Namespace, server_side: str
) -> tuple[Any, int, int]:
    rest_port, p2p_port = free_port(), free_port()
    config = workdir / "bridge.toml"
    config.write_text(
        f'[server]\nlisten = "127.0.0.1:{rest_port}"\nreader_threads = {args.readers}\n'
        f"workers = 1\nmax_connections_per_address = {args.clients + 16}\n"
        "requests_per_second = 0\n"
        f'[store]\nurl = "sqlite:///{store}?mmap_size={MMAP}"\n'
        f'[libp2p]\nlisten = ["/ip4/127.0.0.1/tcp/{p2p_port}"]\nkey_file = "libp2p.key"\n'
        f"workers = {args.readers}\nmax_connections = {args.clients + 16}\n"
        f"max_connections_per_address = {args.clients + 16}\nrequests_per_second = 0\n"
        f"max_handshakes_per_address = {args.clients + 16}\n"  # every client dials at once
        "address_share = 1.0\n"  # ... from one address
        "address_handshakes_per_second = 0\nreserved_share = 0\n"  # ... that holds the rest
        "address_requests_per_second = 0\n"
        f'server = "{server_side}"\n'
        '[logging]\nlevel = "warning"\n'
    )
    cmd = [sys.executable, "-m", "waku_legacy.cli", "serve", "--config", str(config)]
    server = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    return server, rest_port, p2p_port


# -- REST clients --------------------------------------------------------------------------------


async def rest_client(
    number: int, http: aiohttp.ClientSession, base: str, args: argparse.Namespace,
    topics: list[str], stats: Stats, stop: asyncio.Event,
) -> None:  # fmt: skip
    for session in sessions(number, topics):
        params = {
            "pubsubTopic": session.pubsub, "contentTopics": session.content,
            "includeData": "true", "pageSize": str(args.page_size),
            "ascending": "true" if session.forward else "false",
            "startTime" if session.forward else "endTime": str(session.edge_ns),
        }  # fmt: skip
        for _ in range(args.pages):
            if stop.is_set():
                return
            started = time.perf_counter()
            try:
                async with http.get(base + "/store/v3/messages", params=params) as response:
                    doc = await response.json()
                    ok = response.status == 200
            except (aiohttp.ClientError, OSError, TimeoutError):
                stats.errors += 1
                break
            stats.latencies.append(time.perf_counter() - started)
            if not ok:
                stats.errors += 1
                break
            stats.messages += len(doc["messages"])
            cursor = doc.get("paginationCursor")
            if cursor is None:
                break
            params["cursor"] = cursor


async def rest_load(base: str, args: argparse.Namespace, topics: list[str]) -> tuple[Stats, float]:
    stats, stop = Stats(), asyncio.Event()
    connector = aiohttp.TCPConnector(limit=args.clients)
    async with aiohttp.ClientSession(
        connector=connector, timeout=aiohttp.ClientTimeout(total=30)
    ) as http:
        started = time.perf_counter()
        tasks = [
            asyncio.create_task(rest_client(n, http, base, args, topics, stats, stop))
            for n in range(args.clients)
        ]
        await asyncio.sleep(args.duration)
        stop.set()
        await asyncio.gather(*tasks)
    return stats, time.perf_counter() - started


# -- libp2p clients -------------------------------------------------------------------------------


async def store_sessions(
    number: int,
    request: Callable[[str, bytes], Awaitable[bytes]],
    args: argparse.Namespace,
    topics: list[str],
    stats: Stats,
    stopped: Callable[[], bool],
) -> None:
    """Client ``number``'s sessions of store v3 pages over ``request`` (any libp2p client,
    trio or asyncio) until ``stopped()``."""
    from waku_legacy.p2p.store_client import (
        STORE_V3_CODEC,
        StoreQueryArgs,
        build_request,
        decode_response,
    )

    for session in sessions(number, topics):
        query = StoreQueryArgs(
            pubsub_topic=session.pubsub, content_topics=[session.content],
            forward=session.forward, page_size=args.page_size,
            time_start=session.edge_ns if session.forward else None,
            time_end=None if session.forward else session.edge_ns,
        )  # fmt: skip
        cursor = None
        for _ in range(args.pages):
            if stopped():
                return
            started = time.perf_counter()
            try:
                page = decode_response(await request(STORE_V3_CODEC, build_request(query, cursor)))
            except Exception:
                stats.errors += 1
                break
            stats.latencies.append(time.perf_counter() - started)
            if page.status_code != 200:
                stats.errors += 1
                break
            stats.messages += len(page.messages)
            if not page.HasField("pagination_cursor"):
                break
            cursor = page.pagination_cursor


def p2p_load(address: str, args: argparse.Namespace, topics: list[str]) -> tuple[Stats, float]:
    import trio

    from tests.p2p_pylibp2p.client import P2PClient

    stats = Stats()

    connected = [0]
    deadline = [float("inf")]

    async def one(number: int) -> None:
        async with P2PClient.dial(address, muxers=(args.muxer,), timeout=60) as client:
            connected[0] += 1
            while deadline[0] == float("inf"):  # every client connected before the clock
                await trio.sleep(0.01)
            await store_sessions(
                number, client.request, args, topics, stats,
                lambda: trio.current_time() >= deadline[0],
            )  # fmt: skip

    async def main() -> float:
        async with trio.open_nursery() as nursery:
            for n in range(args.clients):
                nursery.start_soon(one, n)
            while connected[0] < args.clients:
                await trio.sleep(0.05)
            started = time.perf_counter()
            deadline[0] = trio.current_time() + args.duration
        return time.perf_counter() - started

    elapsed = trio.run(main)
    return stats, elapsed


class _NativeClient(asyncio.Protocol):
    """One connection of the project's own dialler (waku_legacy.p2p.codec.dialler), a light load
    generator: what py-libp2p's client costs per request is not the server's."""

    def __init__(self, muxer: str) -> None:
        from waku_legacy.crypto.secp256k1 import generate_private_key
        from waku_legacy.p2p.codec.dialler import DiallerConnection
        from waku_legacy.p2p.transport.native import noise_identity

        self.conn = DiallerConnection(noise_identity(generate_private_key()), muxer)
        self.transport: asyncio.Transport | None = None
        self.ready = asyncio.get_running_loop().create_future()
        self.waiting: dict[int, asyncio.Future[Any]] = {}

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        transport.write(self.conn.data_to_send())

    def data_received(self, data: bytes) -> None:
        assert self.transport is not None
        answers = self.conn.receive(data)
        out = self.conn.data_to_send()
        if out:
            self.transport.write(out)
        if self.conn.ready and not self.ready.done():
            self.ready.set_result(None)
        for answer in answers:
            future = self.waiting.pop(answer.stream, None)
            if future is not None and not future.done():
                future.set_result(answer)

    def connection_lost(self, exc: Exception | None) -> None:
        error = ConnectionError(f"connection lost: {exc}")
        for future in [self.ready, *self.waiting.values()]:
            if not future.done():
                future.set_exception(error)

    async def request(self, protocol: str, body: bytes) -> bytes:
        assert self.transport is not None
        stream = self.conn.request(protocol, body)
        future = self.waiting[stream] = asyncio.get_running_loop().create_future()
        self.transport.write(self.conn.data_to_send())
        answer = await future
        if answer.error is not None:
            raise answer.error
        return bytes(answer.body)


def p2p_load_native(
    address: str, args: argparse.Namespace, topics: list[str]
) -> tuple[Stats, float]:
    from multiaddr import Multiaddr

    target = Multiaddr(address)
    host, port = target.value_for_protocol("ip4"), int(target.value_for_protocol("tcp"))
    stats = Stats()

    async def one(number: int, start: asyncio.Event, stop: asyncio.Event, up: list[int]) -> None:
        loop = asyncio.get_running_loop()
        _, client = await loop.create_connection(lambda: _NativeClient(args.muxer), host, port)
        await client.ready
        up[0] += 1
        await start.wait()
        try:
            await store_sessions(number, client.request, args, topics, stats, stop.is_set)
        finally:
            if client.transport is not None:
                client.transport.close()

    async def main() -> float:
        start, stop, up = asyncio.Event(), asyncio.Event(), [0]
        tasks = [asyncio.create_task(one(n, start, stop, up)) for n in range(args.clients)]
        while up[0] < args.clients:
            await asyncio.sleep(0.05)
        started = time.perf_counter()
        start.set()
        await asyncio.sleep(args.duration)
        stop.set()
        await asyncio.gather(*tasks)
        return time.perf_counter() - started

    elapsed = asyncio.run(main())
    return stats, elapsed


# -- main ------------------------------------------------------------------------------------------


def _own_cpu() -> float:
    """CPU seconds of this process (the load generators)."""
    times = os.times()
    return times.user + times.system


def result_of(stats: Stats, elapsed: float, server_cpu: float, client_cpu: float) -> dict[str, Any]:
    requests = len(stats.latencies)
    return {
        "requests": requests,
        "requests_per_s": requests / elapsed,
        "messages_per_s": stats.messages / elapsed,
        "errors": stats.errors,
        "server_cpu_ms_per_request": 1000 * server_cpu / max(1, requests),
        # the libp2p figure includes the clients' connection set-up (Noise handshakes)
        "client_cpu_ms_per_request": 1000 * client_cpu / max(1, requests),
        **summary(stats.latencies),
    }


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--messages", type=int, default=100_000)
    parser.add_argument("--store", type=Path, help="SQLite file (default: in the temp dir)")
    parser.add_argument("--topics", type=int, default=100)
    parser.add_argument("--payload-size", type=int, default=256)
    parser.add_argument("--clients", type=int, default=20)
    parser.add_argument("--duration", type=float, default=20.0, help="seconds per protocol")
    parser.add_argument("--page-size", type=int, default=100)
    parser.add_argument("--pages", type=int, default=5)
    parser.add_argument("--readers", type=int, default=2, help="server store threads")
    parser.add_argument("--muxer", choices=("yamux", "mplex"), default="yamux")
    parser.add_argument(
        "--rounds", type=int, default=1,
        help="REST and each server side loaded in turn this many times (the median round "
        "is the summary): other jobs on the machine change the load from minute to minute",
    )  # fmt: skip
    parser.add_argument(
        "--client", choices=("py-libp2p", "native"), default="native",
        help="the libp2p load generator: the project's own dialler (waku_legacy.p2p.codec.dialler "
        "on asyncio, about REST's client cost) or py-libp2p nodes (the tests' peer, "
        "tests/p2p_pylibp2p; needs the test extra)",
    )  # fmt: skip
    parser.add_argument(
        "--server", nargs="+", choices=("native",), default=["native"],
        help="the libp2p server side ([libp2p] server: only the project's own since "
        "py-libp2p's was removed on 2026-11-29); REST is loaded in the first process",
    )  # fmt: skip
    parser.add_argument("--json", action="store_true")
    return parser.parse_args()


def main() -> int:
    args = parse_args()
    topics = content_topics(args.topics)
    store = args.store or Path(tempfile.gettempdir()) / f"waku-legacy-load-{args.messages}.sqlite3"
    if store_count(store) != args.messages:
        print(f"building {store} ({args.messages:,} messages)…", file=sys.stderr)
        build_store(store, args.messages, topics, args.payload_size, T0)
    load = [os.getloadavg()[0]]
    runs: dict[str, list[dict[str, Any]]] = {"rest": [], **{side: [] for side in args.server}}
    servers: dict[str, tuple[Any, str, str]] = {}  # side -> (process, REST base, multiaddr)
    try:
        for side in args.server:  # all started first; each idles while another is loaded
            workdir = Path(tempfile.mkdtemp(prefix="waku-legacy-p2p-load-"))
            server, rest_port, p2p_port = start_server(store, workdir, args, side)
            base = f"http://127.0.0.1:{rest_port}"
            servers[side] = (server, base, "")
            asyncio.run(wait_ready(base, server))
            info = asyncio.run(_info(base))
            address = next(a for a in info["libp2p"]["multiaddrs"] if f"/tcp/{p2p_port}/" in a)
            servers[side] = (server, base, address)
        load_p2p = p2p_load if args.client == "py-libp2p" else p2p_load_native
        for _ in range(args.rounds):  # REST, then each server side, in turn
            server, base, _address = servers[args.server[0]]
            cpu0, own0 = process_cpu(server.pid), _own_cpu()
            rest_stats, rest_elapsed = asyncio.run(rest_load(base, args, topics))
            cpu1, own1 = process_cpu(server.pid), _own_cpu()
            load.append(os.getloadavg()[0])
            runs["rest"].append(result_of(rest_stats, rest_elapsed, cpu1 - cpu0, own1 - own0))
            for side in args.server:
                server, _base, address = servers[side]
                cpu1, own1 = process_cpu(server.pid), _own_cpu()
                p2p_stats, p2p_elapsed = load_p2p(address, args, topics)
                cpu2, own2 = process_cpu(server.pid), _own_cpu()
                load.append(os.getloadavg()[0])
                runs[side].append(result_of(p2p_stats, p2p_elapsed, cpu2 - cpu1, own2 - own1))
    finally:
        for server, _base, _address in servers.values():
            server.terminate()
            server.wait(timeout=30)
    result = {
        "store": str(store), "messages": args.messages, "clients": args.clients,
        "page_size": args.page_size, "pages": args.pages, "readers": args.readers,
        "muxer": args.muxer, "cpus": os.cpu_count(), "load_1min": load, "servers": args.server,
        "client": args.client, "rounds": runs,
        **{name: _median_run(parts) for name, parts in runs.items()},
    }  # fmt: skip
    rest = result["rest"]
    result["libp2p_vs_rest_throughput"] = {
        side: result[side]["requests_per_s"] / rest["requests_per_s"] for side in args.server
    }
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        print_report(result)
    return 1 if any(part["errors"] for parts in runs.values() for part in parts) else 0


def _median_run(parts: list[dict[str, Any]]) -> dict[str, Any]:
    """The round with the median throughput (its own latencies and CPU figures)."""
    ranked = sorted(parts, key=lambda part: part["requests_per_s"])
    return dict(ranked[len(ranked) // 2])


async def _info(base: str) -> Any:
    """``/debug/v1/info`` once the libp2p listener is up (``/health`` answers 200 earlier)."""
    async with aiohttp.ClientSession() as http:
        for _ in range(600):
            async with http.get(base + "/debug/v1/info") as response:
                info = await response.json()
            if info.get("libp2p"):
                return info
            await asyncio.sleep(0.1)
    raise SystemExit("the bridge did not start its libp2p listener")


def print_report(result: dict[str, Any]) -> None:
    print(
        f"store {result['store']}: {result['messages']:,} messages; {result['clients']} "
        f"clients, closed loop, pages of {result['page_size']} (up to {result['pages']} per "
        f"session); {result['readers']} store threads; {result['cpus']} cores; libp2p "
        f"client: {result['client']}"
    )
    names = ("rest", *result["servers"])
    rounds = len(result["rounds"]["rest"])
    rows = [(f"round {n + 1} ", name, result["rounds"][name][n]) for n in range(rounds)
            for name in names] if rounds > 1 else []  # fmt: skip
    rows += [("median " if rounds > 1 else "", name, result[name]) for name in names]
    for prefix, name, r in rows:
        kind = "REST (aiohttp)" if name == "rest" else f"{name} (TCP+Noise+{result['muxer']})"
        label = prefix + kind
        print(
            f"  {label:<36} {r['requests_per_s']:8.1f} req/s  {r['messages_per_s']:9.0f} msg/s  "
            f"p50 {r['p50_ms']:6.1f} ms  p90 {r['p90_ms']:6.1f}  p99 {r['p99_ms']:6.1f}  "
            f"max {r['max_ms']:6.1f}  errors {r['errors']}  "
            f"server CPU {r['server_cpu_ms_per_request']:.2f} ms/req  "
            f"client CPU {r['client_cpu_ms_per_request']:.2f} ms/req"
        )
    for side, ratio in result["libp2p_vs_rest_throughput"].items():
        print(f"  {side} / REST throughput: {ratio:.2f}x")
    print(
        "  load average (1 min) at the start and after each part: "
        + " ".join(f"{x:.2f}" for x in result["load_1min"])
    )


if __name__ == "__main__":
    raise SystemExit(main())
