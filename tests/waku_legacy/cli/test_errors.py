"""Issue 10: `waku-legacy` turns every expected failure into one line on stderr and exit
code 2 (typed errors, unreadable files, input nested too deeply, malformed text); a bug is
an "internal error" with its traceback and exit code 70, never hidden."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from waku_legacy import cli
from waku_legacy.errors import ConfigError

COMMUNITY = "0x02" + "79be667ef9dcbbac55a06295ce870b07029bfcdb2dce28d959f2815b16f81798"
DEEP_JSON = "[" * 100_000 + "]" * 100_000
DEEP_OBJECT = '{"payload": ' * 100_000 + "1" + "}" * 100_000


def _one_line_error(capsys: pytest.CaptureFixture[str], command: str) -> str:
    err = capsys.readouterr().err
    assert err.startswith(f"waku-legacy {command}: error: "), err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    return err


def _run(argv: list[str]) -> int:
    return cli.main(argv)


def test_deeply_nested_json_inputs_exit_2(tmp_path: Path, capsys) -> None:
    """JSON nested past the parser's recursion (RecursionError) in every command that reads
    JSON: `archive build --input` (JSON lines) and `fetch --magnet-message FILE.json`."""
    lines = tmp_path / "deep.jsonl"
    lines.write_text(DEEP_OBJECT + "\n")
    code = _run([
        "archive", "build", "--community", COMMUNITY, "--topic", "0x01020304",
        "--input", str(lines), "--archive-dir", str(tmp_path / "a"),
        "--torrent-dir", str(tmp_path / "t"), "--now", "1700000000",
    ])  # fmt: skip
    assert code == 2
    assert "line 1" in _one_line_error(capsys, "archive")
    message = tmp_path / "deep.json"
    message.write_text(DEEP_JSON)
    code = _run([
        "fetch", "--community", COMMUNITY, "--magnet-message", str(message),
        "--save-dir", str(tmp_path / "s"),
    ])  # fmt: skip
    assert code == 2
    _one_line_error(capsys, "fetch")


def test_deeply_nested_json_line_is_a_typed_error() -> None:
    from waku_legacy.archive.errors import ArchiveDecodeError
    from waku_legacy.archive.message import ArchiveMessage

    with pytest.raises(ArchiveDecodeError, match="line 3"):
        ArchiveMessage.from_json_line(DEEP_OBJECT, line=3)


def test_missing_files_and_directories_exit_2(tmp_path: Path, capsys) -> None:
    """A missing file, or a directory where a file is expected, names the path."""
    directory = tmp_path / "dir.json"
    directory.mkdir()
    cases = [
        (["fetch", "--community", COMMUNITY, "--torrent", str(tmp_path / "missing.torrent"),
          "--save-dir", str(tmp_path / "s")], "fetch", "missing.torrent"),
        (["fetch", "--community", COMMUNITY, "--magnet-message", str(directory),
          "--save-dir", str(tmp_path / "s")], "fetch", "dir.json"),
        (["decode", "archive", str(directory)], "decode", "dir.json"),
        (["decode", "envelope", str(tmp_path / "missing.rlp")], "decode", "missing.rlp"),
        (["migrate", "--config", str(directory)], "migrate", "dir.json"),
        (["serve", "--config", str(tmp_path / "missing.toml"), "--check"], "serve",
         "missing.toml"),
    ]  # fmt: skip
    for argv, command, path in cases:
        assert _run(argv) == 2, argv
        assert path in _one_line_error(capsys, command)


@pytest.mark.timeout(30)
def test_key_files_are_small_regular_files(tmp_path: Path, capsys) -> None:
    """--community-key-file /dev/zero and a v1 node key file /dev/zero: refused, not read."""
    from waku_legacy.crypto.key_file import load_node_key

    code = _run([
        "archive", "build", "--community", COMMUNITY, "--topic", "0x01020304",
        "--input", "/dev/null", "--archive-dir", str(tmp_path / "a"),
        "--torrent-dir", str(tmp_path / "t"), "--now", "1700000000",
        "--community-key-file", "/dev/zero",
    ])  # fmt: skip
    assert code == 2
    assert "not a regular file" in _one_line_error(capsys, "archive")
    with pytest.raises(ConfigError, match="not a regular file"):
        load_node_key("/dev/zero")
    big = tmp_path / "nodekey"
    big.write_text("11" * 32 + " " * 5000)
    with pytest.raises(ConfigError, match="larger than the 4096-byte limit"):
        load_node_key(big)


def _parser_with(func: object) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="waku-legacy")
    sub = parser.add_subparsers(dest="command")
    sub.add_parser("boom").set_defaults(func=func)
    return parser


@pytest.mark.parametrize(
    "exc, fragment",
    [
        (RecursionError("maximum recursion depth exceeded"), "nested too deeply"),
        (IsADirectoryError(21, "Is a directory", "/some/dir"), "/some/dir: Is a directory"),
        (ValueError("bad varint"), "invalid input: bad varint"),
        (UnicodeDecodeError("utf-8", b"\xff", 0, 1, "invalid start byte"), "not utf-8 text"),
        (ConfigError("key 'x' is wrong"), "key 'x' is wrong"),
    ],
)  # fmt: skip
def test_expected_failures_are_one_line(monkeypatch, capsys, exc, fragment) -> None:
    def handler(args: argparse.Namespace) -> int:
        raise exc

    monkeypatch.setattr(cli, "build_parser", lambda: _parser_with(handler))
    assert cli.main(["boom"]) == 2
    assert fragment in _one_line_error(capsys, "boom")


def test_a_bug_is_an_internal_error_with_traceback(monkeypatch, capsys) -> None:
    """An exception nobody expected is not dressed up as bad input: it says "internal
    error", keeps the traceback and exits 70 (EX_SOFTWARE), distinct from 2."""

    def handler(args: argparse.Namespace) -> int:
        return {}["missing"]  # KeyError: a programming error

    monkeypatch.setattr(cli, "build_parser", lambda: _parser_with(handler))
    assert cli.main(["boom"]) == cli.EXIT_INTERNAL == 70
    err = capsys.readouterr().err
    assert err.startswith("waku-legacy boom: internal error")
    assert "KeyError" in err and "Traceback (most recent call last)" in err


@pytest.mark.timeout(30)
def test_v1_pull_state_file_errors_exit_2(tmp_path: Path, capsys) -> None:
    """`v1 pull --state FILE`: a state that is not a JSON object, nested too deeply, not a
    regular file or too large is one line and exit 2 (a list used to be an AttributeError
    traceback; /dev/zero an unbounded read)."""
    from waku_legacy.crypto.secp256k1 import private_key_from_bytes

    public = private_key_from_bytes(b"\x05" * 32).public_key.format(compressed=False)[1:]
    enode = f"enode://{public.hex()}@127.0.0.1:1"
    deep = tmp_path / "deep.json"
    deep.write_text(DEEP_JSON)
    listed = tmp_path / "list.json"
    listed.write_text("[1, 2]")
    for state, fragment in ((listed, "not a JSON object"), (deep, "unreadable"),
                            (Path("/dev/zero"), "not a regular file")):  # fmt: skip
        code = _run([
            "v1", "pull", "--enode", enode, "--from", "0", "--to", "10", "--topics", "01020304",
            "--out", str(tmp_path / "out.dump"), "--state", str(state), "--retries", "0",
        ])  # fmt: skip
        assert code == 2
        assert fragment in _one_line_error(capsys, "v1")


@pytest.mark.parametrize(
    "text, fragment",
    [('{"0x02": [1]}', "JSON object of objects"), (DEEP_JSON, "not JSON"), ("[]", "object")],
)
def test_fetch_record_file_errors_are_typed(tmp_path: Path, text: str, fragment: str) -> None:
    """`fetch --record FILE` holding a community entry that is not an object used to fail
    later with AttributeError; deep JSON with RecursionError."""
    from waku_legacy.archive.output import FetchRecord

    path = tmp_path / "record.json"
    path.write_text(text)
    with pytest.raises(ConfigError, match=fragment):
        FetchRecord(path)


def test_fetch_magnet_without_any_peer_says_so_at_once(tmp_path: Path, capsys) -> None:
    """Issue 24: a magnet link with no x.pe peer, no --peer and nothing to search with
    (trackers off, no DHT) is refused at once with the --peer hint; with trackers left on
    the command says before its wait that it has no peer and how to give one."""
    import time

    magnet = "magnet:?xt=urn:btih:" + "ab" * 20 + "&dn=x"
    argv = ["fetch", "--community", COMMUNITY, "--magnet", magnet,
            "--save-dir", str(tmp_path / "s"), "--metadata-timeout", "1",
            "--metadata-retries", "0"]  # fmt: skip
    started = time.monotonic()
    assert _run([*argv, "--no-trackers"]) == 2
    assert time.monotonic() - started < 5
    assert "--peer HOST:PORT" in _one_line_error(capsys, "fetch")
    tracked = magnet.replace("&dn=x", "&tr=udp%3A%2F%2F127.0.0.1%3A9%2Fannounce&dn=x")
    assert _run([*argv[:4], tracked, *argv[5:], "--quiet"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("waku-legacy fetch: no peer given"), err
    assert err.count("--peer HOST:PORT") == 2, err  # the notice first, the timeout after
