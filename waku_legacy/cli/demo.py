"""``waku-legacy demo --out DIR``: the operator's guide on generated data.

It generates a realistic legacy sample (:mod:`~waku_legacy.migrate.sample`: communities,
channels, months of encrypted and signed v1 envelopes in overlapping LevelDB mailservers,
each community's signed ``CommunityDescription``, the community keys in ``DIR/keys``), then
does what an operator does: ``plan`` over the generated mailservers with each community's
key file (:func:`~waku_legacy.cli.plan.write_plan`: ``DIR/migrate.toml`` and
``DIR/bridge.toml``), ``migrate`` with the migrate.toml plan wrote, and prints how to
``serve`` the bridge.toml plan wrote, with one query per side: a REST store query, a libp2p
``store query --peer``, the v1 enode and a ``v1 pull`` from it, the magnet links and a
member's ``fetch --peer`` (with ``--json``: the report's ``plan`` and ``serve`` fields).
Every printed command names this installation's ``waku-legacy`` by its absolute path, so it
runs as printed from any shell.

The demo edits plan's migrate.toml in one respect only: ``[pipeline] now`` (the archives'
clock, a day after the sample, so a rerun gives the same bytes) and ``[spark] master``. Its
bridge.toml is plan's as written: listeners on free loopback ports (kept across reruns while
free), ``[libp2p]`` on loopback with a kept key, no ``[relay]`` (no nwaku node here, so the
links are seeded, not announced), plus ``[viewer]`` enabled: the demo prints the history
pages' URL. The sample's newest descriptions name the members who post (the first an admin)
and ban one of them, with the community's and channels' descriptions in words, so the member
preview and the viewer show real numbers (the banned member's messages hidden).
"""

from __future__ import annotations

import argparse
import shlex
from pathlib import Path
from typing import TYPE_CHECKING, Any

from waku_legacy.errors import ConfigError

if TYPE_CHECKING:
    from waku_legacy.cli.plan import WrittenPlan
    from waku_legacy.migrate.report import RunReport

__all__ = ["register"]

DAY = 86_400


def _serve(plan: WrittenPlan, window: tuple[int, int], report: RunReport) -> dict[str, Any]:
    """How to serve plan's bridge.toml and query it; the example queries ask for the first
    community's first channel, in ``window`` (Unix seconds)."""
    from waku_legacy.migrate.demo_serve import example_channel, serve_instructions

    first = plan.report["communities"][0]
    channel = example_channel(
        first["community"], first["channels"][0]["uuid"], first["shard"], *window
    )
    magnets = {c["community"]: c["magnet_uri"] for c in report.communities if c.get("magnet_uri")}
    serve = serve_instructions(plan.bridge, channel, magnets, fetch_community=first["community"])
    serve["viewer"] = f"{serve['rest']}/history/{first['community']}/"
    return serve


VIEWER_TABLE = """
# waku-legacy demo: the communities' history as web pages at /history/ (bridge.viewer)
[viewer]
enabled = true
"""


def _enable_viewer(config_path: Path) -> None:
    """plan's bridge.toml with ``[viewer]`` enabled (added once)."""
    from waku_legacy.durable import write_atomic

    text = config_path.read_text(encoding="utf-8")
    if "\n[viewer]" not in text:
        text = text.rstrip("\n") + "\n" + VIEWER_TABLE
        write_atomic(config_path, text.encode("utf-8"), step="bridge-config")


def plan_lines(plan: WrittenPlan, mailservers: int) -> list[str]:
    """What plan did, in a few lines: the files, each community's shard and key, and what
    members still lack (plan's own output is the long form)."""
    report = plan.report
    lines = [
        f"plan over the {mailservers} generated mailservers (waku-legacy plan --source "
        "leveldb:… --key-file COMMUNITY=PATH … --out DIR):",
        f"  wrote {report['migrate_config']} and {report['bridge_config']}",
    ]
    for c in report["communities"]:
        key = "its key file" if c["key_file"] else "no key file"
        lines.append(
            f"  {c['name'] or c['community']}: {len(c['channels'])} channels, shard "
            f"{c['shard']} (from {c['shard_from']}), {key}"
        )
    lines += [f"  warning: {warning}" for warning in report["warnings"]]
    reasons = sorted({r for why in report["missing"]["communities"].values() for r in why})
    lines += ["  still missing for members: " + "; ".join(reasons)] if reasons else []
    return lines


def _demo(args: argparse.Namespace) -> int:
    from waku_legacy.cli.plan import PlanRequest, write_plan
    from waku_legacy.console import print_json
    from waku_legacy.crypto.key_file import write_node_key
    from waku_legacy.crypto.secp256k1 import private_key_from_bytes
    from waku_legacy.migrate.cli import clock_line, run_config
    from waku_legacy.migrate.config import load_config
    from waku_legacy.migrate.demo_serve import cli_command, serve_lines
    from waku_legacy.migrate.progress import SparkProgress
    from waku_legacy.migrate.report import render_report
    from waku_legacy.migrate.sample import (
        SampleSpec,
        generate_descriptions,
        generate_envelopes,
        make_communities,
        write_leveldb_mailservers,
    )

    if args.communities < 1:
        raise ConfigError("demo: --communities must be at least 1")
    out = Path(args.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    spec = SampleSpec(
        communities=args.communities, channels=args.channels, days=args.days, seed=args.seed,
        messages_per_channel_day=args.rate,
    )  # fmt: skip
    communities = make_communities(spec)
    progress = SparkProgress(enabled=not args.quiet)
    mailservers = [out / "legacy" / f"mailserver-{i + 1}" for i in range(args.mailservers)]
    if not any(m.exists() for m in mailservers):
        with progress.bar("generate legacy envelopes", unit="env") as bar:
            write_leveldb_mailservers(
                generate_envelopes(spec, communities), mailservers, seed=args.seed,
                on_envelope=lambda _: bar.update(1),
            )  # fmt: skip
        # Each community's signed descriptions (its channels and shard), on every mailserver;
        # written apart, so the message envelopes and their copies are those of earlier
        # versions.
        write_leveldb_mailservers(
            generate_descriptions(spec, communities, shards=True, members=True), mailservers,
            keep_probability=1.0,
        )  # fmt: skip
    else:
        progress.log(f"reusing the legacy sample in {out / 'legacy'}")
    keys = out / "keys"
    keys.mkdir(exist_ok=True)
    key_files = []
    for community in communities:
        path = keys / f"{community.id}.key"
        write_node_key(path, private_key_from_bytes(community.secret))
        key_files.append(f"{community.id}={path}")
    now = spec.start + (spec.days + 1) * DAY  # the archives' clock: a day after the sample
    plan = write_plan(
        PlanRequest(
            source=[f"leveldb:{m}" for m in mailservers], out=out, key_file=key_files,
            quiet=args.quiet,
            migrate_settings={
                "spark": {"master": args.master or "local[*]"}, "pipeline": {"now": now}
            },
            note="waku-legacy demo set [spark] master and [pipeline] now (the archives'\n"
            "clock: a day after the sample, so a rerun writes the same bytes).",
        )
    )  # fmt: skip
    _enable_viewer(plan.bridge.config_path)
    report = run_config(load_config(plan.migrate_config), args)
    serve = _serve(plan, (spec.start, now), report)
    if args.json:
        print_json({**report.to_json(), "plan": plan.report, "serve": serve})
        return 0
    print("\n".join(plan_lines(plan, len(mailservers))))
    print()
    print(render_report(report, weeks=args.verbose))  # the weekly table is long: on request
    rerun = shlex.join([*cli_command(), "migrate", "--config", str(plan.migrate_config)])
    print(f"\nrerun the migration: {rerun}")
    for c in report.communities:
        print(f"{c.get('name') or c['community']} ({c['community']})")
        print(f"  magnet link: {c['magnet_uri']}")
        for path in c["magnet_message_paths"]:
            print(f"  signed magnet-link message: {path}")
        if c.get("archive_link_clock"):
            print(f"  {clock_line(c['archive_link_clock'])}")
    print("\n".join(serve_lines(serve)))
    print("  the history as web pages ([viewer] in bridge.toml), in a browser:")
    print(f"    {serve['viewer']}")
    return 0


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    from waku_legacy.migrate.cli import add_run_options

    demo = subparsers.add_parser(
        "demo",
        help="generate a sample legacy mailserver history, plan and migrate it end to end, "
        "and print how to serve it",
    )
    demo.add_argument("--out", required=True, help="output directory")
    demo.add_argument("--verbose", action="store_true", help="also the per-week table")
    demo.add_argument("--communities", type=int, default=3)
    demo.add_argument("--channels", type=int, default=3)
    demo.add_argument("--days", type=int, default=120)
    demo.add_argument("--rate", type=float, default=2.0, help="messages per channel per day")
    demo.add_argument("--mailservers", type=int, default=3)
    demo.add_argument("--seed", type=int, default=7)
    add_run_options(demo, master_default="local[*]")
    demo.set_defaults(func=_demo)
