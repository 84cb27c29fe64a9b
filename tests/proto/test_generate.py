"""The committed *_pb2 modules are exactly what the .proto sources generate."""

from __future__ import annotations

import tomllib
from pathlib import Path

from tests.conftest import REPO_ROOT

PROTO_DIR = REPO_ROOT / "proto"


def test_generated_modules_match_sources(tmp_path: Path) -> None:
    from waku_legacy.proto.generate import generate

    produced = generate(tmp_path)
    assert produced, "no modules were generated"
    names = {p.name for p in produced}
    committed = {p.name for p in PROTO_DIR.glob("*_pb2.py*")}
    assert names == committed, f"generated {sorted(names)} but committed {sorted(committed)}"
    for path in produced:
        assert path.read_bytes() == (PROTO_DIR / path.name).read_bytes(), (
            f"proto/{path.name} drifted from its .proto source; "
            "run `python -m waku_legacy.proto.generate`"
        )


def test_every_proto_source_has_a_module() -> None:
    sources = {p.stem for p in PROTO_DIR.glob("*.proto")}
    modules = {p.name.removesuffix("_pb2.py") for p in PROTO_DIR.glob("*_pb2.py")}
    assert sources == modules


def test_type_checker_skips_every_generated_module() -> None:
    # mypy's override patterns cannot say "*_pb2", so pyproject.toml names each module.
    config = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())
    skipped = {
        module
        for override in config["tool"]["mypy"]["overrides"]
        if override.get("ignore_errors")
        for module in override["module"]
    }
    generated = {f"waku_legacy.proto.{p.stem}" for p in PROTO_DIR.glob("*_pb2.py")}
    assert generated <= skipped, f"add {sorted(generated - skipped)} to pyproject.toml"
