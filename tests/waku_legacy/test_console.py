"""Issue 24: progress of long work, one class for the package: JSON lines on a non-terminal
at least every interval (a heartbeat while the count does not move), with rate and ETA."""

from __future__ import annotations

import io
import json
import time

from waku_legacy.console import Progress


def _lines(stream: io.StringIO) -> list[dict]:
    return [json.loads(line) for line in stream.getvalue().splitlines() if line.startswith("{")]


def test_a_step_that_does_not_move_still_reports_every_interval() -> None:
    stream = io.StringIO()
    progress = Progress(stream=stream, interval=0.1)
    with progress.bar("read", total=100, unit="rec") as step:
        step.update(25)
        time.sleep(0.55)  # nothing moves: the heartbeat speaks
        step.update(25)
    lines = _lines(stream)
    assert len(lines) >= 5, lines
    assert all(line["event"] == "progress" and line["step"] == "read" for line in lines)
    assert lines[0]["done"] == 0 and lines[-1]["done"] == 50 and lines[-1]["finished"] is True
    middle = [line for line in lines if line["done"] == 25]
    assert middle and all(line["rate"] > 0 and line["eta_s"] > 0 for line in middle)
    assert lines[-1]["unit"] == "rec" and lines[-1]["total"] == 100


def test_the_polling_callback_is_throttled_and_ends_with_the_total() -> None:
    stream = io.StringIO()
    progress = Progress(stream=stream, interval=60)
    for done in range(0, 101):
        progress("archives", done, 100)
    lines = _lines(stream)
    assert [line["done"] for line in lines] == [0, 100]
    assert lines[-1]["finished"] is True


def test_disabled_progress_prints_nothing() -> None:
    stream = io.StringIO()
    progress = Progress(False, stream=stream, interval=0.01)
    with progress.bar("x") as step:
        step.update(3)
    progress("y", 1, 1)
    progress.log("hello")
    assert stream.getvalue() == ""


def test_a_step_without_a_total_says_so() -> None:
    """Issue 24: a step whose total is not known (a legacy source is not counted before it
    is read) has no ETA, and each of its lines says why instead of leaving a null."""
    stream = io.StringIO()
    progress = Progress(stream=stream, interval=0.1)
    with progress.bar("audit: read source-1", unit="rec") as step:
        step.update(7)
        time.sleep(0.25)
    lines = _lines(stream)
    running = [line for line in lines if not line["finished"]]
    assert len(running) >= 2
    assert all(line["total"] is None and line["eta_s"] is None for line in running)
    assert all(line["note"] == "total unknown" for line in running)
    assert lines[-1]["finished"] is True and lines[-1]["done"] == 7 and "note" not in lines[-1]
    with progress.bar("store", total=10, unit="msg") as step:
        step.update(5)
    assert all("note" not in line for line in _lines(stream)[len(lines) :])
