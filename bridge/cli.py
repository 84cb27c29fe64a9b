"""``waku-legacy serve --config FILE``: run the bridge service until SIGTERM/SIGINT.

``--check`` validates the configuration (and the community keys) and prints what would run,
without starting anything.
"""

from __future__ import annotations

import argparse
import asyncio
from typing import Any

__all__ = ["register"]


def _serve(args: argparse.Namespace) -> int:
    from waku_legacy.bridge import preflight
    from waku_legacy.bridge.config import load_config
    from waku_legacy.bridge.logs import configure_logging
    from waku_legacy.bridge.service import BridgeService
    from waku_legacy.console import print_json

    config = load_config(args.config)
    # what `serve` refuses, --check refuses too: one reading of the store and the key files
    preflight.check(config, ports=args.check)
    if args.check:
        service = BridgeService(config)  # loads and checks the community keys
        print_json(_summary(config, service))
        return 0
    configure_logging(args.log_level or config.logging.level, config.logging.format)
    asyncio.run(BridgeService(config).run_forever())
    return 0


def _summary(config: Any, service: Any) -> dict[str, Any]:
    from waku_legacy.bridge.archiver import link_reach

    def reach(community: Any) -> dict[str, Any]:
        return link_reach(
            has_key=str(community.id) in service._keys, has_relay=config.relay is not None,
            seeding=service.seed_enabled, backend=community.backend, backend_down=None,
        ).to_json()  # fmt: skip

    return {
        "config": config.origin,
        "rest": f"{config.server.host}:{config.server.port}",
        "workers": config.server.workers,  # processes serving it (bridge.workers)
        "store": config.store.url if "@" not in config.store.url else "postgresql://…",
        "v1": None if config.v1 is None else f"{config.v1.host}:{config.v1.port}",
        "relay": None if config.relay is None else config.relay.url,
        "history_nodes": [] if config.history is None else list(config.history.nodes),
        "communities": [
            {
                "id": str(c.id),
                "shard": c.shard,
                "channels": len(c.channels),
                "link_reach": reach(c),
            }
            for c in config.communities
        ],
        "admin_api": config.admin.token is not None,
        "libp2p": _libp2p_summary(config),
    }


def _libp2p_summary(config: Any) -> dict[str, Any] | None:
    """``[libp2p]`` as it would run; a key file that is there must hold a key (its peer id
    is shown); a missing one is created at start."""
    if config.libp2p is None:
        return None
    from pathlib import Path

    from waku_legacy.p2p.keys import load_key_pair, peer_id_of

    p2p = config.libp2p
    exists = Path(p2p.key_file).exists()
    return {
        "listen": list(p2p.listen),
        "cluster_id": p2p.cluster_id,
        "shards": list(p2p.shards),
        "key_file": p2p.key_file,
        "peer_id": peer_id_of(load_key_pair(p2p.key_file, create=False)[0]) if exists else None,
    }


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "serve",
        help="run the bridge: nwaku-compatible store REST, v1 mailserver, archives, seeding",
        description=(
            "Run the bridge service: the v2 store over nwaku's REST API, the Waku v1 "
            "mailserver over RLPx, live bridging through an nwaku relay, history pulls, "
            "and community archives built, seeded and announced every 7 days."
        ),
    )
    parser.add_argument("--config", required=True, metavar="FILE", help="TOML configuration")
    parser.add_argument("--check", action="store_true", help="validate the config and exit")
    parser.add_argument(
        "--log-level",
        choices=("debug", "info", "warning", "error"),
        help="override [logging] (default: the config's [logging] level)",
    )
    parser.set_defaults(func=_serve)
