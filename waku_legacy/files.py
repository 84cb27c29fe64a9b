"""Reading the small files a configuration names, and the values that become paths.

One place for the rules every config reader (the migration's, the bridge's, the v1
mailserver's node key) applies to a file it is told to read:

- :func:`read_small_file`: a *regular* file (a FIFO, ``/dev/zero`` or a directory is refused
  before anything is read) of at most ``max_size`` bytes (checked with ``fstat`` and again
  while reading, so a file growing under us cannot exhaust memory). Every failure is a
  :class:`~waku_legacy.errors.ConfigError` that names the file and what is wrong.
- :func:`check_nesting`: parsed JSON/TOML values nested deeper than a limit (the standard
  parsers recurse, and a deep document ends in ``RecursionError``).
- :func:`check_path_component`: a configured name used as one file-name component (no
  separators, no ``..``, nothing hidden), so it cannot point outside its directory.
"""

from __future__ import annotations

import os
import re
import stat
from pathlib import Path
from typing import Any

from waku_legacy.errors import ConfigError

__all__ = [
    "MAX_CONFIG_FILE",
    "MAX_KEY_FILE",
    "MAX_NESTING",
    "check_nesting",
    "check_path_component",
    "inside",
    "nesting_error",
    "read_small_file",
    "read_small_text",
]

MAX_CONFIG_FILE = 1024 * 1024  # a TOML config: far more than any real one
MAX_KEY_FILE = 4096  # a hex key or a token, with comments and whitespace to spare
MAX_NESTING = 64  # tables/arrays inside each other: real configs use 3

_COMPONENT = re.compile(r"[A-Za-z0-9_][A-Za-z0-9._-]{0,127}")


def read_small_file(path: str | os.PathLike[str], *, what: str, max_size: int) -> bytes:
    """The bytes of the regular file ``path``, refusing anything else or anything larger
    than ``max_size`` bytes. ``what`` names the file in errors (``"key_file"``)."""
    name = os.fspath(path)
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(name, flags)  # O_NONBLOCK: opening a FIFO must not wait for a writer
    except FileNotFoundError:
        raise ConfigError(f"{what}: {name} does not exist") from None
    except OSError as exc:
        raise ConfigError(f"{what}: cannot open {name}: {exc.strerror or exc}") from None
    try:
        info = os.fstat(fd)
        if stat.S_ISDIR(info.st_mode):
            raise ConfigError(f"{what}: {name} is a directory, expected a file")
        if not stat.S_ISREG(info.st_mode):
            raise ConfigError(
                f"{what}: {name} is not a regular file (a device, FIFO or socket); "
                "expected a file"
            )
        if info.st_size > max_size:
            raise ConfigError(
                f"{what}: {name} is {info.st_size} bytes, larger than the {max_size}-byte limit"
            )
        os.set_blocking(fd, True)
        chunks: list[bytes] = []
        left = max_size + 1
        while left > 0:
            chunk = os.read(fd, min(left, 1 << 16))
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
    except OSError as exc:
        raise ConfigError(f"{what}: cannot read {name}: {exc.strerror or exc}") from None
    finally:
        os.close(fd)
    data = b"".join(chunks)
    if len(data) > max_size:
        raise ConfigError(f"{what}: {name} is larger than the {max_size}-byte limit")
    return data


def read_small_text(
    path: str | os.PathLike[str], *, what: str, max_size: int, encoding: str = "utf-8"
) -> str:
    """:func:`read_small_file` decoded as ``encoding`` (a decoding failure is a
    ConfigError too)."""
    data = read_small_file(path, what=what, max_size=max_size)
    try:
        return data.decode(encoding)
    except UnicodeDecodeError as exc:
        raise ConfigError(
            f"{what}: {os.fspath(path)} is not {encoding} text (byte {exc.start})"
        ) from None


def check_nesting(value: Any, *, what: str, limit: int = MAX_NESTING) -> None:
    """Refuse a parsed JSON/TOML value with lists/dicts nested more than ``limit`` deep
    (iterative: safe on any depth)."""
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            children: Any = item.values()
        elif isinstance(item, list | tuple):
            children = item
        else:
            continue
        if depth >= limit:
            raise ConfigError(f"{what}: nested more than {limit} levels deep")
        stack.extend((child, depth + 1) for child in children)


def nesting_error(what: str) -> ConfigError:
    """The error for a document the parser itself could not descend (RecursionError)."""
    return ConfigError(f"{what}: nested too deeply to parse (limit {MAX_NESTING} levels)")


def check_path_component(value: str, *, where: str, key: str) -> str:
    """``value`` if it is safe as one file-name component: letters, digits, ``.``, ``_``
    and ``-``, not starting with a dot or a dash, at most 128 characters. Anything else
    (``/``, ``..``, NUL, an empty name) is a ConfigError naming the key."""
    if not isinstance(value, str) or not _COMPONENT.fullmatch(value):
        shown = repr(value)[:80]
        raise ConfigError(
            f"{where}: key '{key}' is used as a file name and must be 1-128 characters of "
            f"letters, digits, '.', '_' and '-' (not starting with '.' or '-'), got {shown}"
        )
    return value


def inside(base: str | os.PathLike[str], path: str | os.PathLike[str]) -> bool:
    """Whether ``path`` resolves to ``base`` or somewhere below it."""
    root = Path(base).resolve()
    target = Path(path).resolve()
    return target == root or root in target.parents
