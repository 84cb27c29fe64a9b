"""The unchanged migration against a Spark standalone master and one worker (1 core, small
memory) started on loopback with the deploy/spark scripts; always torn down."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO_ROOT
from tests.migrate.test_pipeline import _archive_files, _reference_archives
from waku_legacy.config.toml_text import toml_document
from waku_legacy.migrate.sample import (
    SampleSpec,
    generate_envelopes,
    make_communities,
    write_leveldb_mailservers,
)

pytestmark = [pytest.mark.spark, pytest.mark.network, pytest.mark.timeout(300)]

SCRIPTS = REPO_ROOT / "deploy" / "spark"
DAY = 86_400


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture()
def standalone(tmp_path: Path):
    env = {
        **os.environ,
        "SPARK_RUN_DIR": str(tmp_path / "spark-run"),
        "SPARK_MASTER_PORT": str(_free_port()),
        "SPARK_MASTER_WEBUI_PORT": str(_free_port()),
        "SPARK_WORKER_WEBUI_PORT": str(_free_port()),
        "SPARK_WORKER_CORES": "1",
        "SPARK_WORKER_MEMORY": "1g",
        "WAKU_LEGACY_PYTHON": sys.executable,
    }
    try:
        master = subprocess.run(
            [str(SCRIPTS / "start-master.sh")], env=env, capture_output=True, text=True,
            timeout=90, check=True,
        ).stdout.strip().splitlines()[-1]  # fmt: skip
        subprocess.run(
            [str(SCRIPTS / "start-worker.sh"), master], env=env, capture_output=True, text=True,
            timeout=90, check=True,
        )  # fmt: skip
        yield master
    finally:
        subprocess.run([str(SCRIPTS / "stop.sh")], env=env, timeout=60, check=False)


def test_pipeline_runs_unchanged_on_a_standalone_cluster(standalone: str, tmp_path: Path) -> None:
    assert standalone.startswith("spark://127.0.0.1:")
    spec = SampleSpec(communities=1, channels=2, members=3, days=15, messages_per_channel_day=1.5,
                      public_per_day=0.5, start=1_650_000_000, seed=5)  # fmt: skip
    communities = make_communities(spec)
    envelopes = list(generate_envelopes(spec, communities))
    mailservers = [tmp_path / "ms-a", tmp_path / "ms-b"]
    write_leveldb_mailservers(iter(envelopes), mailservers, seed=2)
    now = spec.start + 16 * DAY
    out = tmp_path / "out"
    config = tmp_path / "cluster.toml"
    config.write_text(toml_document({
        "spark": {"master": "local[1]", "shuffle_partitions": 2},
        "source": [{"kind": "mailserver-leveldb", "path": str(m)} for m in mailservers],
        "community": [{"id": str(c.id), "channels": list(c.channels), "shard": c.shard}
                      for c in communities],
        "pipeline": {"now": now},
        "output": {"store": f"sqlite:///{out}/store.sqlite3", "archive_dir": str(out / "archives"),
                   "torrent_dir": str(out / "torrents")},
    }))  # fmt: skip
    # The same config; only the master differs (--master overrides it), plus executor sizing.
    text = config.read_text().replace(
        "[spark]\n",
        '[spark]\nconf = { "spark.executor.memory" = "512m", "spark.cores.max" = "1" }\n',
    )
    config.write_text(text)
    run = subprocess.run(
        [sys.executable, "-m", "waku_legacy.cli", "migrate", "--config", str(config),
         "--master", standalone, "--json", "--quiet"],
        capture_output=True, text=True, timeout=240,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr[-3000:]
    report = json.loads(run.stdout)
    assert report["master"] == standalone
    assert report["totals"]["messages"] == len(envelopes)
    assert report["store"]["total"] == len(envelopes)
    assert sum(s["records"] for s in report["sources"]) > len(envelopes)  # overlapping copies

    class _DS:  # what _reference_archives needs
        pass

    ds = _DS()
    ds.communities = communities  # type: ignore[attr-defined]
    reference = tmp_path / "reference"
    _reference_archives(ds, reference, envelopes, now)  # type: ignore[arg-type]
    assert _archive_files(out) == _archive_files(reference)
