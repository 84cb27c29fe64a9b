"""The named steps of a migration run and of an archive build: each one timed, and a
failure in one (a Python error in a Spark task, a JVM error) turned into one line that says
which step failed and why."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager

from waku_legacy.errors import WakuLegacyError

__all__ = ["MigrationError", "spark_failure", "timed_step"]


class MigrationError(WakuLegacyError):
    """A migration step that failed (the message says which, and why)."""


def spark_failure(step: str, exc: Exception) -> MigrationError:
    """Turn a Spark failure (a Python error in a task, a JVM error) into one clear line."""
    text = str(exc)
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    ours = [ln for ln in lines if "waku_legacy" in ln and "Error" in ln and ": " in ln]
    errors = [ln for ln in lines if ("Error: " in ln or "Exception: " in ln) and "File " not in ln]
    detail = (ours or errors or lines or [type(exc).__name__])[-1]
    from waku_legacy.migrate.spark import spark_log_file

    log_file = spark_log_file()
    where = f" (Spark's log, with the executor traces: {log_file})" if log_file else ""
    return MigrationError(f"{step} failed: {detail[:500]}{where}")


@contextmanager
def timed_step(timing: dict[str, float], name: str, doing: str) -> Iterator[None]:
    """Time the block as ``timing[name]`` (seconds; only when it completes). An error that is
    not already one of ours becomes a :class:`MigrationError` saying ``<doing> failed: …``."""
    started = time.monotonic()
    try:
        yield
    except WakuLegacyError:
        raise
    except Exception as exc:
        raise spark_failure(doing, exc) from exc
    timing[name] = time.monotonic() - started
