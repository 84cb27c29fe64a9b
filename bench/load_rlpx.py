"""Load on the Waku v1 mailserver: honest history clients beside misbehaving peers.

    .venv/bin/python bench/load_rlpx.py                    # 100 honest + 20 misbehaving, < 2 min
    .venv/bin/python bench/load_rlpx.py --honest 50 --rounds 1 --json
    .venv/bin/python bench/load_rlpx.py --envelopes 50000 --page-size 100

What runs: this process writes an envelope dump of ``--envelopes`` envelopes spread over
``--channels`` channel topics and 30 days, starts the real ``waku-legacy v1 serve`` on it
as a SEPARATE process on loopback with its DEFAULT limits (the point: defaults never stop
honest use), then, at once:

- ``--honest`` peers, each from its own loopback address (127.0.1.x: a distinct host to the
  server), each pulling ``--rounds`` whole channels in pages of ``--page-size``, sending
  the next request as soon as a page completes (status-go's client), rotating the three
  request forms (plain, encrypted status-go order, encrypted spec order). A pull must get
  every envelope of the channel exactly once; any refusal, timeout, disconnect or mismatch
  is an honest error;
- ``--bad`` misbehaving peers in four kinds, each kind sharing two source addresses
  (127.0.9.x): request flooders (fresh requests, no pause, responses drained), live
  spammers (valid envelopes at the advertised PoW, ttl-0 "free PoW" ones, expired ones,
  as fast as the socket takes them, reconnecting when cut), stalled handshakes (TCP
  connections that send half an auth message, or nothing, reopened in a loop), and
  garbage senders (random bytes after a completed handshake, and before one, in a loop).

The misbehaving peers stop when the honest ones are done or after ``--duration`` seconds.

Printed: honest errors (the run exits 1 unless 0), honest pulls, envelopes received,
requests and their p50/p90/p99/max latency (request sent -> its 0x7d completion), what the
misbehaving peers saw (answered vs refused requests, envelopes sent, connections refused),
the server's own refusal counters (its stats line at SIGTERM), and the server's RSS after
loading the store and at the end.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from waku_legacy.crypto.keccak import keccak256
from waku_legacy.crypto.secp256k1 import generate_private_key
from waku_legacy.mailserver_compat.client.mailserver_client import (
    HistoryQuery,
    MailServerClient,
    RequestMode,
)
from waku_legacy.mailserver_compat.rlpx.asyncio_transport import PeerDisconnected
from waku_legacy.mailserver_compat.rlpx.connection import Connection, State
from waku_legacy.mailserver_compat.rlpx.enode import Enode
from waku_legacy.mailserver_compat.storage.dump import DumpWriter
from waku_legacy.mailserver_compat.waku_peer import connect
from waku_legacy.mailserver_compat.wire.envelope import Envelope
from waku_legacy.mailserver_compat.wire.pow import seal
from waku_legacy.mailserver_compat.wire.request import MessagesRequest, encode_plain_request
from waku_legacy.mailserver_compat.wire.waku_protocol import (
    WAKU_CAPABILITY,
    RequestCompleteReceived,
    StatusOptions,
)

T0 = 1_700_000_000
SPAN = 30 * 86_400
MODES = (RequestMode.PLAIN, RequestMode.ENVELOPE, RequestMode.ENVELOPE_SPEC)
NETWORK_ERRORS = (PeerDisconnected, OSError, TimeoutError, asyncio.IncompleteReadError)


def channel_topics(count: int) -> list[bytes]:
    return [keccak256(b"load-rlpx-channel-%d" % i)[:4] for i in range(count)]


def build_dump(path: Path, count: int, topics: list[bytes], seed: int) -> dict[bytes, int]:
    """The history; returns envelopes per topic."""
    rng = random.Random(seed)
    per_topic: dict[bytes, int] = dict.fromkeys(topics, 0)
    with DumpWriter(path) as writer:
        for i in range(count):
            topic = topics[i % len(topics)]
            sent = T0 + rng.randrange(SPAN)
            data = rng.randbytes(rng.randrange(100, 600))
            writer.append(Envelope(sent + 50, 50, topic, data, i).encode())
            per_topic[topic] += 1
    return per_topic


def rss_kib(pid: int) -> int:
    with open(f"/proc/{pid}/status", encoding="ascii") as fh:
        for line in fh:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


@dataclass
class Figures:
    honest_errors: list[str] = field(default_factory=list)
    honest_pulls: int = 0
    honest_envelopes: int = 0
    latencies: list[float] = field(default_factory=list)
    flood_answered: int = 0
    flood_refused: int = 0
    spam_sent: int = 0
    spam_connections: int = 0
    stalled_opened: int = 0
    stalled_closed_at_once: int = 0
    garbage_connections: int = 0
    connections_refused: int = 0


# -- honest ---------------------------------------------------------------------------------


async def honest_peer(
    index: int, enode: Enode, topics: list[bytes], expected: dict[bytes, int], args, fig: Figures
) -> None:
    host = f"127.0.{1 + index // 250}.{1 + index % 250}"
    mode = MODES[index % len(MODES)]
    try:
        async with MailServerClient(enode, local_host=host, request_timeout=30.0) as client:
            for round_ in range(args.rounds):
                topic = topics[(index + round_ * 7) % len(topics)]
                query = HistoryQuery(T0, T0 + SPAN, topics=(topic,), limit=args.page_size,
                                     mode=mode)  # fmt: skip
                seen: set[bytes] = set()
                cursor = b""
                while True:
                    started = time.perf_counter()
                    envelopes, complete = await client.request_page(query, cursor)
                    fig.latencies.append(time.perf_counter() - started)
                    if complete.failed:
                        fig.honest_errors.append(f"peer {index}: refused: {complete.error}")
                        return
                    for raw in envelopes:
                        digest = keccak256(raw)
                        if digest in seen:
                            fig.honest_errors.append(f"peer {index}: duplicate envelope")
                            return
                        seen.add(digest)
                    cursor = complete.cursor
                    if not cursor:
                        break
                if len(seen) != expected[topic]:
                    fig.honest_errors.append(
                        f"peer {index}: {len(seen)} of {expected[topic]} envelopes ({mode})"
                    )
                    return
                fig.honest_pulls += 1
                fig.honest_envelopes += len(seen)
    except (*NETWORK_ERRORS, Exception) as exc:  # every failure is an honest error
        fig.honest_errors.append(f"peer {index} ({host}, {mode}): {type(exc).__name__}: {exc}")


# -- misbehaving ----------------------------------------------------------------------------


async def request_flooder(host: str, enode: Enode, topic: bytes, stop: asyncio.Event,
                          fig: Figures) -> None:  # fmt: skip
    while not stop.is_set():
        try:
            peer = await connect(enode, generate_private_key(), local_host=host)
        except NETWORK_ERRORS:
            fig.connections_refused += 1
            await asyncio.sleep(0.2)
            continue

        async def drain(peer=peer) -> None:  # type: ignore[no-untyped-def]
            while True:
                event = await peer.recv()
                if isinstance(event, RequestCompleteReceived):
                    if event.complete.failed:
                        fig.flood_refused += 1
                    else:
                        fig.flood_answered += 1

        reader = asyncio.create_task(drain())
        try:
            while not stop.is_set() and not reader.done():
                request = MessagesRequest(
                    request_id=os.urandom(32), lower=T0, upper=T0 + SPAN, limit=100,
                    cursor=b"", bloom=b"", topics=(topic,),
                )  # fmt: skip
                await peer.send_p2p_request(encode_plain_request(request))
                await asyncio.sleep(0.002)
        except NETWORK_ERRORS:
            pass
        finally:
            reader.cancel()
            try:
                await peer.disconnect()
            except Exception:
                pass


def spam_envelopes(count: int, topic: bytes, seed: int) -> list[bytes]:
    rng = random.Random(seed)
    now = int(time.time())
    out = []
    for i in range(count):
        data = rng.randbytes(1024)
        if i % 3 == 0:  # ttl 0: "infinite" PoW under Go's float division
            out.append(Envelope(now + 30, 0, topic, data, i).encode())
        elif i % 3 == 1:  # expired
            out.append(Envelope(now - 3600, 30, topic, data, i).encode())
        else:  # valid, at the advertised PoW (0.001)
            out.append(seal(now + 60, 60, topic, data, 0.001).encode())
    return out


async def live_spammer(host: str, enode: Enode, envelopes: list[bytes], stop: asyncio.Event,
                       fig: Figures) -> None:  # fmt: skip
    status = StatusOptions(pow_requirement=0.0, light_node=False, topic_interest=())
    while not stop.is_set():
        try:
            peer = await connect(enode, generate_private_key(), local_host=host, status=status)
        except NETWORK_ERRORS:
            fig.connections_refused += 1
            await asyncio.sleep(0.2)
            continue
        fig.spam_connections += 1
        try:
            while not stop.is_set():
                start = random.randrange(0, len(envelopes) - 50)
                await peer.send_envelopes(envelopes[start : start + 50])
                fig.spam_sent += 50
                await asyncio.sleep(0.005)
        except NETWORK_ERRORS:
            pass
        finally:
            try:
                await peer.disconnect()
            except Exception:
                pass


async def _open_from(
    host: str, enode: Enode
) -> tuple[asyncio.StreamReader, asyncio.StreamWriter] | None:
    """A TCP connection to the node from ``host``; None (after a short pause) when refused."""
    try:
        return await asyncio.open_connection(enode.host, enode.port, local_addr=(host, 0))
    except OSError:
        await asyncio.sleep(0.2)
        return None


def _dialing(enode: Enode) -> Connection:
    """A sans-IO RLPx connection, fresh key, that dials ``enode``."""
    return Connection(generate_private_key(), [WAKU_CAPABILITY], remote_public_key=enode.public_key)


async def staller(host: str, enode: Enode, stop: asyncio.Event, fig: Figures) -> None:
    held: list[asyncio.StreamWriter] = []
    while not stop.is_set():
        streams = await _open_from(host, enode)
        if streams is None:
            continue
        reader, writer = streams
        fig.stalled_opened += 1
        auth = _dialing(enode).initiate()
        if fig.stalled_opened % 2:
            writer.write(auth[: len(auth) // 2])  # half an auth message, then silence
        try:
            data = await asyncio.wait_for(reader.read(1), 0.2)
            if data == b"":
                fig.stalled_closed_at_once += 1
                writer.close()
                continue
        except TimeoutError:
            pass
        except OSError:
            fig.stalled_closed_at_once += 1
            continue
        held.append(writer)
        held = [w for w in held if not w.is_closing()]
        await asyncio.sleep(0.3)
    for writer in held:
        writer.close()


async def garbage_sender(host: str, enode: Enode, stop: asyncio.Event, fig: Figures) -> None:
    rng = random.Random(host)
    while not stop.is_set():
        streams = await _open_from(host, enode)
        if streams is None:
            continue
        reader, writer = streams
        fig.garbage_connections += 1
        try:
            if fig.garbage_connections % 2:
                writer.write(rng.randbytes(4096))  # garbage instead of an auth message
            else:
                connection = _dialing(enode)
                writer.write(connection.initiate())
                while connection.state is not State.ESTABLISHED:
                    data = await asyncio.wait_for(reader.read(65536), 5)
                    if not data:
                        raise ConnectionResetError
                    connection.receive_data(data)
                    writer.write(connection.data_to_send())
                writer.write(rng.randbytes(2048))  # garbage frames in a live session
            await writer.drain()
            await asyncio.wait_for(reader.read(65536), 5)
        except (*NETWORK_ERRORS, ConnectionError):
            fig.connections_refused += 1
        finally:
            writer.close()
        await asyncio.sleep(0.05)


# -- run ------------------------------------------------------------------------------------


async def run_honest_only(
    enode: Enode, topics: list[bytes], expected: dict[bytes, int], args
) -> tuple[Figures, float]:
    """The baseline: the same honest workload with nobody misbehaving."""
    fig = Figures()
    return fig, await run_honest(enode, topics, expected, args, fig)


async def run_honest(
    enode: Enode, topics: list[bytes], expected: dict[bytes, int], args, fig: Figures
) -> float:
    """Run the honest peers to the end (or --duration); returns the seconds taken."""
    started = time.perf_counter()
    honest = [honest_peer(i, enode, topics, expected, args, fig) for i in range(args.honest)]
    try:
        await asyncio.wait_for(asyncio.gather(*honest), args.duration)
    except TimeoutError:
        fig.honest_errors.append(f"honest peers not done within --duration {args.duration} s")
    return time.perf_counter() - started


async def run_load(
    enode: Enode, topics: list[bytes], expected: dict[bytes, int], args
) -> tuple[Figures, float]:
    fig = Figures()
    stop = asyncio.Event()
    per_kind = max(1, args.bad // 4)
    spam = spam_envelopes(600, topics[0], 1)
    bad = []
    for i in range(per_kind):
        bad.append(request_flooder(f"127.0.9.{1 + i % 2}", enode, topics[i % len(topics)], stop,
                                   fig))  # fmt: skip
        bad.append(live_spammer(f"127.0.9.{11 + i % 2}", enode, spam, stop, fig))
        bad.append(staller(f"127.0.9.{21 + i % 2}", enode, stop, fig))
        bad.append(garbage_sender(f"127.0.9.{31 + i % 2}", enode, stop, fig))
    bad_tasks = [asyncio.create_task(c) for c in bad]
    await asyncio.sleep(1.0)  # the misbehaviour is under way before the honest peers come
    elapsed = await run_honest(enode, topics, expected, args, fig)
    stop.set()
    await asyncio.wait(bad_tasks, timeout=10)
    for task in bad_tasks:
        task.cancel()
    return fig, elapsed


def percentile(values: list[float], q: float) -> float:
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


@dataclass
class Runs:
    """What the two runs against one server measured."""

    base: Figures  # honest peers alone (empty with --no-baseline)
    base_elapsed: float
    load: Figures  # honest peers beside the misbehaving ones
    elapsed: float
    rss_kib: dict[str, int]  # the server's RSS at start, after the baseline, at the end
    log_text: str  # the server's stderr


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--envelopes", type=int, default=20_000)
    parser.add_argument("--channels", type=int, default=20)
    parser.add_argument("--honest", type=int, default=100)
    parser.add_argument("--bad", type=int, default=20, help="misbehaving peers (4 kinds)")
    parser.add_argument("--rounds", type=int, default=2, help="whole channels per honest peer")
    parser.add_argument("--page-size", type=int, default=50)
    parser.add_argument("--duration", type=float, default=90.0, help="upper bound, seconds")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--no-baseline", action="store_true",
                        help="skip the honest-only run before the load")  # fmt: skip
    parser.add_argument("--json", action="store_true")
    return parser.parse_args()


def run_against_server(
    args: argparse.Namespace, workdir: Path, topics: list[bytes], expected: dict[bytes, int]
) -> Runs:
    """Start ``waku-legacy v1 serve`` on the dump, run the baseline and the load, stop it."""
    log_path = workdir / "server.log"
    repo = Path(__file__).resolve().parent.parent
    cmd = [sys.executable, "-m", "waku_legacy.cli", "v1", "serve",
           "--store", f"dump:{workdir / 'history.dump'}", "--listen", "127.0.0.1:0",
           "--node-key-file", str(workdir / "nodekey")]  # fmt: skip
    with open(log_path, "w", encoding="utf-8") as log_file:
        server = subprocess.Popen(
            cmd, stdout=subprocess.PIPE, stderr=log_file, text=True,
            env={**os.environ, "PYTHONPATH": str(repo)},
        )  # fmt: skip
        try:
            enode = Enode.parse(server.stdout.readline().strip())  # type: ignore[union-attr]
            rss = {"start": rss_kib(server.pid)}
            base, base_elapsed = (Figures(), 0.0)
            if not args.no_baseline:
                base, base_elapsed = asyncio.run(run_honest_only(enode, topics, expected, args))
            rss["after_baseline"] = rss_kib(server.pid)
            fig, elapsed = asyncio.run(run_load(enode, topics, expected, args))
            rss["end"] = rss_kib(server.pid)
        finally:
            server.send_signal(signal.SIGTERM)
            try:
                server.wait(timeout=20)
            except subprocess.TimeoutExpired:
                server.kill()
    log_text = log_path.read_text(encoding="utf-8", errors="replace")
    return Runs(base, base_elapsed, fig, elapsed, rss, log_text)


def latency(values: list[float]) -> dict[str, float]:
    return {
        "p50": round(1000 * percentile(values, 0.50), 2),
        "p90": round(1000 * percentile(values, 0.90), 2),
        "p99": round(1000 * percentile(values, 0.99), 2),
        "max": round(1000 * max(values, default=0.0), 2),
    }


def build_report(args: argparse.Namespace, runs: Runs) -> dict[str, Any]:
    stats: dict[str, int] = {}
    for line in runs.log_text.splitlines():
        if "shutting down; stats: " in line:
            stats = json.loads(line.split("shutting down; stats: ", 1)[1])
    refusals = {k.removeprefix("refused_"): v for k, v in stats.items() if k.startswith("refused_")}
    base, fig = runs.base, runs.load
    lat = fig.latencies
    return {
        "honest_peers": args.honest,
        "misbehaving_peers": 4 * max(1, args.bad // 4),
        "honest_errors": len(fig.honest_errors) + len(base.honest_errors),
        "honest_pulls": fig.honest_pulls,
        "honest_envelopes": fig.honest_envelopes,
        "honest_requests": len(lat),
        "honest_seconds": round(runs.elapsed, 2),
        "latency_ms": {**latency(lat),
                       "mean": round(1000 * statistics.fmean(lat), 2) if lat else 0.0},
        "baseline_honest_only": {
            "errors": len(base.honest_errors), "pulls": base.honest_pulls,
            "requests": len(base.latencies), "seconds": round(runs.base_elapsed, 2),
            **{f"latency_{k}_ms": v for k, v in latency(base.latencies).items()},
        },
        "misbehaving_seen": {
            "flood_requests_answered": fig.flood_answered,
            "flood_requests_refused": fig.flood_refused,
            "spam_envelopes_sent": fig.spam_sent,
            "spam_connections": fig.spam_connections,
            "stalled_connections_opened": fig.stalled_opened,
            "stalled_closed_at_once": fig.stalled_closed_at_once,
            "garbage_connections": fig.garbage_connections,
            "connections_cut_or_refused": fig.connections_refused,
        },
        "server_stats": {k: v for k, v in stats.items() if not k.startswith("refused_")},
        "server_refusals": refusals,
        "server_rss_mib": {name: round(kib / 1024, 1) for name, kib in runs.rss_kib.items()},
        "server_log_lines": len(runs.log_text.splitlines()),
        "errors_sample": (base.honest_errors + fig.honest_errors)[:5],
    }  # fmt: skip


def print_report(report: dict[str, Any], *, as_json: bool) -> None:
    if as_json:
        print(json.dumps(report, indent=1))
        return
    for key, value in report.items():
        if isinstance(value, dict):
            print(f"{key}:")
            for k, v in value.items():
                print(f"  {k:<30} {v}")
        else:
            print(f"{key:<32} {value}")


def main() -> int:
    args = parse_args()
    workdir = Path(tempfile.mkdtemp(prefix="load-rlpx-"))
    topics = channel_topics(args.channels)
    expected = build_dump(workdir / "history.dump", args.envelopes, topics, args.seed)
    runs = run_against_server(args, workdir, topics, expected)
    print_report(build_report(args, runs), as_json=args.json)
    return 0 if not runs.load.honest_errors and not runs.base.honest_errors else 1


if __name__ == "__main__":
    sys.exit(main())
