"""The two sources of the readable history, end to end on real bytes: a v2 store's encrypted
rows (SQLite and PostgreSQL) and archive entries, decoded by status-go's rules and indexed.
Messages are built as status-go sends them (tests/waku_legacy/history/status_messages.py);
the expected ids are keccak256(author key || application bytes), computed by hand there."""

from __future__ import annotations

import datetime as dt

import coincurve
import pytest

from tests.waku_legacy.history import status_messages as sm
from tests.waku_legacy.history.indexing import history_dsn
from waku_legacy.archive.message import ArchiveMessage
from waku_legacy.archive.partition import WEEK_SECONDS
from waku_legacy.community_config import CommunityConfig
from waku_legacy.crypto.payload import encode_payload
from waku_legacy.history.index import HistoryIndex
from waku_legacy.history.sources import index_from_archive_entries, index_from_store
from waku_legacy.identity.topics import (
    CommunityId,
    chat_topic,
    symmetric_key_for_chat,
    v1_topic_to_content_topic,
)
from waku_legacy.members.preview import ArchivedEntry
from waku_legacy.proto import community_description_pb2
from waku_legacy.store import open_store
from waku_legacy.store.types import StoredMessage

__all__ = ["history_dsn"]  # the fixture

COMMUNITY = CommunityId.parse(sm.COMMUNITY_ID)
PUBSUB = "/waku/2/rs/16/128"
CHANNEL_TOPIC = v1_topic_to_content_topic(chat_topic(sm.CHAT_ID))
CHANNEL_KEY = symmetric_key_for_chat(sm.CHAT_ID)
T0_MS = sm.T0 * 1000


def _description() -> bytes:
    """Signed by the community key: channel "general", CAROL an admin (role 4), BOB banned."""
    body = community_description_pb2.CommunityDescription(clock=7)
    body.identity.display_name = "Demo community"
    body.identity.description = "Builders <b>talk</b> here"
    body.chats[sm.CHANNEL].identity.display_name = "general"
    body.chats[sm.CHANNEL].identity.description = "Say hi"
    body.members[sm.ALICE.hex].SetInParent()
    body.members[sm.CAROL.hex].roles.append(4)
    body.ban_list.append(sm.BOB.hex)
    owner = sm.Person(sm.COMMUNITY_SECRET)
    return sm.wrapped(sm.application(owner, 25, body.SerializeToString()))


def _row(n: int, topic: str, data: bytes, key: bytes, seconds: int) -> StoredMessage:
    payload = encode_payload(data, sign_with=sm.NODE.key, symmetric_key=key)
    return StoredMessage(bytes([n]) * 32, PUBSUB, topic, payload, 1, seconds * 1_000_000_000)


def test_a_store_is_read_decrypted_and_folded(history_dsn: str) -> None:
    hello = sm.application(sm.ALICE, 1, sm.chat("hello @" + sm.CAROL.hex + " there"))
    spam = sm.application(sm.BOB, 1, sm.chat("spam", clock=T0_MS + 1, timestamp=T0_MS + 1))
    hello_id, spam_id = sm.expected_id(sm.ALICE, hello), sm.expected_id(sm.BOB, spam)
    edit = sm.application(sm.ALICE, 29, sm.edit(hello_id, "hello, edited"))
    delete = sm.application(sm.CAROL, 31, sm.delete(spam_id))  # an admin's
    name = sm.application(sm.CAROL, 24, sm.identity("Carol Admin"))
    community_chat = COMMUNITY.chat_id
    rows = [
        _row(1, v1_topic_to_content_topic(chat_topic(community_chat)), _description(),
             symmetric_key_for_chat(community_chat), sm.T0 - 10),
        _row(2, CHANNEL_TOPIC, sm.wrapped(hello), CHANNEL_KEY, sm.T0),
        _row(3, CHANNEL_TOPIC, sm.wrapped(spam), CHANNEL_KEY, sm.T0 + 1),
        _row(4, CHANNEL_TOPIC, sm.wrapped(edit), CHANNEL_KEY, sm.T0 + 5),
        _row(5, CHANNEL_TOPIC, sm.wrapped(delete), CHANNEL_KEY, sm.T0 + 6),
        _row(6, CHANNEL_TOPIC, sm.wrapped(name), CHANNEL_KEY, sm.T0 + 7),
        _row(7, CHANNEL_TOPIC, sm.wrapped(hello), b"\x01" * 32, sm.T0 + 8),  # another key
    ]  # fmt: skip
    with open_store(history_dsn) as store:
        store.insert_messages(rows)
    with HistoryIndex.open(history_dsn) as index:
        counts = index_from_store(history_dsn, [str(COMMUNITY)], index)
        assert (counts.messages, counts.edits, counts.deletes, counts.identities) == (2, 1, 1, 1)
        assert counts.undecodable == {"undecryptable": 1}
        reader = index.reader()
        summary = reader.community(str(COMMUNITY))
        assert summary is not None and summary.name == "Demo community"
        assert summary.description == "Builders <b>talk</b> here"  # as written: pages escape it
        assert [(c.id, c.name, c.description, c.messages) for c in summary.channels] == [
            (sm.CHANNEL, "general", "Say hi", 1)  # BOB's message deleted by the admin
        ]
        page = reader.day(
            str(COMMUNITY), sm.CHANNEL, dt.datetime.fromtimestamp(sm.T0, dt.UTC).date()
        )
        assert [m.id for m in page] == [hello_id]
        message = page[0]
        assert message.text == "hello, edited" and message.edited
        assert message.mentions == {}  # the edit dropped the mention
        assert message.provenance is not None
        assert message.provenance.waku_hash == "0x" + "02" * 32
        assert message.provenance.pubsub_topic == PUBSUB
        assert message.provenance.content_topic == CHANNEL_TOPIC
        assert message.provenance.signer == sm.ALICE.hex
        assert message.provenance.whisper_timestamp == sm.T0
        assert message.provenance.archive_window is None
        # rerun: nothing new
        assert index_from_store(history_dsn, [str(COMMUNITY)], index).messages == 0
    # decoded in two worker processes: the same tables
    with HistoryIndex.open(history_dsn) as index:
        before = _tables(index)
        with index.db.transaction():  # (a rebuild from scratch)
            for table in ("history_messages", "history_days", "history_channels"):
                index.db.stream(f"DELETE FROM {table}")
            if not index.db.postgres:
                index.db.stream("INSERT INTO history_fts (history_fts) VALUES ('rebuild')")
        again = index_from_store(history_dsn, [str(COMMUNITY)], index, workers=2)
        assert (again.messages, again.undecodable) == (2, {"undecryptable": 1})
        assert _tables(index) == before


def _tables(index: HistoryIndex) -> list[object]:
    out: list[object] = []
    for table in ("history_messages", "history_days", "history_channels", "history_edits"):
        rows = index.db.execute(f"SELECT * FROM {table}")
        out.append(sorted(tuple(str(v) for v in row) for row in rows))
    return out


def test_archive_entries_with_both_copies_of_a_message(history_dsn: str) -> None:
    hello = sm.application(sm.ALICE, 1, sm.chat("hello @" + sm.CAROL.hex + " there"))
    name = sm.application(sm.CAROL, 24, sm.identity("Carol Admin"))
    hello_id = sm.expected_id(sm.ALICE, hello)
    window = sm.T0 - 3600
    universal = chat_topic(str(COMMUNITY) + "-memberUpdate")
    entries = [
        ArchivedEntry(window, ArchiveMessage(sm.T0, b"\x01" * 32, chat_topic(sm.CHAT_ID),
                                             sm.wrapped(name), sig=sm.NODE.public)),
        ArchivedEntry(window, ArchiveMessage(sm.T0, b"\x02" * 32, chat_topic(sm.CHAT_ID),
                                             sm.wrapped(hello), sig=sm.NODE.public)),
        ArchivedEntry(window, ArchiveMessage(sm.T0, b"\x03" * 32, universal,
                                             sm.wrapped(hello), sig=sm.NODE.public)),
        ArchivedEntry(window, ArchiveMessage(sm.T0, b"\x04" * 32, chat_topic(sm.CHAT_ID),
                                             sm.wrapped(hello))),  # unsigned payload
    ]  # fmt: skip
    with HistoryIndex.open(history_dsn, create=True) as index:
        counts = index_from_archive_entries(entries, str(COMMUNITY), index, source="archive-dir")
        assert (counts.messages, counts.duplicates, counts.identities) == (1, 1, 1)
        assert counts.undecodable == {"no signature": 1}
        message = index.reader().message(str(COMMUNITY), hello_id)
        assert message is not None and message.provenance is not None
        assert message.provenance.waku_hash == "0x" + "02" * 32  # the first copy's
        assert message.provenance.archive_window == (window, window + WEEK_SECONDS)
        assert message.provenance.source == "archive-dir"
        assert message.mentions == {sm.CAROL.hex: "Carol Admin"}


def test_the_bridge_hook_takes_decrypted_rows(history_dsn: str) -> None:
    from waku_legacy.history.events import WakuFacts
    from waku_legacy.history.sources import WakuRow

    hello = sm.application(sm.ALICE, 1, sm.chat("live"))
    facts = WakuFacts("0x" + "aa" * 32, CHANNEL_TOPIC, PUBSUB, sm.T0, sm.NODE.hex, None, "bridge")
    with HistoryIndex.open(history_dsn, create=True) as index:
        counts = index.add_waku_messages(str(COMMUNITY), [WakuRow(sm.wrapped(hello), facts)])
        assert counts.messages == 1
        got = index.reader().message(str(COMMUNITY), sm.expected_id(sm.ALICE, hello))
        assert got is not None and got.text == "live"
        assert (
            got.author.public_key
            == "0x" + coincurve.PrivateKey(sm.ALICE.secret).public_key.format(False).hex()
        )


def test_window_of_finds_the_archive_window_holding_a_time() -> None:
    from waku_legacy.history.sources import window_of

    windows = [(100, 200), (200, 300), (400, 500)]
    assert window_of(windows, 99) is None
    assert window_of(windows, 100) == (100, 200)
    assert window_of(windows, 199) == (100, 200)
    assert window_of(windows, 200) == (200, 300)
    assert window_of(windows, 350) is None  # between windows
    assert window_of(windows, 500) is None
    assert window_of([], 150) is None


@pytest.mark.parametrize("workers", [1, 2])
def test_a_segmented_message_in_the_store_is_joined(history_dsn: str, workers: int) -> None:
    from tests.waku_legacy.history.test_segments import split

    hello = sm.application(sm.ALICE, 1, sm.chat("a long message, " * 40))
    pieces = split(sm.wrapped(hello), 300)
    assert len(pieces) >= 3
    rows = [_row(10 + i, CHANNEL_TOPIC, p, CHANNEL_KEY, sm.T0 + i) for i, p in enumerate(pieces)]
    config = CommunityConfig(id=COMMUNITY, channels=(sm.CHANNEL,), shard=128)
    with open_store(history_dsn) as store:
        store.insert_messages(rows)
    with HistoryIndex.open(history_dsn) as index:
        counts = index_from_store(history_dsn, [config], index, workers=workers)
        assert counts.messages == 1 and counts.undecodable == {"segment": len(pieces) - 1}
        got = index.reader().message(str(COMMUNITY), sm.expected_id(sm.ALICE, hello))
        assert got is not None and got.text == "a long message, " * 40


def test_the_bridge_hook_joins_segments_arriving_one_by_one(history_dsn: str) -> None:
    from tests.waku_legacy.history.test_segments import split
    from waku_legacy.history.events import WakuFacts
    from waku_legacy.history.sources import WakuRow

    hello = sm.application(sm.ALICE, 1, sm.chat("live and long " * 40))
    pieces = split(sm.wrapped(hello), 300)
    with HistoryIndex.open(history_dsn, create=True) as index:
        for n, piece in enumerate(pieces):
            facts = WakuFacts(f"0x{n:064x}", CHANNEL_TOPIC, PUBSUB, sm.T0, sm.NODE.hex)
            index.add_waku_messages(str(COMMUNITY), [WakuRow(piece, facts)])
        got = index.reader().message(str(COMMUNITY), sm.expected_id(sm.ALICE, hello))
        assert got is not None and got.text == "live and long " * 40
