"""Benchmark: community history archives for N messages (default 1,000,000).

Prints, in one run:
- planning and encoding rate (messages/s; encoding on one core, target >= 100k/s), beside
  the generated protobuf classes encoding the same messages (the baseline);
- append rate (MB/s) of the crash-safe store;
- torrent piece hashing (MB/s) beside hashlib.sha1 over the same file (target >= 0.8x);
- fetch throughput over loopback (two libtorrent sessions on 127.0.0.1), all archives.

    .venv/bin/python bench/bench_archive.py                 # 1,000,000 messages
    .venv/bin/python bench/bench_archive.py --messages 100000 --no-fetch
"""

from __future__ import annotations

import argparse
import hashlib
import os
import random
import shutil
import sys
import tempfile
import time
from pathlib import Path

from waku_legacy.archive import (
    WEEK_SECONDS,
    ArchiveMessage,
    EncodedArchive,
    FetchOptions,
    Seeder,
    SessionConfig,
    append_archives,
    build_torrent,
    fetch_archives,
    plan_archives,
)
from waku_legacy.archive.torrent import piece_hashes
from waku_legacy.crypto.secp256k1 import private_key_from_bytes
from waku_legacy.identity.topics import CommunityId
from waku_legacy.proto import status_archive_pb2

T0 = 1_600_000_000


def make_messages(count: int, weeks: int, payload: int, seed: int) -> list[ArchiveMessage]:
    rng = random.Random(seed)
    pool = rng.randbytes(1 << 20)
    topics = [rng.randbytes(4) for _ in range(8)]
    span = weeks * WEEK_SECONDS
    out = []
    for i in range(count):
        start = rng.randrange(len(pool) - 400)
        size = payload // 2 + rng.randrange(payload)
        out.append(
            ArchiveMessage(
                timestamp=T0 + rng.randrange(span),
                hash=hashlib.sha256(i.to_bytes(8, "big")).digest(),
                topic=topics[i % 8],
                payload=pool[start : start + size],
                sig=b"\x04" + pool[start : start + 64],
                padding=pool[start : start + (i % 32)],
            )
        )
    rng.shuffle(out)
    return out


def rate(count: float, seconds: float) -> str:
    return f"{count / seconds:,.0f}/s" if seconds > 0 else "inf"


def mbps(nbytes: int, seconds: float) -> float:
    return nbytes / seconds / 1e6 if seconds > 0 else float("inf")


def raw_sha1(paths: list[Path]) -> float:
    """hashlib.sha1 over the same bytes (one running hash, 6.4 MB reads): seconds."""
    started = time.perf_counter()
    digest = hashlib.sha1()
    buffer = bytearray(64 * 102400)
    view = memoryview(buffer)
    for path in paths:
        with open(path, "rb", buffering=0) as handle:
            while got := handle.readinto(buffer):
                digest.update(view[:got])
    digest.digest()
    return time.perf_counter() - started


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=1_000_000)
    parser.add_argument("--weeks", type=int, default=52)
    parser.add_argument("--payload", type=int, default=200, help="mean payload bytes")
    parser.add_argument("--baseline-sample", type=int, default=200_000,
                        help="messages encoded with the generated classes (baseline)")  # fmt: skip
    parser.add_argument("--no-fetch", action="store_true")
    parser.add_argument("--workdir", help="keep files here (default: a temporary folder)")
    args = parser.parse_args()

    work = Path(args.workdir or tempfile.mkdtemp(prefix="bench-archive-"))
    if work.exists():
        shutil.rmtree(work)
    work.mkdir(parents=True)
    key = private_key_from_bytes(bytes.fromhex("42" * 32))
    community = CommunityId(key.public_key.format(compressed=True))
    topics = [bytes([i]) * 4 for i in range(8)]

    print(f"python {sys.version.split()[0]}, {os.cpu_count()} cpus; workdir {work}")
    started = time.perf_counter()
    messages = make_messages(args.messages, args.weeks, args.payload, 1)
    print(f"generated {len(messages):,} messages in {time.perf_counter() - started:.1f} s")

    now = T0 + args.weeks * WEEK_SECONDS
    started = time.perf_counter()
    plan = plan_archives(messages, last_end=None, now=now)
    plan_s = time.perf_counter() - started
    print(f"plan      {len(plan.archives)} archives        {plan_s:7.2f} s  "
          f"{rate(len(messages), plan_s)}")  # fmt: skip

    started = time.perf_counter()
    encoded = [
        EncodedArchive.build(a.window_from, a.window_to, topics, a.messages) for a in plan.archives
    ]
    encode_s = time.perf_counter() - started
    total_bytes = sum(len(e.data) for e in encoded)
    print(
        f"encode    {total_bytes / 1e6:,.0f} MB              {encode_s:7.2f} s  "
        f"{rate(len(messages), encode_s)} messages (target >= 100,000/s)"
    )
    count = 0
    started = time.perf_counter()
    for archive in plan.archives:
        take = archive.messages[: max(0, args.baseline_sample - count)]
        if not take:
            break
        status_archive_pb2.WakuMessageArchive(
            metadata=status_archive_pb2.WakuMessageArchiveMetadata(
                **{"from": archive.window_from, "to": archive.window_to, "contentTopic": topics}
            ),
            messages=[m.to_proto() for m in take],
        ).SerializeToString()
        count += len(take)
    baseline_s = time.perf_counter() - started
    print(f"  baseline: generated protobuf classes {rate(count, baseline_s)} messages ({count:,})")

    archive_dir, torrent_dir = work / "archives", work / "torrents"
    started = time.perf_counter()
    result = append_archives(archive_dir, community, encoded)
    append_s = time.perf_counter() - started
    print(f"append    {result.data_length / 1e6:,.0f} MB data          {append_s:7.2f} s  "
          f"{mbps(result.data_length, append_s):,.0f} MB/s (fsynced)")  # fmt: skip
    del encoded

    root = archive_dir / str(community)
    paths = [root / "data", root / "index"]
    size = sum(p.stat().st_size for p in paths)
    raw_sha1(paths)  # warm the page cache for both measurements alike
    raw_s = raw_sha1(paths)
    started = time.perf_counter()
    piece_hashes(paths)
    pieces_s = time.perf_counter() - started
    started = time.perf_counter()
    torrent = build_torrent(archive_dir, torrent_dir, community)
    torrent_s = time.perf_counter() - started
    print(
        f"hash      {size / 1e6:,.0f} MB pieces          {pieces_s:7.2f} s  "
        f"{mbps(size, pieces_s):,.0f} MB/s; hashlib.sha1 same file {mbps(size, raw_s):,.0f} MB/s "
        f"-> {raw_s / pieces_s:.2f}x (target >= 0.8x)"
    )
    print(f"torrent   build_torrent (index check + hashing + write) {torrent_s:.2f} s, "
          f"{torrent.piece_count} pieces, info-hash {torrent.info_hash}")  # fmt: skip

    if not args.no_fetch:
        loopback = SessionConfig(listen="127.0.0.1:0", trackers=False, utp=False)
        with Seeder(archive_dir, loopback) as seeder:
            seeder.seed(torrent.path, wait=600)
            started = time.perf_counter()
            fetched = fetch_archives(
                torrent.magnet_uri,
                community,
                work / "member",
                FetchOptions(
                    peers=(f"127.0.0.1:{seeder.listen_port}",),
                    session=loopback,
                    data_timeout=1800,
                ),
            )
            fetch_s = time.perf_counter() - started
        print(
            f"fetch     {fetched.bytes_downloaded / 1e6:,.0f} MB over loopback   {fetch_s:7.2f} s  "
            f"{mbps(fetched.bytes_downloaded, fetch_s):,.0f} MB/s end to end "
            f"({len(fetched.archives)} archives, {fetched.message_count:,} messages verified and "
            f"decoded)\n          transfer of the archive pieces {fetched.data_seconds:.2f} s = "
            f"{mbps(fetched.bytes_downloaded, fetched.data_seconds):,.0f} MB/s; metadata "
            f"{fetched.metadata_seconds:.2f} s"
        )
    if not args.workdir:
        shutil.rmtree(work)
    return 0


if __name__ == "__main__":
    sys.exit(main())
