"""``waku-legacy``: the command line.

Each command group lives beside the code it drives and exposes
``register(subparsers) -> None``; the handler it sets (``set_defaults(func=...)``) takes the
parsed namespace and returns an exit code. Here only the groups that drive no single
package: ``plan`` (legacy sources to ``migrate.toml`` and ``bridge.toml``), ``demo`` (the
operator's guide on generated data), ``decode`` (what a blob of wire bytes holds),
``members`` (``members preview``), ``history`` (``history export``); ``__main__`` runs the
command line as ``python -m waku_legacy.cli``. Command modules must import heavy dependencies
(pyspark, libtorrent) inside their handlers, so that ``waku-legacy hash`` starts fast.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import sys
import tomllib
import traceback
from collections.abc import Sequence

from waku_legacy.errors import WakuLegacyError, innermost_error

# Modules that add subcommands, in the order their commands appear in --help.
COMMAND_MODULES: tuple[str, ...] = (
    "waku_legacy.identity.cli",  # hash, topics
    "waku_legacy.cli.decode",  # decode
    "waku_legacy.archive.cli",  # archive, seed, fetch
    "waku_legacy.mailserver_compat.cli",  # v1 serve, v1 pull
    "waku_legacy.cli.plan",  # plan
    "waku_legacy.migrate.cli",  # migrate, export, audit
    "waku_legacy.cli.demo",  # demo
    "waku_legacy.bridge.cli",  # serve
    "waku_legacy.p2p.cli",  # store query
    "waku_legacy.cli.members",  # members preview
    "waku_legacy.cli.history",  # history export
)


class HelpFormatter(argparse.RawDescriptionHelpFormatter):
    """The --help of every command: descriptions as written, every default shown, and an
    option that takes a value but has none says so (issue 34)."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        text = action.help
        if text is None or says_what_it_defaults_to(text):
            return text
        if has_shown_default(action):
            return f"{text} (default: %(default)s)"
        if has_no_default(action):
            return f"{text} (no default)"
        return text


#: Help texts that already say what happens when the option is left out.
_SAYS_ITS_DEFAULT = ("default", "without it", "none:")


def says_what_it_defaults_to(text: str) -> bool:
    return any(words in text.lower() for words in _SAYS_ITS_DEFAULT)


def has_no_default(action: argparse.Action) -> bool:
    """An option that takes a value, is not required and has no default (None, or an empty
    list of a repeatable one): left out, it is not used, which its help says."""
    return (
        bool(action.option_strings) and action.nargs != 0 and not action.required
        and action.default is not argparse.SUPPRESS
        and (action.default is None or action.default == [])
    )  # fmt: skip


def has_shown_default(action: argparse.Action) -> bool:
    """Whether ``action``'s default is worth showing: an option whose default is a value
    (not a flag's False, not None or an empty list)."""
    default = action.default
    if not action.option_strings or default is argparse.SUPPRESS:
        return False
    return not (default is None or default is False or default == [] or default == ())


def _show_defaults(parser: argparse.ArgumentParser) -> None:
    """One formatter for the whole CLI: every parser and subparser uses HelpFormatter, and
    an option with a default but no help text gets one that shows it."""
    parser.formatter_class = HelpFormatter
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in dict.fromkeys(action.choices.values()):
                _show_defaults(sub)
        elif action.help is None and has_shown_default(action):
            action.help = "default: %(default)s"
        elif action.help is None and has_no_default(action):
            action.help = "no default"


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="waku-legacy",
        description="Keep Status communities' Waku v1 history alive on Waku v2.",
    )
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    subparsers.required = True
    for name in COMMAND_MODULES:
        # Every command module must import: a renamed or broken one fails here, loudly,
        # instead of dropping its commands from --help.
        module = importlib.import_module(name)
        module.register(subparsers)
    _show_defaults(parser)
    return parser


#: Exit code of an expected failure (bad input, bad config, a file that cannot be read).
EXIT_ERROR = 2
#: Exit code of an internal error: an exception no code path expected (a bug), EX_SOFTWARE.
EXIT_INTERNAL = 70

# Failures that come from what the command was given, not from a bug: the package's typed
# errors, files that cannot be read (OSError names the path), input nested deeper than the
# parsers can descend (RecursionError), and what decoders raise on malformed text or bytes
# (ValueError and its subclasses json.JSONDecodeError, tomllib.TOMLDecodeError,
# UnicodeDecodeError). Every one is a single line on stderr and exit code 2.
EXPECTED_ERRORS: tuple[type[BaseException], ...] = (
    WakuLegacyError,
    OSError,
    RecursionError,
    ValueError,
)


def describe_error(exc: BaseException) -> str:
    """One line saying what went wrong, for an expected failure."""
    if isinstance(exc, WakuLegacyError):
        return str(exc)
    if isinstance(exc, OSError):
        reason = exc.strerror or str(exc) or type(exc).__name__
        if exc.filename is not None:
            target = f" -> {exc.filename2}" if exc.filename2 is not None else ""
            return f"{exc.filename}{target}: {reason}"
        return reason
    if isinstance(exc, RecursionError):
        return "the input is nested too deeply to process"
    if isinstance(exc, UnicodeDecodeError):
        return f"not {exc.encoding} text (byte {exc.start}: {exc.reason})"
    if isinstance(exc, tomllib.TOMLDecodeError):
        return f"not valid TOML: {exc}"
    if isinstance(exc, json.JSONDecodeError):
        return f"not valid JSON: {exc}"
    text = str(exc).splitlines()[0] if str(exc) else ""
    return f"invalid input: {text or type(exc).__name__}"


#: Exit code when the reader of our output went away (``… | head``): 128 + SIGPIPE, as a
#: shell reports a command a closed pipe stopped.
EXIT_CLOSED_PIPE = 141


def _quiet_closed_pipe() -> int:
    """The reader of stdout closed it: end without a word (and without Python's own
    "Exception ignored … BrokenPipeError" when it flushes stdout at exit)."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):  # stdout is not a real file (a test's capture)
        pass
    finally:
        os.close(devnull)
    return EXIT_CLOSED_PIPE


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    prog = f"waku-legacy {args.command}"
    try:
        try:
            code = int(args.func(args) or 0)
            sys.stdout.flush()  # a closed pipe shows here, while we can still say nothing
            return code
        except BaseExceptionGroup as group:
            inner = innermost_error(group, EXPECTED_ERRORS)
            if inner is group:
                raise
            raise inner from None
    except BrokenPipeError:
        return _quiet_closed_pipe()
    except KeyboardInterrupt:
        print(f"{prog}: interrupted", file=sys.stderr)
        return 130
    except EXPECTED_ERRORS as exc:
        print(f"{prog}: error: {describe_error(exc)}", file=sys.stderr)
        if os.environ.get("WAKU_LEGACY_TRACEBACK"):
            traceback.print_exc()
        return EXIT_ERROR
    except Exception as exc:  # a bug: say so, and keep the traceback for the report
        print(
            f"{prog}: internal error (a bug, please report it with the traceback below): "
            f"{type(exc).__name__}: {exc}",
            file=sys.stderr,
        )
        traceback.print_exc()
        return EXIT_INTERNAL

