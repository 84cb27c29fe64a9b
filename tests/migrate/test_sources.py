"""Source read tasks without Spark: saved REST pages, nwaku SQLite files of two schema
generations, envelope dumps with damage, LevelDB key ranges."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pyarrow as pa
import pytest

from tests.waku_legacy.store.test_rest_client import NwakuRestServer, v2_messages
from waku_legacy.identity.topic_mapping import TopicMapping
from waku_legacy.migrate.config import parse_config
from waku_legacy.migrate.decode import decode_batch
from waku_legacy.migrate.sources import plan_source, read_task
from waku_legacy.store import open_store
from waku_legacy.store.rest_client import StorePager, fetch_pages

MAPPING = TopicMapping("/waku/2/rs/16/32")


def _source(tmp_path: Path, **table) -> object:
    data = {"source": [table], "output": {"store": "", "archive_dir": "a", "torrent_dir": "t"}}
    return parse_config(data, base_dir=tmp_path).sources[0]


def _read_all(source, tmp_path: Path, parts: int = 3) -> pa.Table:
    tasks = plan_source(source, parts, str(tmp_path / "work"))
    batches = [b for task in tasks for b in read_task(task)]
    return pa.Table.from_batches(batches) if batches else pa.table({})


def _decoded(table: pa.Table) -> list[dict]:
    return [r for b in table.to_batches() for r in decode_batch(b, MAPPING).to_pylist()]


@pytest.mark.network
def test_saved_rest_pages_source(tmp_path: Path) -> None:
    messages = v2_messages(25)
    pages = tmp_path / "pages"
    with NwakuRestServer(messages) as server:
        list(fetch_pages(server.url, StorePager(page_size=10), save_dir=pages))
    (pages / "page-999999.json").write_text("{broken")
    table = _read_all(_source(tmp_path, kind="store-rest", path=str(pages)), tmp_path, parts=2)
    rows = _decoded(table)
    good = [r for r in rows if not r["quarantined"]]
    assert sorted(r["message_hash"] for r in good) == sorted(m.message_hash for m in messages)
    bad = [r for r in rows if r["quarantined"]]
    assert len(bad) == 1 and "unreadable page" in bad[0]["reason"]
    assert all(r["location"].startswith(str(pages)) for r in rows)


def test_nwaku_sqlite_source_current_and_old_schema(tmp_path: Path) -> None:
    messages = v2_messages(20)
    current = tmp_path / "current.sqlite3"
    with open_store(str(current)) as store:
        store.insert_messages(messages)
    rows = _decoded(_read_all(_source(tmp_path, kind="store-sqlite", path=str(current)), tmp_path))
    assert sorted(r["message_hash"] for r in rows if not r["quarantined"]) == sorted(
        m.message_hash for m in messages
    )
    assert all(r["location"].startswith("hash=0x") for r in rows)
    # nwaku before messageHash/meta: (pubsubTopic, contentTopic, payload, version, timestamp,
    # id, storedAt); the hash is computed.
    old = tmp_path / "old.sqlite3"
    with sqlite3.connect(old) as db:
        db.execute("CREATE TABLE Message (pubsubTopic BLOB NOT NULL, contentTopic BLOB NOT NULL,"
                   " payload BLOB, version INTEGER NOT NULL, timestamp INTEGER NOT NULL, id BLOB,"
                   " storedAt INTEGER NOT NULL, CONSTRAINT messageIndex PRIMARY KEY (storedAt,"
                   " id, pubsubTopic)) WITHOUT ROWID")  # fmt: skip
        db.executemany("INSERT INTO Message VALUES (?, ?, ?, ?, ?, ?, ?)", [
            (m.pubsub_topic.encode(), m.content_topic.encode(), m.payload, m.version,
             m.timestamp, bytes([i]), m.timestamp) for i, m in enumerate(messages)
        ])  # fmt: skip
    rows = _decoded(_read_all(_source(tmp_path, kind="store-sqlite", path=str(old)), tmp_path))
    assert sorted(r["message_hash"] for r in rows) == sorted(m.message_hash for m in messages)


def test_dump_splits_and_damage(tmp_path: Path) -> None:
    from waku_legacy.mailserver_compat.storage.dump import DumpWriter

    bodies = [b"\xc0" * (i % 5 + 1) for i in range(300)]  # RLP-ish, not envelopes
    dump = tmp_path / "a.dump"
    with DumpWriter(dump) as writer:
        for body in bodies:
            writer.append(body)
    raw = bytearray(dump.read_bytes())
    raw[8 + 4] ^= 1  # the first record's CRC
    dump.write_bytes(bytes(raw))
    table = _read_all(_source(tmp_path, kind="envelope-dump", path=str(tmp_path / "*.dump")),
                      tmp_path, parts=4)  # fmt: skip
    errors = [e for e in table.column("error").to_pylist() if e]
    assert len(errors) == 1 and "CRC" in errors[0]
    assert table.num_rows == 300  # 299 records + the damaged range
    assert len(plan_source(_source(tmp_path, kind="envelope-dump", path=str(dump)), 4, "w")) == 4


def test_missing_paths_are_clear_errors(tmp_path: Path) -> None:
    from waku_legacy.errors import WakuLegacyError

    for table in (
        {"kind": "envelope-dump", "path": str(tmp_path / "none-*.dump")},
        {"kind": "store-sqlite", "path": str(tmp_path / "none.sqlite3")},
        {"kind": "store-rest", "path": str(tmp_path / "no-pages")},
    ):
        with pytest.raises(WakuLegacyError):
            plan_source(_source(tmp_path, **table), 2, "w")
