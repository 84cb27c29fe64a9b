"""The on-disk archive store of one community: append, read, detect and repair torn writes.

Write order of one append (each step durable before the next):

1. repair: a ``data`` file longer than the index accounts for (a crash after appending and
   before the index was replaced) is truncated back; a left-over temporary index is removed;
2. append every new archive and its zero padding to ``data``; fsync; record the SHA-256 of each
   new archive (``.0x<id>.digests.json``, atomic, before the index points at them);
3. write the new index to a temporary file, fsync, rename over ``index``, fsync the folder;
4. record the new last archive end (a small state file, also atomic).

A crash anywhere leaves the previous index describing a prefix of ``data``, so readers keep
working, and the next run repairs and redoes the append to the same bytes. ``data`` is never
rewritten below the length the index accounts for: earlier pieces keep their SHA-1.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from waku_legacy.archive.encode import (
    PIECE_LENGTH,
    DecodedArchive,
    EncodedArchive,
    Flavour,
    IndexEntry,
    check_contiguous,
    decode_archive,
    decode_index,
    encode_index,
    index_entry_for,
)
from waku_legacy.archive.errors import ArchiveCorrupted, ArchiveError
from waku_legacy.archive.layout import CommunityLayout
from waku_legacy.durable import fsync_dir, write_atomic
from waku_legacy.errors import DecodeError
from waku_legacy.faults import FaultHook, no_fault
from waku_legacy.identity.topics import CommunityId

__all__ = [
    "AppendResult",
    "ArchiveDataStatus",
    "ArchiveIndex",
    "append_archives",
    "inspect_archive_data",
    "read_archive",
    "read_archive_bytes",
    "read_index",
    "recorded_digests",
    "recorded_last_end",
    "repair_archive_data",
    "write_last_end",
]


@dataclass(frozen=True, slots=True)
class ArchiveIndex:
    """A community's index: entries in data order (by offset)."""

    entries: tuple[IndexEntry, ...]
    data_length: int  # bytes of ``data`` the index accounts for

    def get(self, archive_id: str) -> IndexEntry:
        for entry in self.entries:
            if entry.archive_id == archive_id.lower():
                return entry
        raise ArchiveError(f"archive {archive_id} is not in the index")

    @property
    def last_end(self) -> int | None:
        return max((e.window_to for e in self.entries), default=None)

    @property
    def latest(self) -> list[IndexEntry]:
        """The archive(s) of the most recent window (several when it was split)."""
        if not self.entries:
            return []
        newest = max(e.window_from for e in self.entries)
        return [e for e in self.entries if e.window_from == newest]


def _load_index(
    path: Path, flavour: Flavour, verify: bool, piece_length: int = PIECE_LENGTH
) -> ArchiveIndex:
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return ArchiveIndex((), 0)
    except IsADirectoryError:
        raise ArchiveError(f"archive index {path} is a directory; it must be a file") from None
    except OSError as exc:
        raise ArchiveError(f"cannot read archive index {path}: {exc.strerror or exc}") from None
    try:
        entries = decode_index(data, flavour=flavour, verify_keys=verify)
    except ArchiveCorrupted as exc:
        raise ArchiveCorrupted("archive index", f"{path}: {exc.reason}") from exc
    except DecodeError as exc:  # malformed bytes, over the size limit
        raise ArchiveCorrupted("archive index", f"{path}: {exc}") from exc
    try:
        length = check_contiguous(entries, piece_length)
    except ArchiveCorrupted as exc:
        raise ArchiveCorrupted("archive index", f"{path}: {exc.reason}") from exc
    ordered = tuple(sorted(entries.values(), key=lambda e: e.offset))
    return ArchiveIndex(ordered, length)


def read_index(
    archive_dir: str | os.PathLike[str],
    community: CommunityId | str,
    *,
    flavour: Flavour | str = Flavour.STATUS_GO,
    verify: bool = True,
) -> ArchiveIndex:
    """Read and check ``<archive dir>/0x<id>/index`` (empty when there is none yet)."""
    layout = CommunityLayout.of(archive_dir, community)
    return _load_index(layout.index, Flavour.parse(flavour), verify)


def read_archive_bytes(data_path: Path, entry: IndexEntry) -> bytes:
    """The ``size - padding`` bytes of one archive from a ``data`` file."""
    try:
        with open(data_path, "rb") as handle:
            handle.seek(entry.offset)
            raw = handle.read(entry.archive_length)
    except OSError as exc:
        raise ArchiveError(f"cannot read archive data {data_path}: {exc.strerror or exc}") from None
    if len(raw) != entry.archive_length:
        raise ArchiveCorrupted(
            "archive data",
            f"{data_path} ends before archive {entry.archive_id} "
            f"(needs {entry.offset + entry.archive_length} bytes)",
        )
    return raw


def read_archive(
    archive_dir: str | os.PathLike[str],
    community: CommunityId | str,
    archive: str | IndexEntry,
    *,
    flavour: Flavour | str = Flavour.STATUS_GO,
) -> DecodedArchive:
    """Decode one archive of a community's store (by id or index entry)."""
    flavour = Flavour.parse(flavour)
    layout = CommunityLayout.of(archive_dir, community)
    entry = (
        archive
        if isinstance(archive, IndexEntry)
        else read_index(archive_dir, community, flavour=flavour).get(archive)
    )
    raw = read_archive_bytes(layout.data, entry)
    return decode_archive(raw, flavour=flavour, what=f"archive {entry.archive_id}")


@dataclass(frozen=True, slots=True)
class ArchiveDataStatus:
    """A community's archive data (``index`` and ``data``) as found on disk."""

    index: ArchiveIndex
    data_length: int  # actual size of ``data`` (0 when missing)
    torn_tail: int  # bytes of ``data`` past what the index accounts for
    stale_tmp_index: bool  # a temporary index left by an interrupted run

    @property
    def clean(self) -> bool:
        return self.torn_tail == 0 and not self.stale_tmp_index


def inspect_archive_data(layout: CommunityLayout, flavour: Flavour | str) -> ArchiveDataStatus:
    """Compare ``index`` and ``data``; raises ArchiveCorrupted when data is missing bytes."""
    layout.check_directories()
    index = _load_index(layout.index, Flavour.parse(flavour), verify=True)
    try:
        data_length = layout.data.stat().st_size
    except FileNotFoundError:
        data_length = 0
    if data_length < index.data_length:
        raise ArchiveCorrupted(
            "archive data",
            f"{layout.data} has {data_length} bytes but the index accounts for "
            f"{index.data_length}: data was truncated or replaced",
        )
    return ArchiveDataStatus(
        index, data_length, data_length - index.data_length, layout.index_tmp.exists()
    )


def repair_archive_data(
    layout: CommunityLayout,
    flavour: Flavour | str,
    *,
    fault: FaultHook = no_fault,
    fsync: bool = True,
) -> ArchiveDataStatus:
    """Undo what an interrupted append left behind; returns the status found before."""
    status = inspect_archive_data(layout, flavour)
    if status.torn_tail:
        fault("repair:truncate")
        with open(layout.data, "r+b") as handle:
            handle.truncate(status.index.data_length)
            if fsync:
                os.fsync(handle.fileno())
    if status.stale_tmp_index:
        fault("repair:remove-tmp")
        layout.index_tmp.unlink(missing_ok=True)
    return status


def recorded_last_end(layout: CommunityLayout, index: ArchiveIndex) -> int | None:
    """The end of the last archive run: the state file, never before the index's last ``to``."""
    recorded: int | None = None
    try:
        state = json.loads(layout.state.read_text())
        value = state.get("last_end")
        if isinstance(value, int) and value > 0:
            recorded = value
    except FileNotFoundError:
        pass
    except OSError as exc:  # a directory, unreadable: an operator must look
        raise ArchiveError(f"cannot read {layout.state}: {exc.strerror or exc}") from None
    except (ValueError, AttributeError, RecursionError):
        recorded = None  # an unreadable state file only loses the trailing empty windows
    candidates = [v for v in (recorded, index.last_end) if v]
    return max(candidates) if candidates else None


def write_last_end(
    layout: CommunityLayout, last_end: int, *, fault: FaultHook = no_fault, fsync: bool = True
) -> None:
    body = json.dumps({"community": layout.name, "last_end": last_end}, sort_keys=True) + "\n"
    write_atomic(layout.state, body.encode(), fault=fault, step="state", fsync=fsync)


def recorded_digests(layout: CommunityLayout) -> dict[str, str]:
    """archive id -> SHA-256 (hex) of its ``size - padding`` bytes, as written by this tool.

    Empty for archives written before digests were recorded (or by another tool); an
    unreadable file is an ArchiveCorrupted naming it.
    """
    try:
        raw = layout.digests.read_bytes()
    except FileNotFoundError:
        return {}
    except OSError as exc:
        raise ArchiveError(f"cannot read {layout.digests}: {exc.strerror or exc}") from None
    try:
        doc = json.loads(raw)
        table = doc["sha256"]
        if not isinstance(table, dict) or not all(
            isinstance(k, str) and isinstance(v, str) and len(v) == 64 for k, v in table.items()
        ):
            raise ValueError("'sha256' is not a table of 64-hex-digit strings")
    except (ValueError, KeyError, TypeError) as exc:
        raise ArchiveCorrupted("archive digests", f"{layout.digests}: {exc}") from None
    return dict(table)


def _write_digests(
    layout: CommunityLayout, table: dict[str, str], *, fault: FaultHook, fsync: bool
) -> None:
    body = {"community": layout.name, "sha256": dict(sorted(table.items()))}
    write_atomic(layout.digests, (json.dumps(body, indent=1) + "\n").encode(), fault=fault,
                 step="digests", fsync=fsync)  # fmt: skip


@dataclass(slots=True)
class AppendResult:
    added: list[IndexEntry] = field(default_factory=list)
    skipped: int = 0  # encoded archives whose window is already in the index
    repaired_bytes: int = 0  # torn tail truncated before appending
    data_length: int = 0
    index: ArchiveIndex = field(default_factory=lambda: ArchiveIndex((), 0))

    @property
    def archive_ids(self) -> list[str]:
        return [e.archive_id for e in self.added]


def append_archives(
    archive_dir: str | os.PathLike[str],
    community: CommunityId | str,
    encoded: Sequence[EncodedArchive],
    *,
    flavour: Flavour | str | None = None,
    fault: FaultHook = no_fault,
    fsync: bool = True,
    piece_length: int = PIECE_LENGTH,
    catch_up: bool = False,
) -> AppendResult:
    """Append encoded archives to a community's ``data`` and rewrite its ``index``.

    Sequential, crash-safe and deterministic: archives are placed in window order (the given
    order is kept within one window); those whose window starts before the end of the last
    archive already in the index are skipped (a retried batch does not duplicate them).
    ``catch_up``: append them all, earlier windows included (:mod:`~waku_legacy.archive.repair`
    appends archives of messages missing from windows already archived).
    """
    layout = CommunityLayout.of(archive_dir, community)
    chosen = _store_flavour(encoded, flavour)
    # 1. repair what an interrupted append left; skip archives already stored
    layout.root.mkdir(parents=True, exist_ok=True)
    status = repair_archive_data(layout, chosen, fault=fault, fsync=fsync)
    result = AppendResult(repaired_bytes=status.torn_tail)
    index = status.index
    last_end = index.last_end
    todo = sorted(encoded, key=lambda e: e.window_from)  # stable: split parts keep their order
    fresh = [e for e in todo if catch_up or last_end is None or e.window_from >= last_end]
    result.skipped = len(todo) - len(fresh)
    if not fresh:
        result.data_length = index.data_length
        result.index = index
        return result
    # 2. append them to data and record their digests, 3. the index that points at them
    new_entries, digests = _append_data(
        layout, fresh, index.data_length, piece_length, fault=fault, fsync=fsync
    )
    all_entries = (*index.entries, *new_entries)
    _write_digests_and_index(layout, all_entries, digests, fault=fault, fsync=fsync)
    offset = index.data_length + sum(e.size for e in new_entries)
    result.added = new_entries
    result.index = ArchiveIndex(tuple(sorted(all_entries, key=lambda e: e.offset)), offset)
    result.data_length = offset
    return result


def _store_flavour(encoded: Sequence[EncodedArchive], flavour: Flavour | str | None) -> Flavour:
    """The flavour given, else the archives' own one; all archives must be of it."""
    flavours = {e.flavour for e in encoded}
    if flavour is None:
        chosen = flavours.pop() if len(flavours) == 1 else Flavour.STATUS_GO
    else:
        chosen = Flavour.parse(flavour)
    if any(f is not chosen for f in flavours):
        raise ArchiveError(f"all archives must be {chosen} flavour to go in one store")
    return chosen


def _append_data(
    layout: CommunityLayout,
    fresh: Sequence[EncodedArchive],
    offset: int,
    piece_length: int,
    *,
    fault: FaultHook,
    fsync: bool,
) -> tuple[list[IndexEntry], dict[str, str]]:
    """Append each archive and its zero padding at ``offset``; (their entries, SHA-256 hex)."""
    new_entries: list[IndexEntry] = []
    digests: dict[str, str] = {}
    created = not layout.data.exists()
    fault("data:open")  # before the first byte is appended (a fencing check: archive.fence)
    with open(layout.data, "ab") as handle:
        for number, archive in enumerate(fresh):
            entry = index_entry_for(archive, offset, piece_length=piece_length)
            half = len(archive.data) // 2
            handle.write(archive.data[:half])
            handle.flush()
            fault(f"data:append:{number}:partial")
            handle.write(archive.data[half:])
            if entry.padding:
                handle.write(bytes(entry.padding))
            handle.flush()
            fault(f"data:append:{number}")
            new_entries.append(entry)
            digests[entry.archive_id] = hashlib.sha256(archive.data).hexdigest()
            offset += entry.size
        fault("data:fsync")
        if fsync:
            os.fsync(handle.fileno())
    if created and fsync:
        fsync_dir(layout.root)
    return new_entries, digests


def _write_digests_and_index(
    layout: CommunityLayout,
    all_entries: Sequence[IndexEntry],
    digests: dict[str, str],
    *,
    fault: FaultHook,
    fsync: bool,
) -> None:
    # Digests go down before the index points at the archives: a kill in between leaves
    # entries for archives the index does not list yet (pruned by the next write).
    known = {e.archive_id for e in all_entries}
    table = {k: v for k, v in recorded_digests(layout).items() if k in known}
    _write_digests(layout, table | digests, fault=fault, fsync=fsync)
    write_atomic(
        layout.index,
        encode_index(all_entries),
        fault=fault,
        step="index",
        tmp=layout.index_tmp,
        fsync=fsync,
    )
