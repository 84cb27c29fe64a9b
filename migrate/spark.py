"""The one place that builds SparkSessions (local mode by default, a cluster by URL).

PySpark's traps are handled here: workers must run this interpreter (``PYSPARK_PYTHON``),
Spark must bind to loopback when no address is given, and the UI stays off.
"""

from __future__ import annotations

import contextlib
import os
import sys
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from waku_legacy.migrate.work_files import remove_temporaries

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

DEFAULT_MASTER = "local[*]"

#: In local mode the executors run in the driver's JVM, whose share of a migration is small
#: and short (step 1's rows never enter it): C2's compiles of each new job's code cost more
#: CPU than they save, and they compete with the driver's SQLite writer. C1 only: the 1M
#: benchmark 7% faster with 10% less CPU, with either store (bench/README.md). Not applied
#: when the configuration sets a tiered-compilation option itself, nor on a cluster.
LOCAL_JIT_OPTION = "-XX:TieredStopAtLevel=1"

#: Where this process's Spark (driver and, in local mode, its executors) logs, once a
#: session was built with ``log_file``; :func:`waku_legacy.migrate.steps.spark_failure`
#: names it in its one line.
_log_file: str | None = None


def spark_log_file() -> str | None:
    return _log_file


def _log4j_to_file(log_file: Path) -> str:
    """Write a log4j2 configuration that sends every Spark log line (executor task
    failures: Python tracebacks and Java frames) to ``log_file`` instead of the terminal;
    the JVM option that loads it."""
    log_file.parent.mkdir(parents=True, exist_ok=True)
    properties = log_file.with_name("log4j2.properties")
    target = str(log_file.resolve()).replace("\\", "/")
    properties.write_text(
        "rootLogger.level = warn\n"
        "rootLogger.appenderRef.file.ref = file\n"
        "appender.file.type = File\n"
        "appender.file.name = file\n"
        f"appender.file.fileName = {target}\n"
        "appender.file.append = true\n"
        "appender.file.layout.type = PatternLayout\n"
        "appender.file.layout.pattern = %d{yyyy-MM-dd HH:mm:ss} %p %c{1}: %m%n%ex\n"
    )
    return f"-Dlog4j.configurationFile=file:{properties.resolve()}"


#: The niceness :func:`local_jvm_yields` gives the local-mode JVM's threads, the same as the
#: archive tasks' Python workers take (``archives.ARCHIVE_TASK_NICENESS``).
LOCAL_JVM_NICENESS = 10


def _local_jvm_pid(spark: SparkSession) -> int | None:
    """The pid of the JVM this process launched for ``spark`` in local mode (the one that
    runs its executors' tasks), else None (a cluster, or a JVM it did not start)."""
    if not (spark.sparkContext.master or "").startswith("local"):
        return None
    proc = getattr(spark.sparkContext._gateway, "proc", None)
    pid = getattr(proc, "pid", None)
    return pid if isinstance(pid, int) else None


def _lower_thread_priority(pid: int, niceness: int) -> dict[int, int]:
    """Every current thread of process ``pid`` made at least ``niceness`` nice (on Linux a
    priority is per thread; threads started later inherit their creator's); returns the
    niceness of each thread changed, to restore. A thread gone meanwhile, or a platform
    without ``/proc``, is left out."""
    changed: dict[int, int] = {}
    try:
        threads = [int(t) for t in os.listdir(f"/proc/{pid}/task")]
    except OSError:
        return changed
    for tid in threads:
        with contextlib.suppress(OSError):
            current = os.getpriority(os.PRIO_PROCESS, tid)
            if current < niceness:
                os.setpriority(os.PRIO_PROCESS, tid, niceness)
                changed[tid] = current
    return changed


@contextlib.contextmanager
def local_jvm_yields(spark: SparkSession) -> Iterator[None]:
    """In local mode, the JVM's threads (its executors' tasks, its compilers, its garbage
    collector) at least LOCAL_JVM_NICENESS nice for the block: the driver's SQLite writer,
    the run's critical path, shares their cores and goes first; the Spark jobs beside it
    take what it leaves. Each thread's niceness is set back afterwards where that is
    permitted (raising a priority needs a privilege; threads started during the block
    keep theirs)."""
    pid = _local_jvm_pid(spark)
    changed = {} if pid is None else _lower_thread_priority(pid, LOCAL_JVM_NICENESS)
    try:
        yield
    finally:
        for tid, niceness in changed.items():
            with contextlib.suppress(OSError):
                os.setpriority(os.PRIO_PROCESS, tid, niceness)


#: the local property that names the thread's job group
JOB_GROUP = "spark.jobGroup.id"
#: how long a failed job's cancelled tasks may take to end before their files are swept
#: (PySpark destroys a task's Python worker spark.python.task.killTimeout, 2 s, after the kill)
TASKS_END_TIMEOUT = 60.0


@contextlib.contextmanager
def temporaries_swept_on_failure(
    spark: SparkSession, directories: Iterable[Path | None], *, timeout: float = TASKS_END_TIMEOUT
) -> Iterator[None]:
    """The Spark jobs of the block; when one fails, the files its tasks were writing are
    removed. A task writes under a dot-name and removes it when it fails itself, but the
    tasks Spark cancels because another failed are killed where they are (their Python
    worker destroyed) and leave theirs: once the job's tasks have all ended, the dot-named
    ``*.tmp`` files in ``directories`` go, so that a failed run leaves no temporary."""
    context = spark.sparkContext
    group = context.getLocalProperty(JOB_GROUP)  # a progress bar's, when one is shown
    own = group is None
    if group is None:
        group = f"waku-legacy-swept-{time.monotonic_ns()}"
        context.setJobGroup(group, "a step whose files are swept when it fails")
    try:
        yield
    except BaseException:
        _await_tasks_ended(context, group, timeout)
        for directory in directories:
            if directory is not None:
                remove_temporaries(directory)
        raise
    finally:
        if own:
            clear_job_group(context)


def group_stages(context: Any, group: str) -> Iterator[tuple[int, Any]]:
    """(stage id, SparkStageInfo) of every stage of the job group's jobs that Spark's status
    tracker still knows."""
    tracker = context.statusTracker()
    for job_id in tracker.getJobIdsForGroup(group):
        job = tracker.getJobInfo(job_id)
        for stage_id in job.stageIds if job else ():
            info = tracker.getStageInfo(stage_id)
            if info is not None:
                yield stage_id, info


def clear_job_group(context: Any) -> None:
    """The thread's later jobs in no job group (Spark's setLocalProperty takes null)."""
    context.setLocalProperty(JOB_GROUP, None)


def _await_tasks_ended(context: Any, group: str, timeout: float) -> None:
    """Until no task of the group's jobs runs (or ``timeout``)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            active = sum(info.numActiveTasks for _, info in group_stages(context, group))
        except Exception:  # the tracker is best effort (py4j, a context stopping)
            return
        if not active:
            return
        time.sleep(0.1)


def run_per_file(
    spark: SparkSession, files: list[Path], task: Callable[[Path], Iterator[Any]]
) -> list[Any]:
    """``task`` over every file, a Spark task each, and what they yielded. An RDD job: the
    tasks take file numbers and send small results back; no SQL engine is needed (its
    first use in a fresh JVM costs seconds of planning)."""
    if not files:
        return []

    def run(numbers: Iterable[int]) -> Iterator[Any]:
        for number in numbers:
            yield from task(files[number])

    numbers = spark.sparkContext.parallelize(range(len(files)), len(files))
    return numbers.mapPartitions(run).collect()


def with_local_jit(master: str, conf: dict[str, str]) -> dict[str, str]:
    """``conf`` with LOCAL_JIT_OPTION added to the driver's Java options in local mode,
    unless they set a tiered-compilation option themselves."""
    conf = dict(conf)
    key = "spark.driver.extraJavaOptions"
    if master.startswith("local") and "Tiered" not in conf.get(key, ""):
        conf[key] = f"{conf.get(key, '')} {LOCAL_JIT_OPTION}".strip()
    return conf


def spark_session(
    master: str = DEFAULT_MASTER,
    *,
    app_name: str = "waku-legacy",
    shuffle_partitions: int | None = None,
    conf: dict[str, str] | None = None,
    log_file: str | os.PathLike[str] | None = None,
) -> SparkSession:
    """Get or create the process's SparkSession for ``master``; with ``log_file``, Spark's
    log (executor traces included) goes to that file, not to stderr (a JVM started
    already keeps its logging)."""
    global _log_file
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from pyspark.sql import SparkSession

    builder = (
        SparkSession.builder.master(master)
        .appName(app_name)
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.execution.arrow.pyspark.enabled", "true")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.driver.bindAddress", os.environ["SPARK_LOCAL_IP"])
        .config("spark.executorEnv.PYSPARK_PYTHON", os.environ["PYSPARK_PYTHON"])
    )
    if shuffle_partitions is not None:
        builder = builder.config("spark.sql.shuffle.partitions", str(shuffle_partitions))
    conf = with_local_jit(master, conf or {})
    if log_file is not None:
        option = _log4j_to_file(Path(log_file))
        for key in ("spark.driver.extraJavaOptions", "spark.executor.extraJavaOptions"):
            conf[key] = f"{conf[key]} {option}" if conf.get(key) else option
        _log_file = str(log_file)
    for key, value in conf.items():
        builder = builder.config(key, value)
    if log_file is not None:
        with _jvm_stderr_to(Path(log_file)):
            session = builder.getOrCreate()
    else:
        session = builder.getOrCreate()
    session.sparkContext.setLogLevel("WARN")
    return session


@contextlib.contextmanager
def _jvm_stderr_to(log_file: Path) -> Iterator[None]:
    """The JVM that ``getOrCreate`` may launch inherits ``log_file`` as its stderr, and so do
    the Python workers it starts: what they print as they stop (a worker's BrokenPipeError
    traceback when the driver ends a failed run) goes to the log, not around the one line
    an operator reads. Our own stderr is back as soon as the session exists."""
    log_file.parent.mkdir(parents=True, exist_ok=True)
    sys.stderr.flush()
    target = os.open(log_file, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    saved = os.dup(2)
    try:
        os.dup2(target, 2)
        yield
    finally:
        sys.stderr.flush()
        os.dup2(saved, 2)
        os.close(saved)
        os.close(target)
