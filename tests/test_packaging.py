"""setup.cfg declares every package folder (find: cannot see through package_dir)."""

from __future__ import annotations

import configparser

from tests.conftest import REPO_ROOT


def _declared() -> tuple[list[str], dict[str, str]]:
    cfg = configparser.ConfigParser()
    cfg.read(REPO_ROOT / "setup.cfg")
    packages = cfg["options"]["packages"].split()
    mapping = {}
    for line in cfg["options"]["package_dir"].strip().splitlines():
        name, _, folder = (part.strip() for part in line.partition("="))
        mapping[name] = folder
    return packages, mapping


def test_every_package_folder_is_declared() -> None:
    packages, mapping = _declared()
    found = set()
    for name, folder in mapping.items():
        root = REPO_ROOT / folder
        for init in root.rglob("__init__.py"):
            rel = init.parent.relative_to(root)
            parts = [p for p in rel.parts]
            found.add(".".join([name, *parts]))
    # Subpackages that map to their own folder are found twice; that is fine.
    assert found <= set(packages), f"undeclared packages: {sorted(found - set(packages))}"
    assert set(packages) <= found, f"declared but missing: {sorted(set(packages) - found)}"


def test_top_level_names_do_not_clash() -> None:
    _, mapping = _declared()
    assert all(name.startswith("waku_legacy") for name in mapping)
