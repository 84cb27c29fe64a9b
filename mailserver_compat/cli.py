"""``waku-legacy v1 serve`` and ``waku-legacy v1 pull``: the Waku v1 mailserver over RLPx.

serve
    Listen for Waku v1 peers and answer their history requests from ``--store`` (see
    :func:`~waku_legacy.mailserver_compat.storage.envelope_store.open_envelope_store` for the URL
    forms). Prints the node's enode URL on stdout first, then runs until interrupted. The
    node key file holds the 32-byte key as hex on one line (geth's ``nodekey``); it is
    created when missing.

pull
    Dial a mailserver by enode URL and pull ``--from``..``--to`` for ``--topics`` (or a
    ``--bloom``) into an envelope dump (``--out``), following cursors to the end. Progress
    is checkpointed after every page in ``OUT.pull-state.json``; rerunning the same command
    resumes where it stopped (a finished pull is not repeated).
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import json
import logging
import signal
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from waku_legacy.durable import write_atomic
from waku_legacy.errors import ConfigError, DecodeError

if TYPE_CHECKING:  # imported inside the handlers, so that other commands start fast
    from waku_legacy.mailserver_compat.client.mailserver_client import HistoryQuery, PullResult
    from waku_legacy.mailserver_compat.rlpx.enode import Enode
    from waku_legacy.mailserver_compat.server.core import MailServerConfig

__all__ = ["parse_listen", "parse_time", "parse_topics", "register"]

log = logging.getLogger("waku_legacy.v1")


class V1OptionError(DecodeError):
    """A ``waku-legacy v1`` option value that does not parse (names the option)."""


def parse_listen(text: str) -> tuple[str, int]:
    host, sep, port = text.rpartition(":")
    if not sep or not port.isdigit() or not 0 <= int(port) < 65536:
        raise V1OptionError("--listen", f"{text!r} is not HOST:PORT (port 0-65535)")
    host = host.strip("[]") or "0.0.0.0"
    return host, int(port)


def parse_time(option: str, text: str) -> int:
    """Unix seconds, or an ISO 8601 date/time (UTC unless it says otherwise)."""
    text = text.strip()
    if text.isdigit():
        value = int(text)
    else:
        try:
            moment = dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
        except ValueError:
            raise V1OptionError(
                option, f"{text!r} is neither unix seconds nor an ISO 8601 date/time"
            ) from None
        if moment.tzinfo is None:
            moment = moment.replace(tzinfo=dt.UTC)
        value = int(moment.timestamp())
    if not 0 <= value <= 0xFFFFFFFF:
        raise V1OptionError(option, f"{value} is outside the uint32 seconds range")
    return value


def parse_topics(values: list[str]) -> tuple[bytes, ...]:
    from waku_legacy.identity.cli import parse_hex

    topics = []
    for value in values:
        for part in value.replace(",", " ").split():
            topic = parse_hex("--topics", part)
            if len(topic) != 4:
                raise V1OptionError("--topics", f"{part!r} is not a 4-byte v1 topic (8 hex digits)")
            topics.append(topic)
    return tuple(topics)


def _request_key(args: argparse.Namespace) -> bytes | None:
    from waku_legacy.crypto.symmetric import key_from_password
    from waku_legacy.identity.cli import parse_hex

    if getattr(args, "symmetric_key", None):
        key = parse_hex("--symmetric-key", args.symmetric_key)
        if len(key) != 32:
            raise V1OptionError("--symmetric-key", f"must be 32 bytes, got {len(key)}")
        return key
    if getattr(args, "password", None):
        return key_from_password(args.password)
    return None


def _setup_logging(verbose: bool) -> None:
    logging.basicConfig(
        level=logging.DEBUG if verbose else logging.INFO,
        stream=sys.stderr,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )


# -- serve ----------------------------------------------------------------------------------


def server_config(args: argparse.Namespace) -> MailServerConfig:
    """``v1 serve``'s options as the server's config: what an option leaves out is the
    config's own default."""
    from waku_legacy.mailserver_compat.rlpx.enode import Enode, EnodeError
    from waku_legacy.mailserver_compat.server.core import MailServerConfig
    from waku_legacy.mailserver_compat.server.limits import V1Limits

    trusted: set[bytes] = set()
    for entry in args.trusted or []:
        try:
            trusted.add(
                Enode.parse(entry).public_key
                if entry.startswith("enode://")
                else bytes.fromhex(entry.removeprefix("0x"))
            )
        except (EnodeError, ValueError) as exc:
            raise V1OptionError("--trusted", f"{entry!r}: {exc}") from None
    given = {
        name: getattr(args, name)
        for name in ("rate_limit", "max_message_size", "min_pow", "min_request_pow")
        if getattr(args, name) is not None
    }
    return MailServerConfig(
        symmetric_key=_request_key(args),
        trusted_peers=frozenset(trusted),
        limits=V1Limits.from_arguments(args),
        **given,
    )


def _serve_command(args: argparse.Namespace) -> int:
    from waku_legacy.crypto.key_file import load_or_create_node_key
    from waku_legacy.mailserver_compat.server.asyncio_server import MailServer
    from waku_legacy.mailserver_compat.storage.envelope_store import open_envelope_store

    _setup_logging(args.verbose)
    host, port = parse_listen(args.listen)
    key, created = load_or_create_node_key(args.node_key_file)
    if created:
        log.info("created a new node key in %s", args.node_key_file)
    config = server_config(args)
    store = open_envelope_store(args.store)

    sink = None
    live_writer = None
    if args.live_dump:
        from waku_legacy.mailserver_compat.storage.dump import DumpWriter

        live_writer = DumpWriter(args.live_dump)

        def sink(raw: bytes, envelope: object, peer: bytes) -> None:
            live_writer.append(raw)
            live_writer.flush()

    async def run() -> None:
        server = MailServer(store, key, config, sink=sink)
        enode = await server.start(host, port)
        print(enode, flush=True)
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for signum in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(signum, stop.set)
        try:
            await stop.wait()
        finally:
            log.info("shutting down; stats: %s", json.dumps(server.stats))
            await server.close()

    try:
        asyncio.run(run())
    finally:
        if live_writer is not None:
            live_writer.close()
        close = getattr(store, "close", None)
        if close is not None:
            close()
    return 0


# -- pull -----------------------------------------------------------------------------------


def _state_path(out: str, state: str | None) -> Path:
    return Path(state) if state else Path(out + ".pull-state.json")


def _write_state(path: Path, state: dict[str, Any]) -> None:
    data = json.dumps(state, indent=1).encode("utf-8")
    write_atomic(path, data, step="pull-state", tmp=path.with_name(path.name + ".tmp"))


def _pull_command(args: argparse.Namespace) -> int:
    from waku_legacy.mailserver_compat.rlpx.enode import Enode

    _setup_logging(args.verbose)
    enode = Enode.parse(args.enode)
    query = _history_query(args)
    identity = {
        "enode": str(enode),
        "from": query.lower,
        "to": query.upper,
        "topics": [t.hex() for t in query.topics],
        "bloom": query.bloom.hex(),
    }
    state_file = _state_path(args.out, args.state)
    saved = _read_state(state_file, identity)
    if saved.get("done"):
        log.info("pull already complete according to %s", state_file)
        summary = {**saved.get("summary", {}), "resumed": True, "out": args.out}
        _report(summary, as_json=args.json)
        return 0
    cursor = bytes.fromhex(saved.get("cursor", ""))
    if state_file.exists():
        log.info("resuming pull from cursor %s", cursor.hex() or "start")

    result = _pull_pages(args, enode, query, cursor, state_file, identity)
    summary = {
        "out": args.out,
        "envelopes": result.envelopes,
        "pages": result.pages,
        "requests": result.requests,
        "reconnects": result.reconnects,
        "invalid_envelopes": result.invalid_envelopes,
        "resumed": bool(cursor),
    }
    _write_state(state_file, {"query": identity, "cursor": "", "done": True, "summary": summary})
    _report(summary, as_json=args.json)
    return 0


def _history_query(args: argparse.Namespace) -> HistoryQuery:
    """The pull's query from its options (each bad value names its option)."""
    from waku_legacy.identity.cli import parse_hex
    from waku_legacy.mailserver_compat.client.mailserver_client import HistoryQuery

    lower, upper = parse_time("--from", args.from_), parse_time("--to", args.to)
    if upper < lower:
        raise V1OptionError("--to", f"{upper} is before --from {lower}")
    topics = parse_topics(args.topics or [])
    bloom = parse_hex("--bloom", args.bloom) if args.bloom else b""
    if bloom and len(bloom) != 64:
        raise V1OptionError("--bloom", f"must be 64 bytes, got {len(bloom)}")
    if not topics and not bloom:
        raise V1OptionError("--topics", "give --topics or --bloom (a mailserver needs one)")
    return HistoryQuery(
        lower=lower,
        upper=upper,
        topics=topics,
        bloom=bloom,
        limit=args.limit,
        mode=args.mode,
        symmetric_key=_request_key(args),
        encrypt_to_server=args.encrypt_to_server,
    )


def _read_state(state_file: Path, identity: dict[str, Any]) -> dict[str, Any]:
    """The saved state of this same query ({} when there is none yet)."""
    if not state_file.exists():
        return {}
    from waku_legacy.files import MAX_CONFIG_FILE, read_small_text

    text = read_small_text(state_file, what="pull state", max_size=MAX_CONFIG_FILE)
    try:
        saved = json.loads(text)
    except (ValueError, RecursionError) as exc:  # RecursionError: nested too deeply
        raise ConfigError(f"pull state {state_file} is unreadable: {exc}") from exc
    if not isinstance(saved, dict):
        raise ConfigError(f"pull state {state_file} is not a JSON object")
    if saved.get("query") != identity:
        raise ConfigError(
            f"pull state {state_file} belongs to another query; remove it or use --state"
        )
    return saved


def _pull_pages(
    args: argparse.Namespace,
    enode: Enode,
    query: HistoryQuery,
    cursor: bytes,
    state_file: Path,
    identity: dict[str, Any],
) -> PullResult:
    """Dial the mailserver and pull every page from ``cursor`` into ``--out``,
    checkpointing each page's next cursor in ``state_file``."""
    from waku_legacy.crypto.key_file import load_node_key
    from waku_legacy.mailserver_compat.client.mailserver_client import MailServerClient
    from waku_legacy.mailserver_compat.storage.dump import DumpWriter

    node_key = load_node_key(args.node_key_file) if args.node_key_file else None
    progress = _Progress()

    def checkpoint(next_cursor: bytes) -> None:
        _write_state(
            state_file,
            {"query": identity, "cursor": next_cursor.hex(), "done": not next_cursor},
        )

    async def run() -> PullResult:
        async with MailServerClient(
            enode, node_key, request_timeout=args.timeout, max_retries=args.retries
        ) as client:
            with DumpWriter(args.out) as writer:
                return await client.pull(
                    query, writer, cursor=cursor, checkpoint=checkpoint, on_page=progress
                )

    try:
        return asyncio.run(run())
    finally:
        progress.close()


class _Progress:
    """tqdm on a terminal, one log line per page otherwise."""

    def __init__(self) -> None:
        self._bar = None
        if sys.stderr.isatty():
            from tqdm import tqdm

            self._bar = tqdm(unit=" envelopes", file=sys.stderr)
        self._seen = 0

    def __call__(self, result: Any) -> None:
        if self._bar is not None:
            self._bar.update(result.envelopes - self._seen)
        else:
            log.info(
                "pull: page %d, %d envelopes so far, next cursor %s",
                result.pages,
                result.envelopes,
                result.cursor.hex() or "none (done)",
            )
        self._seen = result.envelopes

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()


def _report(summary: dict[str, Any], *, as_json: bool) -> None:
    if as_json:
        from waku_legacy.console import print_json

        print_json(summary)
        return
    width = max(len(k) for k in summary)
    for key, value in summary.items():
        print(f"{key:<{width}}  {value}")


# -- registration ---------------------------------------------------------------------------


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    v1 = subparsers.add_parser("v1", help="Waku v1 mailserver over RLPx (serve, pull)")
    commands = v1.add_subparsers(dest="v1_command", metavar="COMMAND")
    commands.required = True

    serve = commands.add_parser("serve", help="serve v1 history to Waku v1 peers")
    serve.add_argument("--store", required=True, help="history URL (leveldb:, dump:, sqlite:…)")
    serve.add_argument("--listen", default="0.0.0.0:30303", help="HOST:PORT (default %(default)s)")
    serve.add_argument(
        "--node-key-file", required=True, help="hex secp256k1 key (created if missing)"
    )
    serve.add_argument("--password", help="request password (default status-offline-inbox)")
    serve.add_argument("--symmetric-key", help="request key, 32 bytes hex (instead of --password)")
    from waku_legacy.mailserver_compat.server.core import MailServerConfig

    # the defaults are MailServerConfig's own (an option left out is not passed on)
    defaults = MailServerConfig()
    serve.add_argument(
        "--rate-limit",
        type=float,
        help="seconds per fresh history request of a peer (cursor continuations are free;"
        f" default {defaults.rate_limit})",
    )
    serve.add_argument(
        "--max-message-size", type=int, help=f"bytes (default {defaults.max_message_size})"
    )
    serve.add_argument(
        "--min-pow", type=float, help=f"PoW for live envelopes (default {defaults.min_pow})"
    )
    serve.add_argument(
        "--min-request-pow",
        type=float,
        help=f"PoW for history requests (default {defaults.min_request_pow})",
    )
    serve.add_argument("--trusted", action="append", help="trusted peer (enode URL or pubkey hex)")
    serve.add_argument("--live-dump", help="append accepted live envelopes to this dump")
    from waku_legacy.mailserver_compat.server.limits import V1Limits

    V1Limits.add_arguments(serve.add_argument_group("limits (per peer and per source address)"))
    serve.add_argument("-v", "--verbose", action="store_true")
    serve.set_defaults(func=_serve_command)

    pull = commands.add_parser("pull", help="pull history from a v1 mailserver into a dump")
    pull.add_argument("--enode", required=True, help="enode://<pubkey>@host:port")
    which = pull.add_mutually_exclusive_group()
    which.add_argument(
        "--topics", nargs="+", help="4-byte topics as hex (comma or space separated)"
    )
    which.add_argument(
        "--bloom", help="64-byte bloom filter as hex (no default: give --topics or --bloom)"
    )
    pull.add_argument("--from", dest="from_", required=True, help="unix seconds or ISO 8601")
    pull.add_argument("--to", required=True, help="unix seconds or ISO 8601")
    pull.add_argument("--out", required=True, help="envelope dump to append to")
    pull.add_argument("--limit", type=int, default=1000, help="envelopes per page (max 1000)")
    pull.add_argument(
        "--mode",
        choices=("plain", "envelope", "envelope-spec"),
        default="plain",
        help="request form: plain [id, from, to, …] or an encrypted request envelope",
    )
    pull.add_argument("--password", help="request password (envelope modes)")
    pull.add_argument("--symmetric-key", help="request key, 32 bytes hex (envelope modes)")
    pull.add_argument("--encrypt-to-server", action="store_true", help="ECIES to the node key")
    pull.add_argument("--node-key-file", help="our node key (default: a fresh one)")
    pull.add_argument("--state", help="checkpoint file (default OUT.pull-state.json)")
    pull.add_argument("--timeout", type=float, default=30.0, help="seconds per request")
    pull.add_argument("--retries", type=int, default=5, help="reconnects before giving up")
    pull.add_argument("--json", action="store_true", help="print the summary as JSON")
    pull.add_argument("-v", "--verbose", action="store_true")
    pull.set_defaults(func=_pull_command)
