"""What the operator commands print: one JSON document on stdout (errors go to stderr,
see :mod:`waku_legacy.cli`)."""

from __future__ import annotations

import json
import sys
from typing import Any

__all__ = ["print_json"]


def print_json(value: Any) -> None:
    """Print one JSON document on stdout (the operator commands' output format)."""
    json.dump(value, sys.stdout, indent=2, sort_keys=False)
    sys.stdout.write("\n")
