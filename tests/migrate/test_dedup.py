"""Deduplication on the keys alone (migrate/dedup.py): the copies :func:`duplicate_copies`
drops and :func:`mark_duplicates` flags are exactly those the window over every full row
(:func:`deduplicate`) marks, whatever the partitioning and input order."""

from __future__ import annotations

import hashlib
import random

import pytest

from waku_legacy.migrate.dedup import deduplicate, duplicate_copies, mark_duplicates
from waku_legacy.migrate.records import MESSAGE_SCHEMA, spark_ddl

pytestmark = [pytest.mark.spark]


def _rows(seed: int) -> list[dict]:
    """Copies of 60 messages over four sources (v1 and v2, some keys once, some up to four
    times, bridged copies under another message hash), and quarantined records."""
    rnd = random.Random(seed)
    sources = [("ms1", 0, False), ("ms2", 1, False), ("rest", 2, True), ("nwaku", 3, True)]
    rows = []
    for m in range(60):
        key = hashlib.sha256(b"key %d" % m).digest()
        for source, rank, from_v2 in rnd.sample(sources, rnd.randint(1, 4)):
            # a bridged v2 copy may have another hash (another pubsub topic), same key
            other = from_v2 and m % 3 == 0
            message_hash = hashlib.sha256(key + (b"v2" if other else b"")).digest()
            rows.append(_row(key, message_hash, source, rank, from_v2, f"loc={m}"))
    for q in range(5):
        key = hashlib.sha256(b"quarantined %d" % q).digest()
        rows.append({**_row(key, None, "ms2", 1, False, f"bad={q}"), "quarantined": True})
    rnd.shuffle(rows)
    return rows


def _row(key, message_hash, source, rank, from_v2, location) -> dict:
    row = dict.fromkeys(MESSAGE_SCHEMA.names)
    row.update(dedup_key=key, message_hash=message_hash, source=source, rank=rank,
               from_v2=from_v2, location=location, quarantined=False, payload=b"p",
               week="2022-W01")  # fmt: skip
    return row


def _flags(frame) -> dict[tuple[str, str], bool]:
    return {(r["source"], r["location"]): r["duplicate"] for r in frame.collect()}


@pytest.mark.parametrize("partitions", [1, 3, 7])
def test_key_only_dedup_flags_what_the_window_over_full_rows_flags(spark, partitions) -> None:
    rows = _rows(seed=partitions)
    frame = spark.createDataFrame(rows, spark_ddl(MESSAGE_SCHEMA)).repartition(partitions)
    expected = _flags(deduplicate(frame))
    copies = duplicate_copies(frame)
    assert _flags(mark_duplicates(frame, copies)) == expected
    assert sum(expected.values()) == copies.count() > 0
    # every repeated key keeps exactly one copy, the first by (v1 first, rank, location)
    kept = {}
    for r in rows:
        if not r["quarantined"] and not expected[r["source"], r["location"]]:
            assert r["dedup_key"] not in kept
            kept[r["dedup_key"]] = r
    for r in rows:
        best = kept.get(r["dedup_key"])
        if best is not None:
            assert (best["from_v2"], best["rank"]) <= (r["from_v2"], r["rank"])
    assert not any(expected[r["source"], r["location"]] for r in rows if r["quarantined"])


def test_the_marked_rows_are_the_rows(spark) -> None:
    rows = _rows(seed=11)
    frame = spark.createDataFrame(rows, spark_ddl(MESSAGE_SCHEMA)).repartition(4)
    marked = mark_duplicates(frame, duplicate_copies(frame))
    assert marked.count() == len(rows)
    assert set(marked.columns) == {*MESSAGE_SCHEMA.names, "duplicate"}
