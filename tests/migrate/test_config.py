"""The migration's TOML config: every key of issue 4 parses; mistakes name the key."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.config_examples import full_migrate_config
from waku_legacy.errors import ConfigError
from waku_legacy.migrate.config import SourceKind, load_config

COMMUNITY = "0x02" + "79be667ef9dcbbac55a06295ce870b07029bfcdb2dce28d959f2815b16f81798"
CHANNEL = "a1b2c3d4-0000-4000-8000-000000000001"

FULL = full_migrate_config(COMMUNITY, CHANNEL)


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "migrate.toml"
    path.write_text(text)
    return path


def test_full_config(tmp_path: Path) -> None:
    config = load_config(_write(tmp_path, FULL))
    assert config.spark.master == "local[2]" and config.spark.shuffle_partitions == 4
    assert dict(config.spark.conf) == {"spark.driver.memory": "1g"}
    kinds = [s.kind for s in config.sources]
    assert kinds == [
        SourceKind.MAILSERVER_POSTGRES,
        SourceKind.MAILSERVER_LEVELDB,
        SourceKind.ENVELOPE_DUMP,
        SourceKind.STORE_REST,
        SourceKind.STORE_REST,
        SourceKind.STORE_SQLITE,
    ]
    assert (
        config.sources[1].name == "leveldb-eu" and config.sources[0].name == "mailserver-postgres-1"
    )
    assert config.sources[1].path == str(tmp_path / "ms1")  # relative to the config file
    assert [s.rank for s in config.sources] == [1, 2, 3, 4, 5, 6]
    community = config.communities[0]
    assert str(community.id) == COMMUNITY and community.pubsub_topic == "/waku/2/rs/16/128"
    assert community.key_file == str(tmp_path / "community.key")
    assert (
        config.output.store
        == f"sqlite:///{str((tmp_path / 'store.sqlite3').resolve()).lstrip('/')}"
    )
    assert config.output.work_dir == str(tmp_path / ".migrate-work")
    assert config.pipeline.default_pubsub_topic == "/waku/2/rs/16/32"


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (('kind = "mailserver-leveldb"', 'kind = "mailserver-mysql"'), "key 'kind' must be one of"),
        (("shard = 128", 'shard = "128"'), "key 'shard' must be an integer"),
        (("shard = 128", "shard = 900"), "key 'shard'"),
        (("shard = 128", ""), "key 'shard' is required"),
        ((f'id = "{COMMUNITY}"', 'id = "0x1234"'), "key 'id' must be 0x followed by 66 hex"),
        ((f'channels = ["{CHANNEL}"]', 'channels = ["general"]'), "key 'channels'"),
        # issue 25: unknown keys are reported before missing ones
        (('dsn = "postgresql://', 'dns = "postgresql://'), "unknown key 'dns' (did you mean 'dsn"),
        (('url = "http://127.0.0.1:8645"', 'url = "ftp://x"'), "key 'url' must be an http"),
        (('archive_dir = "archives"', "archive_dir = 5"), "key 'archive_dir' must be a string"),
        (('store = "sqlite:store.sqlite3"', 'store = "mysql://x/y"'), "key 'store'"),
        (('master = "local[2]"', 'master = "local[2]"\nmastr = "x"'), "unknown key 'mastr' (did"),
    ],
)
def test_mistakes_name_the_key(tmp_path: Path, change: tuple[str, str], message: str) -> None:
    old, new = change
    assert old in FULL
    with pytest.raises(ConfigError) as info:
        load_config(_write(tmp_path, FULL.replace(old, new, 1)))
    assert message in str(info.value)


def test_file_level_errors(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"config file: .*missing.toml does not exist"):
        load_config(tmp_path / "missing.toml")
    with pytest.raises(ConfigError, match="not valid TOML"):
        load_config(_write(tmp_path, "[spark\nmaster="))
    with pytest.raises(ConfigError, match=r"at least one \[\[source\]\]"):
        load_config(_write(tmp_path, "[output]\nstore=''\narchive_dir='a'\ntorrent_dir='t'\n"))
    two = FULL.replace(
        "[output]",
        f'[[community]]\nid = "{COMMUNITY}"\nchannels = ["{CHANNEL}"]\nshard = 129\n[output]',
    )
    with pytest.raises(ConfigError, match="configured twice"):
        load_config(_write(tmp_path, two))


# -- issue 10: hostile configs -------------------------------------------------------------

REST_SOURCE = """
[[source]]
kind = "store-rest"
url = "http://127.0.0.1:1"
retries = 0
name = {name}

[output]
store = ""
archive_dir = "out/archives"
torrent_dir = "out/torrents"
work_dir = "out/work"
"""


@pytest.mark.parametrize(
    "name", ["../../x", "..", ".", "a/b", "/etc", "x\\y", ".hidden", "-rf", "", "a b", "x" * 129]
)
def test_source_name_must_be_one_path_component(tmp_path: Path, name: str) -> None:
    """A [[source]] name becomes a directory under work_dir (saved REST pages): anything that
    is not one plain file-name component is a ConfigError naming the key."""
    with pytest.raises(ConfigError, match=r"\[\[source\]\] #1 \(store-rest\): key 'name'"):
        load_config(_write(tmp_path, REST_SOURCE.format(name=json.dumps(name))))


def test_source_name_cannot_write_outside_work_dir(tmp_path: Path, capsys) -> None:
    """`migrate` with name = "../../x" stops at the config (exit 2) and writes nothing
    outside work_dir; a SourceConfig built in code gets the same rule when planned."""
    from waku_legacy.cli import main
    from waku_legacy.migrate.config import SourceConfig
    from waku_legacy.migrate.sources import plan_source

    root = tmp_path / "root"
    root.mkdir()
    path = _write(root, REST_SOURCE.format(name='"../../escaped"'))
    before = sorted(p.name for p in tmp_path.iterdir())
    assert main(["migrate", "--config", str(path), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert "key 'name'" in err and "Traceback" not in err
    assert sorted(p.name for p in tmp_path.iterdir()) == before  # nothing written outside
    assert not (root / "out").exists()

    source = SourceConfig(kind=SourceKind.STORE_REST, name="../../escaped", rank=1, url="http://x")
    with pytest.raises(ConfigError, match="key 'name'"):
        plan_source(source, 1, str(root / "out" / "work"))
    ok = plan_source(source.__class__(kind=SourceKind.STORE_REST, name="ms-1.eu", rank=1,
                                      url="http://x"), 1, str(root / "work"))  # fmt: skip
    assert ok[0]["save_dir"].startswith(str(root / "work" / "rest-pages" / "ms-1.eu"))


def test_deeply_nested_toml_is_a_config_error(tmp_path: Path) -> None:
    """Nesting past the parser's recursion (RecursionError inside tomllib) and nesting the
    parser survives but no config has (an error message would repr it) are both typed."""
    for depth in (50, 100_000):
        text = FULL.replace('master = "local[2]"', "master = " + "[" * depth + "]" * depth)
        with pytest.raises(ConfigError, match="nested"):
            load_config(_write(tmp_path, text))
    inline = "x = " + "{a = " * 5000 + "1" + "}" * 5000 + "\n" + FULL
    with pytest.raises(ConfigError, match="nested too deeply"):
        load_config(_write(tmp_path, inline))


def test_config_file_must_be_a_small_regular_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="is a directory"):
        load_config(tmp_path)
    with pytest.raises(ConfigError, match="not a regular file"):
        load_config("/dev/zero")
    big = FULL + "# " + "x" * (2 * 1024 * 1024) + "\n"
    with pytest.raises(ConfigError, match="larger than the 1048576-byte limit"):
        load_config(_write(tmp_path, big))


def test_migrate_cli_reports_config_file_errors(tmp_path: Path, capsys) -> None:
    """`migrate --config` (with and without --master) turns every config-file failure into
    one line on stderr and exit code 2."""
    from waku_legacy.cli import main

    deep = _write(tmp_path, "a = " + "[" * 100_000 + "]" * 100_000)
    for argv in (
        ["migrate", "--config", str(deep)],
        ["migrate", "--config", str(deep), "--master", "local[1]"],
        ["migrate", "--config", str(tmp_path)],
        ["migrate", "--config", str(tmp_path / "missing.toml"), "--master", "local[1]"],
        ["migrate", "--config", "/dev/zero", "--master", "local[1]"],
    ):
        assert main(argv) == 2, argv
        err = capsys.readouterr().err
        assert err.startswith("waku-legacy migrate: error: ") and err.count("\n") == 1, err


@pytest.mark.timeout(30)
def test_saved_rest_pages_are_small_regular_files(tmp_path: Path) -> None:
    """A store-rest source's saved pages (a path the config names) are read through the
    bounded reader: a FIFO, a device or an oversized page is a StoreRestError."""
    import os

    from waku_legacy.store.rest_client import (
        MAX_RESPONSE_BYTES,
        StoreRestError,
        iter_saved_pages,
    )

    fifo = tmp_path / "page-000001.json"
    os.mkfifo(fifo)  # would block forever (no writer) if opened for a plain read
    for path, message in (
        (fifo, "not a regular file"),
        (Path("/dev/zero"), "not a regular file"),
    ):
        with pytest.raises(StoreRestError, match=message):
            list(iter_saved_pages([path]))
    big = tmp_path / "big.json"
    with open(big, "wb") as fh:
        fh.truncate(MAX_RESPONSE_BYTES + 1)  # sparse: no disk used
    with pytest.raises(StoreRestError, match="larger than"):
        list(iter_saved_pages([big]))
