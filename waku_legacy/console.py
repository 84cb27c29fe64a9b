"""What the operator commands print: one JSON document on stdout (errors go to stderr,
see :mod:`waku_legacy.cli`)."""

from __future__ import annotations

import json
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, TextIO

__all__ = ["Progress", "ProgressStep", "print_json"]


def print_json(value: Any) -> None:
    """Print one JSON document on stdout (the operator commands' output format)."""
    json.dump(value, sys.stdout, indent=2, sort_keys=False)
    sys.stdout.write("\n")


class Progress:
    """Progress of long work, for every command (one class for the package): a tqdm bar per
    step on a terminal; otherwise JSON lines on stderr, ``{"event": "progress", "step",
    "done", "total", "unit", "rate", "eta_s", "elapsed_s"}``, when a step starts, at least
    every ``interval`` seconds while it runs (a heartbeat thread: a step whose count does
    not move still says so) and when it ends. Plain text lines (:meth:`log`) name what is
    happening. Also a ``(stage, done, total)`` callback (``progress(stage, done, total)``)
    for code that reports counts it polls (the archive fetch)."""

    def __init__(
        self,
        enabled: bool = True,
        *,
        stream: TextIO | None = None,
        prefix: str = "migrate",
        interval: float = 5.0,
    ) -> None:
        self.stream = stream or sys.stderr
        self.enabled = enabled
        self.tty = enabled and hasattr(self.stream, "isatty") and self.stream.isatty()
        self.prefix = prefix
        self.interval = interval
        self._steps: dict[str, ProgressStep] = {}
        self._lock = threading.Lock()

    def log(self, message: str) -> None:
        if self.enabled:
            print(f"{self.prefix}: {message}", file=self.stream, flush=True)

    def emit(self, step: ProgressStep) -> None:
        """One JSON progress line for ``step`` (non-terminal output)."""
        with self._lock:
            print(json.dumps(step.to_json()), file=self.stream, flush=True)

    @contextmanager
    def bar(self, step: str, total: int | None = None, unit: str = "it") -> Iterator[ProgressStep]:
        """A step: yields its :class:`ProgressStep` (``update(n)``, ``total``, ``extra``)."""
        state = ProgressStep(step, total, unit)
        if not self.enabled:
            yield state
            return
        if self.tty:
            from tqdm import tqdm

            with tqdm(total=total, desc=step, unit=unit, file=self.stream, leave=True) as bar:
                state.bar = bar
                yield state
            return
        self.emit(state)
        stop = threading.Event()

        def heartbeat() -> None:
            while not stop.wait(self.interval):
                self.emit(state)

        thread = threading.Thread(target=heartbeat, name=f"progress {step}", daemon=True)
        thread.start()
        try:
            yield state
        finally:
            stop.set()
            thread.join(timeout=2)
            state.finished = True
            self.emit(state)

    def __call__(self, stage: str, done: int, total: int) -> None:
        """The polling callback: the step ``stage`` is at ``done`` of ``total``."""
        if not self.enabled:
            return
        state = self._steps.get(stage)
        if state is None:
            state = self._steps[stage] = ProgressStep(stage, total, "it")
            if self.tty:
                from tqdm import tqdm

                state.bar = tqdm(total=total, desc=stage, file=self.stream)
        state.total = total
        state.update(done - state.done)
        if self.tty:
            if done >= total and state.bar is not None:
                state.bar.close()
            return
        now = time.monotonic()
        if done >= total:
            state.finished = True
        if state.finished or now - state.last_emitted >= self.interval:
            state.last_emitted = now
            self.emit(state)


#: A JSON progress line's ``note`` while its step's total is not known (so no ETA either).
TOTAL_UNKNOWN = "total unknown"


class ProgressStep:
    """One step's count: what :meth:`Progress.bar` yields and its JSON lines report."""

    def __init__(self, step: str, total: int | None, unit: str) -> None:
        self.step = step
        self._total = total
        self.unit = unit
        self.done = 0
        self.started = time.monotonic()
        self.finished = False
        self.last_emitted = 0.0
        self.extra: dict[str, Any] = {}  # more counts, e.g. a Spark step's records
        self.bar: Any = None  # the tqdm bar on a terminal

    @property
    def total(self) -> int | None:
        return self._total

    @total.setter
    def total(self, value: int | None) -> None:
        self._total = value
        if self.bar is not None and value and self.bar.total != value:
            self.bar.total = value
            self.bar.refresh()

    @property
    def n(self) -> int:  # tqdm's name, for callers written against a bar
        return self.done

    def update(self, n: int = 1) -> None:
        self.done += n
        if self.bar is not None and n:
            self.bar.update(n)
            if self.extra:
                self.bar.set_postfix(self.extra, refresh=False)

    def refresh(self) -> None:
        if self.bar is not None:
            self.bar.refresh()

    def to_json(self) -> dict[str, Any]:
        elapsed = time.monotonic() - self.started
        rate = self.done / elapsed if elapsed > 0 else 0.0
        remaining = None if self.total is None else max(self.total - self.done, 0)
        eta = None if remaining is None or rate <= 0 else round(remaining / rate, 1)
        line = {
            "event": "progress", "step": self.step, "done": self.done, "total": self.total,
            "unit": self.unit, "rate": round(rate, 2), "eta_s": 0 if self.finished else eta,
            "elapsed_s": round(elapsed, 1), "finished": self.finished, **self.extra,
        }  # fmt: skip
        if self.total is None and not self.finished:
            # no ETA without a total: say why rather than leave a reader guessing
            line["note"] = TOTAL_UNKNOWN
        return line
