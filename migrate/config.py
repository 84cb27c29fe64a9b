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
    min_link_clock = 1730000000000      # optional: the archive link is signed at least at
                                        #   this clock (ms): links a Status client published
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

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any

from waku_legacy.archive import defaults
from waku_legacy.community_config import (
    CommunityConfig,
    parse_communities,
    parse_logos_storage,
)
from waku_legacy.config import ConfigTable, read_toml, resolve_path, resolve_store_url
from waku_legacy.errors import ConfigError
from waku_legacy.files import check_path_component
from waku_legacy.identity.shards import GLOBAL_PUBSUB_TOPIC

__all__ = [
    "MigrateConfig",
    "OutputConfig",
    "PipelineConfig",
    "SourceConfig",
    "SourceKind",
    "SparkConfig",
    "load_config",
    "parse_config",
    "parse_source",
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
            from waku_legacy.store.dsn import redact_dsn

            return redact_dsn(self.dsn)
        return self.url or self.path or ""


@dataclass(frozen=True, slots=True)
class PipelineConfig:
    default_pubsub_topic: str = DEFAULT_PUBSUB_TOPIC
    now: int | None = None
    flavour: str = defaults.FLAVOUR


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


# -- the parser -------------------------------------------------------------------------------


def parse_source(raw: Any, number: int, base: Path) -> SourceConfig:
    """One ``[[source]]`` table (``number``: its position, 1-based; paths relative to
    ``base``). ``export`` and ``audit`` build their sources from ``--source`` specs with it."""
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

    raw_sources = top.raw("source")
    if raw_sources is None:
        raise ConfigError(f"{origin}: at least one [[source]] table is required")
    if not isinstance(raw_sources, list):
        raise top.error("source", "an array of tables ([[source]])", raw_sources)
    sources = tuple(parse_source(s, i + 1, base) for i, s in enumerate(raw_sources))
    names = [s.name for s in sources]
    if len(set(names)) != len(names):
        raise ConfigError(f"{origin}: source names must be unique, got {names}")

    communities = parse_communities(top, base, origin)

    pipe_t = top.table("pipeline")
    default_topic = pipe_t.string("default_pubsub_topic", default=DEFAULT_PUBSUB_TOPIC)
    if not default_topic.startswith("/waku/2/"):
        raise pipe_t.error("default_pubsub_topic", "a Waku v2 pubsub topic (/waku/2/…)",
                           default_topic)  # fmt: skip
    flavour = pipe_t.string("flavour", default=defaults.FLAVOUR)
    if flavour not in ("status-go", "seed-spec"):
        raise pipe_t.error("flavour", "'status-go' or 'seed-spec'", flavour)
    pipeline = PipelineConfig(
        default_pubsub_topic=default_topic,
        now=pipe_t.integer("now", low=0, high=(1 << 40)),
        flavour=flavour,
    )
    pipe_t.done()

    out_t = top.raw("output")
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


def load_config(path: str | Path) -> MigrateConfig:
    """Read and validate a TOML config file."""
    path = Path(path)
    return parse_config(read_toml(path), base_dir=path.resolve().parent, origin=str(path))
