"""Every store page costs about a page of work, whatever the filter (issue 10, item 5:
"bound the work of every request"). A pubsub topic alone (scanned the whole time index:
0.5 s at 200k messages when it matches nothing) and several content topics (every message
of the topics collected and sorted for each page) read at most a page per content topic
from an index now. Work is measured as SQLite virtual-machine steps (progress handler), not
time; pages are checked against a reference computed in Python, on both backends."""

from __future__ import annotations

import pytest

from tests.bridge.support import deterministic_hash
from tests.helpers import fresh_database
from waku_legacy.store import StoredMessage, StoreQuery, open_store

PUBSUBS = ["/waku/2/rs/16/32", "/waku/2/rs/16/64"]
TOPICS = [f"/app/1/topic-{i}/proto" for i in range(10)]
N = 20_000
BASE_TS = 1_700_000_000_000_000_000


def _rows(n: int = N) -> list[StoredMessage]:
    rows = []
    for i in range(n):
        pubsub, topic = PUBSUBS[i % 2], TOPICS[i % 10]
        payload, ts = b"m%d" % i, BASE_TS + (i // 3) * 1000  # ties of three
        rows.append(
            StoredMessage(
                deterministic_hash(pubsub, payload, topic, None, ts), pubsub, topic, payload, 0, ts
            )
        )
    return rows


def _reference(rows, *, pubsub=None, topics=(), ascending=True):
    chosen = [
        r for r in rows if (pubsub is None or r.pubsub_topic == pubsub)
        and (not topics or r.content_topic in topics)
    ]  # fmt: skip
    chosen.sort(key=lambda r: (r.timestamp, r.message_hash), reverse=not ascending)
    return [r.message_hash for r in chosen]


def _page_all(store, limit: int, **query) -> list[bytes]:
    got, cursor = [], None
    while True:
        page = store.query(StoreQuery(limit=limit, cursor=cursor, include_data=True, **query))
        keys = [(m.timestamp, m.message_hash) for m in page.messages]
        assert keys == sorted(keys)  # every page is chronological, whatever the direction
        hashes = [m.message_hash for m in page.messages]
        got += hashes if query.get("ascending", True) else hashes[::-1]
        cursor = page.cursor
        if cursor is None:
            return got


@pytest.fixture(scope="module")
def sqlite_store(tmp_path_factory):
    path = tmp_path_factory.mktemp("bounded") / "s.sqlite3"
    rows = _rows()
    store = open_store(f"sqlite:///{path}")
    store.insert_messages(rows)
    yield store, rows
    store.close()


QUERIES = [
    {"pubsub_topic": "/waku/2/rs/16/999"},  # matches nothing
    {"pubsub_topic": PUBSUBS[0]},
    {"content_topics": TOPICS},  # ten topics, 2,000 messages each
    {"content_topics": TOPICS[:3], "ascending": False},
    {"content_topics": [TOPICS[0]]},
    {"content_topics": TOPICS, "pubsub_topic": PUBSUBS[1]},
    {"content_topics": TOPICS, "pubsub_topic": "/waku/2/rs/16/999"},
]


@pytest.mark.parametrize("query", QUERIES, ids=lambda q: ",".join(f"{k}" for k in q))
def test_a_page_reads_about_a_page_whatever_the_filter(sqlite_store, query):
    store, _ = sqlite_store
    steps = [0]

    def count() -> int:
        steps[0] += 1
        return 0

    store._db.set_progress_handler(count, 100)  # one tick per 100 VM instructions
    try:
        store.query(StoreQuery(limit=20, **query))
        first = steps[0]
        page = store.query(StoreQuery(limit=20, **query))
        if page.cursor is not None:
            steps[0] = 0
            store.query(StoreQuery(limit=20, cursor=page.cursor, **query))
            first = max(first, steps[0])
    finally:
        store._db.set_progress_handler(None, 0)
    # 21 index entries per content topic at most: at most a few thousand instructions
    # (measured: 0 to 2,600), never a scan or sort of thousands of rows (100,000 to 280,000
    # before).
    assert first * 100 < 10_000, f"{first * 100} VM instructions for one 20-message page"


@pytest.mark.parametrize("query", QUERIES, ids=lambda q: ",".join(f"{k}" for k in q))
def test_paging_still_returns_every_match_in_order(sqlite_store, query):
    store, rows = sqlite_store
    expected = _reference(
        rows, pubsub=query.get("pubsub_topic"), topics=query.get("content_topics", ()),
        ascending=query.get("ascending", True),
    )  # fmt: skip
    assert _page_all(store, 700, **query) == expected


@pytest.mark.postgres
def test_postgresql_pages_the_same(postgres_dsn):
    with fresh_database(postgres_dsn, "bp_") as url:
        rows = _rows(3000)
        with open_store(url) as store:
            store.insert_messages(rows)
            for query in QUERIES:
                expected = _reference(
                    rows, pubsub=query.get("pubsub_topic"),
                    topics=query.get("content_topics", ()),
                    ascending=query.get("ascending", True),
                )  # fmt: skip
                assert _page_all(store, 130, **query) == expected, query
