"""``waku-legacy archive build|inspect|verify``, ``waku-legacy seed``, ``waku-legacy fetch``.

``archive build`` reads archive-flavour messages as JSONL (format: ``waku_legacy.archive.
message``), one community per run, and prints a report (``--json`` for JSON). Long steps show
progress: a tqdm bar on a terminal, one structured log line per step otherwise (stderr).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from waku_legacy.archive import defaults
from waku_legacy.console import Progress
from waku_legacy.errors import ConfigError, DecodeError

if TYPE_CHECKING:  # imported where used: the CLI starts without loading every command
    import coincurve

    from waku_legacy.archive.fetch import FetchOptions, FetchResult
    from waku_legacy.archive.magnet import VerifiedMagnetLink
    from waku_legacy.archive.message import ArchiveMessage
    from waku_legacy.archive.output import FetchRecord
    from waku_legacy.archive.session import SessionConfig
    from waku_legacy.identity.topics import CommunityId
    from waku_legacy.proto.waku_message_pb2 import WakuMessage

__all__ = ["Progress", "add_session", "register", "session_config"]


# --- helpers ------------------------------------------------------------------------------


def _community(text: str) -> CommunityId:
    from waku_legacy.identity.topics import CommunityId

    return CommunityId.parse(text)


def _topics(args: argparse.Namespace) -> list[bytes]:
    from waku_legacy.identity.cli import parse_hex
    from waku_legacy.identity.topics import chat_topic, v1_topic_from_content_topic

    topics: list[bytes] = []
    for text in args.topic or []:
        topic = (
            v1_topic_from_content_topic(text)
            if text.startswith("/")
            else parse_hex("--topic", text)
        )
        if len(topic) != 4:
            raise ConfigError(f"--topic {text!r} is not a 4-byte v1 topic")
        topics.append(topic)
    community = _community(args.community)
    for channel in args.channel or []:
        topics.append(chat_topic(community.channel_chat_id(channel)))
    if not topics:
        raise ConfigError("give the community's channel topics with --topic or --channel")
    return topics


def _read_jsonl(path: str) -> Iterator[ArchiveMessage]:
    from waku_legacy.archive.message import ArchiveMessage

    try:
        handle = sys.stdin if path == "-" else open(path, encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"cannot read --input {path}: {exc}") from exc
    try:
        for number, line in enumerate(handle, 1):
            if line.strip():
                yield ArchiveMessage.from_json_line(line, line=number)
    finally:
        if handle is not sys.stdin:
            handle.close()


def _private_key(path: str) -> coincurve.PrivateKey:
    from waku_legacy.crypto.secp256k1 import private_key_from_bytes
    from waku_legacy.files import MAX_KEY_FILE, read_small_text
    from waku_legacy.identity.cli import parse_hex

    text = read_small_text(path, what="--community-key-file", max_size=MAX_KEY_FILE).strip()
    return private_key_from_bytes(parse_hex("--community-key-file", text))


def _pubsub_topic(args: argparse.Namespace) -> str:
    from waku_legacy.identity.shards import (
        DEFAULT_NON_PROTECTED_PUBSUB_TOPIC,
        community_pubsub_topic,
    )

    if args.pubsub_topic:
        return str(args.pubsub_topic)
    if args.shard is not None:
        return community_pubsub_topic(args.shard)
    return DEFAULT_NON_PROTECTED_PUBSUB_TOPIC


def _emit(args: argparse.Namespace, value: dict[str, Any], lines: list[str]) -> None:
    from waku_legacy.console import print_json

    if args.json:
        print_json(value)
    else:
        print("\n".join(lines))


# --- archive build / inspect / verify -------------------------------------------------------


def _build(args: argparse.Namespace) -> int:
    from waku_legacy.archive.build import build_community_archives

    community = _community(args.community)
    key = _private_key(args.community_key_file) if args.community_key_file else None
    now = args.now if args.now is not None else int(time.time())
    report = build_community_archives(
        args.archive_dir,
        args.torrent_dir,
        community,
        _topics(args),
        _read_jsonl(args.input),
        now=now,
        flavour=args.flavour,
        community_key=key,
        pubsub_topic=_pubsub_topic(args),
        progress=Progress(not args.quiet, prefix="archive"),
        archive_topics=args.archive_topics,
        archive_link_chats=args.archive_link_chats,
    )
    _emit(
        args,
        report.to_json(),
        [
            f"community        {report.community}",
            f"archives added   {report.archives_added} (total {report.total_archives})",
            f"messages         {report.messages_archived} archived, {report.late_messages} late "
            f"(window already archived), {report.future_messages} after now, "
            f"{report.duplicate_messages} duplicates, {report.oversize_messages} oversize",
            f"windows          {report.start} .. {report.last_end}",
            f"info-hash        {report.info_hash}",
            f"magnet           {report.magnet_uri}",
            f"torrent          {report.torrent_path}",
        ]
        + [f"magnet message   {p}" for p in report.magnet_message_paths],
    )
    return 0


def _inspect(args: argparse.Namespace) -> int:
    from waku_legacy.archive.data_files import inspect_archive_data
    from waku_legacy.archive.layout import CommunityLayout
    from waku_legacy.archive.torrent import load_torrent

    layout = CommunityLayout.of(args.archive_dir, args.community, args.torrent_dir)
    layout.check_directories(existing=True)  # nothing to inspect is an error, not "0 archives"
    status = inspect_archive_data(layout, args.flavour)
    archives = [
        {
            "id": e.archive_id,
            "from": e.window_from,
            "to": e.window_to,
            "offset": e.offset,
            "size": e.size,
            "padding": e.padding,
            "pieces": [e.pieces().start, e.pieces().stop],
            "contentTopics": ["0x" + t.hex() for t in e.content_topics],
        }
        for e in status.index.entries
    ]
    value: dict[str, Any] = {
        "community": layout.name,
        "archives": archives,
        "dataLength": status.data_length,
        "indexAccountsFor": status.index.data_length,
        "tornTail": status.torn_tail,
        "staleTemporaryIndex": status.stale_tmp_index,
    }
    lines = [f"{'id':68} {'from':>11} {'to':>11} {'offset':>10} {'size':>9} {'padding':>8}"]
    lines += [
        f"{a['id']:68} {a['from']:>11} {a['to']:>11} {a['offset']:>10} {a['size']:>9} "
        f"{a['padding']:>8}"
        for a in archives
    ]
    lines.append(f"data {status.data_length} bytes, index accounts for {status.index.data_length}")
    if args.torrent_dir and layout.torrent.exists():
        torrent = load_torrent(layout.torrent)
        value["infoHash"] = torrent.info_hash
        value["magnetUri"] = torrent.magnet_uri
        value["pieceCount"] = torrent.piece_count
        lines += [f"info-hash {torrent.info_hash}", f"magnet    {torrent.magnet_uri}"]
    _emit(args, value, lines)
    return 0


def _verify(args: argparse.Namespace) -> int:
    from waku_legacy.archive.verify import verify_store

    report = verify_store(
        args.archive_dir, args.community, torrent_dir=args.torrent_dir, flavour=args.flavour
    )
    value = {
        "community": report.community,
        "ok": True,
        "archives": report.archives,
        "messages": report.messages,
        "dataLength": report.data_length,
        "torrentChecked": report.torrent_checked,
        "infoHash": report.info_hash,
        "digestsChecked": report.digests_checked,
        "checked": report.checked,
        "notChecked": report.not_checked,
    }
    _emit(
        args,
        value,
        [
            f"ok: {report.archives} archives, {report.messages} messages, "
            f"{report.data_length} bytes of data"
            + (f", torrent {report.info_hash} matches" if report.torrent_checked else "")
        ]
        + [f"checked: {line}" for line in report.checked]
        + [f"NOT checked: {line}" for line in report.not_checked],
    )
    return 0


# --- seed ---------------------------------------------------------------------------------


def member_fetch_options(args: argparse.Namespace) -> FetchOptions:
    """What ``members preview``, ``history export`` and ``audit`` fetch with: every archive,
    from the given peers, with the session and timeouts of :func:`add_session`'s options."""
    from waku_legacy.archive.encode import Flavour
    from waku_legacy.archive.fetch import FetchOptions

    return FetchOptions(
        peers=tuple(args.peer or ()), metadata_timeout=args.metadata_timeout,
        data_timeout=args.timeout, flavour=Flavour.parse(args.flavour),
        session=session_config(args),
    )  # fmt: skip


def session_config(args: argparse.Namespace) -> SessionConfig:
    from waku_legacy.archive.session import SessionConfig

    return SessionConfig(
        listen=args.listen,
        dht=args.dht,
        lsd=args.lsd,
        upnp=args.upnp,
        natpmp=args.natpmp,
        trackers=not args.no_trackers,
        utp=not args.no_utp,
    )


def _seed(args: argparse.Namespace) -> int:
    from waku_legacy.archive.errors import SeederError
    from waku_legacy.archive.layout import check_directory
    from waku_legacy.archive.seeder import Seeder

    check_directory(Path(args.archive_dir), "--archive-dir", must_exist=True)
    check_directory(Path(args.torrent_dir), "--torrent-dir", must_exist=True)

    failed: set[str] = set()

    def prepare(path: Path) -> None:
        """Before seeding a new or changed torrent: finish the build it came from (a kill
        between the index and the torrent leaves a torrent that no longer describes them)."""
        from waku_legacy.archive.build import finish_interrupted_build

        fixed = finish_interrupted_build(
            args.archive_dir, args.torrent_dir, path.name[: -len(".torrent")],
            flavour=args.flavour,
        )  # fmt: skip
        if fixed.changed:
            print(json.dumps({"event": "repaired", **fixed.to_json()}), file=sys.stderr,
                  flush=True)  # fmt: skip

    def on_error(path: Path, exc: Exception) -> None:
        failed.add(str(path))
        event = {"event": "cannot-seed", "torrent": str(path), "error": str(exc)}
        print(json.dumps(event), file=sys.stderr, flush=True)

    deadline = time.monotonic() + args.duration if args.duration else None
    with Seeder(args.archive_dir, session_config(args)) as seeder:
        print(
            json.dumps({"event": "listening", "port": seeder.listen_port}),
            file=sys.stderr,
            flush=True,
        )
        while True:
            stats = seeder.refresh(args.torrent_dir, prepare=prepare, on_error=on_error)
            rows = [
                {
                    "community": s.name,
                    "infoHash": s.info_hash,
                    "state": s.state,
                    "peers": s.peers,
                    "uploaded": s.uploaded,
                }
                for s in stats
            ]
            if args.json:
                print(json.dumps({"event": "seeding", "torrents": rows}), flush=True)
            else:
                for r in rows:
                    print(
                        f"{r['community']} {r['infoHash']} {r['state']} peers={r['peers']} "
                        f"uploaded={r['uploaded']}",
                        flush=True,
                    )
            if args.once and failed:
                raise SeederError(f"not seeded: {', '.join(sorted(failed))} (see the lines above)")
            if args.once or (deadline is not None and time.monotonic() >= deadline):
                return 0
            failed.clear()
            time.sleep(args.interval)


# --- fetch --------------------------------------------------------------------------------


def _fetch(args: argparse.Namespace) -> int:
    from waku_legacy.archive.fetch import fetch_archives, no_peer_notice
    from waku_legacy.archive.output import FetchRecord

    community = _community(args.community)
    if args.cid is not None or args.logos_storage_url is not None:
        return _fetch_logos_storage(args, community)
    if args.save_dir is None:
        raise ConfigError("--save-dir is required (where the torrent's files go)")
    record = FetchRecord(args.record) if args.record else None
    sources = [s for s in (args.magnet, args.torrent, args.magnet_message) if s]
    if len(sources) != 1:
        raise ConfigError("give exactly one of --magnet, --torrent or --magnet-message")
    # 1. the link: given, or taken from a signed archive-link message
    clock = None
    source: str
    if args.magnet_message:
        link = _verified_link_message(args.magnet_message, community, record)
        source, clock = link.magnet_uri, link.clock
        if record is not None and record.last_link(str(community)) == link.magnet_uri:
            reason = "already processed this archive link (status-go ignores a link seen twice)"
            value = {"community": str(community), "ignored": reason, "clock": link.clock,
                     "archiveLink": link.magnet_uri}  # fmt: skip
            _emit(args, value, [f"{reason}: {link.magnet_uri}"])
            return 0
    else:
        source = args.magnet or args.torrent
    # 2. fetch the selected archives, 3. write their messages and what was fetched
    options = _fetch_options(args, community, record)
    notice = no_peer_notice(source, options)
    if notice is not None:
        print(f"waku-legacy fetch: {notice}", file=sys.stderr, flush=True)
    result = fetch_archives(
        source, community, args.save_dir, options,
        progress=Progress(not args.quiet, prefix="fetch"),
    )
    written = _write_messages(args, result.messages, community)
    if record is not None:
        record.add(str(community), [f.entry.archive_id for f in result.archives])
        if clock is not None:
            record.set_last_clock(str(community), clock)
            record.set_last_link(str(community), source)
        record.save()
    _emit_fetched(args, community, result, written)
    return 0


def _verified_link_message(
    path: str, community: CommunityId, record: FetchRecord | None
) -> VerifiedMagnetLink:
    """The archive link of the signed message in ``path`` (.pb, or the relay JSON body)."""
    from waku_legacy.archive.magnet import magnet_message_from_json, verify_magnet_message
    from waku_legacy.files import read_small_file

    # a magnet-link message is ~1 KB (protobuf) or its relay JSON body (base64 of that)
    raw = read_small_file(path, what="--magnet-message", max_size=1 << 20)
    message: WakuMessage | bytes
    if path.endswith(".json"):
        try:
            body = json.loads(raw)
        except (ValueError, RecursionError) as exc:  # RecursionError: nested too deeply
            raise DecodeError("magnet-link message", f"not JSON ({exc})") from exc
        if isinstance(body, dict) and "body" in body:  # the file archive build writes
            body = body["body"]
        message = magnet_message_from_json(body)
    else:
        message = raw  # protobuf WakuMessage bytes, parsed (with limits) by the verifier
    # status-go's member rules (HandleHistoryArchiveLinkMessage): a clock lower than the
    # last accepted one is stale (an error here); an equal or higher one is taken, unless
    # it names the link already fetched, which is ignored
    last = record.last_clock(str(community)) if record else None
    return verify_magnet_message(message, community, last_clock=last)


def _fetch_options(
    args: argparse.Namespace, community: CommunityId, record: FetchRecord | None
) -> FetchOptions:
    from waku_legacy.archive.fetch import FetchOptions, Selection

    if args.new:
        selection = Selection.NEW
    elif args.latest:
        selection = Selection.LATEST
    elif args.since is not None or args.until is not None:
        selection = Selection.RANGE
    else:
        selection = Selection.ALL
    options = FetchOptions(
        selection=selection,
        since=args.since,
        until=args.until,
        known_ids=frozenset(record.fetched(str(community))) if record else frozenset(),
        peers=tuple(args.peer or ()),
        metadata_timeout=args.metadata_timeout,
        metadata_retries=args.metadata_retries,
        data_timeout=args.timeout,
        flavour=args.flavour,
        session=session_config(args),
    )
    if selection is Selection.NEW and record is None:
        raise ConfigError("--new needs --record FILE (the archive ids fetched before)")
    return options


def _write_messages(
    args: argparse.Namespace,
    rows: Callable[[], Iterable[tuple[str, ArchiveMessage]]],
    community: CommunityId,
) -> int:
    """``--output`` (JSONL) and ``--sqlite``; the count written (the last of them)."""
    from waku_legacy.archive.output import write_jsonl, write_sqlite

    written = 0
    if args.output:
        written = write_jsonl(args.output, rows(), community_id=str(community))
    if args.sqlite:
        written = write_sqlite(args.sqlite, rows(), community_id=str(community))
    return written


def _emit_fetched(
    args: argparse.Namespace, community: CommunityId, result: FetchResult, written: int
) -> None:
    value = {
        "community": str(community),
        "infoHash": result.info_hash,
        "archives": [
            {
                "id": f.entry.archive_id,
                "from": f.entry.window_from,
                "to": f.entry.window_to,
                "messages": len(f.archive.messages),
            }
            for f in result.archives
        ],
        "messages": result.message_count,
        "written": written,
        "piecesDownloaded": len(result.wanted_pieces),
        "bytesDownloaded": result.bytes_downloaded,
        "seconds": round(result.seconds, 3),
    }
    lines = [
        f"{len(result.archives)} archives, {result.message_count} messages from "
        f"{result.info_hash} in {result.seconds:.1f} s ({result.bytes_downloaded} bytes)"
    ]
    _emit(args, value, lines)


def _fetch_logos_storage(args: argparse.Namespace, community: CommunityId) -> int:
    """``fetch --cid CID --logos-storage-url URL``: a member's view from a Logos Storage
    index CID (the archive link of a community on the Logos Storage back end)."""
    from waku_legacy.archive.logos_storage import LogosStorageClient, fetch_by_cid

    if args.cid is None or args.logos_storage_url is None:
        raise ConfigError("--cid and --logos-storage-url go together")
    if args.magnet or args.torrent or args.magnet_message:
        raise ConfigError("--cid is a Logos Storage link: give no --magnet/--torrent as well")
    if args.flavour != "status-go":
        raise ConfigError("Logos Storage archives are status-go archives (--flavour status-go)")
    started = time.monotonic()
    result = fetch_by_cid(LogosStorageClient(args.logos_storage_url, timeout=args.timeout),
                          args.cid)  # fmt: skip
    written = _write_messages(args, lambda: result.messages, community)
    seconds = time.monotonic() - started
    value = {
        "community": str(community),
        "indexCid": result.index_cid,
        "archives": result.archives,
        "messages": len(result.messages),
        "written": written,
        "seconds": round(seconds, 3),
    }
    lines = [
        f"{len(result.archives)} archives, {len(result.messages)} messages from Logos Storage "
        f"index {result.index_cid} in {seconds:.1f} s"
    ]
    _emit(args, value, lines)
    return 0


# --- registration -------------------------------------------------------------------------


def _add_common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="print a JSON report")
    parser.add_argument(
        "--flavour",
        choices=("status-go", "seed-spec"),
        default=defaults.FLAVOUR,
        help="archive format: status-go (what Status Desktop imports) or seed-spec "
        f"(default: {defaults.FLAVOUR})",
    )


def add_archive_settings(
    parser: argparse.ArgumentParser, *, topics: bool = True, link_chats_for: str = ""
) -> None:
    """``--archive-topics`` (with ``topics``) and ``--archive-link-chats``, with the one
    default of each (:mod:`waku_legacy.archive.defaults`) named in the help."""
    if topics:
        parser.add_argument(
            "--archive-topics", choices=("channel", "universal", "both"),
            default=defaults.ARCHIVE_TOPICS,
            help="topics of archived channel messages: channel (clients before status-go PR "
            "#5993), universal (<id>-memberUpdate: current clients) or both "
            f"(default: {defaults.ARCHIVE_TOPICS}, as a [[community]])",
        )  # fmt: skip
    parser.add_argument(
        "--archive-link-chats", choices=("both", "universal", "magnetlinks"),
        default=defaults.ARCHIVE_LINK_CHATS,
        help=f"{link_chats_for}chats of the signed link message "
        f"(default: {defaults.ARCHIVE_LINK_CHATS}, as a [[community]])",
    )  # fmt: skip


def add_session(parser: argparse.ArgumentParser, listen: str) -> None:
    parser.add_argument("--listen", default=listen, help=f"host:port to bind (default {listen})")
    for name in ("dht", "lsd", "upnp", "natpmp"):
        parser.add_argument(f"--{name}", action="store_true", help=f"enable {name.upper()}")
    parser.add_argument(
        "--no-trackers", action="store_true", help="do not announce to the torrent's trackers"
    )
    parser.add_argument("--no-utp", action="store_true", help="TCP only (faster on a LAN)")


def register(subparsers: Any) -> None:
    _register_archive(subparsers)
    _register_seed(subparsers)
    _register_fetch(subparsers)


def _register_archive(subparsers: Any) -> None:
    archive = subparsers.add_parser("archive", help="community history archives")
    sub = archive.add_subparsers(dest="archive_command", metavar="SUBCOMMAND")
    sub.required = True

    build = sub.add_parser("build", help="append new 7-day archives and refresh the torrent")
    build.add_argument("--archive-dir", required=True)
    build.add_argument("--torrent-dir", required=True)
    build.add_argument("--community", required=True, help="0x + 66 hex (compressed key)")
    build.add_argument("--topic", action="append", help="channel topic: 0x<8 hex> or /waku/1/...")
    build.add_argument("--channel", action="append", help="channel uuid (topic derived)")
    build.add_argument(
        "--input", required=True, help="archive-flavour messages as JSONL ('-' = stdin)"
    )
    build.add_argument("--now", type=int, help="end of the last window, seconds (default: now)")
    add_archive_settings(build)
    build.add_argument(
        "--community-key-file", help="file with the community private key (hex) to sign"
    )
    from waku_legacy.identity.shards import DEFAULT_NON_PROTECTED_PUBSUB_TOPIC

    build.add_argument(
        "--pubsub-topic",
        help="where the magnet-link message is to be published (default: --shard's topic, "
        f"without --shard {DEFAULT_NON_PROTECTED_PUBSUB_TOPIC})",
    )
    build.add_argument("--shard", type=int, help="community shard (pubsub /waku/2/rs/16/<n>)")
    build.add_argument("--quiet", action="store_true", help="no progress output")
    _add_common(build)
    build.set_defaults(func=_build)

    readers: list[tuple[str, str, Callable[[argparse.Namespace], int]]] = [
        ("inspect", "list a community's archives and torrent", _inspect),
        ("verify", "check index keys, data, archives and torrent", _verify),
    ]
    for name, help_text, func in readers:
        reader = sub.add_parser(name, help=help_text)
        reader.add_argument("--archive-dir", required=True)
        reader.add_argument("--torrent-dir")
        reader.add_argument("--community", required=True)
        _add_common(reader)
        reader.set_defaults(func=func)


def _register_seed(subparsers: Any) -> None:
    seed = subparsers.add_parser("seed", help="seed the latest archive torrent of communities")
    seed.add_argument("--archive-dir", required=True)
    seed.add_argument("--torrent-dir", required=True)
    seed.add_argument("--interval", type=float, default=30.0, help="rescan/report seconds")
    seed.add_argument(
        "--duration", type=float, help="stop after this many seconds (default: run until stopped)"
    )
    seed.add_argument("--once", action="store_true", help="seed, report once and exit")
    seed.add_argument("--json", action="store_true", help="JSON lines")
    seed.add_argument("--flavour", choices=("status-go", "seed-spec"), default=defaults.FLAVOUR,
                      help="archive format, for repairing an interrupted build "
                      f"(default: {defaults.FLAVOUR})")  # fmt: skip
    add_session(seed, "0.0.0.0:6881")
    seed.set_defaults(func=_seed)


def _register_fetch(subparsers: Any) -> None:
    fetch = subparsers.add_parser("fetch", help="fetch a community's archives as a member")
    fetch.add_argument("--community", required=True)
    fetch.add_argument("--magnet", help="magnet link")
    fetch.add_argument("--torrent", help=".torrent file")
    fetch.add_argument("--magnet-message", help="signed magnet-link message (.pb or .json)")
    fetch.add_argument("--save-dir", help="where the torrent's files go (torrent links)")
    fetch.add_argument("--cid", help="Logos Storage index CID (the community's archive link)")
    fetch.add_argument("--logos-storage-url", help="Logos Storage node REST root, with --cid")
    fetch.add_argument("--peer", action="append", help="host:port of a seeder (repeatable)")
    fetch.add_argument("--latest", action="store_true", help="only the latest window")
    fetch.add_argument(
        "--since", type=int,
        help="archives overlapping [since, until) seconds (default: from the first archive)",
    )  # fmt: skip
    fetch.add_argument(
        "--until", type=int, help="see --since, exclusive (default: to the last archive)"
    )
    fetch.add_argument("--new", action="store_true", help="only archives not in --record")
    fetch.add_argument("--record", help="JSON record of archive ids already fetched")
    fetch.add_argument("--output", help="write messages as JSONL")
    fetch.add_argument("--sqlite", help="write messages into this SQLite file")
    fetch.add_argument("--metadata-timeout", type=float, default=20.0)
    fetch.add_argument("--metadata-retries", type=int, default=1)
    fetch.add_argument("--timeout", type=float, default=600.0, help="data timeout, seconds")
    fetch.add_argument("--quiet", action="store_true", help="no progress output")
    _add_common(fetch)
    add_session(fetch, "0.0.0.0:0")
    fetch.set_defaults(func=_fetch)
