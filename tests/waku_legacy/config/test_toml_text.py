"""The TOML text ``demo`` writes (``waku_legacy/config/toml_text.py``) and its ``bridge.toml``
(``migrate/demo_serve.py``), read back by the bridge's own config reader: valid, relative to
its folder, and kept across reruns (token, node key, free ports)."""

from __future__ import annotations

import math
import os
import shlex
import shutil
import socket
import stat
import tomllib
from pathlib import Path

import pytest

from waku_legacy.bridge.config import load_config
from waku_legacy.config.toml_text import toml_document, toml_string, toml_value
from waku_legacy.crypto.key_file import load_node_key, write_node_key
from waku_legacy.crypto.secp256k1 import private_key_from_bytes
from waku_legacy.errors import ConfigError
from waku_legacy.identity.topics import CommunityId
from waku_legacy.mailserver_compat.rlpx.enode import Enode
from waku_legacy.migrate.demo_serve import (
    example_channel,
    serve_instructions,
    serve_lines,
    write_bridge_config,
)

KEY = private_key_from_bytes(bytes.fromhex("3c" * 32))
COMMUNITY = str(CommunityId(KEY.public_key.format(compressed=True)))
CHANNEL = "9531985d-5d9d-49f8-9818-e811892f902b"

HOSTILE = [
    "",
    'quote " backslash \\ end',
    "tab\tnewline\ncr\rform\fbackspace\b",
    "nul \x00 unit sep \x1f del \x7f",
    "ünïcödé 漢字 emoji 😀 (astral)",
    "trailing backslash \\",
    "'''\"\"\" toml quotes",
    "\u2028 line separator \u0085 next line",
]


@pytest.mark.parametrize("text", HOSTILE)
def test_strings_read_back_unchanged(text: str) -> None:
    assert tomllib.loads(f"k = {toml_string(text)}")["k"] == text


def test_every_code_point_below_256_reads_back() -> None:
    text = "".join(chr(c) for c in range(256))
    assert tomllib.loads(f"k = {toml_string(text)}")["k"] == text


def test_a_lone_surrogate_is_refused() -> None:
    with pytest.raises(ConfigError, match="surrogate"):
        toml_string("bad \udcff name")  # os.fsdecode of a non-UTF-8 file name


def test_values_and_keys_read_back() -> None:
    data = {
        "table": {
            "flag": True, "off": False, "n": -7, "big": 2**62, "x": 0.002, "inf": math.inf,
            "list": ["a", 1, [True]], "inline": {"spark.conf": "512m", "plain": 1},
            "needs quotes": "yes", "ünï": "key",
        },
        "array": [{"id": "one"}, {"id": "two\n"}],
    }  # fmt: skip
    parsed = tomllib.loads(toml_document(data, header="a header\nover two lines"))
    assert parsed == data
    assert math.isnan(tomllib.loads(f"k = {toml_value(math.nan)}")["k"])
    with pytest.raises(TypeError):
        toml_value(b"bytes")
    with pytest.raises(TypeError):
        toml_document({"scalar": 1})


def _community_tables(out: Path) -> list[dict[str, object]]:
    (out / "keys").mkdir(parents=True, exist_ok=True)
    write_node_key(out / "keys" / "community.key", KEY)
    return [{"id": COMMUNITY, "name": 'The "quoted" \\ community\n', "channels": [CHANNEL],
             "shard": 128, "key_file": "keys/community.key"}]  # fmt: skip


def _listen_port(config_path: Path, table: str, key: str) -> int:
    return int(tomllib.loads(config_path.read_text())[table][key].rpartition(":")[2])


def test_bridge_config_loads_with_the_bridges_reader(tmp_path: Path) -> None:
    out = tmp_path / "demo"
    bridge = write_bridge_config(out, _community_tables(out))
    config = load_config(bridge.config_path)
    ports = bridge.ports
    assert len({ports.rest, ports.v1, ports.seed}) == 3
    assert (config.server.host, config.server.port) == ("127.0.0.1", ports.rest)
    assert config.v1 is not None and (config.v1.host, config.v1.port) == ("127.0.0.1", ports.v1)
    assert config.archive is not None and config.archive.seed_listen == f"127.0.0.1:{ports.seed}"
    assert not config.archive.trackers and not config.archive.dht
    assert config.store.url == f"sqlite:///{str(out / 'store.sqlite3').lstrip('/')}"
    assert config.archive.archive_dir == str(out / "archives")
    assert config.archive.torrent_dir == str(out / "torrents")
    (community,) = config.communities
    assert str(community.id) == COMMUNITY and community.channels == (CHANNEL,)
    assert community.name == 'The "quoted" \\ community\n' and community.shard == 128
    assert community.key_file == str(out / "keys" / "community.key")
    # the admin token: random, owner-only, what the config reads
    token = (out / "admin.token").read_text().strip()
    assert config.admin.token == token and len(token) >= 32
    assert stat.S_IMODE(os.stat(out / "admin.token").st_mode) == 0o600
    # the enode is the node key's, on the v1 port
    node_key = load_node_key(config.v1.node_key_file)
    enode = Enode.parse(bridge.enode)
    assert enode.public_key == node_key.public_key.format(compressed=False)[1:]
    assert (enode.host, enode.port) == ("127.0.0.1", ports.v1)


def test_the_folder_can_be_moved(tmp_path: Path) -> None:
    out = tmp_path / "demo"
    write_bridge_config(out, _community_tables(out))
    moved = tmp_path / "elsewhere" / "with space"
    moved.parent.mkdir()
    shutil.move(out, moved)
    config = load_config(moved / "bridge.toml")
    assert config.archive is not None and config.archive.archive_dir == str(moved / "archives")
    assert config.communities[0].key_file == str(moved / "keys" / "community.key")


def test_a_rerun_keeps_token_key_and_free_ports(tmp_path: Path) -> None:
    out = tmp_path / "demo"
    first = write_bridge_config(out, _community_tables(out))
    token = (out / "admin.token").read_text()
    second = write_bridge_config(out, _community_tables(out))
    assert second == first
    assert (out / "admin.token").read_text() == token


def test_a_rerun_replaces_a_port_that_was_taken(tmp_path: Path) -> None:
    out = tmp_path / "demo"
    first = write_bridge_config(out, _community_tables(out))
    with socket.socket() as squatter:
        squatter.bind(("127.0.0.1", first.ports.rest))
        squatter.listen()
        second = write_bridge_config(out, _community_tables(out))
    assert second.ports.rest != first.ports.rest
    assert (second.ports.v1, second.ports.seed) == (first.ports.v1, first.ports.seed)
    assert _listen_port(second.config_path, "server", "listen") == second.ports.rest
    assert second.enode == first.enode.replace(f":{first.ports.v1}", f":{second.ports.v1}")


def test_an_unreadable_old_config_or_short_token_is_replaced(tmp_path: Path) -> None:
    out = tmp_path / "demo"
    tables = _community_tables(out)
    (out / "bridge.toml").write_text("not [toml")
    (out / "admin.token").write_text("short\n")
    bridge = write_bridge_config(out, tables)
    assert load_config(bridge.config_path).admin.token != "short"


def test_serve_instructions_name_the_config_ports_and_queries(tmp_path: Path) -> None:
    out = tmp_path / "demo dir"
    bridge = write_bridge_config(out, _community_tables(out))
    channel = example_channel(COMMUNITY, CHANNEL, 128, 1_609_459_200, 1_611_619_200)
    serve = serve_instructions(bridge, channel, {COMMUNITY: "magnet:?xt=urn:btih:00"})
    from waku_legacy.migrate.demo_serve import cli_command

    # the virtualenv's entry point by its absolute path: it runs from any shell (issue 24)
    assert Path(cli_command()[0]).is_absolute()
    assert serve["command"] == f"{shlex.join(cli_command())} serve --config '{out}/bridge.toml'"
    assert f"store query --peer {bridge.p2p_address} " in serve["libp2p_store_query"]
    assert bridge.p2p_address.startswith(f"/ip4/127.0.0.1/tcp/{bridge.ports.p2p}/p2p/16U")
    assert f"http://127.0.0.1:{bridge.ports.rest}/store/v3/messages?" in serve["store_query"]
    assert "includeData=true" in serve["store_query"]
    assert "contentTopics=%2Fwaku%2F1%2F0x" in serve["store_query"]
    assert f"--enode {bridge.enode} --topics {channel.v1_topic.hex()}" in serve["v1_pull"]
    assert "--from 1609459200 --to 1611619200" in serve["v1_pull"]
    text = "\n".join(serve_lines(serve))
    assert serve["command"] in text and serve["enode"] in text
    assert "magnet:?xt=urn:btih:00" in text
