"""The one SparkSession builder (migrate/spark.py): in local mode the driver's JVM, which
also runs the executors, compiles with C1 only (LOCAL_JIT_OPTION), as the JVM running the
tests shows in its own arguments; and it yields its cores to the driver's SQLite writer
(its threads niced while the writer runs, set back after), as /proc shows."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from waku_legacy.migrate.spark import (
    LOCAL_JIT_OPTION,
    LOCAL_JVM_NICENESS,
    _local_jvm_pid,
    local_jvm_yields,
    with_local_jit,
)

pytestmark = [pytest.mark.spark]


def test_the_local_jvm_runs_with_c1_only(spark) -> None:
    runtime = spark._jvm.java.lang.management.ManagementFactory.getRuntimeMXBean()
    arguments = list(runtime.getInputArguments())
    assert LOCAL_JIT_OPTION in arguments, arguments
    options = spark.sparkContext.getConf().get("spark.driver.extraJavaOptions")
    assert LOCAL_JIT_OPTION in options


def test_only_local_mode_and_only_unless_the_operator_chose() -> None:
    key = "spark.driver.extraJavaOptions"
    assert with_local_jit("local[2]", {})[key] == LOCAL_JIT_OPTION
    assert with_local_jit("local[*]", {key: "-Dx=1"})[key] == f"-Dx=1 {LOCAL_JIT_OPTION}"
    assert with_local_jit("spark://10.0.0.1:7077", {}) == {}
    chosen = {key: "-XX:-TieredCompilation"}
    assert with_local_jit("local[2]", chosen) == chosen


def _niceness(pid: int) -> dict[int, int]:
    """Each thread of ``pid``: its nice value (field 19 of its stat line)."""
    values = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            stat = Path(f"/proc/{pid}/task/{tid}/stat").read_text()
        except OSError:  # the thread ended
            continue
        values[int(tid)] = int(stat.rsplit(")", 1)[1].split()[16])
    return values


def test_the_local_jvm_yields_to_the_driver_while_it_writes(spark) -> None:
    pid = _local_jvm_pid(spark)
    assert pid is not None and "java" in Path(f"/proc/{pid}/comm").read_text()
    before = _niceness(pid)
    assert any(n < LOCAL_JVM_NICENESS for n in before.values())
    with local_jvm_yields(spark):
        during = _niceness(pid)
        assert len(during) > 10 and all(n >= LOCAL_JVM_NICENESS for n in during.values())
        assert spark.range(0, 1000, 1, 4).count() == 1000  # its jobs run, at that priority
    after = _niceness(pid)
    if os.geteuid() == 0:  # setting a priority back up needs the privilege
        assert {t: after[t] for t in before.keys() & after.keys()} == {
            t: before[t] for t in before.keys() & after.keys()
        }


def test_a_failed_jobs_killed_tasks_leave_no_temporary(spark, tmp_path: Path) -> None:
    """A task that fails removes its own temporary; one that Spark kills because another
    failed cannot (its Python worker is destroyed where it is). The sweep waits for the
    job's tasks to end and removes what they left, and only dot-named temporaries."""
    import time

    from waku_legacy.migrate.spark import temporaries_swept_on_failure

    kept = tmp_path / "part-00000.parquet"
    kept.write_bytes(b"a finished file")
    hidden_dir = tmp_path / ".nested.tmp"
    hidden_dir.mkdir()
    directory = str(tmp_path)

    def task(index: int, _: object) -> Iterator[int]:
        import os
        import time as clock

        if index == 0:
            clock.sleep(1.0)  # the other task has made its temporary by then
            raise OSError(28, "No space left on device")
        path = os.path.join(directory, f".part-{index:05d}.parquet.{os.getpid()}.tmp")
        with open(path, "wb") as handle:
            handle.write(b"half")
        clock.sleep(120)  # killed long before
        yield index

    started = time.monotonic()
    with pytest.raises(Exception, match="No space left on device"):
        with temporaries_swept_on_failure(spark, [tmp_path, None]):
            spark.sparkContext.parallelize(range(2), 2).mapPartitionsWithIndex(task).collect()
    assert time.monotonic() - started < 60  # the killed task ended; no timeout waited out
    assert sorted(p.name for p in tmp_path.iterdir()) == [".nested.tmp", "part-00000.parquet"]
    assert spark.sparkContext.getLocalProperty("spark.jobGroup.id") is None
    # the session serves the next job
    assert spark.sparkContext.parallelize(range(4), 2).sum() == 6
