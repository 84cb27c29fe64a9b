"""Progress for a migration run: :class:`waku_legacy.console.Progress` (a tqdm bar on a
terminal, JSON ``"event": "progress"`` lines at least every 5 s otherwise) and its Spark
steps.

A Spark step reports its tasks done/total, polled from Spark's status tracker in a
background thread while the step runs, and the records its stages produced so far (input,
shuffle-write and output rows from Spark's status store), with the rate and ETA of the
tasks.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from waku_legacy.console import Progress as ConsoleProgress
from waku_legacy.console import ProgressStep
from waku_legacy.migrate.spark import clear_job_group, group_stages

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = ["SparkProgress"]

POLL_SECONDS = 0.5


class SparkProgress(ConsoleProgress):
    """The console progress, plus :meth:`spark_step` (a migration run's Spark steps)."""

    @contextmanager
    def spark_step(
        self,
        spark: SparkSession,
        step: str,
        *,
        records_total: int | None = None,
        records_from: Callable[[], int] | None = None,
    ) -> Iterator[None]:
        """Show the tasks (and records) of the Spark jobs run inside the block: tasks
        done/total (the total grows as the step's jobs start), and the records its stages
        handled against ``records_total`` when the caller knows it (``null`` otherwise: a
        first read of legacy sources cannot count them before reading). ``records_from``
        gives the records instead of the stages' counts (jobs whose Python workers write
        their rows themselves, e.g. an accumulator's value: their stages count only the few
        rows they return)."""
        if not self.enabled:
            yield
            return
        context = spark.sparkContext
        group = f"waku-legacy-{step}-{time.monotonic_ns()}"
        context.setJobGroup(group, step)
        stop = threading.Event()
        with self.bar(step, unit="tasks") as bar:
            bar.extra["records"] = 0
            bar.extra["records_total"] = records_total
            thread = threading.Thread(
                target=_poll_spark, args=(context, group, bar, stop, records_from), daemon=True
            )
            thread.start()
            try:
                yield
                stop.set()
                thread.join(timeout=2)
                _poll_once(context, group, bar, {}, records_from)
                # the jobs are over: stages Spark skipped (their shuffle output reused)
                # never complete their tasks, yet nothing of the step is left to do
                if bar.total:
                    bar.update(bar.total - bar.done)
            finally:
                stop.set()
                thread.join(timeout=2)
                clear_job_group(context)


def _poll_spark(
    context: Any,
    group: str,
    bar: ProgressStep,
    stop: threading.Event,
    records_from: Callable[[], int] | None,
) -> None:
    seen: dict[int, tuple[int, int, int]] = {}
    while not stop.wait(POLL_SECONDS):
        _poll_once(context, group, bar, seen, records_from)


def _poll_once(
    context: Any,
    group: str,
    bar: ProgressStep,
    seen: dict[int, tuple[int, int, int]],
    records_from: Callable[[], int] | None = None,
) -> None:
    """Tasks done/total of the group's stages, and the records they produced."""
    try:
        store = context._jsc.sc().statusStore()
        for stage_id, info in group_stages(context, group):
            records = seen.get(stage_id, (0, 0, 0))[2]
            try:
                data = store.lastStageAttempt(stage_id)
                records = max(
                    data.inputRecords(), data.shuffleWriteRecords(), data.outputRecords()
                )
            except Exception:  # the status store is best effort (py4j, a stage gone)
                pass
            seen[stage_id] = (info.numCompletedTasks, info.numTasks, records)
    except Exception:  # the tracker is best effort
        return
    done = sum(d for d, _, _ in seen.values())
    total = sum(t for _, t, _ in seen.values())
    if total and bar.total != total:
        bar.total = total
    # the most records one stage handled: the step's later stages see the same records
    # again (read -> shuffle -> write), a sum would count each record once per stage
    if records_from is not None:
        bar.extra["records"] = records_from()
    else:
        bar.extra["records"] = max((r for _, _, r in seen.values()), default=0)
    if done > bar.done:
        bar.update(done - bar.done)
