"""The bridge's TOML configuration: every section, durations, typed errors naming the key,
and the [[community]] tables (waku_legacy.community_config, as the migration reads them)."""

from __future__ import annotations

import os
import textwrap

import pytest

from tests.config_examples import full_bridge_config
from waku_legacy.bridge.config import load_config, parse_config, parse_duration
from waku_legacy.crypto.secp256k1 import private_key_from_bytes
from waku_legacy.errors import ConfigError

KEY = private_key_from_bytes(bytes.fromhex("11" * 32))
COMMUNITY = "0x" + KEY.public_key.format(compressed=True).hex()
CHANNEL = "8f3a1c2e-4b5d-4e6f-8a9b-0c1d2e3f4a5b"

FULL = full_bridge_config(COMMUNITY, CHANNEL)


def _checkable(tmp_path, text=FULL):
    """FULL as `serve --check` takes it: its SQLite store there, any free ports."""
    import sqlite3

    db = sqlite3.connect(tmp_path / "store.sqlite3")
    db.execute("CREATE TABLE IF NOT EXISTS t (x)")
    db.close()
    text = text.replace('"0.0.0.0:9000"', '"127.0.0.1:0"').replace(":30303", ":0")
    path = tmp_path / "bridge.toml"
    path.write_text(text)
    return path


def test_full_config(tmp_path):
    (tmp_path / "admin.token").write_text("a-long-enough-admin-token\n")
    path = tmp_path / "bridge.toml"
    path.write_text(FULL)
    config = load_config(path)
    assert (config.server.host, config.server.port) == ("0.0.0.0", 9000)
    assert config.server.shutdown_timeout == 45
    assert config.store.url == f"sqlite:///{tmp_path / 'store.sqlite3'}".replace("////", "///")
    assert config.v1 is not None and config.v1.node_key_file == str(tmp_path / "keys/nodekey")
    assert config.v1.rate_limit == 0 and config.v1.live_window == 600
    assert config.v1.trusted_peers == (bytes.fromhex("ab" * 64),)
    assert config.relay is not None and config.relay.url == "http://127.0.0.1:8646"
    assert config.history is not None and config.history.interval == 7200
    assert config.history.window == 30 * 86400
    assert config.archive is not None and config.archive.interval == 7 * 86400
    assert config.archive.trackers is False
    assert config.communities[0].pubsub_topic == "/waku/2/rs/16/128"
    assert config.communities[0].key_file == str(tmp_path / "community.key")
    assert config.admin.token == "a-long-enough-admin-token"
    assert config.logging.level == "debug"


def test_minimal_config_defaults(tmp_path):
    config = parse_config({"store": {"url": "sqlite:///x.db"}}, base_dir=tmp_path)
    assert config.server.port == 8645 and config.v1 is None and config.relay is None
    assert config.archive is None and config.communities == () and config.admin.token is None


@pytest.mark.parametrize(
    "data, fragment",
    [
        ({}, "a [store] table"),
        ({"store": {"url": "mysql://x"}}, "key 'url'"),
        ({"store": {"url": "a.db"}, "server": {"listen": "nope"}}, "key 'listen'"),
        ({"store": {"url": "a.db"}, "server": {"lisen": "x:1"}},
         "unknown key 'lisen' (did you mean 'listen'?)"),
        ({"store": {"url": "a.db"}, "server": {"reader_threads": -1}}, "key 'reader_threads'"),
        ({"store": {"url": "a.db"}, "relay": {"url": "ftp://x"}}, "key 'url'"),
        ({"store": {"url": "a.db"}, "relay": {}}, "key 'url' is required"),
        ({"store": {"url": "a.db"}, "history": {"nodes": []}}, "key 'nodes'"),
        ({"store": {"url": "a.db"}, "history": {"nodes": ["http://a"], "interval": "soon"}},
         "key 'interval' must be a duration"),
        ({"store": {"url": "a.db"}, "v1": {"trusted_peers": ["zz"]}}, "key 'trusted_peers'"),
        ({"store": {"url": "a.db"}, "v1": {"min_pow": -1}}, "key 'min_pow'"),
        ({"store": {"url": "a.db"}, "archive": {"archive_dir": "a"}}, "key 'torrent_dir'"),
        ({"store": {"url": "a.db"}, "archive": {"archive_dir": "a", "torrent_dir": "t",
                                                 "flavour": "x"}}, "key 'flavour'"),
        ({"store": {"url": "a.db"}, "admin": {"token": "short"}}, "at least 16"),
        ({"store": {"url": "a.db"}, "admin": {"token": "x" * 20, "token_file": "f"}}, "not both"),
        ({"store": {"url": "a.db"}, "logging": {"level": "loud"}}, "key 'level'"),
        ({"store": {"url": "a.db"}, "community": [{"id": COMMUNITY, "channels": [CHANNEL],
                                                   "shard": 128}]}, "need an [archive]"),
        ({"store": {"url": "a.db"}, "archive": {"archive_dir": "a", "torrent_dir": "t"},
          "community": [{"id": "0x12", "channels": [CHANNEL], "shard": 128}]}, "key 'id'"),
        ({"store": {"url": "a.db"}, "surprise": {}}, "unknown key 'surprise'"),
    ],
)  # fmt: skip
def test_errors_name_the_key(tmp_path, data, fragment):
    with pytest.raises(ConfigError) as info:
        parse_config(data, base_dir=tmp_path)
    assert fragment in str(info.value)


def test_file_errors(tmp_path):
    with pytest.raises(ConfigError, match=r"config file: .*missing.toml does not exist"):
        load_config(tmp_path / "missing.toml")
    bad = tmp_path / "bad.toml"
    bad.write_text("[server\n")
    with pytest.raises(ConfigError, match="not valid TOML"):
        load_config(bad)
    missing_token = tmp_path / "t.toml"
    missing_token.write_text(
        textwrap.dedent("""
        [store]
        url = "a.db"
        [admin]
        token_file = "nope.token"
    """)
    )
    with pytest.raises(ConfigError, match="key 'token_file'"):
        load_config(missing_token)


@pytest.mark.parametrize(
    "value, seconds",
    [(5, 5), (2.5, 2.5), ("45s", 45), ("30m", 1800), ("6h", 21600), ("7d", 604800),
     ("250ms", 0.25), (" 3 h ", 10800)],
)  # fmt: skip
def test_durations(value, seconds):
    assert parse_duration(value, "[x]", "k") == seconds


@pytest.mark.parametrize("value", ["", "5 weeks", -1, 0, True, "h"])
def test_bad_durations(value):
    with pytest.raises(ConfigError, match="key 'k'"):
        parse_duration(value, "[x]", "k")


def test_serve_check_validates_keys(tmp_path, capsys):
    from waku_legacy.cli import main

    other = private_key_from_bytes(bytes.fromhex("22" * 32))
    (tmp_path / "community.key").write_text(other.secret.hex())
    (tmp_path / "admin.token").write_text("a-long-enough-admin-token")
    path = _checkable(tmp_path)
    assert main(["serve", "--config", str(path), "--check"]) == 2
    assert "key of another community" in capsys.readouterr().err
    (tmp_path / "community.key").write_text(KEY.secret.hex())
    assert main(["serve", "--config", str(path), "--check"]) == 0
    out = capsys.readouterr().out
    assert '"reachesMembers": true' in out and '"admin_api": true' in out


def test_deploy_example_config_is_valid(tmp_path):
    """deploy/bridge.example.toml parses (with its admin token file replaced by a token)."""
    import tomllib

    from tests.conftest import REPO_ROOT

    data = tomllib.loads((REPO_ROOT / "deploy" / "bridge.example.toml").read_text())
    data["admin"] = {"token": "example-token-0123456789"}
    config = parse_config(data, base_dir=tmp_path)
    assert config.server.port == 8645 and config.v1 is not None and config.archive is not None
    assert config.history is not None and config.history.nodes == ("http://127.0.0.1:8646",)
    assert config.libp2p is not None and config.libp2p.cluster_id == 16
    assert config.libp2p.listen == ("/ip4/0.0.0.0/tcp/60000", "/ip4/0.0.0.0/tcp/8000/ws")
    unit = (REPO_ROOT / "deploy" / "waku-legacy-bridge.service").read_text()
    assert "waku-legacy serve --config /etc/waku-legacy/bridge.toml" in unit


# -- issue 10: hostile configs -------------------------------------------------------------


def _token_config(tmp_path, token_file):
    path = tmp_path / "bridge.toml"
    path.write_text(f'[store]\nurl = "a.db"\n[admin]\ntoken_file = "{token_file}"\n')
    return path


@pytest.mark.timeout(30)
def test_token_file_must_be_a_small_regular_file(tmp_path):
    """token_file = "/dev/zero" used to read until memory ran out: every file the config
    names is a regular file of bounded size, or a ConfigError naming the key."""
    with pytest.raises(ConfigError, match=r"key 'token_file'.*not a regular file"):
        load_config(_token_config(tmp_path, "/dev/zero"))
    with pytest.raises(ConfigError, match=r"key 'token_file'.*is a directory"):
        load_config(_token_config(tmp_path, str(tmp_path)))
    big = tmp_path / "big.token"
    big.write_text("t" * 5000)
    with pytest.raises(ConfigError, match=r"key 'token_file'.*larger than the 4096-byte limit"):
        load_config(_token_config(tmp_path, str(big)))
    fifo = tmp_path / "token.fifo"
    os.mkfifo(fifo)  # opening must not wait for a writer
    with pytest.raises(ConfigError, match=r"key 'token_file'.*not a regular file"):
        load_config(_token_config(tmp_path, str(fifo)))
    ok = tmp_path / "ok.token"
    ok.write_text("a-long-enough-admin-token\n")
    assert load_config(_token_config(tmp_path, str(ok))).admin.token == "a-long-enough-admin-token"


@pytest.mark.timeout(30)
def test_community_key_file_must_be_a_small_regular_file(tmp_path, capsys):
    """The community key_file (and any node key file) goes through the same reader."""
    from waku_legacy.cli import main

    (tmp_path / "admin.token").write_text("a-long-enough-admin-token")
    for key_file, message in (("/dev/zero", "not a regular file"), (str(tmp_path), "directory")):
        text = FULL.replace('key_file = "community.key"', f'key_file = "{key_file}"')
        path = _checkable(tmp_path, text)
        assert main(["serve", "--config", str(path), "--check"]) == 2
        err = capsys.readouterr().err
        assert "key_file" in err and message in err and err.count("\n") == 1, err


def test_deeply_nested_toml_is_a_config_error(tmp_path, capsys):
    """`serve --config --check` with TOML nested past the parser's recursion, or deeper than
    any config, exits 2 with one line naming the file."""
    from waku_legacy.cli import main

    path = tmp_path / "deep.toml"
    for text in (
        "a = " + "[" * 100_000 + "]" * 100_000,
        "x = " + "{a = " * 5000 + "1" + "}" * 5000,
        '[store]\nurl = "a.db"\n[server]\nlisten = ' + "[" * 100 + "]" * 100,
    ):
        path.write_text(text + "\n")
        with pytest.raises(ConfigError, match="nested"):
            load_config(path)
        assert main(["serve", "--config", str(path), "--check"]) == 2
        err = capsys.readouterr().err
        assert err.startswith("waku-legacy serve: error: ") and "nested" in err, err
        assert err.count("\n") == 1


def test_config_file_must_be_a_small_regular_file(tmp_path):
    with pytest.raises(ConfigError, match="is a directory"):
        load_config(tmp_path)
    with pytest.raises(ConfigError, match="not a regular file"):
        load_config("/dev/zero")
    big = tmp_path / "big.toml"
    big.write_text('[store]\nurl = "a.db"\n# ' + "x" * (2 * 1024 * 1024) + "\n")
    with pytest.raises(ConfigError, match="larger than the 1048576-byte limit"):
        load_config(big)


def test_missing_community_key_names_the_community_key_file(tmp_path, capsys):
    """Issue 24: a missing community key_file read "node key file: …"; it names the
    community key file (serve --check and the migration share the reader)."""
    from waku_legacy.cli import main

    (tmp_path / "admin.token").write_text("a-long-enough-admin-token")
    path = _checkable(tmp_path)
    assert main(["serve", "--config", str(path), "--check"]) == 2
    err = capsys.readouterr().err
    assert "community key file" in err and "node key file" not in err, err


def _check(path, capsys):
    from waku_legacy.cli import main

    code = main(["serve", "--config", str(path), "--check"])
    out, err = capsys.readouterr()
    return code, out, err


def test_serve_check_refuses_what_serve_refuses(tmp_path, capsys):
    """Issues 21 and 24: `serve --check` passed a store file that does not exist (`serve`
    then created an empty one and served nothing) or is not SQLite, a v1 node key of the
    wrong length, and a listen port another process holds; each is one line, exit 2."""
    import socket

    (tmp_path / "admin.token").write_text("a-long-enough-admin-token")
    (tmp_path / "community.key").write_text(KEY.secret.hex())
    path = _checkable(tmp_path)
    assert _check(path, capsys)[0] == 0
    store = tmp_path / "store.sqlite3"
    store.unlink()
    code, _, err = _check(path, capsys)
    assert code == 2 and "does not exist" in err and "create = true" in err, err
    assert not store.exists()  # nothing created
    path.write_text(path.read_text().replace('url = "store.sqlite3"',
                                             'url = "store.sqlite3"\ncreate = true'))
    assert _check(path, capsys)[0] == 0 and not store.exists()
    store.write_text("not a database at all, but long enough")
    code, _, err = _check(path, capsys)
    assert code == 2 and "not a SQLite database" in err, err
    store.unlink()
    path = _checkable(tmp_path)
    (tmp_path / "keys").mkdir()
    (tmp_path / "keys" / "nodekey").write_text("ab" * 20)
    code, _, err = _check(path, capsys)
    assert code == 2 and "v1 node key file" in err and "64 hex digits" in err, err
    (tmp_path / "keys" / "nodekey").write_text("11" * 32)
    assert _check(path, capsys)[0] == 0
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        port = held.getsockname()[1]
        path.write_text(path.read_text().replace('listen = "127.0.0.1:0"',
                                                 f'listen = "127.0.0.1:{port}"', 1))
        code, _, err = _check(path, capsys)
    assert code == 2 and f"[server] listen 127.0.0.1:{port}" in err and "in use" in err, err


def test_serve_check_reports_whether_each_link_reaches_members(tmp_path, capsys):
    """Issue 24: one name for one meaning (``link_reach``: reachesMembers and why), where
    `can_publish: true` stood beside `"relay": null`."""
    import json

    (tmp_path / "admin.token").write_text("a-long-enough-admin-token")
    (tmp_path / "community.key").write_text(KEY.secret.hex())
    text = FULL
    start = text.index("[relay]")
    text = text[:start] + text[text.index("[history]"):]
    path = _checkable(tmp_path, text.replace('key_file = "community.key"\n', ""))
    code, out, err = _check(path, capsys)
    assert code == 0, err
    reach = json.loads(out)["communities"][0]["link_reach"]
    assert reach["reachesMembers"] is False
    assert any("no community key" in why for why in reach["why"])
    assert any("no [relay]" in why for why in reach["why"])


def test_unknown_key_is_named_before_a_missing_one(tmp_path):
    """Issue 24: a typo `archive_dirr` was reported as "key 'archive_dir' is required"; the
    shared config reader names the unknown key (the migration's config too)."""
    text = FULL.replace('archive_dir = "archives"', 'archive_dirr = "archives"')
    assert "archive_dirr" in text
    path = tmp_path / "bridge.toml"
    path.write_text(text)
    typo = r"unknown key 'archive_dirr' \(did you mean 'archive_dir'"
    with pytest.raises(ConfigError, match=typo):
        load_config(path)


def test_the_admin_token_rule_is_the_tables_own(tmp_path) -> None:
    """[admin]'s least token length is AdminConfig's rule (built in code or read from a file),
    and its message never shows the token."""
    from waku_legacy.bridge.config import AdminConfig
    from waku_legacy.config.keys import KeyConflict

    with pytest.raises(KeyConflict, match="at least 16 characters"):
        AdminConfig(token="0123456789abcde")
    assert AdminConfig(token="0123456789abcdef").token == "0123456789abcdef"
    short = tmp_path / "admin.token"
    short.write_text("s3cret-but-short\n"[:10])
    path = tmp_path / "bridge.toml"
    path.write_text(f'[store]\nurl = "a.db"\n[admin]\ntoken_file = "{short}"\n')
    with pytest.raises(ConfigError) as raised:
        load_config(path)
    message = str(raised.value)
    assert "key 'token_file'" in message and "at least 16" in message
    assert "s3cret" not in message
