"""Hostile libp2p peers against a real bridge (``waku-legacy serve`` with ``[libp2p]`` at
its default limits), each attack beside an honest store client, in one run:

    .venv/bin/python bench/hostile_p2p.py                  # every attack, ~10 s each
    .venv/bin/python bench/hostile_p2p.py --seconds 5 --json

The bridge serves a SQLite v2 store (``bench/load_store.py``'s, ``--messages`` messages).
First the baseline: ``--queries``-long series of honest store v3 queries from 127.0.0.1, 10 a
second, a new connection each (TCP, Noise, yamux, as go-waku's store client dials; by default
tests/p2p_attacks.py's ``raw_query``, a few ms a query, so that its latency is the server's;
``--honest native``: the project's own client, NativeClient) with nobody attacking.
Then, per attack from 127.0.0.2 (a separate address on loopback), the same honest series
while it runs: 250 idle TCP connections, 300 Noise handshakes abandoned after their first
message (both re-opened as dropped), six multistream-select messages announcing 2^31 bytes,
yamux DATA past the receive window (400 MB offered), 30 connections cut mid-frame; and
issue 37's, from a dialler of its own (``RawLibp2p``: Noise on the ``noiseprotocol``
package, yamux by hand) that reads TCP but never grants yamux window:
ping echoes offered up to 150 MB, twelve store pages of 100 messages of 150 KB (a topic of
100 such messages is added to the store), then connection cycling with a ``/ws`` upgrade whose
Host holds bytes 0x80-0xFF, Noise identity keys on a curve ``cryptography`` does not know,
RSA-3072 keys with a 3071-bit exponent, and store queries that fail (an all-zero cursor),
a stream each. Printed per attack: the server's RSS before, at its peak and after
(process tree, VmRSS), the honest p50/p99/max latency and failures, against the baseline,
the lines the server logged (JSON), the server's CPU seconds per second
while the attack ran (its loop and workers), and the machine's load average.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from load_p2p_store import _info  # noqa: E402
from load_store import (  # noqa: E402
    NS,
    build_store,
    content_topics,
    free_port,
    percentile,
    process_cpu,
    process_rss,
    pubsub_of,
    wait_ready,
)

from tests.p2p_attacks import (  # noqa: E402
    ATTACKER,
    NOISE_FIRST_MESSAGE,
    PING,
    ConnectionFlood,
    RawLibp2p,
    connect_from,
    ecdsa_key_on_unknown_curve,
    frame_of,
    ms_line,
    multistream_bomb,
    raw_query,
    rsa_key,
    store_v3_request,
    tcp_target,
    websocket_upgrade,
    yamux_past_window,
)

T0 = 1_700_000_000
MB = 2**20
STORE_V3 = "/vac/waku/store-query/3.0.0"


LARGE_TOPIC = "/bench/1/large/proto"
LARGE_BYTES = 150_000


def add_large_messages(store: Path, count: int = 100) -> None:
    """``count`` messages of 150 KB (Waku's largest) on LARGE_TOPIC: a page of them is
    15 MB, past any yamux window."""
    import random

    from waku_legacy.identity.message_hash import deterministic_hash
    from waku_legacy.store import StoredMessage, open_store

    rnd = random.Random(7)
    pubsub = pubsub_of(0)
    rows = []
    for n in range(count):
        payload, ts = rnd.randbytes(LARGE_BYTES), (T0 + n) * NS
        digest = deterministic_hash(pubsub, payload, LARGE_TOPIC, b"", ts)
        rows.append(StoredMessage(digest, pubsub, LARGE_TOPIC, payload, 1, ts))
    with open_store(f"sqlite:///{store}") as db:
        db.insert_messages(rows)


def start_server(store: Path, workdir: Path) -> tuple[Any, int, int]:
    import subprocess

    rest_port, p2p_port, ws_port = free_port(), free_port(), free_port()
    config = workdir / "bridge.toml"
    config.write_text(
        f'[server]\nlisten = "127.0.0.1:{rest_port}"\nworkers = 1\n'
        f'[store]\nurl = "sqlite:///{store}"\n'
        f'[libp2p]\nlisten = ["/ip4/127.0.0.1/tcp/{p2p_port}", "/ip4/127.0.0.1/tcp/{ws_port}/ws"]\n'
        'key_file = "libp2p.key"\n'
        '[logging]\nlevel = "warning"\n'
    )
    cmd = [sys.executable, "-m", "waku_legacy.cli", "serve", "--config", str(config)]
    with open(workdir / "server.log", "wb") as log:  # the child keeps its own copy
        server = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=log)
    return server, rest_port, p2p_port


def log_lines(workdir: Path, since: int) -> tuple[int, int, int]:
    """(lines the server logged after byte ``since``, of them py-libp2p's, the new end)."""
    data = (workdir / "server.log").read_bytes()
    lines = data[since:].splitlines()
    return len(lines), sum(1 for line in lines if b'"logger": "libp2p' in line), len(data)


def honest_series(
    address: str, count: int, topics: list[str], client: str = "raw", rate: float = 10.0
) -> tuple[list[float], int]:
    """``count`` store v3 queries, a new connection each, ``rate`` a second at most (a new
    connection each is a handshake each: under ``address_handshakes_per_second``, 20):
    latencies (s) and failures.
    ``client``: ``raw`` (tests/p2p_attacks.py's dialler, a few ms a query: its latency is
    the server's) or ``native`` (the project's own client, NativeClient)."""
    from waku_legacy.p2p.store_client import (
        STORE_V3_CODEC,
        StoreQueryArgs,
        build_request,
        decode_response,
    )
    from waku_legacy.p2p.transport.native_client import NativeClient

    latencies: list[float] = []
    failures = 0

    async def one(n: int) -> None:
        query = StoreQueryArgs(
            pubsub_topic=pubsub_of(n % len(topics)), content_topics=[topics[n % len(topics)]],
            page_size=20, time_start=T0 * NS,
        )  # fmt: skip
        async with NativeClient.dial(address, timeout=20) as client:
            page = decode_response(await client.request(STORE_V3_CODEC, build_request(query)))
            if page.status_code != 200:
                raise RuntimeError(f"status {page.status_code}")

    def raw(n: int) -> None:
        request = store_v3_request(
            f"honest {n}", pubsub_of(n % len(topics)), topics[n % len(topics)]
        )
        page = decode_response(raw_query(tcp_target(address), STORE_V3_CODEC, request))
        if page.status_code != 200:
            raise RuntimeError(f"status {page.status_code}")

    for n in range(count):
        started = time.perf_counter()
        next_start = started + 1.0 / rate
        try:
            if client == "raw":
                raw(n)
            else:
                asyncio.run(one(n))
            latencies.append(time.perf_counter() - started)
        except Exception:
            failures += 1
        time.sleep(max(0.0, next_start - time.perf_counter()))
    return latencies, failures


def _peer_addresses(base: str) -> tuple[str, str]:
    """The TCP and the /ws multiaddr the bridge listens on."""
    info = asyncio.run(_info(base))
    addresses = info["listenAddresses"]
    tcp = next(a for a in addresses if "/tcp/" in a and "/ws" not in a)
    return str(tcp), str(next(a for a in addresses if "/ws" in a))


class RssPeak:
    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.peak = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> RssPeak:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        while not self._stop.is_set():
            self.peak = max(self.peak, process_rss(self.pid))
            self._stop.wait(0.1)


def attacks(
    address: str, ws_address: str, seconds: float
) -> dict[str, Callable[[threading.Event], str]]:
    target = tcp_target(address)

    def flood(count: int, first: bytes) -> Callable[[threading.Event], str]:
        def run(stop: threading.Event) -> str:
            with ConnectionFlood(target, count, first=first) as attack:
                stop.wait(seconds)
            return f"{attack.stats.opened} opened, {attack.stats.dropped_by_server} dropped"

        return run

    def bombs(stop: threading.Event) -> str:
        results: list[tuple[int, bool]] = []

        def one() -> None:
            results.append(multistream_bomb(target, seconds=seconds))

        threads = [threading.Thread(target=one) for _ in range(6)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        closed = sum(1 for _, c in results if c)
        return f"{closed}/6 closed by the server, {sum(s for s, _ in results) / MB:.0f} MB sent"

    def past_window(stop: threading.Event) -> str:
        import trio

        sent, code = trio.run(lambda: yamux_past_window(address, total=400 * MB, seconds=seconds))
        return f"{sent / MB:.1f} MB sent of 400, GO_AWAY {code}"

    def cut_mid_frame() -> None:
        # yamux_cut_mid_frame's attack from the attacker's address (py-libp2p's dial
        # cannot choose it, and would share the honest client's handshakes per second)
        peer = RawLibp2p(target)
        try:
            peer.noise()
            peer.write(ms_line("/multistream/1.0.0") + ms_line("/yamux/1.0.0") + b"\0\0\0")
        finally:
            peer.close()

    def log_flood(stop: threading.Event) -> str:
        import trio

        async def cuts() -> int:
            n = 0
            deadline = time.monotonic() + seconds
            while time.monotonic() < deadline and n < 300:
                try:
                    await trio.to_thread.run_sync(cut_mid_frame)
                except OSError:  # refused: over the address's handshakes per second
                    await trio.sleep(0.05)
                    continue
                n += 1
            return n

        return f"{trio.run(cuts)} connections cut mid-frame"

    def shut_window_ping(stop: threading.Event) -> str:
        peer = RawLibp2p(target)
        peer.noise()
        peer.yamux()
        sid = peer.open_stream(PING)
        chunk = b"p" * 65536
        deadline = time.monotonic() + seconds
        try:
            while peer.sent[sid] < 150 * MB and time.monotonic() < deadline:
                if sid in peer.rst or peer.closed:
                    break
                room = min(peer.credit(sid), len(chunk))
                if room > 0:
                    peer.send(sid, chunk[:room])
                else:
                    time.sleep(0.005)
            stop.wait(max(0.0, deadline - time.monotonic()))
        finally:
            peer.close()
        return f"{peer.sent[sid] / MB:.1f} MB offered, reset {sid in peer.rst}"

    def shut_window_pages(stop: threading.Event) -> str:
        peer = RawLibp2p(target)
        peer.noise()
        peer.yamux()
        request = store_v3_request("pages", pubsub_of(0), LARGE_TOPIC, limit=100)
        streams = [peer.open_stream(STORE_V3, frame_of(request)) for _ in range(12)]
        stop.wait(seconds)
        peer.close()
        return f"{len(set(streams) & peer.rst)}/12 streams reset, connection closed {peer.closed}"

    def cycling(connect: Callable[[], None]) -> Callable[[threading.Event], str]:
        def run(stop: threading.Event) -> str:
            done = 0
            deadline = time.monotonic() + seconds
            while not stop.is_set() and time.monotonic() < deadline:
                try:
                    connect()
                except OSError:
                    time.sleep(0.01)  # refused: over the address's rate
                done += 1
            return f"{done} connections"

        return run

    def ws_non_ascii() -> None:
        with connect_from(ATTACKER, tcp_target(ws_address)) as sock:
            sock.sendall(websocket_upgrade(b"\xff\xfe.example"))
            sock.settimeout(5)
            while sock.recv(4096):
                pass

    def handshake(key: bytes) -> Callable[[], None]:
        def run() -> None:
            peer = RawLibp2p(target, identity=(key, None))
            try:
                peer.noise(signature=b"\x01" * 64)
                peer.closed_by_server(5.0)
            finally:
                peer.close()

        return run

    def failed_queries(stop: threading.Event) -> str:
        peer = RawLibp2p(target)
        peer.noise()
        peer.yamux()
        sent = 0
        deadline = time.monotonic() + seconds
        try:
            while not stop.is_set() and time.monotonic() < deadline and not peer.closed:
                request = store_v3_request(
                    f"free-form {sent}", pubsub_of(0), LARGE_TOPIC, cursor=bytes(32)
                )
                peer.open_stream(STORE_V3, frame_of(request))
                sent += 1
                time.sleep(0.01)
        finally:
            peer.close()
        return f"{sent} failing queries"

    return {
        "250 idle TCP connections": flood(250, b""),
        "300 abandoned Noise handshakes": flood(300, NOISE_FIRST_MESSAGE),
        "6 x multistream length 2^31": bombs,
        "yamux DATA past the window": past_window,
        "py-libp2p log flood": log_flood,
        "shut window: ping 150 MB": shut_window_ping,
        "shut window: 12 x 15 MB pages": shut_window_pages,
        "/ws non-ASCII Host, cycling": cycling(ws_non_ascii),
        "unknown-curve identity, cycling": cycling(handshake(ecdsa_key_on_unknown_curve())),
        "RSA-3072 e 3071 bits, cycling": cycling(handshake(rsa_key(3072, (1 << 3070) + 1))),
        "failing store queries": failed_queries,
    }


def _run_into(
    attack: Callable[[threading.Event], str], stop: threading.Event, out: list[str]
) -> None:
    out.append(attack(stop))


def summary(latencies: list[float], failures: int) -> dict[str, Any]:
    if not latencies:
        return {"answered": 0, "failed": failures}
    return {
        "answered": len(latencies), "failed": failures,
        "p50_s": round(percentile(latencies, 0.5), 3),
        "p99_s": round(percentile(latencies, 0.99), 3), "max_s": round(max(latencies), 3),
    }  # fmt: skip


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--messages", type=int, default=20_000)
    parser.add_argument("--queries", type=int, default=20, help="honest queries per series")
    parser.add_argument("--seconds", type=float, default=10.0, help="each attack's length")
    parser.add_argument(
        "--honest", choices=("raw", "native"), default="raw",
        help="the honest client: RawLibp2p (ms a query) or the project's own NativeClient",
    )  # fmt: skip
    parser.add_argument(
        "--only", nargs="*", default=[], help="attacks whose name holds one of these words",
    )  # fmt: skip
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()

    topics = content_topics(50)
    with tempfile.TemporaryDirectory(prefix="hostile-p2p-") as tmp:
        workdir = Path(tmp)
        store = workdir / "store.db"
        build_store(store, args.messages, topics, 200, T0)
        add_large_messages(store)
        server, rest_port, _ = start_server(store, workdir)
        try:
            asyncio.run(wait_ready(f"http://127.0.0.1:{rest_port}", server))
            address, ws_address = _peer_addresses(f"http://127.0.0.1:{rest_port}")
            honest_series(address, 3, topics, args.honest)  # warm-up: imports, store pages cached
            result: dict[str, Any] = {"load_average": os.getloadavg()}
            rss = process_rss(server.pid)
            latencies, failures = honest_series(address, args.queries, topics, args.honest)
            result["baseline"] = {
                "honest": summary(latencies, failures), "rss_mb": round(rss / MB, 1),
            }  # fmt: skip
            result["attacks"] = {}
            _, _, logged = log_lines(workdir, 0)
            chosen = attacks(address, ws_address, args.seconds)
            for name, attack in chosen.items():
                if args.only and not any(word in name for word in args.only):
                    continue
                before = process_rss(server.pid)
                cpu_before, started = process_cpu(server.pid), time.monotonic()
                stop = threading.Event()
                outcome: list[str] = []
                attacker = threading.Thread(target=_run_into, args=(attack, stop, outcome))
                with RssPeak(server.pid) as peak:
                    attacker.start()
                    time.sleep(min(2.0, args.seconds / 4))  # the attack under way
                    latencies, failures = honest_series(address, args.queries, topics, args.honest)
                    stop.set()
                    attacker.join()
                busy = (process_cpu(server.pid) - cpu_before) / (time.monotonic() - started)
                time.sleep(1.0)
                after = process_rss(server.pid)
                lines, library, logged = log_lines(workdir, logged)
                result["attacks"][name] = {
                    "log_lines": lines,
                    "log_lines_py_libp2p": library,
                    "attack": outcome[0] if outcome else "failed",
                    "server_cpu_share": round(busy, 2),
                    "honest": summary(latencies, failures),
                    "rss_before_mb": round(before / MB, 1),
                    "rss_peak_mb": round(max(peak.peak, after) / MB, 1),
                    "rss_after_mb": round(after / MB, 1),
                    "rss_growth_mb": round((max(peak.peak, after) - before) / MB, 1),
                }
                if server.poll() is not None:
                    raise SystemExit(f"the server died during {name!r}")
            result["load_average_end"] = os.getloadavg()
        finally:
            server.terminate()
            server.wait(10)
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        print_report(result)
    return 0


def _latencies(honest: dict[str, Any]) -> str:
    return f"{honest.get('p50_s', '-')}/{honest.get('p99_s', '-')}/{honest.get('max_s', '-')}"


def print_report(result: dict[str, Any]) -> None:
    base = result["baseline"]
    print(f"load average at start {result['load_average']}, end {result['load_average_end']}")
    print(f"{'attack':32} {'RSS before/peak/after MB':>26} {'honest p50/p99/max s':>22} ok/failed")
    h = base["honest"]
    print(
        f"{'(none: baseline)':32} {base['rss_mb']:>26} "
        f"{_latencies(h):<21} {h['answered']}/{h['failed']}"
    )
    for name, row in result["attacks"].items():
        h = row["honest"]
        rss = f"{row['rss_before_mb']}/{row['rss_peak_mb']}/{row['rss_after_mb']}"
        print(f"{name:32} {rss:>26} {_latencies(h):<21} {h['answered']}/{h['failed']}")
        print(
            f"{'':32}   {row['attack']}; server CPU {row['server_cpu_share']:.0%}; "
            f"server log: {row['log_lines']} lines "
            f"({row['log_lines_py_libp2p']} py-libp2p)"
        )


if __name__ == "__main__":
    raise SystemExit(main())
