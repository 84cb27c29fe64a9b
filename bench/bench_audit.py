"""Benchmark: ``waku-legacy audit`` of an N-message community (default 1,000,000) beside
fetching and decoding the same archives, in one run.

Sources: two envelope dumps (the second holds every third envelope again, so the audit's
dedup runs) of N community channel messages over a year. The messages are real encrypted and
signed status-go chat messages (:func:`waku_legacy.migrate.sample.generate_envelopes`), a
pool of them re-wrapped in distinct envelopes (distinct sent time and nonce), so generating a
million takes seconds. The archives are built from the same messages with the project's
builder and seeded over loopback from this process. Then, each in its own fresh process (so
its peak RSS is its own), with the same fetch options:

- baseline: ``waku-legacy archive fetch --torrent`` (the member's fetch, which reads, checks
  and decodes every archive);
- audit: ``waku-legacy audit --torrent`` of the same community against the two dumps
  (the same fetch, then the sources read, decrypted and deduplicated, and the comparison).
  The audit must report the community complete with N messages in both.

    .venv/bin/python bench/bench_audit.py                # N = 1,000,000
    .venv/bin/python bench/bench_audit.py --n 50000 --json
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from waku_legacy.archive import ArchiveMessage, Seeder, SessionConfig
from waku_legacy.archive.build import build_community_archives
from waku_legacy.archive.partition import WEEK_SECONDS
from waku_legacy.identity.message_hash import envelope_hash
from waku_legacy.identity.topic_mapping import TopicMapping
from waku_legacy.identity.topics import chat_topic, symmetric_key_for_chat
from waku_legacy.mailserver_compat.storage.dump import DumpWriter
from waku_legacy.mailserver_compat.wire.envelope import Envelope
from waku_legacy.migrate.archives import archive_fields
from waku_legacy.migrate.decode import decode_record
from waku_legacy.migrate.sample import SampleCommunity, SampleSpec, generate_envelopes

SPEC = SampleSpec(communities=1, channels=4, members=8, days=60, messages_per_channel_day=8.0)
START = 1_609_459_200  # 2021-01-01
SPAN = 365 * 86_400
TTL = 10
PUBSUB = "/waku/2/rs/16/64"


def pool_of(community: SampleCommunity) -> list[tuple[bytes, ArchiveMessage]]:
    """Real channel envelopes from the sample generator: (envelope data, archive form of its
    payload), the form's hash and time to be replaced by each re-wrapped envelope's own."""
    keys = {chat_topic(community.id.channel_chat_id(c)): community.id.channel_chat_id(c)
            for c in community.channels}  # fmt: skip
    pool = []
    for raw in generate_envelopes(SPEC, [community]):
        envelope = Envelope.decode(raw)
        if envelope.topic not in keys:
            continue  # public chat traffic
        record = {"source": "pool", "kind": "envelope-dump", "location": "x", "rank": 0,
                  "format": "v1-envelope", "data": raw}  # fmt: skip
        row = decode_record(record, TopicMapping(PUBSUB, {}))
        fields = archive_fields(
            message_hash=row["message_hash"], content_topic=row["content_topic"],
            payload=row["payload"], version=row["version"], timestamp_ns=row["timestamp"],
            db_key=row["db_key"], symmetric_key=symmetric_key_for_chat(keys[envelope.topic]),
        )  # fmt: skip
        assert fields["ok"], fields
        form = ArchiveMessage(0, b"", envelope.topic, fields["payload"], fields["sig"],
                              fields["padding"])  # fmt: skip
        pool.append((envelope.data, form))
    return pool


def write_sources(
    n: int, community: SampleCommunity, work: Path, seed: int
) -> list[ArchiveMessage]:
    """The two dumps; returns the archive form of the N messages."""
    rnd = random.Random(seed)
    pool = pool_of(community)
    messages = []
    with DumpWriter(work / "ms-1.dump") as first, DumpWriter(work / "ms-2.dump") as second:
        for i in range(n):
            sent = START + (i * SPAN) // n
            data, form = pool[rnd.randrange(len(pool))]
            raw = Envelope(expiry=sent + TTL, ttl=TTL, topic=form.topic, data=data,
                           nonce=i).encode()  # fmt: skip
            first.append(raw)
            if i % 3 == 0:
                second.append(raw)
            messages.append(ArchiveMessage(sent, envelope_hash(raw), form.topic, form.payload,
                                           form.sig, form.padding))  # fmt: skip
    return messages


def run_child(argv: list[str], name: str, codes: tuple[int, ...] = (0,)) -> dict[str, Any]:
    """One CLI command in a fresh process: wall seconds, peak RSS (its own rusage), stdout."""
    started = time.perf_counter()
    with tempfile.TemporaryFile() as err:
        child = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=err)
        assert child.stdout is not None
        out = child.stdout.read()
        _, status, usage = os.wait4(child.pid, 0)
        seconds = time.perf_counter() - started
        child.returncode = os.waitstatus_to_exitcode(status)
        child.stdout.close()
        if child.returncode not in codes:
            err.seek(0)
            raise SystemExit(f"{name} exited {child.returncode}:\n{err.read().decode()[-4000:]}")
    return {"seconds": seconds, "stdout": out.decode(), "peak_rss_mb": usage.ru_maxrss / 1024}


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--n", type=int, default=1_000_000, help="channel messages (1,000,000)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--json", action="store_true", help="print one JSON document")
    parser.add_argument("--workdir", help="keep files here (default: a temporary folder)")
    args = parser.parse_args()
    result = run(args)
    if args.json:
        print(json.dumps(result, indent=2))
    return 0


def run(args: argparse.Namespace) -> dict[str, Any]:
    say = (lambda _: None) if args.json else print
    work = Path(args.workdir or tempfile.mkdtemp(prefix="bench-audit-"))
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    from waku_legacy.migrate.sample import make_communities

    community = make_communities(SPEC)[0]
    cid = str(community.id)
    topics = sorted(chat_topic(community.id.channel_chat_id(c)) for c in community.channels)
    say(f"python {sys.version.split()[0]}, {os.cpu_count()} cpus; workdir {work}")

    started = time.perf_counter()
    messages = write_sources(args.n, community, work, args.seed)
    generate_s = time.perf_counter() - started
    say(f"sources   {args.n:,} messages in 2 envelope dumps     {generate_s:7.2f} s")
    started = time.perf_counter()
    built = build_community_archives(
        work / "archives", work / "torrents", cid, topics, messages,
        now=START + SPAN + WEEK_SECONDS,
    )  # fmt: skip
    build_s = time.perf_counter() - started
    del messages
    say(f"build     {built.archives_added} archives                      {build_s:7.2f} s")
    assert built.torrent_path

    loopback = SessionConfig(listen="127.0.0.1:0", trackers=False, utp=False)
    cli = [str(Path(sys.executable).parent / "waku-legacy")]
    with Seeder(work / "archives", loopback) as seeder:
        seeder.seed(built.torrent_path, wait=600)
        fetch_flags = [
            "--community", cid, "--torrent", str(built.torrent_path),
            "--peer", f"127.0.0.1:{seeder.listen_port}", "--listen", "127.0.0.1:0",
            "--no-trackers", "--no-utp", "--timeout", "1800", "--quiet",
        ]  # fmt: skip
        baseline = run_child(
            [*cli, "fetch", *fetch_flags, "--save-dir", str(work / "fetch-baseline")],
            "fetch",
        )
        sources = [a for i in (1, 2) for a in ("--source", f"dump:{work / f'ms-{i}.dump'}")]
        channels = [a for c in community.channels for a in ("--channel", c)]
        audit = run_child(
            [*cli, "audit", *fetch_flags, *sources, *channels, "--json",
             "--save-dir", str(work / "fetch-audit")],
            "audit", codes=(0, 1),
        )  # fmt: skip
    document = json.loads(audit["stdout"])
    totals = document["totals"]
    if not document["complete"] or totals["both"] != args.n:
        raise SystemExit(f"the audit did not find the community complete: {totals}")
    result = {
        "n": args.n,
        "archives": built.archives_added,
        "generate_seconds": round(generate_s, 2),
        "build_seconds": round(build_s, 2),
        "fetch_decode": _figures(baseline, args.n),
        "audit": _figures(audit, args.n),
        "ratio": round(audit["seconds"] / baseline["seconds"], 2),
        "audit_totals": totals,
    }
    for name, label in (("fetch_decode", "fetch+decode (baseline)"), ("audit", "audit")):
        f = result[name]
        say(f"{label:<24} {f['seconds']:8.2f} s  {f['messages_per_second']:>10,.0f} messages/s"
            f"  peak RSS {f['peak_rss_mb']:,.0f} MB")  # fmt: skip
    say(f"audit / fetch+decode     {result['ratio']:.2f}x   (audit: complete, "
        f"{totals['both']:,} in both, {totals['windows']} windows)")  # fmt: skip
    if not args.workdir:
        shutil.rmtree(work)
    return result


def _figures(child: dict[str, Any], n: int) -> dict[str, float]:
    return {
        "seconds": round(child["seconds"], 2),
        "messages_per_second": round(n / child["seconds"]),
        "peak_rss_mb": round(child["peak_rss_mb"], 1),
    }


if __name__ == "__main__":
    sys.exit(main())
