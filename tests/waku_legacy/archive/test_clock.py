"""Issue 12, clock rules: the archive-link clock is chosen above every clock the community
already used (its descriptions' field 9, earlier archive-link messages), as status-go's
members require (``clock >= last accepted``, raised by every description's field 9)."""

from __future__ import annotations

import asyncio
import base64
import uuid
from pathlib import Path

import pytest

from tests.bridge.support import FakeNwaku, bridge_config
from tests.helpers import start_until_archive_published, stored_channel_message
from tests.waku_legacy.archive.test_magnet import chat_content_topic, independent_open
from waku_legacy.archive.clock import (
    ClockEvidence,
    choose_link_clock,
    evidence_topics,
    read_evidence,
)
from waku_legacy.archive.errors import StaleMagnetMessage
from waku_legacy.archive.magnet import build_archive_link_message, verify_magnet_message
from waku_legacy.bridge.archiver import node_clock_evidence
from waku_legacy.bridge.clock import ManualClock
from waku_legacy.bridge.service import BridgeService
from waku_legacy.community_config import parse_community
from waku_legacy.crypto.payload import encode_payload
from waku_legacy.crypto.secp256k1 import private_key_from_bytes
from waku_legacy.identity.message_hash import message_hash
from waku_legacy.identity.topics import (
    CommunityId,
    content_topic_of_chat,
    symmetric_key_for_chat,
)
from waku_legacy.migrate.sample import SampleCommunity, description_message
from waku_legacy.proto import waku_message_pb2
from waku_legacy.store import StoredMessage, open_store

KEY = private_key_from_bytes(bytes.fromhex("5a" * 32))
OTHER = private_key_from_bytes(bytes.fromhex("6b" * 32))
NODE = private_key_from_bytes(bytes.fromhex("7c" * 32))  # the control node's identity key
COMMUNITY = CommunityId(KEY.public_key.format(compressed=True))
CHANNEL = str(uuid.UUID(int=11))
SAMPLE = SampleCommunity("clocks", KEY.secret, (CHANNEL,), 200)
PUBSUB = "/waku/2/rs/16/200"
T0 = 1_750_000_000
BASE = T0 * 1000  # the wall clock, ms
OLD_LINK = "magnet:?xt=urn:btih:" + "ab" * 20 + "&dn=old"
NEW_LINK = "magnet:?xt=urn:btih:" + "cd" * 20 + "&dn=new"


def description(field9: int, clock: int = 1, signer: SampleCommunity = SAMPLE):
    """A description as status-go publishes it on the community's own chat."""
    data = encode_payload(
        description_message(signer, signer.channels, clock, field9),
        sign_with=NODE,
        symmetric_key=symmetric_key_for_chat(COMMUNITY.chat_id),
    )
    return waku_message_pb2.WakuMessage(
        payload=data, content_topic=content_topic_of_chat(COMMUNITY.chat_id), version=1,
        timestamp=T0 * 10**9,
    )  # fmt: skip


def link(clock: int, uri: str = OLD_LINK, chat: str = "universal"):
    return build_archive_link_message(KEY, uri, clock, pubsub_topic=PUBSUB, chat=chat)


def stored(message) -> StoredMessage:
    return StoredMessage(
        message_hash(PUBSUB, message), PUBSUB, message.content_topic, message.payload,
        message.version, message.timestamp, bytes(message.meta) or None,
    )  # fmt: skip


def test_evidence_topics_are_the_community_chat_and_both_link_chats() -> None:
    assert evidence_topics(COMMUNITY) == (
        content_topic_of_chat(COMMUNITY.chat_id),
        COMMUNITY.universal_content_topic,
        content_topic_of_chat(COMMUNITY.magnetlinks_chat_id),
    )


def test_clock_is_above_the_description_field_9() -> None:
    field9 = BASE + 500_000  # the control node's last link was newer than our wall clock
    evidence = read_evidence([description(BASE - 5, clock=1), description(field9, clock=2)],
                             COMMUNITY)  # fmt: skip
    assert evidence.description_clock == field9 and evidence.descriptions == 2
    choice = choose_link_clock(evidence, base=BASE, base_reason="wall clock")
    assert choice.clock == field9 + 1
    assert choice.reason == f"description field 9 = {field9} (+1)"
    report = choice.to_json()
    assert report["description_field9"] == field9 and report["base"] == BASE
    # a member that took that description (stored clock = field 9) accepts the message
    message = build_archive_link_message(KEY, NEW_LINK, choice.clock, pubsub_topic=PUBSUB)
    assert verify_magnet_message(message, COMMUNITY, last_clock=field9).clock == field9 + 1
    # what the project did before (the wall clock) is dropped by that member
    stale = build_archive_link_message(KEY, NEW_LINK, BASE, pubsub_topic=PUBSUB)
    with pytest.raises(StaleMagnetMessage):
        verify_magnet_message(stale, COMMUNITY, last_clock=field9)


def test_a_previous_link_with_a_higher_clock_pushes_the_clock_above_it() -> None:
    field9 = BASE + 500_000
    previous = BASE + 900_000
    evidence = read_evidence(
        [description(field9), link(previous, chat="magnetlinks"), link(BASE - 1)], COMMUNITY
    )
    assert (evidence.links, evidence.link_clock, evidence.link) == (2, previous, OLD_LINK)
    choice = choose_link_clock(evidence, base=BASE, base_reason="wall clock",
                               archive_link=NEW_LINK)  # fmt: skip
    assert choice.clock == previous + 1
    assert choice.reason == f"previous link clock {previous} (+1)"
    assert choice.to_json()["previous_link_clock"] == previous


def test_the_wall_clock_wins_when_nothing_higher_is_found() -> None:
    evidence = read_evidence([description(BASE - 10), link(BASE - 20)], COMMUNITY)
    choice = choose_link_clock(evidence, base=BASE, base_reason="wall clock")
    assert (choice.clock, choice.reason) == (BASE, f"wall clock = {BASE}")
    empty = choose_link_clock(ClockEvidence(), base=BASE, base_reason="run clock (now)")
    assert (empty.clock, empty.reason) == (BASE, f"run clock (now) = {BASE}")


def test_the_same_link_found_again_keeps_its_clock_so_reruns_are_identical() -> None:
    earlier = BASE + 42  # an earlier run published NEW_LINK with this clock
    found = link(earlier, uri=NEW_LINK)
    evidence = read_evidence([found, description(BASE - 1)], COMMUNITY)
    choice = choose_link_clock(evidence, base=BASE, base_reason="run clock (now)",
                               archive_link=NEW_LINK)  # fmt: skip
    assert choice.clock == earlier
    assert choice.reason == f"same link already published with clock {earlier}"
    again = build_archive_link_message(KEY, NEW_LINK, choice.clock, pubsub_topic=PUBSUB)
    assert again.SerializeToString() == found.SerializeToString()  # byte-identical
    # deterministic: the order the messages were read in does not matter
    reversed_evidence = read_evidence([description(BASE - 1), found], COMMUNITY)
    assert choose_link_clock(reversed_evidence, base=BASE, base_reason="run clock (now)",
                             archive_link=NEW_LINK) == choice  # fmt: skip
    # a different link than the one found must go above it
    other = choose_link_clock(evidence, base=BASE, base_reason="x", archive_link=OLD_LINK)
    assert other.clock == earlier + 1


def test_messages_not_signed_by_the_community_do_not_count() -> None:
    intruder = SampleCommunity("other", OTHER.secret, (CHANNEL,), 200)
    forged = build_archive_link_message(OTHER, OLD_LINK, BASE * 2, pubsub_topic=PUBSUB)
    forged.content_topic = COMMUNITY.universal_content_topic  # wrong chat key: does not open
    evidence = read_evidence(
        [description(BASE * 3, signer=intruder), forged, description(BASE + 7)], COMMUNITY
    )
    assert evidence.description_clock == BASE + 7 and evidence.link_clock is None
    assert sum(evidence.rejected.values()) == 2
    assert choose_link_clock(evidence, base=BASE, base_reason="wall clock").clock == BASE + 8


def test_verifier_accepts_an_equal_clock_as_status_go_does() -> None:
    message = link(BASE)
    assert verify_magnet_message(message, COMMUNITY, last_clock=BASE).clock == BASE
    with pytest.raises(StaleMagnetMessage):
        verify_magnet_message(message, COMMUNITY, last_clock=BASE + 1)


async def test_store_node_evidence_through_the_rest_store_api() -> None:
    previous = BASE + 900_000
    nwaku = await FakeNwaku([stored(link(previous)), stored(description(BASE + 5))]).start()
    try:
        community = parse_community(
            {"id": str(COMMUNITY), "channels": [CHANNEL], "shard": 200}, 1, Path(".")
        )
        evidence = await asyncio.to_thread(node_clock_evidence, nwaku.url, community)
    finally:
        await nwaku.stop()
    assert (evidence.link_clock, evidence.description_clock) == (previous, BASE + 5)


def _raw(body: dict) -> bytes:
    return waku_message_pb2.WakuMessage(
        payload=base64.b64decode(body["payload"]), content_topic=body["contentTopic"],
        version=body["version"], timestamp=body["timestamp"],
    ).SerializeToString()  # fmt: skip


async def _bridge_publish(tmp_path: Path, local: list, on_node: list) -> tuple[list, dict]:
    """Run the bridge once on a store holding ``local`` (plus a channel message) with a
    [history] store node holding ``on_node``; what it published and its archive state."""
    (tmp_path / "c.key").write_text(KEY.secret.hex())
    url = f"sqlite:///{tmp_path}/store.sqlite3"
    channel_message = stored_channel_message(
        COMMUNITY, CHANNEL, PUBSUB, expiry=T0 - 3600, text=b"hello"
    )
    rows = [channel_message] + [stored(m) for m in local]
    with open_store(url) as store:
        store.insert_messages(rows)
    nwaku = await FakeNwaku([stored(m) for m in on_node], store_relayed=False).start()
    config = bridge_config(
        tmp_path, url, relay={"url": nwaku.url},
        history={"nodes": [nwaku.url], "interval": "1d"},
        archive={"archive_dir": str(tmp_path / "a"), "torrent_dir": str(tmp_path / "t"),
                 "seed_listen": "127.0.0.1:0", "trackers": False, "republish_interval": "1d"},
        community=[{"id": str(COMMUNITY), "channels": [CHANNEL], "shard": 200,
                    "key_file": "c.key", "archive_link_chats": "universal"}],
    )  # fmt: skip
    try:
        service = BridgeService(config, clock=ManualClock(T0))
        archiver = await start_until_archive_published(service, COMMUNITY)
        state = archiver.report()
        await service.stop()
    finally:
        await nwaku.stop()
    return list(nwaku.published), state


@pytest.mark.network
@pytest.mark.torrent
async def test_bridge_publishes_above_field_9_and_a_store_nodes_previous_link(tmp_path):
    field9 = BASE + 500_000  # in the bridge's own store
    previous = BASE + 900_000  # only on the [history] store node
    published, state = await _bridge_publish(tmp_path, [description(field9)], [link(previous)])
    ((pubsub, body),) = published
    assert pubsub == PUBSUB
    opened = independent_open(_raw(body), COMMUNITY.universal_chat_id)
    assert opened["clock"] == previous + 1 > field9
    reason = f"previous link clock {previous} (+1)"
    assert state["lastPublished"]["clock"] == previous + 1
    assert state["lastPublished"]["clock_reason"] == reason
    assert state["archiveLinkClock"]["reason"] == reason
    assert state["archiveLinkClock"]["description_field9"] == field9


@pytest.mark.network
@pytest.mark.torrent
async def test_bridge_publishes_above_the_description_field_9(tmp_path):
    field9 = BASE + 500_000
    published, state = await _bridge_publish(tmp_path, [], [description(field9)])
    ((_, body),) = published
    # Issue 12, must show, on one published message: status-go's layers and signatures, the
    # -memberUpdate topic, and a clock above the description's field 9.
    opened = independent_open(_raw(body), COMMUNITY.universal_chat_id)
    assert opened["clock"] == field9 + 1
    assert opened["installation_id"]  # the ProtocolMessage layer is there
    assert opened["type"] == 43 and opened["application_signer"] == COMMUNITY.public_key
    assert opened["payload_signer"] is not None  # the 26/WAKU-PAYLOAD is signed
    assert opened["content_topic"] == body["contentTopic"]
    # status-go's public-chat topic: keccak256(chat id)[:4], as an rfc26 content topic
    assert body["contentTopic"] == chat_content_topic(f"{COMMUNITY}-memberUpdate")
    assert state["archiveLinkClock"]["reason"] == f"description field 9 = {field9} (+1)"


def test_the_link_files_written_before_are_clock_evidence(tmp_path: Path) -> None:
    """Issue 22: whichever tool wrote them, the link message files next to the torrent
    (.pb and every chat's body in .json) count; an unreadable one stops the tool."""
    from waku_legacy.archive.build import LinkSigner, write_magnet_message, written_link_evidence
    from waku_legacy.archive.errors import ArchiveCorrupted
    from waku_legacy.archive.layout import CommunityLayout
    from waku_legacy.faults import no_fault

    layout = CommunityLayout.of(tmp_path / "a", COMMUNITY, tmp_path / "t")
    assert written_link_evidence(layout).link_clock is None  # nothing written yet
    (tmp_path / "t").mkdir()
    signer = LinkSigner(KEY, PUBSUB, "both", None)
    write_magnet_message(layout, signer, OLD_LINK, BASE + 42, fault=no_fault, fsync=False)
    found = written_link_evidence(layout)
    assert (found.link_clock, found.link, found.links) == (BASE + 42, OLD_LINK, 3)
    choice = choose_link_clock(found, base=BASE, base_reason="run clock", archive_link=NEW_LINK)
    assert choice.clock == BASE + 43  # a new link goes above what the files hold
    layout.magnet_message_pb.unlink()  # the .json alone still says it
    assert written_link_evidence(layout).link_clock == BASE + 42
    layout.magnet_message_json.write_text("{not json")
    with pytest.raises(ArchiveCorrupted, match="does not read"):
        written_link_evidence(layout)


def test_an_operators_min_link_clock_is_a_floor(tmp_path: Path) -> None:
    """Links a Status client published that no store here shows: min_link_clock."""
    from waku_legacy.errors import ConfigError

    community = parse_community(
        {"id": str(COMMUNITY), "channels": [CHANNEL], "shard": 200,
         "min_link_clock": BASE + 10_000}, 1, tmp_path,
    )  # fmt: skip
    assert community.min_link_clock == BASE + 10_000
    evidence = read_evidence([description(BASE + 5)], COMMUNITY)
    choice = choose_link_clock(evidence, base=BASE, base_reason="run clock",
                               minimum=community.min_link_clock)  # fmt: skip
    assert (choice.clock, choice.reason) == (
        BASE + 10_000, f"min_link_clock = {BASE + 10_000} (operator)"
    )
    # evidence above the floor still wins
    higher = read_evidence([description(BASE + 20_000)], COMMUNITY)
    assert choose_link_clock(higher, base=BASE, base_reason="x", minimum=BASE + 10_000).clock == (
        BASE + 20_001
    )
    with pytest.raises(ConfigError, match="min_link_clock"):
        parse_community({"id": str(COMMUNITY), "channels": [CHANNEL], "shard": 200,
                         "min_link_clock": -1}, 1, tmp_path)  # fmt: skip
