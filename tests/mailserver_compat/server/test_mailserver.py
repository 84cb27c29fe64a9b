"""Mailserver store backends (memory, LevelDB, v2 store, status-go PostgreSQL) and the
sans-IO server core: paging semantics, bundling, request validation, rate limiting."""

from __future__ import annotations

import random

import pytest
import rlp

from waku_legacy.crypto.keccak import keccak256
from waku_legacy.crypto.secp256k1 import generate_private_key
from waku_legacy.identity.topics import v1_topic_to_content_topic
from waku_legacy.limits import RateLimiter
from waku_legacy.mailserver_compat.server.core import (
    MailServerConfig,
    MailServerCore,
    RequestRejected,
    SeenSet,
    bundle_envelopes,
)
from waku_legacy.mailserver_compat.server.limits import V1Limits
from waku_legacy.mailserver_compat.storage.envelope_store import (
    EnvelopeQuery,
    LegacyPostgresSource,
    LevelDBSource,
    MemoryEnvelopeStore,
    V2StoreSource,
    open_envelope_store,
)
from waku_legacy.mailserver_compat.wire.bloom import topic_to_bloom, topics_to_bloom
from waku_legacy.mailserver_compat.wire.envelope import Envelope
from waku_legacy.mailserver_compat.wire.request import MessagesRequest, encode_plain_request

T0 = 1_650_000_000
# Each topic's three bloom bits sit in bytes no other topic touches, so a topic's bloom
# matches that topic only (status-go's assign quirk cannot merge them either).
TOPICS = [bytes([0x01 + 0x20 * i, 0x09 + 0x20 * i, 0x11 + 0x20 * i, 0]) for i in range(3)]


def _history(count: int = 700) -> list[bytes]:
    rng = random.Random(3)
    out = []
    for i in range(count):
        sent = T0 + rng.randrange(0, 500)  # many envelopes share a second
        out.append(Envelope(sent + 20, 20, TOPICS[i % 3], rng.randbytes(40), i).encode())
    return out


def _key(raw: bytes) -> bytes:
    expiry, ttl, topic, _, _ = rlp.decode(raw)
    sent = int.from_bytes(expiry, "big") - int.from_bytes(ttl, "big")
    return sent.to_bytes(4, "big") + keccak256(raw) + topic


def _pages(store, lower, upper, *, topics=(), bloom=None, limit=100):
    cursor, pages = b"", []
    while True:
        query = EnvelopeQuery(lower, upper, topics=topics, bloom=bloom, limit=limit, cursor=cursor)
        page = store.query(query)
        pages.append(page)
        if not page.next_cursor:
            return pages
        cursor = page.next_cursor


def _check_source(source, history, lower, upper, topics, limit, *, by_bloom=False) -> list:
    """Page ``source`` for ``topics`` (or their bloom) and check the pages; returns them."""
    if by_bloom:
        pages = _pages(source, lower, upper, bloom=topics_to_bloom(topics), limit=limit)
    else:
        pages = _pages(source, lower, upper, topics=topics, limit=limit)
    _check_ascending_pages(pages, history, lower, upper, topics, limit)
    return pages


def _check_ascending_pages(pages, history, lower, upper, topics, limit) -> None:
    expected = sorted(
        (
            raw
            for raw in history
            if lower <= int.from_bytes(_key(raw)[:4], "big") <= upper and _key(raw)[36:] in topics
        ),
        key=_key,
    )
    got = [raw for page in pages for _, raw in page.envelopes]
    assert got == expected
    for page in pages:
        assert [key for key, _ in page.envelopes] == [_key(raw) for _, raw in page.envelopes]
        if len(page.envelopes) == limit:
            assert page.next_cursor == _key(page.envelopes[-1][1])[:36]
        else:
            assert page.next_cursor == b""


@pytest.fixture(scope="module")
def history() -> list[bytes]:
    return _history()


def test_memory_store_status_go_paging(history) -> None:
    store = MemoryEnvelopeStore(history)
    assert len(store) == len(history)
    assert store.add(history[0]) == _key(history[0])  # idempotent
    pages = _check_source(store, history, T0 + 100, T0 + 400, (TOPICS[0], TOPICS[1]), 37)
    assert len(pages) > 3
    # Bloom instead of topics.
    _check_source(store, history, T0, T0 + 500, (TOPICS[2],), 50, by_bloom=True)
    bloom = topics_to_bloom([TOPICS[2]])
    # Topics override the bloom.
    page = store.query(EnvelopeQuery(T0, T0 + 500, topics=(TOPICS[0],), bloom=bloom, limit=1000))
    assert {key[36:] for key, _ in page.envelopes} == {TOPICS[0]}


def test_exactly_full_last_page_is_followed_by_an_empty_one(history) -> None:
    store = MemoryEnvelopeStore(history)
    query = EnvelopeQuery(T0, T0 + 500, topics=tuple(TOPICS), limit=1000)
    total = len(store.query(query).envelopes)
    pages = _pages(store, T0, T0 + 500, topics=tuple(TOPICS), limit=total)
    assert [len(p.envelopes) for p in pages] == [total, 0]


def test_leveldb_source_pages_like_memory(tmp_path, history) -> None:
    from waku_legacy.mailserver_compat.storage.leveldb import LevelDBEnvelopeStore

    with LevelDBEnvelopeStore(tmp_path / "ldb", create=True) as db:
        db.put_many((_key(raw), raw) for raw in history)
    source = open_envelope_store(f"leveldb:{tmp_path / 'ldb'}")
    assert isinstance(source, LevelDBSource)
    try:
        _check_source(source, history, T0 + 50, T0 + 450, (TOPICS[1], TOPICS[2]), 41)
        _check_source(source, history, T0, T0 + 500, (TOPICS[0],), 64, by_bloom=True)
    finally:
        source.close()


def test_v2_store_serves_original_envelopes(tmp_path, history) -> None:
    from waku_legacy.store import StoredMessage, open_store

    store = open_store(f"sqlite:///{tmp_path / 'store.sqlite3'}")
    rows = []
    for raw in history:
        envelope = Envelope.decode(raw)
        rows.append(
            StoredMessage(
                message_hash=keccak256(b"v2" + raw),
                pubsub_topic="/waku/2/default-waku/proto",
                content_topic=v1_topic_to_content_topic(envelope.topic),
                payload=envelope.data,
                version=1,
                timestamp=envelope.sent_time * 10**9,
                envelope=raw,
                db_key=_key(raw),
            )
        )
    store.insert_messages(rows)
    source = V2StoreSource(store, batch=50)  # small batches: the adapter pages internally
    try:
        _check_source(source, history, T0 + 10, T0 + 490, (TOPICS[0], TOPICS[2]), 70)
        _check_source(source, history, T0, T0 + 500, (TOPICS[1],), 90, by_bloom=True)
    finally:
        source.close()


@pytest.mark.postgres
def test_legacy_postgres_source_pages_newest_first(postgres_dsn, history) -> None:
    from waku_legacy.mailserver_compat.storage.postgres import PostgresEnvelopeStore

    with PostgresEnvelopeStore(postgres_dsn, create_schema=True) as db:
        db._conn.execute("DELETE FROM envelopes")
        db._conn.commit()
        db.insert_rows((_key(r), r, _key(r)[36:], topic_to_bloom(_key(r)[36:])) for r in history)
    source = open_envelope_store("mailserver+" + postgres_dsn)
    assert isinstance(source, LegacyPostgresSource)
    try:
        pages = _pages(source, T0 + 100, T0 + 400, topics=(TOPICS[0],), limit=29)
        got = [raw for page in pages for _, raw in page.envelopes]
        expected = sorted(
            (
                r
                for r in history
                if T0 + 100 <= int.from_bytes(_key(r)[:4], "big") <= T0 + 400
                and _key(r)[36:] == TOPICS[0]
            ),
            key=_key,
            reverse=True,  # status-go's PostgreSQL backend: ORDER BY id DESC, id < cursor
        )
        assert got == expected
        for page in pages[:-1]:
            assert page.next_cursor == _key(page.envelopes[-1][1])[:36]
        pages = _pages(source, T0, T0 + 500, bloom=topics_to_bloom([TOPICS[1]]), limit=100)
        assert sorted(raw for p in pages for _, raw in p.envelopes) == sorted(
            r for r in history if _key(r)[36:] == TOPICS[1]
        )
    finally:
        source.close()


def test_open_envelope_store_urls(tmp_path, history) -> None:
    from waku_legacy.errors import ConfigError
    from waku_legacy.mailserver_compat.storage.dump import DumpWriter

    with DumpWriter(tmp_path / "h.dump") as writer:
        for raw in history[:10]:
            writer.append(raw)
    store = open_envelope_store(f"dump:{tmp_path / 'h.dump'}")
    assert isinstance(store, MemoryEnvelopeStore) and len(store) == 10
    assert len(open_envelope_store("memory:")) == 0
    with pytest.raises(ConfigError):
        open_envelope_store("leveldb://relative")


def test_bundles_fit_the_message_size() -> None:
    envelopes = [bytes([i % 256]) * (100 + i) for i in range(200)]
    bundles = bundle_envelopes(envelopes, 4096)
    assert [e for b in bundles for e in b] == envelopes
    for bundle in bundles:
        assert len(rlp.encode([rlp.decode(rlp.encode(e)) for e in bundle])) <= 4096 + 9 * 200
        assert sum(len(e) for e in bundle) + 9 <= 4096 or len(bundle) == 1
    assert bundle_envelopes([b"x" * 10_000], 4096) == [[b"x" * 10_000]]  # alone if too big
    assert bundle_envelopes([], 4096) == []


def test_rate_limiter_and_seen_set() -> None:
    limiter = RateLimiter(2.0)
    assert limiter.allow(b"a", 100.0) and not limiter.allow(b"a", 101.0)
    assert limiter.allow(b"b", 101.0) and limiter.allow(b"a", 102.0)
    assert RateLimiter(0).allow(b"a", 1.0) and RateLimiter(0).allow(b"a", 1.0)
    seen = SeenSet(3)
    assert all(seen.add(bytes([i])) for i in range(4))
    assert not seen.add(bytes([3])) and bytes([0]) not in seen and len(seen) == 3


def _plain(request_id: bytes, **fields) -> bytes:
    values = dict(lower=T0, upper=T0 + 500, limit=0, cursor=b"", bloom=b"", topics=(TOPICS[0],))
    values.update(fields)
    return encode_plain_request(MessagesRequest(request_id=request_id, **values))


def test_core_prepare_defaults_and_response(history) -> None:
    clock = [float(T0 + 1000)]
    core = MailServerCore(
        MemoryEnvelopeStore(history),
        generate_private_key(),
        MailServerConfig(rate_limit=5.0, max_message_size=2048, limits=V1Limits(request_burst=1)),
        clock=lambda: clock[0],
    )
    prepared = core.prepare(b"peer", _plain(b"\x01" * 32, upper=0))
    assert prepared.request.limit == 1000  # 0 means the maximum
    assert prepared.request.upper == T0 + 1000 + 60  # 0 means now + 60 s
    page = core.query(prepared)
    bundles, complete = core.response(prepared, page)
    assert [raw for b in bundles for raw in b] == [raw for _, raw in page.envelopes]
    assert all(len(b) == 1 or sum(map(len, b)) <= 2048 for b in bundles) and len(bundles) > 1
    assert complete.request_id == b"\x01" * 32
    assert complete.last_envelope_hash == keccak256(page.envelopes[-1][1])
    assert complete.cursor == b""
    with pytest.raises(RequestRejected, match="rate limit exceeded") as info:
        core.prepare(b"peer", _plain(b"\x02" * 32))
    assert info.value.request_id == b"\x02" * 32
    clock[0] += 5
    core.prepare(b"peer", _plain(b"\x03" * 32))
    with pytest.raises(RequestRejected) as info:
        core.prepare(b"peer", b"\x01\x02")
    assert info.value.request_id is None


def test_core_min_request_pow(history) -> None:
    from waku_legacy.mailserver_compat.wire.request import encode_envelope_request

    core = MailServerCore(
        MemoryEnvelopeStore(history),
        generate_private_key(),
        MailServerConfig(rate_limit=0, min_request_pow=1000.0),
    )
    envelope = encode_envelope_request(
        MessagesRequest(b"\x00" * 32, T0, T0 + 10, 10, b"", b"", (TOPICS[0],)),
        sign_with=generate_private_key(),
    )
    with pytest.raises(RequestRejected, match="PoW too low") as info:
        core.prepare(b"peer", envelope.encode())
    assert info.value.request_id == envelope.hash()
