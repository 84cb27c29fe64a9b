"""Issue 24: the migration report's text counts archived copies as copies, leads with one
summary line per community, and shows the weekly table only on request (demo --verbose)."""

from __future__ import annotations

from waku_legacy.migrate.report import RunReport, WeekRow, render_report

COMMUNITY = "0x02" + "ab" * 32


def _report(archived: int) -> RunReport:
    report = RunReport(config="demo", master="local[1]", now=1)
    report.communities = [{
        "community": COMMUNITY, "name": "Demo", "shard": 128, "messages": 743,
        "archived_now": archived, "late": 0, "undecryptable": 0, "archives_added": 3,
        "total_archives": 3, "info_hash": "ef" * 20, "magnet_uri": None,
        "archive_topics": "both" if archived != 743 else "channel",
    }]  # fmt: skip
    report.weeks = [WeekRow("2021-W01", source="ms1", community=COMMUNITY, messages=743)]
    return report


def test_copies_are_called_copies_and_the_weeks_wait_for_verbose() -> None:
    text = render_report(_report(1486), weeks=False)
    # 743 messages, each archived twice in "both" (issue 34: the report says the mode)
    assert "Demo: 743 messages, 1,486 archived copies (archive topics both), shard 128" in text
    assert "weeks (all sources)" not in text
    assert "weeks (all sources)" in render_report(_report(1486))
    assert "Demo: 743 messages, 743 archived (archive topics channel), shard 128" in render_report(
        _report(743)
    )
