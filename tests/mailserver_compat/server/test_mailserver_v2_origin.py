"""v1 clients' history includes messages that started on v2 (issue 12).

A Status message published on v2 with an rfc26 content topic and payload version 1 is the
same 26/WAKU-PAYLOAD a v1 node would have sent; the v1<->v2 bridge (nwaku's wakubridge,
15/WAKU-BRIDGE) posted it on v1 as an envelope with the data unchanged, TTL 5 s, expiry
"now" + 5 and a PoW nonce. The v1 mailserver over the v2 store serves such a message as
that envelope (its "now" being the message's timestamp), merged by DB key with the
messages that came from v1 envelopes, so a v1 member sees the v2 member's conversation.
"""

from __future__ import annotations

import random

import pytest
import rlp

from tests.helpers import fresh_database
from waku_legacy.crypto.keccak import keccak256
from waku_legacy.crypto.payload import decode_payload, encode_payload
from waku_legacy.crypto.secp256k1 import generate_private_key, private_key_from_bytes
from waku_legacy.identity.topics import (
    CommunityId,
    chat_topic,
    symmetric_key_for_chat,
    v1_topic_to_content_topic,
)
from waku_legacy.mailserver_compat.client.mailserver_client import HistoryQuery, MailServerClient
from waku_legacy.mailserver_compat.server.asyncio_server import MailServer
from waku_legacy.mailserver_compat.server.core import MailServerConfig
from waku_legacy.mailserver_compat.storage.envelope_store import EnvelopeQuery, V2StoreSource
from waku_legacy.mailserver_compat.wire.bloom import topics_to_bloom
from waku_legacy.mailserver_compat.wire.envelope import Envelope
from waku_legacy.mailserver_compat.wire.pow import pow_of, seal
from waku_legacy.store import StoredMessage, open_store

T0 = 1_700_000_000
NS = 10**9
PUBSUB = "/waku/2/rs/16/128"
COMMUNITY = CommunityId(private_key_from_bytes(bytes(31) + b"\x07").public_key.format())
CHANNEL = "6c0b3c2e-5a43-4d6e-9e41-1c1f0f6c8a11"
CHAT_ID = COMMUNITY.channel_chat_id(CHANNEL)
TOPIC = chat_topic(CHAT_ID)
KEY = symmetric_key_for_chat(CHAT_ID)
OTHER_TOPIC = bytes.fromhex("0badc0de")


def _key(raw: bytes) -> bytes:
    # Independent of the store code: sent time || keccak(rlp) || topic (wire-facts §3).
    expiry, ttl, topic, _, _ = rlp.decode(raw)
    sent = int.from_bytes(expiry, "big") - int.from_bytes(ttl, "big")
    return sent.to_bytes(4, "big") + keccak256(raw) + topic


def _conversation(count: int = 240, seed: int = 5):
    """A channel conversation: odd messages from v1 members (stored with their envelope),
    even ones from v2 members (no envelope), plus v2 traffic v1 cannot see."""
    rng = random.Random(seed)
    authors = [generate_private_key() for _ in range(3)]
    rows, texts = [], {}
    for i in range(count):
        sent = T0 + rng.randrange(0, 400)  # several messages share a second
        text = f"message {i}".encode()
        data = encode_payload(text, sign_with=rng.choice(authors), symmetric_key=KEY)
        if i % 2:
            envelope = seal(sent + 10, 10, TOPIC, data, 0.002)
            raw = envelope.encode()
            rows.append(StoredMessage(keccak256(b"v1" + raw), PUBSUB,
                                      v1_topic_to_content_topic(TOPIC), data, 1, sent * NS,
                                      envelope=raw, db_key=_key(raw)))  # fmt: skip
        else:
            stamp = sent * NS + rng.randrange(NS)  # v2 clients stamp in nanoseconds
            content_topic = v1_topic_to_content_topic(TOPIC)
            rows.append(StoredMessage(keccak256(b"v2" + data), PUBSUB, content_topic, data, 1,
                                      stamp))  # fmt: skip
        texts[data] = text
    # What a v1 node cannot use: other payload versions, non-rfc26 topics.
    rows.append(StoredMessage(keccak256(b"plain"), PUBSUB, v1_topic_to_content_topic(TOPIC),
                              b"plain", 0, (T0 + 5) * NS))  # fmt: skip
    rows.append(StoredMessage(keccak256(b"app"), PUBSUB, "/status/1/app/proto", b"x", 1,
                              (T0 + 6) * NS))  # fmt: skip
    rows.append(StoredMessage(keccak256(b"other"), PUBSUB, v1_topic_to_content_topic(OTHER_TOPIC),
                              b"other-topic", 1, (T0 + 7) * NS))  # fmt: skip
    return rows, texts


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def store_url(request, tmp_path):
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'store.sqlite3'}"
        return
    with fresh_database(request.getfixturevalue("postgres_dsn"), "v2o_") as url:
        yield url


@pytest.fixture
def store(store_url):
    rows, texts = _conversation()
    store = open_store(store_url)
    store.insert_messages(rows)
    store.texts = texts  # type: ignore[attr-defined]
    store.rows = rows  # type: ignore[attr-defined]
    yield store
    store.close()


def _check_bridged(raw: bytes, row: StoredMessage) -> None:
    """The envelope the bridge built: data unchanged, TTL 5, expiry = sent second + 5,
    PoW reaching nwaku's 0.002, topic from the content topic."""
    expiry, ttl, topic, data, _nonce = rlp.decode(raw)
    assert data == row.payload
    assert int.from_bytes(ttl, "big") == 5
    assert int.from_bytes(expiry, "big") == row.timestamp // NS + 5
    assert topic == TOPIC
    assert pow_of(Envelope.decode(raw)) >= 0.002


def _all_pages(source, lower, upper, **kwargs):
    cursor, out, partial = b"", [], 0
    for _ in range(10_000):
        page = source.query(EnvelopeQuery(lower, upper, cursor=cursor, **kwargs))
        out += [raw for _, raw in page.envelopes]
        partial += page.partial
        cursor = page.next_cursor
        if not cursor:
            return out, partial
    raise AssertionError("paging did not end")


@pytest.mark.parametrize("scan", [None, 7])
@pytest.mark.parametrize("by_bloom", [False, True])
def test_v2_origin_messages_served_as_bridged_envelopes(store, scan, by_bloom) -> None:
    source = V2StoreSource(store, batch=16)
    wanted = {"bloom": topics_to_bloom([TOPIC])} if by_bloom else {"topics": (TOPIC,)}
    served, partial = _all_pages(source, T0, T0 + 500, limit=25, max_scan=scan, **wanted)
    if scan:
        assert partial > 0  # the bound did end pages early, and paging still completed
    # Every message of the channel once, in DB-key order, nothing v1 cannot use.
    assert [_key(r) for r in served] == sorted(_key(r) for r in served)
    by_data = {rlp.decode(r)[3]: r for r in served}
    assert len(by_data) == len(served) == len(store.texts)
    for row in store.rows:
        if row.payload not in store.texts:
            continue
        raw = by_data[row.payload]
        if row.envelope is not None:
            assert raw == row.envelope  # v1-origin: the original envelope
        else:
            _check_bridged(raw, row)
    # Deterministic: a second source (no cache) serves byte-identical envelopes.
    again, _ = _all_pages(V2StoreSource(store, batch=50), T0, T0 + 500, limit=1000, topics=(TOPIC,))
    assert again == served


def test_other_topic_and_time_window(store) -> None:
    source = V2StoreSource(store)
    served, _ = _all_pages(source, T0, T0 + 500, limit=100, topics=(OTHER_TOPIC,))
    assert [rlp.decode(r)[3] for r in served] == [b"other-topic"]
    lower, upper = T0 + 100, T0 + 199
    served, _ = _all_pages(source, lower, upper, limit=100, topics=(TOPIC,))
    expected = [
        row.payload for row in store.rows
        if row.payload in store.texts and lower <= row.timestamp // NS <= upper
    ]  # fmt: skip
    assert sorted(rlp.decode(r)[3] for r in served) == sorted(expected)


class _Writer:
    def __init__(self) -> None:
        self.items: list[bytes] = []

    def append(self, raw: bytes) -> None:
        self.items.append(raw)

    def flush(self) -> None:
        pass


@pytest.mark.network
@pytest.mark.timeout(60)
async def test_v1_client_over_rlpx_sees_the_v2_members_conversation(store) -> None:
    server = MailServer(
        V2StoreSource(store),
        generate_private_key(),
        MailServerConfig(rate_limit=0, max_message_size=16 * 1024),
        read_timeout=2.0,
        handshake_timeout=2.0,
    )
    await server.start("127.0.0.1", 0)
    try:
        writer = _Writer()
        async with MailServerClient(server.enode) as client:
            await client.pull(HistoryQuery(T0, T0 + 500, topics=(TOPIC,), limit=50), writer)
    finally:
        await server.close()
    # The v1 member opens every envelope with the channel key ...
    v1_view = []
    for raw in writer.items:
        envelope = Envelope.decode(raw)
        assert envelope.topic == TOPIC
        v1_view.append(decode_payload(envelope.data, symmetric_key=KEY).payload)
    # ... including those that started on v2, as the bridge built them ...
    v2_origin = [row for row in store.rows if row.envelope is None and row.payload in store.texts]
    served = {Envelope.decode(raw).data: raw for raw in writer.items}
    assert v2_origin and all(row.payload in served for row in v2_origin)
    for row in v2_origin:
        _check_bridged(served[row.payload], row)
    # ... and sees the conversation a v2 member sees: the same messages, by second.
    v2_view = sorted(
        (row.timestamp // NS, store.texts[row.payload])
        for row in store.rows
        if row.payload in store.texts
    )
    v1_seconds = sorted(
        (Envelope.decode(r).sent_time, t) for r, t in zip(writer.items, v1_view, strict=True)
    )
    assert v1_seconds == v2_view


def test_bridged_history_envelope_refuses_what_v1_cannot_carry() -> None:
    from waku_legacy.errors import InvalidTopic
    from waku_legacy.mailserver_compat.wire.convert import ConversionError, bridged_history_envelope

    topic = v1_topic_to_content_topic(TOPIC)
    good = bridged_history_envelope(
        content_topic=topic, payload=b"data", version=1, timestamp=T0 * NS + 123
    )
    assert (good.expiry, good.ttl, good.topic, good.data) == (T0 + 5, 5, TOPIC, b"data")
    for bad in (
        {"content_topic": topic, "payload": b"x", "version": 0, "timestamp": T0 * NS},
        {"content_topic": topic, "payload": b"x", "version": 1, "timestamp": 0},
        {"content_topic": topic, "payload": b"x", "version": 1, "timestamp": 2**32 * NS},
    ):
        with pytest.raises(ConversionError):
            bridged_history_envelope(**bad)
    with pytest.raises(InvalidTopic):
        bridged_history_envelope(
            content_topic="/status/1/x/proto", payload=b"x", version=1, timestamp=T0 * NS
        )


class _CountingStore:
    """The store, counting the messages its ``query`` hands out (a v1 page must not make
    the v2-origin stream read ahead to the end of the range)."""

    def __init__(self, store) -> None:
        self.store = store
        self.read = 0

    def query(self, query):
        page = self.store.query(query)
        self.read += len(page.messages)
        return page

    def __getattr__(self, name):
        return getattr(self.store, name)


def test_v1_origin_history_does_not_read_ahead(tmp_path) -> None:
    rows, _ = _conversation(count=400)
    store = open_store(f"sqlite:///{tmp_path / 'v1only.sqlite3'}")
    store.insert_messages([r for r in rows if r.envelope is not None])  # no v2-origin at all
    counting = _CountingStore(store)
    served, _ = _all_pages(V2StoreSource(counting), T0, T0 + 500, limit=20, topics=(TOPIC,))
    assert len(served) == 200
    # Each page reads about a page of messages (one store batch, whole seconds); reading
    # to the end of the range for every page would be ~ 200 * 10 / 2 = 1000 + 200.
    assert counting.read <= 2 * 200 + 20 * 11
    store.close()
