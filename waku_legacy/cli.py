"""``waku-legacy``: the command line.

Each command group lives beside the code it drives and exposes
``register(subparsers) -> None``; the handler it sets (``set_defaults(func=...)``) takes the
parsed namespace and returns an exit code. Command modules must import heavy dependencies
(pyspark, libtorrent) inside their handlers, so that ``waku-legacy hash`` starts fast.
"""

from __future__ import annotations

import argparse
import importlib
import json
import sys
from collections.abc import Sequence
from typing import Any

from waku_legacy.errors import WakuLegacyError

# Modules that add subcommands, in the order their commands appear in --help.
COMMAND_MODULES: tuple[str, ...] = (
    "waku_legacy.identity.cli",  # hash, topics
    "waku_legacy.mailserver_compat.decode_cli",  # decode
    "waku_legacy.archive.cli",  # archive, seed, fetch
    "waku_legacy.mailserver_compat.cli",  # v1 serve, v1 pull
    "waku_legacy.migrate.cli",  # migrate, export, demo
    "waku_legacy.bridge.cli",  # serve
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="waku-legacy",
        description="Keep Status communities' Waku v1 history alive on Waku v2.",
    )
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    subparsers.required = True
    for name in COMMAND_MODULES:
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as exc:
            # Only a command module that is not written yet is skipped; a missing dependency
            # inside one is a real error.
            if exc.name is None or not name.startswith(exc.name):
                raise
            continue
        module.register(subparsers)
    return parser


def print_json(value: Any) -> None:
    """Print one JSON document on stdout (the operator commands' output format)."""
    json.dump(value, sys.stdout, indent=2, sort_keys=False)
    sys.stdout.write("\n")


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except WakuLegacyError as exc:
        print(f"waku-legacy {args.command}: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"waku-legacy {args.command}: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
