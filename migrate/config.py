"""The migration's TOML configuration: what to read, how to map it, where to write.

The tables: ``[spark]``, ``[[source]]`` (repeat; read in parallel partitions; which keys a
source takes depends on its ``kind``), ``[[community]]`` and ``[logos_storage]`` (the bridge
reads them too: :mod:`waku_legacy.community_config`), ``[pipeline]`` and ``[output]``. Each
key is declared once on the dataclass of its table below (default, bounds, one-line doc),
or, for the archive folders and layout the bridge shares, on
:class:`~waku_legacy.archive.settings.ArchiveOutput` (taken with ``same_key``);
``deploy/migrate.example.toml`` and docs/configuration.md's key tables are generated from them
(``scripts/gen-config-docs.py``).

A ``store-rest`` source keeps every fetched page under ``state_file`` (the resumable
position; default ``<work_dir>/rest-pages/<name>``): a rerun replays the saved pages and
fetches only what follows the last saved cursor; delete the directory to fetch everything
again.

Relative paths are relative to the directory of the config file. Unknown keys are errors
(a typo must not silently drop a source), reported before missing ones. The config file (up
to 1 MiB) and key files (up to 4 KiB) are read as bounded regular files
(:mod:`waku_legacy.files`); strings may not hold NUL characters; TOML nested more than 64
levels deep is refused.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Any

from waku_legacy.archive.settings import ArchiveOutput
from waku_legacy.community_config import (
    CommunityConfig,
    LogosStorageConfig,
    parse_communities,
    parse_logos_storage,
)
from waku_legacy.config import read_toml, resolve_store_url
from waku_legacy.config.docs import ConfigLayout, TableLayout
from waku_legacy.config.keys import (
    KeyReader,
    KeyRef,
    Kind,
    check_unknown,
    key,
    pubsub_topic,
    read_table,
    same_key,
)
from waku_legacy.errors import ConfigError
from waku_legacy.files import check_path_component
from waku_legacy.identity.shards import GLOBAL_PUBSUB_TOPIC

__all__ = [
    "SOURCE_KEYS",
    "TABLES",
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


def _spark_conf(value: Any, ref: KeyRef) -> dict[str, str]:
    if not isinstance(value, dict):
        raise ref.error("a table of Spark settings", value)
    conf = {}
    for name, setting in value.items():
        if not isinstance(setting, str | int | float | bool):
            raise KeyRef(f"{ref.where}.conf", name, ref.base).error(
                "a string, number or boolean", setting
            )
        conf[name] = str(setting).lower() if isinstance(setting, bool) else str(setting)
    return conf


def _source_kind(value: str, ref: KeyRef) -> SourceKind:
    try:
        return SourceKind(value)
    except ValueError:
        raise ref.error("one of " + ", ".join(k.value for k in SourceKind), value) from None


def _source_name(value: str, ref: KeyRef) -> str:
    # a directory name under work_dir (saved REST pages): one safe component
    return check_path_component(value, where=ref.where, key=ref.name)


def _dsn(value: str, ref: KeyRef) -> str:
    if not value.startswith(("postgresql://", "postgres://")) and "=" not in value:
        raise ref.error("a PostgreSQL URL (postgresql://user@host/db)", value)
    return value


def _rest_url(value: str, ref: KeyRef) -> str:
    if not value.startswith(("http://", "https://")):
        raise ref.error("an http:// or https:// URL", value)
    return value


def _output_store(value: str, ref: KeyRef) -> str:
    return resolve_store_url(ref.base, value.strip())


@dataclass(frozen=True, slots=True)
class SparkConfig:
    """where Spark runs"""

    master: str = key(
        "local[*]",
        example="local[*]",
        doc='local mode, or a cluster: "spark://host:7077" (deploy/spark/)',
    )
    shuffle_partitions: int | None = key(
        None, min=1, max=100_000, hint=8, shown="Spark's", doc="spark.sql.shuffle.partitions"
    )
    conf: Mapping[str, str] = key(
        kind=Kind.ANY,
        factory=dict,
        parse=_spark_conf,
        hint={"spark.driver.memory": "2g"},
        doc="any Spark settings",
    )


@dataclass(frozen=True, slots=True)
class SourceConfig:
    """A legacy mailserver database, an envelope dump or a store to read (repeat the table)"""

    kind: SourceKind = key(
        kind=Kind.STRING,
        parse=_source_kind,
        choices=tuple(SourceKind),
        example="mailserver-postgres",
        doc="what the source is",
    )
    name: str = key(
        kind=Kind.STRING,
        parse=_source_name,
        required=False,
        hint="ms-eu",
        shown="<kind>-<n>",
        doc="shown in the report, and a directory name: letters, digits, . _ -",
    )
    # position in the file: earlier sources win ties when deduplicating (a default only
    # because mypy takes key() without a default for one; the reader always sets it)
    rank: int = 0
    dsn: str | None = key(
        None,
        parse=_dsn,
        example="postgresql://user@host/db",
        doc="mailserver-postgres: the database",
    )
    path: str | None = key(
        None,
        kind=Kind.PATH,
        hint="ms-eu.leveldb",
        doc="mailserver-leveldb folder, envelope-dump file(s) (globs ok), "
        "store-sqlite file, or store-rest saved pages (folder or glob)",
    )
    url: str | None = key(
        None,
        parse=_rest_url,
        hint="http://node:8645",
        doc="store-rest: a live nwaku REST endpoint (or path)",
    )
    partitions: int | None = key(
        None, min=1, max=10_000, hint=8, doc="parallel reads of this source"
    )
    pubsub_topic: str | None = key(
        None, hint="/waku/2/rs/16/128", doc="store-rest: the pubsub topic asked for"
    )
    content_topics: tuple[str, ...] = key((), doc="store-rest: the content topics asked for")
    start_time: int | None = key(None, min=0, hint=0, doc="store-rest: from this time (ns)")
    end_time: int | None = key(
        None, min=0, hint=1700000000000000000, doc="store-rest: up to this time (ns)"
    )
    page_size: int = key(100, min=1, max=100, doc="store-rest: messages per page")
    state_file: str | None = key(
        None,
        kind=Kind.PATH,
        shown="<work_dir>/rest-pages/<name>",
        hint="rest-pages",
        doc="store-rest: where fetched pages are kept (the resumable position)",
    )
    retries: int = key(5, min=0, max=100, doc="store-rest: a failed page request is retried")
    timeout: float = key(30.0, above=0, doc="store-rest: seconds for one page request")

    @property
    def location(self) -> str:
        """Where the source is, for provenance (never a password)."""
        if self.dsn:
            from waku_legacy.store.dsn import redact_dsn

            return redact_dsn(self.dsn)
        return self.url or self.path or ""


#: The keys each kind of source takes (besides kind, name and partitions).
SOURCE_KEYS = {
    SourceKind.MAILSERVER_POSTGRES: ("dsn",),
    SourceKind.MAILSERVER_LEVELDB: ("path",),
    SourceKind.ENVELOPE_DUMP: ("path",),
    SourceKind.STORE_SQLITE: ("path",),
    SourceKind.STORE_REST: (
        "url",
        "path",
        "pubsub_topic",
        "content_topics",
        "start_time",
        "end_time",
        "page_size",
        "state_file",
        "retries",
        "timeout",
    ),
}


@dataclass(frozen=True, slots=True)
class PipelineConfig:
    """how messages are mapped and archived (optional)"""

    default_pubsub_topic: str = key(
        DEFAULT_PUBSUB_TOPIC,
        parse=pubsub_topic,
        example=DEFAULT_PUBSUB_TOPIC,
        doc="topics of no configured community",
    )
    now: int | None = key(
        None,
        min=0,
        max=1 << 40,
        hint=1700000000,
        shown="the wall clock",
        doc="the archive clock (seconds)",
    )
    flavour: str = same_key(ArchiveOutput, "flavour")
    readable: bool = key(
        True,
        doc="after the store, index the communities' channel messages in its history_* "
        "tables (the viewer's pages, search and history export read them)",
    )


@dataclass(frozen=True, slots=True)
class OutputConfig:
    """what the migration writes"""

    store: str = key(
        parse=_output_store,
        example="sqlite:///store.sqlite3",
        doc='the v2 store: sqlite:///path or postgresql://…; "": none',
    )
    archive_dir: str = same_key(ArchiveOutput, "archive_dir")
    torrent_dir: str = same_key(ArchiveOutput, "torrent_dir")
    quarantine_dir: str = key(
        kind=Kind.PATH,
        required=False,
        hint="quarantine",
        shown="<work_dir>/quarantine",
        doc="records that could not be used, with their reason",
    )
    work_dir: str = key(
        kind=Kind.PATH,
        required=False,
        hint=".migrate-work",
        shown="<archive_dir>/../.migrate-work",
        doc="intermediate files (a rerun resumes from them)",
    )
    report: str | None = key(
        None, kind=Kind.PATH, hint="report.json", doc="also write the JSON report here"
    )


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
    where = f"[[source]] #{number}"
    # every key any source takes, and kind; then the keys of this kind
    kind = KeyReader(SourceConfig, raw, where).value("kind")
    where = f"[[source]] #{number} ({kind})"
    require = () if kind is SourceKind.STORE_REST else SOURCE_KEYS[kind]
    only = ("kind", "name", "partitions", *SOURCE_KEYS[kind])
    reader = KeyReader(SourceConfig, raw, where, base=base, only=only, require=require)
    values = reader.values()
    if kind is SourceKind.STORE_REST and (values["url"] is None) == (values["path"] is None):
        raise ConfigError(
            f"{where}: give exactly one of 'url' (a live nwaku REST endpoint) or "
            "'path' (saved REST pages)"
        )
    if values["name"] is None:
        values["name"] = _source_name(f"{kind}-{number}", reader.ref("name"))
    return SourceConfig(**values, rank=number)


def parse_config(data: Mapping[str, Any], *, base_dir: str | Path = ".", origin: str = "<config>"
                 ) -> MigrateConfig:  # fmt: skip
    """Validate a parsed TOML document (paths relative to ``base_dir``)."""
    base = Path(base_dir)
    check_unknown(data, TABLES, origin)
    spark: SparkConfig = read_table(SparkConfig, _table(data, "spark"), f"{origin}.spark")

    raw_sources = data.get("source")
    if raw_sources is None:
        raise ConfigError(f"{origin}: at least one [[source]] table is required")
    if not isinstance(raw_sources, list):
        raise KeyRef(origin, "source", base).error("an array of tables ([[source]])", raw_sources)
    sources = tuple(parse_source(s, i + 1, base) for i, s in enumerate(raw_sources))
    names = [s.name for s in sources]
    if len(set(names)) != len(names):
        raise ConfigError(f"{origin}: source names must be unique, got {names}")

    communities = parse_communities(data, base, origin)
    pipeline: PipelineConfig = read_table(
        PipelineConfig, _table(data, "pipeline"), f"{origin}.pipeline"
    )
    if data.get("output") is None:
        raise ConfigError(f"{origin}: an [output] table is required")
    output = _parse_output(data["output"], base)
    logos_storage_url = parse_logos_storage(data, communities, origin)
    return MigrateConfig(spark, sources, communities, pipeline, output, origin, logos_storage_url)


#: deploy/migrate.example.toml and docs/configuration.md's key tables (scripts/gen-config-docs.py).
LAYOUT = ConfigLayout(
    header="""
waku-legacy migration: example configuration (waku-legacy migrate --config migrate.toml)
Relative paths are relative to this file. Unknown keys are errors (a typo must not silently
drop a source). `waku-legacy plan` writes one for named communities.
Generated from the key declarations (migrate/config.py) by scripts/gen-config-docs.py.
""",
    tables=(
        TableLayout("spark", SparkConfig),
        TableLayout("source", SourceConfig, array=True, only=(
            "kind", "name", "partitions", *SOURCE_KEYS[SourceKind.MAILSERVER_POSTGRES])),
        TableLayout("source", SourceConfig, array=True, active=False,
                    note="a live nwaku node's store (or its saved pages, path)",
                    only=("kind", "name", "partitions", *SOURCE_KEYS[SourceKind.STORE_REST]),
                    values={"kind": SourceKind.STORE_REST.value, "url": "http://node:8645"}),
        TableLayout("community", CommunityConfig, array=True, active=False),
        TableLayout("logos_storage", LogosStorageConfig, active=False),
        TableLayout("pipeline", PipelineConfig),
        TableLayout("output", OutputConfig),
    ),
)  # fmt: skip

#: The migration's top-level tables.
TABLES = ("spark", "source", "community", "logos_storage", "pipeline", "output")


def _table(data: Mapping[str, Any], name: str) -> Any:
    """A table that may be left out: its defaults."""
    return {} if data.get(name) is None else data[name]


def _parse_output(raw: Any, base: Path) -> OutputConfig:
    values = KeyReader(OutputConfig, raw, "[output]", base=base).values()
    if not values["work_dir"]:  # absent or ""
        values["work_dir"] = str(Path(values["archive_dir"]).parent / ".migrate-work")
    if not values["quarantine_dir"]:
        values["quarantine_dir"] = str(Path(values["work_dir"]) / "quarantine")
    return OutputConfig(**values)


def load_config(path: str | Path) -> MigrateConfig:
    """Read and validate a TOML config file."""
    path = Path(path)
    return parse_config(read_toml(path), base_dir=path.resolve().parent, origin=str(path))
