"""status-go LevelDB mailserver storage: key ranges, status-go cursor semantics, snapshots."""

from __future__ import annotations

import hashlib
import struct
from pathlib import Path

import pytest

from waku_legacy.mailserver_compat.storage.leveldb import (
    LevelDBEnvelopeStore,
    LevelDBError,
    snapshot_copy,
)


def _key(ts: int, n: int, topic: bytes = b"\x01\x02\x03\x04") -> bytes:
    # DB key layout from wire-facts §3: timestamp u32 BE || hash (32) || topic (4).
    return struct.pack(">I", ts) + hashlib.sha256(n.to_bytes(4, "big")).digest() + topic


@pytest.fixture()
def filled(tmp_path: Path) -> tuple[Path, list[tuple[bytes, bytes]]]:
    path = tmp_path / "ms"
    items = [(_key(1000 + (i // 3), i), b"env%d" % i) for i in range(60)]
    with LevelDBEnvelopeStore(path, create=True) as db:
        db.put_many(items)
    return path, sorted(items)


def test_range_query_is_inclusive_of_upper_second(filled) -> None:
    path, items = filled
    with LevelDBEnvelopeStore(path) as db:
        got = list(db.query(1002, 1004))
    want = [kv for kv in items if 1002 <= struct.unpack(">I", kv[0][:4])[0] <= 1004]
    assert got == want and len(got) == 9


def test_cursor_paging_ascending_and_descending(filled) -> None:
    path, items = filled
    with LevelDBEnvelopeStore(path) as db:
        for reverse in (False, True):
            seen: list[bytes] = []
            cursor = None
            while True:
                page = list(db.query(1000, 1019, cursor=cursor, limit=7, reverse=reverse))
                if not page:
                    break
                seen.extend(k for k, _ in page)
                cursor = page[-1][0][:36]  # the cursor is the key's first 36 bytes
            want = [k for k, _ in items]
            assert seen == (want[::-1] if reverse else want)


def test_cursor_of_wrong_size_is_rejected(filled) -> None:
    path, _ = filled
    with LevelDBEnvelopeStore(path) as db, pytest.raises(LevelDBError, match="36"):
        list(db.query(0, 2000, cursor=b"\x00" * 35))


def test_legacy_36_byte_keys_are_read(tmp_path: Path) -> None:
    with LevelDBEnvelopeStore(tmp_path / "old", create=True) as db:
        db.put(_key(5, 1)[:36], b"old")
        db.put(_key(6, 2), b"new")
        assert [v for _, v in db.iter_range()] == [b"old", b"new"]
        with pytest.raises(LevelDBError, match="40 bytes"):
            db.put(b"short", b"x")


def test_splits_partition_the_key_space_and_snapshots_read_in_parallel(
    filled, tmp_path: Path
) -> None:
    path, items = filled
    with LevelDBEnvelopeStore(path) as db:
        splits = db.plan_splits(4)
        # The source stays open (locked) while private snapshots are read.
        got = []
        for i, (start, stop) in enumerate(splits):
            snap = snapshot_copy(path, tmp_path / f"snap{i}")
            with LevelDBEnvelopeStore(snap) as part:
                got.extend(part.iter_range(start, stop))
    assert len(splits) == 4
    assert got == items


def test_missing_directory_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(LevelDBError, match="cannot open"):
        LevelDBEnvelopeStore(tmp_path / "nope")
    with pytest.raises(LevelDBError, match="not a LevelDB"):
        snapshot_copy(tmp_path, tmp_path / "x")


def test_locked_database_says_what_to_do(tmp_path: Path) -> None:
    """Issue 24: a LevelDB a running mailserver holds (its LOCK) is refused with the way
    out: stop the mailserver or copy the folder."""
    held = LevelDBEnvelopeStore(tmp_path / "db", create=True)
    try:
        with pytest.raises(LevelDBError, match="stop the mailserver, or copy the folder"):
            LevelDBEnvelopeStore(tmp_path / "db")
    finally:
        held.close()
