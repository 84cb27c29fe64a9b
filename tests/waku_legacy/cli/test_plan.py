"""``waku-legacy plan`` (issue 24) over real files: generated LevelDB mailservers and an
envelope dump -> plan -> the written migrate.toml, read by the migration's own reader and
migrated on Spark; bridge.toml read by the bridge's reader; the shard from the description,
from a v2 store node's REST API on loopback, or status-go's default with a warning; bad
community ids and unknown communities as one line, exit 2."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import base58
import pytest

from tests.waku_legacy.store.test_rest_client import NwakuRestServer
from waku_legacy.cli import main
from waku_legacy.crypto.payload import encode_payload
from waku_legacy.crypto.secp256k1 import generate_private_key
from waku_legacy.identity.message_hash import message_hash
from waku_legacy.identity.topics import chat_topic, content_topic_of_chat, symmetric_key_for_chat
from waku_legacy.mailserver_compat.storage.dump import DumpWriter
from waku_legacy.mailserver_compat.wire.pow import seal
from waku_legacy.migrate.sample import (
    SampleCommunity,
    SampleSpec,
    description_message,
    generate_descriptions,
    generate_envelopes,
    make_communities,
    write_leveldb_mailservers,
)
from waku_legacy.proto import waku_message_pb2
from waku_legacy.store import StoredMessage

SPEC = SampleSpec(communities=2, channels=2, members=3, days=10, messages_per_channel_day=1.0)
LATER = SPEC.start + 30 * 86_400  # a description newer than the sample's own (Unix seconds)


@pytest.fixture(scope="module")
def sample(tmp_path_factory) -> tuple[list[SampleCommunity], list[str], Path]:
    """Two communities in two LevelDB mailservers (descriptions without a shard, as
    deployed clients write them) and a dump holding a newer description of the first one
    that names shard 128."""
    out = tmp_path_factory.mktemp("plan-sample")
    communities = make_communities(SPEC)
    mailservers = [out / "ms-1", out / "ms-2"]
    write_leveldb_mailservers(generate_envelopes(SPEC, communities), mailservers, seed=3)
    write_leveldb_mailservers(
        generate_descriptions(SPEC, communities), mailservers, keep_probability=1.0
    )
    first = communities[0]
    chat = first.id.chat_id
    data = encode_payload(
        description_message(first, first.channels, LATER * 1000, shard=128),
        sign_with=generate_private_key(), symmetric_key=symmetric_key_for_chat(chat),
    )  # fmt: skip
    with DumpWriter(out / "newer.dump") as writer:
        writer.append(seal(LATER + 10, 10, chat_topic(chat), data, 0.0).encode())
    sources = [f"leveldb:{m}" for m in mailservers] + [f"dump:{out / 'newer.dump'}"]
    return communities, sources, out


def _plan(sources: list[str], communities: list[str], out: Path, *extra: str) -> list[str]:
    args = ["plan", "--out", str(out), "--quiet", *extra]
    for source in sources:
        args += ["--source", source]
    for community in communities:
        args += ["--community", community]
    return args


@pytest.mark.spark
def test_plan_writes_configs_that_migrate_and_serve_accept(spark, sample, tmp_path, capsys):
    from waku_legacy.bridge.config import load_config as load_bridge_config
    from waku_legacy.migrate.config import load_config

    communities, sources, _ = sample
    out = tmp_path / "plan"
    ids = [str(c.id) for c in communities]
    assert main(_plan(sources, ids, out)) == 0
    printed = capsys.readouterr().out
    config = load_config(out / "migrate.toml")
    got = {str(c.id): (c.channels, c.shard) for c in config.communities}
    # the first from its newer description's relay_shard_index, the second unsharded: 32
    assert got == {ids[0]: (communities[0].channels, 128), ids[1]: (communities[1].channels, 32)}
    assert [s.kind.value for s in config.sources] == ["mailserver-leveldb"] * 2 + ["envelope-dump"]
    bridge = load_bridge_config(out / "bridge.toml")
    assert {str(c.id): c.shard for c in bridge.communities} == {ids[0]: 128, ids[1]: 32}
    assert bridge.libp2p is not None and bridge.relay is None
    # what members lack, and the next command with the CLI's absolute path
    assert "no [relay]" in printed and "no community key" in printed
    assert f"warning: {ids[1]}: no shard in its description" in printed
    next_line = printed.rsplit("next:\n", 1)[1].strip()
    assert next_line.endswith(f"migrate --config {out / 'migrate.toml'}")
    assert Path(next_line.split()[0]).is_absolute()

    assert main(["migrate", "--config", str(out / "migrate.toml"), "--quiet", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert sorted(c["community"] for c in report["communities"]) == sorted(ids)
    assert all(c["messages"] > 0 for c in report["communities"])
    with sqlite3.connect(out / "store.sqlite3") as db:
        rows = db.execute("SELECT DISTINCT pubsubTopic FROM Message").fetchall()
    topics = {bytes(t).decode() if not isinstance(t, str) else t for (t,) in rows}
    assert {"/waku/2/rs/16/128", "/waku/2/rs/16/32"} <= topics


def test_plan_json_names_where_each_shard_came_from(sample, tmp_path, capsys):
    communities, sources, _ = sample
    ids = [str(c.id) for c in communities]
    assert main(_plan(sources, ids, tmp_path / "plan", "--json")) == 0
    captured = capsys.readouterr()
    report = json.loads(captured.out)
    shards = {c["community"]: (c["shard"], c["shard_from"]) for c in report["communities"]}
    assert shards[ids[0]] == (128, "description")
    assert shards[ids[1]][0] == 32 and "status-go" in shards[ids[1]][1]
    assert [w.split(":")[0] for w in report["warnings"]] == [ids[1]]
    assert f"plan: warning: {ids[1]}" in captured.err  # JSON on stdout: the warning on stderr
    assert set(report["missing"]["communities"]) == set(ids)


def _stored_description(community: SampleCommunity, pubsub: str, clock: int) -> StoredMessage:
    """The community's description as a v2 store node keeps it: on ``pubsub``."""
    chat = community.id.chat_id
    payload = encode_payload(
        description_message(community, community.channels, clock),
        sign_with=generate_private_key(), symmetric_key=symmetric_key_for_chat(chat),
    )  # fmt: skip
    message = waku_message_pb2.WakuMessage(
        payload=payload, content_topic=content_topic_of_chat(chat), version=1,
        timestamp=clock * 1_000_000,
    )  # fmt: skip
    return StoredMessage(
        message_hash(pubsub, message), pubsub, message.content_topic, payload, 1,
        message.timestamp, None,
    )  # fmt: skip


@pytest.mark.network
def test_shard_from_the_store_nodes_newest_description(sample, tmp_path, capsys):
    communities, sources, _ = sample
    second = communities[1]
    stored = [
        _stored_description(second, "/waku/2/rs/16/64", LATER * 1000),
        _stored_description(second, "/waku/2/rs/16/129", (LATER + 60) * 1000),  # newest
    ]
    with NwakuRestServer(stored) as node:
        args = _plan(sources[:2], [str(second.id)], tmp_path / "plan", "--json")
        assert main([*args, "--store-node", node.url]) == 0
        asked = list(node.requests)
    report = json.loads(capsys.readouterr().out)
    (only,) = report["communities"]
    assert (only["shard"], only["shard_from"]) == (129, "store-node")
    assert report["warnings"] == []
    assert any("contentTopics=" in q for q in asked)


def test_share_url_and_serialized_key_name_the_community(sample):
    from waku_legacy.cli.plan import parse_community

    # status-go's own vector (protocol/messenger_share_urls_test.go, TestParseCommunityURLWithData)
    url = (
        "https://status.app/c/iyKACkQKB0Rvb2RsZXMSJ0NvbG9yaW5nIHRoZSB3b3JsZCB3aXRoIGpveSDigKIg4bSX"
        "IOKAohiYohsiByMxMzFEMkYqAwEhMwM=#zQ3shYSHp7GoiXaauJMnDcjwU2yNjdzpXLosAWapPS4CFxc11"
    )
    expected = "0x02a3d2fdb9ac335917bf9d46b38d7496c00bbfadbaf832e8aa61d13ac2b4452084"
    assert str(parse_community(url)) == expected
    short = "https://status.app/c#zQ3shYSHp7GoiXaauJMnDcjwU2yNjdzpXLosAWapPS4CFxc11"
    assert str(parse_community(short)) == expected
    community = sample[0][0]
    key = "z" + base58.b58encode(b"\xe7\x01" + community.id.public_key).decode()
    assert parse_community(key) == community.id


@pytest.mark.parametrize(
    ("value", "says"),
    [
        ("0x1234", "--community '0x1234'"),
        ("https://status.app/c/abc", "without the key after '#'"),
        ("zQ3shYSHp7GoiXaauJMnDcjwU2yNjdzpXLosAWapPS4CFxc1", "--community 'zQ3sh"),
        ("https://status.app/cc#zQ3shYSHp7GoiXaauJMnDcjwU2yNjdzpXLosAWapPS4CFxc11", "--community"),
    ],
)
def test_a_bad_community_id_is_one_line_exit_2(sample, tmp_path, capsys, value, says):
    _, sources, _ = sample
    assert main(_plan(sources[:1], [value], tmp_path / "plan")) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and says in err and "0x + 66 hex" in err
    assert not (tmp_path / "plan" / "migrate.toml").exists()


def test_a_community_not_in_the_sources_is_one_line_exit_2(sample, tmp_path, capsys):
    _, sources, _ = sample
    stranger = SampleCommunity("Stranger", b"\x11" * 32, ("x",), 1)
    assert main(_plan(sources[:2], [str(stranger.id)], tmp_path / "plan")) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert f"no CommunityDescription signed by {stranger.id}" in err and "--source" in err
    assert not (tmp_path / "plan" / "migrate.toml").exists()
