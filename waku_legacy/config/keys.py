"""One declaration per config key, and the one reader of every table declared that way.

A config table is a frozen dataclass; each of its fields that a TOML key sets is declared
with :func:`key`: default, kind, bounds, choices and a one-line doc, in one place. The
bridge's and the migration's tables (and ``[v1.limits]``) are read by :class:`KeyReader`,
and ``deploy/bridge.example.toml``, ``deploy/migrate.example.toml`` and docs/configuration.md's
key tables are generated from the same declarations (:mod:`waku_legacy.config.docs`)::

    @dataclass(frozen=True, slots=True)
    class LoggingConfig:
        level: str = key("info", doc="log level", choices=("debug", "info"))

A table is checked in the order an operator fixes it: every unknown key first (all of them,
each with the declared key it most looks like: a typo ``archive_dirr`` is an unknown key, not
a missing ``archive_dir``), then every missing required key, then each value's type and
bounds; each error a :class:`ConfigError` naming the table, the key and what is accepted.
"""

from __future__ import annotations

import difflib
import math
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import MISSING, dataclass, field, fields, replace
from enum import StrEnum
from pathlib import Path
from typing import Any

from waku_legacy.config import resolve_path
from waku_legacy.errors import ConfigError

__all__ = [
    "DAY",
    "Declared",
    "Key",
    "KeyConflict",
    "KeyReader",
    "KeyRef",
    "Kind",
    "check_unknown",
    "declared_keys",
    "default_of",
    "format_duration",
    "key",
    "parse_duration",
    "parse_listen",
    "pubsub_topic",
    "pubsub_topics",
    "read_table",
    "same_key",
]

DAY = 86_400
_DURATION = re.compile(r"\s*([0-9]+(?:\.[0-9]+)?)\s*(ms|s|m|h|d)?\s*")
_UNITS = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": DAY, None: 1}
_METADATA = "waku_legacy.config.key"
_ORIGIN = "waku_legacy.config.key.origin"  # same_key(): the library field it repeats


class Kind(StrEnum):
    """What a key's TOML value is (the type column of docs/configuration.md's key tables)."""

    STRING = "string"
    INTEGER = "integer"
    NUMBER = "number"
    DURATION = "duration"  # seconds, or "45s", "30m", "6h", "7d"
    BOOLEAN = "boolean"
    STRINGS = "list of strings"  # also one comma-separated string
    INTEGERS = "list of integers"
    PATH = "path"  # a string, relative to the config file's folder
    LISTEN = "host:port"  # kept as written; the config class splits it
    ANY = "value"  # checked by the key's parse function alone


def parse_duration(value: Any, where: str, key: str) -> float:
    """Seconds from an integer/float or a string like ``"7d"``; positive."""
    if isinstance(value, bool):
        raise ConfigError(f"{where}: key '{key}' must be a duration, got a boolean")
    if isinstance(value, int | float) and abs(value) <= 2.0**63:  # float() of any TOML int
        seconds = float(value)
    elif isinstance(value, str) and (match := _DURATION.fullmatch(value)):
        seconds = float(match.group(1)) * _UNITS[match.group(2)]
    else:
        raise ConfigError(
            f"{where}: key '{key}' must be a duration (seconds, or a string like "
            f"'45s', '30m', '6h', '7d'), got {value!r}"
        )
    if not seconds > 0:  # also NaN
        raise ConfigError(f"{where}: key '{key}' must be a positive duration, got {value!r}")
    return seconds


def format_duration(seconds: float) -> str | float:
    """The duration as an operator writes it (``"7d"``, ``"250ms"``), or plain seconds."""
    for unit, size in (("d", DAY), ("h", 3600), ("m", 60), ("s", 1)):
        if seconds >= size and float(seconds / size).is_integer():
            return f"{int(seconds // size)}{unit}"
    if float(seconds * 1000).is_integer():
        return f"{int(seconds * 1000)}ms"
    return seconds


def parse_listen(value: str, where: str, key: str) -> tuple[str, int]:
    """``host:port`` (``[v6]:port``) with port 0..65535 (0: any free port)."""
    host, sep, port_text = value.rpartition(":")
    host = host.strip("[]")
    if not sep or not host or not port_text.isdigit() or not 0 <= int(port_text) <= 65535:
        raise ConfigError(f"{where}: key '{key}' must be host:port, got {value!r}")
    return host, int(port_text)


@dataclass(frozen=True, slots=True)
class KeyRef:
    """The key being read, for a parse function's errors and relative paths."""

    where: str
    name: str
    base: Path

    def error(self, expected: str, value: Any) -> ConfigError:
        return ConfigError(
            f"{self.where}: key '{self.name}' must be {expected}, got {_show(value)}"
        )


Parse = Callable[[Any, KeyRef], Any]


def _kind(value: Any) -> str:
    return {
        bool: "a boolean", int: "an integer", float: "a number", str: "a string",
        list: "a list", dict: "a table",
    }.get(type(value), type(value).__name__)  # fmt: skip


def _show(value: Any) -> str:
    text = repr(value)
    return f"{_kind(value)} {text[:60]}{'…' if len(text) > 60 else ''}"


@dataclass(frozen=True, slots=True)
class Key:
    """A key's declaration (the dataclass field's metadata); see :func:`key`."""

    doc: str
    kind: Kind | None = None
    min: float | None = None
    max: float | None = None
    above: float | None = None
    choices: tuple[str, ...] = ()
    parse: Parse | None = None
    example: Any = None
    hint: Any = None
    shown: str | None = None
    required: bool | None = None
    expected: str | None = None


def key(
    default: Any = MISSING,
    *,
    doc: str,
    kind: Kind | None = None,
    min: float | None = None,
    max: float | None = None,
    above: float | None = None,
    choices: Iterable[str] = (),
    parse: Parse | None = None,
    example: Any = None,
    hint: Any = None,
    shown: str | None = None,
    factory: Callable[[], Any] | None = None,
    required: bool | None = None,
    expected: str | None = None,
) -> Any:
    """A dataclass field that a TOML key of the same name sets.

    ``default`` (or ``factory``) is the one default; none: the key is required (unless
    ``required=False``: then the reader gives None and the table's reader fills it in).
    ``kind`` is inferred from the field's type (``int``, ``float``, ``str``, ``bool``,
    ``tuple[str, ...]``, ``tuple[int, ...]``, optionally ``| None``) unless given. ``min``,
    ``max`` (inclusive) and ``above`` (exclusive) bound numbers, and each integer of a list;
    ``choices`` the strings accepted. ``parse(value, KeyRef)`` turns the checked TOML value
    into the field's value (or raises ``ref.error``). ``doc`` is one line. In the generated
    example ``example`` is written as a set value; ``hint`` is shown commented out for a key
    without a default; ``shown`` says the default in words when it is computed;
    ``expected`` replaces the generated "must be …" text of its errors.
    """
    spec = Key(
        doc=doc, kind=kind, min=min, max=max, above=above, choices=tuple(choices),
        parse=parse, example=example, hint=hint, shown=shown, required=required,
        expected=expected,
    )  # fmt: skip
    if factory is not None:
        return field(default_factory=factory, metadata={_METADATA: spec})
    return field(default=default, metadata={_METADATA: spec})


def _field_of(cls: type, name: str) -> Any:
    for f in fields(cls):
        if f.name == name:
            return f
    raise TypeError(f"{cls.__name__} has no field {name!r}")


def same_key(cls: type, name: str, *, example: Any = None) -> Any:
    """A field declared as ``cls.name`` is (its default, kind, bounds and doc): a config
    table takes a setting of the library class that uses it, without writing it again.
    ``example``: this application's example value (its paths differ from another's)."""
    original = _field_of(cls, name)
    spec = original.metadata.get(_METADATA)
    if spec is None:
        raise TypeError(f"{cls.__name__}.{name} is not declared with key()")
    if example is not None:
        spec = replace(spec, example=example)
    metadata = {_METADATA: spec, _ORIGIN: f"{cls.__module__}.{cls.__qualname__}.{name}"}
    if original.default_factory is not MISSING:
        return field(default_factory=original.default_factory, metadata=metadata)
    return field(default=original.default, metadata=metadata)


def default_of(cls: type, name: str) -> Any:
    """The default ``cls`` declares for ``name`` (a factory's, made afresh): for code that
    needs the setting's value without a table at hand."""
    original = _field_of(cls, name)
    if original.default_factory is not MISSING:
        return original.default_factory()
    if original.default is MISSING:
        raise TypeError(f"{cls.__name__}.{name} has no default")
    return original.default


_INFERRED = {
    "str": Kind.STRING,
    "int": Kind.INTEGER,
    "float": Kind.NUMBER,
    "bool": Kind.BOOLEAN,
    "tuple[str, ...]": Kind.STRINGS,
    "tuple[int, ...]": Kind.INTEGERS,
}


@dataclass(frozen=True, slots=True)
class Declared:
    """One declared key of a config class, resolved: its kind, default and whether it must
    be given."""

    name: str
    spec: Key
    kind: Kind
    default: Any  # dataclasses.MISSING: none; a factory's: as made when first declared
    required: bool
    factory: Callable[[], Any] | None = None  # a default made afresh for each config

    @property
    def doc(self) -> str:
        return self.spec.doc


_DECLARED: dict[type, tuple[Declared, ...]] = {}


def declared_keys(cls: type) -> tuple[Declared, ...]:
    """The keys ``cls`` declares with :func:`key`, in field order."""
    if cls not in _DECLARED:
        _DECLARED[cls] = _declared(cls)
    return _DECLARED[cls]


def _declared(cls: type) -> tuple[Declared, ...]:
    found = []
    for f in fields(cls):
        spec = f.metadata.get(_METADATA)
        if spec is None:
            continue
        kind = spec.kind
        if kind is None:
            type_text = str(f.type).removesuffix(" | None")
            if type_text not in _INFERRED:
                raise TypeError(f"{cls.__name__}.{f.name}: give key(kind=…) for {f.type}")
            kind = _INFERRED[type_text]
        default, factory = f.default, None
        if f.default_factory is not MISSING:
            factory = f.default_factory
            default = factory()
        required = spec.required if spec.required is not None else default is MISSING
        found.append(Declared(f.name, spec, kind, default, required, factory))
    return tuple(found)


def check_unknown(data: Mapping[str, Any], accepted: Iterable[str], where: str) -> None:
    """Every key of ``data`` that is not ``accepted``, in one error, each with the accepted
    key it most looks like."""
    names = sorted(accepted)
    unknown = sorted(str(k) for k in data if k not in names)
    if not unknown:
        return
    shown = []
    for name in unknown:
        close = difflib.get_close_matches(name, names, n=1, cutoff=0.6)
        shown.append(f"{name!r} (did you mean {close[0]!r}?)" if close else repr(name))
    what = "unknown key" if len(unknown) == 1 else "unknown keys"
    raise ConfigError(f"{where}: {what} {', '.join(shown)}; expected some of {', '.join(names)}")


class KeyConflict(ValueError):
    """Raised by a table's ``__post_init__`` (its cross-key rules): key ``name`` must be
    ``expected`` given the others. The reader reports it as that key's error."""

    def __init__(self, name: str, expected: str) -> None:
        super().__init__(f"key '{name}' must be {expected}")
        self.name = name
        self.expected = expected


class KeyReader:
    """One TOML table read into the keys ``cls`` declares (``only``: the ones this table
    accepts; ``require``: more keys it needs; ``tables``: nested tables the caller reads).
    Constructing it checks the unknown keys, then the missing ones; :meth:`value` and
    :meth:`values` check and convert values."""

    def __init__(
        self, cls: type, data: Any, where: str, *, base: Path = Path("."),
        only: Iterable[str] | None = None, require: Iterable[str] = (),
        tables: Iterable[str] = (),
    ) -> None:  # fmt: skip
        if not isinstance(data, dict):
            raise ConfigError(f"{where} must be a table, got {_kind(data)}")
        wanted = None if only is None else set(only)
        self.keys = {d.name: d for d in declared_keys(cls) if wanted is None or d.name in wanted}
        self.data: dict[str, Any] = data
        self.where = where
        self.base = base
        check_unknown(data, [*self.keys, *tables], where)
        needed = set(require)
        missing = [n for n, d in self.keys.items() if (d.required or n in needed)
                   and data.get(n) is None]  # fmt: skip
        if len(missing) == 1:
            raise ConfigError(f"{where}: key '{missing[0]}' is required")
        if missing:
            raise ConfigError(f"{where}: keys {', '.join(map(repr, missing))} are required")

    def given(self, name: str) -> bool:
        return self.data.get(name) is not None

    def ref(self, name: str) -> KeyRef:
        return KeyRef(self.where, name, self.base)

    def value(self, name: str) -> Any:
        """The key's value: checked and converted, or its default (None: no default)."""
        declared = self.keys[name]
        raw = self.data.get(name)
        if raw is None:
            value = None if declared.default is MISSING else declared.default
            if declared.factory is not None:
                value = declared.factory()  # not one object shared by every config
            if declared.kind is Kind.PATH and isinstance(value, str):
                value = resolve_path(self.base, value)
            return value
        return convert(declared, raw, self.ref(name))

    def values(self) -> dict[str, Any]:
        """Every key's value (defaults for the absent ones)."""
        return {name: self.value(name) for name in self.keys}

    def build(self, cls: type, **fixed: Any) -> Any:
        """``cls`` from every key's value and ``fixed`` (its fields no key sets); a
        :class:`KeyConflict` of its ``__post_init__`` is the key's ConfigError."""
        try:
            return cls(**self.values(), **fixed)
        except KeyConflict as conflict:
            raise self.ref(conflict.name).error(
                conflict.expected, self.data.get(conflict.name)
            ) from None


def read_table(cls: type, data: Any, where: str, *, base: Path = Path("."), **fixed: Any) -> Any:
    """``cls`` from one TOML table; ``fixed``: its fields that no key sets."""
    return KeyReader(cls, data, where, base=base).build(cls, **fixed)


def convert(declared: Declared, raw: Any, ref: KeyRef) -> Any:
    """A present value checked against its declaration and converted to the field's."""
    spec = declared.spec
    value = _typed(declared, raw, ref)
    if declared.kind in (Kind.INTEGER, Kind.NUMBER) and not _within(spec, value):
        raise ref.error(spec.expected or bounds_text(declared), raw)
    if declared.kind is Kind.INTEGERS and not all(_within(spec, v) for v in value):
        raise ref.error(spec.expected or bounds_text(declared), raw)
    if spec.parse is not None:
        value = spec.parse(value, ref)
    if spec.choices and value not in spec.choices:
        raise ref.error(spec.expected or choices_text(spec.choices), value)
    return value


def _typed(declared: Declared, raw: Any, ref: KeyRef) -> Any:
    kind = declared.kind
    if kind in (Kind.STRING, Kind.PATH, Kind.LISTEN):
        if not isinstance(raw, str):
            raise ref.error("a string", raw)
        if "\x00" in raw:  # never meant; and a path or URL with one fails deep inside the OS
            raise ref.error("a string without NUL characters", raw)
        if kind is Kind.PATH:
            return resolve_path(ref.base, raw)
        if kind is Kind.LISTEN:
            parse_listen(raw, ref.where, ref.name)
        return raw
    if kind is Kind.INTEGER:
        if not isinstance(raw, int) or isinstance(raw, bool):
            raise ref.error("an integer", raw)
        return raw
    if kind is Kind.NUMBER:
        if not isinstance(raw, int | float) or isinstance(raw, bool) or abs(raw) > 2.0**63:
            raise ref.error(declared.spec.expected or bounds_text(declared), raw)
        if math.isnan(raw):
            raise ref.error(declared.spec.expected or bounds_text(declared), raw)
        return float(raw)
    if kind is Kind.DURATION:
        if declared.spec.min == 0 and raw == 0 and not isinstance(raw, bool):
            return 0.0  # a duration that may be off
        return parse_duration(raw, ref.where, ref.name)
    if kind is Kind.BOOLEAN:
        if not isinstance(raw, bool):
            raise ref.error("true or false", raw)
        return raw
    if kind is Kind.STRINGS:
        value = [v.strip() for v in raw.split(",") if v.strip()] if isinstance(raw, str) else raw
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise ref.error("a list of strings", raw)
        if any("\x00" in v for v in value):
            raise ref.error("a list of strings without NUL characters", raw)
        return tuple(value)
    if kind is Kind.INTEGERS:
        if not isinstance(raw, list) or not all(
            isinstance(v, int) and not isinstance(v, bool) for v in raw
        ):
            raise ref.error(bounds_text(declared), raw)
        return tuple(raw)
    return raw  # Kind.ANY: the parse function checks it


def _within(spec: Key, value: float) -> bool:
    return not (
        (spec.min is not None and value < spec.min)
        or (spec.max is not None and value > spec.max)
        or (spec.above is not None and value <= spec.above)
    )


def _number(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else f"{value:g}"


def bounds_text(declared: Declared) -> str:
    """What a number key accepts, in words (``an integer in 1..256``)."""
    spec = declared.spec
    low = "" if spec.min is None else _number(spec.min)
    high = "" if spec.max is None else _number(spec.max)
    if declared.kind is Kind.INTEGER:
        return f"an integer in {low}..{high}" if low or high else "an integer"
    if declared.kind is Kind.INTEGERS:
        return f"a list of integers in {low}..{high}" if low or high else "a list of integers"
    if spec.above is not None:
        text = "a positive number" if spec.above == 0 else f"a number above {_number(spec.above)}"
        return text + (f" and at most {high}" if high else "")
    if spec.min == 0 and not high:
        return "a non-negative number"
    if low and high:
        return f"a number in {low}..{high}"
    return f"a number >= {low}" if low else (f"a number <= {high}" if high else "a number")


def pubsub_topic(value: str, ref: KeyRef) -> str:
    """A key's parse function: a Waku v2 pubsub topic."""
    if not value.startswith("/waku/2/"):
        raise ref.error("a Waku v2 pubsub topic (/waku/2/…)", value)
    return value


def pubsub_topics(values: tuple[str, ...], ref: KeyRef) -> tuple[str, ...]:
    return tuple(pubsub_topic(v, ref) for v in values)


def choices_text(choices: tuple[str, ...]) -> str:
    return "one of " + ", ".join(f'"{c}"' for c in choices)
