"""Issue 36: py-libp2p (and trio) are test peers only. The bridge serves the libp2p store and
`store query --peer` reads it in interpreters where importing either fails, and no module of
the package imports them, even lazily."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.bridge.support import CONTENT, PUBSUB, make_rows
from tests.bridge.test_workers import free_port, get, wait_for
from tests.conftest import REPO_ROOT
from waku_legacy.store import open_store

#: runs the CLI with py-libp2p and trio unimportable (a None in sys.modules refuses the import)
BLOCKED = (
    "import sys\n"
    "for name in ('libp2p', 'trio'):\n"
    "    sys.modules[name] = None\n"
    "from waku_legacy.cli import main\n"
    "sys.exit(main(sys.argv[1:]))\n"
)
PACKAGE_FOLDERS = ("waku_legacy", "bridge", "migrate", "mailserver_compat", "proto")


def test_no_module_of_the_package_imports_py_libp2p_or_trio() -> None:
    pattern = re.compile(r"^\s*(import|from)\s+(libp2p|trio)\b", re.MULTILINE)
    found = [
        str(path.relative_to(REPO_ROOT))
        for folder in PACKAGE_FOLDERS
        for path in (REPO_ROOT / folder).rglob("*.py")
        if pattern.search(path.read_text())
    ]
    assert found == []


@pytest.mark.network
def test_the_bridge_serves_and_queries_libp2p_without_py_libp2p(tmp_path: Path) -> None:
    store = tmp_path / "store.sqlite3"
    with open_store(f"sqlite:///{store}") as opened:
        opened.insert_messages(make_rows(30))
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    config = tmp_path / "bridge.toml"
    config.write_text(
        f'[server]\nlisten = "127.0.0.1:{port}"\nworkers = 1\nshutdown_timeout = "5s"\n'
        f'[store]\nurl = "sqlite:///{store}"\n[logging]\nlevel = "warning"\n'
        '[libp2p]\nlisten = ["/ip4/127.0.0.1/tcp/0"]\nkey_file = "libp2p.key"\nshards = [128]\n'
    )
    log = tmp_path / "bridge.log"
    process = subprocess.Popen(
        [sys.executable, "-c", BLOCKED, "serve", "--config", str(config)],
        stdout=subprocess.DEVNULL, stderr=log.open("wb"),
    )  # fmt: skip
    try:
        wait_for(lambda: get(base, "/health")[0] == 200, "the bridge to answer")

        def address() -> str | None:
            status, _, body = get(base, "/debug/v1/info")
            if status != 200:
                return None
            # null until the listener has started (it starts after the HTTP API)
            addresses = (json.loads(body).get("libp2p") or {}).get("multiaddrs")
            return addresses[0] if addresses else None

        peer = wait_for(address, "the libp2p listener")
        query = [
            sys.executable, "-c", BLOCKED, "store", "query", "--peer", peer, "--pubsub-topic",
            PUBSUB, "--content-topic", CONTENT[0], "--page-size", "5", "--json",
        ]  # fmt: skip
        done = subprocess.run(query, capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, done.stderr[-3000:] + log.read_text()[-3000:]
        pages = json.loads(done.stdout)["pages"]
        assert pages[0]["statusCode"] == 200 and len(pages[0]["messages"]) == 5
        assert process.poll() is None, log.read_text()[-3000:]
    finally:
        process.terminate()
        process.wait(30)
    assert "ModuleNotFoundError" not in log.read_text() and "ImportError" not in log.read_text()
