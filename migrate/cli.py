"""``waku-legacy migrate``, ``waku-legacy export`` and ``waku-legacy audit``.

- ``migrate --config FILE [--json]``: the whole migration described by a TOML file
  (:mod:`~waku_legacy.migrate.config`).
- ``export --community 0x… --channel UUID … --source SPEC … --out DIR``: one community's
  legacy history (archives, torrent, magnet link, report) without a config file or a store.
  Without ``--channel`` the channels are found in the sources: the newest
  ``CommunityDescription`` signed by the community key (:mod:`~waku_legacy.migrate.discover`);
  the report lists them (``channels_from_description``), and so does the progress on stderr.
  ``SPEC`` is ``leveldb:PATH``, ``dump:PATH`` (globs ok), ``postgresql://…``,
  ``http(s)://…`` (a live nwaku REST node), ``rest-pages:PATH`` or ``sqlite:PATH`` (an nwaku
  SQLite archive).
- ``audit``: a community's published archives against its sources
  (:mod:`~waku_legacy.migrate.audit`).

``waku-legacy demo`` (:mod:`waku_legacy.cli.demo`) runs ``plan`` and then this migration
over a generated sample.

Progress goes to stderr; the report to stdout (a table, or JSON with ``--json``).
``WAKU_LEGACY_FAULT`` (see :mod:`~waku_legacy.faults`) makes a run kill itself at a
named step, for crash tests.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from waku_legacy.errors import ConfigError

if TYPE_CHECKING:
    from waku_legacy.identity.topics import CommunityId
    from waku_legacy.migrate.audit.repair import RepairKeys
    from waku_legacy.migrate.audit.request import AuditRequest
    from waku_legacy.migrate.config import MigrateConfig
    from waku_legacy.migrate.discover import ChannelDiscovery
    from waku_legacy.migrate.progress import SparkProgress
    from waku_legacy.migrate.report import RunReport

__all__ = ["add_run_options", "clock_line", "parse_source_spec", "register", "run_config"]

#: What ``--source`` takes (every command that reads legacy sources says it in its help).
SOURCE_SPECS = "leveldb:PATH, dump:PATH, postgresql://…, http(s)://…, rest-pages:PATH, sqlite:PATH"


def parse_source_spec(spec: str, number: int) -> dict[str, Any]:
    """One ``--source`` value as a ``[[source]]`` table."""
    text = spec.strip()
    name = f"source-{number}"
    if text.startswith(("postgresql://", "postgres://")):
        return {"kind": "mailserver-postgres", "dsn": text, "name": name}
    if text.startswith(("http://", "https://")):
        return {"kind": "store-rest", "url": text, "name": name}
    prefixes = {
        "leveldb:": "mailserver-leveldb",
        "dump:": "envelope-dump",
        "rest-pages:": "store-rest",
        "sqlite:": "store-sqlite",
    }
    for prefix, kind in prefixes.items():
        if text.startswith(prefix) and len(text) > len(prefix):
            return {"kind": kind, "path": text[len(prefix) :], "name": name}
    raise ConfigError(
        f"--source {spec!r}: expected leveldb:PATH, dump:PATH, postgresql://…, http(s)://…, "
        "rest-pages:PATH or sqlite:PATH"
    )


def _emit(args: argparse.Namespace, report: RunReport) -> None:
    from waku_legacy.console import print_json
    from waku_legacy.migrate.report import render_report

    if args.json:
        print_json(report.to_json())
    else:
        print(render_report(report))


def run_config(config: MigrateConfig, args: argparse.Namespace) -> RunReport:
    from waku_legacy.faults import fault_from_env
    from waku_legacy.migrate.pipeline import run_migration
    from waku_legacy.migrate.progress import SparkProgress

    progress = SparkProgress(enabled=not args.quiet)
    return run_migration(config, fault=fault_from_env(), progress=progress)


def _with_master(data: dict[str, Any], master: str | None) -> dict[str, Any]:
    if master:
        data.setdefault("spark", {})["master"] = master
    return data


def _migrate(args: argparse.Namespace) -> int:
    from waku_legacy.config import read_toml
    from waku_legacy.migrate.config import load_config, parse_config

    if args.master:
        path = Path(args.config)
        config = parse_config(
            _with_master(read_toml(path), args.master),
            base_dir=path.resolve().parent,
            origin=str(path),
        )
    else:
        config = load_config(args.config)
    _emit(args, run_config(config, args))
    return 0


def _discover(
    args: argparse.Namespace, sources: list[dict[str, Any]], out: Path, command: str = "export"
) -> ChannelDiscovery:
    """The community's channels from its signed CommunityDescription messages."""
    from waku_legacy.identity.topics import CommunityId
    from waku_legacy.migrate.config import parse_source
    from waku_legacy.migrate.discover import discover_channels
    from waku_legacy.migrate.progress import SparkProgress

    progress = SparkProgress(enabled=not args.quiet)
    community = CommunityId.parse(args.community)
    configs = [parse_source(raw, i + 1, Path.cwd()) for i, raw in enumerate(sources)]
    progress.log(f"no --channel: reading the sources for {community}'s CommunityDescription")
    found = discover_channels(
        configs, community, work_dir=str(out / ".work"),
        on_source=lambda name, n: progress.log(f"  {name}: {n} signed description(s)"),
    )  # fmt: skip
    progress.log(found.summary())
    if not found.channels:
        rejected = "; ".join(f"{n} {reason}" for reason, n in sorted(found.rejected.items()))
        raise ConfigError(
            f"{command}: no CommunityDescription signed by {community} lists a channel in the "
            "sources"
            + (f" (left out: {rejected})" if rejected else "")
            + "; name the channels with --channel UUID"
        )
    return found


def _export(args: argparse.Namespace) -> int:
    from waku_legacy.migrate.config import parse_config

    out = Path(args.out).resolve()
    sources = [parse_source_spec(s, i + 1) for i, s in enumerate(args.source)]
    channels = [c for item in args.channel for c in item.split(",") if c.strip()]
    discovery = None
    if not channels:
        discovery = _discover(args, sources, out)
        channels = list(discovery.channels)
    shard = community_shard(args, discovery, "export")
    if not args.key_file:
        print(f"export: warning: {NO_KEY_FILE}", file=sys.stderr)
    community: dict[str, Any] = {
        "id": args.community, "channels": channels, "shard": shard,
        "archive_topics": args.archive_topics, "archive_link_chats": args.archive_link_chats,
    }  # fmt: skip
    if args.min_link_clock is not None:
        community["min_link_clock"] = args.min_link_clock
    if args.key_file:
        community["key_file"] = str(Path(args.key_file).resolve())
    data: dict[str, Any] = {
        "source": sources,
        "community": [community],
        "output": {
            "store": "",
            "archive_dir": str(out / "archives"),
            "torrent_dir": str(out / "torrents"),
            "work_dir": str(out / ".work"),
            "report": str(out / "report.json"),
        },
    }
    if args.now is not None:
        data["pipeline"] = {"now": args.now}
    config = parse_config(_with_master(data, args.master), base_dir=Path.cwd(), origin="export")
    report = run_config(config, args)
    result = report.communities[0] if report.communities else {}
    if discovery is not None and report.communities:
        # The channels came from the sources: say which, from which description.
        result["channels_from_description"] = discovery.to_json()
        _rewrite_report(config.output.report, report)
    if result.get("magnet_uri"):
        (out / "magnet.txt").write_text(result["magnet_uri"] + "\n")
    _emit(args, report)
    if discovery is not None and not args.json:
        print(f"\nchannels found: {discovery.summary()}")
        print(f"  from: {discovery.newest_location}")
    if not args.json and result.get("archive_link_clock"):
        print(f"\n{clock_line(result['archive_link_clock'])}")
    return 0


#: What to do when no shard is known: 57/STATUS-Simple-Scaling gives each community its own
#: shard, which status-go keeps in the community's settings, not in the history.
NO_SHARD = (
    "give --shard N, the community's relay shard on cluster 16 (the community owner's Status "
    "app shows it; messages on the wrong shard reach no member); no shard is guessed"
)


#: export without the community key: archives and torrent, but nothing members will hear of.
NO_KEY_FILE = (
    "no --key-file: the archives and torrent are written, but no signed archive-link "
    "message: members' clients learn of archives only from a link their community signed"
)


def community_shard(
    args: argparse.Namespace, discovery: ChannelDiscovery | None, command: str
) -> int:
    """``--shard``, else the newest signed description's relay_shard_index (with a warning
    saying where it came from), else an error: a guessed shard puts the history where
    members' clients do not look (export, audit)."""
    if args.shard is not None:
        return int(args.shard)
    newest = discovery.newest if discovery is not None else None
    if newest is not None and newest.shard is not None:
        print(
            f"{command}: warning: no --shard: using shard {newest.shard}, the "
            f"relay_shard_index of {args.community}'s description with clock {newest.clock}",
            file=sys.stderr,
        )
        return newest.shard
    why = "" if discovery is None else " (its newest signed description names none)"
    raise ConfigError(f"{command}: no --shard{why}: {NO_SHARD}")


def clock_line(clock: dict[str, Any]) -> str:
    """The archive-link message's clock and why (``CommunityResult.archive_link_clock``)."""
    return f"archive-link clock: {clock['clock']} ({clock['reason']})"


def _rewrite_report(path: str | None, report: RunReport) -> None:
    if not path:
        return
    from waku_legacy.migrate.report import write_report_json

    write_report_json(path, report)


def _audit_archive_dir(args: argparse.Namespace, community: CommunityId, scratch: Path) -> Path:
    """The folder holding the community's archives: ``--archive-dir``, or where
    ``--magnet``/``--torrent`` fetched them as a member would (every archive)."""
    from waku_legacy.archive.cli import member_fetch_options
    from waku_legacy.archive.errors import ArchiveDecodeError, UnexpectedTorrentLayout
    from waku_legacy.archive.fetch import fetch_archives
    from waku_legacy.archive.layout import community_folder
    from waku_legacy.console import Progress
    from waku_legacy.errors import LimitExceeded

    given = [v for v in (args.magnet, args.torrent, args.archive_dir) if v]
    if len(given) != 1:
        raise ConfigError("audit: give exactly one of --magnet, --torrent or --archive-dir")
    if args.archive_dir:
        return community_folder(Path(args.archive_dir).resolve(), community)
    options = member_fetch_options(args)
    save_dir = Path(args.save_dir) if args.save_dir else scratch / "fetched"
    try:
        fetch_archives(
            args.magnet or args.torrent, community, save_dir, options,
            progress=Progress(not args.quiet, prefix="audit"),
        )  # fmt: skip
    except (ArchiveDecodeError, LimitExceeded) as exc:
        # The member's fetch stops at an archive that does not decode or fit its index
        # entry, after every piece arrived and matched the torrent: audit what is on disk,
        # where that archive is reported with the others.
        if isinstance(exc, UnexpectedTorrentLayout) or not (save_dir / str(community)).is_dir():
            raise
    return save_dir


def _audit(args: argparse.Namespace) -> int:
    """``audit``: the community's archives against its sources; exit 0 complete, 1 gaps."""
    import tempfile

    from waku_legacy.archive.encode import Flavour
    from waku_legacy.archive.topics import ArchiveTopics
    from waku_legacy.console import print_json
    from waku_legacy.identity.shards import community_pubsub_topic
    from waku_legacy.identity.topics import CommunityId
    from waku_legacy.migrate.audit.archives import with_published_archive_topics
    from waku_legacy.migrate.audit.render import render_audit_table
    from waku_legacy.migrate.audit.request import AuditRequest
    from waku_legacy.migrate.audit.run import audit_community
    from waku_legacy.migrate.config import parse_source
    from waku_legacy.migrate.progress import SparkProgress

    community = CommunityId.parse(args.community)
    sources = [parse_source_spec(s, i + 1) for i, s in enumerate(args.source)]
    channels = [c.strip() for item in args.channel for c in item.split(",") if c.strip()]
    progress = SparkProgress(enabled=not args.quiet)
    keys = _repair_keys(args)
    with tempfile.TemporaryDirectory(prefix="waku-legacy-audit-") as scratch_name:
        scratch = Path(scratch_name)
        discovery = None
        if not channels:
            discovery = _discover(args, sources, scratch, "audit")
            channels = list(discovery.channels)
        shard = community_shard(args, discovery, "audit")
        archive_dir = _audit_archive_dir(args, community, scratch)
        request = AuditRequest(
            community=community, channels=tuple(channels),
            sources=[parse_source(raw, i + 1, Path.cwd()) for i, raw in enumerate(sources)],
            archive_dir=archive_dir, origin=args.magnet or args.torrent or args.archive_dir,
            work_dir=str(scratch), pubsub_topic=community_pubsub_topic(shard),
            flavour=Flavour.parse(args.flavour), store_url=args.store,
        )  # fmt: skip
        # the mode the published archives were built with; a contradicting flag is refused
        explicit = None if args.archive_topics is None else ArchiveTopics.parse(args.archive_topics)
        request = with_published_archive_topics(request, explicit)
        if keys is not None:
            document = _audit_repair(request, keys, progress)
        else:
            document = audit_community(request, progress)
    if args.html:
        from waku_legacy.migrate.audit.html import render_audit_html

        Path(args.html).write_text(render_audit_html(document), encoding="utf-8")
        progress.log(f"HTML report: {args.html}")
    if args.json:
        print_json(document)
    else:
        print(render_audit_table(document))
    return 0 if document["complete"] else 1


def _repair_keys(args: argparse.Namespace) -> RepairKeys | None:
    """``--repair``'s keys and torrent dir, checked before any work (None without it).
    The archives are repaired where they are: ``--archive-dir``, or ``--save-dir`` where
    ``--magnet``/``--torrent`` fetched them (a temporary folder would be lost)."""
    from waku_legacy.crypto.key_file import load_node_key
    from waku_legacy.migrate.audit.repair import RepairKeys

    if not args.repair:
        return None
    if not args.key_file or not args.torrent_dir:
        raise ConfigError("audit --repair needs --key-file and --torrent-dir")
    if not args.archive_dir and not args.save_dir:
        raise ConfigError("audit --repair with --magnet/--torrent needs --save-dir to repair in")
    operator = load_node_key(args.operator_key_file) if args.operator_key_file else None
    return RepairKeys(load_node_key(args.key_file), operator, Path(args.torrent_dir),
                      args.archive_link_chats, args.min_link_clock)  # fmt: skip


def _audit_repair(
    request: AuditRequest, keys: RepairKeys, progress: SparkProgress
) -> dict[str, Any]:
    """Repair, print what was done on stderr; the second audit's document."""
    from waku_legacy.migrate.audit.repair import repair_community, repair_lines

    report, first, document = repair_community(request, keys, progress)
    print("\n".join(repair_lines(report, first)), file=sys.stderr)
    return document


def add_run_options(
    parser: argparse.ArgumentParser, master_default: str = "the config's [spark] master"
) -> None:
    """--json, --master and --quiet of every command that runs the migration."""
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    parser.add_argument(
        "--master", help=f"Spark master URL, overrides the config (default: {master_default})"
    )
    parser.add_argument("--quiet", action="store_true", help="no progress on stderr")


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    from waku_legacy.archive.cli import add_archive_settings

    common = add_run_options
    migrate = subparsers.add_parser(
        "migrate", help="migrate legacy Waku v1 history (TOML config) to a v2 store and archives"
    )
    migrate.add_argument("--config", required=True, help="the migration's TOML file")
    common(migrate)
    migrate.set_defaults(func=_migrate)

    export = subparsers.add_parser(
        "export", help="one community's legacy history as archives, torrent and magnet link"
    )
    export.add_argument("--community", required=True, help="community id, 0x + 66 hex")
    export.add_argument(
        "--channel",
        action="append",
        default=[],
        help="channel UUID (repeat, or comma-separated); none: the channels of the community's "
        "newest signed CommunityDescription in the sources",
    )
    export.add_argument(
        "--source", action="append", required=True,
        help=SOURCE_SPECS,
    )  # fmt: skip
    export.add_argument(
        "--shard", type=int,
        help="the community's relay shard (required unless its signed description names it)",
    )  # fmt: skip
    export.add_argument("--key-file", help="community private key (hex) to sign the magnet link")
    export.add_argument("--now", type=int, help="archive clock, Unix seconds (default: now)")
    export.add_argument(
        "--min-link-clock", type=int,
        help="sign the archive link at least at this clock, ms (links a Status client already "
        "published; default: none, the clock found in the sources and files)",
    )
    add_archive_settings(export)
    export.add_argument("--out", required=True, help="output directory")
    common(export)
    export.set_defaults(func=_export)

    _register_audit(subparsers)


def _register_audit(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    from waku_legacy.archive import defaults
    from waku_legacy.archive.cli import add_archive_settings, add_session

    audit = subparsers.add_parser(
        "audit", help="compare a community's published archives with its legacy sources"
    )
    audit.add_argument("--community", required=True, help="community id, 0x + 66 hex")
    audit.add_argument("--magnet", help="magnet link: fetch the archives as a member would")
    audit.add_argument("--torrent", help=".torrent file: fetch the archives as a member would")
    audit.add_argument("--archive-dir", help="archive folder (holding 0x<id>/data and index)")
    audit.add_argument(
        "--source", action="append", required=True,
        help=SOURCE_SPECS,
    )  # fmt: skip
    audit.add_argument(
        "--channel", action="append", default=[],
        help="channel UUID (repeat, or comma-separated); none: the channels of the community's "
        "newest signed CommunityDescription in the sources",
    )  # fmt: skip
    audit.add_argument(
        "--archive-topics", choices=("channel", "universal", "both"), default=None,
        help="which topics the archives were built with (the community's archive_topics; "
        "default: read from the published archives' metadata, and "
        f"{defaults.ARCHIVE_TOPICS} when there is no archive yet); a value the archives "
        "contradict is refused",
    )  # fmt: skip
    audit.add_argument(
        "--shard", type=int,
        help="the community's relay shard (required unless its signed description names it)",
    )  # fmt: skip
    audit.add_argument("--store", help="v2 store URL: its messages count as live v2 traffic")
    audit.add_argument("--html", help="also write the report as one self-contained HTML file")
    audit.add_argument("--flavour", choices=("status-go", "seed-spec"), default=defaults.FLAVOUR,
                       help=f"archive format (default: {defaults.FLAVOUR})")  # fmt: skip
    audit.add_argument("--save-dir", help="where --magnet/--torrent fetch to (default: temp)")
    audit.add_argument("--peer", action="append", help="host:port of a seeder (repeatable)")
    audit.add_argument("--metadata-timeout", type=float, default=20.0)
    audit.add_argument("--timeout", type=float, default=600.0, help="data timeout, seconds")
    audit.add_argument("--json", action="store_true", help="print the report as JSON")
    audit.add_argument("--quiet", action="store_true", help="no progress on stderr")
    audit.add_argument(
        "--repair", action="store_true",
        help="append catch-up archives of the missing messages (append-only), rebuild the "
        "torrent, sign the new link, then audit again",
    )  # fmt: skip
    audit.add_argument("--key-file", help="--repair: the community private key (hex)")
    audit.add_argument(
        "--operator-key-file", help="--repair: signs the link's 26/WAKU-PAYLOAD (default: "
        "the community key)",
    )  # fmt: skip
    audit.add_argument("--torrent-dir", help="--repair: where the torrent and link message go")
    audit.add_argument(
        "--min-link-clock", type=int,
        help="--repair: sign the link at least at this clock, ms (default: none, the clock "
        "found in the sources, --store and the link message files)",
    )
    add_archive_settings(audit, topics=False, link_chats_for="--repair: ")
    add_session(audit, "0.0.0.0:0")
    audit.set_defaults(func=_audit)
