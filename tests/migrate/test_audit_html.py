"""The audit's HTML report (``waku-legacy audit --html``): report documents built by hand
after the ``--json`` contract (version 2), rendered, and opened in headless Chromium -- the
chart has one column per week, the totals and the verdict are in the rendered text, hostile
strings from the archives stay text, and the page loads nothing."""

from __future__ import annotations

import html.parser
import re
from pathlib import Path
from typing import Any

from tests.browser import WINDOW, check_png, chromium, screenshot, text_of
from waku_legacy.migrate.audit.html import LIST_CAP, render_audit_html

WEEK = 7 * 86_400
T0 = 1_704_067_200  # 2024-01-01 00:00 UTC, a Monday
COMMUNITY = "0x02" + "ab" * 32
CHANNEL_A = "2f6a1c3e-0b4d-4e8a-9c1f-5d7e8a9b0c1d"
CHANNEL_B = "7c9e6679-7425-40de-944b-e07fc1f90ae7"
HOSTILE_CHANNEL = '"><script>alert("channel")</script>'
HOSTILE_PROBLEM = (
    '<img src="https://evil.example/x.png" onerror=alert(1)><script>alert(2)</script>'
    "&amp; index entry 4 overlaps entry 3"
)


def _hash(n: int) -> str:
    return f"0x{n:064x}"


def _channel(channel: str, both: int = 0, missing: int = 0, extra: int = 0,
             duplicates: int = 0) -> dict[str, Any]:  # fmt: skip
    """Counts of an audit in "both": each message has two copies, archived or missing."""
    return {"channel": channel, "both": both, "missing": missing, "extra": extra,
            "duplicates": duplicates, "copies_archived": 2 * both + extra,
            "copies_missing": 2 * missing}  # fmt: skip


def _window(week: int, channels: list[dict[str, Any]], archive_ids: list[str],
            problems: list[str] | None = None) -> dict[str, Any]:  # fmt: skip
    """A window whose counts are its channels' sums."""
    kinds = ("both", "missing", "extra", "duplicates", "copies_archived", "copies_missing")
    sums = {k: sum(c[k] for c in channels) for k in kinds}
    start = T0 + week * WEEK
    return {"start": start, "end": start + WEEK, "archive_ids": archive_ids,
            "archive_topics": "both", **sums,
            "channels": channels, "problems": problems or []}  # fmt: skip


def _missing(windows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One entry per missing message the windows count, a second apart."""
    return [
        {"hash": _hash(w["start"] + i), "window": w["start"], "channel": c["channel"],
         "timestamp_ns": (w["start"] + 3600 + i) * 10**9, "sources": ["ms-1"]}
        for w in windows for c in w["channels"] for i in range(c["missing"])
    ]  # fmt: skip


def _totals(windows: list[dict[str, Any]], bad_archives: int) -> dict[str, int]:
    both, missing, extra, duplicates = (
        sum(w[k] for w in windows) for k in ("both", "missing", "extra", "duplicates")
    )
    return {"source_messages": both + missing, "archived_messages": both + extra,
            "both": both, "missing": missing, "extra": extra, "duplicates": duplicates,
            "copies_expected": 2 * (both + missing), "copies_archived": 2 * both + extra,
            "copies_missing": 2 * missing, "copies_extra": extra,
            "copies_duplicated": duplicates, "windows": len(windows), "bad_archives": bad_archives,
            "windows_without_archive": sum(1 for w in windows if not w["archive_ids"])}  # fmt: skip


def five_weeks() -> dict[str, Any]:
    """Five weeks: complete, 5 missing, no archive at all (60), 2 extra and a duplicate,
    and 1 missing in a hostile channel of an archive with a hostile problem."""
    windows = [
        _window(0, [_channel(CHANNEL_A, both=80), _channel(CHANNEL_B, both=40)], ["0xa0"]),
        _window(1, [_channel(CHANNEL_A, both=55, missing=5), _channel(CHANNEL_B, both=40)],
                ["0xa1"]),
        _window(2, [_channel(CHANNEL_A, missing=40), _channel(CHANNEL_B, missing=20)], [],
                ["no archive for a window with 60 messages"]),
        _window(3, [_channel(CHANNEL_A, both=200, duplicates=1), _channel("unknown", extra=2)],
                ["0xa3"]),
        _window(4, [_channel(CHANNEL_B, both=1_150), _channel(HOSTILE_CHANNEL, missing=1)],
                ["0xa4"], [HOSTILE_PROBLEM]),
    ]  # fmt: skip
    return {
        "version": 2,
        "community": COMMUNITY,
        "archive_topics": "both",
        "archives": {"origin": "magnet:?xt=urn:btih:" + "c" * 40, "count": 4,
                     "index_entries": 4},
        "sources": ["ms-1", "ms-2"],
        "totals": _totals(windows, bad_archives=1),
        "complete": False,
        "windows": windows,
        "worst_windows": [windows[2]["start"], windows[1]["start"], windows[4]["start"]],
        "missing": _missing(windows),
        "extra": [
            {"hash": _hash(1), "window": windows[3]["start"], "channel": "unknown",
             "probable_origin": "live v2 traffic"},
            {"hash": _hash(2), "window": windows[3]["start"], "channel": "unknown",
             "probable_origin": "source ms-2"},
        ],
        "duplicates": [{"hash": _hash(3), "window": windows[3]["start"], "copies": 2,
                        "archive_ids": ["0xa3"]}],
        "archive_problems": [{"archive_id": "0xa4", "problem": HOSTILE_PROBLEM}],
    }  # fmt: skip


def many_weeks(count: int, missing_every: int) -> dict[str, Any]:
    """``count`` weeks of 1,000 messages; every ``missing_every``-th lacks 30 of them."""
    windows = [
        _window(i, [_channel(CHANNEL_A, both=970, missing=30)] if i % missing_every == 0
                else [_channel(CHANNEL_A, both=1_000)], [f"0x{i:04x}"])
        for i in range(count)
    ]  # fmt: skip
    return {"version": 2, "community": COMMUNITY, "archive_topics": "both",
            "archives": {"origin": "/srv/archives", "count": count, "index_entries": count},
            "sources": ["ms-1"], "totals": _totals(windows, bad_archives=0),
            "complete": False, "windows": windows,
            "worst_windows": [w["start"] for w in windows if w["missing"]][:10],
            "missing": _missing(windows), "extra": [], "duplicates": [],
            "archive_problems": []}  # fmt: skip


class _Elements(html.parser.HTMLParser):
    """Every start tag with its attributes, in document order."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.elements: list[tuple[str, dict[str, str | None]]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.elements.append((tag, dict(attrs)))


def elements(document: str) -> list[tuple[str, dict[str, str | None]]]:
    parser = _Elements()
    parser.feed(document)
    parser.close()
    return parser.elements


def weeks_in(document: str) -> list[dict[str, str | None]]:
    """The chart's week groups: ``<g class="week …">``."""
    return [
        attrs for tag, attrs in elements(document)
        if tag == "g" and "week" in (attrs.get("class") or "").split()
    ]  # fmt: skip


def assert_loads_nothing(document: str) -> None:
    """No script, image, frame, object or link element; no URL in any src/href."""
    found = elements(document)
    assert not {tag for tag, _ in found} & {"script", "img", "iframe", "object", "embed",
                                            "link", "image", "use", "form"}  # fmt: skip
    for tag, attrs in found:
        assert not any(name.startswith("on") for name in attrs), (tag, attrs)
        for name in ("src", "href", "xlink:href", "srcset", "action"):
            assert not re.match(r"\s*(https?:)?//", attrs.get(name) or ""), (tag, attrs)


async def _open(tmp_path: Path, report: dict[str, Any], name: str) -> str:
    """The report written to a file and rendered by Chromium: the DOM it built."""
    page = tmp_path / f"{name}.html"
    page.write_text(render_audit_html(report), encoding="utf-8")
    return (await chromium(tmp_path, page.as_uri(), "--dump-dom")).decode()


# -- in Chromium -----------------------------------------------------------------------------


async def test_five_weeks_in_chromium_one_column_per_week_totals_and_hostile_text(tmp_path):
    report = five_weeks()
    page = tmp_path / "audit.html"
    page.write_text(render_audit_html(report), encoding="utf-8")
    check_png(await screenshot(tmp_path, page.as_uri(), "audit.png"), WINDOW)
    dom = (await chromium(tmp_path, page.as_uri(), "--dump-dom")).decode()
    text = text_of(dom)

    weeks = weeks_in(dom)
    assert [int(w["data-start"] or 0) for w in weeks] == [T0 + i * WEEK for i in range(5)]
    assert [w["class"] for w in weeks].count("week no-archive") == 1  # the third week
    assert "gaps found" in text
    # 120 + 95 + 0 + 200 + 1,150 in both; 5 + 60 + 1 missing; 2 extra.
    for total in ("1,631 messages in the sources", "1,567 messages in the archives",
                  "1,565 in both", "66 missing from the archives", "2 extra",
                  "1 messages duplicated in the archives", "5 weeks",
                  "1 weeks without an archive", "1 bad archives",
                  # the copies apart: two per message in "both", the extras alone
                  "3,262 copies the archives should hold", "3,132 copies in the archives",
                  "132 copies missing", "2 extra copies"):  # fmt: skip
        assert total in text, total
    assert "66 missing messages (132 missing copies)" in text
    assert "archive topics:  both  · counts are messages" in text
    # Axis labels: each week's date, in UTC.
    for day in ("2024-01-01", "2024-01-08", "2024-01-15", "2024-01-22", "2024-01-29"):
        assert day in text, day
    assert HOSTILE_CHANNEL in text and HOSTILE_PROBLEM in text  # as written, "&amp;" too
    assert_loads_nothing(dom)


async def test_two_hundred_weeks_fit_the_page_and_long_lists_are_capped(tmp_path):
    report = many_weeks(200, missing_every=3)  # 67 weeks lack 30 each: 2,010 missing
    dom = await _open(tmp_path, report, "long")
    text = text_of(dom)
    assert len(weeks_in(dom)) == 200
    svg = next(attrs for tag, attrs in elements(dom) if tag == "svg")
    assert 600 < float(svg["width"] or 0) <= 1_150  # scaled into the page, not 200 × 64 px
    assert "200,000 messages in the sources" in text and "2,010 missing" in text
    assert f"… and {2_010 - LIST_CAP:,} more" in text
    hashes = re.findall(r"\b0x[0-9a-f]{64}\b", text)
    assert len(hashes) == LIST_CAP
    assert_loads_nothing(dom)


async def test_one_week_complete_reads_as_complete(tmp_path):
    windows = [_window(0, [_channel(CHANNEL_A, both=12)], ["0xa0"])]
    report = {**many_weeks(1, missing_every=2), "windows": windows,
              "totals": _totals(windows, bad_archives=0), "complete": True,
              "worst_windows": [], "missing": []}  # fmt: skip
    dom = await _open(tmp_path, report, "one")
    text = text_of(dom)
    assert len(weeks_in(dom)) == 1
    assert "complete" in text and "gaps found" not in text
    assert "12 messages in the sources" in text and "0 missing from the archives" in text
    assert "2024-01-01" in text
    assert_loads_nothing(dom)


# -- the document itself ---------------------------------------------------------------------


def test_every_value_is_escaped_and_the_page_is_self_contained():
    document = render_audit_html(five_weeks())
    assert HOSTILE_CHANNEL not in document and "<script" not in document
    assert html.escape(HOSTILE_CHANNEL, quote=True) in document
    assert "Content-Security-Policy" in document and "default-src 'none'" in document
    assert_loads_nothing(document)


def test_no_window_at_all_still_renders():
    report = {**many_weeks(1, missing_every=2), "windows": [], "worst_windows": [],
              "missing": [], "totals": _totals([], bad_archives=0)}  # fmt: skip
    document = render_audit_html(report)
    assert weeks_in(document) == [] and "no week" in text_of(document)


def test_quiet_weeks_between_windows_are_marked_not_drawn():
    """Weeks 0 and 4 (three quiet weeks between): two columns and one dashed gap."""
    windows = [_window(0, [_channel(CHANNEL_A, both=5)], ["0xa0"]),
               _window(4, [_channel(CHANNEL_A, both=7)], ["0xa4"])]  # fmt: skip
    report = {**many_weeks(1, missing_every=2), "windows": windows, "missing": [],
              "totals": _totals(windows, bad_archives=0), "worst_windows": []}  # fmt: skip
    document = render_audit_html(report)
    assert len(weeks_in(document)) == 2
    gaps = [attrs for tag, attrs in elements(document) if attrs.get("class") == "quiet"]
    assert len(gaps) == 1
    assert "quiet from 2024-01-08 to 2024-01-29 (UTC)" in text_of(document)
