"""Fault injection for crash tests: named points where a run can be made to die.

The migration calls its fault hook at every durable step: ``store:batch:<n>`` after the n-th
store batch is committed, and the archive builder's own steps prefixed with
``archive:<community>:`` (``data:append:<n>:partial``, ``data:fsync``, ``index``, …).

- :func:`fault_from_env` reads ``WAKU_LEGACY_FAULT`` (a step name, or a glob such as
  ``store:batch:3`` or ``archive:*:index``): at the first matching step the process kills
  itself with SIGKILL, exactly like an operator's ``kill -9`` (no cleanup, no ``finally``).
- :class:`CrashAt` raises :class:`SimulatedCrash` (a BaseException) instead, for in-process
  tests.
"""

from __future__ import annotations

import fnmatch
import os
import signal
from collections.abc import Callable
from dataclasses import dataclass, field

__all__ = [
    "ENV_VAR",
    "TASK_ENV_VAR",
    "CrashAt",
    "FaultHook",
    "SimulatedCrash",
    "fault_from_env",
    "no_fault",
    "task_fault",
]

ENV_VAR = "WAKU_LEGACY_FAULT"
#: A glob of task steps (``read:<source kind>``) at which a Spark task fails as a full disk
#: would (OSError ENOSPC), raised inside the executor: what an operator sees then is tested.
TASK_ENV_VAR = "WAKU_LEGACY_TASK_FAULT"
FaultHook = Callable[[str], None]


def no_fault(step: str) -> None:
    """The production hook: does nothing."""


class SimulatedCrash(BaseException):
    """Raised by :class:`CrashAt` at its step (BaseException: no ``except Exception`` eats it)."""


@dataclass(slots=True)
class CrashAt:
    """Raise :class:`SimulatedCrash` at the ``occurrence``-th step matching ``pattern``."""

    pattern: str
    occurrence: int = 1
    seen: list[str] = field(default_factory=list)
    matches: int = 0
    fired: bool = False

    def __call__(self, step: str) -> None:
        self.seen.append(step)
        if not self.fired and fnmatch.fnmatchcase(step, self.pattern):
            self.matches += 1
            if self.matches == self.occurrence:
                self.fired = True
                raise SimulatedCrash(step)


def _kill_self(pattern: str) -> FaultHook:
    def hook(step: str) -> None:
        if fnmatch.fnmatchcase(step, pattern):
            os.kill(os.getpid(), signal.SIGKILL)

    return hook


def fault_from_env() -> FaultHook:
    pattern = os.environ.get(ENV_VAR, "").strip()
    return _kill_self(pattern) if pattern else no_fault


def task_fault(step: str) -> None:
    """In a Spark task: raise ENOSPC at ``step`` when ``WAKU_LEGACY_TASK_FAULT`` matches it."""
    pattern = os.environ.get(TASK_ENV_VAR, "").strip()
    if pattern and fnmatch.fnmatchcase(step, pattern):
        import errno

        raise OSError(errno.ENOSPC, f"No space left on device (simulated at {step})")
