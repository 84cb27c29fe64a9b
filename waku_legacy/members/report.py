"""The members preview document (:func:`.preview.preview_community`) for people: a terminal
table, and one self-contained HTML page with a per-week chart per generation (inline SVG
and CSS, no scripts, nothing loaded: its Content-Security-Policy forbids it). Every value
from the archives is HTML-escaped."""

from __future__ import annotations

import html
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from waku_legacy.members.preview import REASONS

__all__ = ["render_preview_html", "render_preview_table"]

AUTHORS_SHOWN = 20
COLOURS = {
    "imported": "#3f9d5a", "departed": "#d63c3c", "banned": "#8a1414",
    "deleted_channel": "#e08a2c", "no_filter": "#4b6fd6", "duplicate": "#9aa3b5",
    "clock_skew": "#a35cc9", "undecodable": "#5b6475", "other": "#c9b02c",
}  # fmt: skip


def _day(seconds: int) -> str:
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%d")


def _generation_lines(name: str, view: Mapping[str, Any]) -> list[str]:
    link = view["link"]
    acted = "acted on" if view["link_acted_on"] else "NOT acted on"
    lines = [
        f"{name} client: link {acted} ({link['reason']})",
        f"  {'':<16}{'messages':>10}{'copies':>10}",
        f"  {'imported':<16}{view['imported']:>10}{view['copies_imported']:>10}"
        + ("" if view["link_acted_on"] else "   (members receive none: the link is not acted on)"),
    ]
    lines += [
        f"  {reason:<16}{view['skipped'][reason]:>10}{view['copies_skipped'][reason]:>10}"
        for reason in REASONS
    ]
    return lines


def render_preview_table(document: Mapping[str, Any]) -> str:
    """Both generations' verdicts and counts, the weeks, the authors whose messages are lost."""
    gens = document["generations"]
    lines = [
        f"what members will see of {document['community']}",
        f"archives: {document['archives']['origin']} ({document['archived_messages']} archived "
        f"messages in {document['copies_archived']} copies, archive topics "
        f"{document['archive_topics']}, {document['archives']['windows']} week(s)); "
        "description clock "
        f"{document['description']['clock']}: {document['description']['members']} members, "
        f"{document['description']['banned']} banned, "
        f"{len(document['description']['channels'])} channels; "
        f"{document['links_found']} archive-link message(s) found",
        "counts are messages (one per original message hash), each with its best copy's fate; "
        "copies are counted apart (two per channel message in 'both')",
        "",
    ]
    lines += [f"warning: {w}" for w in document["warnings"]]
    lines += [""] if document["warnings"] else []
    for name, view in gens.items():
        lines += [*_generation_lines(name, view), ""]
    header = ["week (UTC)"] + [f"{g} imported" for g in gens] + [f"{g} refused" for g in gens]
    lines.append("  ".join(f"{h:>16}" if i else f"{h:<12}" for i, h in enumerate(header)))
    weeks: dict[int, dict[str, Mapping[str, Any]]] = {}
    for name, view in gens.items():
        for week in view["weeks"]:
            weeks.setdefault(week["start"], {})[name] = week
    for start, per in sorted(weeks.items()):
        cells = [_day(start)]
        cells += [str(per[g]["imported"]) if g in per else "0" for g in gens]
        cells += [str(sum(per[g][r] for r in REASONS)) if g in per else "0" for g in gens]
        lines.append("  ".join(f"{c:>16}" if i else f"{c:<12}" for i, c in enumerate(cells)))
    for name, view in gens.items():
        if view["lost_authors"]:
            lines += ["", f"authors whose messages a {name} client refuses (most first)"]
            lines += [f"  {a['author']}  {a['messages']}"
                      for a in view["lost_authors"][:AUTHORS_SHOWN]]  # fmt: skip
            if len(view["lost_authors"]) > AUTHORS_SHOWN:
                lines.append(f"  ... {len(view['lost_authors']) - AUTHORS_SHOWN} more (--json)")
    lines += ["", "what no archive can change:"] + [f"  - {a}" for a in document["assumes"]]
    return "\n".join(lines)


# -- HTML --------------------------------------------------------------------------------------

CSP = "default-src 'none'; style-src 'unsafe-inline'; base-uri 'none'"
STYLE = """
body{font:14px/1.45 system-ui,sans-serif;margin:0;background:#f4f5f7;color:#1d2330}
header{background:#1d2330;color:#fff;padding:16px 28px}header h1{font-size:20px;margin:0}
main{padding:8px 28px 28px;max-width:1200px}
h2{font-size:17px;margin:22px 0 8px;border-bottom:2px solid #d5d9e2}
.card{background:#fff;border:1px solid #d5d9e2;border-radius:6px;padding:12px 16px;margin:10px 0}
.ok{color:#145c2a;font-weight:600}.bad{color:#8a1414;font-weight:600}
table{border-collapse:collapse}td,th{padding:2px 10px;text-align:right}
td:first-child,th:first-child{text-align:left}
code{font:12.5px ui-monospace,monospace;word-break:break-all}
.key{display:inline-block;width:12px;height:12px;border-radius:2px;margin:0 4px 0 12px}
.chart{overflow-x:auto}
"""


def _e(value: object) -> str:
    return html.escape(str(value), quote=True)


def _chart(weeks: Sequence[Mapping[str, Any]]) -> str:
    """Stacked bars per week: imported at the bottom, then each refusal reason."""
    if not weeks:
        return "<p>No archived messages.</p>"
    kinds = ("imported", *REASONS)
    highest = max(sum(w[k] for k in kinds) for w in weeks) or 1
    bar, gap, height, left, bottom = 16, 6, 180, 40, 40
    width = left + len(weeks) * (bar + gap) + 10
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height + bottom}" '
             f'role="img" aria-label="messages per week: imported and refused by reason">',
             f'<text x="2" y="12">{highest}</text><text x="2" y="{height}">0</text>']  # fmt: skip
    for index, week in enumerate(weeks):
        x = left + index * (bar + gap)
        y = float(height)
        tip = [f"week of {_day(week['start'])}"]
        for kind in kinds:
            if not week[kind]:
                continue
            h = week[kind] / highest * (height - 14)
            y -= h
            parts.append(f'<rect x="{x}" y="{y:.1f}" width="{bar}" height="{h:.1f}" '
                         f'fill="{COLOURS[kind]}"/>')  # fmt: skip
            tip.append(f"{kind}: {week[kind]}")
        parts.append(f'<rect x="{x}" y="0" width="{bar}" height="{height}" fill="transparent">'
                     f"<title>{_e('; '.join(tip))}</title></rect>")  # fmt: skip
        if index % 4 == 0:
            parts.append(f'<text x="{x}" y="{height + 14}" font-size="10">'
                         f"{_e(_day(week['start'])[2:])}</text>")  # fmt: skip
    parts.append("</svg>")
    legend = "".join(
        f'<span class="key" style="background:{COLOURS[k]}"></span>{_e(k)}' for k in kinds
    )
    return f'<div class="chart">{"".join(parts)}</div><p>{legend}</p>'


def _generation(name: str, view: Mapping[str, Any]) -> str:
    link = view["link"]
    verdict = (
        '<span class="ok">acted on</span>' if view["link_acted_on"]
        else '<span class="bad">not acted on: members receive none of this</span>'
    )  # fmt: skip
    rows = "".join(
        f"<tr><td>{_e(r)}</td><td>{view['skipped'][r]:,}</td>"
        f"<td>{view['copies_skipped'][r]:,}</td></tr>"
        for r in REASONS
    )
    authors = "".join(
        f"<tr><td><code>{_e(a['author'])}</code></td><td>{a['messages']:,}</td></tr>"
        for a in view["lost_authors"][:200]
    )
    return (
        f'<h2>{_e(name)} client</h2><div class="card"><p>Archive link: {verdict} '
        f"({_e(link['reason'])})</p><p>Imported: <b>{view['imported']:,}</b> messages "
        f"({view['copies_imported']:,} copies)</p>"
        f"<table><tr><th>refused because</th><th>messages</th><th>copies</th></tr>{rows}"
        "</table></div>"
        f'<div class="card">{_chart(view["weeks"])}</div>'
        + (f'<div class="card"><table><tr><th>author whose messages are lost</th>'
           f"<th>messages</th></tr>{authors}</table></div>" if authors else "")
    )  # fmt: skip


def render_preview_html(document: Mapping[str, Any]) -> str:
    """One page: per generation the link verdict, the counts, a per-week chart, the authors."""
    description = document["description"]
    assumes = "".join(f"<li>{_e(a)}</li>" for a in document["assumes"])
    body = "".join(_generation(name, view) for name, view in document["generations"].items())
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f'<meta http-equiv="Content-Security-Policy" content="{CSP}">'
        f"<title>What members will see: {_e(document['community'])}</title>"
        f"<style>{STYLE}</style></head><body><header><h1>What members will see</h1>"
        f"<p><code>{_e(document['community'])}</code></p></header><main>"
        f'<div class="card">Archives: {_e(document["archives"]["origin"])}, '
        f"{document['archived_messages']:,} archived messages in "
        f"{document['copies_archived']:,} copies (archive topics "
        f"{_e(document['archive_topics'])}; a message counts once, with its best copy's fate); "
        "description clock "
        f"{_e(description['clock'])}: {description['members']:,} members, "
        f"{description['banned']:,} banned, {len(description['channels'])} channels; "
        f"{document['links_found']} archive-link message(s) found.</div>"
        + "".join(f'<div class="card bad">{_e(w)}</div>' for w in document["warnings"])
        + f"{body}<h2>What no archive can change</h2><ul>{assumes}</ul></main></body></html>\n"
    )
