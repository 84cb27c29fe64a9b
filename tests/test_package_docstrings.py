"""Issue 36: every package's ``__init__.py`` docstring names its modules (and subpackages)
and says what each owns, so the tree reads from the top. A module counts as named when its
name is written as code: ``name``, ``name.py``, ``name/`` or a dotted path ending in it
(:mod:`waku_legacy.store.sqlite`)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from tests.conftest import REPO_ROOT
from tests.test_packaging import _declared


def package_folder(package: str, mapping: dict[str, str]) -> Path:
    """The folder of a declared package (setup.cfg package_dir, longest prefix)."""
    root = max((n for n in mapping if package == n or package.startswith(n + ".")), key=len)
    rest = package.removeprefix(root).strip(".")
    return REPO_ROOT / mapping[root] / Path(*rest.split(".")) if rest else REPO_ROOT / mapping[root]


def members(folder: Path) -> list[str]:
    """The package's modules and subpackages, by name."""
    modules = [p.stem for p in folder.glob("*.py") if p.name != "__init__.py"]
    packages = [p.parent.name for p in folder.glob("*/__init__.py")]
    return sorted(modules + packages)


def named(name: str, docstring: str) -> bool:
    return re.search(rf"[`.~]{re.escape(name)}(\.py)?/?`", docstring) is not None


def unnamed_members() -> dict[str, list[str]]:
    packages, mapping = _declared()
    missing = {}
    for package in packages:
        folder = package_folder(package, mapping)
        docstring = ast.get_docstring(ast.parse((folder / "__init__.py").read_text())) or ""
        if absent := [m for m in members(folder) if not named(m, docstring)]:
            missing[package] = absent
    return missing


def test_every_package_docstring_names_its_modules() -> None:
    missing = unnamed_members()
    assert not missing, "modules not named in their package's __init__ docstring:\n" + "\n".join(
        f"  {package}: {', '.join(names)}" for package, names in sorted(missing.items())
    )


def test_naming_means_written_as_code() -> None:
    assert named("sqlite", "- ``sqlite``: the SQLite store")
    assert named("sqlite", "see :mod:`waku_legacy.store.sqlite`")
    assert named("sqlite", "`sqlite.py` and `protocol/`") and named("protocol", "`protocol/`")
    assert not named("sqlite", "the sqlite store")  # prose is not a module list
    assert not named("sql", "``sqlite``")
