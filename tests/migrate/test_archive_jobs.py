"""The archives' Python tasks over step 1's channel files (migrate/archive_jobs.py): which
rows they read (one community's, the duplicate copies of that file left out), how they
count them, and how the windows' rows come together from every file, each window whole in
one call, against expectations worked out here by hand."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest

from waku_legacy.migrate import archive_jobs
from waku_legacy.migrate.archive_jobs import (
    ArchivableCounts,
    count_archivable,
    encode_windows,
    kept_channel_batches,
    window_tables,
)
from waku_legacy.migrate.archives import CHANNEL_ARCHIVE_SCHEMA
from waku_legacy.migrate.dedup import COPY_SCHEMA, part_file
from waku_legacy.migrate.work_files import write_parquet_file

A, B = "0x02aa", "0x03bb"


def _row(n: int, timestamp: int, *, community: str = A, ok: bool = True,
         reason: str | None = None, source: str = "ms1") -> dict:  # fmt: skip
    return {
        "hash": b"h%05d" % n, "timestamp": timestamp, "topic": b"\x01\x02\x03\x04",
        "sig": b"s", "payload": b"p%d" % n, "padding": b"", "ok": ok,
        "reason": reason, "week": "2022-W01", "source": source, "community": community,
        "location": f"loc={n}",
    }  # fmt: skip


def _write_rows(directory: Path, part: int, rows: list[dict]) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    write_parquet_file(part_file(directory, part),
                       pa.Table.from_pylist(rows, schema=CHANNEL_ARCHIVE_SCHEMA))  # fmt: skip


def _write_copies(directory: Path, bucket: int, copies: list[tuple[str, str, int]]) -> None:
    """Copies to drop (source, location, step-1 part), as a dedup bucket's file."""
    directory.mkdir(parents=True, exist_ok=True)
    rows = [dict.fromkeys(COPY_SCHEMA.names) | {"message_hash": b"x", "source": s,
            "location": loc, "part": part} for s, loc, part in copies]  # fmt: skip
    write_parquet_file(part_file(directory, bucket), pa.Table.from_pylist(rows, COPY_SCHEMA))


@pytest.fixture
def files(tmp_path) -> tuple[Path, Path]:
    """Two channel files: community A's rows in both, B's in one; a duplicate copy of an A
    row in part 3 (and a copy with the same location but in part 2: not this file's)."""
    rows_dir, duplicates_dir = tmp_path / "rows", tmp_path / "duplicates"
    _write_rows(rows_dir, 2, [
        _row(1, 100), _row(2, 109), _row(3, 110, community=B), _row(4, 125),
        _row(5, 130, ok=False, reason="DecryptionError: bad tag"), _row(6, 150),
    ])  # fmt: skip
    _write_rows(rows_dir, 3, [
        _row(7, 95), _row(8, 112), _row(9, 149),
        _row(10, 104, ok=False, reason="payload version 0 is not 26/WAKU-PAYLOAD"),
        _row(11, 101, source="ms2"),  # a duplicate copy (of another source's message)
        _row(12, 108, ok=False, reason="DecryptionError: bad tag"),
    ])  # fmt: skip
    _write_copies(duplicates_dir, 0, [("ms2", "loc=11", 3)])
    _write_copies(duplicates_dir, 1, [("ms1", "loc=4", 3)])  # names part 3: not part 2's row
    return rows_dir, duplicates_dir


def test_a_files_rows_are_one_communitys_without_that_files_copies(files) -> None:
    rows_dir, duplicates_dir = files
    hashes = []
    for part in (2, 3):
        for batch in kept_channel_batches(part_file(rows_dir, part), duplicates_dir,
                                          ["hash"], A):  # fmt: skip
            assert batch.schema.names == ["hash"]
            hashes += batch.column("hash").to_pylist()
    assert sorted(hashes) == [b"h%05d" % n for n in (1, 2, 4, 5, 6, 7, 8, 9, 10, 12)]
    every = [b for p in (2, 3) for b in kept_channel_batches(part_file(rows_dir, p),
             duplicates_dir, ["hash"])]  # fmt: skip
    assert sum(b.num_rows for b in every) == 11  # B's row too, still not the copy


def test_window_tables_cut_archivable_rows_in_range_by_window(monkeypatch) -> None:
    """start 100, 10-second windows, now 150: 95 is before start, 150 is not before now,
    the undecryptable row at 120 is no archive message."""
    rows = [_row(n, ts) for n, ts in enumerate((95, 100, 109, 110, 149, 150, 131))]
    rows.append(_row(99, 120, ok=False, reason="DecryptionError: x"))
    table = pa.Table.from_pylist(rows, schema=CHANNEL_ARCHIVE_SCHEMA)
    columns = [*archive_jobs.ENCODE_COLUMNS, "ok"]

    def windows(batches) -> dict[int, list[int]]:
        got: dict[int, list[int]] = {}
        for window, part in window_tables(batches, start=100, now=150, partition=10):
            assert set(part.column("window").to_pylist()) == {window}
            got.setdefault(window, []).extend(part.column("timestamp").to_pylist())
        return {w: sorted(ts) for w, ts in got.items()}

    expected = {0: [100, 109], 1: [110], 3: [131], 4: [149]}
    assert windows(table.select(columns).to_batches()) == expected
    # held rows handed on every batch: a window may come as several tables, none lost
    monkeypatch.setattr(archive_jobs, "_FRAGMENT_BYTES", 1)
    assert windows(table.select(columns).to_batches(max_chunksize=2)) == expected


def test_counts_over_every_file(spark, files) -> None:
    rows_dir, duplicates_dir = files
    counts = count_archivable(spark, rows_dir, duplicates_dir, A, now=149)
    # A's kept rows: ok at 100, 109, 125, 150, 95, 112, 149 (101 is a copy)
    assert counts == ArchivableCounts(
        archivable=7,
        undecryptable={
            "DecryptionError: bad tag": 2,
            "payload version 0 is not 26/WAKU-PAYLOAD": 1,
        },
        oldest=95,
        future=2,  # 149 and 150
    )
    assert count_archivable(spark, rows_dir, duplicates_dir, B, now=149) == ArchivableCounts(
        archivable=1, oldest=110
    )
    nobody = count_archivable(spark, rows_dir, duplicates_dir, "0x04cc", now=149)
    assert nobody == ArchivableCounts()


def test_each_window_is_encoded_whole_from_every_file(spark, files) -> None:
    rows_dir, duplicates_dir = files

    def encode(table: pa.Table) -> dict:
        windows = set(table.column("window").to_pylist())
        assert len(windows) == 1
        return {"window": windows.pop(), "hashes": sorted(table.column("hash").to_pylist())}

    got = encode_windows(spark, rows_dir, duplicates_dir, A, start=95, now=150, partition=10,
                         encode=encode)  # fmt: skip
    assert got == [
        {"window": 0, "hashes": [b"h00001", b"h00007"]},  # 100 (part 2), 95 (part 3)
        {"window": 1, "hashes": [b"h00002", b"h00008"]},  # 109 (part 2), 112 (part 3)
        {"window": 3, "hashes": [b"h00004"]},  # 125
        {"window": 5, "hashes": [b"h00009"]},  # 149
    ]
    assert encode_windows(spark, rows_dir, duplicates_dir, A, start=150, now=150,
                          partition=10, encode=encode) == []  # fmt: skip


def test_decrypting_tasks_that_decode_too_yield_less(tmp_path: Path) -> None:
    """The decrypting tasks beside the driver's writer lower their worker's priority: to
    yield_cpu_to_driver's 10 when they only decrypt, to READABLE_TASK_NICENESS (4, a whole
    core of two still the writer's) when they decode the readable events too; a niceness
    only rises (a worker at 10 stays there). In a child process: it lasts for its life."""
    import subprocess
    import sys

    from waku_legacy.migrate.archives import ARCHIVE_TASK_NICENESS

    def niceness_after(*steps: str) -> int:
        code = ("import os\nfrom waku_legacy.migrate import archive_jobs, archives\n"
                + "\n".join(steps) + "\nprint(os.nice(0))")  # fmt: skip
        run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                             check=True, cwd=tmp_path)  # fmt: skip
        return int(run.stdout)

    base = niceness_after()
    assert archive_jobs.READABLE_TASK_NICENESS == 4 < ARCHIVE_TASK_NICENESS == 10
    decoding = "archives.raise_niceness(archive_jobs.READABLE_TASK_NICENESS)"
    assert niceness_after(decoding) == max(base, 4)
    assert niceness_after("archives.yield_cpu_to_driver()") == max(base, 10)
    assert niceness_after("archives.yield_cpu_to_driver()", decoding) == max(base, 10)
