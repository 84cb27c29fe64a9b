"""The v2 store (nwaku schema) on SQLite and on a real PostgreSQL: idempotent inserts,
nwaku's query semantics checked against a plain Python model of them, v1 envelopes."""

from __future__ import annotations

import hashlib
import os
import random
import signal
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path

import psycopg
import pytest

from tests.helpers import fresh_database
from tests.waku_legacy.store.support import expected_hashes
from waku_legacy.store import (
    CursorNotFound,
    StoredMessage,
    StoreError,
    StoreQuery,
    V1EnvelopeQuery,
    open_store,
    sqlite_path,
)

PUBSUB = ["/waku/2/rs/16/128", "/waku/2/rs/16/32"]
TOPICS = [f"/waku/1/0x0000000{i}/rfc26" for i in range(4)]


def _rows(n: int, seed: int = 1) -> list[StoredMessage]:
    rnd = random.Random(seed)
    rows = []
    for i in range(n):
        h = hashlib.sha256(b"m%d" % i).digest()
        ts = 1_600_000_000_000_000_000 + rnd.randrange(50) * 1_000_000_000  # many ties
        envelope = b"env%d" % i if i % 3 == 0 else None
        db_key = (
            (ts // 10**9).to_bytes(4, "big") + h + bytes([0, 0, 0, i % 4]) if envelope else None
        )
        rows.append(
            StoredMessage(
                h,
                PUBSUB[i % 2],
                TOPICS[i % 4],
                b"p%d" % i,
                1,
                ts,
                None if i % 5 else b"meta",
                envelope,
                db_key,
            )
        )
    return rows


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def store_url(request, tmp_path: Path):
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path}/store.sqlite3"
        return
    with fresh_database(request.getfixturevalue("postgres_dsn"), "st_") as url:
        yield url


def test_insert_is_idempotent_and_pages_match_theexpected_hashes(store_url: str) -> None:
    rows = _rows(300)
    with open_store(store_url) as store:
        assert store.insert_messages(rows, batch_size=64) == 300
        assert store.insert_messages(rows[:100] + rows[250:]) == 0
        assert store.count() == 300 and store.count_envelopes() == 100
        cases = [
            {},
            {"pubsub": PUBSUB[0]},
            {"topics": TOPICS[1:3]},
            {
                "pubsub": PUBSUB[1],
                "topics": [TOPICS[1]],
                "start": rows[7].timestamp,
                "end": rows[9].timestamp + 20 * 10**9,
            },
            {"hashes": [r.message_hash for r in rows[::7]]},
        ]
        for case in cases:
            for ascending in (True, False):
                seen, cursor = [], None
                while True:
                    page = store.query(
                        StoreQuery(
                            pubsub_topic=case.get("pubsub"),
                            content_topics=case.get("topics", ()),
                            start_time=case.get("start"),
                            end_time=case.get("end"),
                            hashes=case.get("hashes", ()),
                            cursor=cursor,
                            ascending=ascending,
                            limit=13,
                        )
                    )
                    stamps = [(m.timestamp, m.message_hash) for m in page.messages]
                    assert stamps == sorted(stamps)  # chronological within a page, always
                    seen.extend(
                        m.message_hash
                        for m in (page.messages if ascending else reversed(page.messages))
                    )
                    cursor = page.cursor
                    if cursor is None:
                        break
                want = expected_hashes(rows, ascending=ascending, **case)
                assert seen == want, case


def test_rows_round_trip_and_envelopes(store_url: str) -> None:
    rows = _rows(30)
    with open_store(store_url) as store:
        store.insert_messages(rows)
        for r in rows:
            got = store.get_message(r.message_hash)
            assert got == r._replace(envelope=None, db_key=None)
            assert store.get_envelope(r.message_hash) == r.envelope
        page = store.query(StoreQuery(include_data=False, limit=5))
        assert [m.message_hash for m in page.messages] == expected_hashes(rows)[:5]
        # The batched lookup agrees with the one-by-one lookup, over more hashes than one
        # SQL IN list takes, with repeats and unknown hashes in the request.
        unknown = [(i << 8 | 0xEE).to_bytes(32, "big") for i in range(600)]
        asked = unknown[:300] + [r.message_hash for r in rows] * 2 + unknown[300:]
        assert store.get_envelopes(asked) == {
            r.message_hash: r.envelope for r in rows if r.envelope is not None
        }
        assert store.get_envelopes([]) == {}
        # issue 24: the store's pubsub topics (the bridge announces their shards)
        assert sorted(store.pubsub_topics()) == sorted({r.pubsub_topic for r in rows})


def test_v1_envelopes_page_by_db_key(store_url: str) -> None:
    rows = _rows(90)
    with_env = sorted((r.db_key, r.envelope) for r in rows if r.envelope)
    lo, hi = b"\x00" * 40, b"\xff" * 40
    with open_store(store_url) as store:
        store.insert_messages(rows)
        for descending in (False, True):
            seen, cursor = [], None
            while True:
                page = store.query_v1_envelopes(
                    V1EnvelopeQuery(lo, hi, cursor=cursor, limit=7, descending=descending)
                )
                if not page:
                    break
                seen.extend(page)
                cursor = page[-1][0][:36]
            assert seen == (with_env[::-1] if descending else with_env)
        topic = bytes([0, 0, 0, 0])
        got = store.query_v1_envelopes(V1EnvelopeQuery(lo, hi, topics=[topic], limit=1000))
        assert got == [kv for kv in with_env if kv[0][36:] == topic]


def test_query_errors(store_url: str) -> None:
    with open_store(store_url) as store:
        store.insert_messages(_rows(3))
        with pytest.raises(CursorNotFound):
            store.query(StoreQuery(cursor=b"\x01" * 32))
        with pytest.raises(StoreError, match="32-byte"):
            store.query(StoreQuery(cursor=b"\x01" * 31))
        with pytest.raises(StoreError, match="all-zero"):
            store.query(StoreQuery(cursor=b"\x00" * 32))


@pytest.mark.postgres
def test_postgres_columns_are_nwaku_hex(postgres_dsn: str) -> None:
    with fresh_database(postgres_dsn, "hx_") as dsn:
        with open_store(dsn) as store:
            store.insert_messages(
                [StoredMessage(b"\xab" * 32, "/p", "/c", b"\x01\xff", 1, 5, b"\x02")]
            )
        with psycopg.connect(dsn) as conn:
            row = conn.execute(
                "SELECT messageHash, pubsubTopic, contentTopic, payload, version, timestamp, meta"
                " FROM messages"
            ).fetchone()
            lookup = conn.execute("SELECT messageHash, timestamp FROM messages_lookup").fetchone()
        assert row == ("ab" * 32, "/p", "/c", "01ff", 1, 5, "02")
        assert lookup == ("ab" * 32, 5)


def test_sqlite_schema_is_nwakus(tmp_path: Path) -> None:
    path = tmp_path / "s.sqlite3"
    open_store(str(path)).close()
    with sqlite3.connect(path) as db:
        cols = db.execute("PRAGMA table_info(Message)").fetchall()
        sql = db.execute("SELECT sql FROM sqlite_master WHERE name = 'Message'").fetchone()[0]
        indexes = {r[1] for r in db.execute("PRAGMA index_list(Message)")}
    assert [(c[1], c[2], c[5]) for c in cols] == [
        ("messageHash", "BLOB", 1),
        ("pubsubTopic", "BLOB", 0),
        ("contentTopic", "BLOB", 0),
        ("payload", "BLOB", 0),
        ("version", "INTEGER", 0),
        ("timestamp", "INTEGER", 0),
        ("meta", "BLOB", 0),
    ]
    assert "WITHOUT ROWID" in sql and "i_ts" in indexes


def test_store_urls(tmp_path: Path) -> None:
    assert sqlite_path("sqlite:///tmp/a.db") == "/tmp/a.db"
    assert sqlite_path("sqlite:////tmp/a.db") == "/tmp/a.db"
    assert sqlite_path("sqlite:rel/a.db") == "rel/a.db"
    assert sqlite_path("plain/a.db") == "plain/a.db"
    with pytest.raises(StoreError, match="neither"):
        open_store("mysql://x/y")
    with pytest.raises(StoreError, match="empty"):
        open_store("  ")


def test_sqlite_kill_mid_write_then_rerun_completes(tmp_path: Path) -> None:
    """SIGKILL a writer in the middle of a long insert; the file stays readable, holds only
    whole batches, and a rerun ends with exactly the full set."""
    path = tmp_path / "k.sqlite3"
    script = textwrap.dedent(f"""
        import hashlib, os, sys, time
        from waku_legacy.store import open_store, StoredMessage
        store = open_store({str(path)!r})
        def rows():
            for i in range(60_000):
                if i == 6_000:
                    print("go", flush=True)
                if i > 6_000:
                    time.sleep(0.0002)  # keep the writer busy until it is killed
                h = hashlib.sha256(b"%d" % i).digest()
                yield StoredMessage(h, "/p", "/c", b"x" * 50, 1, i, None, b"e", None)
        store.insert_messages(rows(), batch_size=1000)
        print("done", flush=True)
    """)
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    assert proc.stdout.readline().strip() == "go"
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    with open_store(str(path)) as store:
        partial = store.count()
        assert 0 < partial < 60_000 and partial % 1000 == 0
        assert store.count_envelopes() == partial
        rows = (
            StoredMessage(
                hashlib.sha256(b"%d" % i).digest(), "/p", "/c", b"x" * 50, 1, i, None, b"e", None
            )
            for i in range(60_000)
        )
        assert store.insert_messages(rows, batch_size=5000) == 60_000 - partial
        assert store.count() == 60_000 and store.count_envelopes() == 60_000


def test_bulk_load_defers_indexes_and_restores_them(tmp_path: Path) -> None:
    path = tmp_path / "b.sqlite3"
    rows = _rows(200)
    with open_store(str(path)) as store:
        with store.bulk_load():
            store.insert_messages(rows[:100])
            with sqlite3.connect(path) as db:
                during = {
                    r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type='index'")
                }
        with store.bulk_load():  # not empty any more: indexes stay
            store.insert_messages(rows)
        page = store.query(StoreQuery(content_topics=[TOPICS[0]], limit=500))
        assert [m.message_hash for m in page.messages] == expected_hashes(rows, topics=[TOPICS[0]])
    with sqlite3.connect(path) as db:
        after = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type='index'")}
    assert {"i_ts", "i_query", "i_v1_dbkey"} <= after
    assert not ({"i_ts", "i_query", "i_v1_dbkey"} & during)
