"""Reading TOML configuration: typed tables whose errors name the key, paths relative to the
config file, store URLs, and bounded reads of the file itself.

The migration (:mod:`waku_legacy.migrate.config`) and the bridge
(:mod:`waku_legacy.bridge.config`) describe their own tables with these pieces; the
``[[community]]`` table both read is :mod:`waku_legacy.community_config`.
"""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any, Literal, overload

from waku_legacy.errors import ConfigError
from waku_legacy.files import MAX_CONFIG_FILE, check_nesting, nesting_error, read_small_text

__all__ = ["ConfigTable", "read_toml", "resolve_path", "resolve_store_url"]


class ConfigTable:
    """A TOML table being read: typed getters that name the key in their errors, and a
    final check that no unknown key is left."""

    def __init__(self, data: Any, where: str) -> None:
        if not isinstance(data, dict):
            raise ConfigError(f"{where} must be a table, got {_kind(data)}")
        self.data: dict[str, Any] = data
        self.where = where
        self.used: set[str] = set()

    def raw(self, key: str) -> Any:
        """The value of ``key`` as TOML gave it (None when absent), marked as read."""
        self.used.add(key)
        return self.data.get(key)

    def error(self, key: str, expected: str, value: Any) -> ConfigError:
        return ConfigError(f"{self.where}: key '{key}' must be {expected}, got {_show(value)}")

    def missing(self, key: str) -> ConfigError:
        """A required ``key`` is absent: name first a key of the table that looks like a
        misspelling of it (``archive_dirr``), which is what the operator has to fix."""
        import difflib

        unread = [k for k in self.data if k not in self.used and isinstance(k, str)]
        typo = difflib.get_close_matches(key, unread, n=1, cutoff=0.75)
        if typo:
            return ConfigError(f"{self.where}: unknown key {typo[0]!r} (did you mean {key!r}?)")
        return ConfigError(f"{self.where}: key '{key}' is required")

    # A key that is required, or has a default, always gives a value; otherwise None may.
    @overload
    def string(self, key: str, *, required: Literal[True], default: str | None = None) -> str: ...
    @overload
    def string(self, key: str, *, required: bool = False, default: str) -> str: ...
    @overload
    def string(self, key: str, *, required: bool = False, default: None = None) -> str | None: ...

    def string(self, key: str, *, required: bool = False, default: str | None = None) -> str | None:
        value = self.raw(key)
        if value is None:
            if required:
                raise self.missing(key)
            return default
        if not isinstance(value, str):
            raise self.error(key, "a string", value)
        if "\x00" in value:  # never meant; and a path or URL with one fails deep inside the OS
            raise self.error(key, "a string without NUL characters", value)
        return value

    @overload
    def integer(
        self, key: str, *, default: int | None = None, low: int | None = None,
        high: int | None = None, required: Literal[True],
    ) -> int: ...  # fmt: skip
    @overload
    def integer(
        self, key: str, *, default: int, low: int | None = None, high: int | None = None,
        required: bool = False,
    ) -> int: ...  # fmt: skip
    @overload
    def integer(
        self, key: str, *, default: None = None, low: int | None = None,
        high: int | None = None, required: bool = False,
    ) -> int | None: ...  # fmt: skip

    def integer(
        self, key: str, *, default: int | None = None, low: int | None = None,
        high: int | None = None, required: bool = False,
    ) -> int | None:  # fmt: skip
        value = self.raw(key)
        if value is None:
            if required:
                raise self.missing(key)
            return default
        if not isinstance(value, int) or isinstance(value, bool):
            raise self.error(key, "an integer", value)
        if (low is not None and value < low) or (high is not None and value > high):
            bounds = f"{'' if low is None else low}..{'' if high is None else high}"
            raise self.error(key, f"an integer in {bounds}", value)
        return value

    def number(self, key: str, *, default: float) -> float:
        value = self.raw(key)
        if value is None:
            return default
        if not isinstance(value, int | float) or isinstance(value, bool) or value <= 0:
            raise self.error(key, "a positive number", value)
        return float(value)

    def strings(self, key: str, *, required: bool = False) -> tuple[str, ...]:
        value = self.raw(key)
        if value is None:
            if required:
                raise self.missing(key)
            return ()
        if isinstance(value, str):
            value = [v.strip() for v in value.split(",") if v.strip()]
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise self.error(key, "a list of strings", value)
        if any("\x00" in v for v in value):
            raise self.error(key, "a list of strings without NUL characters", value)
        return tuple(value)

    def table(self, key: str) -> ConfigTable:
        value = self.raw(key)
        return ConfigTable({} if value is None else value, f"{self.where}.{key}")

    def done(self) -> None:
        unknown = sorted(set(self.data) - self.used)
        if unknown:
            raise ConfigError(
                f"{self.where}: unknown key(s) {', '.join(map(repr, unknown))}; "
                f"expected some of {', '.join(sorted(self.used))}"
            )


def _kind(value: Any) -> str:
    return {
        bool: "a boolean", int: "an integer", float: "a number", str: "a string",
        list: "a list", dict: "a table",
    }.get(type(value), type(value).__name__)  # fmt: skip


def _show(value: Any) -> str:
    text = repr(value)
    return f"{_kind(value)} {text[:60]}{'…' if len(text) > 60 else ''}"


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
