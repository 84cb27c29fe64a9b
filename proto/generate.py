"""Regenerate the ``*_pb2.py`` modules from the ``.proto`` sources in this folder.

Run ``python -m waku_legacy.proto.generate`` (or ``python proto/generate.py``). The proto
files import each other as ``waku_legacy/proto/<name>.proto``, the package's import path, so
the generated modules import ``waku_legacy.proto.<name>_pb2`` and never clash with other
protobuf users in the same process. ``tests/proto/test_generate.py`` fails when the
committed modules drift from what this produces.
"""

from __future__ import annotations

import shutil
import sys
import tempfile
from pathlib import Path

PROTO_DIR = Path(__file__).resolve().parent
IMPORT_PREFIX = Path("waku_legacy") / "proto"


def proto_sources() -> list[Path]:
    return sorted(PROTO_DIR.glob("*.proto"))


def generate(out_dir: Path) -> list[Path]:
    """Compile every .proto here into ``out_dir``; return the generated files."""
    from grpc_tools import protoc  # test/dev dependency only

    with tempfile.TemporaryDirectory() as tmp:
        tree = Path(tmp) / "src"
        (tree / IMPORT_PREFIX).mkdir(parents=True)
        for src in proto_sources():
            shutil.copyfile(src, tree / IMPORT_PREFIX / src.name)
        gen = Path(tmp) / "gen"
        gen.mkdir()
        args = [
            "protoc",
            f"-I{tree}",
            f"--python_out={gen}",
            f"--pyi_out={gen}",
            *(str(IMPORT_PREFIX / src.name) for src in proto_sources()),
        ]
        if protoc.main(args) != 0:
            raise RuntimeError("protoc failed: " + " ".join(args))
        produced = []
        out_dir.mkdir(parents=True, exist_ok=True)
        for path in sorted((gen / IMPORT_PREFIX).iterdir()):
            target = out_dir / path.name
            shutil.copyfile(path, target)
            produced.append(target)
        return produced


def main() -> int:
    for path in generate(PROTO_DIR):
        print(path.relative_to(PROTO_DIR.parent))
    return 0


if __name__ == "__main__":
    sys.exit(main())
