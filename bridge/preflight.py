"""``waku-legacy serve --check``: what ``serve`` would refuse, found before anything starts
(the store file, the key files, the listen addresses another process holds)."""

from __future__ import annotations

from pathlib import Path

from waku_legacy.bridge.config import BridgeConfig
from waku_legacy.config.keys import parse_listen
from waku_legacy.errors import ConfigError, WakuLegacyError

__all__ = ["busy_listen_addresses", "check", "check_key_files", "listen_addresses"]


def check(config: BridgeConfig, *, ports: bool) -> None:
    """What ``serve`` refuses, refused now (one reading of the store and the key files);
    ``ports``: also the listen addresses in use (``--check``; ``serve`` finds them when it
    binds)."""
    from waku_legacy.store import check_store_file

    check_store_file(config.store.url, create=config.store.create)
    check_key_files(config)
    if ports:
        busy = busy_listen_addresses(config)
        if busy:
            raise ConfigError(f"listen address(es) in use: {'; '.join(busy)}")


def listen_addresses(config: BridgeConfig, *, seed: bool = True) -> list[tuple[str, str, int]]:
    """Every TCP address the service binds: ``(what, host, port)``; port 0 (any free one)
    left out."""
    server = config.server
    found: list[tuple[str, str, int]] = [("[server] listen", server.host, server.port)]
    if config.v1 is not None:
        found.append(("[v1] listen", config.v1.host, config.v1.port))
    if config.archive is not None and seed and config.communities:
        host, port = parse_listen(config.archive.seed_listen, "[archive]", "seed_listen")
        found.append(("[archive] seed_listen", host, port))
    if config.libp2p is not None:
        for address in config.libp2p.listen:
            parts = address.strip("/").split("/")
            if len(parts) >= 4 and parts[0] in ("ip4", "ip6") and parts[2] == "tcp":
                found.append(("[libp2p] listen", parts[1], int(parts[3])))
    return [entry for entry in found if entry[2] != 0]


def busy_listen_addresses(config: BridgeConfig, *, seed: bool = True) -> list[str]:
    """The listen addresses another process already holds (each with its config key)."""
    import socket

    busy = []
    for what, host, port in listen_addresses(config, seed=seed):
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        with socket.socket(family, socket.SOCK_STREAM) as probe:
            # as the servers bind: a port in TIME_WAIT is free to them, so free here too
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                probe.bind((host, port))
            except OSError as exc:
                busy.append(f"{what} {host}:{port} ({exc.strerror or exc})")
    return busy


def check_key_files(config: BridgeConfig) -> None:
    """Every key file the service would read, read now (length and format), so that `serve
    --check` refuses what `serve` refuses. A missing v1 or libp2p node key is fine (the
    service creates one); community and operator keys must be there when named."""
    from waku_legacy.community_config import load_community_key, load_operator_key
    from waku_legacy.crypto.key_file import load_node_key

    if config.v1 is not None and Path(config.v1.node_key_file).exists():
        try:
            load_node_key(config.v1.node_key_file, what="v1 node key file")
        except WakuLegacyError as exc:
            raise ConfigError(f"[v1] node_key_file: {exc}") from None
    if config.libp2p is not None and Path(config.libp2p.key_file).exists():
        try:
            load_node_key(config.libp2p.key_file, what="libp2p key file")
        except WakuLegacyError as exc:
            raise ConfigError(f"[libp2p] key_file: {exc}") from None
    for community in config.communities:
        load_community_key(community)
        load_operator_key(community)
