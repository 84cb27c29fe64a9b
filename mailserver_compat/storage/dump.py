"""Envelope dump files: what the v1 mailserver client writes and the migration reads.

Format (version 1), all integers big-endian::

    file    = header record*
    header  = "WKLDUMP" 0x01                          8 bytes: magic + format version
    record  = length:u32  crc:u32  body[length]
    crc     = CRC-32 (zlib/IEEE) of the 4 length bytes followed by the body
    body    = one Waku v1 envelope, exactly as received: rlp([expiry, ttl, topic, data, nonce])

Why this shape:

- Append-friendly: a writer only ever appends records; nothing earlier is rewritten, so a
  client can resume a pull into the same file after a dropped connection.
- Torn-tail tolerant: a crash can leave a partial last record (short header, short body or a
  CRC that does not match because the body is incomplete). Readers stop cleanly before it;
  :class:`DumpWriter` truncates it away before appending, so a resumed file is clean again.
- Corruption is detected, not guessed at: every record carries a CRC over its length and
  body. A bad record in the middle of a file raises :class:`DumpCorrupt` in the strict
  reader; :func:`iter_dump_records` instead reports the damaged byte range and resynchronises
  on the next position that holds a record with a valid CRC, so a migration can quarantine
  the damage and keep the rest.
- Bounded: a body is at most :data:`MAX_RECORD_SIZE` bytes (Waku v1's default max message
  size is 1 MiB; 16 MiB leaves room and stops a corrupt length from allocating gigabytes).
- Splittable: :func:`plan_dump_splits` walks the record headers once (seeking over bodies)
  and returns exact record-aligned byte ranges for parallel readers.
"""

from __future__ import annotations

import itertools
import os
import struct
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from waku_legacy.durable import write_atomic
from waku_legacy.errors import DecodeError, LimitExceeded

__all__ = [
    "HEADER",
    "MAX_RECORD_SIZE",
    "DumpCorrupt",
    "DumpRecord",
    "DumpWriter",
    "iter_dump_records",
    "plan_dump_splits",
    "read_dump",
]

MAGIC = b"WKLDUMP"
VERSION = 1
HEADER = MAGIC + bytes([VERSION])
MAX_RECORD_SIZE = 16 * 1024 * 1024
_RECORD_HEAD = struct.Struct(">II")
_LENGTH = struct.Struct(">I")
_READ_CHUNK = 1 << 20


class DumpCorrupt(DecodeError):
    """An envelope dump whose header or a record in the middle is damaged."""


@dataclass(frozen=True, slots=True)
class DumpRecord:
    """One record position in a dump: the envelope bytes, or the damage found there.

    ``offset`` is the byte offset of the record (or of the damaged range) in the file;
    ``error`` is set (and ``data`` holds the damaged bytes, at most 4 KiB of them) when the
    range does not hold valid records.
    """

    offset: int
    data: bytes
    error: str | None = None


def _record_crc(length_bytes: bytes, body: bytes) -> int:
    return zlib.crc32(body, zlib.crc32(length_bytes))


def encode_record(body: bytes) -> bytes:
    """The on-disk bytes of one record holding ``body``."""
    if len(body) > MAX_RECORD_SIZE:
        raise LimitExceeded(
            "envelope dump record", f"{len(body)} bytes is over the {MAX_RECORD_SIZE} limit"
        )
    length = _LENGTH.pack(len(body))
    return length + _LENGTH.pack(_record_crc(length, body)) + body


def _check_header(head: bytes, path: Path) -> None:
    if head[: len(MAGIC)] != MAGIC:
        raise DumpCorrupt("envelope dump", f"{path} does not start with the WKLDUMP magic")
    if head[len(MAGIC)] != VERSION:
        raise DumpCorrupt(
            "envelope dump", f"{path} has format version {head[len(MAGIC)]}, expected {VERSION}"
        )


def _valid_end(fh: BinaryIO, size: int) -> tuple[int, bool]:
    """Walk records from just after the header; return (end of the last whole record,
    whether damage other than a torn tail was found)."""
    pos = len(HEADER)
    while pos < size:
        step = _step(fh, pos, size)
        if isinstance(step, int):
            pos = step
            continue
        return pos, step is not None
    return pos, False


class DumpWriter:
    """Appends envelopes to a dump file (created with its header when missing).

    Opening an existing file checks the header and cuts away a torn last record left by a
    crash, so that appends continue a clean file. ``flush()`` makes everything appended so
    far durable (fsync). Damage in the middle of an existing file raises
    :class:`DumpCorrupt` rather than being appended after.
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self.records_written = 0
        size = self.path.stat().st_size if self.path.exists() else 0
        if size < len(HEADER):
            # New file, or a crash before the header was complete: write the header via a
            # temporary file and rename, so the file never exists with half a header.
            write_atomic(
                self.path,
                HEADER,
                step="dump-header",
                tmp=self.path.with_name(self.path.name + ".tmp"),
            )
        self._fh: BinaryIO = open(self.path, "r+b")  # closed in close()
        try:
            head = self._fh.read(len(HEADER))
            _check_header(head, self.path)
            size = os.fstat(self._fh.fileno()).st_size
            end, damaged = _valid_end(self._fh, size)
            if damaged:
                raise DumpCorrupt(
                    "envelope dump",
                    f"{self.path} has a damaged record at byte {end} followed by more data; "
                    "refusing to append (read it with iter_dump_records to salvage)",
                    offset=end,
                )
            if end < size:
                self._fh.truncate(end)
                self._fh.flush()
                os.fsync(self._fh.fileno())
            self._fh.seek(end)
        except BaseException:
            self._fh.close()
            raise

    def append(self, envelope_rlp: bytes) -> None:
        self._fh.write(encode_record(bytes(envelope_rlp)))
        self.records_written += 1

    def flush(self) -> None:
        self._fh.flush()
        os.fsync(self._fh.fileno())

    def close(self) -> None:
        if not self._fh.closed:
            self.flush()
            self._fh.close()

    def __enter__(self) -> DumpWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _open_checked(path: Path) -> tuple[BinaryIO, int]:
    fh: BinaryIO = open(path, "rb")  # the caller closes it
    size = os.fstat(fh.fileno()).st_size
    head = fh.read(len(HEADER))
    if len(head) < len(HEADER):
        fh.close()
        raise DumpCorrupt("envelope dump", f"{path} is shorter than its 8-byte header")
    try:
        _check_header(head, path)
    except DumpCorrupt:
        fh.close()
        raise
    return fh, size


def read_dump(path: str | os.PathLike[str]) -> Iterator[bytes]:
    """Yield every envelope (RLP bytes) in the dump, in file order.

    A torn last record is ignored (it is what a crash leaves); damage followed by more data
    raises :class:`DumpCorrupt` naming the offset.
    """
    for record in iter_dump_records(path):
        if record.error is not None:
            raise DumpCorrupt("envelope dump", f"{path}: {record.error}", offset=record.offset)
        yield record.data


def iter_dump_records(
    path: str | os.PathLike[str], *, start: int | None = None, stop: int | None = None
) -> Iterator[DumpRecord]:
    """Yield the records starting between byte offsets ``start`` (a record boundary, default
    just after the header) and ``stop`` (default end of file), with their offsets.

    Damaged ranges are yielded as records with ``error`` set; reading then resumes at the
    next offset holding a record whose CRC verifies. A torn tail (a last record cut short by
    a crash, with nothing valid after it) is not an error and yields nothing.
    """
    path = Path(path)
    fh, size = _open_checked(path)
    with fh:
        pos = len(HEADER) if start is None else max(start, len(HEADER))
        end = size if stop is None else min(stop, size)
        while pos < end:
            step = _step(fh, pos, size)
            if isinstance(step, int):
                fh.seek(pos + _RECORD_HEAD.size)
                yield DumpRecord(pos, fh.read(step - pos - _RECORD_HEAD.size))
                pos = step
                continue
            if step is None:
                return
            resume, reason = step
            fh.seek(pos)
            damaged = fh.read(min(resume - pos, 4096))
            yield DumpRecord(pos, damaged, f"{reason}: bytes {pos}..{resume} skipped")
            pos = resume


def _step(fh: BinaryIO, pos: int, size: int) -> int | tuple[int, str] | None:
    """Classify the bytes at ``pos``: the offset after a valid record, None for a torn
    tail, or ``(resume offset, reason)`` for damage."""
    fh.seek(pos)
    head = fh.read(_RECORD_HEAD.size)
    if len(head) < _RECORD_HEAD.size:
        return None
    length: int
    crc: int
    length, crc = _RECORD_HEAD.unpack(head)
    if length <= MAX_RECORD_SIZE:
        body = fh.read(length)
        if len(body) == length and _record_crc(head[:4], body) == crc:
            return pos + _RECORD_HEAD.size + length
        reason = "record CRC mismatch" if len(body) == length else "truncated record"
    else:
        reason = f"record length {length} over the {MAX_RECORD_SIZE}-byte limit"
    resume = _resync(fh, pos + 1, size)
    if resume is None:
        if length <= MAX_RECORD_SIZE and pos + _RECORD_HEAD.size + length >= size:
            return None
        return (size, reason)
    return (resume, reason)


def _resync(fh: BinaryIO, pos: int, size: int) -> int | None:
    """The first offset >= ``pos`` that starts a record whose CRC verifies, or None."""
    while pos + _RECORD_HEAD.size <= size:
        fh.seek(pos)
        window = fh.read(min(_READ_CHUNK, size - pos))
        for i in range(len(window) - _RECORD_HEAD.size + 1):
            length, crc = _RECORD_HEAD.unpack_from(window, i)
            at = pos + i
            if length > MAX_RECORD_SIZE or at + _RECORD_HEAD.size + length > size:
                continue
            if i + _RECORD_HEAD.size + length <= len(window):
                body = window[i + _RECORD_HEAD.size : i + _RECORD_HEAD.size + length]
            else:
                fh.seek(at + _RECORD_HEAD.size)
                body = fh.read(length)
            if _record_crc(window[i : i + 4], body) == crc:
                return at
        pos += max(1, len(window) - _RECORD_HEAD.size + 1)
    return None


def plan_dump_splits(path: str | os.PathLike[str], parts: int) -> list[tuple[int, int]]:
    """Split a dump into at most ``parts`` record-aligned ``(start, stop)`` byte ranges of
    roughly equal size, walking only the record headers. Damaged regions end the walk; the
    last range then runs to the end of the file so that its reader reports the damage."""
    path = Path(path)
    fh, size = _open_checked(path)
    parts = max(1, parts)
    target = max(1, (size - len(HEADER)) // parts)
    bounds = [len(HEADER)]
    with fh:
        pos = len(HEADER)
        next_cut = pos + target
        while pos + _RECORD_HEAD.size <= size:
            fh.seek(pos)
            head = fh.read(_RECORD_HEAD.size)
            (length,) = _LENGTH.unpack_from(head)
            if length > MAX_RECORD_SIZE:
                break
            pos += _RECORD_HEAD.size + length
            if pos >= next_cut and pos < size and len(bounds) < parts:
                bounds.append(pos)
                next_cut = pos + target
    bounds.append(size)
    return [(a, b) for a, b in itertools.pairwise(bounds) if b > a] or [(len(HEADER), size)]
