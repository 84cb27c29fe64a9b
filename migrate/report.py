"""The run report: per source, per community and per week counts of messages, duplicates,
quarantined and late records; the shard mapping; store and archive results. JSON
(``to_json``) and a terminal table (:func:`render_report`)."""

from __future__ import annotations

import json
from collections import defaultdict
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["RunReport", "SourceReport", "WeekRow", "render_report", "write_report_json"]


@dataclass(slots=True)
class SourceReport:
    name: str
    kind: str
    location: str
    tasks: int = 0
    records: int = 0
    messages: int = 0  # kept: the copy of a message that went to the store
    duplicates: int = 0
    quarantined: int = 0


@dataclass(slots=True)
class WeekRow:
    week: str
    source: str
    community: str  # "" for topics of no configured community
    messages: int = 0
    duplicates: int = 0
    quarantined: int = 0
    late: int = 0


@dataclass(slots=True)
class RunReport:
    config: str
    master: str
    now: int
    sources: list[SourceReport] = field(default_factory=list)
    weeks: list[WeekRow] = field(default_factory=list)
    communities: list[dict[str, Any]] = field(default_factory=list)
    mapping: list[dict[str, Any]] = field(default_factory=list)
    quarantine: dict[str, Any] = field(default_factory=dict)
    store: dict[str, Any] = field(default_factory=dict)
    totals: dict[str, int] = field(default_factory=dict)
    timing: dict[str, float] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def _table(headers: list[str], rows: list[list[Any]]) -> str:
    cells = [[str(h) for h in headers]] + [[str(c) for c in r] for r in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]
    numeric = [all(r[i].isdigit() for r in cells[1:]) and rows for i in range(len(headers))]

    def line(row: list[str]) -> str:
        return "  ".join(
            c.rjust(w) if numeric[i] else c.ljust(w)
            for i, (c, w) in enumerate(zip(row, widths, strict=False))
        ).rstrip()

    out = [line(cells[0]), "  ".join("-" * w for w in widths)]
    out += [line(r) for r in cells[1:]]
    return "\n".join(out)


def _short(community: str) -> str:
    return community[:10] + "…" + community[-4:] if len(community) > 16 else community or "-"


def write_report_json(path: str | Path, report: RunReport) -> None:
    """The report as indented JSON at ``path``, written atomically."""
    from waku_legacy.durable import write_atomic

    data = (json.dumps(report.to_json(), indent=2) + "\n").encode()
    write_atomic(Path(path), data, step="report")


def render_report(report: RunReport, *, weeks: bool = True) -> str:
    """The report as terminal tables, one section after the other (empty ones left out):
    a summary line per community first; the per-week table only with ``weeks``."""
    sections = [
        f"migration report ({report.config}, master {report.master}, now {report.now})",
        *[summary_line(c) for c in report.communities],
        _sources_section(report.sources),
        _communities_section(report.communities),
        _weeks_section(report.weeks) if weeks else "",
        _mapping_section(report.mapping),
        _quarantine_section(report.quarantine),
        _store_section(report.store),
        _totals_section(report.totals, report.timing),
    ]
    return "\n".join(s for s in sections if s)


def summary_line(community: dict[str, Any]) -> str:
    """One community in a line. Archived messages are counted per copy: with
    ``archive_topics = "both"`` each message is archived on its channel topic and on the
    community's universal one, so the copies are called copies ("743 messages, 1,486
    archived copies"), not mistaken for messages."""
    name = community.get("name") or _short(community["community"])
    messages, archived = int(community["messages"]), int(community["archived_now"])
    what = "archived copies" if archived != messages else "archived"
    mode = community.get("archive_topics")  # absent from reports written before issue 34
    topics = f" (archive topics {mode})" if mode else ""
    return (
        f"  {name}: {messages:,} messages, {archived:,} {what}{topics}, shard {community['shard']}"
    )


def _sources_section(sources: list[SourceReport]) -> str:
    return "\nsources\n" + _table(
        ["source", "kind", "tasks", "records", "messages", "duplicates", "quarantined"],
        [[s.name, s.kind, s.tasks, s.records, s.messages, s.duplicates, s.quarantined]
         for s in sources],
    )  # fmt: skip


def _communities_section(communities: list[dict[str, Any]]) -> str:
    if not communities:
        return ""
    table = _table(
        ["community", "shard", "messages", "archived copies", "archive topics", "late",
         "undecryptable", "archives", "info hash"],
        [
            [
                _short(c["community"]), c["shard"], c["messages"], c["archived_now"],
                c.get("archive_topics") or "-", c["late"],
                c["undecryptable"], f"+{c['archives_added']} ({c['total_archives']})",
                c["info_hash"] or "-",
            ]
            for c in communities
        ],
    )  # fmt: skip
    magnets = [
        f"magnet {_short(c['community'])}: {c['magnet_uri']}"
        for c in communities
        if c["magnet_uri"]
    ]
    return "\n".join(["\ncommunities", table, *magnets])


def _weeks_section(weeks: list[WeekRow]) -> str:
    """Per week and community, all sources added up."""
    by_week: dict[tuple[str, str], list[int]] = defaultdict(lambda: [0, 0, 0, 0])
    for w in weeks:
        acc = by_week[(w.week, w.community)]
        acc[0] += w.messages
        acc[1] += w.duplicates
        acc[2] += w.quarantined
        acc[3] += w.late
    if not by_week:
        return ""
    return "\nweeks (all sources)\n" + _table(
        ["week", "community", "messages", "duplicates", "quarantined", "late"],
        [[wk, _short(c), *v] for (wk, c), v in sorted(by_week.items())],
    )


def _mapping_section(mapping: list[dict[str, Any]]) -> str:
    if not mapping:
        return ""
    return "\nshard mapping\n" + _table(
        ["pubsub topic", "community", "channel", "messages"],
        [[m["pubsub_topic"], _short(m["community"]), m["channel"] or "*", m["messages"]]
         for m in mapping],
    )  # fmt: skip


def _quarantine_section(quarantine: dict[str, Any]) -> str:
    if not quarantine.get("count"):
        return ""
    lines = [f"\nquarantined: {quarantine['count']} -> {quarantine['path']}"]
    lines += [
        f"  {count:>8}  {reason}" for reason, count in sorted(quarantine.get("reasons", {}).items())
    ]
    return "\n".join(lines)


def _store_section(store: dict[str, Any]) -> str:
    if not store:
        return ""
    return (
        f"\nstore {store.get('url')}: {store.get('inserted', 0)} new, "
        f"{store.get('total', 0)} messages, {store.get('envelopes', 0)} v1 envelopes"
    )


def _totals_section(totals: dict[str, int], timing: dict[str, float]) -> str:
    t = totals
    line = (
        f"\ntotal: {t.get('records', 0)} records, {t.get('messages', 0)} messages, "
        f"{t.get('duplicates', 0)} duplicates, {t.get('quarantined', 0)} quarantined, "
        f"{t.get('late', 0)} late"
    )
    if not timing:
        return line
    seconds = ", ".join(f"{k} {v:.1f}s" for k, v in timing.items() if not k.endswith("_mb"))
    rss = timing.get("driver_peak_rss_mb")
    return line + f"\ntime: {seconds}" + (f"; driver peak RSS {rss:.0f} MB" if rss else "")
