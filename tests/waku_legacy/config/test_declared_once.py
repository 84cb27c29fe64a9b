"""Each setting declared once, where it is used (issue 36).

A scan of the source: a numeric default written as a literal for a config key's name in two
dataclasses (or a dataclass and an ``__init__``) fails, unless the pair is listed in
:data:`DISTINCT` with why. The tables that take a library's setting (``same_key``) carry the
library's default, and what the tables' documented defaults build (the ``[libp2p]`` and
``[server]`` limits, the ``[v1]`` mailserver settings) is the libraries' own defaults: a
library default that differs from the documented one fails here (the documentation itself is
generated from the declarations, tests/waku_legacy/config/test_docs.py).
"""

from __future__ import annotations

import ast
import operator
from collections import defaultdict
from collections.abc import Callable, Iterator
from dataclasses import MISSING, fields
from pathlib import Path
from typing import Any

from tests.conftest import REPO_ROOT
from waku_legacy.bridge import config as bridge_config
from waku_legacy.bridge.http_guard import HttpLimits
from waku_legacy.bridge.p2p import listener_limits
from waku_legacy.config.keys import declared_keys, default_of
from waku_legacy.mailserver_compat.server.core import MailServerConfig
from waku_legacy.migrate import config as migrate_config
from waku_legacy.p2p.limits import HostLimits, ListenerLimits

PACKAGE_FOLDERS = ("waku_legacy", "bridge", "migrate", "mailserver_compat", "proto")
_ORIGIN = "waku_legacy.config.key.origin"

# (setting name, default) -> why the places that write it are distinct settings (or who
# merges them); each entry must still occur (a stale one fails)
DISTINCT: dict[tuple[str, float], str] = {
    ("handshake_timeout", 5.0): "the v1 server's handshake bound ([v1.limits]) and the v1 "
    "client's own, when it dials a mailserver",
    ("read_timeout", 30.0): "[libp2p] read_timeout (a request's read on a libp2p stream) and "
    "the v1 server's wait for an RLPx frame (MailServer's own, no key sets it)",
    **{
        (name, value): "[history] (the bridge's pulls, on aiohttp) and a store-rest "
        "[[source]] (the migration's, on urllib): each application's own client of a store "
        "node ([history] timeout is a duration, the source's plain seconds)"
        for name, value in (("page_size", 100), ("retries", 5), ("timeout", 30.0))
    },
}


def _config_key_names() -> set[str]:
    names: set[str] = set()
    for layout in (bridge_config.LAYOUT, migrate_config.LAYOUT):
        for table in layout.tables:
            names |= {declared.name for declared in declared_keys(table.cls)}
    return names


_OPERATORS: dict[type, Callable[[Any, Any], Any]] = {
    ast.Mult: operator.mul, ast.Add: operator.add, ast.Sub: operator.sub,
    ast.Pow: operator.pow, ast.LShift: operator.lshift, ast.Div: operator.truediv,
}  # fmt: skip


def _number(node: ast.expr) -> float | None:
    """The value of a numeric literal (``4 * 1024 * 1024`` too), else None."""
    if isinstance(node, ast.Constant):
        value = node.value
        return value if isinstance(value, int | float) and not isinstance(value, bool) else None
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        inner = _number(node.operand)
        return None if inner is None else -inner
    if isinstance(node, ast.BinOp) and type(node.op) in _OPERATORS:
        left, right = _number(node.left), _number(node.right)
        if left is None or right is None:
            return None
        result: float = _OPERATORS[type(node.op)](left, right)
        return result
    return None


def _field_default(value: ast.expr) -> float | None:
    """A field's literal default: ``= 5``, ``= key(5, …)``, ``= field(default=5)``."""
    if isinstance(value, ast.Call):
        func = value.func
        name = func.id if isinstance(func, ast.Name) else getattr(func, "attr", "")
        if name not in ("key", "field"):
            return None
        if name == "key" and value.args:
            return _number(value.args[0])
        for keyword in value.keywords:
            if keyword.arg == "default":
                return _number(keyword.value)
        return None
    return _number(value)


def _is_dataclass(node: ast.ClassDef) -> bool:
    for decorator in node.decorator_list:
        target = decorator.func if isinstance(decorator, ast.Call) else decorator
        if getattr(target, "id", getattr(target, "attr", "")) == "dataclass":
            return True
    return False


def _literal_defaults(path: Path, tree: ast.Module) -> Iterator[tuple[str, float, str]]:
    """(name, default, where) of each dataclass field and ``__init__`` parameter."""
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef) and _is_dataclass(node):
            for statement in node.body:
                if (isinstance(statement, ast.AnnAssign) and statement.value is not None
                        and isinstance(statement.target, ast.Name)):  # fmt: skip
                    value = _field_default(statement.value)
                    if value is not None:
                        where = f"{path}:{statement.lineno} {node.name}"
                        yield statement.target.id, value, where
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name == "__init__":
            args = node.args
            positional = args.posonlyargs + args.args
            pairs = [
                *zip(positional[len(positional) - len(args.defaults):], args.defaults,
                     strict=True),
                *((a, d) for a, d in zip(args.kwonlyargs, args.kw_defaults, strict=True)
                  if d is not None),
            ]  # fmt: skip
            for arg, default in pairs:
                value = _number(default)
                if value is not None:
                    yield arg.arg, value, f"{path}:{node.lineno} __init__({arg.arg})"


def _written_twice() -> dict[tuple[str, float], list[str]]:
    names = _config_key_names()
    found: dict[tuple[str, float], list[str]] = defaultdict(list)
    for folder in PACKAGE_FOLDERS:
        for path in sorted((REPO_ROOT / folder).rglob("*.py")):
            tree = ast.parse(path.read_text(), str(path))
            shown = path.relative_to(REPO_ROOT)
            for name, value, where in _literal_defaults(shown, tree):
                if name in names and value not in (0, 1):  # 0 and 1: off, once, none
                    found[(name, value)].append(where)
    return {setting: places for setting, places in found.items() if len(places) > 1}


def test_no_default_is_written_twice() -> None:
    twice = _written_twice()
    unexplained = {s: p for s, p in twice.items() if s not in DISTINCT}
    assert not unexplained, (
        "declare each once (key() where it is used, same_key() in the table) or say in "
        f"DISTINCT why they differ: {unexplained}"
    )
    stale = sorted(set(DISTINCT) - set(twice))
    assert not stale, f"DISTINCT lists settings no longer written twice: {stale}"


def test_the_scan_finds_a_default_written_twice(tmp_path: Path) -> None:
    """The scan itself: the live bridge's seen_capacity, as it was before issue 36."""
    source = (
        "@dataclass(frozen=True)\nclass V1Config:\n"
        "    seen_capacity: int = key(100_000, doc='x')\n"
        "class LiveBridge:\n    def __init__(self, *, seen_capacity: int = 100_000) -> None:\n"
        "        pass\n"
    )
    found = list(_literal_defaults(Path("x.py"), ast.parse(source)))
    assert [(name, value) for name, value, _ in found] == [
        ("seen_capacity", 100_000), ("seen_capacity", 100_000)
    ]  # fmt: skip
    assert _number(ast.parse("4 * 1024 * 1024", mode="eval").body) == 4 * 1024 * 1024


def test_a_table_that_takes_a_library_setting_has_its_default() -> None:
    taken = 0
    for layout in (bridge_config.LAYOUT, migrate_config.LAYOUT):
        for table in layout.tables:
            for f in fields(table.cls):
                origin = f.metadata.get(_ORIGIN)
                if origin is None:
                    continue
                taken += 1
                module, cls_name, name = origin.rsplit(".", 2)
                library = getattr(__import__(module, fromlist=[cls_name]), cls_name)
                assert f.name == name  # one name per setting
                (declared,) = [d for d in declared_keys(library) if d.name == name]
                if declared.required:
                    assert f.default is MISSING and f.default_factory is MISSING
                else:
                    assert default_of(table.cls, f.name) == default_of(library, name)
    assert taken >= 30  # [server], [v1], [libp2p], [archive], [output], [pipeline]


def test_the_documented_defaults_build_the_libraries_defaults() -> None:
    """What a table's defaults configure is each library's own default: [libp2p]'s
    max_buffered_bytes was 4 MiB while HostLimits said 16 MiB, and its per-address request
    burst 5x the rate (500) while ListenerLimits said 200; both now the served values."""
    libp2p = bridge_config.Libp2pConfig()
    assert listener_limits(libp2p) == ListenerLimits()
    assert ListenerLimits().host.max_buffered_bytes == 4 * 1024 * 1024
    assert ListenerLimits().address_request_burst == 5 * 100.0
    assert ListenerLimits().address_handshake_burst == 2 * 20.0
    assert HostLimits().negotiation_timeout == libp2p.handshake_timeout
    assert HttpLimits.from_config(bridge_config.ServerConfig()) == HttpLimits()
    v1, mailserver = bridge_config.V1Config(), MailServerConfig()
    assert (v1.rate_limit, v1.min_pow, v1.seen_capacity, v1.limits) == (
        mailserver.rate_limit, mailserver.min_pow, mailserver.seen_capacity, mailserver.limits
    )  # fmt: skip
