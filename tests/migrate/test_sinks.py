"""The driver's SQLite store (migrate/sinks.py): step 1's hash-sorted files merged into one
stream in hash order (``iter_kept_batches``), without the quarantined rows and without the
duplicate copies step 1 found, and written by ``write_sqlite_store`` as the store's own
``insert_messages`` writes the same rows (no Spark: the files are written here with
pyarrow)."""

from __future__ import annotations

import hashlib
import random
import sqlite3
from collections import Counter
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from waku_legacy.migrate.dedup import DUPLICATE_COLUMNS
from waku_legacy.migrate.records import MESSAGE_SCHEMA
from waku_legacy.migrate.sinks import STORE_COLUMNS, iter_kept_batches, write_sqlite_store
from waku_legacy.store import open_store


def _row(n: int, source: str, quarantined: bool = False) -> dict:
    row = dict.fromkeys(MESSAGE_SCHEMA.names)
    row.update(
        message_hash=None if quarantined else hashlib.sha256(b"%d" % n).digest(),
        pubsub_topic="/waku/2/rs/16/32", content_topic="/waku/1/0x01020304/rfc26",
        payload=b"p%d" % n, version=1, timestamp=n, source=source, location=f"{source}:{n}",
        quarantined=quarantined, envelope=b"e%d" % n if source != "rest" else None,
    )  # fmt: skip
    return row


def _write(path: Path, rows: list[dict]) -> None:
    rows = sorted(rows, key=lambda r: r["message_hash"] or b"")
    # small row groups and batches: the merge crosses their edges
    pq.write_table(pa.Table.from_pylist(rows, schema=MESSAGE_SCHEMA), path, row_group_size=7)


def _files(tmp_path: Path, duplicates: list[tuple[bytes, str, str]]) -> tuple[Path, Path]:
    rnd = random.Random(5)
    rows = [_row(n, source) for n in range(200) for source in ("ms1", "ms2", "rest")
            if rnd.random() < 0.6]  # fmt: skip
    rows += [_row(n, "ms2", quarantined=True) for n in range(9)]
    rnd.shuffle(rows)
    messages, dups = tmp_path / "messages", tmp_path / "duplicates"
    messages.mkdir(parents=True)
    dups.mkdir(parents=True)
    for i in range(3):
        _write(messages / f"part-{i:05d}.parquet", rows[i::3])
    # one file per dedup bucket: each hash-sorted, interleaved with the others
    ordered = sorted(duplicates)
    for i, chunk in enumerate((ordered[0::3], ordered[1::3], ordered[2::3])):
        table = pa.table(
            {c: [d[k] for d in chunk] for k, c in enumerate(DUPLICATE_COLUMNS)},
            schema=pa.schema(
                [("message_hash", pa.binary()), ("source", pa.string()), ("location", pa.string())]
            ),
        )
        pq.write_table(table, dups / f"part-{i:05d}.parquet")
    return messages, dups


def _all_rows(messages: Path) -> list[dict]:
    return pq.read_table(messages).to_pylist()


def _kept(messages: Path, dups: Path) -> list[tuple]:
    tables = list(iter_kept_batches(messages, dups))
    assert all(t.column_names == STORE_COLUMNS for t in tables)
    return [tuple(r[c] for c in STORE_COLUMNS) for t in tables for r in t.to_pylist()]


def test_every_kept_row_once_in_hash_order(tmp_path) -> None:
    messages, dups = _files(tmp_path, [])
    rows = _kept(messages, dups)
    expected = [r for r in _all_rows(messages) if not r["quarantined"]]
    assert Counter(rows) == Counter(tuple(r[c] for c in STORE_COLUMNS) for r in expected)
    assert [r[0] for r in rows] == sorted(r[0] for r in rows)


def test_the_duplicate_copies_are_left_out(tmp_path) -> None:
    probe, _ = _files(tmp_path / "probe", [])
    everything = [r for r in _all_rows(probe) if not r["quarantined"]]
    rnd = random.Random(9)
    # every copy but the first of a hash, and all copies of a few hashes (another hash won)
    by_hash: dict[bytes, list[dict]] = {}
    for r in everything:
        by_hash.setdefault(r["message_hash"], []).append(r)
    dropped = set()
    for h, copies in by_hash.items():
        start = 0 if rnd.random() < 0.1 else 1
        dropped |= {(h, c["source"], c["location"]) for c in copies[start:]}
    messages, dups = _files(tmp_path / "run", sorted(dropped))
    rows = _kept(messages, dups)
    kept = [r for r in everything if (r["message_hash"], r["source"], r["location"]) not in dropped]
    assert Counter(rows) == Counter(tuple(r[c] for c in STORE_COLUMNS) for r in kept)
    assert [r[0] for r in rows] == sorted(r[0] for r in rows)
    assert len(rows) < len(everything)


def test_the_store_holds_what_insert_messages_writes(tmp_path) -> None:
    messages, dups = _files(tmp_path, [])
    rows = _kept(messages, dups)
    with open_store(f"sqlite:///{tmp_path}/ours.sqlite3") as store:
        new = write_sqlite_store(store, iter_kept_batches(messages, dups), batch_size=50)
    assert new == len({r[0] for r in rows})  # copies of one hash: the first one stays
    with open_store(f"sqlite:///{tmp_path}/theirs.sqlite3") as store, store.bulk_load():
        store.insert_messages(rows, batch_size=50)
    dumps = []
    for name in ("ours", "theirs"):
        with sqlite3.connect(tmp_path / f"{name}.sqlite3") as db:
            dumps.append(list(db.iterdump()))
    assert dumps[0] == dumps[1]
