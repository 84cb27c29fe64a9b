"""``history export``: every format parsed back (csv module, json) and compared with what the
sample community holds, written by hand; filters; a static site whose links resolve on disk;
the folder replaced whole; and the command end to end over a real SQLite history index."""

from __future__ import annotations

import csv
import json
import re
from pathlib import Path

import pytest

from tests.browser import page_text
from tests.waku_legacy.history import indexing
from tests.waku_legacy.history.memory_reader import (
    ALICE,
    BOB,
    COMMUNITY,
    DEV,
    GENERAL,
    PNG_1X1,
    key,
    mid,
    sample_history,
)
from waku_legacy.cli import main
from waku_legacy.errors import ConfigError
from waku_legacy.history.export import CSV_COLUMNS, ExportFilter, export_history
from waku_legacy.history.index import HistoryIndex

GENERAL_FILE = "general-6f3c9a4e"
DEV_FILE = "dev-a1b2c3d4"
# the sample's #general, oldest first, Mallory's (banned) left out
GENERAL_IDS = [mid(n) for n in (1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 12, 13)]


def _export(tmp_path: Path, fmt: str, selection: ExportFilter | None = None) -> Path:
    out = tmp_path / f"out-{fmt}"
    export_history(sample_history().reader(), COMMUNITY, fmt, out, selection=selection)
    return out


def test_csv_rows_hold_the_json_forms_fields(tmp_path: Path):
    out = _export(tmp_path, "csv")
    assert sorted(p.name for p in out.iterdir()) == [f"{DEV_FILE}.csv", f"{GENERAL_FILE}.csv"]
    with (out / f"{GENERAL_FILE}.csv").open(newline="", encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    assert list(rows[0]) == list(CSV_COLUMNS)
    assert [r["id"] for r in rows] == GENERAL_IDS
    first = rows[0]
    assert first["time"] == "2024-03-12T09:02:00.000Z" and first["channel"] == "general"
    assert first["author_key"] == ALICE.public_key and first["author_shown_name"] == "Alice"
    assert first["author_ens_claim"] == "alice.eth" and first["author_alias"] == "Active Curly Goat"
    assert first["text"] == "Good morning everyone! The **v2 migration** of our history is done 🎉"
    question, reply = rows[2], rows[3]
    assert question["reactions"] == "❤️ 2; 👍 1"
    assert reply["response_to"] == mid(3) and reply["edited"] == "True"
    assert reply["edited_at"] == "2024-03-12T09:11:00.000Z"
    assert rows[4]["pinned"] == "True"
    assert (rows[5]["content_type"], rows[5]["image_type"]) == ("image", "png")
    assert rows[7]["audio_duration_ms"] == "14000"
    assert rows[9]["discord_author"] == "oldtimer#1234"
    # provenance: the signer is the author; 12 March 09:02 sits in the week from 7 March
    assert first["signer"] == ALICE.public_key
    assert first["archive_window"] == "1709769600-1710374400"


def test_json_and_jsonl_are_the_message_objects(tmp_path: Path):
    document = json.loads((_export(tmp_path, "json") / f"{GENERAL_FILE}.json").read_text())
    assert document["community"] == {"id": COMMUNITY, "name": "Status Builders"}
    assert document["channel"]["name"] == "general"
    assert [m["id"] for m in document["messages"]] == GENERAL_IDS
    lines = (_export(tmp_path, "jsonl") / f"{GENERAL_FILE}.jsonl").read_text().splitlines()
    assert [json.loads(line) for line in lines] == document["messages"]
    reply = document["messages"][3]
    assert reply["mentions"] == {key(22): "Fond Bossy Buck"}
    assert reply["author"]["shown_name"] == "Brisk Medical Goral"  # ENS is only a claim
    assert reply["author"]["ens_claim"] == "carol.eth"


def test_txt_and_md_read_as_transcripts(tmp_path: Path):
    txt = (_export(tmp_path, "txt") / f"{GENERAL_FILE}.txt").read_text()
    assert "Community: Status Builders (" + COMMUNITY + ")" in txt
    assert (
        f"[2024-03-12 09:02 UTC] Alice ({ALICE.compressed}, Active Curly Goat, claims alice.eth)"
        in txt
    )
    assert "{Reactions} ❤️ 2, 👍 1" in txt
    assert f"(in reply to {mid(3)}; edited)" in txt
    assert "[voice message 0:14]" in txt
    md = (_export(tmp_path, "md") / f"{GENERAL_FILE}.md").read_text()
    assert md.startswith("# Status Builders: \\#general\n")
    assert "## 2024-03-12" in md and "## 2024-03-14" in md
    assert "**Fond Bossy Buck (" in md


def test_md_and_txt_make_a_strangers_html_text(tmp_path: Path):
    history = sample_history()
    history.messages[0] = history.messages[0].__class__(
        **{**{f: getattr(history.messages[0], f) for f in history.messages[0].__slots__},
           "text": "<script>alert(1)</script> **ok**"},
    )  # fmt: skip
    out = tmp_path / "md"
    export_history(history.reader(), COMMUNITY, "md", out)
    md = (out / f"{GENERAL_FILE}.md").read_text()
    assert "&lt;script&gt;alert(1)&lt;/script&gt; **ok**" in md and "<script>" not in md


def test_filters(tmp_path: Path):
    after = 1710237600000  # 2024-03-12T10:00Z
    out = _export(tmp_path, "jsonl", ExportFilter(channel_id=GENERAL, after_ms=after))
    assert [p.name for p in out.iterdir()] == [f"{GENERAL_FILE}.jsonl"]
    ids = [json.loads(line)["id"] for line in (out / f"{GENERAL_FILE}.jsonl").open()]
    assert ids == [mid(12), mid(13)]
    out = _export(tmp_path, "jsonl", ExportFilter(author=BOB.public_key, before_ms=after))
    general = [json.loads(x)["id"] for x in (out / f"{GENERAL_FILE}.jsonl").open()]
    assert general == [mid(3), mid(6), mid(8)]
    assert (out / f"{DEV_FILE}.jsonl").read_text() == ""  # 11:00, after `before`
    with pytest.raises(ConfigError, match="not a channel"):
        _export(tmp_path, "csv", ExportFilter(channel_id="00000000-0000-4000-8000-000000000000"))


def test_static_site_opens_from_disk_with_every_link_resolving(tmp_path: Path):
    out = _export(tmp_path, "html")
    files = sorted(str(p.relative_to(out)) for p in out.rglob("*") if p.is_file())
    assert files == sorted([
        "index.html", "history.css", f"{GENERAL}/index.html", f"{GENERAL}/2024-03-12.html",
        f"{GENERAL}/2024-03-14.html", f"{DEV}/index.html", f"{DEV}/2024-03-12.html",
        f"images/{mid(6)}.png",
    ])  # fmt: skip
    assert (out / "images" / f"{mid(6)}.png").read_bytes() == PNG_1X1
    for page in out.rglob("*.html"):
        parsed = page_text(page.read_text())
        assert "script" not in parsed.tags and "form" not in parsed.tags
        for name, value in parsed.attributes:
            if (
                name not in ("href", "src")
                or value is None
                or value.startswith(("magnet:", "http"))
            ):
                continue
            target = (page.parent / value.split("#")[0]).resolve()
            assert target.is_file(), (page, value)
            anchor = value.partition("#")[2]
            if anchor:
                assert f'id="{anchor}"' in target.read_text(), (page, value)
    day = (out / GENERAL / "2024-03-14.html").read_text()
    # Carol's reply links to Bob's message in its day page; provenance folded under each
    assert f'href="../{GENERAL}/2024-03-14.html#m-{mid(12)}"' in day
    assert "<summary>Provenance</summary>" in day


def test_an_export_replaces_the_folder_whole(tmp_path: Path):
    out = tmp_path / "site"
    out.mkdir()
    (out / "stale.txt").write_text("from an older export")
    export_history(sample_history().reader(), COMMUNITY, "txt", out)
    assert sorted(p.name for p in out.iterdir()) == [f"{DEV_FILE}.txt", f"{GENERAL_FILE}.txt"]
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no temp left


def test_the_command_over_a_store_with_readable_tables(tmp_path: Path, capsys):
    store = tmp_path / "store.sqlite3"
    events = [
        indexing.chat(1, indexing.ALICE, "first <b>words</b>", "2024-05-01T10:00:00"),
        indexing.chat(
            2, indexing.BOB, "a reply", "2024-05-01T10:05:00", response_to=indexing.mid(1)
        ),
        indexing.chat(3, indexing.ALICE, "next day", "2024-05-02T08:00:00"),
    ]
    with HistoryIndex.open(f"sqlite:///{store}", create=True) as index:
        index.add_events(indexing.COMMUNITY, events)
    out = tmp_path / "csv"
    code = main([
        "history", "export", "--community", indexing.COMMUNITY, "--store", f"sqlite:///{store}",
        "--format", "csv", "--out", str(out), "--quiet", "--after", "2024-05-01",
        "--before", "2024-05-02",
    ])  # fmt: skip
    assert code == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["messages"] == 2 and summary["format"] == "csv"
    (written,) = list(out.iterdir())
    with written.open(newline="", encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    assert [(r["id"], r["text"], r["response_to"]) for r in rows] == [
        (indexing.mid(1), "first <b>words</b>", ""), (indexing.mid(2), "a reply", indexing.mid(1)),
    ]  # fmt: skip
    assert rows[0]["author_key"] == indexing.ALICE
    site = tmp_path / "site"
    capsys.readouterr()
    assert main([
        "history", "export", "--community", indexing.COMMUNITY, "--store", f"sqlite:///{store}",
        "--format", "html", "--out", str(site),
    ]) == 0  # fmt: skip
    # progress as every command shows it off a terminal: JSON lines on stderr
    lines = [json.loads(x) for x in capsys.readouterr().err.splitlines() if x.startswith("{")]
    last = [x for x in lines if x.get("event") == "progress" and x["step"] == "export"][-1]
    assert last["finished"] and last["done"] == last["total"] == 3 and last["unit"] == "msg"
    pages = sorted(p.name for p in site.rglob("2024-*.html"))
    assert pages == ["2024-05-01.html", "2024-05-02.html"]
    html = next(site.rglob("2024-05-01.html")).read_text()
    assert "first &lt;b&gt;words&lt;/b&gt;" in html
    assert re.search(r"<script", html) is None


def test_the_command_refuses_what_it_cannot_use(tmp_path: Path, capsys):
    base = ["history", "export", "--community", indexing.COMMUNITY, "--format", "csv",
            "--out", str(tmp_path / "x"), "--quiet"]  # fmt: skip
    assert main(base) != 0
    assert "needs the archives" in capsys.readouterr().err
    assert main([*base, "--store", "sqlite:///x.db", "--after", "yesterday"]) != 0
    assert "--after 'yesterday'" in capsys.readouterr().err
    assert main([*base, "--store", "sqlite:///x.db", "--author", "0x04ab"]) != 0
    assert "not a member key" in capsys.readouterr().err


def test_a_static_site_rendered_by_processes_is_the_same_bytes(tmp_path: Path):
    """workers=2: the day pages rendered in two processes, each with its own reader over
    the same SQLite index, give the same files as one process."""
    import functools

    from waku_legacy.history.export import index_reader
    from waku_legacy.history.model import ViewPolicy

    dsn = f"sqlite:///{tmp_path}/index.sqlite3"
    import datetime as dt

    start = dt.datetime(2024, 1, 1, 10)
    events = [
        indexing.chat(
            n, indexing.ALICE if n % 3 else indexing.BOB, f"message {n} on its day",
            (start + dt.timedelta(days=n // 2, minutes=n)).isoformat(),
            channel=indexing.GENERAL if n % 4 else indexing.RANDOM,
            response_to=indexing.mid(n - 1) if n % 5 == 0 else "",
        )
        for n in range(1, 400)
    ]  # fmt: skip
    with HistoryIndex.open(dsn, create=True) as index:
        index.add_events(indexing.COMMUNITY, events)
        reader = index.reader()
        one, two = tmp_path / "one", tmp_path / "two"
        counts_one = export_history(reader, indexing.COMMUNITY, "html", one)
        factory = functools.partial(index_reader, dsn, ViewPolicy())
        counts_two = export_history(
            reader, indexing.COMMUNITY, "html", two, workers=2, reader_factory=factory
        )
    assert counts_one.to_json() == counts_two.to_json()
    assert counts_one.messages == 399 and counts_one.pages > 2 * 64  # more than one task
    files = sorted(str(p.relative_to(one)) for p in one.rglob("*") if p.is_file())
    assert files == sorted(str(p.relative_to(two)) for p in two.rglob("*") if p.is_file())
    for name in files:
        assert (one / name).read_bytes() == (two / name).read_bytes(), name
