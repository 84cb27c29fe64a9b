"""``waku-legacy archive build|inspect|verify``, ``seed`` and ``fetch`` through the entry point."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from waku_legacy.archive import WEEK_SECONDS, ArchiveMessage, Seeder, SessionConfig
from waku_legacy.cli import main
from waku_legacy.crypto.secp256k1 import private_key_from_bytes
from waku_legacy.identity.topics import CommunityId, chat_topic

KEY_HEX = "77" * 32
KEY = private_key_from_bytes(bytes.fromhex(KEY_HEX))
COMMUNITY = CommunityId(KEY.public_key.format(compressed=True))
CHANNEL = "8bd2ad4c-5a1e-4f0a-9f5d-3a1c2b4d5e6f"
T0 = 1_670_000_000
W = WEEK_SECONDS


def write_input(path: Path, weeks: int = 3) -> list[ArchiveMessage]:
    topic = chat_topic(COMMUNITY.channel_chat_id(CHANNEL))
    messages = [
        ArchiveMessage(
            timestamp=T0 + i * 3600 * 12,
            hash=hashlib.sha256(str(i).encode()).digest(),
            topic=topic,
            payload=f"message {i}".encode() * 50,
            sig=b"\x04" + bytes(64),
        )
        for i in range(weeks * 14)
    ]
    path.write_text("".join(json.dumps(m.to_json()) + "\n" for m in messages))
    return messages


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_build_inspect_verify(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    messages = write_input(tmp_path / "in.jsonl")
    (tmp_path / "key").write_text(KEY_HEX + "\n")
    common = ["--archive-dir", str(tmp_path / "a"), "--community", str(COMMUNITY)]
    code, out, err = run(
        capsys, "archive", "build", *common, "--torrent-dir", str(tmp_path / "t"),
        "--channel", CHANNEL, "--input", str(tmp_path / "in.jsonl"), "--now", str(T0 + 3 * W),
        "--community-key-file", str(tmp_path / "key"), "--shard", "128", "--json",
    )  # fmt: skip
    assert code == 0, err
    report = json.loads(out)
    # archive_topics "both", the one default (waku_legacy.archive.defaults): two copies each
    assert report["archives_added"] == 3 and report["messages_archived"] == 2 * len(messages)
    assert '"event": "progress"' in err  # not a tty: structured progress lines
    body = json.loads(Path(report["magnet_message_paths"][1]).read_text())
    assert body["path"] == "/relay/v1/messages/%2Fwaku%2F2%2Frs%2F16%2F128"

    code, out, _ = run(capsys, "archive", "inspect", *common, "--torrent-dir", str(tmp_path / "t"),
                       "--json")  # fmt: skip
    inspected = json.loads(out)
    assert code == 0 and len(inspected["archives"]) == 3
    assert inspected["infoHash"] == report["info_hash"] and inspected["tornTail"] == 0

    code, out, _ = run(capsys, "archive", "verify", *common, "--torrent-dir", str(tmp_path / "t"))
    assert code == 0 and out.startswith("ok: 3 archives")

    data = tmp_path / "a" / str(COMMUNITY) / "data"
    raw = bytearray(data.read_bytes())
    raw[10] ^= 0xFF
    data.write_bytes(bytes(raw))
    code, _, err = run(capsys, "archive", "verify", *common, "--torrent-dir", str(tmp_path / "t"))
    assert code == 2 and "error:" in err

    build = [
        "archive",
        "build",
        *common,
        "--torrent-dir",
        str(tmp_path / "t"),
        "--topic",
        "0x01020304",
    ]
    code, _, err = run(capsys, *build, "--input", str(tmp_path / "missing.jsonl"))
    assert code == 2 and "missing.jsonl" in err
    (tmp_path / "bad.jsonl").write_text('{"timestamp": "x"}\n')
    code, _, err = run(capsys, *build, "--input", str(tmp_path / "bad.jsonl"))
    assert code == 2 and "line 1" in err


@pytest.mark.torrent
@pytest.mark.timeout(60)
def test_seed_and_fetch_commands(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    write_input(tmp_path / "in.jsonl")
    (tmp_path / "key").write_text(KEY_HEX)
    code, out, err = run(
        capsys, "archive", "build", "--archive-dir", str(tmp_path / "a"),
        "--torrent-dir", str(tmp_path / "t"), "--community", str(COMMUNITY),
        "--channel", CHANNEL, "--input", str(tmp_path / "in.jsonl"), "--now", str(T0 + 3 * W),
        "--community-key-file", str(tmp_path / "key"), "--json", "--quiet",
        "--archive-topics", "channel",
    )  # fmt: skip
    assert code == 0, err
    report = json.loads(out)

    code, out, err = run(
        capsys, "seed", "--archive-dir", str(tmp_path / "a"), "--torrent-dir", str(tmp_path / "t"),
        "--listen", "127.0.0.1:0", "--no-trackers", "--no-utp", "--once", "--json",
    )  # fmt: skip
    assert code == 0, err
    assert json.loads(out.splitlines()[0])["torrents"][0]["state"] == "seeding"

    loopback = SessionConfig(listen="127.0.0.1:0", trackers=False, utp=False)
    with Seeder(tmp_path / "a", loopback) as seeder:
        seeder.refresh(tmp_path / "t")
        fetch = [
            "fetch", "--community", str(COMMUNITY), "--save-dir", str(tmp_path / "member"),
            "--peer", f"127.0.0.1:{seeder.listen_port}", "--listen", "127.0.0.1:0",
            "--no-trackers", "--no-utp", "--record", str(tmp_path / "record.json"),
            "--quiet", "--json",
            "--metadata-timeout", "10", "--timeout", "20",
        ]  # fmt: skip
        message = report["magnet_message_paths"][0]
        code, out, err = run(capsys, *fetch, "--magnet-message", message, "--latest",
                             "--output", str(tmp_path / "latest.jsonl"))  # fmt: skip
        assert code == 0, err
        first = json.loads(out)
        assert len(first["archives"]) == 1 and first["written"] == 14
        lines = (tmp_path / "latest.jsonl").read_text().splitlines()
        assert json.loads(lines[0])["archiveId"] == first["archives"][0]["id"]

        # the same magnet-link message again: status-go accepts its clock (>= the last one)
        # but ignores a link it has already processed
        code, out, err = run(capsys, *fetch, "--magnet-message", message, "--new")
        assert code == 0, err
        assert "already processed" in json.loads(out)["ignored"]
        # a link with a lower clock than the last accepted one is stale
        from waku_legacy.archive.magnet import build_archive_link_message, verify_magnet_message

        first_clock = verify_magnet_message(Path(message).read_bytes(), COMMUNITY).clock
        older = build_archive_link_message(
            KEY, report["magnet_uri"], first_clock - 1, pubsub_topic="/waku/2/rs/16/200"
        )
        (tmp_path / "older.pb").write_bytes(older.SerializeToString())
        code, _, err = run(capsys, *fetch, "--magnet-message", str(tmp_path / "older.pb"), "--new")
        assert code == 2 and "lower than the last accepted" in err

        code, out, err = run(capsys, *fetch, "--magnet", report["magnet_uri"], "--new",
                             "--sqlite", str(tmp_path / "rest.db"))  # fmt: skip
        assert code == 0, err
        rest = json.loads(out)
        assert len(rest["archives"]) == 2 and rest["written"] == 28
