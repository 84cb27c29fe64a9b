"""What ``demo`` adds so that its output can be served at once: ``DIR/bridge.toml``, a bridge
config for the folder (loopback listeners, the demo's store, archives, torrents and community
keys, a v1 node key and an admin token), and the commands that serve and query it.

The config's paths are relative to it, so the folder can be moved. Each demo run rewrites it;
the admin token and the node key (hence the enode) are kept when present, and so is each
port while it is free on loopback: a port something else took since (say, a bridge still
serving the folder) is replaced by a fresh free one.

The file is written as text (:mod:`~waku_legacy.config.toml_text`): the migration does not
import the bridge (README, "Layers"); the tests load it with the bridge's own reader.
"""

from __future__ import annotations

import secrets
import shlex
import socket
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

from waku_legacy.errors import ConfigError

__all__ = [
    "ADMIN_TOKEN_FILE",
    "BRIDGE_CONFIG_FILE",
    "LOOPBACK",
    "NODE_KEY_FILE",
    "DemoBridge",
    "DemoPorts",
    "ExampleChannel",
    "choose_ports",
    "cli_command",
    "example_channel",
    "serve_instructions",
    "serve_lines",
    "write_bridge_config",
]

BRIDGE_CONFIG_FILE = "bridge.toml"
ADMIN_TOKEN_FILE = "admin.token"
NODE_KEY_FILE = "keys/bridge-node.key"
LIBP2P_KEY_FILE = "keys/bridge-libp2p.key"
LOOPBACK = "127.0.0.1"
PORT_ATTEMPTS = 100
_HEADER = """\
waku-legacy demo: a bridge serving this folder's migration (waku-legacy serve --config FILE).
Paths are relative to this file. Written by every demo run over the folder: the admin token
and the node key are kept, and so are the ports while they are free. Loopback only; no
[relay] or [history] (no nwaku node here), so the magnet links are seeded, not announced.
The keys are described in deploy/bridge.example.toml."""


@dataclass(frozen=True, slots=True)
class DemoPorts:
    rest: int  # [server] listen
    v1: int  # [v1] listen (RLPx, TCP)
    seed: int  # [archive] seed_listen (BitTorrent, TCP and uTP over UDP)
    p2p: int  # [libp2p] listen (TCP): the store for v2 clients such as js-waku


@dataclass(frozen=True, slots=True)
class DemoBridge:
    """The written config and how to reach the bridge it describes."""

    config_path: Path
    ports: DemoPorts
    enode: str
    token_file: Path
    p2p_address: str  # the libp2p multiaddr, /ip4/127.0.0.1/tcp/<port>/p2p/<peer id>


@dataclass(frozen=True, slots=True)
class ExampleChannel:
    """The channel the example queries ask for, and the window the demo's history spans."""

    pubsub_topic: str
    content_topic: str
    v1_topic: bytes
    start: int  # Unix seconds
    end: int


def example_channel(
    community: str, channel: str, shard: int, start: int, end: int
) -> ExampleChannel:
    """The example queries' channel: ``channel`` of ``community`` (0x… id) on ``shard``."""
    from waku_legacy.identity.shards import community_pubsub_topic
    from waku_legacy.identity.topics import CommunityId, chat_topic, content_topic_of_chat

    chat = CommunityId.parse(community).channel_chat_id(channel)
    return ExampleChannel(
        community_pubsub_topic(shard), content_topic_of_chat(chat), chat_topic(chat), start, end
    )


def _port_free(port: int, *, udp: bool) -> bool:
    """Whether ``port`` can be bound on loopback now (TCP; also UDP when ``udp``)."""
    kinds = (socket.SOCK_STREAM, socket.SOCK_DGRAM) if udp else (socket.SOCK_STREAM,)
    for kind in kinds:
        with socket.socket(socket.AF_INET, kind) as probe:
            if kind == socket.SOCK_STREAM:
                # as the servers bind: a port whose old connections linger in TIME_WAIT is free
                probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                probe.bind((LOOPBACK, port))
            except OSError:
                return False
    return True


def _fresh_port(*, udp: bool, taken: set[int]) -> int:
    for _ in range(PORT_ATTEMPTS):
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
            probe.bind((LOOPBACK, 0))
            port = int(probe.getsockname()[1])
        if port not in taken and _port_free(port, udp=udp):
            return port
    raise ConfigError(f"demo: found no free port on {LOOPBACK} in {PORT_ATTEMPTS} attempts")


def _previous_ports(config_path: Path) -> dict[str, int]:
    """The ports an earlier demo run wrote into ``config_path`` (none when unreadable)."""
    from waku_legacy.config import read_toml

    try:
        data = read_toml(config_path)
    except ConfigError:  # none yet, or not TOML any more
        return {}
    found = {}
    for name, table, key in (
        ("rest", "server", "listen"), ("v1", "v1", "listen"), ("seed", "archive", "seed_listen")
    ):  # fmt: skip
        section = data.get(table)
        value = section.get(key) if isinstance(section, dict) else None
        port = value.rpartition(":")[2] if isinstance(value, str) else ""
        if port.isdigit() and 0 < int(port) < 65536:
            found[name] = int(port)
    libp2p = data.get("libp2p")
    listen = libp2p.get("listen") if isinstance(libp2p, dict) else None
    if isinstance(listen, list) and listen and isinstance(listen[0], str):
        port = listen[0].rpartition("/tcp/")[2].split("/")[0]
        if port.isdigit() and 0 < int(port) < 65536:
            found["p2p"] = int(port)
    return found


def choose_ports(config_path: Path) -> DemoPorts:
    """The previous run's ports where still free, fresh free ones elsewhere; all distinct."""
    previous = _previous_ports(config_path)
    chosen: dict[str, int] = {}
    for name in ("rest", "v1", "seed", "p2p"):
        udp = name == "seed"
        old = previous.get(name)
        if old is not None and old not in chosen.values() and _port_free(old, udp=udp):
            chosen[name] = old
        else:
            chosen[name] = _fresh_port(udp=udp, taken=set(chosen.values()))
    return DemoPorts(**chosen)


def _admin_token(path: Path) -> None:
    """A random bearer token, owner-only; an existing usable one is kept."""
    from waku_legacy.durable import write_atomic
    from waku_legacy.files import MAX_KEY_FILE, read_small_text

    try:
        if len(read_small_text(path, what="admin token", max_size=MAX_KEY_FILE).strip()) >= 16:
            return
    except ConfigError:
        pass  # missing, or nothing the bridge would accept: a new one replaces it
    token = secrets.token_urlsafe(32)
    write_atomic(path, (token + "\n").encode("ascii"), step="admin-token", mode=0o600)


def _config_data(communities: Sequence[Mapping[str, Any]], ports: DemoPorts) -> dict[str, Any]:
    return {
        "server": {"listen": f"{LOOPBACK}:{ports.rest}"},
        "store": {"url": "sqlite:store.sqlite3"},
        "v1": {"listen": f"{LOOPBACK}:{ports.v1}", "node_key_file": NODE_KEY_FILE},
        "archive": {
            "archive_dir": "archives",
            "torrent_dir": "torrents",
            "seed_listen": f"{LOOPBACK}:{ports.seed}",
            "trackers": False,  # a demo announces nothing to public trackers or the DHT
            "dht": False,
        },
        # v2 clients (js-waku, `store query`) reach the store over libp2p; its shards
        # default to the communities' shards
        "libp2p": {"listen": [f"/ip4/{LOOPBACK}/tcp/{ports.p2p}"], "key_file": LIBP2P_KEY_FILE},
        "community": list(communities),
        "admin": {"token_file": ADMIN_TOKEN_FILE},
        "logging": {"level": "info", "format": "text"},
    }


def write_bridge_config(
    out: Path, communities: Sequence[Mapping[str, Any]], *, header: str = _HEADER
) -> DemoBridge:
    """Write ``out/bridge.toml`` (and the admin token and v1 node key it names) for the demo
    output in ``out``; ``communities`` are the ``[[community]]`` tables, paths relative to
    ``out``; ``header`` is the file's opening comment."""
    from waku_legacy.config.toml_text import toml_document
    from waku_legacy.crypto.key_file import load_or_create_node_key
    from waku_legacy.durable import write_atomic
    from waku_legacy.mailserver_compat.rlpx.enode import Enode

    config_path = out / BRIDGE_CONFIG_FILE
    ports = choose_ports(config_path)
    token_file = out / ADMIN_TOKEN_FILE
    _admin_token(token_file)
    (out / NODE_KEY_FILE).parent.mkdir(parents=True, exist_ok=True)
    node_key, _ = load_or_create_node_key(out / NODE_KEY_FILE)
    text = toml_document(_config_data(communities, ports), header=header)
    write_atomic(config_path, text.encode("utf-8"), step="bridge-config")
    from waku_legacy.p2p.keys import load_key_pair, peer_id_of

    pair, _ = load_key_pair(out / LIBP2P_KEY_FILE)  # kept across runs: the same peer id
    p2p_address = f"/ip4/{LOOPBACK}/tcp/{ports.p2p}/p2p/{peer_id_of(pair)}"
    public_key = node_key.public_key.format(compressed=False)[1:]
    enode = str(Enode(public_key, LOOPBACK, ports.v1))
    return DemoBridge(config_path, ports, enode, token_file, p2p_address)


def cli_command() -> list[str]:
    """How to run this installation's ``waku-legacy`` from any shell: the virtualenv's
    entry point by its absolute path (a bare ``waku-legacy`` fails, exit 127, unless the
    virtualenv is active), else this interpreter with ``-m``."""
    script = Path(sys.executable).parent / "waku-legacy"
    return [str(script)] if script.exists() else [sys.executable, "-m", "waku_legacy.cli"]


def serve_instructions(
    bridge: DemoBridge,
    channel: ExampleChannel,
    magnet_links: Mapping[str, str],
    fetch_community: str | None = None,
) -> dict[str, Any]:
    """The command that serves the demo and one query per side (the ``serve`` field of
    ``demo --json``)."""
    query = urlencode({
        "pubsubTopic": channel.pubsub_topic, "contentTopics": channel.content_topic,
        "includeData": "true", "pageSize": "20",
    })  # fmt: skip
    rest = f"http://{LOOPBACK}:{bridge.ports.rest}"
    dump = bridge.config_path.parent / "v1-pull.dump"
    cli = cli_command()
    pull = [
        *cli, "v1", "pull", "--enode", bridge.enode, "--topics",
        channel.v1_topic.hex(), "--from", str(channel.start), "--to", str(channel.end),
        "--out", str(dump),
    ]  # fmt: skip
    token = shlex.quote(str(bridge.token_file))
    p2p_query = [
        *cli, "store", "query", "--peer", bridge.p2p_address, "--pubsub-topic",
        channel.pubsub_topic, "--content-topic", channel.content_topic, "--page-size", "20",
    ]  # fmt: skip
    fetch = None
    if fetch_community is not None and fetch_community in magnet_links:
        fetch = shlex.join([
            *cli, "fetch", "--community", fetch_community, "--magnet",
            magnet_links[fetch_community], "--peer", f"{LOOPBACK}:{bridge.ports.seed}",
            "--no-trackers", "--save-dir", str(bridge.config_path.parent / "fetched"),
            "--output", str(bridge.config_path.parent / "fetched" / "messages.jsonl"),
        ])  # fmt: skip
    return {
        "config": str(bridge.config_path),
        "command": shlex.join([*cli, "serve", "--config", str(bridge.config_path)]),
        "rest": rest,
        "store_query": shlex.join(["curl", "-s", f"{rest}/store/v3/messages?{query}"]),
        "admin_query": f'curl -s -H "Authorization: Bearer $(cat {token})" '
        f"{rest}/admin/v1/communities",
        "enode": bridge.enode,
        "v1_pull": shlex.join(pull),
        "libp2p": bridge.p2p_address,
        "libp2p_store_query": shlex.join(p2p_query),
        "fetch": fetch,
        "seed_listen": f"{LOOPBACK}:{bridge.ports.seed}",
        "magnet_links": dict(magnet_links),
    }


def serve_lines(serve: Mapping[str, Any]) -> list[str]:
    """:func:`serve_instructions` for people (the end of ``demo``'s table output)."""
    lines = [
        "",
        "serve it (v2 store over REST, v1 mailserver over RLPx, the torrents seeded):",
        f"  {serve['command']}",
        "then, from another shell:",
        "  v2 side, a REST store query (nwaku's API) for a channel's messages:",
        f"    {serve['store_query']}",
        "  v2 side over libp2p, as a Waku v2 client (js-waku) asks the store:",
        f"    {serve['libp2p_store_query']}",
        f"  v1 side, the mailserver's enode: {serve['enode']}",
        "    and a history request to it over RLPx:",
        f"    {serve['v1_pull']}",
        f"  the archives: the magnet links, seeded on {serve['seed_listen']}:",
    ]
    lines += [f"    {magnet}" for magnet in serve["magnet_links"].values()]
    if serve.get("fetch"):
        lines += ["  a member's fetch of the first community's archives from the seeder:",
                  f"    {serve['fetch']}"]  # fmt: skip
    lines += [
        "  the bridge's view of them (admin token from its file):",
        f"    {serve['admin_query']}",
    ]
    return lines
