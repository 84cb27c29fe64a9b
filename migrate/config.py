"""The migration's TOML configuration: what to read, how to map it, where to write.

    [spark]
    master = "local[*]"                 # or "spark://host:7077"
    shuffle_partitions = 8              # optional
    conf = { "spark.driver.memory" = "2g" }   # optional, any Spark settings

    [[source]]                          # repeat; read in parallel partitions
    kind = "mailserver-postgres"        # or mailserver-leveldb, envelope-dump, store-rest,
                                        # store-sqlite
    name = "ms-eu"                      # optional (default: "<kind>-<n>"); shown in the report
                                        # and a directory name: letters, digits, . _ -
    dsn = "postgresql://user@host/db"   # mailserver-postgres
    path = "…"                          # mailserver-leveldb dir, envelope-dump file(s) (globs ok),
                                        # store-sqlite file, store-rest saved pages (dir or glob)
    url = "http://node:8645"            # store-rest (live nwaku REST)
    partitions = 8                      # optional: parallel reads of this source
    # store-rest only (all optional): pubsub_topic, content_topics = [...], start_time,
    # end_time (ns), page_size (<= 100), retries, timeout, and state_file: the directory
    # keeping every fetched page (the resumable position; default
    # <work_dir>/rest-pages/<name>). A rerun replays the saved pages and fetches only what
    # follows the last saved cursor; delete the directory to fetch everything again.

    [[community]]                       # repeat
    id = "0x02…"                        # compressed public key, 0x + 66 hex
    channels = ["<uuid>", …]
    shard = 128                         # its relay shard: /waku/2/rs/16/<shard>
    key_file = "community.key"          # optional: hex private key, signs the magnet-link message
    archive_link_chats = "both"         # where the archive link is sent: "universal"
                                        #   (<id>-memberUpdate, current clients), "magnetlinks"
                                        #   (<id>-magnetlinks, 2024 clients) or "both"
    operator_key_file = "operator.key"  # optional: signs the 26/WAKU-PAYLOAD of that message
                                        #   (status-go: the sending node's key); default key_file
    backend = "torrent"                 # or "logos-storage": archives uploaded to the node of
                                        #   [logos_storage], the link is the index CID (one
                                        #   kind of link per community; both is refused)
    archive_topics = "both"             # 4-byte topic of archived channel messages: "channel"
                                        #   (their own: clients before status-go PR #5993),
                                        #   "universal" (<id>-memberUpdate: current clients)
                                        #   or "both" (each message twice)
    name = "…"                          # optional label

    [logos_storage]                     # required when a community has that back end
    url = "http://127.0.0.1:8080"       # the node's REST root (API under /api/storage/v1)

    [pipeline]                          # optional
    default_pubsub_topic = "/waku/2/rs/16/32"   # topics of no configured community
    now = 1700000000                    # optional archive clock (seconds); default: wall clock
    flavour = "status-go"               # or "seed-spec"

    [output]
    store = "sqlite:///…"               # or "postgresql://…"; "" = no store
    archive_dir = "…"
    torrent_dir = "…"
    quarantine_dir = "…"                # optional (default: <work_dir>/quarantine)
    work_dir = "…"                      # optional (default: <archive_dir>/../.migrate-work)
    report = "report.json"              # optional: also write the JSON report here

Relative paths are relative to the directory of the config file. Unknown keys are errors
(a typo must not silently drop a source). The config file (up to 1 MiB) and key files (up to
4 KiB) are read as bounded regular files (:mod:`waku_legacy.files`); strings may not hold
NUL characters; TOML nested more than 64 levels deep is refused.
"""

from __future__ import annotations

import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any

from waku_legacy.errors import ConfigError, WakuLegacyError
from waku_legacy.files import (
    MAX_CONFIG_FILE,
    check_nesting,
    check_path_component,
    nesting_error,
    read_small_text,
)
from waku_legacy.identity.shards import GLOBAL_PUBSUB_TOPIC, community_pubsub_topic
from waku_legacy.identity.topics import CommunityId, chat_topic

__all__ = [
    "CommunityConfig",
    "MigrateConfig",
    "OutputConfig",
    "PipelineConfig",
    "SourceConfig",
    "SourceKind",
    "SparkConfig",
    "load_config",
    "load_operator_key",
    "parse_config",
]

DEFAULT_PUBSUB_TOPIC = GLOBAL_PUBSUB_TOPIC


class SourceKind(StrEnum):
    MAILSERVER_POSTGRES = "mailserver-postgres"
    MAILSERVER_LEVELDB = "mailserver-leveldb"
    ENVELOPE_DUMP = "envelope-dump"
    STORE_REST = "store-rest"
    STORE_SQLITE = "store-sqlite"


@dataclass(frozen=True, slots=True)
class SparkConfig:
    master: str = "local[*]"
    shuffle_partitions: int | None = None
    conf: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class SourceConfig:
    kind: SourceKind
    name: str
    rank: int  # position in the file: earlier sources win ties when deduplicating
    dsn: str | None = None
    path: str | None = None
    url: str | None = None
    partitions: int | None = None
    pubsub_topic: str | None = None
    content_topics: tuple[str, ...] = ()
    start_time: int | None = None
    end_time: int | None = None
    page_size: int = 100
    state_file: str | None = None
    retries: int = 5
    timeout: float = 30.0

    @property
    def location(self) -> str:
        """Where the source is, for provenance (never a password)."""
        if self.dsn:
            from waku_legacy.mailserver_compat.storage.postgres import _redact

            return _redact(self.dsn)
        return self.url or self.path or ""


@dataclass(frozen=True, slots=True)
class CommunityConfig:
    id: CommunityId
    channels: tuple[str, ...]
    shard: int
    key_file: str | None = None
    name: str | None = None
    archive_link_chats: str = "both"  # "both" | "universal" | "magnetlinks"
    operator_key_file: str | None = None  # signs the archive-link message's 26/WAKU-PAYLOAD
    backend: str = "torrent"  # "torrent" | "logos-storage" (issue 12)
    archive_topics: str = "both"  # "channel" | "universal" | "both" (waku_legacy.archive.topics)

    @property
    def pubsub_topic(self) -> str:
        return community_pubsub_topic(self.shard)

    def channel_chat_ids(self) -> dict[str, str]:
        """channel uuid -> chat id."""
        return {c: self.id.channel_chat_id(c) for c in self.channels}

    def channel_topics(self) -> dict[bytes, str]:
        """4-byte v1 topic -> channel uuid, for every channel."""
        return {chat_topic(chat): uuid for uuid, chat in self.channel_chat_ids().items()}


@dataclass(frozen=True, slots=True)
class PipelineConfig:
    default_pubsub_topic: str = DEFAULT_PUBSUB_TOPIC
    now: int | None = None
    flavour: str = "status-go"


@dataclass(frozen=True, slots=True)
class OutputConfig:
    store: str
    archive_dir: str
    torrent_dir: str
    quarantine_dir: str
    work_dir: str
    report: str | None = None


@dataclass(frozen=True, slots=True)
class MigrateConfig:
    spark: SparkConfig
    sources: tuple[SourceConfig, ...]
    communities: tuple[CommunityConfig, ...]
    pipeline: PipelineConfig
    output: OutputConfig
    origin: str = "<config>"
    logos_storage_url: str | None = None  # [logos_storage] url


# -- parsing helpers ------------------------------------------------------------------------


class ConfigTable:
    """A TOML table being read: typed getters that name the key in their errors, and a
    final check that no unknown key is left."""

    def __init__(self, data: Any, where: str) -> None:
        if not isinstance(data, dict):
            raise ConfigError(f"{where} must be a table, got {_kind(data)}")
        self.data = data
        self.where = where
        self.used: set[str] = set()

    def _get(self, key: str) -> Any:
        self.used.add(key)
        return self.data.get(key)

    def error(self, key: str, expected: str, value: Any) -> ConfigError:
        return ConfigError(f"{self.where}: key '{key}' must be {expected}, got {_show(value)}")

    def string(self, key: str, *, required: bool = False, default: str | None = None) -> Any:
        value = self._get(key)
        if value is None:
            if required:
                raise ConfigError(f"{self.where}: key '{key}' is required")
            return default
        if not isinstance(value, str):
            raise self.error(key, "a string", value)
        if "\x00" in value:  # never meant; and a path or URL with one fails deep inside the OS
            raise self.error(key, "a string without NUL characters", value)
        return value

    def integer(
        self, key: str, *, default: int | None = None, low: int | None = None,
        high: int | None = None, required: bool = False,
    ) -> Any:  # fmt: skip
        value = self._get(key)
        if value is None:
            if required:
                raise ConfigError(f"{self.where}: key '{key}' is required")
            return default
        if not isinstance(value, int) or isinstance(value, bool):
            raise self.error(key, "an integer", value)
        if (low is not None and value < low) or (high is not None and value > high):
            bounds = f"{'' if low is None else low}..{'' if high is None else high}"
            raise self.error(key, f"an integer in {bounds}", value)
        return value

    def number(self, key: str, *, default: float) -> float:
        value = self._get(key)
        if value is None:
            return default
        if not isinstance(value, int | float) or isinstance(value, bool) or value <= 0:
            raise self.error(key, "a positive number", value)
        return float(value)

    def strings(self, key: str, *, required: bool = False) -> tuple[str, ...]:
        value = self._get(key)
        if value is None:
            if required:
                raise ConfigError(f"{self.where}: key '{key}' is required")
            return ()
        if isinstance(value, str):
            value = [v.strip() for v in value.split(",") if v.strip()]
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise self.error(key, "a list of strings", value)
        if any("\x00" in v for v in value):
            raise self.error(key, "a list of strings without NUL characters", value)
        return tuple(value)

    def table(self, key: str) -> ConfigTable:
        value = self._get(key)
        return ConfigTable({} if value is None else value, f"{self.where}.{key}")

    def done(self) -> None:
        unknown = sorted(set(self.data) - self.used)
        if unknown:
            raise ConfigError(
                f"{self.where}: unknown key(s) {', '.join(map(repr, unknown))}; "
                f"expected some of {', '.join(sorted(self.used))}"
            )


def _kind(value: Any) -> str:
    return {
        bool: "a boolean", int: "an integer", float: "a number", str: "a string",
        list: "a list", dict: "a table",
    }.get(type(value), type(value).__name__)  # fmt: skip


def _show(value: Any) -> str:
    text = repr(value)
    return f"{_kind(value)} {text[:60]}{'…' if len(text) > 60 else ''}"


def resolve_path(base: Path, value: str | None) -> str | None:
    if value is None or value == "":
        return value
    try:
        path = Path(value).expanduser()
    except RuntimeError:  # "~name/…" of a user that does not exist
        raise ConfigError(f"path {value[:200]!r}: cannot expand '~' (no such user)") from None
    return str(path if path.is_absolute() else (base / path))


def resolve_store_url(base: Path, url: str) -> str:
    if url == "" or url.startswith(("postgresql://", "postgres://")):
        return url
    if url.startswith("sqlite:///"):
        return url
    if url.startswith("sqlite:"):
        return "sqlite:///" + str((base / url[len("sqlite:") :]).resolve()).lstrip("/")
    if "://" in url:
        raise ConfigError(
            f"[output]: key 'store' must be sqlite:///path or postgresql://…, got {url!r}"
        )
    return "sqlite:///" + str((base / url).resolve()).lstrip("/")


# -- the parser -------------------------------------------------------------------------------


def _parse_source(raw: Any, number: int, base: Path) -> SourceConfig:
    t = ConfigTable(raw, f"[[source]] #{number}")
    kind_text = t.string("kind", required=True)
    try:
        kind = SourceKind(kind_text)
    except ValueError:
        raise t.error(
            "kind", "one of " + ", ".join(k.value for k in SourceKind), kind_text
        ) from None
    t.where = f"[[source]] #{number} ({kind})"
    # The name is a directory name under work_dir (saved REST pages): one safe component.
    name = check_path_component(
        t.string("name", default=f"{kind}-{number}"), where=t.where, key="name"
    )
    partitions = t.integer("partitions", low=1, high=10_000)
    dsn = path = url = None
    rest: dict[str, Any] = {}
    if kind is SourceKind.MAILSERVER_POSTGRES:
        dsn = t.string("dsn", required=True)
        if not dsn.startswith(("postgresql://", "postgres://")) and "=" not in dsn:
            raise t.error("dsn", "a PostgreSQL URL (postgresql://user@host/db)", dsn)
    elif kind is SourceKind.STORE_REST:
        url = t.string("url")
        path = resolve_path(base, t.string("path"))
        if (url is None) == (path is None):
            raise ConfigError(
                f"{t.where}: give exactly one of 'url' (a live nwaku REST endpoint) or "
                "'path' (saved REST pages)"
            )
        if url is not None and not url.startswith(("http://", "https://")):
            raise t.error("url", "an http:// or https:// URL", url)
        rest = {
            "pubsub_topic": t.string("pubsub_topic"),
            "content_topics": t.strings("content_topics"),
            "start_time": t.integer("start_time", low=0),
            "end_time": t.integer("end_time", low=0),
            "page_size": t.integer("page_size", default=100, low=1, high=100),
            "state_file": resolve_path(base, t.string("state_file")),
            "retries": t.integer("retries", default=5, low=0, high=100),
            "timeout": t.number("timeout", default=30.0),
        }
    else:
        path = resolve_path(base, t.string("path", required=True))
    t.done()
    return SourceConfig(
        kind=kind, name=name, rank=number, dsn=dsn, path=path, url=url,
        partitions=partitions, **rest,
    )  # fmt: skip


def parse_community(raw: Any, number: int, base: Path) -> CommunityConfig:
    t = ConfigTable(raw, f"[[community]] #{number}")
    text = t.string("id", required=True)
    try:
        community = CommunityId.parse(text)
    except WakuLegacyError:
        raise t.error(
            "id", "0x followed by 66 hex digits (a compressed public key)", text
        ) from None
    t.where = f"[[community]] {text[:12]}…"
    channels = t.strings("channels", required=True)
    if not channels:
        raise ConfigError(f"{t.where}: key 'channels' must list at least one channel uuid")
    for channel in channels:
        try:
            community.channel_chat_id(channel)
        except WakuLegacyError:
            raise t.error("channels", "canonical lowercase UUIDs (8-4-4-4-12)", channel) from None
    shard = t.integer("shard", required=True, low=0, high=1023)
    try:
        community_pubsub_topic(shard)
    except WakuLegacyError as exc:
        raise ConfigError(f"{t.where}: key 'shard': {exc}") from None
    key_file = resolve_path(base, t.string("key_file"))
    name = t.string("name")
    link_chats = t.string("archive_link_chats", default="both")
    if link_chats not in ("both", "universal", "magnetlinks"):
        raise t.error(
            "archive_link_chats",
            '"both", "universal" (<id>-memberUpdate, read by current Status clients) or '
            '"magnetlinks" (<id>-magnetlinks, read by clients from 2024)',
            link_chats,
        )
    operator_key_file = resolve_path(base, t.string("operator_key_file"))
    from waku_legacy.archive.logos_storage import parse_backend

    backend = parse_backend(t._get("backend"), t.where)
    from waku_legacy.archive.topics import ArchiveTopics

    archive_topics = t.string("archive_topics", default=str(ArchiveTopics.BOTH))
    if archive_topics not in set(ArchiveTopics):
        raise t.error(
            "archive_topics",
            '"channel" (the channels\' own topics, imported by clients from before status-go '
            'PR #5993), "universal" (<id>-memberUpdate, imported by current Status clients) or '
            '"both"',
            archive_topics,
        )
    t.done()
    return CommunityConfig(
        community, channels, shard, key_file, name,
        archive_link_chats=link_chats, operator_key_file=operator_key_file, backend=backend,
        archive_topics=archive_topics,
    )  # fmt: skip


def load_operator_key(community: CommunityConfig) -> Any:
    """The key that signs the archive-link message's 26/WAKU-PAYLOAD (``operator_key_file``),
    or None: then the community key signs it as well. status-go signs that layer with the
    sending node's identity key (``Transport.addSig``)."""
    if community.operator_key_file is None:
        return None
    from waku_legacy.mailserver_compat.nodekey import load_node_key

    try:
        return load_node_key(community.operator_key_file)
    except WakuLegacyError as exc:
        raise ConfigError(f"[[community]] {community.id}: operator_key_file: {exc}") from None


def parse_config(data: Mapping[str, Any], *, base_dir: str | Path = ".", origin: str = "<config>"
                 ) -> MigrateConfig:  # fmt: skip
    """Validate a parsed TOML document (paths relative to ``base_dir``)."""
    base = Path(base_dir)
    top = ConfigTable(dict(data), origin)

    spark_t = top.table("spark")
    conf_t = spark_t.table("conf")
    conf = {}
    for key, value in conf_t.data.items():
        if not isinstance(value, str | int | float | bool):
            raise conf_t.error(key, "a string, number or boolean", value)
        conf[key] = str(value).lower() if isinstance(value, bool) else str(value)
        conf_t.used.add(key)
    spark = SparkConfig(
        master=spark_t.string("master", default="local[*]"),
        shuffle_partitions=spark_t.integer("shuffle_partitions", low=1, high=100_000),
        conf=conf,
    )
    spark_t.done()

    raw_sources = top._get("source")
    if raw_sources is None:
        raise ConfigError(f"{origin}: at least one [[source]] table is required")
    if not isinstance(raw_sources, list):
        raise top.error("source", "an array of tables ([[source]])", raw_sources)
    sources = tuple(_parse_source(s, i + 1, base) for i, s in enumerate(raw_sources))
    names = [s.name for s in sources]
    if len(set(names)) != len(names):
        raise ConfigError(f"{origin}: source names must be unique, got {names}")

    raw_communities = top._get("community") or []
    if not isinstance(raw_communities, list):
        raise top.error("community", "an array of tables ([[community]])", raw_communities)
    communities = tuple(parse_community(c, i + 1, base) for i, c in enumerate(raw_communities))
    ids = [str(c.id) for c in communities]
    if len(set(ids)) != len(ids):
        raise ConfigError(f"{origin}: a community is configured twice")
    seen_topics: dict[bytes, str] = {}
    for community in communities:
        for topic in community.channel_topics():
            if topic in seen_topics:
                raise ConfigError(
                    f"{origin}: channel topic 0x{topic.hex()} belongs to two communities"
                )
            seen_topics[topic] = str(community.id)

    pipe_t = top.table("pipeline")
    default_topic = pipe_t.string("default_pubsub_topic", default=DEFAULT_PUBSUB_TOPIC)
    if not default_topic.startswith("/waku/2/"):
        raise pipe_t.error("default_pubsub_topic", "a Waku v2 pubsub topic (/waku/2/…)",
                           default_topic)  # fmt: skip
    flavour = pipe_t.string("flavour", default="status-go")
    if flavour not in ("status-go", "seed-spec"):
        raise pipe_t.error("flavour", "'status-go' or 'seed-spec'", flavour)
    pipeline = PipelineConfig(
        default_pubsub_topic=default_topic,
        now=pipe_t.integer("now", low=0, high=(1 << 40)),
        flavour=flavour,
    )
    pipe_t.done()

    out_t = top._get("output")
    if out_t is None:
        raise ConfigError(f"{origin}: an [output] table is required")
    out = ConfigTable(out_t, "[output]")
    store = resolve_store_url(base, out.string("store", required=True).strip())
    archive_dir = resolve_path(base, out.string("archive_dir", required=True))
    torrent_dir = resolve_path(base, out.string("torrent_dir", required=True))
    assert archive_dir is not None and torrent_dir is not None
    work_dir = resolve_path(base, out.string("work_dir")) or str(
        Path(archive_dir).parent / ".migrate-work"
    )
    quarantine_dir = resolve_path(base, out.string("quarantine_dir")) or str(
        Path(work_dir) / "quarantine"
    )
    output = OutputConfig(
        store=store,
        archive_dir=archive_dir,
        torrent_dir=torrent_dir,
        quarantine_dir=quarantine_dir,
        work_dir=work_dir,
        report=resolve_path(base, out.string("report")),
    )
    out.done()
    logos_storage_url = parse_logos_storage(top, communities, origin)
    top.done()
    return MigrateConfig(spark, sources, communities, pipeline, output, origin, logos_storage_url)


def parse_logos_storage(
    top: ConfigTable, communities: tuple[CommunityConfig, ...], origin: str
) -> str | None:
    """``[logos_storage] url``; required when a community's backend is "logos-storage"."""
    from waku_legacy.archive.logos_storage import LOGOS_STORAGE, parse_node_url

    raw = top._get("logos_storage")
    users = [str(c.id) for c in communities if c.backend == LOGOS_STORAGE]
    if raw is None:
        if users:
            raise ConfigError(
                f"{origin}: community {users[0]} has backend = \"logos-storage\" but there is "
                "no [logos_storage] table with the node's url"
            )
        return None
    table = ConfigTable(raw, "[logos_storage]")
    url = parse_node_url(table._get("url"), "[logos_storage]")
    table.done()
    return url


def read_toml(path: str | Path) -> dict[str, Any]:
    """Read a TOML file; every failure is a ConfigError naming the file: not a regular file,
    over :data:`~waku_legacy.files.MAX_CONFIG_FILE` bytes, not UTF-8, not TOML, or nested
    more than :data:`~waku_legacy.files.MAX_NESTING` levels."""
    path = Path(path)
    text = read_small_text(path, what="config file", max_size=MAX_CONFIG_FILE)
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: not valid TOML: {exc}") from exc
    except ValueError as exc:  # tomllib: an integer of more than 4300 digits
        raise ConfigError(f"{path}: not a usable TOML value: {str(exc)[:200]}") from exc
    except RecursionError:
        raise nesting_error(str(path)) from None
    check_nesting(data, what=str(path))
    return data


def load_config(path: str | Path) -> MigrateConfig:
    """Read and validate a TOML config file."""
    path = Path(path)
    return parse_config(read_toml(path), base_dir=path.resolve().parent, origin=str(path))
