"""check_store_file must not cost the process its SQLite locks (sqlite.org/howtocorrupt.html
2.2): a bridge that opens a second connection to its store (the viewer, the history index)
checks the file first; had the check opened and closed the file itself, every POSIX lock of
the process on it would be gone, and another process's last connection would delete the WAL
and shared-memory files from under the bridge's open connections (seen as "disk I/O error"
on the viewer's reads in the demo test)."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from waku_legacy.store import StoreError, check_store_file


def _other_process_opens_and_closes(path: Path) -> None:
    code = (
        "import sqlite3, sys; c = sqlite3.connect(sys.argv[1]);"
        " c.execute('SELECT count(*) FROM t').fetchone(); c.close()"
    )
    subprocess.run([sys.executable, "-c", code, str(path)], check=True, timeout=60)


def _wal_database(path: Path) -> sqlite3.Connection:
    db = sqlite3.connect(path, isolation_level=None)
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("CREATE TABLE t (x)")
    db.executemany("INSERT INTO t VALUES (?)", [(i,) for i in range(50)])
    return db


def test_the_control_a_plain_open_and_close_loses_the_locks(tmp_path: Path) -> None:
    """The hazard is real here: a plain open and close of the file in the process holding a
    WAL connection lets another process delete the WAL under it."""
    path = tmp_path / "store.sqlite3"
    db = _wal_database(path)
    with open(path, "rb") as handle:
        handle.read(16)
    _other_process_opens_and_closes(path)
    assert not Path(f"{path}-wal").exists()
    db.close()


def test_checking_the_store_keeps_the_locks_of_open_connections(tmp_path: Path) -> None:
    path = tmp_path / "store.sqlite3"
    db = _wal_database(path)
    for _ in range(3):
        check_store_file(f"sqlite://{path}", create=False)
    _other_process_opens_and_closes(path)
    # the bridge's connection still holds its shared lock: the WAL stays, the data is read
    assert Path(f"{path}-wal").exists() and Path(f"{path}-shm").exists()
    db.execute("INSERT INTO t VALUES (50)")
    assert db.execute("SELECT count(*) FROM t").fetchone() == (51,)
    db.close()


def test_the_check_still_refuses_what_is_not_a_store(tmp_path: Path) -> None:
    missing, empty, text, folder = (tmp_path / n for n in ("missing", "empty", "text", "dir"))
    empty.write_bytes(b"")
    text.write_bytes(b"hello, not a database at all\n" * 10)
    folder.mkdir()
    with pytest.raises(StoreError, match="does not exist"):
        check_store_file(str(missing), create=False)
    with pytest.raises(StoreError, match="empty file"):
        check_store_file(str(empty), create=False)
    with pytest.raises(StoreError, match=r"not a SQLite database \(its first bytes: b'hello"):
        check_store_file(str(text), create=False)
    with pytest.raises(StoreError, match="is a directory"):
        check_store_file(str(folder), create=False)
    check_store_file(str(missing), create=True)
    check_store_file(str(empty), create=True)
    assert not missing.exists()  # the check creates nothing


def test_a_locked_store_is_passed_without_touching_its_locks(tmp_path: Path) -> None:
    """A store another connection of this process holds exclusively: SQLite cannot read it
    now, so the check leaves it to the opening (at once, no busy wait) and never reads the
    file itself, which would have dropped that connection's lock."""
    import time

    path = tmp_path / "store.sqlite3"
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("CREATE TABLE t (x)")
    holder.execute("BEGIN EXCLUSIVE")
    holder.execute("INSERT INTO t VALUES (1)")
    started = time.monotonic()
    check_store_file(str(path), create=False)
    assert time.monotonic() - started < 2
    code = (
        "import sqlite3, sys\n"
        "try:\n"
        "    sqlite3.connect(sys.argv[1], timeout=0).execute('SELECT count(*) FROM t').fetchone()\n"
        "except sqlite3.OperationalError as exc:\n"
        "    print(exc)\n"
    )
    other = subprocess.run([sys.executable, "-c", code, str(path)], capture_output=True,
                           text=True, timeout=60, check=True)  # fmt: skip
    assert "locked" in other.stdout  # the holder's lock held
    holder.execute("COMMIT")
    holder.close()
