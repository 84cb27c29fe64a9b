"""Issue 25: one declaration per config key, one reader for the bridge's and the migration's
tables: unknown keys first (all of them), then missing ones, then values, each error naming
the table, the key and what is accepted."""

from __future__ import annotations

import os
from dataclasses import dataclass

import pytest

from waku_legacy.bridge.config import ServerConfig, parse_config
from waku_legacy.config.keys import KeyReader, Kind, declared_keys, key
from waku_legacy.errors import ConfigError
from waku_legacy.migrate.config import parse_config as parse_migrate_config

STORE = {"url": "a.db"}


def _bridge_error(tmp_path, **tables) -> str:
    with pytest.raises(ConfigError) as info:
        parse_config({"store": STORE, **tables}, base_dir=tmp_path, origin="b.toml")
    return str(info.value)


def test_a_typo_is_an_unknown_key_not_a_missing_one(tmp_path) -> None:
    text = _bridge_error(tmp_path, archive={"archive_dirr": "a", "torrent_dir": "t"})
    typo = "b.toml.archive: unknown key 'archive_dirr' (did you mean 'archive_dir'?)"
    assert text.startswith(typo)
    assert "required" not in text
    assert "expected some of archive_dir, dht, flavour" in text  # what the table accepts


def test_every_unknown_key_is_named_at_once(tmp_path) -> None:
    text = _bridge_error(tmp_path, server={"lisen": "x:1", "readerthreads": 2, "max_conns": 3})
    assert "unknown keys 'lisen' (did you mean 'listen'?), 'max_conns'" in text, text
    assert "'readerthreads' (did you mean 'reader_threads'?)" in text


def test_missing_keys_come_before_bad_values(tmp_path) -> None:
    assert "keys 'archive_dir', 'torrent_dir' are required" in _bridge_error(tmp_path, archive={})
    text = _bridge_error(tmp_path, archive={"archive_dir": 5})
    assert text == "b.toml.archive: key 'torrent_dir' is required"
    text = _bridge_error(tmp_path, archive={"archive_dir": 5, "torrent_dir": "t"})
    assert text == "b.toml.archive: key 'archive_dir' must be a string, got an integer 5"


@pytest.mark.parametrize(
    ("tables", "message"),
    [
        ({"server": {"max_connections": 0}},
         "b.toml.server: key 'max_connections' must be an integer in 1..1000000, got an integer 0"),
        ({"libp2p": {"address_share": 1.5}},
         "b.toml.libp2p: key 'address_share' must be a positive number and at most 1, got a "
         "number 1.5"),
        ({"logging": {"format": "xml"}},
         "b.toml.logging: key 'format' must be one of \"json\", \"text\", got a string 'xml'"),
        ({"server": {"requests_per_second": float("nan")}},
         "b.toml.server: key 'requests_per_second' must be a non-negative number, got a "
         "number nan"),
        ({"server": {"requests_per_second": 10**400}},  # float() of it: OverflowError
         "b.toml.server: key 'requests_per_second' must be a non-negative number"),
        ({"server": {"shutdown_timeout": 10**400}},
         "b.toml.server: key 'shutdown_timeout' must be a duration"),
        ({"v1": {"limits": {"max_peer": 3}}},
         "b.toml.v1.limits: unknown key 'max_peer' (did you mean 'max_peers'?)"),
        ({"v1": {"limits": {"max_peers": 0}}},
         "b.toml.v1.limits: key 'max_peers' must be an integer in 1.., got an integer 0"),
    ],
)  # fmt: skip
def test_value_errors_name_the_table_key_and_what_is_accepted(tmp_path, tables, message) -> None:
    assert _bridge_error(tmp_path, **tables).startswith(message)


MIGRATE = {
    "source": [{"kind": "mailserver-leveldb", "path": "ms"}],
    "output": {"store": "", "archive_dir": "a", "torrent_dir": "t"},
}


def _migrate_error(tmp_path, **changes) -> str:
    with pytest.raises(ConfigError) as info:
        parse_migrate_config({**MIGRATE, **changes}, base_dir=tmp_path, origin="m.toml")
    return str(info.value)


def test_the_migration_reads_its_tables_the_same_way(tmp_path) -> None:
    config = parse_migrate_config(MIGRATE, base_dir=tmp_path)
    assert config.output.work_dir == str(tmp_path / ".migrate-work")
    # a factory default is made for each config, not one dict shared by all
    assert parse_migrate_config(MIGRATE, base_dir=tmp_path).spark.conf is not config.spark.conf
    text = _migrate_error(tmp_path, output={"store": "", "archive_dirr": "a", "torrent_dir": "t"})
    assert text.startswith("[output]: unknown key 'archive_dirr' (did you mean 'archive_dir'?)")
    # a key another kind of source takes is unknown here, and the list says what is accepted
    text = _migrate_error(tmp_path, source=[{"kind": "mailserver-leveldb", "path": "ms",
                                             "url": "http://x"}])  # fmt: skip
    assert text == (
        "[[source]] #1 (mailserver-leveldb): unknown key 'url'; expected some of kind, name, "
        "partitions, path"
    )
    text = _migrate_error(tmp_path, source=[{"kind": "store-rest", "url": "http://x",
                                             "page_size": 500}])  # fmt: skip
    assert "key 'page_size' must be an integer in 1..100" in text
    assert "unknown key 'sparks'" in _migrate_error(tmp_path, sparks={})


def test_workers_has_one_default(tmp_path) -> None:
    """[server] workers said 1 in the dataclass and the number of cores in the reader; one
    declaration now: the number of cores (what `serve` used and the README documents)."""
    cores = os.cpu_count() or 1
    assert ServerConfig().workers == cores
    assert parse_config({"store": STORE}, base_dir=tmp_path).server.workers == cores
    (workers,) = [d for d in declared_keys(ServerConfig) if d.name == "workers"]
    assert workers.spec.shown == "the number of cores"


def test_a_declaration_needs_a_kind_it_can_be_read_as() -> None:
    @dataclass(frozen=True)
    class Odd:
        blob: bytes = key(b"", doc="bytes have no TOML kind")

    with pytest.raises(TypeError, match=r"Odd.blob: give key\(kind=…\)"):
        declared_keys(Odd)

    @dataclass(frozen=True)
    class Table:
        size: int = key(doc="required: no default", min=1)
        wait: float = key(2.0, kind=Kind.DURATION, min=0, doc="0: off")

    reader = KeyReader(Table, {"size": 3, "wait": "250ms"}, "[t]")
    assert reader.values() == {"size": 3, "wait": 0.25}
    assert KeyReader(Table, {"size": 3, "wait": 0}, "[t]").value("wait") == 0.0
    with pytest.raises(ConfigError, match=r"^\[t\]: key 'size' is required$"):
        KeyReader(Table, {"wait": 1}, "[t]")
