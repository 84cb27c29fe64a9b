"""Example configs and docs/configuration.md's key tables, generated from the key declarations
(:mod:`waku_legacy.config.keys`): ``scripts/gen-config-docs.py`` writes them, and a test
fails when the committed files differ from what it would write.

A :class:`ConfigLayout` says which tables an application's config has, in which order, which
of them the example sets (the others are shown commented out) and, for a table a kind of
which takes other keys (``[[source]]``), which keys; every other word comes from the
declarations: a key is set in the example when it declares an ``example``, else shown
commented out with its default (or its ``hint``), followed by its one-line doc.
"""

from __future__ import annotations

import textwrap
from collections.abc import Mapping
from dataclasses import MISSING, dataclass, field
from typing import Any

from waku_legacy.config.keys import Declared, Kind, bounds_text, declared_keys, format_duration
from waku_legacy.config.toml_text import toml_value

__all__ = ["ConfigLayout", "TableLayout", "example_text", "key_tables_markdown"]

COMMENT_COLUMN = 42  # where a line's comment starts, as in the hand-written examples before
WIDTH = 100


@dataclass(frozen=True, slots=True)
class TableLayout:
    """One TOML table of an example: ``name`` (``v1.limits``), its class, ``array`` for
    ``[[name]]``, ``active``: written as settings (else commented out), ``only``: the keys
    shown (None: all), ``values``: settings of this table that replace the keys' examples."""

    name: str
    cls: type
    array: bool = False
    active: bool = True
    only: tuple[str, ...] | None = None
    values: Mapping[str, Any] = field(default_factory=dict)
    note: str | None = None  # the comment beside its header (default: the class's doc)


@dataclass(frozen=True, slots=True)
class ConfigLayout:
    """An application's config file: its header comment and its tables in order."""

    header: str
    tables: tuple[TableLayout, ...]


def _doc_of(layout: TableLayout) -> str:
    if layout.note is not None:
        return layout.note
    return " ".join((layout.cls.__doc__ or "").split("\n\n")[0].split())


def toml_of(declared: Declared, value: Any) -> str:
    """A value of the key as an operator writes it in TOML."""
    if declared.kind is Kind.DURATION and isinstance(value, int | float) and value:
        value = format_duration(float(value))
    elif isinstance(value, float) and value.is_integer() and declared.kind is Kind.NUMBER:
        value = int(value)
    return toml_value(value)


def default_text(declared: Declared) -> str | None:
    """The default in words (the key tables' default column); None: the key is required."""
    if declared.spec.shown is not None:
        return declared.spec.shown
    if declared.default is MISSING:
        return None
    if declared.default is None:
        return "none"
    return toml_of(declared, declared.default)


def type_text(declared: Declared) -> str:
    """The key tables' type column: the kind and what bounds it."""
    spec = declared.spec
    if spec.choices:
        return "one of " + ", ".join(f'`"{c}"`' for c in spec.choices)
    if declared.kind in (Kind.INTEGER, Kind.NUMBER, Kind.INTEGERS):
        text = bounds_text(declared)
        return text.removeprefix("an ").removeprefix("a ")
    if declared.kind is Kind.DURATION and spec.min == 0:
        return "duration (0: off)"
    return str(declared.kind)


def _wrapped_comment(start: str, doc: str) -> list[str]:
    """``start`` with ``# doc`` beside it (under it when ``start`` is long), wrapped at WIDTH
    in the comment column."""
    beside = len(start) + 2 <= COMMENT_COLUMN + 16
    column = max(COMMENT_COLUMN, len(start) + 2) if beside else COMMENT_COLUMN
    chunks = textwrap.wrap(doc, WIDTH - column - 4) or [""]
    lines = [start] if not beside else []
    first, *rest = chunks
    lines.append(f"{start if beside else '':<{column}}# {first}".rstrip())
    lines += [f"{'':<{column}}#   {chunk}" for chunk in rest]
    return lines


def _key_lines(declared: Declared, layout: TableLayout) -> list[str]:
    spec = declared.spec
    if declared.name in layout.values:
        value, active = layout.values[declared.name], True
    elif spec.example is not None:
        value, active = spec.example, True
    elif spec.hint is not None:
        value, active = spec.hint, False
    elif declared.default is not MISSING and declared.default is not None:
        value, active = declared.default, False
    else:
        raise ValueError(
            f"{layout.cls.__name__}.{declared.name}: declare an example or a hint (no default)"
        )
    doc = spec.doc
    default = default_text(declared)
    shown = toml_of(declared, value)
    if default is not None and default not in (shown, "none"):
        doc += f" (default: {default})"
    setting = f"{declared.name} = {shown}"
    if not (active and layout.active):
        setting = "# " + setting
    return _wrapped_comment(setting, doc)


def _header(layout: TableLayout) -> str:
    name = f"[[{layout.name}]]" if layout.array else f"[{layout.name}]"
    return name if layout.active else "# " + name


def example_text(config: ConfigLayout) -> str:
    """The example config file: every declared key of every table, set or commented out."""
    lines = [f"# {line}".rstrip() for line in config.header.strip().splitlines()]
    for layout in config.tables:
        lines.append("")
        lines += _wrapped_comment(_header(layout), _doc_of(layout))
        for declared in declared_keys(layout.cls):
            if layout.only is None or declared.name in layout.only:
                lines += _key_lines(declared, layout)
    return "\n".join(lines) + "\n"


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def key_tables_markdown(config: ConfigLayout, *, skip: tuple[str, ...] = ()) -> str:
    """One Markdown table per TOML table of ``config`` (each table once, with every key its
    class declares; ``skip``: tables described elsewhere)."""
    out: list[str] = []
    seen = set(skip)
    for layout in config.tables:
        if layout.name in seen:
            continue
        seen.add(layout.name)
        name = f"[[{layout.name}]]" if layout.array else f"[{layout.name}]"
        out += [f"`{name}`: {_cell(_doc_of(layout))}", ""]
        out += ["| key | type | default | what |", "| --- | --- | --- | --- |"]
        for declared in declared_keys(layout.cls):
            default = default_text(declared)
            shown = "required" if default is None else (
                f"`{default}`" if declared.spec.shown is None and default != "none" else default
            )  # fmt: skip
            out.append(
                f"| `{declared.name}` | {_cell(type_text(declared))} | {_cell(shown)} | "
                f"{_cell(declared.doc)} |"
            )
        out.append("")
    return "\n".join(out)
