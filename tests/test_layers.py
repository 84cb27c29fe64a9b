"""The layer picture of README.md ("Layers"), enforced: every import in the package folders,
at the top of a module or inside a function, goes down the picture or stays in its group.

A group may import itself and any group of a lower layer; groups that share a layer never
import each other (the migration and the bridge are independent applications; the v2 store
and the archives are independent core parts). Inside the v1 wire (``mailserver_compat``)
the same rule orders its subpackages. A module that belongs to no group fails too: a new
package needs its place in the picture first.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent

# Repository folder -> the import name it installs as (setup.cfg package_dir).
FOLDERS = {
    "waku_legacy": "waku_legacy",
    "proto": "waku_legacy.proto",
    "mailserver_compat": "waku_legacy.mailserver_compat",
    "migrate": "waku_legacy.migrate",
    "bridge": "waku_legacy.bridge",
}

W = "waku_legacy."
# Lowest first. Keep in step with the README's picture (test_readme_draws_every_group).
LAYERS: tuple[tuple[str, ...], ...] = (
    ("waku_legacy", W + "errors", W + "faults"),
    (W + "files", W + "durable", W + "limits", W + "console"),
    (W + "config", W + "crypto", W + "proto"),
    (W + "identity",),
    (W + "store", W + "archive"),
    (W + "community_config", W + "p2p", W + "members"),
    (W + "history",),
    (W + "mailserver_compat",),
    (W + "migrate", W + "bridge"),
    (W + "cli",),
)
V1 = W + "mailserver_compat."
# The v1 wire's own order, lowest first.
V1_LAYERS: tuple[tuple[str, ...], ...] = (
    ("waku_legacy.mailserver_compat", V1 + "rlp_fields"),
    (V1 + "rlpx",),
    (V1 + "wire",),
    (V1 + "storage",),
    (V1 + "waku_peer",),
    (V1 + "server", V1 + "client"),
    (V1 + "cli",),
)


@dataclass(frozen=True)
class Arrow:
    source: str  # the importing module
    target: str  # the imported module (or package)
    where: str  # file:line

    def __str__(self) -> str:
        return f"{self.where}: {self.source} imports {self.target}"


def _rank(module: str, layers: tuple[tuple[str, ...], ...]) -> tuple[int, str] | None:
    """(layer, group) of the longest group prefix of ``module``, or None."""
    best: tuple[int, str] | None = None
    for index, groups in enumerate(layers):
        for group in groups:
            if (module == group or module.startswith(group + ".")) and (
                best is None or len(group) > len(best[1])
            ):
                best = (index, group)
    return best


def forbidden(arrow: Arrow) -> str | None:
    """Why the picture forbids ``arrow``, or None when it allows it."""
    source, target = _rank(arrow.source, LAYERS), _rank(arrow.target, LAYERS)
    if source is None:
        return f"{arrow.source} belongs to no layer"
    if target is None:
        return f"{arrow.target} belongs to no layer"
    if source[1] == target[1] == W + "mailserver_compat":
        source, target = _rank(arrow.source, V1_LAYERS), _rank(arrow.target, V1_LAYERS)
        if source is None or target is None:
            return f"{arrow.source} or {arrow.target} has no place in the v1 wire's order"
    if source[1] == target[1] or target[0] < source[0]:
        return None
    if target[0] == source[0]:
        return f"{source[1]} and {target[1]} share a layer and never import each other"
    return f"{source[1]} may not import {target[1]}, a higher layer"


def module_name(path: Path) -> str:
    folder = path.relative_to(REPO_ROOT).parts[0]
    rel = path.relative_to(REPO_ROOT / folder).with_suffix("")
    parts = [p for p in rel.parts if p != "__init__"]
    return ".".join([FOLDERS[folder], *parts])


def arrows_of(source: str, text: str, filename: str) -> list[Arrow]:
    """Every project import in a module's text, nested ones included."""
    found = []
    for node in ast.walk(ast.parse(text, filename)):
        targets: list[str] = []
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:
            # `from pkg import mod` imports pkg.mod: count the submodule when it is one.
            targets = [f"{node.module}.{alias.name}" for alias in node.names]
        for target in targets:
            if target.split(".")[0] == "waku_legacy":
                found.append(Arrow(source, target, f"{filename}:{node.lineno}"))
    return found


def project_modules() -> list[tuple[str, Path]]:
    modules = []
    for folder in FOLDERS:
        for path in sorted((REPO_ROOT / folder).rglob("*.py")):
            if folder == "waku_legacy" and path.relative_to(REPO_ROOT / folder).parts[0] in (
                "proto",
                "mailserver_compat",
                "migrate",
                "bridge",
            ):
                continue  # an installed-tree link, not a source folder
            modules.append((module_name(path), path))
    return modules


def _resolve(target: str, known: set[str]) -> str:
    """``pkg.name`` from ``from pkg import name``: the submodule if it is one, else ``pkg``."""
    return target if target in known else target.rsplit(".", 1)[0]


def test_every_import_follows_the_layer_picture() -> None:
    modules = project_modules()
    known = {name for name, _ in modules}
    problems = []
    for name, path in modules:
        for arrow in arrows_of(name, path.read_text(), str(path.relative_to(REPO_ROOT))):
            arrow = Arrow(arrow.source, _resolve(arrow.target, known), arrow.where)
            why = forbidden(arrow)
            if why:
                problems.append(f"{arrow} ({why})")
    assert not problems, "imports against the README's layer picture:\n" + "\n".join(problems)


def test_every_module_has_a_place_in_the_picture() -> None:
    homeless = [name for name, _ in project_modules() if _rank(name, LAYERS) is None]
    assert not homeless


def test_a_forbidden_arrow_is_caught() -> None:
    """The checker itself: arrows the picture forbids, including one inside a function."""
    text = (
        "from waku_legacy.identity.topics import chat_topic\n"
        "def f():\n"
        "    from waku_legacy.migrate.config import load_config\n"
    )
    arrows = arrows_of("waku_legacy.archive.example", text, "example.py")
    assert [forbidden(a) is None for a in arrows] == [True, False]
    assert forbidden(Arrow("waku_legacy.bridge.x", "waku_legacy.migrate.config", "")) == (
        "waku_legacy.bridge and waku_legacy.migrate share a layer and never import each other"
    )
    assert forbidden(Arrow(V1 + "wire.envelope", V1 + "server.asyncio_server", "")) is not None
    assert forbidden(Arrow(V1 + "server.asyncio_server", V1 + "wire.envelope", "")) is None
    assert forbidden(Arrow("waku_legacy.store.sqlite", "waku_legacy.archive.build", ""))
    assert forbidden(Arrow("waku_legacy.newthing", "waku_legacy.errors", "")) is not None


def test_readme_draws_every_group() -> None:
    readme = (REPO_ROOT / "README.md").read_text()
    section = readme.split("## Layers", 1)[1].split("\n## ", 1)[0]
    for groups in LAYERS + V1_LAYERS:
        for group in groups:
            short = group.removeprefix("waku_legacy.mailserver_compat.").removeprefix(W)
            assert short in section, f"README's layer picture does not name {short}"
