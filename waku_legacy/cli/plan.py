"""``waku-legacy plan``: from an operator's legacy sources to the two config files that
migrate and serve them, and what is still missing for members to receive the history.

``plan --source SPEC… --community ID… [--key-file [ID=]PATH…] --out DIR [--store-node URL]
[--json]`` reads every source once for the named communities' signed
``CommunityDescription`` messages (the discovery ``export`` uses,
:mod:`~waku_legacy.migrate.discover`: name and channels of the newest one). The
descriptions are encrypted for each community's own chat, whose key comes from the community
id, so the operator names the communities: a ``0x`` public key, a multibase ``zQ3…`` key, or
a Status share URL (``https://status.app/c/…#zQ3…``).

Each community's shard is the newest description's ``relay_shard_index``; else, with
``--store-node``, the newest description that v2 store node holds (its
``relay_shard_index``, or the shard it was stored on); else the pubsub topic status-go uses
for a community without a shard, with a warning. It writes ``DIR/migrate.toml`` and
``DIR/bridge.toml`` (the demo's writers: :mod:`~waku_legacy.config.toml_text`,
:mod:`~waku_legacy.migrate.demo_serve`), lists what members still lack (the bridge's own
reasons, :func:`~waku_legacy.bridge.archiver.link_reach`, and the loopback listeners) and
prints the next command. A ``--key-file`` (the community's private key, checked against
its id before any source is read) goes into both files as ``key_file``, so the archive link
is signed.
"""

from __future__ import annotations

import argparse
import shlex
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from waku_legacy.errors import ConfigError, WakuLegacyError

if TYPE_CHECKING:
    from waku_legacy.identity.topics import CommunityId
    from waku_legacy.migrate.demo_serve import DemoBridge
    from waku_legacy.migrate.discover import ChannelDiscovery

__all__ = ["PlanRequest", "WrittenPlan", "parse_community", "register", "write_plan"]

MIGRATE_CONFIG_FILE = "migrate.toml"
COMMUNITY_HINT = (
    "give the community's public key (0x + 66 hex), its zQ3… key or its share URL "
    "(https://status.app/c/…#zQ3…)"
)
# status-go's serialized public key (services/utils/utils.go SerializePublicKey): multibase
# base58btc ("z") of the multicodec secp256k1-pub prefix (varint 0xe7 = e7 01) and the
# compressed key.
_SECP256K1_PUB_PREFIX = b"\xe7\x01"
_SHARE_HOSTS = ("status.app", "www.status.app")

# A community without a shard: status-go's Community.PubsubTopic() is its Shard().PubsubTopic(),
# "" for a nil shard (protocol/communities/community.go, protocol/common/shard/shard.go), and
# wakuv2's GetPubsubTopic("") sends on cfg.DefaultShardPubsubTopic, which defaults to
# shard.DefaultShardPubsubTopic() = /waku/2/rs/16/32 (wakuv2/waku.go, wakuv2/config.go),
# status-im/status-go at c72f491324909173c83e69c5a86ace7aeb87daaa.
STATUS_GO_UNSHARDED_SOURCE = "status-go's default shard for a community without one"

#: What plan's bridge.toml leaves for the operator, beside the bridge's own link_reach reasons.
LOOPBACK_LIBP2P = (
    "[libp2p] listens on 127.0.0.1 only: v2 clients (Status, js-waku) reach the store only "
    "at a public address; set [libp2p] listen and announce it"
)
LOOPBACK_SEEDING = (
    "[archive] seed_listen is 127.0.0.1: members' clients reach no seeder; open a public "
    "port (TCP and UDP) for it"
)
KEY_FILE_STEP = (
    "give plan --key-file COMMUNITY=PATH (the community's private key, 64 hex), or add "
    "key_file = PATH to its [[community]] in both files: without it no signed archive link "
    "is written"
)
KEY_FILE_HINT = (
    "a community key file holds the community's private key as 64 hex digits (the owner's "
    "Status app exports it); its public key is the community id"
)
RELAY_STEP = "add [relay] (an nwaku node's REST URL) to bridge.toml to publish the link"


def parse_community(text: str) -> CommunityId:
    """A ``--community`` value: ``0x`` key, ``zQ3…`` key or a share URL holding one."""
    from waku_legacy.identity.topics import CommunityId

    value = text.strip()
    parts = urlsplit(value if "://" in value else f"https://{value}")
    if parts.hostname in _SHARE_HOSTS and (parts.path == "/c" or parts.path.startswith("/c/")):
        value = parts.fragment
        if not value:
            raise ConfigError(
                f"--community {text!r}: a share URL without the key after '#'; " + COMMUNITY_HINT
            )
    try:
        if value.startswith("z"):
            return CommunityId(_deserialize_key(value))
        return CommunityId.parse(value)
    except (WakuLegacyError, ValueError) as exc:
        raise ConfigError(f"--community {text!r}: {exc}; {COMMUNITY_HINT}") from None


def _deserialize_key(text: str) -> bytes:
    """The compressed key in status-go's serialized form (``zQ3…``)."""
    import base58

    raw = base58.b58decode(text[1:])
    if not raw.startswith(_SECP256K1_PUB_PREFIX) or len(raw) != 2 + 33:
        raise ConfigError("not a serialized secp256k1 public key (zQ3…)")
    return bytes(raw[2:])


@dataclass(slots=True)
class PlannedCommunity:
    id: CommunityId
    discovery: ChannelDiscovery
    shard: int
    shard_from: str  # "description", "store-node" or STATUS_GO_UNSHARDED_SOURCE
    key_file: str | None = None  # absolute

    def table(self) -> dict[str, Any]:
        """Its ``[[community]]`` table, the same in migrate.toml and bridge.toml."""
        newest = self.discovery.newest
        assert newest is not None
        table: dict[str, Any] = {"id": str(self.id)}
        if newest.name:
            table["name"] = newest.name
        table["channels"] = list(newest.channel_uuids)
        table["shard"] = self.shard
        if self.key_file is not None:
            table["key_file"] = self.key_file
        return table


def parse_key_file(text: str) -> tuple[CommunityId | None, Path]:
    """A ``--key-file`` value: ``COMMUNITY=PATH`` (the community as ``--community`` takes
    it) or ``PATH`` alone (the community is the key's own)."""
    # a share URL holds '=' itself (base64 padding): the community is the first prefix
    # before an '=' that reads as one
    for index, char in enumerate(text):
        if char != "=" or index == 0:
            continue
        try:
            community = parse_community(text[:index])
        except ConfigError:
            continue
        return community, Path(text[index + 1 :])
    return None, Path(text)


def load_key_files(values: list[str]) -> dict[str, Path]:
    """community -> its key file, every key read and checked before any source is read:
    64 hex digits, and the public key is the community id named with it."""
    from waku_legacy.crypto.key_file import load_node_key
    from waku_legacy.identity.topics import CommunityId

    keys: dict[str, Path] = {}
    for text in values:
        named, path = parse_key_file(text)
        try:
            key = load_node_key(path, what="community key file")
        except WakuLegacyError as exc:
            raise ConfigError(f"--key-file {text!r}: {exc}; {KEY_FILE_HINT}") from None
        own = CommunityId(key.public_key.format(compressed=True))
        if named is not None and own != named:
            raise ConfigError(
                f"--key-file {text!r}: {path} holds the key of community {own}, not of "
                f"{named}; {KEY_FILE_HINT}"
            )
        if str(own) in keys and keys[str(own)] != path.resolve():
            raise ConfigError(f"--key-file {text!r}: community {own} is given two key files")
        keys[str(own)] = path.resolve()
    return keys


def _discover(
    request: PlanRequest, communities: list[CommunityId], out: Path
) -> list[ChannelDiscovery]:
    from waku_legacy.migrate.cli import parse_source_spec
    from waku_legacy.migrate.config import parse_source
    from waku_legacy.migrate.discover import discover_communities

    raw = [parse_source_spec(s, i + 1) for i, s in enumerate(request.source)]
    sources = [parse_source(table, i + 1, Path.cwd()) for i, table in enumerate(raw)]
    _log(request, f"reading {len(sources)} source(s) for {len(communities)} community(ies)")
    found = discover_communities(
        sources, communities, work_dir=str(out / ".work"),
        on_source=lambda name, n: _log(request, f"  {name}: {n} signed description(s)"),
    )  # fmt: skip
    for discovery in found:
        if discovery.newest is None or not discovery.channels:
            rejected = "; ".join(f"{n} {why}" for why, n in sorted(discovery.rejected.items()))
            raise ConfigError(
                f"no CommunityDescription signed by {discovery.community} lists a channel "
                "in the sources" + (f" (left out: {rejected})" if rejected else "")
                + "; check the community id, or add the mailserver that carried its chat "
                "with --source"
            )  # fmt: skip
    return found


def _store_node_shards(
    request: PlanRequest, communities: list[CommunityId], out: Path
) -> dict[str, int]:
    """community -> shard from its newest description on ``--store-node``: the description's
    relay_shard_index, else the static shard (cluster 16) it was stored on."""
    from waku_legacy.identity.shards import STATUS_CLUSTER_ID, parse_pubsub_topic
    from waku_legacy.migrate.config import SourceConfig, SourceKind
    from waku_legacy.migrate.discover import discover_communities

    url = request.store_node or ""
    if not url.startswith(("http://", "https://")):
        raise ConfigError(f"--store-node {url!r}: expected a v2 store node's http(s):// URL")
    node = SourceConfig(SourceKind.STORE_REST, "store-node", 0, url=url, retries=1)
    _log(request, f"asking {url} for the newest description of {len(communities)} community(ies)")
    shards = {}
    for found in discover_communities([node], communities, work_dir=str(out / ".work")):
        newest = found.newest
        if newest is None:
            continue
        if newest.shard is not None:
            shards[found.community] = newest.shard
            continue
        try:
            topic = parse_pubsub_topic(found.newest_pubsub_topic or "")
        except WakuLegacyError:
            continue
        if topic.cluster == STATUS_CLUSTER_ID:
            shards[found.community] = topic.shard
    return shards


def _plan_shards(
    request: PlanRequest, found: list[ChannelDiscovery], out: Path
) -> tuple[list[PlannedCommunity], list[str]]:
    from waku_legacy.identity.shards import GLOBAL_PUBSUB_TOPIC, GLOBAL_SHARD
    from waku_legacy.identity.topics import CommunityId

    planned: list[PlannedCommunity] = []
    unsharded = [d for d in found if d.newest is not None and d.newest.shard is None]
    from_node: dict[str, int] = {}
    if unsharded and request.store_node:
        ids = [CommunityId.parse(d.community) for d in unsharded]
        from_node = _store_node_shards(request, ids, out)
    warnings = []
    for discovery in found:
        community = CommunityId.parse(discovery.community)
        newest = discovery.newest
        assert newest is not None
        if newest.shard is not None:
            planned.append(PlannedCommunity(community, discovery, newest.shard, "description"))
        elif discovery.community in from_node:
            shard = from_node[discovery.community]
            planned.append(PlannedCommunity(community, discovery, shard, "store-node"))
        else:
            warnings.append(
                f"{discovery.community}: no shard in its description"
                + (" nor on --store-node" if request.store_node else " (no --store-node asked)")
                + f": using shard {GLOBAL_SHARD} ({GLOBAL_PUBSUB_TOPIC}), "
                f"{STATUS_GO_UNSHARDED_SOURCE}; if the owner's Status app shows another shard, "
                "set shard in both files"
            )
            planned.append(
                PlannedCommunity(community, discovery, GLOBAL_SHARD, STATUS_GO_UNSHARDED_SOURCE)
            )
    return planned, warnings


def _migrate_data(request: PlanRequest, planned: list[PlannedCommunity]) -> dict[str, Any]:
    from waku_legacy.migrate.cli import parse_source_spec

    sources = []
    for i, spec in enumerate(request.source):
        table = parse_source_spec(spec, i + 1)
        if "path" in table:  # the config's paths are relative to it: keep the operator's
            table["path"] = str(Path(table["path"]).resolve())
        sources.append(table)
    # a file or folder names its source in the report ("mailserver-2") when no other has
    # that name and it is a safe name; else source-<n>
    names = [Path(t["path"]).name if "path" in t else "" for t in sources]
    for table, name in zip(sources, names, strict=True):
        if names.count(name) == 1 and _safe_name(name):
            table["name"] = name
    return {
        "source": sources,
        "community": [p.table() for p in planned],
        "output": {
            "store": "sqlite:store.sqlite3",
            "archive_dir": "archives",
            "torrent_dir": "torrents",
            "report": "report.json",
        },
    }


def _safe_name(name: str) -> bool:
    from waku_legacy.files import check_path_component

    try:
        check_path_component(name, where="", key="name")
    except ConfigError:
        return False
    return True


def _missing(planned: list[PlannedCommunity]) -> dict[str, Any]:
    """What members still lack once the files are used as written: per community the
    bridge's own link_reach reasons, and the steps for the whole bridge."""
    from waku_legacy.archive.defaults import BACKEND
    from waku_legacy.bridge.archiver import link_reach

    communities = {}
    for p in planned:
        reach = link_reach(
            has_key=p.key_file is not None, has_relay=False, seeding=True, backend=BACKEND,
            backend_down=None,
        )  # fmt: skip
        communities[str(p.id)] = list(reach.why)
    steps = [RELAY_STEP, LOOPBACK_LIBP2P, LOOPBACK_SEEDING]
    if any(p.key_file is None for p in planned):
        steps.insert(0, KEY_FILE_STEP)
    return {"communities": communities, "steps": steps}


@dataclass(frozen=True, slots=True)
class PlanRequest:
    """What ``plan`` is asked: its options (``--source``, ``--out``, ``--community``,
    ``--key-file``, ``--store-node``, ``--quiet``). ``migrate_settings`` are further tables
    for migrate.toml (the demo pins ``[pipeline] now`` and ``[spark] master``), said in the
    file's header by ``note``."""

    source: Sequence[str]
    out: Path
    community: Sequence[str] = ()
    key_file: Sequence[str] = ()
    store_node: str | None = None
    quiet: bool = False
    migrate_settings: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    note: str = ""


@dataclass(frozen=True, slots=True)
class WrittenPlan:
    """The two files plan wrote, the bridge they describe and the report it prints."""

    migrate_config: Path
    bridge: DemoBridge
    report: dict[str, Any]
    warnings: list[str]

    def lines(self) -> list[str]:
        """The report for people (plan's table output)."""
        return _human(self.report)


def write_plan(request: PlanRequest) -> WrittenPlan:
    """Read the sources once, write ``out/migrate.toml`` and ``out/bridge.toml``: every key
    file and community id is checked before a source is read, migrate.toml with the
    migration's own parser before it is written."""
    from waku_legacy.config.toml_text import toml_document
    from waku_legacy.durable import write_atomic
    from waku_legacy.identity.topics import CommunityId
    from waku_legacy.migrate.config import parse_config
    from waku_legacy.migrate.demo_serve import cli_command, write_bridge_config

    named = [parse_community(c) for c in request.community]
    keys = load_key_files(list(request.key_file))
    communities = list(dict.fromkeys([*named, *(CommunityId.parse(c) for c in keys)]))
    if not communities:
        raise ConfigError("name the communities with --community (or --key-file); "
                          + COMMUNITY_HINT)  # fmt: skip
    out = request.out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    found = _discover(request, communities, out)
    planned, warnings = _plan_shards(request, found, out)
    for p in planned:
        if str(p.id) in keys:
            p.key_file = str(keys[str(p.id)])  # absolute, as the sources' paths
    migrate_path = out / MIGRATE_CONFIG_FILE
    header = (
        "waku-legacy plan: the migration of the named communities' legacy history.\n"
        "Paths are relative to this file. Run: waku-legacy migrate --config FILE"
        + (f"\n{request.note}" if request.note else "")
    )
    data = {**_migrate_data(request, planned), **request.migrate_settings}
    # what migrate will read, checked before anything is written: a refused file is never left
    parse_config(data, base_dir=out, origin=str(migrate_path))
    text = toml_document(data, header=header)
    write_atomic(migrate_path, text.encode("utf-8"), step="plan-migrate-config")
    bridge = write_bridge_config(
        out, [p.table() for p in planned],
        header="waku-legacy plan: a bridge serving the migration's output "
        "(waku-legacy serve --config FILE).\nPaths are relative to this file; listeners on "
        "loopback until you choose public ones (see plan's list of what is missing).",
    )  # fmt: skip
    next_command = shlex.join([*cli_command(), "migrate", "--config", str(migrate_path)])
    report = {
        "migrate_config": str(migrate_path),
        "bridge_config": str(bridge.config_path),
        "communities": [
            {
                **p.discovery.to_json(),
                "shard": p.shard,
                "shard_from": p.shard_from,
                "key_file": p.key_file,
            }
            for p in planned
        ],
        "warnings": warnings,
        "missing": _missing(planned),
        "next": next_command,
    }
    return WrittenPlan(migrate_path, bridge, report, warnings)


def _plan(args: argparse.Namespace) -> int:
    from waku_legacy.console import print_json

    plan = write_plan(
        PlanRequest(
            source=args.source, out=Path(args.out), community=args.community or (),
            key_file=args.key_file or (), store_node=args.store_node, quiet=args.quiet,
        )
    )  # fmt: skip
    if args.json:  # the table shows them; JSON's reader may not look at stdout's content
        for warning in plan.warnings:
            print(f"plan: warning: {warning}", file=sys.stderr)
        print_json(plan.report)
    else:
        print("\n".join(plan.lines()))
    return 0


def _human(report: dict[str, Any]) -> list[str]:
    lines = [f"wrote {report['migrate_config']}", f"wrote {report['bridge_config']}", ""]
    for c in report["communities"]:
        lines.append(f"{c['name'] or 'unnamed'} ({c['community']})")
        lines.append(f"  shard {c['shard']} (from {c['shard_from']})")
        lines.append(f"  key file {c['key_file']}" if c["key_file"] else "  no key file")
        lines.append(f"  description clock {c['clock']}, from {c['location']}")
        lines += [f"  channel {ch['uuid']} {ch['name'] or ''}".rstrip() for ch in c["channels"]]
    for warning in report["warnings"]:
        lines.append(f"warning: {warning}")
    lines += ["", "missing for members to receive the history:"]
    reasons: dict[str, int] = {}
    for why in report["missing"]["communities"].values():
        for reason in why:
            reasons[reason] = reasons.get(reason, 0) + 1
    total = len(report["missing"]["communities"])
    lines += [f"  {n} of {total} community(ies): {reason}" for reason, n in reasons.items()]
    lines += [f"  - {step}" for step in report["missing"]["steps"]]
    lines += ["", "next:", f"  {report['next']}"]
    return lines


def _log(request: PlanRequest, line: str) -> None:
    if not request.quiet:
        print(line, file=sys.stderr)


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    from waku_legacy.migrate.cli import SOURCE_SPECS

    plan = subparsers.add_parser(
        "plan",
        help="write migrate.toml and bridge.toml for named communities found in legacy "
        "sources, and say what members still lack",
    )
    plan.add_argument(
        "--source", action="append", required=True,
        help=SOURCE_SPECS,
    )  # fmt: skip
    plan.add_argument(
        "--community", action="append",
        help="community public key (0x + 66 hex), zQ3… key or share URL "
        "https://status.app/c/…#zQ3… (repeatable; a --key-file names its community too)",
    )  # fmt: skip
    plan.add_argument(
        "--key-file", action="append", metavar="[COMMUNITY=]PATH",
        help="the community's private key file (64 hex), checked against the community id "
        "and written as key_file in both files, so the archive link is signed (repeatable)",
    )  # fmt: skip
    plan.add_argument("--out", required=True, help="folder for migrate.toml and bridge.toml")
    plan.add_argument(
        "--store-node",
        help="a v2 store node's REST URL, asked for the shard of a community whose "
        "description in the sources names none",
    )
    plan.add_argument("--json", action="store_true", help="print the plan as JSON")
    plan.add_argument("--quiet", action="store_true", help="no progress on stderr")
    plan.set_defaults(func=_plan)
