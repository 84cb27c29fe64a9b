"""Step 1's files as the Python workers write them (migrate/message_files.py), without
Spark: every row once, the hashed ones in hash order (equal hashes in the order read) and
the quarantined ones after them, the key file row for row beside; the same rows whether a
task's rows fit in one run or are spilled and merged; nothing left at the paths when the
input or the write fails."""

from __future__ import annotations

import hashlib
import random
from collections.abc import Iterator
from pathlib import Path

import coincurve
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from waku_legacy.crypto.payload import encode_payload
from waku_legacy.faults import TASK_ENV_VAR
from waku_legacy.migrate.archives import CHANNEL_ARCHIVE_SCHEMA, archive_fields
from waku_legacy.migrate.dedup import KEY_COLUMNS, KEY_SCHEMA, key_buckets
from waku_legacy.migrate.message_files import write_message_file
from waku_legacy.migrate.records import MESSAGE_SCHEMA


def _rows(count: int, seed: int = 3) -> list[dict]:
    rnd = random.Random(seed)
    rows = []
    for n in range(count):
        row = dict.fromkeys(MESSAGE_SCHEMA.names)
        quarantined = rnd.random() < 0.05
        # a few hashes repeat (the same message read twice): their order must be kept
        digest = hashlib.sha256(b"%d" % rnd.randrange(count * 3 // 4)).digest()
        row.update(
            dedup_key=digest if not quarantined else b"q%d" % n,
            message_hash=None if quarantined else digest,
            pubsub_topic="/waku/2/rs/16/32", payload=rnd.randbytes(rnd.randrange(300)),
            version=1, timestamp=n, source="ms", kind="mailserver-postgres",
            location=f"id={n}", rank=0, from_v2=False, quarantined=quarantined,
            reason="bad rlp: x" if quarantined else None, week="2021-W07",
            community="0x02aa" if rnd.random() < 0.2 else None,
        )  # fmt: skip
        rows.append(row)
    return rows


def _batches(rows: list[dict], size: int = 97) -> Iterator[pa.RecordBatch]:
    for i in range(0, len(rows), size):
        yield pa.RecordBatch.from_pylist(rows[i : i + size], schema=MESSAGE_SCHEMA)


def _expected(rows: list[dict]) -> list[dict]:
    """Hashed rows sorted by hash, ties in input order (Python's sort is stable), then the
    quarantined rows in input order."""
    hashed = sorted((r for r in rows if r["message_hash"] is not None),
                    key=lambda r: r["message_hash"])  # fmt: skip
    return hashed + [r for r in rows if r["message_hash"] is None]


def _write(tmp_path: Path, rows: list[dict], **kwargs: int) -> tuple[Path, Path, int]:
    messages, keys = tmp_path / "messages.parquet", tmp_path / "keys.parquet"
    count = write_message_file(_batches(rows), messages, [keys], **kwargs)
    return messages, keys, count


def test_rows_in_hash_order_then_the_quarantined_with_their_keys(tmp_path) -> None:
    rows = _rows(2000)
    messages, keys, count = _write(tmp_path, rows)
    assert count == 2000
    written = pq.read_table(messages)
    assert written.schema == MESSAGE_SCHEMA
    assert written.to_pylist() == _expected(rows)
    key_table = pq.read_table(keys)
    assert key_table.schema == KEY_SCHEMA
    assert key_table.to_pylist() == [{c: r[c] for c in KEY_COLUMNS} for r in _expected(rows)]
    # the duplicated hashes really are there (the stable order is exercised)
    hashes = [r["message_hash"] for r in rows if r["message_hash"] is not None]
    assert len(set(hashes)) < len(hashes)


def test_the_channels_rows_again_apart(tmp_path) -> None:
    rows = _rows(2000, seed=6)
    channels = tmp_path / "channels.parquet"
    write_message_file(_batches(rows), tmp_path / "m.parquet", [tmp_path / "k.parquet"],
                       channels_path=channels, run_bytes=60_000)  # fmt: skip
    expected = [r for r in _expected(rows) if r["community"] and not r["quarantined"]]
    assert 200 < len(expected) < 600
    assert pq.read_table(channels).to_pylist() == expected


def test_the_channels_rows_decrypted_when_their_keys_are_given(tmp_path) -> None:
    """Step 1 decrypting the channels' rows itself: the channels file holds, for each row
    the plain file would hold and in its order, what archive_fields makes of it, with its
    community and location (which mark a duplicate copy)."""
    key = hashlib.sha256(b"channel key").digest()
    author = coincurve.PrivateKey(hashlib.sha256(b"author").digest())
    topic = "/waku/1/0x1a2b3c4d/rfc26"
    rows = _rows(1500, seed=8)
    for n, row in enumerate(rows):
        if row["community"]:
            row["content_topic"] = topic
            if n % 3:  # the others do not open (random bytes)
                row["payload"] = encode_payload(b"m%d" % n, sign_with=author, symmetric_key=key)
    plain, decrypted = tmp_path / "plain.parquet", tmp_path / "decrypted.parquet"
    write_message_file(_batches(rows), tmp_path / "m1.parquet", [tmp_path / "k1.parquet"],
                       channels_path=plain, run_bytes=60_000)  # fmt: skip
    write_message_file(_batches(rows), tmp_path / "m2.parquet", [tmp_path / "k2.parquet"],
                       channels_path=decrypted, channel_keys={topic: key},
                       run_bytes=60_000)  # fmt: skip
    written = pq.read_table(decrypted)
    assert written.schema == CHANNEL_ARCHIVE_SCHEMA
    expected = []
    for r in pq.read_table(plain).to_pylist():
        fields = archive_fields(
            message_hash=r["message_hash"], content_topic=r["content_topic"],
            payload=r["payload"], version=r["version"], timestamp_ns=r["timestamp"],
            db_key=r["db_key"], symmetric_key=key,
        )  # fmt: skip
        row = {name: fields.get(name) for name in CHANNEL_ARCHIVE_SCHEMA.names}
        row.update(timestamp=r["timestamp"] // 10**9, week=r["week"], source=r["source"],
                   community=r["community"], location=r["location"])  # fmt: skip
        expected.append(row)
    assert written.to_pylist() == expected
    oks = [r["ok"] for r in expected]
    assert 100 < oks.count(True) and 50 < oks.count(False)


def test_keys_split_into_buckets_every_copy_in_one(tmp_path) -> None:
    rows = _rows(3000, seed=4)
    paths = [tmp_path / f"keys-{b}.parquet" for b in range(5)]
    write_message_file(_batches(rows), tmp_path / "m.parquet", paths, run_bytes=50_000)
    buckets = [pq.read_table(p).to_pylist() for p in paths]
    assert all(len(b) > 300 for b in buckets)  # about even
    seen = {}
    for number, bucket in enumerate(buckets):
        for key in bucket:
            assert seen.setdefault(key["dedup_key"], number) == number
    # the bucket is the first two bytes of the key, modulo the buckets (hand-computed)
    for key, number in list(seen.items())[:50]:
        assert number == int.from_bytes(key[:2], "big") % 5
    expected = sorted(tuple(r[c] for c in KEY_COLUMNS) for r in rows)
    assert sorted(tuple(k.values()) for b in buckets for k in b) == expected


def test_key_buckets_of_sliced_and_chunked_arrays() -> None:
    keys = pa.array([bytes([0, 7]) + bytes(30), bytes([1, 0]) + bytes(30), bytes([255, 255]) * 16])
    assert key_buckets(keys, 10).tolist() == [7, 256 % 10, 65535 % 10]
    assert key_buckets(keys.slice(1), 10).tolist() == [6, 5]
    assert key_buckets(pa.chunked_array([keys.slice(2), keys.slice(0, 1)]), 3).tolist() == [0, 1]


def test_spilled_runs_merge_into_the_same_rows(tmp_path) -> None:
    rows = _rows(3000, seed=9)
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    in_memory, _, _ = _write(tmp_path / "a", rows)
    # runs of ~40 KB: about a dozen runs spilled and merged
    spilled, spilled_keys, count = _write(tmp_path / "b", rows, run_bytes=40_000)
    assert count == 3000
    assert pq.read_table(spilled).to_pylist() == pq.read_table(in_memory).to_pylist()
    assert pq.read_table(spilled).to_pylist() == _expected(rows)
    assert pq.read_table(spilled_keys).num_rows == 3000


def test_small_row_groups(tmp_path) -> None:
    rows = _rows(500)
    for row in rows:
        row["payload"] = bytes(40_000)  # ~20 MB of rows: several 4 MB row groups
    messages, _, _ = _write(tmp_path, rows)
    parquet = pq.ParquetFile(messages)
    assert parquet.metadata.num_row_groups >= 4
    assert max(parquet.metadata.row_group(i).num_rows
               for i in range(parquet.metadata.num_row_groups)) <= 150  # fmt: skip


def test_no_rows_is_an_empty_file_with_the_schema(tmp_path) -> None:
    messages, keys, count = _write(tmp_path, [])
    assert count == 0
    assert pq.read_table(messages).schema == MESSAGE_SCHEMA
    assert pq.read_table(keys).num_rows == 0


def test_a_failing_read_leaves_nothing(tmp_path) -> None:
    rows = _rows(1000)

    def failing() -> Iterator[pa.RecordBatch]:
        batches = _batches(rows)
        yield next(batches)
        yield next(batches)
        raise OSError("the source went away")

    messages, keys = tmp_path / "m.parquet", tmp_path / "k.parquet"
    with pytest.raises(OSError, match="went away"):
        write_message_file(failing(), messages, [keys], run_bytes=10_000)
    assert list(tmp_path.iterdir()) == []


def test_a_failed_write_leaves_the_previous_file(tmp_path, monkeypatch) -> None:
    rows = _rows(300)
    messages, keys, _ = _write(tmp_path, rows)
    before = messages.read_bytes(), keys.read_bytes()
    monkeypatch.setenv(TASK_ENV_VAR, "write:messages")
    with pytest.raises(OSError, match="No space left"):
        write_message_file(_batches(_rows(50, seed=1)), messages, [keys])
    assert (messages.read_bytes(), keys.read_bytes()) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["keys.parquet", "messages.parquet"]


def test_a_rerun_writes_the_same_bytes(tmp_path) -> None:
    rows = _rows(1500)
    first, _, _ = _write(tmp_path, rows, run_bytes=30_000)
    data = first.read_bytes()
    second, _, _ = _write(tmp_path, rows, run_bytes=30_000)
    assert second.read_bytes() == data
