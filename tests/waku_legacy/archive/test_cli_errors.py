"""``waku-legacy archive …`` / ``fetch`` / ``seed`` given the wrong things: exit 2 and one line
on stderr that names the path and what is wrong, never a traceback (issue 10, low items).
Also: ``archive verify`` says exactly what it verified, and catches flipped bytes without a
torrent wherever they can be caught."""

from __future__ import annotations

import json
import random
import subprocess
import sys
from pathlib import Path

import pytest

from tests.waku_legacy.archive.test_cli import CHANNEL, COMMUNITY, T0, W, write_input
from waku_legacy.archive.bencode import bencode
from waku_legacy.archive.data_files import read_index
from waku_legacy.archive.encode import PIECE_LENGTH
from waku_legacy.cli import main

WAKU_LEGACY = Path(sys.executable).with_name("waku-legacy")


def cli(*argv: str) -> subprocess.CompletedProcess[str]:
    """The installed command, as an operator runs it."""
    return subprocess.run([str(WAKU_LEGACY), *argv], capture_output=True, text=True, timeout=120)


def error_line(code: int, err: str) -> str:
    assert code == 2, err
    assert "Traceback" not in err, err
    lines = [line for line in err.splitlines() if "error" in line]
    assert len(lines) == 1, err
    return lines[0]


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def _build(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> list[str]:
    tmp_path.mkdir(parents=True, exist_ok=True)
    write_input(tmp_path / "in.jsonl")
    common = ["--archive-dir", str(tmp_path / "a"), "--community", str(COMMUNITY)]
    code, _, err = run(
        capsys, "archive", "build", *common, "--torrent-dir", str(tmp_path / "t"),
        "--channel", CHANNEL, "--input", str(tmp_path / "in.jsonl"), "--now", str(T0 + 3 * W),
        "--quiet",
    )  # fmt: skip
    assert code == 0, err
    return common


def test_archive_dir_that_is_a_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "in.jsonl").write_text("")
    afile = tmp_path / "afile"
    afile.write_text("not a directory")
    common = ["--archive-dir", str(afile), "--community", str(COMMUNITY)]
    done = cli("archive", "build", *common, "--torrent-dir", str(tmp_path / "t"),
               "--topic", "0x01020304", "--input", str(tmp_path / "in.jsonl"))  # fmt: skip
    line = error_line(done.returncode, done.stderr)
    assert f"archive directory {afile} is a file, not a directory" in line
    for command in ("inspect", "verify"):
        line = error_line(*run(capsys, "archive", command, *common)[::2])
        assert f"{afile} is a file, not a directory" in line
    # the torrent directory too
    good = ["--archive-dir", str(tmp_path / "a"), "--community", str(COMMUNITY)]
    line = error_line(*run(capsys, "archive", "build", *good, "--torrent-dir", str(afile),
                           "--topic", "0x01020304", "--input", str(tmp_path / "in.jsonl"),
                           "--quiet")[::2])  # fmt: skip
    assert f"torrent directory {afile} is a file" in line


def test_index_that_is_a_directory(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    common = _build(tmp_path, capsys)
    index = tmp_path / "a" / str(COMMUNITY) / "index"
    index.unlink()
    index.mkdir()
    for command in ("inspect", "verify"):
        line = error_line(*run(capsys, "archive", command, *common)[::2])
        assert f"{index} is a directory; it must be a file" in line
    done = cli("archive", "build", *common, "--torrent-dir", str(tmp_path / "t"),
               "--channel", CHANNEL, "--input", str(tmp_path / "in.jsonl"))  # fmt: skip
    assert f"{index} is a directory" in error_line(done.returncode, done.stderr)
    # read_index (what the bridge calls) says the same
    from waku_legacy.archive.errors import ArchiveError

    with pytest.raises(ArchiveError, match="is a directory"):
        read_index(tmp_path / "a", COMMUNITY)


def test_inspect_and_verify_of_a_missing_directory_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "nowhere"
    for command in ("inspect", "verify"):
        done = cli("archive", command, "--archive-dir", str(missing), "--community",
                   str(COMMUNITY))  # fmt: skip
        assert f"archive directory {missing} does not exist" in error_line(
            done.returncode, done.stderr
        )
    # the directory exists, the community has no folder in it
    (tmp_path / "empty").mkdir()
    line = error_line(*run(capsys, "archive", "inspect", "--archive-dir", str(tmp_path / "empty"),
                           "--community", str(COMMUNITY))[::2])  # fmt: skip
    assert f"no archives of {COMMUNITY}" in line


def test_missing_and_hostile_torrent_files(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    fetch = ["fetch", "--community", str(COMMUNITY), "--save-dir", str(tmp_path / "save"),
             "--quiet", "--metadata-timeout", "1", "--timeout", "2"]  # fmt: skip
    done = cli(*fetch, "--torrent", str(tmp_path / "missing.torrent"))
    line = error_line(done.returncode, done.stderr)
    assert f"torrent: {tmp_path / 'missing.torrent'} does not exist" in line
    line = error_line(*run(capsys, *fetch, "--torrent", str(tmp_path))[::2])
    assert "is a directory" in line

    negative = tmp_path / "negative.torrent"
    negative.write_bytes(bencode({"info": {
        "name": str(COMMUNITY), "piece length": PIECE_LENGTH, "pieces": b"\0" * 20,
        "files": [{"length": -100, "path": ["data"]}, {"length": 300, "path": ["index"]}],
    }}))  # fmt: skip
    done = cli(*fetch, "--torrent", str(negative))
    assert "files[0] length -100 is negative" in error_line(done.returncode, done.stderr)
    # the same torrent where inspect and verify read it
    common = _build(tmp_path / "store", capsys)
    torrent_dir = tmp_path / "store" / "t"
    (torrent_dir / f"{COMMUNITY}.torrent").write_bytes(negative.read_bytes())
    for command in ("inspect", "verify"):
        line = error_line(*run(capsys, "archive", command, *common, "--torrent-dir",
                               str(torrent_dir))[::2])  # fmt: skip
        assert "is negative" in line
    # verify asked to check a torrent that is not there
    (torrent_dir / f"{COMMUNITY}.torrent").unlink()
    line = error_line(*run(capsys, "archive", "verify", *common, "--torrent-dir",
                           str(torrent_dir))[::2])  # fmt: skip
    assert "no torrent to check" in line


def test_seed_with_missing_directories_exit_2(tmp_path: Path, capsys) -> None:
    line = error_line(*run(capsys, "seed", "--archive-dir", str(tmp_path / "no"),
                           "--torrent-dir", str(tmp_path), "--once")[::2])  # fmt: skip
    assert "does not exist" in line


def _flip(data: Path, spans: list[tuple[int, int]], count: int, seed: int) -> None:
    raw = bytearray(data.read_bytes())
    rng = random.Random(seed)
    for _ in range(count):
        low, high = rng.choice(spans)
        raw[rng.randrange(low, high)] ^= 1 << rng.randrange(8)
    data.write_bytes(bytes(raw))


def test_verify_without_torrent_catches_flipped_bytes_and_says_what_it_checked(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    common = _build(tmp_path, capsys)
    code, out, err = run(capsys, "archive", "verify", *common, "--json")
    assert code == 0, err
    doc = json.loads(out)
    assert doc["digestsChecked"] == doc["archives"] == 3
    assert any("match the SHA-256 recorded" in c for c in doc["checked"])
    assert any("padding is zeros" in c for c in doc["checked"])
    assert doc["notChecked"] == ["the torrent (no --torrent-dir given)"]
    code, out, _ = run(capsys, "archive", "verify", *common)
    assert "NOT checked: the torrent" in out and "checked: 3 archives decode" in out

    data = tmp_path / "a" / str(COMMUNITY) / "data"
    original = data.read_bytes()
    entries = read_index(tmp_path / "a", COMMUNITY).entries
    everywhere = [(0, len(original))]
    archives_only = [(e.offset, e.offset + e.archive_length) for e in entries]
    for seed in range(10):  # 50 flipped bits anywhere, or only inside archive bytes
        for spans in (everywhere, archives_only):
            _flip(data, spans, 50, seed)
            code, _, err = run(capsys, "archive", "verify", *common)
            assert code == 2 and "Traceback" not in err, (seed, spans)
            data.write_bytes(original)

    # a store written before digests were recorded: without the torrent, what is left
    # unverified is said, not claimed
    digests = tmp_path / "a" / f".{COMMUNITY}.digests.json"
    digests.unlink()
    code, out, _ = run(capsys, "archive", "verify", *common, "--json")
    doc = json.loads(out)
    assert code == 0 and doc["digestsChecked"] == 0
    assert any("3 archive(s) with no recorded SHA-256" in n for n in doc["notChecked"])
    # ... and the structural checks still catch what they can (here a padding byte)
    _flip(data, [(entries[0].offset + entries[0].archive_length, entries[1].offset)], 1, 0)
    line = error_line(*run(capsys, "archive", "verify", *common)[::2])
    assert "padding" in line


def test_fetch_inputs_of_the_wrong_kind(tmp_path: Path, capsys) -> None:
    afile = tmp_path / "afile"
    afile.write_text("x")
    fetch = ["fetch", "--community", str(COMMUNITY), "--quiet", "--torrent", str(afile)]
    line = error_line(*run(capsys, *fetch, "--save-dir", str(afile))[::2])
    assert f"save directory {afile} is a file, not a directory" in line
    save = ["--save-dir", str(tmp_path / "save")]
    line = error_line(*run(capsys, *fetch, *save, "--record", str(tmp_path))[::2])
    assert f"fetch record: {tmp_path} is a directory" in line
    message = ["fetch", "--community", str(COMMUNITY), "--quiet", *save]
    line = error_line(*run(capsys, *message, "--magnet-message", str(tmp_path))[::2])
    assert f"--magnet-message: {tmp_path} is a directory" in line
    state = tmp_path / "a" / f".{COMMUNITY}.state.json"
    common = _build(tmp_path, capsys)
    state.unlink()
    state.mkdir()
    line = error_line(*run(capsys, "archive", "build", *common, "--torrent-dir",
                           str(tmp_path / "t"), "--channel", CHANNEL, "--input",
                           str(tmp_path / "in.jsonl"), "--quiet")[::2])  # fmt: skip
    assert f"cannot read {state}" in line
