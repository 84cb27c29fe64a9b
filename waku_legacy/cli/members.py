"""``waku-legacy members preview``: what members' clients will import from the published history.

``members preview --community 0x… (--archive-dir DIR | --torrent F | --magnet URI [--peer …] |
--cid CID --logos-url URL) [--source SPEC…] [--store URL] [--link-message F…] [--json]
[--html FILE]``

1. the archives: read from ``--archive-dir``
   (:func:`waku_legacy.members.published.folder_entries`), or fetched as a member fetches them:
   the torrent back end (:func:`waku_legacy.archive.fetch.fetch_archives`, the ``fetch``
   command's code) or Logos Storage (:func:`waku_legacy.archive.logos_storage.fetch_by_cid`);
2. the archive-link messages: the ``0x<id>.magnet-message.json``/``.pb`` files next to the
   archives (the folder, its parent, ``../torrents``, the ``.torrent``'s folder) or
   ``--link-message``, the ``--store`` (newest 2000 per link chat) and the ``--source``\\ s;
3. the newest ``CommunityDescription`` signed by the community key in ``--source``/``--store``
   (members, bans, channels, roles);
4. :func:`waku_legacy.members.preview.preview_community` per generation; a table, ``--json``
   (version 1) or ``--html``.
"""

from __future__ import annotations

import argparse
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from waku_legacy.errors import ConfigError

if TYPE_CHECKING:
    from waku_legacy.history.sources import ArchiveEntries
    from waku_legacy.identity.topics import CommunityId
    from waku_legacy.members.published import Published

__all__ = ["add_source_arguments", "published_from_args", "register"]


@dataclass(frozen=True, slots=True)
class _Row:
    """A decoded source record as :class:`~waku_legacy.archive.clock.RawMessage`."""

    content_topic: str
    payload: bytes
    version: int


def _archives(args: argparse.Namespace, community: CommunityId, scratch: Path) -> ArchiveEntries:
    """Every archived message, read from ``--archive-dir`` or fetched as a member does (the
    options ``history export`` shares: :func:`waku_legacy.history.sources.open_archive_entries`)."""
    import dataclasses

    from waku_legacy.history.sources import open_archive_entries

    found = open_archive_entries(args, community, scratch, command="members preview")
    return dataclasses.replace(found, entries=list(found.entries))  # the preview reads them twice


def _link_mismatch(document: dict[str, Any], previewed: str) -> list[str]:
    """A warning when the newest link found names other archives than those previewed."""
    from waku_legacy.archive.torrent import parse_magnet_uri
    from waku_legacy.errors import WakuLegacyError

    warnings = []
    for name, view in document["generations"].items():
        link = view["link"]["link"]
        if link is None:
            continue
        try:
            named = parse_magnet_uri(link).info_hash if link.startswith("magnet:") else link
        except WakuLegacyError:
            named = link
        if named != previewed:
            warnings.append(
                f"the newest link a {name} client accepts names {link}, not the archives "
                f"previewed ({previewed}): members fetch those"
            )
    return warnings


def _link_files(
    args: argparse.Namespace, community: CommunityId, folder: Path | None
) -> list[Path]:
    """``--link-message`` files, else the link message files the builder writes near the
    archives (``export``: ``out/archives`` and ``out/torrents``)."""
    if args.link_message:
        return [Path(p) for p in args.link_message]
    if folder is None:
        return []
    name = f"{community}.magnet-message"
    for place in (folder, folder.parent, folder.parent / "torrents", folder / "torrents"):
        for suffix in (".json", ".pb"):  # the JSON holds every chat's message, the .pb one
            if (place / (name + suffix)).is_file():
                return [place / (name + suffix)]
    return []


def _source_rows(source: Any, community: CommunityId, work_dir: str) -> Iterator[_Row]:
    """A source's records on the community's chat and its two link chats."""
    import dataclasses

    from waku_legacy.archive.clock import evidence_topics
    from waku_legacy.identity.topic_mapping import TopicMapping
    from waku_legacy.migrate.config import SourceKind
    from waku_legacy.migrate.decode import decode_record
    from waku_legacy.migrate.sources import plan_source, read_task

    topics = evidence_topics(community)
    if source.kind is SourceKind.STORE_REST and source.url:
        source = dataclasses.replace(
            source, content_topics=topics, partitions=None, state_file=None
        )
    # decoding needs a mapping; its pubsub topic is never read here nor written anywhere
    mapping = TopicMapping.build("/waku/2/rs/16/64", [])
    for task in plan_source(source, 1, work_dir):
        for batch in read_task(task):
            for raw in batch.to_pylist():
                if raw.get("data") is None:
                    continue
                row = decode_record(raw, mapping)
                if not row["quarantined"] and row["content_topic"] in topics:
                    yield _Row(row["content_topic"], bytes(row["payload"]), int(row["version"]))


def published_from_args(
    args: argparse.Namespace, community: CommunityId, folder: Path | None, scratch: Path
) -> Published:
    """The descriptions and archive-link messages the source options name (``--link-message``
    or the link files beside the archives, ``--store``, ``--source``)."""
    from waku_legacy.members.published import (
        Published,
        read_link_file,
        read_published,
        read_store_published,
    )
    from waku_legacy.migrate.cli import parse_source_spec
    from waku_legacy.migrate.config import parse_source

    out = Published()
    for path in _link_files(args, community, folder):
        out.links += read_link_file(path)
    specs = list(args.source or ())
    if args.store and args.store.startswith(("http://", "https://")):
        specs.append(args.store)  # a v2 store node's REST API: read as a source is
    elif args.store:
        from waku_legacy.store import open_store

        with open_store(args.store) as store:
            out.merge(read_store_published(store, community, "store"))
    for number, spec in enumerate(specs, start=1):
        config = parse_source(parse_source_spec(spec, number), number, Path.cwd())
        rows = _source_rows(config, community, str(scratch / "sources"))
        out.merge(read_published(rows, community, config.name))
    return out


def _preview(args: argparse.Namespace) -> int:
    from waku_legacy.console import print_json
    from waku_legacy.durable import write_atomic
    from waku_legacy.identity.descriptions import newest_description
    from waku_legacy.identity.topics import CommunityId
    from waku_legacy.members.preview import preview_community
    from waku_legacy.members.report import render_preview_html, render_preview_table

    community = CommunityId.parse(args.community)
    if not args.source and not args.store:
        raise ConfigError(
            "members preview needs --source or --store: the community's signed "
            "CommunityDescription (members, bans, channels) is read there"
        )
    with tempfile.TemporaryDirectory(prefix="waku-legacy-members-") as scratch_name:
        scratch = Path(scratch_name)
        archives = _archives(args, community, scratch)
        published = published_from_args(args, community, archives.folder, scratch)
    description = newest_description(published.descriptions)
    if description is None:
        given = [f"--source {spec}" for spec in args.source or ()]
        given += [f"--store {args.store}"] if args.store else []
        raise ConfigError(
            f"members preview: no CommunityDescription signed by {community} in "
            f"{', '.join(given)} ({published.unreadable_descriptions} unreadable message(s) on "
            "its chat): give a --store that holds it, e.g. a v2 store node's REST URL "
            "(--store http://HOST:8645) or the bridge's store (--store sqlite:PATH), or a "
            "--source holding the community's own chat"
        )
    document = preview_community(
        list(archives.entries), community, description, published.links, origin=archives.origin
    )
    if archives.link is not None:
        document["warnings"] += _link_mismatch(document, archives.link)
    if args.html:
        write_atomic(Path(args.html), render_preview_html(document).encode(), fsync=False)
    if args.json:
        print_json(document)
    else:
        print(render_preview_table(document))
    return 0


def add_source_arguments(parser: argparse.ArgumentParser) -> None:
    """The community and source options ``members preview`` and ``history export`` share:
    the archives (exactly one of --archive-dir, --torrent, --magnet, --cid), where
    descriptions and link messages are read (--source, --store, --link-message), the fetch's
    options and the torrent session's."""
    from waku_legacy.archive.cli import add_session
    from waku_legacy.migrate.cli import SOURCE_SPECS

    parser.add_argument("--community", required=True, help="community id, 0x + 66 hex")
    parser.add_argument("--archive-dir", help="archive folder (holding 0x<id>/data and index)")
    parser.add_argument("--torrent", help=".torrent file: fetch the archives as a member would")
    parser.add_argument("--magnet", help="magnet link: fetch the archives as a member would")
    parser.add_argument("--cid", help="Logos Storage index CID (with --logos-url)")
    parser.add_argument("--logos-url", help="Logos Storage node REST root, with --cid")
    parser.add_argument("--peer", action="append", help="host:port of a seeder (repeatable)")
    parser.add_argument(
        "--source", action="append", default=[],
        help=f"{SOURCE_SPECS} (descriptions and link messages are read there)",
    )  # fmt: skip
    parser.add_argument(
        "--store",
        help="v2 store: a store node's REST URL (http(s)://HOST:PORT) or a store database "
        "(sqlite:PATH, postgresql://…); descriptions and link messages are read there",
    )
    parser.add_argument(
        "--link-message", action="append", default=[],
        help="archive-link message file (.pb or .json); default: the one next to the archives",
    )  # fmt: skip
    parser.add_argument("--flavour", choices=("status-go", "seed-spec"), default="status-go")
    parser.add_argument("--save-dir", help="where --magnet/--torrent fetch to (default: temp)")
    parser.add_argument("--metadata-timeout", type=float, default=20.0)
    parser.add_argument("--timeout", type=float, default=600.0, help="data timeout, seconds")
    parser.add_argument("--quiet", action="store_true", help="no progress on stderr")
    add_session(parser, "0.0.0.0:0")


def register(subparsers: Any) -> None:
    members = subparsers.add_parser("members", help="what members' Status clients will see")
    sub = members.add_subparsers(dest="members_command", metavar="SUBCOMMAND")
    sub.required = True
    preview = sub.add_parser(
        "preview", help="act as a member's client of each generation on the published history"
    )
    add_source_arguments(preview)
    preview.add_argument("--json", action="store_true", help="print the report as JSON")
    preview.add_argument("--html", help="also write the report as one self-contained HTML page")
    preview.set_defaults(func=_preview)
