"""status-go's LevelDB mailserver database: key = DB key, value = rlp(envelope).

The DB key (owned by :mod:`waku_legacy.mailserver_compat.wire.cursor`) is 40 bytes,
``sent time u32 BE || envelope hash (32) || topic (4)``; very old status-go mailservers
wrote 36-byte keys without the topic, and readers here accept both. Keys sort by sent time
first, so a time range is a key range: ``[ts(lower), ts(upper + 1))`` where ``ts(t)`` is the
4-byte big-endian prefix (status-go builds the same bounds with a zero hash and topic).

Query semantics (what the v1 mailserver server needs): ascending iteration over that key
range, resuming strictly after a 36-byte cursor (every key that starts with the cursor is
skipped); ``reverse=True`` gives descending order, resuming strictly before the cursor.

LevelDB allows one open handle per directory (a LOCK file held by the process). Parallel
readers (Spark partitions in separate Python workers) therefore each open a private
snapshot: :func:`snapshot_copy` hard-links the immutable table files and copies the small
mutable ones (log, MANIFEST, CURRENT), which costs next to nothing and never touches the
source directory. The source must not be written to while it is being migrated (stop the
mailserver, or migrate a copy).
"""

from __future__ import annotations

import itertools
import os
import shutil
import struct
from collections.abc import Iterable, Iterator
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING

from waku_legacy.errors import WakuLegacyError

if TYPE_CHECKING:
    import plyvel

__all__ = [
    "CURSOR_SIZE",
    "DB_KEY_SIZE",
    "LEGACY_DB_KEY_SIZE",
    "LevelDBEnvelopeStore",
    "LevelDBError",
    "snapshot_copy",
    "time_prefix",
]

DB_KEY_SIZE = 40
LEGACY_DB_KEY_SIZE = 36
CURSOR_SIZE = 36
_U32 = struct.Struct(">I")
_MAX_U32 = 0xFFFFFFFF


class LevelDBError(WakuLegacyError):
    """A LevelDB mailserver directory that cannot be opened or read."""


def time_prefix(timestamp: int) -> bytes:
    """The 4-byte key prefix of sent time ``timestamp`` (seconds), the bound of a range."""
    if timestamp < 0:
        timestamp = 0
    return _U32.pack(min(timestamp, _MAX_U32))


def snapshot_copy(source: str | os.PathLike[str], target: str | os.PathLike[str]) -> Path:
    """Make ``target`` an openable private copy of the LevelDB at ``source``.

    Table files (``*.ldb``/``*.sst``) are immutable once written, so they are hard-linked
    (copied when linking is not possible, e.g. across filesystems); the log, MANIFEST and
    CURRENT files are copied; the LOCK file is not.
    """
    source, target = Path(source), Path(target)
    if not (source / "CURRENT").exists():
        raise LevelDBError(f"{source} is not a LevelDB directory (no CURRENT file)")
    target.mkdir(parents=True, exist_ok=True)
    for entry in source.iterdir():
        if not entry.is_file() or entry.name == "LOCK":
            continue
        dest = target / entry.name
        if dest.exists():
            dest.unlink()
        if entry.suffix in (".ldb", ".sst"):
            try:
                os.link(entry, dest)
                continue
            except OSError:
                pass
        shutil.copy2(entry, dest)
    return target


class LevelDBEnvelopeStore:
    """A status-go LevelDB mailserver database (read and write)."""

    def __init__(self, path: str | os.PathLike[str], *, create: bool = False) -> None:
        import plyvel

        self.path = Path(path)
        if create:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        try:
            self._db: plyvel.DB = plyvel.DB(str(self.path), create_if_missing=create)
        except plyvel.Error as exc:
            hint = ""
            if "lock" in str(exc).lower():
                # LevelDB admits one process per directory: the running mailserver holds it
                hint = (
                    " (another process holds its LOCK: stop the mailserver, or copy the "
                    "folder and give the copy)"
                )
            raise LevelDBError(
                f"cannot open LevelDB mailserver at {self.path}: {exc}{hint}"
            ) from exc
        except OSError as exc:
            raise LevelDBError(f"cannot open LevelDB mailserver at {self.path}: {exc}") from exc

    # -- writing ---------------------------------------------------------------------------

    def put(self, db_key: bytes, envelope_rlp: bytes, *, sync: bool = False) -> None:
        """Store one envelope under its DB key (status-go's ``SaveEnvelope``)."""
        _check_key(db_key)
        self._db.put(bytes(db_key), bytes(envelope_rlp), sync=sync)

    def put_many(self, items: Iterable[tuple[bytes, bytes]], *, sync: bool = True) -> int:
        """Store ``(db_key, envelope_rlp)`` pairs in one atomic write batch."""
        count = 0
        with self._db.write_batch(sync=sync) as batch:
            for key, value in items:
                _check_key(key)
                batch.put(bytes(key), bytes(value))
                count += 1
        return count

    def put_envelope(self, envelope_rlp: bytes, *, sync: bool = False) -> bytes:
        """Store an envelope under the DB key derived from it; returns the key."""
        key = db_key_of_envelope(envelope_rlp)
        self.put(key, envelope_rlp, sync=sync)
        return key

    # -- reading ---------------------------------------------------------------------------

    def get(self, db_key: bytes) -> bytes | None:
        value: bytes | None = self._db.get(bytes(db_key))  # plyvel has no type information
        return value

    def iter_range(
        self,
        start: bytes | None = None,
        stop: bytes | None = None,
        *,
        reverse: bool = False,
    ) -> Iterator[tuple[bytes, bytes]]:
        """``(db_key, envelope_rlp)`` for keys in ``[start, stop)`` in key order (or
        descending with ``reverse``). ``None`` leaves that side open."""
        with self._db.iterator(
            start=start, stop=stop, include_start=True, include_stop=False, reverse=reverse
        ) as it:
            yield from it

    def query(
        self,
        lower: int,
        upper: int,
        *,
        cursor: bytes | None = None,
        limit: int | None = None,
        reverse: bool = False,
    ) -> Iterator[tuple[bytes, bytes]]:
        """Envelopes sent in ``[lower, upper]`` (seconds, inclusive like the mailserver
        request), ascending by DB key, resuming strictly after ``cursor`` (36 bytes);
        ``reverse`` gives descending order resuming strictly before it."""
        if cursor is not None and len(cursor) not in (0, CURSOR_SIZE):
            raise LevelDBError(f"cursor must be {CURSOR_SIZE} bytes, got {len(cursor)}")
        start = time_prefix(lower)
        stop = time_prefix(upper + 1) if upper < _MAX_U32 else None
        if cursor:
            if reverse:
                stop = cursor if stop is None else min(stop, cursor)
            else:
                # Every key starting with the cursor sorts below cursor || ff ff ff ff 00.
                start = max(start, cursor + b"\xff\xff\xff\xff\x00")
        if stop is not None and start >= stop:
            return
        produced = 0
        for key, value in self.iter_range(start, stop, reverse=reverse):
            if limit is not None and produced >= limit:
                return
            yield key, value
            produced += 1

    def key_bounds(self) -> tuple[bytes, bytes] | None:
        """The first and last key, or None for an empty database."""
        with self._db.iterator(include_value=False) as it:
            first = next(it, None)
        if first is None:
            return None
        with self._db.iterator(include_value=False, reverse=True) as it:
            last = next(it)
        return first, last

    def plan_splits(self, parts: int) -> list[tuple[bytes | None, bytes | None]]:
        """Split the key space into at most ``parts`` ``[start, stop)`` ranges of equal sent
        time span (keys sort by sent time first); the outer bounds are open (None) so that
        keys of any shape are covered exactly once."""
        bounds = self.key_bounds()
        if bounds is None or parts <= 1:
            return [(None, None)]
        first = _U32.unpack(bounds[0][:4].ljust(4, b"\x00"))[0]
        last = _U32.unpack(bounds[1][:4].ljust(4, b"\x00"))[0]
        span = last - first + 1
        parts = max(1, min(parts, span))
        cuts = sorted({first + (span * i) // parts for i in range(1, parts)})
        edges: list[bytes | None] = [None, *(time_prefix(c) for c in cuts), None]
        return list(itertools.pairwise(edges))

    def count(self) -> int:
        with self._db.iterator(include_value=False) as it:
            return sum(1 for _ in it)

    # -- lifecycle -------------------------------------------------------------------------

    def close(self) -> None:
        if not self._db.closed:
            self._db.close()

    def __enter__(self) -> LevelDBEnvelopeStore:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


def _check_key(key: bytes) -> None:
    if len(key) not in (DB_KEY_SIZE, LEGACY_DB_KEY_SIZE):
        raise LevelDBError(
            f"a mailserver DB key is {DB_KEY_SIZE} bytes (or {LEGACY_DB_KEY_SIZE} in old "
            f"databases), got {len(key)}"
        )


def db_key_of_envelope(envelope_rlp: bytes) -> bytes:
    """The status-go DB key of an envelope, via the codec and cursor modules."""
    from waku_legacy.mailserver_compat.wire.cursor import db_key_for
    from waku_legacy.mailserver_compat.wire.envelope import Envelope

    return db_key_for(Envelope.decode(envelope_rlp)).encode()
