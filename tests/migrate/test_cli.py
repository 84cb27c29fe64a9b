"""The commands: ``demo`` end to end, ``export`` of one community, and a real ``kill -9`` of
``migrate`` in the middle of archiving followed by a rerun that gives the uninterrupted
result. In-process runs share the test session's Spark; the killed run is its own process."""

from __future__ import annotations

import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from tests.migrate.test_pipeline import _archive_files
from waku_legacy.cli import main
from waku_legacy.errors import ConfigError
from waku_legacy.migrate.cli import parse_source_spec

pytestmark = [pytest.mark.spark]

DEMO_ARGS = ["--communities", "2", "--channels", "2", "--days", "24", "--mailservers", "2",
             "--rate", "1.5", "--quiet"]  # fmt: skip


@pytest.fixture(scope="module")
def demo(spark, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("demo")
    assert main(["demo", "--out", str(out), *DEMO_ARGS]) == 0
    return out


def test_demo_migrates_a_generated_sample(demo: Path, capsys) -> None:
    report = json.loads((demo / "report.json").read_text())
    assert len(report["communities"]) == 2
    assert all(c["magnet_uri"] and c["archives_added"] >= 3 for c in report["communities"])
    assert all(len(c["magnet_message_paths"]) == 2 for c in report["communities"])
    assert report["totals"]["duplicates"] > 0  # overlapping mailservers
    with sqlite3.connect(demo / "store.sqlite3") as db:
        (stored,) = db.execute("SELECT count(*) FROM Message").fetchone()
    assert stored == report["totals"]["messages"] == report["store"]["total"]
    config = tomllib.loads((demo / "migrate.toml").read_text())
    assert [s["kind"] for s in config["source"]] == ["mailserver-leveldb"] * 2


def test_the_demos_configs_are_plans(demo: Path, tmp_path: Path, capsys) -> None:
    """Issue 24: the demo is ``plan`` over its generated mailservers. ``plan`` run by hand
    with the same sources and key files writes the demo's files, but for the two settings
    the demo adds to migrate.toml ([spark] master, [pipeline] now) and the ports; the
    descriptions name the shards and the keys are given, so nothing but [relay] is
    missing."""
    config = tomllib.loads((demo / "migrate.toml").read_text())
    argv = ["plan", "--out", str(tmp_path), "--quiet", "--json"]
    for source in config["source"]:
        argv += ["--source", f"leveldb:{source['path']}"]
    for community in config["community"]:
        argv += ["--key-file", f"{community['id']}={community['key_file']}"]
    capsys.readouterr()
    assert main(argv) == 0
    report = json.loads(capsys.readouterr().out)
    planned = tomllib.loads((tmp_path / "migrate.toml").read_text())
    assert {k: v for k, v in config.items() if k not in ("spark", "pipeline")} == planned
    assert config["spark"] == {"master": "local[*]"} and config["pipeline"]["now"] > 0
    assert [s["name"] for s in config["source"]] == ["mailserver-1", "mailserver-2"]
    assert (demo / "migrate.toml").read_text().startswith("# waku-legacy plan: ")
    bridge = tomllib.loads((demo / "bridge.toml").read_text())
    planned_bridge = tomllib.loads((tmp_path / "bridge.toml").read_text())
    assert bridge["community"] == planned_bridge["community"]
    assert all(Path(c["key_file"]).is_file() for c in bridge["community"])
    assert {c["shard_from"] for c in report["communities"]} == {"description"}
    assert report["warnings"] == []
    for why in report["missing"]["communities"].values():
        assert [reason.split(":")[0] for reason in why] == ["no [relay]"]


def test_export_one_community(spark, demo: Path, tmp_path: Path, capsys) -> None:
    config = tomllib.loads((demo / "migrate.toml").read_text())
    community = config["community"][0]
    out = tmp_path / "export"
    args = ["export", "--community", community["id"], "--shard", str(community["shard"]),
            "--key-file", community["key_file"], "--now", str(config["pipeline"]["now"]),
            "--out", str(out), "--json", "--quiet"]  # fmt: skip
    for channel in community["channels"]:
        args += ["--channel", channel]
    for source in config["source"]:
        args += ["--source", "leveldb:" + source["path"]]
    capsys.readouterr()
    assert main(args) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["store"] == {} and len(report["communities"]) == 1
    magnet = (out / "magnet.txt").read_text().strip()
    assert magnet == report["communities"][0]["magnet_uri"]
    name = community["id"]
    ours = {k: v for k, v in _archive_files(out).items()}
    theirs = {k: v for k, v in _archive_files(demo).items() if name in k}
    assert ours == theirs and ours  # the same bytes as the full migration's archives
    assert json.loads((out / "report.json").read_text())["communities"][0]["magnet_uri"] == magnet


def test_export_finds_the_channels_from_the_community_description(
    spark, demo: Path, tmp_path: Path, capsys
) -> None:
    config = tomllib.loads((demo / "migrate.toml").read_text())
    community = config["community"][1]
    out = tmp_path / "export"
    args = ["export", "--community", community["id"], "--shard", str(community["shard"]),
            "--key-file", community["key_file"], "--now", str(config["pipeline"]["now"]),
            "--out", str(out), "--json"]  # fmt: skip
    for source in config["source"]:
        args += ["--source", "leveldb:" + source["path"]]
    capsys.readouterr()
    assert main(args) == 0  # no --channel
    captured = capsys.readouterr()
    report = json.loads(captured.out)
    found = report["communities"][0]["channels_from_description"]
    assert sorted(c["uuid"] for c in found["channels"]) == sorted(community["channels"])
    assert found["descriptions"] >= 2 and found["rejected"] == {}
    assert all(channel in captured.err for channel in community["channels"])  # progress
    saved = json.loads((out / "report.json").read_text())["communities"][0]
    assert saved["channels_from_description"] == found
    name = community["id"]
    ours = _archive_files(out)
    assert ours and ours == {k: v for k, v in _archive_files(demo).items() if name in k}


def _demo_config_in(demo: Path, target: Path) -> Path:
    """The demo's migration config with its outputs in ``target``, on one task slot."""
    text = (demo / "migrate.toml").read_text()
    target.mkdir(exist_ok=True)
    for name in ("store.sqlite3", "archives", "torrents", "report.json"):
        text = text.replace(f'"{name}"', f'"{target / name}"')
    config = target / "migrate.toml"
    config.write_text(text.replace('master = "local[*]"', 'master = "local[1]"'))
    return config


def _migrate_with_fault(config: Path, variable: str, step: str) -> subprocess.CompletedProcess:
    """``waku-legacy migrate`` in a process of its own, with the fault ``variable`` set."""
    return subprocess.run(
        [sys.executable, "-m", "waku_legacy.cli", "migrate", "--config", str(config), "--quiet"],
        env={**os.environ, variable: step}, capture_output=True, text=True, timeout=240,
    )  # fmt: skip


def _assert_same_output(target: Path, demo: Path) -> None:
    """``target`` holds the demo run's archives and store rows."""
    assert _archive_files(target) == _archive_files(demo)
    with (
        sqlite3.connect(target / "store.sqlite3") as a,
        sqlite3.connect(demo / "store.sqlite3") as b,
    ):
        query = "SELECT * FROM Message ORDER BY messageHash"
        assert a.execute(query).fetchall() == b.execute(query).fetchall()


def test_kill_during_archiving_then_rerun(spark, demo: Path, tmp_path: Path) -> None:
    target = tmp_path / "killed"
    config = _demo_config_in(demo, target)
    killed = _migrate_with_fault(config, "WAKU_LEGACY_FAULT", "archive:*:data:append:0:partial")
    assert killed.returncode == -signal.SIGKILL, killed.stderr[-2000:]
    data_files = list((target / "archives").glob("0x*/data"))
    assert data_files and not list((target / "archives").glob("0x*/index"))  # torn first append
    assert main(["migrate", "--config", str(config), "--quiet", "--json"]) == 0
    _assert_same_output(target, demo)
    shutil.rmtree(target / "archives")


def test_a_failed_step1_write_leaves_no_file_and_a_rerun_completes(
    spark, demo: Path, tmp_path: Path
) -> None:
    """Step 1's files are written by the Python workers: a task that fails as it finishes
    its files (ENOSPC raised in the executor) leaves none of them, whole or partial, and the
    next run gives the demo's store and archives."""
    target = tmp_path / "failed"
    config = _demo_config_in(demo, target)
    failed = _migrate_with_fault(config, "WAKU_LEGACY_TASK_FAULT", "write:messages")
    assert failed.returncode == 2, failed.stderr[-3000:]
    assert "reading and decoding the sources failed" in failed.stderr
    assert "No space left on device" in failed.stderr
    work = target / ".migrate-work"  # the default: beside the archive folder
    for folder in ("messages", "keys", "channels"):
        assert list((work / folder).iterdir()) == [], folder  # no file, no temporary
    store = target / "store.sqlite3"
    if store.exists():  # the store step never began
        with sqlite3.connect(store) as db:
            assert db.execute("SELECT COUNT(*) FROM Message").fetchone() == (0,)
    assert main(["migrate", "--config", str(config), "--quiet", "--json"]) == 0
    _assert_same_output(target, demo)


def test_bad_config_and_sources_are_clear_errors(tmp_path: Path, capsys) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text('[[source]]\nkind = "mailserver-leveldb"\n[output]\nstore=""\n'
                   'archive_dir="a"\ntorrent_dir="t"\n')  # fmt: skip
    assert main(["migrate", "--config", str(bad)]) == 2
    assert "key 'path' is required" in capsys.readouterr().err
    assert parse_source_spec("leveldb:/x", 1)["kind"] == "mailserver-leveldb"
    assert parse_source_spec("http://127.0.0.1:8645", 2)["kind"] == "store-rest"
    assert parse_source_spec("postgresql://u@h/db", 3)["kind"] == "mailserver-postgres"
    with pytest.raises(ConfigError, match="expected leveldb:PATH"):
        parse_source_spec("ftp://nope", 4)


def test_a_failed_spark_task_is_one_line_naming_the_step_and_the_log(
    demo: Path, tmp_path: Path
) -> None:
    """Issues 21 and 24: a task that hits ENOSPC (a fault raised in the executor) printed
    88 lines (Python tracebacks, Java frames) around the one clear error; now one line names
    the step and the cause, and the executor traces are in the log file it names."""
    config = _demo_config_in(demo, tmp_path)
    failed = _migrate_with_fault(config, "WAKU_LEGACY_TASK_FAULT", "read:*")
    assert failed.returncode == 2, failed.stderr[-3000:]
    # nothing else: what the JVM and its Python workers print (the JVM's "Using incubator
    # modules" as it starts, a worker's BrokenPipeError as the failed run ends) is in the log
    lines = failed.stderr.strip().splitlines()
    assert len(lines) == 1, failed.stderr[-3000:]
    line = lines[0]
    assert line.startswith("waku-legacy migrate: error: reading and decoding the sources failed")
    assert "No space left on device" in line, line
    log = Path(line.rsplit("executor traces: ", 1)[1].rstrip(")"))
    assert log.is_file() and "No space left on device" in log.read_text()
    assert "Traceback" in log.read_text()


def test_migrate_reports_progress_as_json_lines_off_a_terminal(
    demo: Path, tmp_path: Path, capsys
) -> None:
    """Issue 24: a migration printed only started/done per step; off a terminal each step
    now reports tasks done/total, the records its stages produced, rate and ETA as JSON
    lines (``"event": "progress"``)."""
    text = (demo / "migrate.toml").read_text()
    for name in ("store.sqlite3", "archives", "torrents", "report.json"):
        text = text.replace(f'"{name}"', f'"{tmp_path / name}"')
    config = tmp_path / "migrate.toml"
    config.write_text(text)
    assert main(["migrate", "--config", str(config), "--json"]) == 0
    err = capsys.readouterr().err
    events = [json.loads(line) for line in err.splitlines() if line.startswith("{")]
    assert events and all(e["event"] == "progress" for e in events)
    read = [e for e in events if e["step"] == "read, decode, deduplicate"]
    assert read[-1]["finished"] is True and read[-1]["done"] == read[-1]["total"] > 0
    assert read[-1]["unit"] == "tasks" and read[-1]["records"] > 0
    assert {"rate", "eta_s", "elapsed_s"} <= set(read[-1])
    store = [e for e in events if e["step"] == "store"]
    assert store and store[-1]["done"] == store[-1]["total"] > 0
    # every line of every step has a total or says it has none (no ETA without one)
    for e in events:
        assert e["total"] is not None or e["finished"] or e.get("note") == "total unknown", e
        assert e["eta_s"] is not None or e["rate"] == 0 or e.get("note") == "total unknown", e
    # the archives read the channels' rows step 1 wrote apart: some of the decoded rows,
    # their records against that total; step 1 counts the rows its tasks wrote
    decoded = json.loads((tmp_path / "report.json").read_text())["totals"]["records"]
    later = [e for e in events if e["step"].startswith("archives ") and "records_total" in e]
    assert later and all(0 < e["records_total"] < decoded for e in later)
    assert all(e["records"] <= e["records_total"] for e in later)
    assert read[-1]["records"] == decoded
    assert read[-1]["records_total"] is None  # legacy sources are not counted before reading
    # the JVM's start is a step too (seconds of silence before, more on a loaded host)
    start = [e for e in events if e["step"] == "start Spark"]
    assert start and start[-1]["done"] == start[-1]["total"] == 1 and start[-1]["finished"]


def test_export_guesses_no_shard(tmp_path: Path, capsys) -> None:
    """Issue 24: export put communities that live on 128-130 on /waku/2/rs/16/64 without a
    word; without --shard it now takes the signed description's relay_shard_index (and
    says so) or refuses, before any work."""
    import argparse

    from waku_legacy.identity.descriptions import DescribedChannel, SignedDescription
    from waku_legacy.migrate.cli import community_shard
    from waku_legacy.migrate.discover import ChannelDiscovery

    community = "0x02" + "79be667ef9dcbbac55a06295ce870b07029bfcdb2dce28d959f2815b16f81798"
    code = main(["export", "--community", community, "--channel",
                 "8f3a1c2e-4b5d-4e6f-8a9b-0c1d2e3f4a5b", "--source", f"dump:{tmp_path}/x.dump",
                 "--out", str(tmp_path / "out"), "--quiet"])  # fmt: skip
    err = capsys.readouterr().err
    assert code == 2 and "give --shard N" in err and err.count("\n") == 1, err
    channel = DescribedChannel("8f3a1c2e-4b5d-4e6f-8a9b-0c1d2e3f4a5b", "general", 0)
    found = ChannelDiscovery(community, 1, SignedDescription(7, "c", (channel,), 0, shard=129))
    args = argparse.Namespace(shard=None, community=community)
    assert community_shard(args, found, "export") == 129
    assert "shard 129, the relay_shard_index" in capsys.readouterr().err
    found.newest = SignedDescription(7, "c", (channel,), 0)
    with pytest.raises(ConfigError, match="give --shard N"):
        community_shard(args, found, "export")
    given = argparse.Namespace(shard=130, community=community)
    assert community_shard(given, None, "export") == 130


def test_export_without_the_community_key_says_what_is_missing(tmp_path: Path, capsys) -> None:
    """Issue 24: export without --key-file wrote no signed link message and said nothing."""
    community = "0x02" + "79be667ef9dcbbac55a06295ce870b07029bfcdb2dce28d959f2815b16f81798"
    code = main(["export", "--community", community, "--shard", "128", "--channel",
                 "8f3a1c2e-4b5d-4e6f-8a9b-0c1d2e3f4a5b", "--source", f"dump:{tmp_path}/x.dump",
                 "--out", str(tmp_path / "out"), "--quiet"])  # fmt: skip
    err = capsys.readouterr().err
    assert "export: warning: no --key-file" in err and "signed archive-link" in err, err
    assert code == 2  # the source does not exist: stopped after the warning, before Spark
