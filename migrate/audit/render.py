"""The audit's JSON document as a terminal table (:func:`render_audit_table`): totals first,
then the worst windows, then the lists. The HTML page is :mod:`~waku_legacy.migrate.audit.html`."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from waku_legacy.migrate.audit.compare import WORST_WINDOWS

__all__ = ["render_audit_table"]


def _day(seconds: int) -> str:
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%d")


def _row(cells: Sequence[object], widths: Sequence[int]) -> str:
    padded = (
        str(cell).rjust(width) if column else str(cell).ljust(width)
        for column, (cell, width) in enumerate(zip(cells, widths, strict=True))
    )
    return "  ".join(padded).rstrip()


WINDOW_COLUMNS = ("both", "missing", "extra", "duplicates", "copies_missing")
WINDOW_WIDTHS = (42, 6, 8, 6, 10, 14)


def _window_lines(window: dict[str, Any]) -> list[str]:
    name = f"{_day(window['start'])} .. {_day(window['end'])} ({window['archive_topics']})"
    lines = [_row((name, *(window[k] for k in WINDOW_COLUMNS)), WINDOW_WIDTHS)]
    for channel in window["channels"]:
        cells = (f"  {channel['channel']}", *(channel[k] for k in WINDOW_COLUMNS))
        lines.append(_row(cells, WINDOW_WIDTHS))
    lines += [f"  ! {problem}" for problem in window["problems"]]
    return lines


def render_audit_table(document: dict[str, Any]) -> str:
    """The audit for a terminal: totals first, then the worst windows, then the lists."""
    totals = document["totals"]
    verdict = "COMPLETE" if document["complete"] else "INCOMPLETE"
    lines = [
        f"audit of {document['community']}: {verdict}",
        f"archives: {document['archives']['origin']} ({document['archives']['count']} "
        f"archive(s)); sources: {', '.join(document['sources'])}",
        f"archive topics: {document['archive_topics']}; counts are messages (one per original "
        "message hash), copies_* count archived copies (two per channel message in 'both')",
        "",
        "totals",
        *(f"  {name.replace('_', ' '):<24}{value:>10}" for name, value in totals.items()),
    ]
    by_start = {w["start"]: w for w in document["windows"]}
    if document["worst_windows"]:
        header = ("window (UTC, archive topics)", *(k.replace("_", " ") for k in WINDOW_COLUMNS))
        lines += ["", "worst windows (most missing first)", _row(header, WINDOW_WIDTHS)]
        for start in document["worst_windows"]:
            lines += _window_lines(by_start[start])
    shown = set(document["worst_windows"])
    other = [w for w in document["windows"] if w["start"] not in shown and w["problems"]]
    if other:
        lines += ["", "other windows with problems"]
        for window in other:
            lines += _window_lines(window)
    lines += _list_lines(document)
    return "\n".join(lines)


def _list_lines(document: dict[str, Any]) -> list[str]:
    lines: list[str] = []
    if document["extra"]:
        origins = Counter(e["probable_origin"] for e in document["extra"])
        lines += ["", "extra messages by probable origin"]
        lines += [f"  {origin}: {n}" for origin, n in sorted(origins.items())]
    if document["duplicates"]:
        lines += ["", "copies duplicated inside the archives"]
        lines += [f"  {d['hash']}: {d['copies']} copies in {', '.join(d['archive_ids'])}"
                  for d in document["duplicates"][:WORST_WINDOWS]]  # fmt: skip
    if document["archive_problems"]:
        lines += ["", "archive problems"]
        lines += [f"  {p['archive_id']}: {p['problem']}" for p in document["archive_problems"]]
    return lines
