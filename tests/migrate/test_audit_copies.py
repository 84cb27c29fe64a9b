"""The audit counts messages, not copies (issue 34), in each archive-topics mode.

The archives are written here by hand, copy by copy, from the sample community's channel
messages (those of ``test_audit``'s sources): in "channel" each message on its channel
topic, in "universal" on the community's ``-memberUpdate`` topic with its own hash, in "both"
the two, the second with ``keccak256(hash || memberUpdate topic)`` (pycryptodome, not the
package's keccak). Then chosen damage: every seventh message left out entirely (missing),
in "both" every fifth of the rest archived on its channel topic only (a missing copy of a
message that is archived), and one copy held twice. Every expected count is derived from
those choices, never from the audit's output.
"""

from __future__ import annotations

import json

import pytest

from tests.helpers import reference_keccak256
from tests.migrate.test_audit import (
    CID,
    TOPICS,
    _request,
    _sources,
    _week,
    sample,  # noqa: F401  (the fixture)
)
from waku_legacy.archive import ArchiveMessage, EncodedArchive, append_archives
from waku_legacy.archive.partition import WEEK_SECONDS
from waku_legacy.cli import main
from waku_legacy.migrate.audit.run import audit_community

MEMBER_UPDATE = reference_keccak256(f"{CID}-memberUpdate".encode())[:4]
MODES = ("channel", "universal", "both")


def _on_member_update(message: ArchiveMessage, digest: bytes) -> ArchiveMessage:
    return ArchiveMessage(
        message.timestamp, digest, MEMBER_UPDATE, message.payload, message.sig, message.padding
    )


def _copies(message: ArchiveMessage, mode: str) -> list[ArchiveMessage]:
    """The copies of one channel message in ``mode``, built by hand (docs/compat/
    archive-topics.md)."""
    relabelled = reference_keccak256(message.hash + MEMBER_UPDATE)
    return {
        "channel": [message],
        "universal": [_on_member_update(message, message.hash)],
        "both": [message, _on_member_update(message, relabelled)],
    }[mode]


def _metadata_topics(mode: str) -> tuple[bytes, ...]:
    return {"channel": TOPICS, "universal": (MEMBER_UPDATE,), "both": (*TOPICS, MEMBER_UPDATE)}[
        mode
    ]


def _damaged(tmp_path, channel, start, mode, modes=None):
    """Four weekly archives in ``mode`` (or week k in ``modes[k]``) with the damage the
    module docstring lists; what was done, by message."""
    modes = modes or [mode] * 4
    missing = {m.hash for m in channel[::7]}
    rest = [m for m in channel if m.hash not in missing]
    half = {m.hash for m in rest[::5]} if mode == "both" else set()
    doubled = rest[3]  # its first copy is held twice, in its week's archive
    encoded = []
    for k, mode in enumerate(modes):
        week = _week(channel, start, k)
        copies = []
        for message in week:
            if message.hash in missing:
                continue
            kept = _copies(message, mode)
            copies += kept[:1] if message.hash in half else kept
            if message is doubled:
                copies.append(kept[0])
        copies.sort(key=lambda m: (m.timestamp, m.hash))
        w = start + k * WEEK_SECONDS
        encoded.append(EncodedArchive.build(w, w + WEEK_SECONDS, _metadata_topics(mode), copies))
    append_archives(tmp_path / "archives", CID, encoded)
    return missing, half, doubled


@pytest.mark.parametrize("mode", MODES)
def test_counts_are_messages_and_copies_are_counted_apart(sample, tmp_path, mode) -> None:  # noqa: F811
    out, channel, _public, start = sample
    missing, half, doubled = _damaged(tmp_path, channel, start, mode)
    per_message = len(_copies(channel[0], mode))  # 1, 1, 2
    n, gone = len(channel), len(missing)
    doc = audit_community(_request(out, tmp_path / "archives", tmp_path))
    assert doc["version"] == 2 and doc["archive_topics"] == mode
    assert doc["totals"] == {
        "source_messages": n,
        "archived_messages": n - gone,
        "both": n - gone,
        "missing": gone,
        "extra": 0,
        "duplicates": 1,
        "copies_expected": per_message * n,
        "copies_archived": per_message * (n - gone) - len(half),
        "copies_missing": per_message * gone + len(half),
        "copies_extra": 0,
        "copies_duplicated": 1,
        "windows": 4,
        "windows_without_archive": 0,
        "bad_archives": 0,
    }
    assert doc["complete"] is False
    # per window: the missing messages of its week, and their copies
    for window in doc["windows"]:
        week = _week(channel, window["start"], 0)
        assert window["archive_topics"] == mode
        assert window["missing"] == sum(m.hash in missing for m in week)
        assert window["copies_missing"] == per_message * window["missing"] + sum(
            m.hash in half for m in week
        )
        assert window["both"] == len(week) - window["missing"]
    # the lists name copies, each with its message
    listed = {(item["message"], item["hash"]) for item in doc["missing"]}
    want = {("0x" + m.hash.hex(), "0x" + c.hash.hex())
            for m in channel if m.hash in missing for c in _copies(m, mode)}  # fmt: skip
    want |= {("0x" + m.hash.hex(), "0x" + _copies(m, mode)[1].hash.hex())
             for m in channel if m.hash in half}  # fmt: skip
    assert listed == want
    [dup] = doc["duplicates"]
    assert dup["message"] == "0x" + doubled.hash.hex() and dup["copies"] == 2


def test_the_300_82_case_reads_300_and_82(sample, tmp_path, capsys) -> None:  # noqa: F811
    """The issue's reading, with this sample's numbers: in "both" the table and the JSON
    say the community's messages and the missing ones, and call the copies copies."""
    out, channel, _public, start = sample
    missing, _half, _doubled = _damaged(tmp_path, channel, start, "both")
    argv = ["audit", "--community", CID, "--archive-dir", str(tmp_path / "archives"),
            "--shard", "64", "--quiet",
            *[a for s in _sources(out) for a in ("--source", s)]]  # fmt: skip
    assert main([*argv, "--json"]) == 1
    totals = json.loads(capsys.readouterr().out)["totals"]
    assert (totals["source_messages"], totals["missing"]) == (len(channel), len(missing))
    assert main(argv) == 1
    table = capsys.readouterr().out
    assert "archive topics: both; counts are messages" in table
    assert f"  {'source messages':<24}{len(channel):>10}" in table
    assert f"  {'missing':<24}{len(missing):>10}" in table
    assert f"  {'copies expected':<24}{2 * len(channel):>10}" in table


def test_windows_written_in_different_modes_read_mixed(sample, tmp_path) -> None:  # noqa: F811
    """Two weeks archived as before issue 12 ("channel"), two since ("both"): each window is
    audited in its own mode, and the report says "mixed"."""
    out, channel, _public, start = sample
    modes = ["channel", "channel", "both", "both"]
    missing, _half, _doubled = _damaged(tmp_path, channel, start, "channel", modes)
    doc = audit_community(_request(out, tmp_path / "archives", tmp_path))
    assert doc["archive_topics"] == "mixed" and doc["complete"] is False
    assert [w["archive_topics"] for w in doc["windows"]] == modes
    per_week = [len(_copies(channel[0], mode)) for mode in modes]
    weeks = [_week(channel, start, k) for k in range(4)]
    totals = doc["totals"]
    assert (totals["source_messages"], totals["missing"]) == (len(channel), len(missing))
    assert totals["copies_expected"] == sum(
        n * len(w) for n, w in zip(per_week, weeks, strict=True)
    )
    assert totals["copies_missing"] == sum(
        n * sum(m.hash in missing for m in w) for n, w in zip(per_week, weeks, strict=True)
    )
