"""Deduplication on the keys alone (migrate/dedup.py): the copies :func:`copies_to_drop`
finds in each bucket of keys (pyarrow, in the Python workers), and :func:`mark_duplicates`
flags, are exactly those a Spark window over every full row marks (the rule written
independently here, as the pipeline ran it before), whatever the buckets and input order;
the group counts are every row's."""

from __future__ import annotations

import hashlib
import random
from collections import Counter
from pathlib import Path

import pyarrow as pa
import pytest

from waku_legacy.migrate.dedup import (
    DUPLICATE_COLUMNS,
    GROUP_COLUMNS,
    KEY_COLUMNS,
    copies_to_drop,
    group_counts,
    key_buckets,
    mark_duplicates,
    write_duplicate_files,
)
from waku_legacy.migrate.message_files import write_message_file
from waku_legacy.migrate.records import MESSAGE_SCHEMA, spark_ddl


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


def _window_flags(spark, rows: list[dict]) -> dict[tuple[str, str], bool]:
    """The rule as a Spark window over the full rows: per key, the first by (v1 first,
    rank, source, location) is kept, every later copy flagged unless quarantined."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    frame = spark.createDataFrame(rows, spark_ddl(MESSAGE_SCHEMA)).repartition(3)
    order = Window.partitionBy("dedup_key").orderBy("from_v2", "rank", "source", "location")
    flagged = frame.withColumn(
        "duplicate", (F.row_number().over(order) > 1) & ~F.col("quarantined")
    )
    return {(r["source"], r["location"]): r["duplicate"] for r in flagged.collect()}


def _keys(rows: list[dict]) -> pa.Table:
    return pa.Table.from_pylist([{c: r[c] for c in KEY_COLUMNS} for r in rows])


def _copies(rows: list[dict], buckets: int) -> pa.Table:
    """copies_to_drop of each bucket of the rows' keys, together."""
    keys = _keys(rows)
    which = key_buckets(keys.column("dedup_key"), buckets)
    return pa.concat_tables(
        [copies_to_drop(keys.filter(pa.array(which == b))) for b in range(buckets)]
    )


@pytest.mark.spark
@pytest.mark.parametrize("seed", [1, 3, 7])
def test_copies_to_drop_are_what_the_window_flags(spark, seed) -> None:
    rows = _rows(seed)
    expected = _window_flags(spark, rows)
    assert sum(expected.values()) > 0
    for buckets in (1, 4):
        copies = _copies(rows, buckets)
        dropped = {(r["source"], r["location"]) for r in copies.to_pylist()}
        assert dropped == {k for k, flagged in expected.items() if flagged}
    whole = copies_to_drop(_keys(rows)).to_pylist()
    identity = [tuple(r[c] for c in DUPLICATE_COLUMNS) for r in whole]
    assert identity == sorted(identity)  # hash order, the driver's stream's
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


def test_no_repeated_key_drops_nothing() -> None:
    rows = [r for r in _rows(5) if r["source"] == "ms1"]
    assert copies_to_drop(_keys(rows)).num_rows == 0


def test_group_counts_are_every_row_and_the_copies() -> None:
    rows = _rows(9)
    keys = _keys(rows)
    copies = copies_to_drop(keys)
    counts = group_counts(keys, copies).to_pylist()
    every = Counter(tuple(r[c] for c in GROUP_COLUMNS) for r in rows)
    assert {tuple(g[c] for c in GROUP_COLUMNS): g["count"]
            for g in counts if not g["duplicate"]} == every  # fmt: skip
    dropped = {(r["source"], r["location"]) for r in copies.to_pylist()}
    expected = Counter(tuple(r[c] for c in GROUP_COLUMNS) for r in rows
                       if (r["source"], r["location"]) in dropped)  # fmt: skip
    assert {tuple(g[c] for c in GROUP_COLUMNS): g["count"]
            for g in counts if g["duplicate"]} == expected  # fmt: skip


@pytest.mark.spark
def test_bucket_tasks_write_the_copies_and_mark_the_rows(spark, tmp_path: Path) -> None:
    rows = _rows(seed=11)
    keys_dir, dups = tmp_path / "keys", tmp_path / "duplicates"
    keys_dir.mkdir()
    buckets = 3
    for part in range(2):  # two step-1 partitions, each with its bucket files
        batch = pa.RecordBatch.from_pylist(rows[part::2], schema=MESSAGE_SCHEMA)
        paths = [keys_dir / f"part-{part:05d}-{b:05d}.parquet" for b in range(buckets)]
        write_message_file([batch], tmp_path / f"m{part}.parquet", paths)
    counts = write_duplicate_files(spark, keys_dir, dups, buckets)
    assert sum(g["count"] for g in counts if not g["duplicate"]) == len(rows)
    assert sorted(p.name for p in dups.iterdir()) == [f"part-{b:05d}.parquet" for b in range(3)]
    frame = spark.createDataFrame(rows, spark_ddl(MESSAGE_SCHEMA))
    marked = mark_duplicates(frame, spark.read.parquet(str(dups)))
    assert marked.count() == len(rows)
    assert set(marked.columns) == {*MESSAGE_SCHEMA.names, "duplicate"}
    flags = {(r["source"], r["location"]): r["duplicate"] for r in marked.collect()}
    assert flags == _window_flags(spark, rows)
    assert sum(g["count"] for g in counts if g["duplicate"]) == sum(flags.values())
