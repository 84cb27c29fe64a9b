"""Issue 24: `--help` of every command shows every default (one formatter for the CLI)."""

from __future__ import annotations

import argparse
from collections.abc import Iterator

from waku_legacy.cli import build_parser, has_shown_default


def _parsers(
    parser: argparse.ArgumentParser, name: str = "waku-legacy"
) -> Iterator[tuple[str, argparse.ArgumentParser]]:
    yield name, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub_name, sub in action.choices.items():
                yield from _parsers(sub, f"{name} {sub_name}")


def test_every_default_is_in_the_help_of_its_command() -> None:
    checked = 0
    for name, parser in _parsers(build_parser()):
        text = " ".join(parser.format_help().split())
        for action in parser._actions:
            if not has_shown_default(action):
                continue
            option = action.option_strings[-1]
            at = text.index(option, text.index("options:"))
            shown = text[at : at + 400]
            assert "default" in shown and str(action.default) in text, (name, option, shown)
            checked += 1
    assert checked > 40  # the CLI has many defaults; none was skipped by accident


def test_flags_and_unset_options_show_no_default() -> None:
    parser = build_parser()
    text = " ".join(_sub(parser, "decode", "envelope").format_help().split())
    assert "--hex the input is hex text (0x optional) --max-size" in text
    assert "default: None" not in text and "default: False" not in text


def _sub(parser: argparse.ArgumentParser, *names: str) -> argparse.ArgumentParser:
    for name in names:
        action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
        parser = action.choices[name]
    return parser
