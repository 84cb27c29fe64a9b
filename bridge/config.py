"""The bridge's TOML configuration (``waku-legacy serve --config FILE``).

    [server]                                 # the REST API (nwaku-compatible store, ops, admin)
    listen = "127.0.0.1:8645"
    reader_threads = 2                       # store queries run on these threads (0: inline)
    shutdown_timeout = "30s"                 # grace for in-flight requests and writes
    max_connections = 1000                   # open connections; more are answered 503, closed
    max_connections_per_address = 64         # per client IP address
    header_timeout = "10s"                   # from a request's first byte to its last header
    idle_timeout = "30s"                     # keep-alive: no request for this long -> closed
    body_timeout = "10s"                     # to receive a request body
    requests_per_second = 50                 # per client IP address (0: no budget); cursor
    request_burst = 200                      #   continuations of answered pages are free
    status_page = true                       # GET / (HTML) and /debug/v1/status (JSON): the
                                             #   service's state, nothing secret, no token
    workers = 2                              # processes serving the REST API on one socket
                                             #   (default: the number of cores; 1: one
                                             #   process). See bridge.workers

    [store]
    url = "sqlite:///var/lib/waku-legacy/store.sqlite3"   # or postgresql://…, or a path
    leader_interval = "15s"                  # PostgreSQL: instances sharing the store take
                                             #   turns at archiving/seeding/publishing/history
                                             #   (advisory lock; bridge.leader), retried and
                                             #   checked this often

    [v1]                                     # optional: the Waku v1 side (RLPx + mailserver)
    listen = "0.0.0.0:30303"
    node_key_file = "nodekey"                # created when missing
    min_pow = 0.001                          # advertised and enforced for live envelopes
    rate_limit = "1s"                        # a fresh history request per peer per interval
    trusted_peers = ["<128 hex public key>"] # exempt from the rate limit; their 0x7f accepted
    live_window = "5m"                       # v2 messages younger than this are offered live
    seen_capacity = 100000                   # bounded seen-cache (loops and repeats)

    [v1.limits]                              # optional: mailserver_compat.server.limits.V1Limits
    request_burst = 10                       # fresh requests per peer at once (pages are free)
    address_request_rate = 5                 # fresh requests per second per source address
    live_rate = 20                           # live envelopes per second per peer (also
    address_live_rate = 50                   #   *_burst); per address (IPv6: per /64)
    max_peers = 500                          # connections; max_peers_per_address = 16,
    scan_limit = 5000                        #   max_pending_handshakes = 64; rows per request

    [relay]                                  # optional: the nwaku node to publish through
    url = "http://127.0.0.1:8646"            # its REST API (POST /relay/v1/messages/{topic})
    timeout = "10s"
    retries = 3
    queue = 10000                            # bounded forward queue (oldest dropped, counted)
    default_pubsub_topic = "/waku/2/rs/16/32"   # v1 topics of no configured community

    [[relay.protected_shard]]                # repeat: a DoS-protected topic (57/STATUS-Simple-
    pubsub_topic = "/waku/2/rs/16/128"       #   Scaling); messages on it carry the shard key's
    key_file = "shard-128.key"               #   signature in meta; without a key_file the
    public_key = "0x04…"                     #   bridge refuses to publish there. public_key
                                             #   (optional) must match the key_file's key

    [history]                                # optional: keep the last 30 days complete
    nodes = ["http://store-1:8645"]          # nwaku REST store endpoints to pull from
    window = "30d"
    interval = "1h"
    page_size = 100
    pubsub_topics = []                       # default: the communities' shards + default topic
    state_dir = "state"                      # resumable positions (default: beside the store)

    [archive]                                # optional: community history archives
    archive_dir = "archives"
    torrent_dir = "torrents"
    seed_listen = "0.0.0.0:6881"             # BitTorrent seeding address
    trackers = true                          # announce to status-go's trackers
    dht = false
    utp = true                               # uTP as well as TCP (status-go's client speaks it)
    interval = "7d"                          # a new archive run per community
    republish_interval = "6h"                # re-send the current magnet link
    second_link_delay = "1h"                 # archive_link_chats "both": -magnetlinks copy
                                             #   this long after the -memberUpdate one
    flavour = "status-go"                    # or "seed-spec"

    [[community]]                            # repeat; read as the migration reads it
    id = "0x02…"
    channels = ["<uuid>", …]
    shard = 128
    key_file = "community.key"               # signs the magnet-link message (needed to publish)
    archive_link_chats = "both"              # "universal" (<id>-memberUpdate, current
                                             #   clients), "magnetlinks" (2024 clients), both
    operator_key_file = "operator.key"       # optional: signs that message's 26/WAKU-PAYLOAD
                                             #   (status-go: the node's key); default key_file
    backend = "torrent"                      # or "logos-storage" (uploads to [logos_storage],
                                             #   the link is the index CID; never both)
    archive_topics = "both"                  # archived channel messages on their channel
                                             #   topics ("channel": clients before status-go
                                             #   PR #5993), on <id>-memberUpdate ("universal":
                                             #   current clients), or twice ("both")
    min_link_clock = 1730000000000           # optional: archive links signed at least at
                                             #   this clock (ms): a Status client's links

    [logos_storage]                          # required when a community uses that back end
    url = "http://127.0.0.1:8080"            # the node's REST root (/api/storage/v1 under it)

    [libp2p]                                 # optional: Waku v2 clients (js-waku, go-waku,
    enabled = true                           #   status-go) query the store over libp2p:
    listen = ["/ip4/0.0.0.0/tcp/60000", "/ip4/0.0.0.0/tcp/8000/ws"]   # store v3 and legacy
    announce = ["/dns4/bridge.example.org/tcp/8000/ws"]   # what peers are told (identify,
                                             #   /debug/v1/info) instead of the listen
                                             #   addresses, as nwaku's --ext-multiaddr
    key_file = "libp2p.key"                  # secp256k1 as nwaku's --nodekey; created when
                                             #   missing (mode 0600); the peer id comes from it
    cluster_id = 16                          # answered on /vac/waku/metadata/1.0.0; js-waku
    shards = [128]                           #   uses a store peer only for the shards listed
                                             #   (default: the communities' shards, the
                                             #   relay default topic's shard and, at start,
                                             #   the shards of the store's messages)
    max_connections = 200                    # in total; max_connections_per_peer = 4 (peer
    max_connections_per_address = 32         #   id), per source address (IPv6: per /64),
                                             #   counted from accept, before any handshake
    max_handshakes = 128                     # connections in their Noise + muxer handshake
    max_handshakes_per_address = 16          #   (handshake_timeout each), and from one address
    address_share = 0.5                      # one address never holds more of either budget
    max_buffered_bytes = 4194304             # yamux: bytes one connection holds unread (and
                                             #   each stream held to its receive window)
    max_streams_per_connection = 32          # store requests in flight on one connection
    max_request_bytes = 65536                # one store request (a frame over it: reset)
    read_timeout = "30s"                     # a stream's whole request (js-waku pre-opens
                                             #   streams: keep it >= 30s); also write_timeout
    handshake_timeout = "10s"                # Noise + muxer of a new connection, and a
                                             #   stream's protocol negotiation
    idle_timeout = "5m"                      # a connection without progress (no stream
                                             #   opened, ended or answered) is closed
    requests_per_second = 20                 # per peer id (0: no budget); request_burst = 40;
                                             #   a store v3 page's next page is free
    address_requests_per_second = 100        # per source address (IPv6: /64), burst 5x
    server = "native"                        # the project's own sans-IO server side on the
                                             #   bridge's asyncio loop; "py-libp2p": py-libp2p
                                             #   in a trio thread (same protocols and limits,
                                             #   ~2.5x the CPU per request; bench/README.md)
    workers = 4                              # threads answering store queries (one store
                                             #   connection each)

    [admin]
    token = "…"                              # or token_file = "admin.token" (one of the two)

    [logging]
    level = "info"                           # debug, info, warning, error
    format = "json"                          # JSON lines, or "text"

Durations are integers (seconds) or strings with a unit: ``"45s"``, ``"30m"``, ``"6h"``,
``"7d"``. Relative paths are relative to the config file. Unknown keys are errors naming the
key (a typo must not silently switch a feature off). Files the config names are read as
regular files of bounded size (:mod:`waku_legacy.files`: the config itself up to 1 MiB,
token and key files up to 4 KiB); a device, FIFO or directory there is a ConfigError.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from waku_legacy.archive import defaults
from waku_legacy.community_config import (
    CommunityConfig,
    parse_communities,
    parse_logos_storage,
)
from waku_legacy.config import ConfigTable, read_toml, resolve_path, resolve_store_url
from waku_legacy.errors import ConfigError, WakuLegacyError
from waku_legacy.files import MAX_KEY_FILE, read_small_text
from waku_legacy.identity.shards import GLOBAL_PUBSUB_TOPIC, STATUS_CLUSTER_ID
from waku_legacy.mailserver_compat.server.limits import V1Limits

__all__ = [
    "AdminConfig",
    "ArchiveConfig",
    "BridgeConfig",
    "CommunityConfig",
    "HistoryConfig",
    "Libp2pConfig",
    "LoggingConfig",
    "ProtectedShard",
    "RelayConfig",
    "ServerConfig",
    "StoreConfig",
    "V1Config",
    "load_config",
    "parse_config",
    "parse_duration",
    "parse_listen",
]

DAY = 86_400
_DURATION = re.compile(r"\s*([0-9]+(?:\.[0-9]+)?)\s*(ms|s|m|h|d)?\s*")
_UNITS = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": DAY, None: 1}


def parse_duration(value: Any, where: str, key: str) -> float:
    """Seconds from an integer/float or a string like ``"7d"``; positive."""
    if isinstance(value, bool):
        raise ConfigError(f"{where}: key '{key}' must be a duration, got a boolean")
    if isinstance(value, int | float):
        seconds = float(value)
    elif isinstance(value, str) and (match := _DURATION.fullmatch(value)):
        seconds = float(match.group(1)) * _UNITS[match.group(2)]
    else:
        raise ConfigError(
            f"{where}: key '{key}' must be a duration (seconds, or a string like "
            f"'45s', '30m', '6h', '7d'), got {value!r}"
        )
    if seconds <= 0:
        raise ConfigError(f"{where}: key '{key}' must be a positive duration, got {value!r}")
    return seconds


def parse_listen(value: str, where: str, key: str) -> tuple[str, int]:
    """``host:port`` (``[v6]:port``) with port 0..65535 (0: any free port)."""
    host, sep, port_text = value.rpartition(":")
    host = host.strip("[]")
    if not sep or not host or not port_text.isdigit() or not 0 <= int(port_text) <= 65535:
        raise ConfigError(f"{where}: key '{key}' must be host:port, got {value!r}")
    return host, int(port_text)


@dataclass(frozen=True, slots=True)
class ServerConfig:
    host: str = "127.0.0.1"
    port: int = 8645
    reader_threads: int = 2
    shutdown_timeout: float = 30.0
    max_connections: int = 1000
    max_connections_per_address: int = 64
    header_timeout: float = 10.0
    idle_timeout: float = 30.0
    body_timeout: float = 10.0
    requests_per_second: float = 50.0  # 0: no per-address request budget
    request_burst: int = 200
    status_page: bool = True  # GET / and /debug/v1/status (false: 404 like any unknown path)
    workers: int = 1  # processes serving the REST API (parsed default: the number of cores)


@dataclass(frozen=True, slots=True)
class StoreConfig:
    url: str
    leader_interval: float = 15.0  # PostgreSQL: the singleton lock's heartbeat and retry
    create: bool = False  # a missing SQLite store is refused unless asked for (issue 24)


@dataclass(frozen=True, slots=True)
class V1Config:
    host: str
    port: int
    node_key_file: str
    min_pow: float = 0.001
    rate_limit: float = 1.0
    trusted_peers: tuple[bytes, ...] = ()
    live_window: float = 300.0
    seen_capacity: int = 100_000
    limits: V1Limits = field(default_factory=V1Limits)


@dataclass(frozen=True, slots=True)
class ProtectedShard:
    """A DoS-protected pubsub topic (57): ``key_file`` signs ``meta`` (None: not ours to
    publish on); ``public_key`` is the 65-byte uncompressed key messages verify against."""

    pubsub_topic: str
    key_file: str | None
    public_key: bytes


@dataclass(frozen=True, slots=True)
class RelayConfig:
    url: str
    timeout: float = 10.0
    retries: int = 3
    queue: int = 10_000
    default_pubsub_topic: str = GLOBAL_PUBSUB_TOPIC
    protected_shards: tuple[ProtectedShard, ...] = ()


@dataclass(frozen=True, slots=True)
class HistoryConfig:
    nodes: tuple[str, ...]
    window: float = 30 * DAY
    interval: float = 3600.0
    page_size: int = 100
    pubsub_topics: tuple[str, ...] = ()
    state_dir: str | None = None
    timeout: float = 30.0
    retries: int = 5


@dataclass(frozen=True, slots=True)
class ArchiveConfig:
    archive_dir: str
    torrent_dir: str
    seed_listen: str = "0.0.0.0:6881"
    trackers: bool = True
    dht: bool = False
    utp: bool = True
    interval: float = 7 * DAY
    republish_interval: float = 6 * 3600.0
    flavour: str = defaults.FLAVOUR
    # archive_link_chats = "both": the <id>-magnetlinks copy goes out this long after the
    # <id>-memberUpdate one (longer than a fetch: a 2024 client that hears both restarts a
    # download the second copy interrupts); README "The archive-link (magnet-link) message"
    second_link_delay: float = 3600.0


LIBP2P_SERVERS = ("native", "py-libp2p")


@dataclass(frozen=True, slots=True)
class Libp2pConfig:
    """``[libp2p]``: the store over libp2p (:mod:`waku_legacy.bridge.p2p`)."""

    listen: tuple[str, ...]
    key_file: str
    cluster_id: int
    shards: tuple[int, ...]  # announced in metadata and the ENR (js-waku picks peers by them)
    announce: tuple[str, ...] = ()
    max_connections: int = 200
    max_connections_per_peer: int = 4
    max_connections_per_address: int = 32
    max_handshakes: int = 128
    max_handshakes_per_address: int = 16
    address_share: float = 0.5
    max_buffered_bytes: int = 4 * 1024 * 1024
    max_streams_per_connection: int = 32
    max_request_bytes: int = 65536
    read_timeout: float = 30.0
    write_timeout: float = 30.0
    handshake_timeout: float = 10.0
    idle_timeout: float = 300.0
    requests_per_second: float = 20.0
    request_burst: int = 40
    address_requests_per_second: float = 100.0
    workers: int = 4
    #: which server side answers: "native" (waku_legacy.p2p.native, on the bridge's loop) or
    #: "py-libp2p" (py-libp2p in a trio thread)
    server: str = "native"
    # `shards` given: announced as given; else the communities' shards (and the relay's
    # default), plus at start the shards of the store's messages (issue 24)
    shards_configured: bool = False


@dataclass(frozen=True, slots=True)
class AdminConfig:
    token: str | None = None  # None: admin endpoints answer 403 to everyone


@dataclass(frozen=True, slots=True)
class LoggingConfig:
    level: str = "info"
    format: str = "json"


@dataclass(frozen=True, slots=True)
class BridgeConfig:
    server: ServerConfig
    store: StoreConfig
    v1: V1Config | None
    relay: RelayConfig | None
    history: HistoryConfig | None
    archive: ArchiveConfig | None
    communities: tuple[CommunityConfig, ...]
    admin: AdminConfig = field(default_factory=AdminConfig)
    logging: LoggingConfig = field(default_factory=LoggingConfig)
    origin: str = "<config>"
    base_dir: str = "."
    logos_storage_url: str | None = None  # [logos_storage] url (issue 12)
    libp2p: Libp2pConfig | None = None  # [libp2p] (issue 13)


# -- table readers -----------------------------------------------------------------------------


def _duration(t: ConfigTable, key: str, default: float) -> float:
    value = t.raw(key)
    return default if value is None else parse_duration(value, t.where, key)


def _boolean(t: ConfigTable, key: str, default: bool) -> bool:
    value = t.raw(key)
    if value is None:
        return default
    if not isinstance(value, bool):
        raise t.error(key, "true or false", value)
    return value


def _http_url(t: ConfigTable, key: str, value: str) -> str:
    if not value.startswith(("http://", "https://")):
        raise t.error(key, "an http:// or https:// URL", value)
    return value.rstrip("/")


def _optional_table(top: ConfigTable, key: str) -> ConfigTable | None:
    if top.data.get(key) is None:
        top.used.add(key)
        return None
    return top.table(key)


def _pubsub_topic(t: ConfigTable, key: str, value: str) -> str:
    if not value.startswith("/waku/2/"):
        raise t.error(key, "a Waku v2 pubsub topic (/waku/2/…)", value)
    return value


def _rate(t: ConfigTable, key: str, default: float) -> float:
    value = t.raw(key)
    if value is None:
        return default
    if not isinstance(value, int | float) or isinstance(value, bool) or value < 0:
        raise t.error(key, "a non-negative number (0: off)", value)
    return float(value)


def _share(t: ConfigTable, key: str, default: float) -> float:
    value = t.number(key, default=default)
    if value > 1:
        raise t.error(key, "a share above 0 and at most 1", value)
    return value


def _parse_server(top: ConfigTable) -> ServerConfig:
    t = top.table("server")
    host, port = parse_listen(t.string("listen", default="127.0.0.1:8645"), t.where, "listen")
    config = ServerConfig(
        host=host,
        port=port,
        reader_threads=t.integer("reader_threads", default=2, low=0, high=64),
        shutdown_timeout=_duration(t, "shutdown_timeout", 30.0),
        max_connections=t.integer("max_connections", default=1000, low=1, high=1_000_000),
        max_connections_per_address=t.integer(
            "max_connections_per_address", default=64, low=1, high=1_000_000
        ),
        header_timeout=_duration(t, "header_timeout", 10.0),
        idle_timeout=_duration(t, "idle_timeout", 30.0),
        body_timeout=_duration(t, "body_timeout", 10.0),
        requests_per_second=_rate(t, "requests_per_second", 50.0),
        request_burst=t.integer("request_burst", default=200, low=1, high=1_000_000),
        status_page=_boolean(t, "status_page", True),
        workers=t.integer("workers", default=os.cpu_count() or 1, low=1, high=256),
    )
    t.done()
    return config


def _parse_store(top: ConfigTable, base: Path) -> StoreConfig:
    if top.data.get("store") is None:
        raise ConfigError(f"{top.where}: a [store] table with 'url' is required")
    t = top.table("store")
    url = t.string("url", required=True).strip()
    if not url:
        raise ConfigError(f"{t.where}: key 'url' must name a store")
    try:
        resolved = resolve_store_url(base, url)
    except ConfigError:
        raise t.error("url", "sqlite:///path, a file path or postgresql://…", url) from None
    leader_interval = _duration(t, "leader_interval", 15.0)
    if leader_interval <= 0:
        raise t.error("leader_interval", "a positive duration", t.raw("leader_interval"))
    create = _boolean(t, "create", False)
    t.done()
    return StoreConfig(resolved, leader_interval, create)


def _public_key(t: ConfigTable, key: str, text: str) -> bytes:
    from waku_legacy.mailserver_compat.rlpx.enode import Enode

    value = text.strip()
    if value.startswith("enode://"):
        try:
            return Enode.parse(value).public_key
        except WakuLegacyError as exc:
            raise t.error(key, f"enode URLs or 128-hex public keys ({exc})", text) from None
    value = value[2:] if value[:2] in ("0x", "0X") else value
    try:
        raw = bytes.fromhex(value)
    except ValueError:
        raw = b""
    if len(raw) == 65 and raw[0] == 4:
        raw = raw[1:]
    if len(raw) != 64:
        raise t.error(key, "enode URLs or 128-hex public keys", text)
    return raw


def _parse_v1(top: ConfigTable, base: Path) -> V1Config | None:
    t = _optional_table(top, "v1")
    if t is None:
        return None
    host, port = parse_listen(t.string("listen", default="0.0.0.0:30303"), t.where, "listen")
    key_file = resolve_path(base, t.string("node_key_file", default="nodekey"))
    assert key_file is not None
    min_pow = t.raw("min_pow")
    if min_pow is None:
        min_pow = 0.001
    elif not isinstance(min_pow, int | float) or isinstance(min_pow, bool) or min_pow < 0:
        raise t.error("min_pow", "a non-negative number", min_pow)
    rate_limit = t.raw("rate_limit")
    rate = 1.0 if rate_limit is None else (
        0.0 if rate_limit == 0 else parse_duration(rate_limit, t.where, "rate_limit")
    )  # fmt: skip
    trusted = tuple(_public_key(t, "trusted_peers", p) for p in t.strings("trusted_peers"))
    config = V1Config(
        host=host,
        port=port,
        node_key_file=key_file,
        min_pow=float(min_pow),
        rate_limit=rate,
        trusted_peers=trusted,
        live_window=_duration(t, "live_window", 300.0),
        seen_capacity=t.integer("seen_capacity", default=100_000, low=100, high=10_000_000),
        limits=V1Limits.from_mapping(t.raw("limits"), f"{t.where}.limits"),
    )
    t.done()
    return config


def _parse_protected_shard(raw: Any, number: int, base: Path) -> ProtectedShard:
    from waku_legacy.crypto.key_file import load_node_key
    from waku_legacy.crypto.secp256k1 import uncompressed_public_key

    t = ConfigTable(raw, f"[[relay.protected_shard]] #{number}")
    topic = _pubsub_topic(t, "pubsub_topic", t.string("pubsub_topic", required=True))
    t.where = f"[[relay.protected_shard]] {topic}"
    key_file = resolve_path(base, t.string("key_file"))
    text = t.string("public_key")
    public_key = None
    if text is not None:
        try:
            hex_text = text[2:] if text[:2] in ("0x", "0X") else text
            public_key = uncompressed_public_key(bytes.fromhex(hex_text))
        except (ValueError, WakuLegacyError):
            raise t.error(
                "public_key", "a secp256k1 public key in hex (65 bytes 04…, or 33 compressed)", text
            ) from None
    if key_file is not None:
        try:
            own = load_node_key(key_file).public_key.format(compressed=False)
        except WakuLegacyError as exc:
            raise ConfigError(f"{t.where}: key_file: {exc}") from None
        if public_key is not None and own != public_key:
            raise ConfigError(
                f"{t.where}: key_file {key_file} holds the key of 0x{own.hex()}, not of the "
                f"configured public_key; its signatures would not verify on this shard"
            )
        public_key = own
    if public_key is None:
        raise ConfigError(
            f"{t.where}: give key_file (the shard key that signs messages on it) or, to only "
            "mark the topic protected (publishing there refused), its public_key"
        )
    t.done()
    return ProtectedShard(topic, key_file, public_key)


def _parse_relay(top: ConfigTable, base: Path) -> RelayConfig | None:
    t = _optional_table(top, "relay")
    if t is None:
        return None
    raw_shards = t.raw("protected_shard")
    if raw_shards is None:
        raw_shards = []
    if not isinstance(raw_shards, list):
        raise t.error(
            "protected_shard", "an array of tables ([[relay.protected_shard]])", raw_shards
        )
    shards = tuple(_parse_protected_shard(raw, n + 1, base) for n, raw in enumerate(raw_shards))
    topics = [s.pubsub_topic for s in shards]
    repeated = sorted({x for x in topics if topics.count(x) > 1})
    if repeated:
        raise ConfigError(
            f"{t.where}: [[relay.protected_shard]] lists {', '.join(repeated)} more than once"
        )
    config = RelayConfig(
        url=_http_url(t, "url", t.string("url", required=True)),
        timeout=_duration(t, "timeout", 10.0),
        retries=t.integer("retries", default=3, low=0, high=100),
        queue=t.integer("queue", default=10_000, low=1, high=10_000_000),
        default_pubsub_topic=_pubsub_topic(
            t, "default_pubsub_topic", t.string("default_pubsub_topic", default=GLOBAL_PUBSUB_TOPIC)
        ),
        protected_shards=shards,
    )
    t.done()
    return config


def _parse_history(top: ConfigTable, base: Path) -> HistoryConfig | None:
    t = _optional_table(top, "history")
    if t is None:
        return None
    nodes = tuple(_http_url(t, "nodes", n) for n in t.strings("nodes", required=True))
    if not nodes:
        raise ConfigError(f"{t.where}: key 'nodes' must list at least one REST URL")
    topics = tuple(_pubsub_topic(t, "pubsub_topics", p) for p in t.strings("pubsub_topics"))
    config = HistoryConfig(
        nodes=nodes,
        window=_duration(t, "window", 30 * DAY),
        interval=_duration(t, "interval", 3600.0),
        page_size=t.integer("page_size", default=100, low=1, high=100),
        pubsub_topics=topics,
        state_dir=resolve_path(base, t.string("state_dir")),
        timeout=_duration(t, "timeout", 30.0),
        retries=t.integer("retries", default=5, low=0, high=100),
    )
    t.done()
    return config


def _parse_archive(top: ConfigTable, base: Path) -> ArchiveConfig | None:
    t = _optional_table(top, "archive")
    if t is None:
        return None
    archive_dir = resolve_path(base, t.string("archive_dir", required=True))
    torrent_dir = resolve_path(base, t.string("torrent_dir", required=True))
    assert archive_dir is not None and torrent_dir is not None
    seed_listen = t.string("seed_listen", default="0.0.0.0:6881")
    parse_listen(seed_listen, t.where, "seed_listen")
    flavour = t.string("flavour", default=defaults.FLAVOUR)
    if flavour not in ("status-go", "seed-spec"):
        raise t.error("flavour", "'status-go' or 'seed-spec'", flavour)
    config = ArchiveConfig(
        archive_dir=archive_dir,
        torrent_dir=torrent_dir,
        seed_listen=seed_listen,
        trackers=_boolean(t, "trackers", True),
        dht=_boolean(t, "dht", False),
        utp=_boolean(t, "utp", True),
        interval=_duration(t, "interval", 7 * DAY),
        republish_interval=_duration(t, "republish_interval", 6 * 3600.0),
        flavour=flavour,
        second_link_delay=_duration(t, "second_link_delay", 3600.0),
    )
    if config.second_link_delay >= config.republish_interval:
        raise t.error(
            "second_link_delay",
            "a duration shorter than republish_interval (the second chat's copy of a link "
            "goes out that long after the first, before the next republish)",
            t.raw("second_link_delay"),
        )
    t.done()
    return config


def _parse_admin(top: ConfigTable, base: Path) -> AdminConfig:
    t = top.table("admin")
    token = t.string("token")
    token_file = resolve_path(base, t.string("token_file"))
    t.done()
    if token is not None and token_file is not None:
        raise ConfigError(f"{t.where}: give 'token' or 'token_file', not both")
    if token_file is not None:
        # A regular file of at most MAX_KEY_FILE bytes (/dev/zero or a huge file is refused).
        token = read_small_text(
            token_file, what=f"{t.where}: key 'token_file'", max_size=MAX_KEY_FILE
        ).strip()
    if token is not None and len(token) < 16:
        raise ConfigError(f"{t.where}: the admin token must be at least 16 characters")
    return AdminConfig(token)


def _parse_libp2p(
    top: ConfigTable, base: Path, default_shards: tuple[int, ...]
) -> Libp2pConfig | None:
    t = _optional_table(top, "libp2p")
    if t is None:
        return None
    enabled = _boolean(t, "enabled", True)
    listen = t.strings("listen") or ("/ip4/0.0.0.0/tcp/60000", "/ip4/0.0.0.0/tcp/8000/ws")
    for address in listen:
        if not address.startswith(("/ip4/", "/ip6/")) or "/tcp/" not in address:
            raise t.error("listen", "TCP multiaddrs such as /ip4/0.0.0.0/tcp/60000[/ws]", address)
    announce = t.strings("announce")
    for address in announce:
        if not address.startswith(("/ip4/", "/ip6/", "/dns4/", "/dns6/", "/dns/")) or (
            "/tcp/" not in address
        ):
            raise t.error("announce", "TCP multiaddrs such as /dns4/host/tcp/8000/wss", address)
    key_file = resolve_path(base, t.string("key_file", default="libp2p.key"))
    assert key_file is not None
    shards_value = t.raw("shards")
    if shards_value is None:
        shards = default_shards
    elif isinstance(shards_value, list) and all(
        isinstance(s, int) and not isinstance(s, bool) and 0 <= s <= 1023 for s in shards_value
    ):
        shards = tuple(sorted(set(shards_value)))
    else:
        raise t.error("shards", "a list of shard numbers 0..1023", shards_value)
    config = Libp2pConfig(
        listen=tuple(listen),
        announce=tuple(announce),
        key_file=key_file,
        cluster_id=t.integer("cluster_id", default=STATUS_CLUSTER_ID, low=0, high=0xFFFF),
        shards=shards,
        max_connections=t.integer("max_connections", default=200, low=1, high=100_000),
        max_connections_per_peer=t.integer("max_connections_per_peer", default=4, low=1, high=1000),
        max_connections_per_address=t.integer(
            "max_connections_per_address", default=32, low=1, high=100_000
        ),
        max_handshakes=t.integer("max_handshakes", default=128, low=1, high=100_000),
        max_handshakes_per_address=t.integer(
            "max_handshakes_per_address", default=16, low=1, high=100_000
        ),
        address_share=_share(t, "address_share", 0.5),
        max_buffered_bytes=t.integer(
            "max_buffered_bytes", default=4 * 1024 * 1024, low=256 * 1024, high=1024**3
        ),
        max_streams_per_connection=t.integer(
            "max_streams_per_connection", default=32, low=1, high=10_000
        ),
        max_request_bytes=t.integer("max_request_bytes", default=65536, low=1024, high=1024 * 1024),
        read_timeout=_duration(t, "read_timeout", 30.0),
        write_timeout=_duration(t, "write_timeout", 30.0),
        handshake_timeout=_duration(t, "handshake_timeout", 10.0),
        idle_timeout=_duration(t, "idle_timeout", 300.0),
        requests_per_second=_rate(t, "requests_per_second", 20.0),
        request_burst=t.integer("request_burst", default=40, low=1, high=1_000_000),
        address_requests_per_second=_rate(t, "address_requests_per_second", 100.0),
        workers=t.integer("workers", default=4, low=1, high=64),
        server=t.string("server", default="native"),
    )
    if config.server not in LIBP2P_SERVERS:
        raise t.error("server", " or ".join(map(repr, LIBP2P_SERVERS)), config.server)
    t.done()
    # no `shards`: the service adds the shards of the store's messages at start
    config = replace(config, shards_configured=shards_value is not None)
    return config if enabled else None


def _default_shards(
    communities: tuple[CommunityConfig, ...], relay: RelayConfig | None
) -> tuple[int, ...]:
    """The communities' shards and the shard of the relay's default topic (v1 topics of no
    community land there)."""
    shards = {community.shard for community in communities}
    default_topic = relay.default_pubsub_topic if relay else GLOBAL_PUBSUB_TOPIC
    tail = default_topic.rsplit("/", 1)[-1]
    if default_topic.startswith("/waku/2/rs/") and tail.isdigit():
        shards.add(int(tail))
    return tuple(sorted(shards))


def _parse_logging(top: ConfigTable) -> LoggingConfig:
    t = top.table("logging")
    level = t.string("level", default="info").lower()
    if level not in ("debug", "info", "warning", "error"):
        raise t.error("level", "debug, info, warning or error", level)
    fmt = t.string("format", default="json")
    if fmt not in ("json", "text"):
        raise t.error("format", "'json' or 'text'", fmt)
    t.done()
    return LoggingConfig(level, fmt)


def parse_config(
    data: Mapping[str, Any], *, base_dir: str | Path = ".", origin: str = "<config>"
) -> BridgeConfig:
    """Validate a parsed TOML document (paths relative to ``base_dir``)."""
    base = Path(base_dir)
    top = ConfigTable(dict(data), origin)
    server = _parse_server(top)
    store = _parse_store(top, base)
    v1 = _parse_v1(top, base)
    relay = _parse_relay(top, base)
    history = _parse_history(top, base)
    archive = _parse_archive(top, base)
    communities = parse_communities(top, base, origin)
    if communities and archive is None:
        raise ConfigError(f"{origin}: [[community]] tables need an [archive] table")
    admin = _parse_admin(top, base)
    logging_config = _parse_logging(top)
    logos_storage_url = parse_logos_storage(top, communities, origin)  # shared with the migration
    libp2p = _parse_libp2p(top, base, _default_shards(communities, relay))
    top.done()
    return BridgeConfig(
        server=server, store=store, v1=v1, relay=relay, history=history, archive=archive,
        communities=communities, admin=admin, logging=logging_config, origin=origin,
        base_dir=str(base), logos_storage_url=logos_storage_url, libp2p=libp2p,
    )  # fmt: skip


def load_config(path: str | Path) -> BridgeConfig:
    """Read and validate a TOML config file."""
    path = Path(path)
    return parse_config(read_toml(path), base_dir=path.resolve().parent, origin=str(path))


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
