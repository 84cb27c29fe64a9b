"""TOML documents as text, for the configs ``demo`` and ``plan`` write (``migrate.toml``,
``bridge.toml``) and the generated examples (:mod:`waku_legacy.config.docs`).

Plain values only: strings, booleans, integers, floats, lists of them and inline tables;
top-level keys are tables (``[name]``) or arrays of tables (``[[name]]``). Strings are TOML
basic strings: quotes, backslashes and every control character escaped, other characters
written as they are (the file is UTF-8). What TOML cannot hold (a lone surrogate, as
``surrogateescape`` gives for a non-UTF-8 file name) is a ConfigError, not a broken file.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from typing import Any

from waku_legacy.errors import ConfigError

__all__ = ["toml_document", "toml_key", "toml_string", "toml_value"]

_BARE_KEY = re.compile(r"[A-Za-z0-9_-]+")
_SHORT_ESCAPES = {'"': '\\"', "\\": "\\\\", "\b": "\\b", "\t": "\\t", "\n": "\\n",
                  "\f": "\\f", "\r": "\\r"}  # fmt: skip


def toml_string(text: str) -> str:
    """``text`` as a TOML basic string."""
    out = []
    for char in text:
        code = ord(char)
        if char in _SHORT_ESCAPES:
            out.append(_SHORT_ESCAPES[char])
        elif code < 0x20 or code == 0x7F:
            out.append(f"\\u{code:04X}")
        elif 0xD800 <= code <= 0xDFFF:
            raise ConfigError(f"{text!r} holds a lone surrogate; TOML text must be Unicode")
        else:
            out.append(char)
    return '"' + "".join(out) + '"'


def toml_key(key: str) -> str:
    """A bare key when TOML allows one, else a quoted key."""
    return key if _BARE_KEY.fullmatch(key) else toml_string(key)


def toml_value(value: Any) -> str:
    """One value: a string, boolean, number, list or (inline) table."""
    if isinstance(value, str):
        return toml_string(value)
    if isinstance(value, bool):  # before int: bool is an int
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if math.isnan(value):
            return "nan"
        if math.isinf(value):
            return "inf" if value > 0 else "-inf"
        return repr(value)
    if isinstance(value, Mapping):
        return "{" + ", ".join(f"{toml_key(k)} = {toml_value(v)}" for k, v in value.items()) + "}"
    if isinstance(value, Sequence) and not isinstance(value, bytes | bytearray):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    raise TypeError(f"no TOML form for a {type(value).__name__}: {value!r}")


def toml_document(data: Mapping[str, Any], *, header: str = "") -> str:
    """``data``'s tables (mappings) and arrays of tables (sequences of mappings) in order,
    after ``header`` as comment lines."""
    lines = [f"# {line}".rstrip() for line in header.splitlines()]
    if lines:
        lines.append("")
    for name, value in data.items():
        tables = [value] if isinstance(value, Mapping) else list(value)
        if not all(isinstance(t, Mapping) for t in tables):
            raise TypeError(f"top-level {name!r} must be a table or an array of tables")
        key = toml_key(name)
        for table in tables:
            lines.append(f"[{key}]" if isinstance(value, Mapping) else f"[[{key}]]")
            lines += [f"{toml_key(k)} = {toml_value(v)}" for k, v in table.items()]
            lines.append("")
    return "\n".join(lines)
