"""Issue 25: deploy/bridge.example.toml, deploy/migrate.example.toml and the key tables of
docs/configuration.md (the README's until issue 36) are generated from the key declarations:
the committed files are what the generator writes, the examples load with the readers and
name every declared key."""

from __future__ import annotations

import re
import subprocess
import sys
import tomllib

from tests.conftest import REPO_ROOT
from waku_legacy.bridge import config as bridge_config
from waku_legacy.config.keys import declared_keys
from waku_legacy.migrate import config as migrate_config

GENERATOR = REPO_ROOT / "scripts" / "gen-config-docs.py"


def _shown_keys(text: str) -> dict[str, set[str]]:
    """table name -> the keys an example file sets or shows commented out."""
    found: dict[str, set[str]] = {}
    table = ""
    for line in text.splitlines():
        line = line.removeprefix("# ")
        if header := re.fullmatch(r"\[\[?([a-z0-9_.]+)\]\]?\s*(#.*)?", line):
            table = header.group(1)
            found.setdefault(table, set())
        elif setting := re.match(r"([a-z_]+) = ", line):
            found[table].add(setting.group(1))
    return found


def test_committed_files_are_what_the_declarations_generate() -> None:
    done = subprocess.run(
        [sys.executable, str(GENERATOR), "--check"], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr


def test_the_check_fails_on_drift(tmp_path) -> None:
    """--check is not a rubber stamp: a changed example is reported (on a copy of the repo's
    generated files, so the worktree is untouched)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("gen_config_docs", GENERATOR)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    (tmp_path / "deploy").mkdir()
    (tmp_path / "docs").mkdir()
    for path, text in module.generated().items():
        target = tmp_path / path.relative_to(REPO_ROOT)
        target.write_text(text)
    module.REPO_ROOT = tmp_path
    assert module.main(["--check"]) == 0
    example = tmp_path / "deploy" / "bridge.example.toml"
    example.write_text(example.read_text().replace("reader_threads = 2", "reader_threads = 3"))
    assert module.main(["--check"]) == 1
    reference = tmp_path / "docs" / "configuration.md"
    reference.write_text(reference.read_text().replace("| `reader_threads` |", "| `threads` |"))
    assert module.main([]) == 0  # rewritten
    assert module.main(["--check"]) == 0
    assert "reader_threads = 2" in example.read_text()


def test_bridge_example_names_every_key_and_loads(tmp_path) -> None:
    text = (REPO_ROOT / "deploy" / "bridge.example.toml").read_text()
    shown = _shown_keys(text)
    for layout in bridge_config.LAYOUT.tables:
        declared = {d.name for d in declared_keys(layout.cls)}
        assert declared <= shown[layout.name], (layout.name, declared - shown[layout.name])
    data = tomllib.loads(text)
    data["admin"] = {"token": "example-token-0123456789"}  # instead of its token file
    config = bridge_config.parse_config(data, base_dir=tmp_path)
    assert config.libp2p is not None and config.relay is not None and config.archive is not None
    assert config.v1 is not None and config.history is not None
    # keys issue 25 found missing from the hand-written example
    assert {"announce", "max_connections_per_peer", "write_timeout"} <= shown["libp2p"]


def test_migrate_example_names_every_key_and_loads(tmp_path) -> None:
    path = REPO_ROOT / "deploy" / "migrate.example.toml"
    shown = _shown_keys(path.read_text())
    for layout in migrate_config.LAYOUT.tables:
        declared = {d.name for d in declared_keys(layout.cls)}
        if layout.name != "source":
            assert declared <= shown[layout.name], (layout.name, declared - shown[layout.name])
    assert {d.name for d in declared_keys(migrate_config.SourceConfig)} <= shown["source"]
    config = migrate_config.parse_config(tomllib.loads(path.read_text()), base_dir=tmp_path)
    assert config.sources[0].kind == "mailserver-postgres"
    assert config.output.archive_dir == str(tmp_path / "archives")


def test_configuration_reference_lists_every_key_of_every_table() -> None:
    reference = (REPO_ROOT / "docs" / "configuration.md").read_text()
    for layout in (*bridge_config.LAYOUT.tables, *migrate_config.LAYOUT.tables):
        name = f"[[{layout.name}]]" if layout.array else f"[{layout.name}]"
        start = reference.index(f"`{name}`: ")
        rows = reference[start:].split("\n\n")[1]
        assert {f"| `{d.name}` |" for d in declared_keys(layout.cls)} <= {
            line.split(" | ")[0] + " |" for line in rows.splitlines()
        }, name
