"""The bridge's TOML configuration (``waku-legacy serve --config FILE``).

Each key is declared once (:func:`~waku_legacy.config.keys.key`: default, bounds, one-line
doc): where it is used when a library's dataclass takes it (``[server]``'s bounds on
:class:`~waku_legacy.bridge.http_guard.HttpLimits`, ``[v1]``'s mailserver settings on
:class:`~waku_legacy.mailserver_compat.server.core.MailServerConfig`, ``[libp2p]``'s limits
in :mod:`waku_legacy.p2p.limits`, the archive folders and layout both apps share on
:class:`~waku_legacy.archive.settings.ArchiveOutput`), which the tables below take with
:func:`~waku_legacy.config.keys.same_key`; else on the dataclass of its table below;
``deploy/bridge.example.toml`` and the key tables of docs/configuration.md are
generated from these declarations and :data:`LAYOUT` (``scripts/gen-config-docs.py``; a test
fails when they drift). The tables: ``[server]`` (the REST API), ``[store]``, ``[v1]``
and ``[v1.limits]`` (optional: Waku v1 clients), ``[libp2p]`` (optional: Waku v2 clients),
``[relay]`` and ``[[relay.protected_shard]]`` (optional: the nwaku node to publish through),
``[history]`` (optional), ``[archive]`` and ``[[community]]`` (the migration's format,
:mod:`waku_legacy.community_config`), ``[logos_storage]``, ``[viewer]``, ``[admin]``,
``[logging]``.

Durations are integers (seconds) or strings with a unit: ``"45s"``, ``"30m"``, ``"6h"``,
``"7d"``. Relative paths are relative to the config file. Unknown keys are errors naming the
key (a typo must not silently switch a feature off), reported before missing ones. Files the
config names are read as regular files of bounded size (:mod:`waku_legacy.files`: the config
itself up to 1 MiB, token and key files up to 4 KiB); a device, FIFO or directory there is a
ConfigError.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from waku_legacy.archive import defaults
from waku_legacy.archive.settings import ArchiveOutput
from waku_legacy.bridge.http_guard import HttpLimits
from waku_legacy.community_config import (
    CommunityConfig,
    LogosStorageConfig,
    parse_communities,
    parse_logos_storage,
)
from waku_legacy.config import read_toml, resolve_store_url
from waku_legacy.config.docs import ConfigLayout, TableLayout
from waku_legacy.config.keys import (
    DAY,
    KeyConflict,
    KeyReader,
    KeyRef,
    Kind,
    check_unknown,
    key,
    parse_duration,
    parse_listen,
    pubsub_topic,
    pubsub_topics,
    read_table,
    same_key,
)
from waku_legacy.errors import ConfigError, WakuLegacyError
from waku_legacy.files import MAX_KEY_FILE, read_small_text
from waku_legacy.identity.shards import GLOBAL_PUBSUB_TOPIC, STATUS_CLUSTER_ID
from waku_legacy.mailserver_compat.server.core import MailServerConfig
from waku_legacy.mailserver_compat.server.limits import V1Limits
from waku_legacy.p2p.limits import HostLimits, ListenerLimits

__all__ = [
    "LAYOUT",
    "TABLES",
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
    "ViewerConfig",
    "load_config",
    "parse_config",
    "parse_duration",
    "parse_listen",
]

DURATION = Kind.DURATION
DEFAULT_LIBP2P_LISTEN = ("/ip4/0.0.0.0/tcp/60000", "/ip4/0.0.0.0/tcp/8000/ws")

# -- what keys accept beyond their kind --------------------------------------------------------


def _http_url(value: str, ref: KeyRef) -> str:
    if not value.startswith(("http://", "https://")):
        raise ref.error("an http:// or https:// URL", value)
    return value.rstrip("/")


def _duration_within(low: float, high: float | None, why: str) -> Callable[[float, KeyRef], float]:
    """A duration key's bounds (each drives database traffic or a takeover's length), and why:
    ``serve --check`` refuses a value outside them with that reason."""
    from waku_legacy.config.keys import format_duration

    span = f"of at least {format_duration(low)}"
    if high is not None:
        span = f"from {format_duration(low)} to {format_duration(high)}"

    def parse(value: float, ref: KeyRef) -> float:
        if value < low or (high is not None and value > high):
            raise ref.error(f"a duration {span} ({why})", format_duration(value))
        return value

    return parse


def _http_urls(values: tuple[str, ...], ref: KeyRef) -> tuple[str, ...]:
    if not values:
        raise ConfigError(f"{ref.where}: key '{ref.name}' must list at least one REST URL")
    return tuple(_http_url(v, ref) for v in values)


def _store_url(value: str, ref: KeyRef) -> str:
    url = value.strip()
    if not url:
        raise ConfigError(f"{ref.where}: key 'url' must name a store")
    try:
        return resolve_store_url(ref.base, url)
    except ConfigError:
        raise ref.error("sqlite:///path, a file path or postgresql://…", url) from None


def _public_key(text: str, ref: KeyRef) -> bytes:
    from waku_legacy.mailserver_compat.rlpx.enode import Enode

    value = text.strip()
    if value.startswith("enode://"):
        try:
            return Enode.parse(value).public_key
        except WakuLegacyError as exc:
            raise ref.error(f"enode URLs or 128-hex public keys ({exc})", text) from None
    value = value[2:] if value[:2] in ("0x", "0X") else value
    try:
        raw = bytes.fromhex(value)
    except ValueError:
        raw = b""
    if len(raw) == 65 and raw[0] == 4:
        raw = raw[1:]
    if len(raw) != 64:
        raise ref.error("enode URLs or 128-hex public keys", text)
    return raw


def _public_keys(values: tuple[str, ...], ref: KeyRef) -> tuple[bytes, ...]:
    return tuple(_public_key(v, ref) for v in values)


def _shard_public_key(text: str, ref: KeyRef) -> bytes:
    from waku_legacy.crypto.secp256k1 import uncompressed_public_key

    try:
        hex_text = text[2:] if text[:2] in ("0x", "0X") else text
        return uncompressed_public_key(bytes.fromhex(hex_text))
    except (ValueError, WakuLegacyError):
        raise ref.error(
            "a secp256k1 public key in hex (65 bytes 04…, or 33 compressed)", text
        ) from None


def _multiaddrs(prefixes: tuple[str, ...], expected: str) -> Any:
    def check(values: tuple[str, ...], ref: KeyRef) -> tuple[str, ...]:
        for address in values:
            if not address.startswith(prefixes) or "/tcp/" not in address:
                raise ref.error(expected, address)
        return values

    return check


def _listen_multiaddrs(values: tuple[str, ...], ref: KeyRef) -> tuple[str, ...]:
    check = _multiaddrs(("/ip4/", "/ip6/"), "TCP multiaddrs such as /ip4/0.0.0.0/tcp/60000[/ws]")
    return check(values, ref) or DEFAULT_LIBP2P_LISTEN  # [] as absent


def _shards(values: tuple[int, ...], ref: KeyRef) -> tuple[int, ...]:
    return tuple(sorted(set(values)))


def _lower(value: str, ref: KeyRef) -> str:
    return value.lower()


def _cores() -> int:
    return os.cpu_count() or 1


# -- the tables --------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ServerConfig:
    """REST: nwaku-compatible store API, ops, status page, admin"""

    listen: str = key(
        "127.0.0.1:8645",
        kind=Kind.LISTEN,
        example="0.0.0.0:8645",
        doc="the REST API's address (port 0: any free port)",
    )
    reader_threads: int = key(
        2, min=0, max=64, example=2, doc="store query threads per process (0: on the event loop)"
    )
    shutdown_timeout: float = key(
        30.0, kind=DURATION, example="30s", doc="grace for in-flight requests and writes on stop"
    )
    # the REST API's bounds, declared where they are used (bridge.http_guard)
    max_connections: int = same_key(HttpLimits, "max_connections")
    max_connections_per_address: int = same_key(HttpLimits, "max_connections_per_address")
    header_timeout: float = same_key(HttpLimits, "header_timeout")
    idle_timeout: float = same_key(HttpLimits, "idle_timeout")
    body_timeout: float = same_key(HttpLimits, "body_timeout")
    requests_per_second: float = same_key(HttpLimits, "requests_per_second")
    request_burst: int = same_key(HttpLimits, "request_burst")
    status_page: bool = key(
        True,
        example=True,
        doc="GET / (HTML) and /debug/v1/status (JSON): the service's state, "
        "nothing secret, no token; false: both 404",
    )
    workers: int = key(
        factory=_cores,
        min=1,
        max=256,
        shown="the number of cores",
        hint=4,
        doc="processes serving the REST API (and the libp2p store) on one "
        "socket; 1: one process (bridge.workers)",
    )

    @property
    def host(self) -> str:
        return parse_listen(self.listen, "[server]", "listen")[0]

    @property
    def port(self) -> int:
        return parse_listen(self.listen, "[server]", "listen")[1]


@dataclass(frozen=True, slots=True)
class StoreConfig:
    """the v2 store the migration wrote (nwaku's schema)"""

    url: str = key(
        parse=_store_url,
        example="sqlite:////var/lib/waku-legacy/store.sqlite3?mmap_size=1073741824",
        doc="sqlite:///path (or a file path; ?mmap_size=1073741824: ~2x faster "
        "reads) or postgresql://user@host/db",
    )
    leader_interval: float = key(
        15.0,
        kind=DURATION,
        parse=_duration_within(
            1.0,
            300.0,
            "the holder checks its lock 4 times an interval and each follower tries it "
            "once; a takeover after a crash takes up to 2 intervals, a hung holder's "
            "session lives 3",
        ),
        doc="PostgreSQL: bridges sharing the store all serve it; the "
        "advisory lock's holder archives, seeds, publishes and pulls "
        "history; the lock is retried and checked this often "
        "(bridge.leader)",
    )
    create: bool = key(
        False, doc="create a missing SQLite store (else refused: a wrong path would serve nothing)"
    )


@dataclass(frozen=True, slots=True)
class V1Config:
    """Waku v1 clients: RLPx listener + mailserver (optional)"""

    listen: str = key(
        "0.0.0.0:30303", kind=Kind.LISTEN, example="0.0.0.0:30303", doc="the RLPx listener"
    )
    node_key_file: str = key(
        "nodekey",
        kind=Kind.PATH,
        example="/var/lib/waku-legacy/nodekey",
        doc="created on first start; keep it (it is the enode)",
    )
    min_pow: float = same_key(MailServerConfig, "min_pow")
    rate_limit: float = same_key(MailServerConfig, "rate_limit")
    trusted_peers: tuple[bytes, ...] = key(
        (),
        kind=Kind.STRINGS,
        parse=_public_keys,
        example=[],
        doc="enode URLs or 128-hex public keys: no rate limit; their 0x7f accepted",
    )
    live_window: float = key(
        300.0, kind=DURATION, example="5m", doc="v2 messages younger than this are offered live"
    )
    # the mailserver's and the live bridge's (bridge.live)
    seen_capacity: int = same_key(MailServerConfig, "seen_capacity")
    limits: V1Limits = field(default_factory=V1Limits)  # [v1.limits]

    @property
    def host(self) -> str:
        return parse_listen(self.listen, "[v1]", "listen")[0]

    @property
    def port(self) -> int:
        return parse_listen(self.listen, "[v1]", "listen")[1]


@dataclass(frozen=True, slots=True)
class ProtectedShard:
    """A DoS-protected pubsub topic (57/STATUS-Simple-Scaling): messages published on it carry
    the shard key's signature in meta; with only public_key the topic is marked protected and
    the bridge refuses to publish there (repeat the table per topic)"""

    pubsub_topic: str = key(
        parse=pubsub_topic, example="/waku/2/rs/16/128", doc="the protected topic"
    )
    key_file: str | None = key(
        kind=Kind.PATH,
        required=False,
        example="shard-128.key",
        doc="the shard's private key (64 hex digits): signs meta; without it: not published on",
    )
    # the 65-byte uncompressed key messages verify against
    public_key: bytes = key(
        kind=Kind.STRING,
        parse=_shard_public_key,
        required=False,
        hint="0x04…",
        doc="the shard key's public key (optional with key_file: must be its key)",
    )


@dataclass(frozen=True, slots=True)
class RelayConfig:
    """the nwaku node that publishes for us (optional)"""

    url: str = key(
        parse=_http_url,
        example="http://127.0.0.1:8646",
        doc="its REST API (--rest=true; POST /relay/v1/messages/{topic})",
    )
    timeout: float = key(10.0, kind=DURATION, example="10s", doc="one publish request")
    retries: int = key(3, min=0, max=100, example=3, doc="a failed publish is retried")
    queue: int = key(
        10_000,
        min=1,
        max=10_000_000,
        example=10000,
        doc="bounded forward queue (oldest dropped, counted)",
    )
    default_pubsub_topic: str = key(
        GLOBAL_PUBSUB_TOPIC,
        parse=pubsub_topic,
        example=GLOBAL_PUBSUB_TOPIC,
        doc="v1 topics of no configured community",
    )
    protected_shards: tuple[ProtectedShard, ...] = ()  # [[relay.protected_shard]]


@dataclass(frozen=True, slots=True)
class HistoryConfig:
    """keep the last 30 days complete (optional)"""

    nodes: tuple[str, ...] = key(
        parse=_http_urls,
        example=["http://127.0.0.1:8646"],
        doc="nwaku REST store endpoints to pull from (one or more)",
    )
    window: float = key(
        30 * DAY, kind=DURATION, example="30d", doc="how far back the store is kept complete"
    )
    interval: float = key(
        3600.0, kind=DURATION, example="1h", doc="a pull this often",
        parse=_duration_within(60.0, None, "each pull queries the store and every node"),
    )  # fmt: skip
    page_size: int = key(100, min=1, max=100, example=100, doc="messages per store page")
    pubsub_topics: tuple[str, ...] = key(
        (),
        parse=pubsub_topics,
        hint=["/waku/2/rs/16/32"],
        shown="the communities' shards + default topic",
        doc="the topics pulled",
    )
    state_dir: str | None = key(
        None,
        kind=Kind.PATH,
        shown="beside the store",
        example="/var/lib/waku-legacy/history-state",
        doc="resumable positions",
    )
    timeout: float = key(30.0, kind=DURATION, doc="one request to a store node")
    retries: int = key(5, min=0, max=100, doc="a failed page request is retried")


@dataclass(frozen=True, slots=True)
class ArchiveConfig:
    """community history archives (needed by [[community]])"""

    archive_dir: str = same_key(
        ArchiveOutput, "archive_dir", example="/var/lib/waku-legacy/archives"
    )
    torrent_dir: str = same_key(
        ArchiveOutput, "torrent_dir", example="/var/lib/waku-legacy/torrents"
    )
    seed_listen: str = key(
        "0.0.0.0:6881",
        kind=Kind.LISTEN,
        example="0.0.0.0:6881",
        doc="BitTorrent seeding address (open TCP+UDP for members)",
    )
    trackers: bool = key(True, example=True, doc="announce to status-go's trackers")
    dht: bool = key(False, example=False, doc="announce on the BitTorrent DHT")
    utp: bool = key(True, example=True, doc="uTP as well as TCP (status-go's client speaks it)")
    interval: float = key(
        7 * DAY, kind=DURATION, example="7d", doc="a new archive run per community",
        parse=_duration_within(3600.0, None, "each run reads the community's new messages"),
    )  # fmt: skip
    republish_interval: float = key(
        6 * 3600.0, kind=DURATION, example="6h", doc="re-send the current archive link",
        parse=_duration_within(60.0, None, "each one reads the clocks used from the store"),
    )  # fmt: skip
    flavour: str = same_key(ArchiveOutput, "flavour", example=defaults.FLAVOUR)
    # archive_link_chats = "both": the <id>-magnetlinks copy goes out this long after the
    # <id>-memberUpdate one (longer than a fetch: a 2024 client that hears both restarts a
    # download the second copy interrupts); docs/compat/archive-link.md
    second_link_delay: float = key(
        3600.0,
        kind=DURATION,
        doc='archive_link_chats = "both": the -magnetlinks copy goes '
        "this long after the -memberUpdate one (below "
        "republish_interval)",
    )

    def __post_init__(self) -> None:
        if self.second_link_delay >= self.republish_interval:
            raise KeyConflict(
                "second_link_delay",
                "a duration shorter than republish_interval (the second chat's copy of a link "
                "goes out that long after the first, before the next republish)",
            )


LIBP2P_SERVERS = ("native",)


def _libp2p_server(value: Any, ref: KeyRef) -> Any:
    if value == "py-libp2p":
        raise ConfigError(
            f"{ref.where}: key '{ref.name}' = 'py-libp2p' was removed on 2026-11-29: the bridge "
            "serves libp2p with its own stack (py-libp2p is only a test peer now); remove the key"
        )
    return value


@dataclass(frozen=True, slots=True)
class Libp2pConfig:
    """Waku v2 clients (go-waku, js-waku, status-go) query the store over libp2p (optional;
    waku_legacy.bridge.p2p)"""

    listen: tuple[str, ...] = key(
        DEFAULT_LIBP2P_LISTEN,
        parse=_listen_multiaddrs,
        example=list(DEFAULT_LIBP2P_LISTEN),
        doc="TCP (go-waku) and /ws (js-waku) multiaddrs; one port for both shares a socket",
    )
    key_file: str = key(
        "libp2p.key",
        kind=Kind.PATH,
        example="/var/lib/waku-legacy/libp2p.key",
        doc="secp256k1 (nwaku --nodekey format), created (0600) when missing; "
        "keep it: it is the peer id",
    )
    cluster_id: int = key(
        STATUS_CLUSTER_ID,
        min=0,
        max=0xFFFF,
        example=STATUS_CLUSTER_ID,
        doc="answered on /vac/waku/metadata/1.0.0 (16: Status)",
    )
    # announced in metadata and the ENR (js-waku picks peers by them)
    shards: tuple[int, ...] = key(
        (),
        min=0,
        max=1023,
        parse=_shards,
        hint=[32, 128],
        shown="the communities' shards, the relay default's and the store's",
        doc="shards announced (js-waku asks a store peer only for those listed)",
    )
    announce: tuple[str, ...] = key(
        (),
        parse=_multiaddrs(
            ("/ip4/", "/ip6/", "/dns4/", "/dns6/", "/dns/"),
            "TCP multiaddrs such as /dns4/host/tcp/8000/wss",
        ),
        hint=["/dns4/bridge.example.org/tcp/443/wss"],
        doc="what peers are told instead of the listen addresses (nwaku --ext-multiaddr)",
    )
    # the listener's bounds, declared where they are used (waku_legacy.p2p.limits)
    max_connections: int = same_key(HostLimits, "max_connections")
    max_connections_per_peer: int = same_key(HostLimits, "max_connections_per_peer")
    max_connections_per_address: int = same_key(ListenerLimits, "max_connections_per_address")
    max_handshakes: int = same_key(ListenerLimits, "max_handshakes")
    max_handshakes_per_address: int = same_key(ListenerLimits, "max_handshakes_per_address")
    address_share: float = same_key(ListenerLimits, "address_share")
    reserved_share: float = same_key(ListenerLimits, "reserved_share")
    address_handshakes_per_second: float = same_key(ListenerLimits, "address_handshakes_per_second")
    max_buffered_bytes: int = same_key(HostLimits, "max_buffered_bytes")
    max_streams_per_connection: int = same_key(ListenerLimits, "max_streams_per_connection")
    max_request_bytes: int = same_key(ListenerLimits, "max_request_bytes")
    read_timeout: float = same_key(ListenerLimits, "read_timeout")
    write_timeout: float = same_key(ListenerLimits, "write_timeout")
    handshake_timeout: float = same_key(HostLimits, "handshake_timeout")
    idle_timeout: float = same_key(ListenerLimits, "idle_timeout")
    requests_per_second: float = same_key(ListenerLimits, "requests_per_second")
    request_burst: int = same_key(ListenerLimits, "request_burst")
    address_requests_per_second: float = same_key(ListenerLimits, "address_requests_per_second")
    workers: int = same_key(ListenerLimits, "workers")
    server: str = key(
        "native",
        choices=LIBP2P_SERVERS,
        parse=_libp2p_server,
        doc="native, the project's own libp2p stack on the bridge's loop (the only one: "
        "py-libp2p was removed on 2026-11-29)",
    )
    # `shards` given: announced as given; else the communities' shards (and the relay's
    # default), plus at start the shards of the store's messages (issue 24)
    shards_configured: bool = False
    enabled: bool = key(True, doc="false: no libp2p listener (as without the table)")


def _path_prefix(value: str, ref: KeyRef) -> str:
    prefix = value.rstrip("/")
    if not re.fullmatch(r"(/[A-Za-z0-9._~-]+)+", prefix):
        raise ref.error("a URL path such as /history (letters, digits, . _ ~ -)", value)
    if prefix.split("/")[1] in ("store", "admin", "debug", "health", "metrics"):
        raise ref.error("a path the REST API does not already answer", value)
    return prefix


def _community_ids(values: tuple[str, ...], ref: KeyRef) -> tuple[str, ...]:
    for value in values:
        if not re.fullmatch(r"0x0[23][0-9a-fA-F]{64}", value):
            raise ref.error("community ids (0x02/0x03 + 64 hex digits)", value)
    return tuple(v.lower() for v in values)


@dataclass(frozen=True, slots=True)
class ViewerConfig:
    """the communities' history as web pages on the REST API (bridge.viewer; off by default)"""

    enabled: bool = key(False, doc="serve the history pages")
    path_prefix: str = key(
        "/history", parse=_path_prefix, example="/history", doc="where the pages are served"
    )
    communities: tuple[str, ...] = key(
        (),
        parse=_community_ids,
        hint=["0x02…"],
        shown="every configured community",
        doc="the communities whose history is shown",
    )
    hide_banned: bool = key(
        True, doc="hide the messages of authors banned in the newest community description"
    )
    takedown_file: str | None = key(
        None,
        kind=Kind.PATH,
        hint="/etc/waku-legacy/takedown.txt",
        doc="message ids and author keys not shown (one a line, or TOML/JSON lists "
        "'messages'/'authors'); re-read when it changes, no restart",
    )
    allow_search_engines: bool = key(
        False, doc="false: noindex (robots meta and X-Robots-Tag) on every page"
    )


#: the admin bearer token's least length
ADMIN_TOKEN_MIN = 16


@dataclass(frozen=True, slots=True)
class AdminConfig:
    """bearer token for /admin/v1/* (without one, admin endpoints answer 403 to everyone)"""

    token: str | None = key(None, hint="…", doc="the token (>= 16 characters); or token_file")
    token_file: str | None = key(
        None,
        kind=Kind.PATH,
        example="/etc/waku-legacy/admin.token",
        doc="a file holding the token (not both)",
    )

    def __post_init__(self) -> None:
        # token_file's text is the token once read: the rule holds whichever key gave it
        if self.token is not None and len(self.token) < ADMIN_TOKEN_MIN:
            raise KeyConflict(
                "token_file" if self.token_file is not None else "token",
                f"a token of at least {ADMIN_TOKEN_MIN} characters",
            )


@dataclass(frozen=True, slots=True)
class LoggingConfig:
    """logs on stderr"""

    level: str = key(
        "info",
        parse=_lower,
        choices=("debug", "info", "warning", "error"),
        example="info",
        doc="the least severe record logged",
    )
    format: str = key(
        "json",
        choices=("json", "text"),
        example="json",
        doc="JSON lines (journald, docker logs) or text",
    )


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
    viewer: ViewerConfig = field(default_factory=ViewerConfig)  # [viewer] (issue 35)


#: deploy/bridge.example.toml and docs/configuration.md's key tables (scripts/gen-config-docs.py).
LAYOUT = ConfigLayout(
    header="""
waku-legacy bridge: example configuration (waku-legacy serve --config /etc/waku-legacy/bridge.toml)
Relative paths are relative to this file. Durations: seconds, or "45s", "30m", "6h", "7d".
Unknown keys are errors: a typo must not silently switch a feature off.
Generated from the key declarations (bridge/config.py) by scripts/gen-config-docs.py.
""",
    tables=(
        TableLayout("server", ServerConfig),
        TableLayout("store", StoreConfig),
        TableLayout("v1", V1Config),
        TableLayout("v1.limits", V1Limits, active=False,
                    note="per peer and per source address (IPv6: /64); 0 turns a rate off"),
        TableLayout("libp2p", Libp2pConfig),
        TableLayout("relay", RelayConfig),
        TableLayout("relay.protected_shard", ProtectedShard, array=True, active=False),
        TableLayout("history", HistoryConfig),
        TableLayout("archive", ArchiveConfig),
        TableLayout("community", CommunityConfig, array=True, active=False),
        TableLayout("logos_storage", LogosStorageConfig, active=False),
        TableLayout("viewer", ViewerConfig),
        TableLayout("admin", AdminConfig),
        TableLayout("logging", LoggingConfig),
    ),
)  # fmt: skip

#: The bridge's top-level tables.
TABLES = ("server", "store", "v1", "libp2p", "relay", "history", "archive", "community",
          "logos_storage", "viewer", "admin", "logging")  # fmt: skip


# -- table readers -----------------------------------------------------------------------------


def _parse_store(data: Mapping[str, Any], origin: str, base: Path) -> StoreConfig:
    if data.get("store") is None:
        raise ConfigError(f"{origin}: a [store] table with 'url' is required")
    config: StoreConfig = read_table(StoreConfig, data["store"], f"{origin}.store", base=base)
    return config


def _parse_v1(raw: Any, where: str, base: Path) -> V1Config:
    reader = KeyReader(V1Config, raw, where, base=base, tables=("limits",))
    limits = V1Limits.from_mapping(raw.get("limits"), f"{where}.limits")
    return V1Config(**reader.values(), limits=limits)


def _parse_protected_shard(raw: Any, number: int, base: Path) -> ProtectedShard:
    from waku_legacy.crypto.key_file import load_node_key

    reader = KeyReader(ProtectedShard, raw, f"[[relay.protected_shard]] #{number}", base=base)
    topic = reader.value("pubsub_topic")
    reader.where = f"[[relay.protected_shard]] {topic}"
    key_file = reader.value("key_file")
    public_key = reader.value("public_key")
    if key_file is not None:
        try:
            own = load_node_key(key_file).public_key.format(compressed=False)
        except WakuLegacyError as exc:
            raise ConfigError(f"{reader.where}: key_file: {exc}") from None
        if public_key is not None and own != public_key:
            raise ConfigError(
                f"{reader.where}: key_file {key_file} holds the key of 0x{own.hex()}, not of the "
                f"configured public_key; its signatures would not verify on this shard"
            )
        public_key = own
    if public_key is None:
        raise ConfigError(
            f"{reader.where}: give key_file (the shard key that signs messages on it) or, to "
            "only mark the topic protected (publishing there refused), its public_key"
        )
    return ProtectedShard(topic, key_file, public_key)


def _parse_relay(raw: Any, where: str, base: Path) -> RelayConfig:
    reader = KeyReader(RelayConfig, raw, where, base=base, tables=("protected_shard",))
    raw_shards = raw.get("protected_shard")
    if raw_shards is None:
        raw_shards = []
    if not isinstance(raw_shards, list):
        raise reader.ref("protected_shard").error(
            "an array of tables ([[relay.protected_shard]])", raw_shards
        )
    values = reader.values()
    shards = tuple(_parse_protected_shard(raw, n + 1, base) for n, raw in enumerate(raw_shards))
    topics = [s.pubsub_topic for s in shards]
    repeated = sorted({x for x in topics if topics.count(x) > 1})
    if repeated:
        raise ConfigError(
            f"{where}: [[relay.protected_shard]] lists {', '.join(repeated)} more than once"
        )
    return RelayConfig(**values, protected_shards=shards)


def _parse_admin(raw: Any, where: str, base: Path) -> AdminConfig:
    reader = KeyReader(AdminConfig, raw, where, base=base)
    token, token_file = reader.value("token"), reader.value("token_file")
    if token is not None and token_file is not None:
        raise ConfigError(f"{where}: give 'token' or 'token_file', not both")
    if token_file is not None:
        # A regular file of at most MAX_KEY_FILE bytes (/dev/zero or a huge file is refused).
        token = read_small_text(
            token_file, what=f"{where}: key 'token_file'", max_size=MAX_KEY_FILE
        ).strip()
    try:
        return AdminConfig(token, token_file)
    except KeyConflict as conflict:  # the token itself is a secret: never in the message
        raise ConfigError(
            f"{where}: the admin token (key '{conflict.name}') must be at least "
            f"{ADMIN_TOKEN_MIN} characters"
        ) from None


def _parse_libp2p(
    raw: Any, where: str, base: Path, default_shards: tuple[int, ...]
) -> Libp2pConfig | None:
    reader = KeyReader(Libp2pConfig, raw, where, base=base)
    config = Libp2pConfig(**reader.values(), shards_configured=reader.given("shards"))
    if not config.enabled:
        return None
    if not config.shards_configured:
        # no `shards`: the service adds the shards of the store's messages at start
        config = replace(config, shards=default_shards)
    return config


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


def parse_config(
    data: Mapping[str, Any], *, base_dir: str | Path = ".", origin: str = "<config>"
) -> BridgeConfig:
    """Validate a parsed TOML document (paths relative to ``base_dir``)."""
    base = Path(base_dir)
    check_unknown(data, TABLES, origin)

    def optional(name: str) -> Any:
        return data.get(name)

    def table(name: str) -> Any:  # a table that may be left out: its defaults
        return {} if data.get(name) is None else data[name]

    def where(name: str) -> str:
        return f"{origin}.{name}"

    server = read_table(ServerConfig, table("server"), where("server"), base=base)
    store = _parse_store(data, origin, base)
    v1 = _parse_v1(raw, where("v1"), base) if (raw := optional("v1")) is not None else None
    relay = (_parse_relay(raw, where("relay"), base)
             if (raw := optional("relay")) is not None else None)  # fmt: skip
    history = (read_table(HistoryConfig, raw, where("history"), base=base)
               if (raw := optional("history")) is not None else None)  # fmt: skip
    archive = (read_table(ArchiveConfig, raw, where("archive"), base=base)
               if (raw := optional("archive")) is not None else None)  # fmt: skip
    communities = parse_communities(data, base, origin)
    if communities and archive is None:
        raise ConfigError(f"{origin}: [[community]] tables need an [archive] table")
    admin = _parse_admin(table("admin"), where("admin"), base)
    viewer = read_table(ViewerConfig, table("viewer"), where("viewer"), base=base)
    logging_config = read_table(LoggingConfig, table("logging"), where("logging"))
    logos_storage_url = parse_logos_storage(data, communities, origin)  # shared with the migration
    libp2p = (_parse_libp2p(raw, where("libp2p"), base, _default_shards(communities, relay))
              if (raw := optional("libp2p")) is not None else None)  # fmt: skip
    return BridgeConfig(
        server=server, store=store, v1=v1, relay=relay, history=history, archive=archive,
        communities=communities, admin=admin, logging=logging_config, origin=origin,
        base_dir=str(base), logos_storage_url=logos_storage_url, libp2p=libp2p, viewer=viewer,
    )  # fmt: skip


def load_config(path: str | Path) -> BridgeConfig:
    """Read and validate a TOML config file."""
    path = Path(path)
    return parse_config(read_toml(path), base_dir=path.resolve().parent, origin=str(path))
