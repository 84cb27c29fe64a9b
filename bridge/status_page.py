"""The status page (``GET /``): a :class:`~waku_legacy.bridge.status.StatusReport` as one
self-contained HTML document -- inline CSS, no scripts, no external assets (its
Content-Security-Policy forbids them) -- that reads well in a browser and in a terminal's
text dump.

Every value is HTML-escaped: community names come from the config, peer addresses and
errors from the network. Times are UTC; numbers are the JSON's (``/debug/v1/status``),
written with thousands separators.
"""

from __future__ import annotations

import html
import time
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from waku_legacy.bridge.status import (
    ArchiveRun,
    CommunityStatus,
    HistoryStatus,
    Publication,
    Seeding,
    ServiceStatus,
    StatusReport,
    V1Status,
)

__all__ = ["CONTENT_SECURITY_POLICY", "duration", "number", "render_status_page", "utc"]

# Nothing but the inline style: no script, image, font, frame or form can load.
CONTENT_SECURITY_POLICY = (
    "default-src 'none'; style-src 'unsafe-inline'; base-uri 'none'; form-action 'none'; "
    "frame-ancestors 'none'"
)
NONE = '<span class="none">–</span>'

STYLE = """
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:0;
 background:#f4f5f7;color:#1d2330}
header{background:#1d2330;color:#fff;padding:18px 28px}
header h1{font-size:20px;margin:0 0 4px}
header p{margin:0;color:#c6ccd8}
header code{background:#343d52;color:#eef0f4}
main{padding:8px 28px 28px;max-width:1200px}
h2{font-size:17px;margin:24px 0 8px;border-bottom:2px solid #d5d9e2;padding-bottom:4px}
h3{font-size:15px;margin:0 0 8px}
.card{background:#fff;border:1px solid #d5d9e2;border-radius:6px;padding:14px 18px;
 margin:10px 0}
dl{display:grid;grid-template-columns:170px 1fr;gap:3px 14px;margin:0 0 10px}
dt{color:#5b6475}
dd{margin:0;min-width:0}
code{font:12.5px/1.4 ui-monospace,Menlo,Consolas,monospace;word-break:break-all;
 background:#f0f2f6;padding:1px 4px;border-radius:3px}
table{border-collapse:collapse;width:100%;margin:4px 0 8px;background:#fff}
th,td{border:1px solid #dde1e8;padding:4px 8px;text-align:left;vertical-align:top}
th{background:#eef0f4;font-weight:600}
td.n{text-align:right;font-variant-numeric:tabular-nums}
td code{white-space:nowrap;word-break:normal}
td code.wrap{white-space:normal;word-break:break-all}
.badge{display:inline-block;padding:1px 9px;border-radius:10px;font-weight:600;font-size:13px}
.ok{background:#d8f3df;color:#145c2a}
.warn{background:#fff0c2;color:#6b4d00}
.bad{background:#fbd9d9;color:#8a1414}
.none{color:#9aa1ae}
.id{color:#5b6475;font-weight:400;font-size:12.5px}
"""


def _e(value: object) -> str:
    return html.escape(str(value), quote=True)


def utc(seconds: float | None) -> str:
    """A unix time as the page writes it (UTC, to the second)."""
    if seconds is None:
        return "–"
    return time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(seconds))


def duration(seconds: float | None) -> str:
    if seconds is None:
        return "–"
    left = int(seconds)
    parts: list[str] = []
    for unit, size in (("d", 86_400), ("h", 3600), ("m", 60)):
        if left >= size or parts:
            parts.append(f"{left // size}{unit}")
            left %= size
    return " ".join([*parts, f"{left}s"])


def number(value: int | None) -> str:
    return "–" if value is None else f"{value:,}"


def _text(value: object) -> str:
    return NONE if value is None else _e(value)


def _code(value: str | None, *, wrap: bool = False) -> str:
    """Monospace; in a table cell on one line unless ``wrap`` (keys, errors)."""
    if value is None:
        return NONE
    return f'<code class="wrap">{_e(value)}</code>' if wrap else f"<code>{_e(value)}</code>"


def _badge(text: str, good: bool, bad: bool = False) -> str:
    kind = "ok" if good else "bad" if bad else "warn"
    return f'<span class="badge {kind}">{_e(text)}</span>'


def _health_badge(status: str) -> str:
    return _badge(status, good=status == "READY", bad=status == "Degraded")


def _fields(rows: Iterable[tuple[str, str]]) -> str:
    """A definition list; values are HTML already (escaped by the caller)."""
    return "<dl>" + "".join(f"<dt>{_e(k)}</dt><dd>{v}</dd>" for k, v in rows) + "</dl>"


def _table(headers: Sequence[str], rows: Iterable[Sequence[str]], empty: str) -> str:
    """A table whose cells are HTML already; a header starting with '#' is a number."""
    body = "".join(
        "<tr>" + "".join(
            f'<td class="n">{cell}</td>' if head.startswith("#") else f"<td>{cell}</td>"
            for head, cell in zip(headers, row, strict=True)
        ) + "</tr>"
        for row in rows
    )  # fmt: skip
    if not body:
        return f'<p class="none">{_e(empty)}</p>'
    head = "".join(f"<th>{_e(h.lstrip('#'))}</th>" for h in headers)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _service(service: ServiceStatus) -> str:
    protocols = _table(
        ("protocol", "status", "why"),
        ((_e(p.name), _health_badge(p.status), _text(p.desc)) for p in service.protocols),
        "no protocols",
    )
    fields = _fields([
        ("health", _health_badge(service.health)),
        ("state", _e(service.state)),
        ("version", _e(service.version)),
        ("started", _e(utc(service.started))),
        ("uptime", _e(duration(service.uptime))),
        ("listeners", "<br>".join(_code(x) for x in service.listeners) or NONE),
        ("seed port", _text(service.seed_port)),
        ("store", _code(service.store)),
        ("live rows waiting for the store", _text(service.store_backlog)),
    ])  # fmt: skip
    return f'<h2>Service</h2><div class="card">{fields}{protocols}</div>'


def _publication(published: Publication | None, link: str | None) -> list[tuple[str, str]]:
    if published is None:
        return [("link published", f'{NONE} <span class="none">(not by this process yet)</span>')]
    same = published.link == link
    return [
        ("link clock", _e(published.clock)),
        ("clock reason", _e(published.clock_reason)),
        ("published at", _e(utc(published.at))),
        ("published link", "the archive link above" if same else _code(published.link)),
    ]


def _reach(community: CommunityStatus) -> list[tuple[str, str]]:
    reach = community.link_reach
    if reach is None:
        return []
    if reach.reaches_members:
        return [("reaches members", _badge("yes", good=True))]
    why = "<br>".join(_e(reason) for reason in reach.why)
    return [("reaches members", f"{_badge('no', good=False, bad=True)}<br>{why}")]


def _seeding(seeding: Seeding | None) -> str:
    if seeding is None:
        return _badge("not seeding", good=False)
    return (
        f"{_badge('seeding', good=True)} {_e(seeding.state)}, "
        f"{_e(number(seeding.peers))} peers, {_e(number(seeding.uploaded))} bytes uploaded"
        f"<br><code>{_e(seeding.info_hash)}</code>"
    )


def _run(run: ArchiveRun | None) -> str:
    if run is None:
        return NONE
    outcome = _badge(run.outcome, good=run.outcome == "ok", bad=run.outcome != "ok")
    facts = (
        f"{outcome} {_e(utc(run.started))} ({_e(run.reason)}): "
        f"{_e(number(run.archives_added))} archives added, "
        f"{_e(number(run.messages_archived))} archived copies, "
        f"seeded {'yes' if run.seeded else 'no'}, published {'yes' if run.published else 'no'}"
    )
    return facts if run.error is None else f"{facts}<br>error: {_code(run.error)}"


def _members(preview: Mapping[str, Any] | None) -> str:
    """Per generation: the link verdict, imported, refused by reason (issue 23)."""
    if preview is None:
        return "after the next archive run"
    if "error" in preview:
        return f"not previewed: {_code(str(preview['error']))}"
    lines = []
    for name, view in preview["generations"].items():
        refused = ", ".join(f"{_e(r)} {_e(number(n))}" for r, n in view["skipped"].items() if n)
        acted = bool(view["linkActedOn"])
        link = "link acted on" if acted else "link NOT acted on"
        why = "" if acted else f" ({_e(view['linkReason'])})"
        copies = view.get("copiesImported")  # absent from a preview taken before issue 34
        lines.append(
            f"{_e(name)}: {_badge(link, good=acted, bad=not acted)}{why} "
            f"{_e(number(view['imported']))} messages imported"
            + (f" ({_e(number(copies))} copies)" if copies is not None else "")
            + f"; refused: {refused or 'none'}"
        )
    archived = preview.get("archivedMessages")
    if archived is not None and "copiesArchived" in preview:
        lines.append(
            f"of {_e(number(archived))} archived messages in "
            f"{_e(number(preview['copiesArchived']))} copies (archive topics "
            f"{_e(preview.get('archiveTopics'))}): a message counts once, with its best copy's fate"
        )
    return "<br>".join(lines)


#: Under the windows: what an archived copy is (issue 24: 12 shown for 6 messages, unsaid;
#: issue 34: messages are counted as messages, the copies beside them).
COPIES_NOTE = (
    "messages count each message once (one per original hash); archived copies: with "
    "archive_topics = &quot;both&quot; (the default) each message is archived twice, on its "
    "channel topic and on -memberUpdate, so copies are twice the messages"
)


def _community(community: CommunityStatus) -> str:
    title = _e(community.name) if community.name else "(no name)"
    fields = _fields([
        ("pubsub topic", f"{_code(community.pubsub_topic)} (shard {_e(community.shard)})"),
        ("channels", "<br>".join(_code(c) for c in community.channels) or NONE),
        ("back end", _e(community.backend)),
        ("archive link", _code(community.link)),
        *_publication(community.published, community.link),
        *_reach(community),
        ("seeding", _seeding(community.seeding)),
        ("last archive run", _run(community.last_run)),
        ("members' clients", _members(community.members_preview)),
        ("next run", _e(utc(community.next_run))),
        ("archives", _e(number(community.archives))),
        *([("degraded", _badge(community.degraded, good=False, bad=True))]
          if community.degraded else []),
        *([("index error", _code(community.index_error))] if community.index_error else []),
    ])  # fmt: skip
    windows = _table(
        ("archive", "from", "to", "#messages", "#archived copies", "archive topics", "#bytes"),
        (
            (_code(w.archive_id), _e(utc(w.start)), _e(utc(w.end)), _e(number(w.messages)),
             _e(number(w.copies)), _e(w.archive_topics or "?"), _e(number(w.size)))
            for w in community.windows
        ),
        "no archive yet",
    )  # fmt: skip
    return (
        f'<article class="card"><h3>{title} <span class="id">{_e(community.id)}</span></h3>'
        f"{fields}<h3>Latest archive windows</h3>{windows}<p class=\"none\">{COPIES_NOTE}</p>"
        "</article>"
    )


def _v1(v1: V1Status | None) -> str:
    if v1 is None:
        return '<h2>Waku v1</h2><p class="none">not configured (no [v1])</p>'
    totals = ", ".join(f"{_e(k)} {_e(number(v))}" for k, v in sorted(v1.totals.items()))
    peers = _table(
        ("enode id", "address", "since", "ready", "#requests", "#envelopes sent",
         "#live accepted", "#live rejected"),
        (
            (_code(p.enode_id, wrap=True), _e(p.address), _e(utc(p.since)),
             "yes" if p.ready else "no", _e(number(p.requests)), _e(number(p.envelopes_sent)),
             _e(number(p.live_accepted)), _e(number(p.live_rejected)))
            for p in v1.peers
        ),
        "no peer connected",
    )  # fmt: skip
    refusals = _table(
        ("kind", "reason", "#count"),
        ((_e(r.kind), _e(r.reason), _e(number(r.count))) for r in v1.refusals),
        "nothing refused",
    )
    fields = _fields([("enode", _code(v1.enode)), ("counters", totals or NONE)])
    return (
        f'<h2>Waku v1</h2><div class="card">{fields}'
        f"<h3>Connected peers ({len(v1.peers)})</h3>{peers}"
        f"<h3>Refused by the limits</h3>{refusals}</div>"
    )


def _history(history: HistoryStatus | None) -> str:
    if history is None:
        return '<h2>History pulls</h2><p class="none">not configured (no [history])</p>'
    pulls = _table(
        ("store node", "pubsub topic", "from", "to", "#pages", "#messages", "#new",
         "#bad hashes", "#malformed", "error"),
        (
            (_code(p.node), _code(p.pubsub_topic), _e(utc(p.start)), _e(utc(p.end)),
             _e(number(p.pages)), _e(number(p.messages)), _e(number(p.new)),
             _e(number(p.bad_hashes)), _e(number(p.malformed)), _code(p.error, wrap=True))
            for p in history.pulls
        ),
        "no pull finished yet",
    )  # fmt: skip
    fields = _fields([
        ("store nodes", "<br>".join(_code(n) for n in history.nodes)),
        ("every", _e(duration(history.interval))),
    ])  # fmt: skip
    return f'<h2>History pulls</h2><div class="card">{fields}<h3>Last pull</h3>{pulls}</div>'


def render_status_page(report: StatusReport) -> str:
    service = report.service
    communities = "".join(_community(c) for c in report.communities)
    return (
        '<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>waku-legacy bridge: {_e(service.health)}</title><style>{STYLE}</style></head>"
        f"<body><header><h1>waku-legacy bridge {_health_badge(service.health)}</h1>"
        f"<p>{_e(service.version)} · up {_e(duration(service.uptime))} · "
        f"as of {_e(utc(service.now))} · the same as JSON: <code>/debug/v1/status</code></p>"
        f"</header><main>{_service(service)}"
        f"<h2>Communities ({len(report.communities)})</h2>"
        f"{communities or '<p class=none>no [[community]] configured</p>'}"
        f"{_v1(report.v1)}{_history(report.history)}</main></body></html>\n"
    )
