"""The run report: per source, per community and per week counts of messages, duplicates,
quarantined and late records; the shard mapping; store and archive results. JSON
(``to_json``) and a terminal table (:func:`render_report`)."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import asdict, dataclass, field
from typing import Any

__all__ = ["RunReport", "SourceReport", "WeekRow", "render_report"]


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


def render_report(report: RunReport) -> str:
    parts = [f"migration report ({report.config}, master {report.master}, now {report.now})"]
    parts.append("\nsources")
    parts.append(
        _table(
            ["source", "kind", "tasks", "records", "messages", "duplicates", "quarantined"],
            [
                [s.name, s.kind, s.tasks, s.records, s.messages, s.duplicates, s.quarantined]
                for s in report.sources
            ],
        )
    )
    if report.communities:
        parts.append("\ncommunities")
        parts.append(
            _table(
                [
                    "community",
                    "shard",
                    "messages",
                    "archived",
                    "late",
                    "undecryptable",
                    "archives",
                    "info hash",
                ],
                [
                    [
                        _short(c["community"]),
                        c["shard"],
                        c["messages"],
                        c["archived_now"],
                        c["late"],
                        c["undecryptable"],
                        f"+{c['archives_added']} ({c['total_archives']})",
                        c["info_hash"] or "-",
                    ]
                    for c in report.communities
                ],
            )
        )
        for c in report.communities:
            if c["magnet_uri"]:
                parts.append(f"magnet {_short(c['community'])}: {c['magnet_uri']}")
    by_week: dict[tuple[str, str], list[int]] = defaultdict(lambda: [0, 0, 0, 0])
    for w in report.weeks:
        acc = by_week[(w.week, w.community)]
        acc[0] += w.messages
        acc[1] += w.duplicates
        acc[2] += w.quarantined
        acc[3] += w.late
    if by_week:
        parts.append("\nweeks (all sources)")
        parts.append(
            _table(
                ["week", "community", "messages", "duplicates", "quarantined", "late"],
                [[wk, _short(c), *v] for (wk, c), v in sorted(by_week.items())],
            )
        )
    if report.mapping:
        parts.append("\nshard mapping")
        parts.append(
            _table(
                ["pubsub topic", "community", "channel", "messages"],
                [
                    [
                        m["pubsub_topic"],
                        _short(m["community"]),
                        m["channel"] or "*",
                        m["messages"],
                    ]
                    for m in report.mapping
                ],
            )
        )
    if report.quarantine.get("count"):
        parts.append(f"\nquarantined: {report.quarantine['count']} -> {report.quarantine['path']}")
        for reason, count in sorted(report.quarantine.get("reasons", {}).items()):
            parts.append(f"  {count:>8}  {reason}")
    if report.store:
        parts.append(
            f"\nstore {report.store.get('url')}: {report.store.get('inserted', 0)} new, "
            f"{report.store.get('total', 0)} messages, {report.store.get('envelopes', 0)} "
            "v1 envelopes"
        )
    t = report.totals
    parts.append(
        f"\ntotal: {t.get('records', 0)} records, {t.get('messages', 0)} messages, "
        f"{t.get('duplicates', 0)} duplicates, {t.get('quarantined', 0)} quarantined, "
        f"{t.get('late', 0)} late"
    )
    timing = report.timing
    if timing:
        seconds = ", ".join(f"{k} {v:.1f}s" for k, v in timing.items() if not k.endswith("_mb"))
        rss = timing.get("driver_peak_rss_mb")
        parts.append(f"time: {seconds}" + (f"; driver peak RSS {rss:.0f} MB" if rss else ""))
    return "\n".join(parts)
