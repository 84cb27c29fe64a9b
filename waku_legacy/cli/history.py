"""``waku-legacy history export``: a community's history as files a person reads without a
Status client.

``history export --community 0x… --format html|json|jsonl|csv|txt|md --out PATH
[--channel UUID|NAME] [--after DATE] [--before DATE] [--author KEY]`` with the source
options of ``members preview`` (:func:`waku_legacy.cli.members.add_source_arguments`):

- the archives (``--archive-dir``, ``--torrent``, ``--magnet [--peer]``, ``--cid
  --logos-url``), opened by :func:`waku_legacy.history.sources.open_archive_entries` and
  indexed into a scratch SQLite index; the newest signed CommunityDescription (names, bans,
  moderators) from ``--source``/``--store``, as ``members preview`` reads it;
- or, without an archive option, the v2 store database ``--store`` (its readable tables,
  which the bridge and the migration keep; a store without them is indexed into a scratch
  index first).

Then :func:`waku_legacy.history.export.export_history`; progress on stderr (a bar on a
terminal, JSON lines otherwise), a JSON summary on stdout.
"""

from __future__ import annotations

import argparse
import datetime as dt
import functools
import os
import re
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

from waku_legacy.errors import ConfigError, WakuLegacyError

if TYPE_CHECKING:
    from collections.abc import Iterator

    from waku_legacy.history.index import HistoryIndex
    from waku_legacy.identity.topics import CommunityId
    from waku_legacy.members.preview import ArchivedEntry

__all__ = ["parse_author", "parse_date", "register"]

_DATE = re.compile(r"\d{4}-\d{2}-\d{2}")


def parse_date(text: str, option: str) -> int:
    """``YYYY-MM-DD`` (midnight UTC) or an ISO 8601 time (UTC unless it says): ms."""
    try:
        if _DATE.fullmatch(text):
            moment = dt.datetime.combine(dt.date.fromisoformat(text), dt.time(), dt.UTC)
        else:
            moment = dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
            if moment.tzinfo is None:
                moment = moment.replace(tzinfo=dt.UTC)
    except ValueError:
        raise ConfigError(
            f"{option} {text!r}: give a date YYYY-MM-DD or a time 2024-03-12T09:00:00Z"
        ) from None
    return int(moment.timestamp() * 1000)


def parse_author(text: str) -> str:
    """An author key as ``0x04…`` (given as such or as status-go's ``zQ3…``)."""
    from waku_legacy.history.alias import public_key_bytes, public_key_of_serialized

    value = text.strip()
    try:
        raw = public_key_of_serialized(value) if value.startswith("z") else public_key_bytes(value)
    except WakuLegacyError as exc:
        raise ConfigError(f"--author {text!r}: not a member key (0x04… or zQ3…): {exc}") from None
    return "0x" + raw.hex()


def _description_into(
    args: argparse.Namespace,
    community: CommunityId,
    folder: Path | None,
    scratch: Path,
    index: HistoryIndex,
) -> bool:
    """The newest description signed by the community key in the --source/--store given."""
    from waku_legacy.cli.members import published_from_args
    from waku_legacy.identity.descriptions import newest_description

    if not args.source and not args.store and not args.link_message:
        return False
    published = published_from_args(args, community, folder, scratch)
    description = newest_description(published.descriptions)
    if description is None:
        return False
    index.set_description(description, str(community))
    return True


def _open_index(
    args: argparse.Namespace, community: CommunityId, scratch: Path, log: Any
) -> tuple[HistoryIndex, str]:
    """The readable index to export from, and its database URL."""
    from waku_legacy.history.index import HistoryIndex
    from waku_legacy.history.sources import (
        index_from_archive_entries,
        index_from_store,
        open_archive_entries,
    )

    scratch_dsn = str(scratch / "history.sqlite3")
    archived = any((args.archive_dir, args.torrent, args.magnet, args.cid))
    if not archived:
        if not args.store or args.store.startswith(("http://", "https://")):
            raise ConfigError(
                "history export needs the archives (--archive-dir, --torrent, --magnet or "
                "--cid with --logos-url) or a store database (--store sqlite:PATH or "
                "postgresql://…)"
            )
        index = HistoryIndex.open(args.store)
        summary = index.reader().community(str(community))
        if summary is not None and summary.messages:
            return index, args.store
        index.close()
        log(f"{args.store} has no readable history of {community}: indexing its messages")
        index = HistoryIndex.open(scratch_dsn, create=True)
        counts = index_from_store(args.store, [community], index)
        log(f"indexed {counts.to_json()}")
        return index, scratch_dsn
    index = HistoryIndex.open(scratch_dsn, create=True)
    archives = open_archive_entries(args, community, scratch, command="history export")
    if not _description_into(args, community, archives.folder, scratch, index):
        log(
            "no CommunityDescription signed by the community key in the --source/--store "
            "given: channels are shown by id, banned authors are not known"
        )
    newest: list[int] = []  # the newest archive window's start

    def entries() -> Iterator[ArchivedEntry]:
        for entry in archives.entries:
            if not newest or entry.window_from > newest[0]:
                newest[:] = [entry.window_from]
            yield entry

    counts = index_from_archive_entries(entries(), str(community), index, source=archives.source)
    log(f"indexed {counts.to_json()} from {archives.origin}")
    if newest:
        from waku_legacy.archive.partition import WEEK_SECONDS

        link = args.magnet or (f"magnet:?xt=urn:btih:{archives.link}" if args.torrent else "")
        link = link or args.cid or ""
        index.set_archive_link(str(community), link, newest[0] + WEEK_SECONDS)
    return index, scratch_dsn


def _channel_id(index: HistoryIndex, community: str, given: str | None) -> str | None:
    """--channel as a uuid, or a channel's name (as the newest description names it)."""
    if given is None:
        return None
    summary = index.reader().community(community)
    channels = summary.channels if summary else ()
    for channel in channels:
        if given.lower() in (channel.id, channel.name.lower(), "#" + channel.name.lower()):
            return channel.id
    known = ", ".join(f"{c.name or '?'} ({c.id})" for c in channels) or "none"
    raise ConfigError(f"--channel {given}: no such channel (channels: {known})")


def _export(args: argparse.Namespace) -> int:
    from waku_legacy.console import Progress, print_json
    from waku_legacy.history.export import ExportFilter, export_history, index_reader
    from waku_legacy.history.model import ViewPolicy
    from waku_legacy.identity.topics import CommunityId

    community = CommunityId.parse(args.community)
    after = parse_date(args.after, "--after") if args.after else None
    before = parse_date(args.before, "--before") if args.before else None
    if after is not None and before is not None and after >= before:
        raise ConfigError("--after must be earlier than --before")
    author = parse_author(args.author) if args.author else None
    if args.workers < 1:
        raise ConfigError("--workers must be at least 1")
    progress = Progress(not args.quiet, prefix="history export")
    with tempfile.TemporaryDirectory(prefix="waku-legacy-history-") as scratch_name:
        index, dsn = _open_index(args, community, Path(scratch_name), progress.log)
        try:
            channel = _channel_id(index, str(community), args.channel)
            policy = ViewPolicy(hide_banned=not args.show_banned)
            reader = index.reader(policy)
            summary = reader.community(str(community))
            total = summary.messages if summary is not None else None
            if summary is not None and channel is not None:
                total = next(c.messages for c in summary.channels if c.id == channel)
            selection = ExportFilter(channel, after, before, author)
            with progress.bar("export", total, "msg") as step:
                counts = export_history(
                    reader, str(community), args.format, Path(args.out), selection=selection,
                    advance=step.update, workers=args.workers,
                    reader_factory=functools.partial(index_reader, dsn, policy),
                )  # fmt: skip
        finally:
            index.close()
    print_json({"out": str(Path(args.out).resolve()), "format": args.format, **counts.to_json()})
    return 0


def register(subparsers: Any) -> None:
    from waku_legacy.cli.members import add_source_arguments
    from waku_legacy.history.export import FORMATS

    history = subparsers.add_parser(
        "history", help="a community's history for people: files to read without Status"
    )
    sub = history.add_subparsers(dest="history_command", metavar="SUBCOMMAND")
    sub.required = True
    export = sub.add_parser(
        "export",
        help="write the history as a static site (html) or one file per channel "
        "(json, jsonl, csv, txt, md)",
    )
    add_source_arguments(export)
    export.add_argument("--format", required=True, choices=FORMATS, help="what to write")
    export.add_argument("--out", required=True, help="the folder written (replaced whole)")
    export.add_argument("--channel", help="one channel only: its uuid or name (default: all)")
    export.add_argument("--after", help="messages at or after this (YYYY-MM-DD or ISO time, UTC)")
    export.add_argument("--before", help="messages before this (YYYY-MM-DD or ISO time, UTC)")
    export.add_argument("--author", help="one author's messages only (0x04… or zQ3… key)")
    export.add_argument(
        "--workers", type=int, default=min(os.cpu_count() or 1, 8),
        help="html: processes rendering the day pages (default: the cores, at most 8)",
    )  # fmt: skip
    export.add_argument(
        "--show-banned", action="store_true",
        help="include authors banned in the newest description (default: hidden)",
    )  # fmt: skip
    export.set_defaults(func=_export)
