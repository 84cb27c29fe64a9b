"""Progress for a migration run: a tqdm bar on a terminal, structured log lines otherwise.

Spark stages report their task counts (polled from Spark's status tracker in a background
thread while a step runs); the store write reports rows.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, TextIO

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = ["Progress"]


class Progress:
    def __init__(self, *, enabled: bool = True, stream: TextIO | None = None) -> None:
        self.stream = stream or sys.stderr
        self.enabled = enabled
        self.tty = enabled and hasattr(self.stream, "isatty") and self.stream.isatty()

    def log(self, message: str) -> None:
        if self.enabled:
            print(f"migrate: {message}", file=self.stream, flush=True)

    @contextmanager
    def bar(self, step: str, total: int | None = None, unit: str = "it") -> Iterator[Any]:
        """A bar (tty) or start/end log lines; yields an object with ``update(n)``."""
        if self.tty:
            from tqdm import tqdm

            with tqdm(total=total, desc=step, unit=unit, file=self.stream, leave=True) as bar:
                yield bar
            return
        counter = _Counter()
        started = time.monotonic()
        self.log(f"{step}: started" + (f" ({total} {unit})" if total else ""))
        yield counter
        self.log(f"{step}: done, {counter.n} {unit} in {time.monotonic() - started:.1f}s")

    @contextmanager
    def spark_step(self, spark: SparkSession, step: str) -> Iterator[None]:
        """Show the tasks of the Spark jobs run inside the block."""
        if not self.enabled:
            yield
            return
        context = spark.sparkContext
        group = f"waku-legacy-{step}-{time.monotonic_ns()}"
        context.setJobGroup(group, step)
        stop = threading.Event()
        with self.bar(step, unit="tasks") as bar:

            def poll() -> None:
                shown = 0
                tracker = context.statusTracker()
                seen_stages: dict[int, tuple[int, int]] = {}
                while not stop.wait(0.5):
                    try:
                        for job_id in tracker.getJobIdsForGroup(group):
                            job = tracker.getJobInfo(job_id)
                            for stage_id in job.stageIds if job else ():
                                info = tracker.getStageInfo(stage_id)
                                if info is not None:
                                    seen_stages[stage_id] = (
                                        info.numCompletedTasks,
                                        info.numTasks,
                                    )
                    except Exception:  # the tracker is best effort
                        continue
                    done = sum(d for d, _ in seen_stages.values())
                    total = sum(t for _, t in seen_stages.values())
                    if hasattr(bar, "total") and total and bar.total != total:
                        bar.total = total
                        bar.refresh()
                    if done > shown:
                        bar.update(done - shown)
                        shown = done

            thread = threading.Thread(target=poll, daemon=True)
            thread.start()
            try:
                yield
            finally:
                stop.set()
                thread.join(timeout=2)
                # None clears the job group (Spark's setLocalProperty takes null)
                group_key = "spark.jobGroup.id"
                context.setLocalProperty(group_key, None)  # type: ignore[arg-type]  # stub: str only


class _Counter:
    def __init__(self) -> None:
        self.n = 0
        self.total: int | None = None

    def update(self, n: int = 1) -> None:
        self.n += n

    def refresh(self) -> None:
        pass
