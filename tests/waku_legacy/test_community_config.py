"""Issue 12: where archive links go (``archive_link_chats``) and who signs their payload
(``operator_key_file``), from the config to what the bridge publishes."""

from __future__ import annotations

import base64
import uuid
from pathlib import Path

import pytest

from tests.bridge.support import FakeNwaku, bridge_config
from tests.helpers import start_until_archive_published, stored_channel_message, wait_until
from tests.waku_legacy.archive.test_magnet import chat_content_topic, independent_open
from waku_legacy.bridge.clock import ManualClock
from waku_legacy.bridge.service import BridgeService
from waku_legacy.community_config import load_operator_key, parse_community
from waku_legacy.crypto.secp256k1 import private_key_from_bytes
from waku_legacy.errors import ConfigError
from waku_legacy.identity.topics import CommunityId
from waku_legacy.proto import waku_message_pb2
from waku_legacy.store import open_store

KEY = private_key_from_bytes(bytes.fromhex("3d" * 32))
OPERATOR = private_key_from_bytes(bytes.fromhex("4e" * 32))
COMMUNITY = CommunityId(KEY.public_key.format(compressed=True))
CHANNEL = str(uuid.UUID(int=7))


def _community(**extra: object) -> dict:
    return {"id": str(COMMUNITY), "channels": [CHANNEL], "shard": 200, **extra}


def test_universal_chat_id_and_topic() -> None:
    assert COMMUNITY.universal_chat_id == str(COMMUNITY) + "-memberUpdate"
    assert COMMUNITY.universal_content_topic == chat_content_topic(str(COMMUNITY) + "-memberUpdate")


def test_config_archive_link_chats_and_operator_key(tmp_path: Path) -> None:
    assert parse_community(_community(), 1, tmp_path).archive_link_chats == "both"
    for value in ("both", "universal", "magnetlinks"):
        parsed = parse_community(_community(archive_link_chats=value), 1, tmp_path)
        assert parsed.archive_link_chats == value
    with pytest.raises(ConfigError) as caught:
        parse_community(_community(archive_link_chats="memberUpdate"), 1, tmp_path)
    message = str(caught.value)
    assert "archive_link_chats" in message and "'memberUpdate'" in message
    assert '"universal"' in message and '"magnetlinks"' in message

    parsed = parse_community(_community(operator_key_file="op.key"), 1, tmp_path)
    assert parsed.operator_key_file == str(tmp_path / "op.key")
    with pytest.raises(ConfigError, match="operator_key_file"):
        load_operator_key(parsed)  # not there
    (tmp_path / "op.key").write_text("zz" * 32)
    with pytest.raises(ConfigError, match=r"operator_key_file.*non-hex"):
        load_operator_key(parsed)
    (tmp_path / "op.key").write_text(OPERATOR.secret.hex())
    assert load_operator_key(parsed).secret == OPERATOR.secret
    assert load_operator_key(parse_community(_community(), 1, tmp_path)) is None


async def _published(
    tmp_path: Path, *, then: float = 0.0, **community: object
) -> list[tuple[str, dict]]:
    """Start the bridge on a store with a few channel messages; what its first run sends
    (and, with ``then``, what it sends once its clock advanced that much)."""
    tmp_path.mkdir(parents=True, exist_ok=True)
    (tmp_path / "c.key").write_text(KEY.secret.hex())
    (tmp_path / "op.key").write_text(OPERATOR.secret.hex())
    url = f"sqlite:///{tmp_path}/store.sqlite3"
    pubsub = "/waku/2/rs/16/200"
    t0 = 1_750_000_000
    rows = [
        stored_channel_message(COMMUNITY, CHANNEL, pubsub, expiry=t0 - 3600 + i, text=b"m%d" % i)
        for i in range(3)
    ]
    with open_store(url) as store:
        store.insert_messages(rows)
    nwaku = await FakeNwaku().start()
    config = bridge_config(
        tmp_path, url, relay={"url": nwaku.url},
        archive={"archive_dir": str(tmp_path / "a"), "torrent_dir": str(tmp_path / "t"),
                 "seed_listen": "127.0.0.1:0", "trackers": False, "republish_interval": "1d"},
        community=[_community(key_file="c.key", **community)],
    )  # fmt: skip
    try:
        clock = ManualClock(t0)
        service = BridgeService(config, clock=clock)
        await start_until_archive_published(service, COMMUNITY)
        if then:
            first = len(nwaku.published)
            await wait_until(lambda: clock.sleepers, what="the scheduler asleep")
            clock.advance(then)
            await wait_until(lambda: len(nwaku.published) > first, what="the later copy")
        await service.stop()
    finally:
        await nwaku.stop()
    return list(nwaku.published)


def _raw(body: dict) -> bytes:
    return waku_message_pb2.WakuMessage(
        payload=base64.b64decode(body["payload"]), content_topic=body["contentTopic"],
        version=body["version"], timestamp=body["timestamp"],
    ).SerializeToString()  # fmt: skip


@pytest.mark.network
@pytest.mark.torrent
async def test_bridge_publishes_on_the_universal_chat_signed_by_the_operator(tmp_path):
    published = await _published(
        tmp_path, archive_link_chats="universal", operator_key_file="op.key"
    )
    universal = COMMUNITY.universal_chat_id
    assert [b["contentTopic"] for _, b in published] == [chat_content_topic(universal)]
    pubsub, body = published[0]
    assert pubsub == "/waku/2/rs/16/200"
    assert body["meta"] == "" and body["ephemeral"] is False
    opened = independent_open(_raw(body), universal)
    assert opened["type"] == 43 and opened["application_signer"] == COMMUNITY.public_key
    assert opened["payload_signer"] == OPERATOR.public_key.format(compressed=True)
    assert opened["archive_link"].startswith("magnet:?xt=urn:btih:")


@pytest.mark.network
@pytest.mark.torrent
async def test_bridge_publishes_on_both_chats_by_default(tmp_path):
    # issue 22: the -memberUpdate copy first; the -magnetlinks copy second_link_delay (1 h)
    # later, not at once (a 2024 client hearing both restarts its download)
    first = await _published(tmp_path / "now")
    assert [b["contentTopic"] for _, b in first] == [
        chat_content_topic(COMMUNITY.universal_chat_id)
    ]
    published = await _published(tmp_path / "later", then=3600.0)
    topics = [b["contentTopic"] for _, b in published]
    assert topics == [
        chat_content_topic(COMMUNITY.universal_chat_id),
        chat_content_topic(COMMUNITY.magnetlinks_chat_id),
    ]
    clocks = set()
    for (_, body), chat_id in zip(
        published, (COMMUNITY.universal_chat_id, COMMUNITY.magnetlinks_chat_id), strict=True
    ):
        opened = independent_open(_raw(body), chat_id)
        # no operator key: the community key signs the payload too
        assert opened["payload_signer"] == opened["application_signer"] == COMMUNITY.public_key
        clocks.add(opened["clock"])
    assert len(clocks) == 1  # one clock for both copies


def test_identity_topics_lists_the_universal_chat(capsys: pytest.CaptureFixture[str]) -> None:
    import json

    from waku_legacy.cli import main

    assert main(["topics", "--community", str(COMMUNITY), "--channel", CHANNEL]) == 0
    out = json.loads(capsys.readouterr().out)
    universal = str(COMMUNITY) + "-memberUpdate"
    assert out["universal"]["chat_id"] == universal
    assert out["universal"]["content_topic"] == chat_content_topic(universal)
