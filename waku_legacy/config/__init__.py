"""Reading TOML configuration: bounded reads of the file itself, paths relative to the
config file, store URLs.

Each table's keys are declared once and read by one reader (:mod:`waku_legacy.config.keys`);
the migration (:mod:`waku_legacy.migrate.config`) and the bridge
(:mod:`waku_legacy.bridge.config`) declare their own tables with it; the ``[[community]]``
table both read is :mod:`waku_legacy.community_config`. The example configs and the
key tables of docs/configuration.md are generated from the declarations
(:mod:`waku_legacy.config.docs`); the demo's and ``plan``'s configs are written with
:mod:`waku_legacy.config.toml_text`.
"""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

from waku_legacy.errors import ConfigError
from waku_legacy.files import MAX_CONFIG_FILE, check_nesting, nesting_error, read_small_text

__all__ = ["read_toml", "resolve_path", "resolve_store_url"]


def resolve_path(base: Path, value: str | None) -> str | None:
    if value is None or value == "":
        return value
    try:
        path = Path(value).expanduser()
    except RuntimeError:  # "~name/…" of a user that does not exist
        raise ConfigError(f"path {value[:200]!r}: cannot expand '~' (no such user)") from None
    return str(path if path.is_absolute() else (base / path))


def resolve_store_url(base: Path, url: str) -> str:
    if url == "" or url.startswith(("postgresql://", "postgres://")):
        return url
    if url.startswith("sqlite:///"):
        return url
    if url.startswith("sqlite:"):
        return "sqlite:///" + str((base / url[len("sqlite:") :]).resolve()).lstrip("/")
    if "://" in url:
        raise ConfigError(
            f"[output]: key 'store' must be sqlite:///path or postgresql://…, got {url!r}"
        )
    return "sqlite:///" + str((base / url).resolve()).lstrip("/")


def read_toml(path: str | Path) -> dict[str, Any]:
    """Read a TOML file; every failure is a ConfigError naming the file: not a regular file,
    over :data:`~waku_legacy.files.MAX_CONFIG_FILE` bytes, not UTF-8, not TOML, or nested
    more than :data:`~waku_legacy.files.MAX_NESTING` levels."""
    path = Path(path)
    text = read_small_text(path, what="config file", max_size=MAX_CONFIG_FILE)
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: not valid TOML: {exc}") from exc
    except ValueError as exc:  # tomllib: an integer of more than 4300 digits
        raise ConfigError(f"{path}: not a usable TOML value: {str(exc)[:200]}") from exc
    except RecursionError:
        raise nesting_error(str(path)) from None
    check_nesting(data, what=str(path))
    return data
