"""Benchmark: ``history export`` of every message, static HTML and JSONL, against its floor.

A SQLite readable index of N synthesized messages (``bench_history.synthesize``: 5 channels
over two years, ~1% edited, ~2% with reactions, ~0.5% deleted) is built once (not timed);
then, each in a child process of its own (so that its peak RSS is its own):

- floor: every shown message read from the reader (``iter_messages``), nothing written;
- ``jsonl``: one file per channel;
- ``html``: the static site (a page per channel day, ~N/3,650 messages each), in one process
  and in :data:`WORKERS` (``history export --workers``; peak RSS is the parent's).

Printed per run: seconds, messages/s, peak RSS (MB) and bytes written; with two sizes
(``--n`` and ``--n`` / 4) the peak RSS shows whether memory grows with the history (it should
not: messages are streamed, one day page in memory at a time).

Target (issue 35): a static HTML export of 1M messages in <= 3 minutes with flat memory.

    .venv/bin/python bench/bench_history_export.py --n 1000000
    .venv/bin/python bench/bench_history_export.py --n 100000
"""

from __future__ import annotations

import argparse
import importlib.util
import multiprocessing
import random
import resource
import shutil
import sys
import tempfile
import time
from pathlib import Path

import coincurve

HERE = Path(__file__).resolve().parent
WORKERS = 2  # html in this many processes (the CLI's --workers; default: the cores)


def _bench_history() -> object:
    spec = importlib.util.spec_from_file_location("bench_history", HERE / "bench_history.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def build(path: Path, n: int, seed: int) -> str:
    from waku_legacy.history.index import HistoryIndex
    from waku_legacy.identity.topics import CommunityId

    history = _bench_history()
    rng = random.Random(seed)
    community = str(CommunityId(coincurve.PrivateKey(b"\x42" * 32).public_key.format()))
    authors = [
        "0x" + coincurve.PrivateKey(rng.randbytes(32)).public_key.format(False).hex()
        for _ in range(2000)
    ]
    with HistoryIndex.open(f"sqlite:///{path}", create=True) as index:
        index.add_events(community, history.synthesize(n, seed, community, authors))  # type: ignore[attr-defined]
    return community


def _measure(what: str, db: Path, community: str, out: Path, queue: object) -> None:
    import functools

    from waku_legacy.history.export import export_history, index_reader
    from waku_legacy.history.index import HistoryIndex
    from waku_legacy.history.model import ViewPolicy

    started = time.perf_counter()
    with HistoryIndex.open(f"sqlite:///{db}") as index:
        reader = index.reader()
        fmt, _, workers = what.partition("x")
        if what == "floor":
            count = sum(1 for _ in reader.iter_messages(community))
        else:
            factory = functools.partial(index_reader, f"sqlite:///{db}", ViewPolicy())
            count = export_history(
                reader, community, fmt, out, workers=int(workers or 1), reader_factory=factory
            ).messages
    took = time.perf_counter() - started
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    written = sum(p.stat().st_size for p in out.rglob("*") if p.is_file()) if out.exists() else 0
    queue.put((what, count, took, peak_mb, written))  # type: ignore[attr-defined]


def run(n: int, seed: int, work: Path) -> None:
    db = work / f"history-{n}.sqlite3"
    started = time.perf_counter()
    community = build(db, n, seed)
    print(f"== {n:,} messages (index built in {time.perf_counter() - started:.1f} s)", flush=True)
    context = multiprocessing.get_context("spawn")
    for what in ("floor", "jsonl", "html", f"htmlx{WORKERS}"):
        queue = context.Queue()
        out = work / f"out-{what}-{n}"
        child = context.Process(target=_measure, args=(what, db, community, out, queue))
        child.start()
        result = queue.get()
        child.join()
        _, count, took, peak_mb, written = result
        rate, megabytes = count / took, written / 1e6
        print(
            f"{what:>6}: {count:,} messages in {took:6.1f} s ({rate:9,.0f}/s), "
            f"peak RSS {peak_mb:6.0f} MB, {megabytes:8.1f} MB written",
            flush=True,
        )
        shutil.rmtree(out, ignore_errors=True)
    db.unlink()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=1_000_000)
    parser.add_argument("--seed", type=int, default=35)
    parser.add_argument("--work", help="a folder for the index and the exports (default: temp)")
    args = parser.parse_args()
    work = Path(args.work or tempfile.mkdtemp(prefix="bench-history-export-"))
    work.mkdir(parents=True, exist_ok=True)
    try:
        for n in (args.n // 4, args.n):
            run(n, args.seed, work)
    finally:
        if not args.work:
            shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
