"""The bridge shows what members' clients import after each archive run (issue 23): on its
status page and in ``/debug/v1/status`` (``membersPreview``), per generation.

The store holds the community's signed description (alice is a member of the channel; carol
is not), three chat messages alice signed, two carol signed and four unsigned v1 payloads, all
on the channel's topic; the bridge archives them with the default ``archive_topics = "both"``:
each on its channel topic and again on ``-memberUpdate`` (9 messages, 18 archived copies).
Expected from status-go's rules, copy by copy: a 2024 client hears both topics: alice's three
are imported and their second copies are duplicate ids, carol's two are departed (second
copies: duplicates), the four unsigned ones (no ``sig``) are undecodable twice; a current
client has no filter for the channel copies (9 no_filter) and judges the relabelled ones: 3
imported, 2 departed, 4 undecodable. Counted by message, each with its best copy's fate
(issue 34), both generations import alice's 3 and refuse carol's 2 (departed) and the 4
unsigned (undecodable). The link (on both chats, clock above the description's field 9 = 0)
is acted on by both.
"""

from __future__ import annotations

import uuid
from pathlib import Path

import aiohttp
import pytest

from tests.bridge.support import FakeNwaku, bridge_config
from tests.helpers import reference_keccak256, store_channel_messages, wait_until
from tests.pb_wire import field_bytes, field_varint
from waku_legacy.bridge.clock import ManualClock
from waku_legacy.bridge.service import BridgeService
from waku_legacy.crypto.payload import encode_payload
from waku_legacy.crypto.secp256k1 import private_key_from_bytes
from waku_legacy.identity.message_hash import message_hash
from waku_legacy.identity.topics import CommunityId, chat_topic, symmetric_key_for_chat
from waku_legacy.mailserver_compat.wire.convert import envelope_to_waku_message
from waku_legacy.mailserver_compat.wire.pow import seal
from waku_legacy.store import StoredMessage, open_store

DAY = 86_400
T0 = 1_750_000_000
PUBSUB = "/waku/2/rs/16/128"
OWNER = private_key_from_bytes(b"\x51" * 32)
ALICE = private_key_from_bytes(b"\x52" * 32)
CAROL = private_key_from_bytes(b"\x53" * 32)
COMMUNITY = CommunityId(OWNER.public_key.format(compressed=True))
CHANNEL = str(uuid.UUID(int=0x51))


def _signed(body: bytes, kind: int, key) -> bytes:  # type: ignore[no-untyped-def]
    signature = key.sign_recoverable(reference_keccak256(body), hasher=None)
    return field_bytes(1, signature) + field_bytes(2, body) + field_varint(3, kind)


def _stored(chat_id: str, application: bytes, key, sent: int) -> StoredMessage:  # type: ignore[no-untyped-def]
    data = encode_payload(application, sign_with=key, symmetric_key=symmetric_key_for_chat(chat_id))
    message = envelope_to_waku_message(seal(sent + 10, 10, chat_topic(chat_id), data, 0))
    return StoredMessage(message_hash(PUBSUB, message), PUBSUB, message.content_topic,
                         message.payload, 1, message.timestamp)  # fmt: skip


def _chat(sent: int, key) -> StoredMessage:  # type: ignore[no-untyped-def]
    chat_id = COMMUNITY.channel_chat_id(CHANNEL)
    body = (field_varint(1, sent * 1000) + field_varint(2, sent * 1000) + field_bytes(3, "gm")
            + field_bytes(6, chat_id) + field_varint(7, 5) + field_varint(8, 1))  # fmt: skip
    return _stored(chat_id, _signed(body, 1, key), key, sent)


def _description() -> StoredMessage:
    alice = "0x" + ALICE.public_key.format(compressed=False).hex()
    entry = field_bytes(1, alice) + field_bytes(2, b"")
    chat = field_bytes(1, CHANNEL) + field_bytes(2, field_bytes(1, entry))
    body = field_varint(1, 7) + field_bytes(2, entry) + field_bytes(6, chat)
    return _stored(COMMUNITY.chat_id, _signed(body, 25, OWNER), OWNER, T0 - 3 * DAY)


@pytest.mark.network
@pytest.mark.torrent
async def test_status_shows_members_preview_after_an_archive_run(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/store.sqlite3"
    store_channel_messages(url, COMMUNITY, CHANNEL, T0 - 2 * DAY, 4, PUBSUB)
    with open_store(url) as store:
        store.insert_messages([
            _description(), *(_chat(T0 - DAY + i, ALICE) for i in range(3)),
            *(_chat(T0 - DAY + 10 + i, CAROL) for i in range(2)),
        ])  # fmt: skip
    key_file = tmp_path / "owner.key"
    key_file.write_text(OWNER.secret.hex())
    nwaku = await FakeNwaku().start()
    archive = {"archive_dir": str(tmp_path / "a"), "torrent_dir": str(tmp_path / "t"),
               "seed_listen": "127.0.0.1:0", "trackers": False, "utp": False,
               "republish_interval": "7d"}  # fmt: skip
    community = {"id": str(COMMUNITY), "channels": [CHANNEL], "shard": 128,
                 "key_file": str(key_file), "name": "preview"}  # fmt: skip
    config = bridge_config(tmp_path, url, archive=archive, community=[community],
                           relay={"url": nwaku.url})  # fmt: skip
    service = BridgeService(config, clock=ManualClock(T0))
    try:
        await service.start()
        assert service.archive is not None
        archiver = service.archive.archivers[str(COMMUNITY)]
        await wait_until(lambda: archiver.members_preview is not None, what="members preview")
        base = f"http://127.0.0.1:{service.rest_port}"
        async with aiohttp.ClientSession() as http:
            async with http.get(base + "/debug/v1/status") as response:
                document = await response.json()
            async with http.get(base + "/") as response:
                page = await response.text()
    finally:
        await service.stop()
        await nwaku.stop()
    preview = document["communities"][0]["membersPreview"]
    assert (preview["archivedMessages"], preview["copiesArchived"]) == (9, 18), preview
    assert preview["archiveTopics"] == "both"
    old, new = preview["generations"]["2024"], preview["generations"]["current"]
    assert old["linkActedOn"] and new["linkActedOn"]
    assert old["imported"] == 3 and new["imported"] == 3
    assert old["copiesImported"] == 3 and new["copiesImported"] == 3
    for view in (old, new):
        assert {k: v for k, v in view["skipped"].items() if v} == {
            "departed": 2, "undecodable": 4,
        }  # fmt: skip
    assert old["authorsLosingMessages"] == new["authorsLosingMessages"] == 1
    assert "members&#x27; clients" in page or "members' clients" in page
    assert page.count("3 messages imported (3 copies); refused: departed 2, undecodable 4") == 2
    assert "of 9 archived messages in 18 copies (archive topics both)" in page
