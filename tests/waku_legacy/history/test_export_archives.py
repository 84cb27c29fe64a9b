"""``history export`` from the archives alone, as a member holding only the published files
would run it: the sample community's signed messages archived with the project's builder
(``archive_topics = "both"``: every message twice), its descriptions (the demo's: members, an
admin, one banned) in an envelope dump given as ``--source``.

Expected values come from the envelopes themselves (each message's payload signer and text,
read here with the channel keys) and status-go's rules: one message per original (the
``-memberUpdate`` copy is the same message), the banned member's messages hidden unless
``--show-banned``, channel names from the newest description."""

from __future__ import annotations

import csv
import json
from collections import Counter
from pathlib import Path

import coincurve
import pytest

from tests.helpers import reference_keccak256
from waku_legacy.archive.build import build_community_archives
from waku_legacy.cli import main
from waku_legacy.crypto.payload import decode_payload
from waku_legacy.identity.topics import chat_topic, symmetric_key_for_chat
from waku_legacy.mailserver_compat.storage.dump import DumpWriter
from waku_legacy.mailserver_compat.wire.convert import archive_message
from waku_legacy.mailserver_compat.wire.envelope import Envelope
from waku_legacy.migrate.sample import (
    SampleSpec,
    generate_descriptions,
    generate_envelopes,
    make_communities,
    sample_members,
)

SPEC = SampleSpec(communities=1, channels=2, members=4, days=16, messages_per_channel_day=2.0,
                  public_per_day=0.0)  # fmt: skip
COMMUNITY = make_communities(SPEC)[0]
CID = str(COMMUNITY.id)
WEEK = 7 * 86_400
# 17 days after the sample's start: the messages' 16 days are archived in three windows, the
# last clamped to now (status-go's rule), shorter than a week
NOW = SPEC.start + 17 * 86_400
UNIVERSAL = reference_keccak256(f"{CID}-memberUpdate".encode())[:4]


@pytest.fixture(scope="module")
def published(tmp_path_factory: pytest.TempPathFactory) -> dict:
    tmp = tmp_path_factory.mktemp("history-archives")
    channels = {chat_topic(COMMUNITY.id.channel_chat_id(c)): c for c in COMMUNITY.channels}
    messages, per_channel, times = [], Counter(), {}
    authors: dict[str, Counter[str]] = {c: Counter() for c in COMMUNITY.channels}
    for raw in generate_envelopes(SPEC, [COMMUNITY]):
        envelope = Envelope.decode(raw)
        channel = channels[envelope.topic]
        chat = COMMUNITY.id.channel_chat_id(channel)
        decoded = decode_payload(envelope.data, symmetric_key=symmetric_key_for_chat(chat))
        messages.append(archive_message(
            message_hash=reference_keccak256(raw), topic=envelope.topic,
            timestamp=envelope.expiry - envelope.ttl, decoded=decoded,
        ))  # fmt: skip
        per_channel[channel] += 1
        # the message's two copies: the channel one and, in "both", the -memberUpdate one,
        # hashed keccak256(original || that 4-byte topic) (archive/topics.py's rule)
        original = reference_keccak256(raw)
        for copy in (original, reference_keccak256(original + UNIVERSAL)):
            times["0x" + copy.hex()] = envelope.expiry - envelope.ttl
        authors[channel]["0x" + decoded.signer.hex()] += 1
    dump = tmp / "sources.dump"
    with DumpWriter(dump) as writer:
        for raw in generate_descriptions(SPEC, [COMMUNITY], shards=True, members=True):
            writer.append(raw)
    build_community_archives(
        tmp / "archives", tmp / "torrents", CID, sorted(channels), messages,
        now=NOW, community_key=coincurve.PrivateKey(COMMUNITY.secret),
        clock_ms=1_900_000_000_000, fsync=False, archive_topics="both",
    )  # fmt: skip
    return {"tmp": tmp, "dump": dump, "per_channel": per_channel, "authors": authors,
            "times": times}  # fmt: skip


def _export(p: dict, fmt: str, out: Path, *extra: str) -> None:
    argv = ["history", "export", "--community", CID, "--archive-dir", str(p["tmp"] / "archives"),
            "--source", f"dump:{p['dump']}", "--format", fmt, "--out", str(out), "--quiet",
            *extra]  # fmt: skip
    assert main(argv) == 0


def test_every_archived_message_once_and_the_banned_hidden(published, tmp_path, capsys):
    banned = sample_members(SPEC)[-1]
    out = tmp_path / "csv"
    _export(published, "csv", out)
    summary = json.loads(capsys.readouterr().out)
    names = {"general": COMMUNITY.channels[0], "dev": COMMUNITY.channels[1]}
    assert sorted(p.name for p in out.iterdir()) == sorted(
        f"{name}-{uuid[:8]}.csv" for name, uuid in names.items()
    )
    total_shown = 0
    for name, uuid in names.items():
        with (out / f"{name}-{uuid[:8]}.csv").open(newline="", encoding="utf-8") as handle:
            rows = list(csv.DictReader(handle))
        expected = published["per_channel"][uuid] - published["authors"][uuid][banned]
        assert len(rows) == expected and expected > 0
        assert banned not in {r["author_key"] for r in rows}
        assert {r["author_key"] for r in rows} <= set(sample_members(SPEC))
        assert all(r["channel"] == name and r["content_type"] == "text" for r in rows)
        # provenance: the archive window each message sits in, as the index names it, and
        # the signer recovered from the archived message
        assert all(r["signer"] == r["author_key"] for r in rows)
        assert [r["archive_window"] for r in rows] == [
            _window(published, r["waku_hash"]) for r in rows
        ]
        assert [r["timestamp_ms"] for r in rows] == sorted(r["timestamp_ms"] for r in rows)
        total_shown += len(rows)
    assert summary["messages"] == total_shown


def _window(published: dict, waku_hash: str) -> str:
    """Hand-derived from status-go's partition: 7-day windows from the oldest archived
    message, the last one ending at the run's now."""
    oldest = min(published["times"].values())
    start = oldest + (published["times"][waku_hash] - oldest) // WEEK * WEEK
    return f"{start}-{min(start + WEEK, NOW)}"


def test_show_banned_and_a_static_site(published, tmp_path, capsys):
    banned = sample_members(SPEC)[-1]
    out = tmp_path / "jsonl"
    _export(published, "jsonl", out, "--show-banned", "--channel", "general")
    (written,) = list(out.iterdir())
    entries = [json.loads(line) for line in written.open()]
    general = COMMUNITY.channels[0]
    assert len(entries) == published["per_channel"][general]
    assert (
        sum(e["author"]["public_key"] == banned for e in entries)
        == (published["authors"][general][banned])
    )
    capsys.readouterr()
    site = tmp_path / "site"
    _export(published, "html", site)
    index = (site / "index.html").read_text()
    assert "Status Builders" in index and ">general<" in index and ">dev<" in index
    assert len(list((site / general).glob("20*.html"))) > 0
