"""RLPx handshakes per second and the time to serve a v1 history over loopback.

    .venv/bin/python bench/bench_rlpx.py [--handshakes 200] [--envelopes 10000]
        [--data-size 200] [--store memory|leveldb] [--repeat 3] [--json]

Handshakes, each beside its baseline measured in the same run:

- sans-IO: a full Connection pair in memory (auth, ack, both Hellos) vs the bare secp256k1
  work one handshake needs, as raw coincurve calls (two ephemeral keys, 4 ECDH, one
  recoverable sign and recover, 2 ECIES encrypt + decrypt's ECDH);
- loopback: dial + handshake + Hello over real sockets to a listening node vs a plain TCP
  connect/close to a listening asyncio server.

Serving: a mailserver with ``--envelopes`` envelopes in its store; a client pulls them all
(pages of 1000, the status-go maximum, over one RLPx session, every envelope checked and
written to a list) and the wall time from first request to last completion is reported
beside the time to read the same pages straight from the store in the same process.
Target: under 1 s for 10,000 envelopes.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from waku_legacy.crypto import ecies
from waku_legacy.crypto.secp256k1 import (
    ecdh_raw_x,
    generate_private_key,
    public_key_of,
    recover_public_key,
    sign_recoverable,
)
from waku_legacy.mailserver_compat.client.mailserver_client import (
    HistoryQuery,
    MailServerClient,
)
from waku_legacy.mailserver_compat.rlpx.asyncio_transport import dial, listen
from waku_legacy.mailserver_compat.rlpx.connection import Connection, State
from waku_legacy.mailserver_compat.server.asyncio_server import MailServer
from waku_legacy.mailserver_compat.server.core import MailServerConfig
from waku_legacy.mailserver_compat.storage.envelope_store import (
    EnvelopeQuery,
    MemoryEnvelopeStore,
)
from waku_legacy.mailserver_compat.wire.envelope import Envelope
from waku_legacy.mailserver_compat.wire.waku_protocol import WAKU_CAPABILITY

T0 = 1_650_000_000
TOPIC = b"\xbe\x0c\xbe\x0c"


def _per_second(count: int, seconds: float) -> float:
    return count / seconds if seconds > 0 else float("inf")


def bench_sans_io_handshakes(n: int) -> float:
    server_key = generate_private_key()
    server_pub = public_key_of(server_key)
    start = time.perf_counter()
    for _ in range(n):
        client = Connection(generate_private_key(), [WAKU_CAPABILITY], remote_public_key=server_pub)
        server = Connection(server_key, [WAKU_CAPABILITY])
        server.receive_data(client.initiate())
        client.receive_data(server.data_to_send())
        server.receive_data(client.data_to_send())
        assert client.state is State.ESTABLISHED and server.state is State.ESTABLISHED
    return _per_second(n, time.perf_counter() - start)


def bench_raw_crypto_handshakes(n: int) -> float:
    """The secp256k1 operations one RLPx handshake performs, as bare calls."""
    key_a, key_b = generate_private_key(), generate_private_key()
    pub_a, pub_b = public_key_of(key_a), public_key_of(key_b)
    body = os.urandom(200)
    start = time.perf_counter()
    for _ in range(n):
        eph_a, eph_b = generate_private_key(), generate_private_key()
        token = ecdh_raw_x(key_a, pub_b)  # initiator static ECDH
        signature = sign_recoverable(token, eph_a)
        auth = ecies.encrypt(pub_b, body)
        ecies.decrypt(key_b, auth)
        ecdh_raw_x(key_b, pub_a)  # recipient static ECDH
        recover_public_key(token, signature)
        ack = ecies.encrypt(pub_a, body)
        ecies.decrypt(key_a, ack)
        ecdh_raw_x(eph_a, public_key_of(eph_b))
        ecdh_raw_x(eph_b, public_key_of(eph_a))
    return _per_second(n, time.perf_counter() - start)


async def bench_loopback_handshakes(n: int) -> tuple[float, float]:
    key = generate_private_key()

    async def handler(peer) -> None:
        await peer.wait_closed()

    server = await listen("127.0.0.1", 0, key, [WAKU_CAPABILITY], handler, ping_interval=0)
    port = server.sockets[0].getsockname()[1]
    pub = public_key_of(key)
    start = time.perf_counter()
    for _ in range(n):
        peer = await dial("127.0.0.1", port, pub, generate_private_key(), [WAKU_CAPABILITY])
        await peer.disconnect()
    rlpx_rate = _per_second(n, time.perf_counter() - start)
    server.close()
    await server.wait_closed()

    async def plain(reader, writer) -> None:
        writer.close()

    tcp = await asyncio.start_server(plain, "127.0.0.1", 0)
    tcp_port = tcp.sockets[0].getsockname()[1]
    start = time.perf_counter()
    for _ in range(n):
        _, writer = await asyncio.open_connection("127.0.0.1", tcp_port)
        writer.close()
        await writer.wait_closed()
    tcp_rate = _per_second(n, time.perf_counter() - start)
    tcp.close()
    await tcp.wait_closed()
    return rlpx_rate, tcp_rate


def build_history(count: int, data_size: int) -> list[bytes]:
    rng = random.Random(1)
    out = []
    for i in range(count):
        sent = T0 + rng.randrange(0, 86_400)
        out.append(Envelope(sent + 60, 60, TOPIC, rng.randbytes(data_size), i).encode())
    return out


def open_store(kind: str, history: list[bytes], tmp: Path):
    if kind == "memory":
        return MemoryEnvelopeStore(history)
    from waku_legacy.mailserver_compat.storage.envelope_store import LevelDBSource
    from waku_legacy.mailserver_compat.storage.leveldb import LevelDBEnvelopeStore

    with LevelDBEnvelopeStore(tmp / "ldb", create=True) as db:
        for raw in history:
            db.put_envelope(raw)
    return LevelDBSource(str(tmp / "ldb"))


def read_store_pages(store, limit: int = 1000) -> tuple[int, float]:
    start = time.perf_counter()
    cursor, total = b"", 0
    while True:
        page = store.query(
            EnvelopeQuery(T0, T0 + 86_400, topics=(TOPIC,), limit=limit, cursor=cursor)
        )
        total += len(page.envelopes)
        if not page.next_cursor:
            return total, time.perf_counter() - start
        cursor = page.next_cursor


class _ListWriter:
    def __init__(self) -> None:
        self.items: list[bytes] = []

    def append(self, raw: bytes) -> None:
        self.items.append(raw)

    def flush(self) -> None:
        pass


async def bench_serve(store, expected: int) -> tuple[float, int, int]:
    server = MailServer(store, generate_private_key(), MailServerConfig(rate_limit=0))
    enode = await server.start("127.0.0.1", 0)
    try:
        async with MailServerClient(enode) as client:
            await client._connected()  # connect first: time the serving, not the dial
            writer = _ListWriter()
            start = time.perf_counter()
            result = await client.pull(HistoryQuery(T0, T0 + 86_400, topics=(TOPIC,)), writer)
            elapsed = time.perf_counter() - start
    finally:
        await server.close()
    assert len(writer.items) == expected == result.envelopes, (len(writer.items), expected)
    return elapsed, result.pages, len(set(writer.items))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--handshakes", type=int, default=200)
    parser.add_argument("--envelopes", type=int, default=10_000)
    parser.add_argument("--data-size", type=int, default=200, help="bytes of data per envelope")
    parser.add_argument("--store", choices=("memory", "leveldb"), default="memory")
    parser.add_argument("--repeat", type=int, default=3, help="rounds; the best is reported")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()

    results: dict[str, object] = {
        "python": platform.python_version(),
        "machine": platform.machine(),
        "cpus": os.cpu_count(),
    }
    sans_io = max(bench_sans_io_handshakes(args.handshakes) for _ in range(args.repeat))
    raw_crypto = max(bench_raw_crypto_handshakes(args.handshakes) for _ in range(args.repeat))
    loop_rounds = [
        asyncio.run(bench_loopback_handshakes(args.handshakes)) for _ in range(args.repeat)
    ]
    results["handshakes_per_s"] = {
        "sans_io_in_memory": round(sans_io, 1),
        "baseline_raw_secp256k1_work": round(raw_crypto, 1),
        "loopback_dial_handshake_hello": round(max(r[0] for r in loop_rounds), 1),
        "baseline_loopback_tcp_connect": round(max(r[1] for r in loop_rounds), 1),
    }

    history = build_history(args.envelopes, args.data_size)
    with tempfile.TemporaryDirectory() as tmp:
        store = open_store(args.store, history, Path(tmp))
        reads, serves = [], []
        for _ in range(args.repeat):
            count, read_s = read_store_pages(store)
            assert count == args.envelopes
            reads.append(read_s)
            serve_s, pages, distinct = asyncio.run(bench_serve(store, args.envelopes))
            assert distinct == args.envelopes
            serves.append(serve_s)
        close = getattr(store, "close", None)
        if close:
            close()
    results["serve_history"] = {
        "store": args.store,
        "envelopes": args.envelopes,
        "envelope_bytes": round(statistics.mean(len(h) for h in history)),
        "pages": pages,
        "serve_over_loopback_s": round(min(serves), 4),
        "baseline_read_same_pages_from_store_s": round(min(reads), 4),
        "target_s": 1.0,
        "meets_target": min(serves) < 1.0,
    }
    if args.json:
        json.dump(results, sys.stdout, indent=2)
        print()
        return 0
    hs = results["handshakes_per_s"]
    sv = results["serve_history"]
    print(f"python {results['python']} on {results['machine']}, {results['cpus']} CPUs")
    print(f"handshakes per second (best of {args.repeat} rounds of {args.handshakes})")
    print(f"  sans-IO Connection pair, in memory      {hs['sans_io_in_memory']:>9}")
    print(f"    baseline: raw secp256k1 work           {hs['baseline_raw_secp256k1_work']:>9}")
    print(f"  dial + handshake + Hello, loopback       {hs['loopback_dial_handshake_hello']:>9}")
    print(f"    baseline: TCP connect/close, loopback  {hs['baseline_loopback_tcp_connect']:>9}")
    print(
        f"serve {sv['envelopes']} envelopes ({sv['envelope_bytes']} B each, {sv['pages']} "
        f"requests, store={sv['store']}), best of {args.repeat}"
    )
    print(f"  client pull over loopback RLPx           {sv['serve_over_loopback_s']:>9.4f} s")
    print(
        f"    baseline: read same pages from store   "
        f"{sv['baseline_read_same_pages_from_store_s']:>9.4f} s"
    )
    print(f"  target < 1 s: {'met' if sv['meets_target'] else 'NOT met'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
