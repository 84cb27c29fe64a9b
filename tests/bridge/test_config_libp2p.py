"""``[libp2p]`` in the bridge config: defaults, shards from the communities, and values
refused with the key named."""

from __future__ import annotations

import pytest

from tests.bridge.support import bridge_config
from waku_legacy.errors import ConfigError


def test_absent_or_disabled_means_no_listener(tmp_path) -> None:
    assert bridge_config(tmp_path, "s.db").libp2p is None
    assert bridge_config(tmp_path, "s.db", libp2p={"enabled": False}).libp2p is None


def test_defaults(tmp_path) -> None:
    config = bridge_config(tmp_path, "s.db", libp2p={}).libp2p
    assert config is not None
    assert config.listen == ("/ip4/0.0.0.0/tcp/60000", "/ip4/0.0.0.0/tcp/8000/ws")
    assert config.key_file == str(tmp_path / "libp2p.key")
    assert (config.cluster_id, config.shards) == (16, (32,))  # the relay default topic's shard
    assert config.max_request_bytes == 65536 and config.read_timeout == 30.0
    assert config.server == "native"  # the project's own server side (issue 26)
    relay = {"url": "http://127.0.0.1:1", "default_pubsub_topic": "/waku/2/rs/16/64"}
    config = bridge_config(tmp_path, "s.db", libp2p={}, relay=relay).libp2p
    assert config is not None and config.shards == (64,)


def test_explicit_values(tmp_path) -> None:
    config = bridge_config(
        tmp_path, "s.db",
        libp2p={"listen": ["/ip4/127.0.0.1/tcp/0/ws"], "shards": [128, 32, 128],
                "cluster_id": 1, "read_timeout": "45s", "requests_per_second": 0},
    ).libp2p  # fmt: skip
    assert config is not None
    assert config.shards == (32, 128) and config.cluster_id == 1
    assert config.read_timeout == 45.0 and config.requests_per_second == 0.0
    assert config.announce == ()
    config = bridge_config(tmp_path, "s.db", libp2p={"server": "native"}).libp2p
    assert config is not None and config.server == "native"
    wss = "/dns4/bridge.example.org/tcp/443/wss"
    config = bridge_config(tmp_path, "s.db", libp2p={"announce": [wss]}).libp2p
    assert config is not None and config.announce == (wss,)


@pytest.mark.parametrize(
    ("table", "key"),
    [
        ({"listen": ["127.0.0.1:60000"]}, "listen"),
        ({"listen": ["/ip4/0.0.0.0/udp/60000/quic-v1"]}, "listen"),
        ({"shards": [1024]}, "shards"),
        ({"shards": "128"}, "shards"),
        ({"cluster_id": -1}, "cluster_id"),
        ({"max_request_bytes": 10}, "max_request_bytes"),
        ({"read_timeout": "soon"}, "read_timeout"),
        ({"enabled": "yes"}, "enabled"),
        ({"listne": []}, "listne"),
        ({"announce": ["bridge.example.org:8000"]}, "announce"),
        ({"address_share": 1.5}, "address_share"),
        ({"address_share": 0}, "address_share"),
        ({"max_handshakes": 0}, "max_handshakes"),
        ({"max_buffered_bytes": 1000}, "max_buffered_bytes"),
        ({"server": "go-libp2p"}, "server"),
    ],
)
def test_bad_values_name_the_key(tmp_path, table, key) -> None:
    with pytest.raises(ConfigError, match=key):
        bridge_config(tmp_path, "s.db", libp2p=table)


def test_the_py_libp2p_server_is_refused_with_what_changed(tmp_path) -> None:
    """Issue 36: py-libp2p left the runtime; a config that still asks for it is told so."""
    with pytest.raises(ConfigError) as caught:
        bridge_config(tmp_path, "s.db", libp2p={"server": "py-libp2p"})
    message = str(caught.value)
    assert "key 'server' = 'py-libp2p' was removed on 2026-11-29" in message
    assert "its own stack" in message and "remove the key" in message


def test_serve_check_shows_libp2p_and_refuses_a_bad_key(tmp_path, capsys) -> None:
    import json

    from waku_legacy.cli import main
    from waku_legacy.p2p.keys import load_key_pair, peer_id_of

    path = tmp_path / "bridge.toml"
    path.write_text(
        '[server]\nlisten = "127.0.0.1:0"\n[store]\nurl = "s.db"\ncreate = true\n'
        '[libp2p]\nlisten = ["/ip4/127.0.0.1/tcp/0"]\n'
    )
    assert main(["serve", "--config", str(path), "--check"]) == 0
    shown = json.loads(capsys.readouterr().out)["libp2p"]
    assert shown["peer_id"] is None and shown["listen"] == ["/ip4/127.0.0.1/tcp/0"]
    pair, _ = load_key_pair(tmp_path / "libp2p.key")
    assert main(["serve", "--config", str(path), "--check"]) == 0
    assert json.loads(capsys.readouterr().out)["libp2p"]["peer_id"] == peer_id_of(pair)
    (tmp_path / "libp2p.key").write_text("not a key\n")
    assert main(["serve", "--config", str(path), "--check"]) == 2
    assert "libp2p.key" in capsys.readouterr().err


def test_hostile_peer_limits_reach_the_listener(tmp_path) -> None:
    from waku_legacy.bridge.p2p import listener_limits

    config = bridge_config(tmp_path, "s.db", libp2p={}).libp2p
    assert config is not None
    defaults = listener_limits(config)
    assert (defaults.max_handshakes, defaults.max_handshakes_per_address) == (128, 16)
    assert defaults.address_share == 0.5 and defaults.host.max_buffered_bytes == 4 * 1024 * 1024
    table = {"max_handshakes": 10, "max_handshakes_per_address": 2, "address_share": 0.25,
             "max_buffered_bytes": 1 << 20, "max_connections_per_address": 5}  # fmt: skip
    config = bridge_config(tmp_path, "s.db", libp2p=table).libp2p
    assert config is not None
    limits = listener_limits(config)
    assert (limits.max_handshakes, limits.max_handshakes_per_address) == (10, 2)
    assert limits.address_share == 0.25 and limits.host.max_buffered_bytes == 1 << 20
    assert limits.max_connections_per_address == 5


async def test_default_shards_add_the_stores_shards(tmp_path) -> None:
    """Issue 24: a bridge with [libp2p] but no `shards` and no [[community]] announced only
    shard 32, so js-waku found no store peer for the store's community shards; without
    `shards` the store's shards are announced too (`shards` given: as given)."""
    from tests.bridge.support import make_rows
    from waku_legacy.bridge.service import BridgeService
    from waku_legacy.store import open_store

    path = tmp_path / "store.sqlite3"
    rows = make_rows(40)
    with open_store(f"sqlite:///{path}") as store:
        store.insert_messages(rows)
        assert sorted(store.pubsub_topics()) == sorted({r.pubsub_topic for r in rows})
    stored = {int(r.pubsub_topic.rsplit("/", 1)[1]) for r in rows}
    for libp2p, expected in (
        ({"listen": ["/ip4/127.0.0.1/tcp/0"]}, {32} | stored),
        ({"listen": ["/ip4/127.0.0.1/tcp/0"], "shards": [32]}, {32}),
    ):
        service = BridgeService(bridge_config(tmp_path, f"sqlite:///{path}", libp2p=libp2p))
        await service.start()
        try:
            assert set(service.info()["libp2p"]["shards"]) == expected
        finally:
            await service.stop()
