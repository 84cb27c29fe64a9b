"""``waku-legacy audit`` (issue 14): a community's archives compared with its sources.

The fixture: a sample community's envelopes in two envelope dumps (the second holds every
third one again, so the dedup runs), archives built from them with the project's own builder,
then chosen damage: three messages left out of the first week, no archive at all for the
third week, one message twice in the fourth week's archive, and two foreign messages (a public
chat's message, which a source holds on another topic, and one no source holds). The audit
must find exactly that, by window and channel. No Spark: the audit reads in plain Python.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from waku_legacy.archive import ArchiveMessage, EncodedArchive, append_archives
from waku_legacy.archive.build import BuildReport, build_community_archives
from waku_legacy.archive.partition import WEEK_SECONDS
from waku_legacy.cli import main
from waku_legacy.crypto.payload import encode_payload
from waku_legacy.crypto.secp256k1 import generate_private_key
from waku_legacy.errors import ConfigError
from waku_legacy.identity.topic_mapping import TopicMapping
from waku_legacy.identity.topics import chat_topic, symmetric_key_for_chat
from waku_legacy.mailserver_compat.storage.dump import DumpWriter
from waku_legacy.mailserver_compat.wire.pow import seal
from waku_legacy.migrate.archives import archive_fields
from waku_legacy.migrate.audit.render import render_audit_table
from waku_legacy.migrate.audit.request import AuditRequest
from waku_legacy.migrate.audit.run import audit_community
from waku_legacy.migrate.config import SourceConfig, SourceKind
from waku_legacy.migrate.decode import decode_record
from waku_legacy.migrate.sample import (
    SampleSpec,
    description_message,
    generate_descriptions,
    generate_envelopes,
    make_communities,
)

SPEC = SampleSpec(communities=1, channels=2, members=3, days=28, messages_per_channel_day=2.0)
COMMUNITY = make_communities(SPEC)[0]
CID = str(COMMUNITY.id)
TOPIC_CHANNEL = {chat_topic(COMMUNITY.id.channel_chat_id(c)): c for c in COMMUNITY.channels}
TOPICS = tuple(sorted(TOPIC_CHANNEL))
CONTRACT_KEYS = {
    "version",
    "community",
    "archive_topics",
    "archives",
    "sources",
    "totals",
    "complete",
    "windows",
    "worst_windows",
    "missing",
    "extra",
    "duplicates",
    "archive_problems",
}
TOTAL_KEYS = {
    "source_messages",
    "archived_messages",
    "both",
    "missing",
    "extra",
    "duplicates",
    "copies_expected",
    "copies_archived",
    "copies_missing",
    "copies_extra",
    "copies_duplicated",
    "windows",
    "windows_without_archive",
    "bad_archives",
}


def _archive_form(raw: bytes) -> ArchiveMessage:
    """An envelope as the migration archives it (a public chat's too, for a foreign one)."""
    from waku_legacy.identity.topics import symmetric_key_for_chat

    record = {
        "source": "t",
        "kind": "envelope-dump",
        "location": "x",
        "rank": 0,
        "format": "v1-envelope",
        "data": raw,
    }
    row = decode_record(record, TopicMapping("/waku/2/rs/16/64", {}))
    topic = bytes.fromhex(row["content_topic"].split("/")[3][2:])
    chat = (
        COMMUNITY.id.channel_chat_id(TOPIC_CHANNEL[topic])
        if topic in TOPIC_CHANNEL
        else next(c for c in ("status", "crypto", "introductions") if chat_topic(c) == topic)
    )
    fields = archive_fields(
        message_hash=row["message_hash"],
        content_topic=row["content_topic"],
        payload=row["payload"],
        version=row["version"],
        timestamp_ns=row["timestamp"],
        db_key=row["db_key"],
        symmetric_key=symmetric_key_for_chat(chat),
    )
    assert fields["ok"], fields
    message = ArchiveMessage(
        fields["timestamp"],
        fields["hash"],
        fields["topic"],
        fields["payload"],
        fields["sig"],
        fields["padding"],
    )
    return message


@pytest.fixture(scope="module")
def sample(tmp_path_factory):
    out = tmp_path_factory.mktemp("audit")
    envelopes = list(generate_envelopes(SPEC, [COMMUNITY]))
    # ms-1 also holds the community's signed descriptions: the channels are found there
    descriptions = list(generate_descriptions(SPEC, [COMMUNITY]))
    for name, chosen in (("ms-1", envelopes + descriptions), ("ms-2", envelopes[::3])):
        with DumpWriter(out / f"{name}.dump") as writer:
            for raw in chosen:
                writer.append(raw)
    forms = [_archive_form(raw) for raw in envelopes]
    channel = sorted(
        (m for m in forms if m.topic in TOPIC_CHANNEL), key=lambda m: (m.timestamp, m.hash)
    )
    public = [m for m in forms if m.topic not in TOPIC_CHANNEL]
    start = channel[0].timestamp
    return out, channel, public, start


def _week(messages, start, k):
    return [
        m
        for m in messages
        if start + k * WEEK_SECONDS <= m.timestamp < start + (k + 1) * WEEK_SECONDS
    ]


def _sources(out: Path) -> list[str]:
    return [f"dump:{out / 'ms-1.dump'}", f"dump:{out / 'ms-2.dump'}"]


def _clean(tmp_path: Path, sample, archive_topics: str = "channel") -> BuildReport:
    _out, channel, _public, start = sample
    archive_dir = tmp_path / "archives"
    return build_community_archives(
        archive_dir,
        tmp_path / "torrents",
        CID,
        TOPICS,
        channel,
        now=start + 4 * WEEK_SECONDS,
        archive_topics=archive_topics,
    )


@pytest.fixture(scope="module")
def damaged(sample, tmp_path_factory):
    """The archives with the chosen damage, and what was done."""
    _out, channel, public, start = sample
    tmp = tmp_path_factory.mktemp("damaged")
    archive_dir = tmp / "archives"
    week0, week1, week2, week3 = (_week(channel, start, k) for k in range(4))
    removed = [week0[1], week0[5], week0[-1]]
    foreign_public = next(m for m in public if start <= m.timestamp < start + WEEK_SECONDS)
    fabricated = ArchiveMessage(week1[2].timestamp, b"\x42" * 32, TOPICS[0], b"not from a source")
    kept = [m for m in week0 + week1 if m not in removed] + [foreign_public, fabricated]
    build_community_archives(
        archive_dir,
        tmp / "torrents",
        CID,
        TOPICS,
        kept,
        now=start + 2 * WEEK_SECONDS,
        archive_topics="channel",  # the channel-only archives published before issue 12
    )
    # no archive for week 2; week 3's archive holds one message twice
    doubled = sorted([*week3, week3[3]], key=lambda m: (m.timestamp, m.hash))
    w3 = start + 3 * WEEK_SECONDS
    append_archives(
        archive_dir, CID, [EncodedArchive.build(w3, w3 + WEEK_SECONDS, TOPICS, doubled)]
    )
    damage = {
        "removed": removed,
        "week2": week2,
        "public": foreign_public,
        "fabricated": fabricated,
        "doubled": week3[3],
        "channel": channel,
    }
    return archive_dir, damage


def _request(out: Path, archive_dir: Path, tmp_path: Path, **kw) -> AuditRequest:
    sources = [
        SourceConfig(
            SourceKind.ENVELOPE_DUMP, f"source-{i + 1}", i, path=str(out / f"ms-{i + 1}.dump")
        )
        for i in range(2)
    ]
    kw.setdefault("pubsub_topic", "/waku/2/rs/16/64")
    return AuditRequest(
        community=COMMUNITY.id,
        channels=COMMUNITY.channels,
        sources=sources,
        archive_dir=archive_dir,
        origin=str(archive_dir),
        work_dir=str(tmp_path),
        **kw,
    )


def test_a_clean_build_audits_complete(sample, tmp_path, capsys) -> None:
    out, channel, _public, _start = sample
    archive_dir = tmp_path / "archives"
    _clean(tmp_path, sample)
    code = main(
        [
            "audit",
            "--shard",
            "64",
            "--community",
            CID,
            "--archive-dir",
            str(archive_dir),
            *[a for s in _sources(out) for a in ("--source", s)],
            "--json",
            "--quiet",
        ]
    )
    document = json.loads(capsys.readouterr().out)
    assert code == 0
    assert document["complete"] is True
    totals = document["totals"]
    assert totals == {
        "source_messages": len(channel),
        "archived_messages": len(channel),
        "both": len(channel),
        "missing": 0,
        "extra": 0,
        "duplicates": 0,
        # "channel": one copy per message
        "copies_expected": len(channel),
        "copies_archived": len(channel),
        "copies_missing": 0,
        "copies_extra": 0,
        "copies_duplicated": 0,
        "windows": 4,
        "windows_without_archive": 0,
        "bad_archives": 0,
    }
    assert document["sources"] == ["source-1", "source-2"]


def test_the_audit_finds_exactly_the_damage(sample, damaged, tmp_path) -> None:
    out, channel, _public, start = sample
    archive_dir, damage = damaged
    doc = audit_community(_request(out, archive_dir, tmp_path))
    week = [start + k * WEEK_SECONDS for k in range(4)]
    missing = {*(m.hash for m in damage["removed"]), *(m.hash for m in damage["week2"])}
    assert {bytes.fromhex(m["hash"][2:]) for m in doc["missing"]} == missing
    assert doc["totals"] == {
        "source_messages": len(channel),
        "archived_messages": len(channel) - len(missing) + 2,
        "both": len(channel) - len(missing),
        "missing": len(missing),
        "extra": 2,
        "duplicates": 1,
        "copies_expected": len(channel),
        "copies_archived": len(channel) - len(missing) + 2,
        "copies_missing": len(missing),
        "copies_extra": 2,
        "copies_duplicated": 1,
        "windows": 4,
        "windows_without_archive": 1,
        "bad_archives": 0,
    }
    assert doc["complete"] is False
    by_start = {w["start"]: w for w in doc["windows"]}
    assert sorted(by_start) == week
    counts = {s: (w["missing"], w["extra"], w["duplicates"]) for s, w in by_start.items()}
    assert counts == {
        week[0]: (3, 1, 0),
        week[1]: (0, 1, 0),
        week[2]: (len(damage["week2"]), 0, 0),
        week[3]: (0, 0, 1),
    }
    assert by_start[week[2]]["archive_ids"] == []
    assert by_start[week[2]]["problems"] == [
        f"no archive for a window with {len(damage['week2'])} messages"
    ]
    assert [w["start"] for w in doc["windows"] if w["problems"]] == [week[2]]
    assert doc["worst_windows"] == [week[2], week[0]]
    # by channel: the removed messages' channels, and the week without archive's
    week0_missing = {c["channel"]: c["missing"] for c in by_start[week[0]]["channels"]}
    removed_channels = [TOPIC_CHANNEL[m.topic] for m in damage["removed"]]
    assert {c: n for c, n in week0_missing.items() if n} == {
        c: removed_channels.count(c) for c in set(removed_channels)
    }
    extras = {e["hash"]: (e["window"], e["channel"], e["probable_origin"]) for e in doc["extra"]}
    assert extras == {
        "0x" + damage["public"].hash.hex(): (week[0], "unknown", "source source-1"),
        "0x" + damage["fabricated"].hash.hex(): (week[1], TOPIC_CHANNEL[TOPICS[0]], "unknown"),
    }
    [dup] = doc["duplicates"]
    assert (dup["hash"], dup["window"], dup["copies"]) == (
        "0x" + damage["doubled"].hash.hex(),
        week[3],
        2,
    )
    assert by_start[week[3]]["channels"] == [
        {
            "channel": c,
            "both": sum(1 for m in _week(channel, start, 3) if TOPIC_CHANNEL[m.topic] == c),
            "missing": 0,
            "extra": 0,
            "duplicates": int(TOPIC_CHANNEL[damage["doubled"].topic] == c),
            "copies_archived": sum(
                1 for m in _week(channel, start, 3) if TOPIC_CHANNEL[m.topic] == c
            ),
            "copies_missing": 0,
        }
        for c in sorted(COMMUNITY.channels)
    ]
    assert doc["archive_problems"] == []
    sources = {m["hash"]: m["sources"] for m in doc["missing"]}
    assert all(s in (["source-1"], ["source-1", "source-2"]) for s in sources.values())
    assert any(s == ["source-1", "source-2"] for s in sources.values())


def test_cli_json_follows_the_contract_and_exits_1_on_gaps(sample, damaged, capsys) -> None:
    out, _channel, _public, _start = sample
    archive_dir, _damage = damaged
    argv = [
        "audit",
        "--shard",
        "64",
        "--community",
        CID,
        "--archive-dir",
        str(archive_dir / CID),
        *[a for s in _sources(out) for a in ("--source", s)],
        "--quiet",
    ]
    assert main([*argv, "--json"]) == 1
    doc = json.loads(capsys.readouterr().out)
    assert set(doc) == CONTRACT_KEYS
    assert doc["version"] == 2 and doc["community"] == CID
    assert doc["archive_topics"] == "channel"
    assert set(doc["totals"]) == TOTAL_KEYS
    assert all(isinstance(v, int) for v in doc["totals"].values())
    assert set(doc["archives"]) == {"origin", "count", "index_entries"}
    window_keys = {
        "start",
        "end",
        "archive_ids",
        "archive_topics",
        "both",
        "missing",
        "extra",
        "duplicates",
        "copies_archived",
        "copies_missing",
        "channels",
        "problems",
    }
    assert all(set(w) == window_keys for w in doc["windows"])
    assert all(
        set(c)
        == {
            "channel",
            "both",
            "missing",
            "extra",
            "duplicates",
            "copies_archived",
            "copies_missing",
        }
        for w in doc["windows"]
        for c in w["channels"]
    )
    assert all(
        set(m) == {"hash", "message", "window", "channel", "timestamp_ns", "sources"}
        for m in doc["missing"]
    )
    assert all(
        set(e) == {"hash", "message", "window", "channel", "probable_origin"} for e in doc["extra"]
    )
    assert all(
        set(d) == {"hash", "message", "window", "copies", "archive_ids"} for d in doc["duplicates"]
    )
    # the table: totals first, then the worst windows
    assert main(argv) == 1
    table = capsys.readouterr().out
    assert table.splitlines()[0] == f"audit of {CID}: INCOMPLETE"
    assert table.index("totals") < table.index("worst windows")
    assert "no archive for a window with" in table
    assert render_audit_table(doc) == table.rstrip("\n")


def test_leveldb_mailservers_audit_complete(sample, tmp_path, capsys) -> None:
    """The same envelopes held by two LevelDB mailservers (overlapping copies, status-go's DB
    keys) instead of dumps: the clean build audits complete, channels found in the sources."""
    from waku_legacy.migrate.sample import write_leveldb_mailservers

    _out, channel, _public, _start = sample
    envelopes = [*generate_envelopes(SPEC, [COMMUNITY]), *generate_descriptions(SPEC, [COMMUNITY])]
    servers = [tmp_path / "leveldb-1", tmp_path / "leveldb-2"]
    counts = write_leveldb_mailservers(iter(envelopes), servers)
    assert len(envelopes) < sum(counts.values()) < 2 * len(envelopes)
    _clean(tmp_path, sample)
    sources = [a for s in servers for a in ("--source", f"leveldb:{s}")]
    argv = ["audit", "--community", CID, "--archive-dir", str(tmp_path / "archives"), *sources,
            "--shard", "64", "--json", "--quiet"]  # fmt: skip
    assert main(argv) == 0
    document = json.loads(capsys.readouterr().out)
    assert document["complete"] is True
    assert document["totals"]["both"] == document["totals"]["source_messages"] == len(channel)
    assert (document["totals"]["missing"], document["totals"]["extra"]) == (0, 0)


def test_a_relabelled_build_audits_complete_with_its_archive_topics(sample, tmp_path) -> None:
    out, channel, _public, _start = sample
    archive_dir = tmp_path / "archives"
    _clean(tmp_path, sample, "both")
    doc = audit_community(_request(out, archive_dir, tmp_path, archive_topics="both"))
    assert doc["complete"] is True and doc["archive_topics"] == "both"
    # messages, each archived as two copies (issue 34)
    assert doc["totals"]["both"] == doc["totals"]["source_messages"] == len(channel)
    assert doc["totals"]["copies_archived"] == doc["totals"]["copies_expected"] == 2 * len(channel)
    # without a mode the audit reads it from the archives' metadata (issue 22)
    doc = audit_community(_request(out, archive_dir, tmp_path))
    assert (doc["complete"], doc["totals"]["extra"]) == (True, 0)
    assert doc["totals"]["both"] == len(channel)
    # a mode the archives contradict is refused, naming what they say
    for wrong in ("channel", "universal"):
        with pytest.raises(ConfigError, match=r"contradicts the published archives.*'both'"):
            audit_community(_request(out, archive_dir, tmp_path, archive_topics=wrong))


def test_a_corrupted_archive_is_reported(sample, tmp_path) -> None:
    out, _channel, _public, _start = sample
    archive_dir = tmp_path / "archives"
    _clean(tmp_path, sample)
    data = archive_dir / CID / "data"
    with open(data, "r+b") as handle:  # the first archive's first bytes
        handle.write(b"\xff" * 16)
    doc = audit_community(_request(out, archive_dir, tmp_path))
    assert doc["totals"]["bad_archives"] == 1
    [problem] = doc["archive_problems"]
    assert problem["problem"].startswith("does not decode")
    assert doc["totals"]["missing"] == doc["windows"][0]["missing"] > 0
    assert doc["complete"] is False


def test_errors_exit_2(tmp_path, capsys) -> None:
    assert (
        main(
            [
                "audit",
                "--shard",
                "64",
                "--community",
                CID,
                "--source",
                f"dump:{tmp_path}/x.dump",
                "--channel",
                COMMUNITY.channels[0],
                "--quiet",
            ]
        )
        == 2
    )
    assert "exactly one of --magnet, --torrent or --archive-dir" in capsys.readouterr().err
    assert os.listdir(tmp_path) == []


def test_no_shard_is_guessed(sample, tmp_path, capsys) -> None:
    """Issue 24: audit's --shard defaulted to 64, where no community lives, and the message
    hashes it compares depend on the shard. Without --shard and without a shard in the
    community's newest signed description it refuses in one line, before any fetch."""
    out, _channel, _public, _start = sample
    base = ["audit", "--community", CID, "--archive-dir", str(tmp_path / "archives"), "--quiet",
            *[a for s in _sources(out) for a in ("--source", s)]]  # fmt: skip
    assert main(base) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "no --shard (its newest signed description names none)" in err
    assert "give --shard N" in err
    assert main([*base, "--channel", COMMUNITY.channels[0]]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "audit: no --shard: give --shard N" in err
    assert not (tmp_path / "archives").exists()


def test_the_shard_from_the_description_is_said(tmp_path, capsys) -> None:
    """A description that names its shard (relay_shard_index) gives audit its shard, with a
    warning saying so."""
    community = COMMUNITY
    chat = community.id.chat_id
    data = encode_payload(
        description_message(community, community.channels, SPEC.start * 1000, shard=130),
        sign_with=generate_private_key(), symmetric_key=symmetric_key_for_chat(chat),
    )  # fmt: skip
    with DumpWriter(tmp_path / "d.dump") as writer:
        writer.append(seal(SPEC.start + 10, 10, chat_topic(chat), data, 0.0).encode())
    (tmp_path / "archives").mkdir()
    argv = ["audit", "--community", CID, "--archive-dir", str(tmp_path / "archives"),
            "--source", f"dump:{tmp_path / 'd.dump'}", "--json", "--quiet"]  # fmt: skip
    assert main(argv) == 0
    captured = capsys.readouterr()
    assert (
        f"audit: warning: no --shard: using shard 130, the relay_shard_index of {CID}'s "
        f"description with clock {SPEC.start * 1000}" in captured.err
    )
    assert json.loads(captured.out)["complete"] is True


@pytest.mark.torrent
@pytest.mark.timeout(90)
def test_audit_fetches_by_torrent_and_magnet_as_a_member(sample, tmp_path, capsys) -> None:
    from waku_legacy.archive import Seeder, SessionConfig

    out, channel, _public, _start = sample
    report = _clean(tmp_path, sample)
    assert report.torrent_path and report.magnet_uri
    loopback = SessionConfig(listen="127.0.0.1:0", trackers=False, utp=False)
    with Seeder(tmp_path / "archives", loopback) as seeder:
        seeder.refresh(tmp_path / "torrents")
        common = [
            "audit", "--community", CID, *[a for s in _sources(out) for a in ("--source", s)],
            "--shard", "64",
            "--peer", f"127.0.0.1:{seeder.listen_port}", "--listen", "127.0.0.1:0",
            "--no-trackers", "--no-utp", "--metadata-timeout", "10", "--timeout", "20",
            "--quiet", "--json",
        ]  # fmt: skip
        for given in (["--torrent", report.torrent_path], ["--magnet", report.magnet_uri]):
            assert main([*common, *given, "--save-dir", str(tmp_path / given[0][2:])]) == 0
            doc = json.loads(capsys.readouterr().out)
            assert doc["complete"] and doc["totals"]["both"] == len(channel)
            assert doc["archives"] == {"origin": given[1], "count": 4, "index_entries": 4}


def test_html_report(sample, damaged, tmp_path, capsys) -> None:
    out, _channel, _public, _start = sample
    archive_dir, _damage = damaged
    html = tmp_path / "audit.html"
    argv = ["audit", "--community", CID, "--archive-dir", str(archive_dir), "--quiet",
            "--shard", "64",
            *[a for s in _sources(out) for a in ("--source", s)], "--html", str(html)]  # fmt: skip
    assert main(argv) == 1
    capsys.readouterr()
    page = html.read_text(encoding="utf-8")
    assert "<svg" in page and CID in page


def test_an_extra_message_the_store_holds_is_live_v2_traffic(sample, tmp_path) -> None:
    from waku_legacy.identity.message_hash import deterministic_hash
    from waku_legacy.identity.topics import v1_topic_to_content_topic
    from waku_legacy.store import open_store
    from waku_legacy.store.types import StoredMessage

    out, channel, _public, start = sample
    content_topic = v1_topic_to_content_topic(TOPICS[1])
    timestamp = channel[4].timestamp
    live_hash = deterministic_hash(
        "/waku/2/rs/16/64", b"live", content_topic, b"", timestamp * 10**9
    )
    url = f"sqlite:{tmp_path / 'store.sqlite3'}"
    with open_store(url) as store:
        row = StoredMessage(
            live_hash, "/waku/2/rs/16/64", content_topic, b"live", 1, timestamp * 10**9
        )
        store.insert_messages([row])
    live = ArchiveMessage(timestamp, live_hash, TOPICS[1], b"live")
    archive_dir = tmp_path / "archives"
    build_community_archives(
        archive_dir, tmp_path / "torrents", CID, TOPICS, [*channel, live],
        now=start + 4 * WEEK_SECONDS, archive_topics="channel",
    )  # fmt: skip
    doc = audit_community(_request(out, archive_dir, tmp_path, store_url=url))
    assert doc["extra"] == [
        {"hash": "0x" + live_hash.hex(), "message": "0x" + live_hash.hex(), "window": start,
         "channel": TOPIC_CHANNEL[TOPICS[1]], "probable_origin": "live v2 traffic"}
    ]  # fmt: skip
    assert doc["complete"] is True


@pytest.mark.torrent
@pytest.mark.timeout(90)
def test_a_fetched_archive_that_does_not_decode_is_reported(sample, tmp_path, capsys) -> None:
    """The member's fetch stops at it; the audit reports it and audits the rest."""
    from waku_legacy.archive import Seeder, SessionConfig
    from waku_legacy.archive.torrent import build_torrent

    out, _channel, _public, _start = sample
    _clean(tmp_path, sample)
    with open(tmp_path / "archives" / CID / "data", "r+b") as handle:
        handle.write(b"\xff" * 16)  # the first archive's first bytes
    torrent = build_torrent(tmp_path / "archives", tmp_path / "torrents", CID)
    loopback = SessionConfig(listen="127.0.0.1:0", trackers=False, utp=False)
    with Seeder(tmp_path / "archives", loopback) as seeder:
        seeder.refresh(tmp_path / "torrents")
        argv = [
            "audit", "--community", CID, *[a for s in _sources(out) for a in ("--source", s)],
            "--shard", "64",
            "--torrent", str(torrent.path), "--peer", f"127.0.0.1:{seeder.listen_port}",
            "--listen", "127.0.0.1:0", "--no-trackers", "--no-utp", "--metadata-timeout", "10",
            "--timeout", "20", "--quiet", "--json",
        ]  # fmt: skip
        assert main(argv) == 1
    doc = json.loads(capsys.readouterr().out)
    assert doc["totals"]["bad_archives"] == 1 and doc["archives"]["count"] == 4
    assert doc["archive_problems"][0]["problem"].startswith("does not decode")
    assert doc["totals"]["missing"] == doc["windows"][0]["missing"] > 0


def test_overlapping_window_and_a_message_outside_its_window(sample, tmp_path) -> None:
    """Archives appended after a clean build: one whose window overlaps the one appended
    before it, one holding a message outside its own window. Both are bad, nothing else."""
    out, channel, _public, start = sample
    _clean(tmp_path, sample)
    archive_dir = tmp_path / "archives"
    day, later = 86_400, start + 4 * WEEK_SECONDS
    # one append: only the first must start after the last end, so the second overlaps it
    first = EncodedArchive.build(later, later + WEEK_SECONDS, TOPICS, [])
    overlapping = EncodedArchive.build(later + day, later + day + WEEK_SECONDS, TOPICS, [])
    far = later + 3 * WEEK_SECONDS
    outside = EncodedArchive.build(far, far + WEEK_SECONDS, TOPICS, [channel[0]])
    added = append_archives(archive_dir, CID, [first, overlapping, outside]).archive_ids
    doc = audit_community(_request(out, archive_dir, tmp_path))
    problems = {p["archive_id"]: p["problem"] for p in doc["archive_problems"]}
    assert set(problems) == set(added[1:])
    assert sorted(problems.values()) == [
        f"message at {channel[0].timestamp} is outside its window",
        f"window {later + day}..{later + day + WEEK_SECONDS} overlaps an earlier archive's "
        f"{later}..{later + WEEK_SECONDS}",
    ]
    totals = doc["totals"]
    # the message outside its window is also in the first week's archive: twice archived
    assert (totals["bad_archives"], totals["missing"], totals["extra"]) == (2, 0, 0)
    assert [(d["hash"], d["copies"]) for d in doc["duplicates"]] == [
        ("0x" + channel[0].hash.hex(), 2)
    ]
    assert doc["complete"] is False


def test_an_index_that_breaks_the_rules_is_reported(sample, tmp_path) -> None:
    out, channel, _public, _start = sample
    _clean(tmp_path, sample)
    index = tmp_path / "archives" / CID / "index"
    raw = bytearray(index.read_bytes())
    raw[-1] ^= 1  # an entry's metadata no longer hashes to its key
    index.write_bytes(bytes(raw))
    # the index does not read, so the archives cannot say their mode: the flag does
    doc = audit_community(_request(out, tmp_path / "archives", tmp_path, archive_topics="channel"))
    [problem] = doc["archive_problems"]
    assert problem["archive_id"] == "index"
    assert doc["totals"]["missing"] == len(channel) and doc["totals"]["bad_archives"] == 1
