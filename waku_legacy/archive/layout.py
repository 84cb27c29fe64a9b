"""Where archive files live, and the crash-safe file primitives they are written with.

- ``<archive dir>/0x<id>/data``: the encoded archives back to back (append-only);
- ``<archive dir>/0x<id>/index``: the serialized index (replaced atomically);
- ``<archive dir>/.0x<id>.index.tmp`` and ``.0x<id>.state.json``: our temporary index and the
  recorded last archive end, kept OUTSIDE the torrent folder because status-go builds its
  torrent from every file in that folder;
- ``<torrent dir>/0x<id>.torrent`` plus ``0x<id>.magnet-message.pb`` / ``.json``.

Every write step calls an optional fault hook with the step's name first; tests make it raise
at each step in turn to show that a rerun finishes with the same bytes.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from waku_legacy.identity.topics import CommunityId

__all__ = [
    "CommunityLayout",
    "FaultHook",
    "fsync_dir",
    "no_fault",
    "write_atomic",
]

FaultHook = Callable[[str], None]


def no_fault(step: str) -> None:
    """The default hook: do nothing."""


@dataclass(frozen=True, slots=True)
class CommunityLayout:
    archive_dir: Path
    torrent_dir: Path | None
    community: CommunityId

    @classmethod
    def of(
        cls,
        archive_dir: str | os.PathLike[str],
        community: CommunityId | str,
        torrent_dir: str | os.PathLike[str] | None = None,
    ) -> CommunityLayout:
        if isinstance(community, str):
            community = CommunityId.parse(community)
        return cls(
            Path(archive_dir), Path(torrent_dir) if torrent_dir is not None else None, community
        )

    @property
    def name(self) -> str:
        """``0x`` + 66 lowercase hex: folder name, torrent name and file stem."""
        return str(self.community)

    @property
    def root(self) -> Path:
        return self.archive_dir / self.name

    @property
    def data(self) -> Path:
        return self.root / "data"

    @property
    def index(self) -> Path:
        return self.root / "index"

    @property
    def index_tmp(self) -> Path:
        return self.archive_dir / f".{self.name}.index.tmp"

    @property
    def state(self) -> Path:
        return self.archive_dir / f".{self.name}.state.json"

    def _torrent_dir(self) -> Path:
        if self.torrent_dir is None:
            raise ValueError("no torrent directory given")
        return self.torrent_dir

    @property
    def torrent(self) -> Path:
        return self._torrent_dir() / f"{self.name}.torrent"

    @property
    def magnet_message_pb(self) -> Path:
        return self._torrent_dir() / f"{self.name}.magnet-message.pb"

    @property
    def magnet_message_json(self) -> Path:
        return self._torrent_dir() / f"{self.name}.magnet-message.json"


def fsync_dir(path: Path) -> None:
    """Make a rename or a file creation in ``path`` durable."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    try:
        with contextlib.suppress(OSError):  # some filesystems refuse fsync on directories
            os.fsync(fd)
    finally:
        os.close(fd)


def write_atomic(
    path: Path,
    data: bytes,
    *,
    fault: FaultHook = no_fault,
    step: str,
    tmp: Path | None = None,
    fsync: bool = True,
) -> None:
    """Write temp file, fsync, rename over ``path``, fsync the folder(s).

    Fault points: ``<step>:write-tmp`` (half the bytes written), ``<step>:fsync-tmp``,
    ``<step>:rename``, ``<step>:done``.
    """
    tmp = tmp if tmp is not None else path.with_name(f".{path.name}.tmp")
    with open(tmp, "wb") as handle:
        half = len(data) // 2
        handle.write(data[:half])
        handle.flush()
        fault(f"{step}:write-tmp")
        handle.write(data[half:])
        handle.flush()
        fault(f"{step}:fsync-tmp")
        if fsync:
            os.fsync(handle.fileno())
    fault(f"{step}:rename")
    os.replace(tmp, path)
    if fsync:
        fsync_dir(path.parent)
        if tmp.parent != path.parent:
            fsync_dir(tmp.parent)
    fault(f"{step}:done")
