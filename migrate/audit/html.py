"""The audit report (``waku-legacy audit --html``) as one self-contained HTML page: the
``--json`` document (version 2: messages, and copies named as copies) rendered with inline
CSS and an inline SVG coverage chart -- no scripts, no external assets, nothing loaded from
the network (its Content-Security-Policy forbids it).

Every value is HTML-escaped: hashes, channel ids, archive ids and problem texts come from
archives nobody vouches for. Times are UTC; numbers have thousands separators.
"""

from __future__ import annotations

import html
import math
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["LIST_CAP", "render_audit_html"]

# Rows shown per message list; the JSON holds them all.
LIST_CAP = 1_000
CONTENT_SECURITY_POLICY = "default-src 'none'; style-src 'unsafe-inline'; base-uri 'none'"
NONE = '<span class="none">–</span>'

STYLE = """
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:0;
 background:#f4f5f7;color:#1d2330}
header{background:#1d2330;color:#fff;padding:18px 28px}
header h1{font-size:20px;margin:0 0 6px;display:flex;gap:12px;align-items:center}
header p{margin:2px 0;color:#c6ccd8}
header code{background:#343d52;color:#eef0f4}
main{padding:8px 28px 28px;max-width:1200px}
h2{font-size:17px;margin:24px 0 8px;border-bottom:2px solid #d5d9e2;padding-bottom:4px}
.card{background:#fff;border:1px solid #d5d9e2;border-radius:6px;padding:14px 18px;margin:10px 0}
code{font:12.5px/1.4 ui-monospace,Menlo,Consolas,monospace;word-break:break-all;
 background:#f0f2f6;padding:1px 4px;border-radius:3px}
.verdict{padding:3px 12px;border-radius:12px;font-size:15px}
.ok{background:#d8f3df;color:#145c2a}
.bad{background:#fbd9d9;color:#8a1414}
.warn{background:#fff0c2;color:#6b4d00}
.badge{display:inline-block;padding:0 8px;border-radius:9px;font-weight:600;font-size:12.5px;
 white-space:nowrap}
.totals{display:grid;grid-template-columns:repeat(6,minmax(0,1fr));gap:10px}
@media (max-width:800px){.totals{grid-template-columns:repeat(3,minmax(0,1fr))}}
.group{margin:10px 0 4px;color:#5b6475;font-size:12.5px;text-transform:uppercase;
 letter-spacing:.04em}
.total{background:#fff;border:1px solid #d5d9e2;border-radius:6px;padding:8px 12px}
.total b{display:block;font-size:22px;font-variant-numeric:tabular-nums}
.total span{color:#5b6475;font-size:12.5px}
.total.alarm{border-color:#e3a3a3;background:#fff6f6}
.total.alarm b{color:#a11a1a}
.chart{overflow-x:auto}
.chart svg{display:block;font:11px system-ui,sans-serif}
.week:not(.no-archive):hover .hit{fill:rgba(29,35,48,.07)}
.legend{display:flex;flex-wrap:wrap;gap:6px 18px;margin:6px 0 0;color:#3b4354}
.key{display:inline-block;width:12px;height:12px;border-radius:2px;margin-right:5px;
 vertical-align:-1px}
.k-both{background:#3f9d5a}.k-missing{background:#d63c3c}.k-extra{background:#4b6fd6}
.k-quiet{width:0;border-left:2px dashed #5b6475;border-radius:0}
.k-noarc{background:repeating-linear-gradient(45deg,#f6d4d4 0 2px,#fffafa 2px 6px);
 border:1px solid #d63c3c}
table{border-collapse:collapse;width:100%;margin:4px 0 8px;background:#fff}
th,td{border:1px solid #dde1e8;padding:4px 8px;text-align:left;vertical-align:top}
th{background:#eef0f4;font-weight:600}
td.n{text-align:right;font-variant-numeric:tabular-nums}
td.hot{color:#a11a1a;font-weight:600}
td.when{white-space:nowrap}
td code{white-space:nowrap;word-break:normal}
.scroll{overflow-x:auto}
details{background:#fff;border:1px solid #d5d9e2;border-radius:6px;margin:6px 0;
 padding:6px 14px}
summary{cursor:pointer;font-weight:600}
summary .facts{font-weight:400;color:#3b4354}
ul.problems{margin:6px 0;padding-left:20px;color:#8a1414}
.none{color:#9aa1ae}
.more{color:#6b4d00;font-style:italic}
"""


def _e(value: object) -> str:
    return html.escape(str(value), quote=True)


def _number(value: int) -> str:
    return f"{value:,}"


def _compact(value: float) -> str:
    """An axis label: 950, 1.5k, 20k, 3M."""
    for size, unit in ((1_000_000, "M"), (1_000, "k")):
        if value >= size:
            return f"{value / size:.3g}{unit}"
    return f"{value:g}"


def _counted(value: int, noun: str, plural: str = "") -> str:
    """``1 duplicate``, ``2 duplicates``: ``plural`` when adding an s will not do."""
    return f"{value:,} {noun if value == 1 else plural or noun + 's'}"


def _day(seconds: int) -> str:
    return time.strftime("%Y-%m-%d", time.gmtime(seconds))


def _utc(seconds: float) -> str:
    """Date and time; the column's header says UTC."""
    return time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(seconds))


def _span(window: Mapping[str, Any]) -> str:
    return f"{_day(window['start'])} – {_day(window['end'])}"


def _when(text: str) -> str:
    """A table cell with a date, on one line (a browser may break at its hyphens)."""
    return f'<td class="when">{_e(text)}</td>'


def _code(value: object) -> str:
    return f"<code>{_e(value)}</code>"


def _codes(values: Iterable[object]) -> str:
    return " ".join(_code(v) for v in values) or NONE


def _count(value: int, *, alarm: bool = False) -> str:
    """A numeric table cell; ``alarm`` marks a non-zero bad count."""
    kind = "n hot" if alarm and value else "n"
    return f'<td class="{kind}">{_e(_number(value))}</td>'


def _table(headers: Sequence[str], rows: Iterable[str], empty: str) -> str:
    """A table of ready rows (``<td>``… already escaped)."""
    body = "".join(f"<tr>{row}</tr>" for row in rows)
    if not body:
        return f'<p class="none">{_e(empty)}</p>'
    head = "".join(f"<th>{_e(h)}</th>" for h in headers)
    # Hashes and ids do not break; a table wider than the page scrolls on its own.
    table = f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"
    return f'<div class="scroll">{table}</div>'


# -- header and totals -------------------------------------------------------------------


def _header(report: Mapping[str, Any]) -> str:
    complete = bool(report["complete"])
    verdict = "complete" if complete else "gaps found"
    archives = report["archives"]
    totals = report["totals"]
    summary = (
        "every message the sources hold is in the archives"
        if complete
        else f"{_counted(totals['missing'], 'missing message')} "
        f"({_counted(totals['copies_missing'], 'missing copy', 'missing copies')}), "
        f"{_counted(totals['windows_without_archive'], 'week')} without an archive, "
        f"{_counted(totals['bad_archives'], 'bad archive')}"
    )
    return (
        f'<header><h1>Community history audit <span class="verdict {"ok" if complete else "bad"}">'
        f"{_e(verdict)}</span></h1>"
        f"<p>community {_code(report['community'])}</p>"
        f"<p>{_e(summary)}</p>"
        f"<p>archive topics: {_code(report['archive_topics'])} · counts are messages (one per "
        "original message hash); copies are counted apart (two per channel message in "
        f"{_code('both')})</p>"
        f"<p>archives from {_code(archives['origin'])}: {_e(_number(archives['count']))} "
        f"archives, {_e(_number(archives['index_entries']))} index entries · "
        f"sources: {_codes(report['sources'])}</p></header>"
    )


# (key, label, a non-zero value is bad)
MESSAGE_TOTALS: tuple[tuple[str, str, bool], ...] = (
    ("source_messages", "messages in the sources", False),
    ("archived_messages", "messages in the archives", False),
    ("both", "in both", False),
    ("missing", "missing from the archives", True),
    ("extra", "extra (only in the archives)", False),
    ("duplicates", "messages duplicated in the archives", False),
)
COPY_TOTALS: tuple[tuple[str, str, bool], ...] = (
    ("copies_expected", "copies the archives should hold", False),
    ("copies_archived", "copies in the archives", False),
    ("copies_missing", "copies missing", True),
    ("copies_extra", "extra copies", False),
    ("copies_duplicated", "surplus copies (duplicated)", False),
)
WEEK_TOTALS: tuple[tuple[str, str, bool], ...] = (
    ("windows", "weeks", False),
    ("windows_without_archive", "weeks without an archive", True),
    ("bad_archives", "bad archives", True),
)


def _tiles(totals: Mapping[str, Any], keys: tuple[tuple[str, str, bool], ...]) -> str:
    """One row of totals; a bad one that is not zero stands out."""
    tiles = "".join(
        f'<div class="total{" alarm" if bad and totals[key] else ""}">'
        f"<b>{_e(_number(totals[key]))}</b><span>{_e(label)}</span></div>"
        for key, label, bad in keys
    )
    return f'<div class="totals">{tiles}</div>'


def _totals(totals: Mapping[str, Any]) -> str:
    return (
        f'<h2>Totals</h2><p class="group">messages</p>{_tiles(totals, MESSAGE_TOTALS)}'
        f'<p class="group">archived copies</p>{_tiles(totals, COPY_TOTALS)}'
        f'<p class="group">weeks and archives</p>{_tiles(totals, WEEK_TOTALS)}'
    )


# -- the coverage chart ------------------------------------------------------------------

PLOT_WIDTH = 1_040  # the widest the columns get together (the page is ~1,150 px wide)
PLOT_HEIGHT = 220
LEFT, TOP, BOTTOM = 52, 12, 46  # room for the y labels, the top tick, the date labels
COLOURS = {"both": "#3f9d5a", "missing": "#d63c3c", "extra": "#4b6fd6"}


@dataclass(frozen=True, slots=True)
class _Geometry:
    """Where the columns go: one per window, oldest left."""

    count: int
    column: float  # width of one week
    plot: float  # width of the plot area
    step: int  # between two y ticks
    peak: int  # the y axis' top value, a whole number of steps

    @classmethod
    def of(cls, windows: Sequence[Mapping[str, Any]]) -> _Geometry:
        column = min(96.0, max(2.0, PLOT_WIDTH / len(windows)))
        highest = max(1, max(w["both"] + w["missing"] + w["extra"] for w in windows))
        step = _step(highest)
        peak = step * math.ceil(highest / step)
        return cls(len(windows), column, max(column * len(windows), 480.0), step, peak)

    def x(self, index: int) -> float:
        """Left edge of column ``index``: few columns are centred in the plot."""
        return LEFT + (self.plot - self.column * self.count) / 2 + index * self.column

    def height(self, value: int) -> float:
        """A bar segment's height; a non-zero one stays visible (1 missing of 100,000)."""
        return 0.0 if value <= 0 else max(2.0, value * PLOT_HEIGHT / self.peak)


def _step(highest: int) -> int:
    """A 1, 2 or 5 × 10^k tick step that splits ``highest`` into at most five steps."""
    rough = max(1.0, highest / 5)
    power = int(10 ** math.floor(math.log10(rough)))  # rough >= 1: a whole power
    return next(s * power for s in (1, 2, 5, 10) if s * power >= rough)


def _y_axis(geometry: _Geometry) -> str:
    parts = []
    for value in range(0, geometry.peak + 1, geometry.step):
        y = TOP + PLOT_HEIGHT - value * PLOT_HEIGHT / geometry.peak
        parts.append(
            f'<line x1="{LEFT}" x2="{LEFT + geometry.plot:.1f}" y1="{y:.1f}" y2="{y:.1f}" '
            f'stroke="{"#8a93a5" if value == 0 else "#e3e6ec"}"/>'
            f'<text x="{LEFT - 6}" y="{y + 4:.1f}" text-anchor="end" fill="#5b6475">'
            f"{_e(_compact(value))}</text>"
        )
    middle = TOP + PLOT_HEIGHT / 2
    parts.append(
        f'<text transform="translate(12 {middle}) rotate(-90)" text-anchor="middle" '
        f'fill="#5b6475">messages</text>'
    )
    return "".join(parts)


def _week(geometry: _Geometry, index: int, window: Mapping[str, Any], label: bool) -> str:
    """One window's column: a tooltip title, a hover area, the stacked bar, the marks."""
    x = geometry.x(index)
    centre = x + geometry.column / 2
    gap = min(geometry.column * 0.25, 12.0) if geometry.column >= 4 else 0.0
    bar_x, bar_w = x + gap / 2, geometry.column - gap
    base = TOP + PLOT_HEIGHT
    no_archive = not window["archive_ids"]
    archive = "no archive" if no_archive else _counted(len(window["archive_ids"]), "archive")
    title = (
        f"week of {_day(window['start'])} (UTC): {_number(window['both'])} in both, "
        f"{_number(window['missing'])} missing, {_number(window['extra'])} extra, "
        f"{_counted(window['duplicates'], 'duplicate')}; {archive}"
    )
    parts = [
        f'<g class="week{" no-archive" if no_archive else ""}" data-start="{_e(window["start"])}">'
        f"<title>{_e(title)}</title>"
        f'<rect class="hit" x="{x:.2f}" y="{TOP}" width="{geometry.column:.2f}" '
        f'height="{PLOT_HEIGHT}" fill="{"url(#noarc)" if no_archive else "transparent"}"/>'
    ]
    top = float(base)
    for kind in ("both", "missing", "extra"):
        height = geometry.height(window[kind])
        if height:
            top -= height
            parts.append(
                f'<rect class="{kind}" x="{bar_x:.2f}" y="{top:.2f}" width="{bar_w:.2f}" '
                f'height="{height:.2f}" fill="{COLOURS[kind]}"/>'
            )
    if no_archive:
        parts.append(f'<path d="M{centre:.2f} {base + 3} l-4 7 h8 z" fill="{COLOURS["missing"]}"/>')
        if geometry.column >= 56:  # room to say it
            parts.append(
                f'<text x="{centre:.2f}" y="{top - 6:.2f}" text-anchor="middle" '
                f'fill="#a11a1a">no archive</text>'
            )
    if label:
        parts.append(
            f'<line x1="{centre:.2f}" x2="{centre:.2f}" y1="{base}" y2="{base + 12}" '
            f'stroke="#8a93a5"/><text x="{centre:.2f}" y="{base + 25}" text-anchor="middle" '
            f'fill="#3b4354">{_e(_day(window["start"]))}</text>'
        )
    return "".join(parts) + "</g>"


def _quiet_gaps(geometry: _Geometry, windows: Sequence[Mapping[str, Any]]) -> str:
    """A dashed line between two columns whose weeks are not adjacent: the quiet time between
    (no traffic, no archive) has no column, so the axis is not to scale there."""
    parts = []
    for index in range(1, len(windows)):
        before, after = windows[index - 1]["end"], windows[index]["start"]
        if after > before:
            x = geometry.x(index)
            title = f"quiet from {_day(before)} to {_day(after)} (UTC): no traffic, no archive"
            parts.append(
                f'<g class="quiet"><title>{_e(title)}</title><line x1="{x:.2f}" x2="{x:.2f}" '
                f'y1="{TOP}" y2="{TOP + PLOT_HEIGHT + 12}" stroke="#5b6475" stroke-width="1.5" '
                f'stroke-dasharray="3 3"/></g>'
            )
    return "".join(parts)


def _chart(windows: Sequence[Mapping[str, Any]]) -> str:
    if not windows:
        return '<p class="none">no week: neither the sources nor the archives hold a message</p>'
    geometry = _Geometry.of(windows)
    every = max(1, math.ceil(78 / geometry.column))  # a date label is ~70 px wide
    weeks = "".join(_week(geometry, i, w, label=i % every == 0) for i, w in enumerate(windows))
    width = LEFT + geometry.plot + 40
    height = TOP + PLOT_HEIGHT + BOTTOM
    first, last = _day(windows[0]["start"]), _day(windows[-1]["start"])
    description = (
        f"{len(windows)} weeks from {first} to {last} (UTC), one column each: messages in "
        "both, missing and extra stacked; a hatched column with a red mark has no archive; "
        "a dashed line stands for quiet weeks (no traffic, no archive) left out"
    )
    return (
        f"<h2>Coverage per week ({_e(_counted(len(windows), 'week'))})</h2>"
        f'<div class="card"><div class="chart"><svg role="img" aria-labelledby="chart-title '
        f'chart-desc" width="{width:.0f}" height="{height}" viewBox="0 0 {width:.0f} {height}">'
        f'<title id="chart-title">messages per week, {_e(first)} to {_e(last)}</title>'
        f'<desc id="chart-desc">{_e(description)}</desc>'
        '<defs><pattern id="noarc" width="6" height="6" patternUnits="userSpaceOnUse" '
        'patternTransform="rotate(45)"><rect width="6" height="6" fill="#fffafa"/>'
        '<rect width="2" height="6" fill="#f6d4d4"/></pattern></defs>'
        f"{_y_axis(geometry)}{weeks}{_quiet_gaps(geometry, windows)}</svg></div>"
        f"{_legend()}</div>"
    )


def _legend() -> str:
    keys = (
        ("both", "in both (archived)"),
        ("missing", "missing from the archives"),
        ("extra", "extra (only in the archives)"),
        ("noarc", "traffic but no archive"),
        ("quiet", "quiet weeks left out"),
    )
    items = "".join(
        f'<span><span class="key k-{kind}"></span>{_e(label)}</span>' for kind, label in keys
    )
    return f'<p class="legend">{items}<span class="none">week dates are UTC</span></p>'


# -- windows -----------------------------------------------------------------------------


def _archive_cell(window: Mapping[str, Any]) -> str:
    if window["archive_ids"]:
        return _codes(window["archive_ids"])
    return '<span class="badge bad">no archive</span>'


def _worst(report: Mapping[str, Any]) -> str:
    by_start = {w["start"]: w for w in report["windows"]}
    rows = (
        f"{_when(_span(w))}"
        f"{_count(w['missing'], alarm=True)}{_count(w['both'])}"
        f"{_count(w['extra'])}{_count(w['duplicates'])}{_count(w['copies_missing'], alarm=True)}"
        f"<td>{_archive_cell(w)}</td>"
        f"<td>{'<br>'.join(_e(p) for p in w['problems']) or NONE}</td>"
        for w in (by_start[s] for s in report["worst_windows"] if s in by_start)
    )
    table = _table(
        (
            "week (UTC)",
            "missing",
            "in both",
            "extra",
            "duplicates",
            "copies missing",
            "archives",
            "problems",
        ),
        rows,
        "no window misses a message",
    )
    return f"<h2>Worst weeks</h2>{table}"


def _window(window: Mapping[str, Any]) -> str:
    """One window: a summary line, open when something is wrong; its channels; problems."""
    troubled = bool(window["copies_missing"] or window["problems"] or not window["archive_ids"])
    state = (
        '<span class="badge bad">gaps</span>' if troubled else '<span class="badge ok">ok</span>'
    )
    facts = (
        f"{_number(window['both'])} in both · {_number(window['missing'])} missing · "
        f"{_number(window['extra'])} extra · {_counted(window['duplicates'], 'duplicate')} · "
        f"{_number(window['copies_missing'])} copies missing · "
        f"archive topics {window['archive_topics']}"
    )
    channels = _table(
        ("channel", "in both", "missing", "extra", "duplicates"),
        (
            f"<td>{_code(c['channel'])}</td>{_count(c['both'])}"
            f"{_count(c['missing'], alarm=True)}{_count(c['extra'])}{_count(c['duplicates'])}"
            for c in window["channels"]
        ),
        "no channel",
    )
    problems = "".join(f"<li>{_e(p)}</li>" for p in window["problems"])
    return (
        f'<details class="window"{" open" if troubled else ""}><summary>{state} '
        f'{_e(_span(window))} <span class="facts">· {_e(facts)}</span></summary>'
        f"<p>archives: {_archive_cell(window)}</p>{channels}"
        f"{f'<ul class=problems>{problems}</ul>' if problems else ''}</details>"
    )


def _windows(windows: Sequence[Mapping[str, Any]]) -> str:
    body = "".join(_window(w) for w in windows) or '<p class="none">no week</p>'
    return f"<h2>Weeks and channels</h2>{body}"


# -- message lists and archive problems --------------------------------------------------


def _missing_row(message: Mapping[str, Any]) -> str:
    return (
        f"<td>{_code(message['hash'])}</td>{_when(_day(message['window']))}"
        f"<td>{_code(message['channel'])}</td>"
        f"{_when(_utc(message['timestamp_ns'] / 1e9))}<td>{_codes(message['sources'])}</td>"
    )


def _extra_row(message: Mapping[str, Any]) -> str:
    return (
        f"<td>{_code(message['hash'])}</td>{_when(_day(message['window']))}"
        f"<td>{_code(message['channel'])}</td><td>{_e(message['probable_origin'])}</td>"
    )


def _duplicate_row(message: Mapping[str, Any]) -> str:
    return (
        f"<td>{_code(message['hash'])}</td>{_when(_day(message['window']))}"
        f"{_count(message['copies'])}<td>{_codes(message['archive_ids'])}</td>"
    )


def _problem_row(problem: Mapping[str, Any]) -> str:
    return f"<td>{_code(problem['archive_id'])}</td><td>{_e(problem['problem'])}</td>"


def _list(
    title: str,
    headers: Sequence[str],
    items: Sequence[Mapping[str, Any]],
    row: Callable[[Mapping[str, Any]], str],
    empty: str,
) -> str:
    """At most :data:`LIST_CAP` rows (a million missing messages would make a page nobody
    opens), and a line saying how many more the JSON holds."""
    table = _table(headers, (row(item) for item in items[:LIST_CAP]), empty)
    hidden = len(items) - LIST_CAP
    more = f'<p class="more">… and {_e(_number(hidden))} more: --json lists them all</p>'
    return f"<h2>{_e(title)} ({_e(_number(len(items)))})</h2>{table}{more if hidden > 0 else ''}"


def _lists(report: Mapping[str, Any]) -> str:
    return (
        _list("Missing copies", ("hash", "week", "channel", "sent (UTC)", "sources"),
              report["missing"], _missing_row, "none missing")
        + _list("Extra copies", ("hash", "week", "channel", "probable origin"),
                report["extra"], _extra_row, "no extra message")
        + _list("Duplicates in the archives", ("hash", "week", "copies", "archives"),
                report["duplicates"], _duplicate_row, "no duplicate")
        + _list("Archive problems", ("archive", "problem"), report["archive_problems"],
                _problem_row, "every archive decodes and keeps the rules")
    )  # fmt: skip


def render_audit_html(report: Mapping[str, Any]) -> str:
    """The ``--json`` document (version 2) as one self-contained HTML page."""
    verdict = "complete" if report["complete"] else "gaps found"
    return (
        '<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">'
        f'<meta http-equiv="Content-Security-Policy" content="{CONTENT_SECURITY_POLICY}">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>audit {_e(report['community'])}: {_e(verdict)}</title>"
        f"<style>{STYLE}</style></head><body>{_header(report)}<main>"
        f"{_totals(report['totals'])}{_chart(report['windows'])}{_worst(report)}"
        f"{_windows(report['windows'])}{_lists(report)}</main></body></html>\n"
    )
