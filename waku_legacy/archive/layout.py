"""Where archive files live (they are written with :mod:`waku_legacy.durable`).

- ``<archive dir>/0x<id>/data``: the encoded archives back to back (append-only);
- ``<archive dir>/0x<id>/index``: the serialized index (replaced atomically);
- ``<archive dir>/.0x<id>.index.tmp``, ``.0x<id>.state.json`` and ``.0x<id>.digests.json``:
  our temporary index, the recorded last archive end and the SHA-256 of every archive as
  written, kept OUTSIDE the torrent folder because status-go builds its torrent from every
  file in that folder;
- ``<torrent dir>/0x<id>.torrent`` plus ``0x<id>.magnet-message.pb`` / ``.json``.

Every write step calls an optional fault hook with the step's name first; tests make it raise
at each step in turn to show that a rerun finishes with the same bytes.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from pathlib import Path

from waku_legacy.archive.errors import ArchiveError
from waku_legacy.identity.topics import CommunityId

__all__ = ["CommunityLayout", "check_directory", "community_folder"]

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

    @property
    def digests(self) -> Path:
        """SHA-256 of each archive's bytes as written (checked by verify without a torrent)."""
        return self.archive_dir / f".{self.name}.digests.json"

    def check_directories(self, *, existing: bool = False) -> None:
        """ArchiveError naming the path when the folders or files are not what they should be:
        the archive (and torrent) directory a file, ``data`` or ``index`` a directory; with
        ``existing``, also when the archive directory or the community's folder is missing
        (reading a store that is not there is a mistake, not an empty store)."""
        check_directory(self.archive_dir, "archive directory", must_exist=existing)
        if self.torrent_dir is not None:
            check_directory(self.torrent_dir, "torrent directory", must_exist=False)
        if existing and not self.root.is_dir():
            check_directory(self.root, "community archive folder", must_exist=False)
            raise ArchiveError(
                f"no archives of {self.community} in {self.archive_dir}: {self.root} does not "
                "exist (wrong --archive-dir or --community?)"
            )
        for path in (self.data, self.index):
            try:
                mode = path.stat().st_mode
            except FileNotFoundError:
                continue
            except OSError as exc:
                raise ArchiveError(f"cannot use {path}: {exc.strerror or exc}") from None
            if not stat.S_ISREG(mode):
                kind = "a directory" if stat.S_ISDIR(mode) else "not a regular file"
                raise ArchiveError(f"archive file {path} is {kind}; it must be a file")

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


def check_directory(path: Path, what: str, *, must_exist: bool) -> None:
    """ArchiveError naming ``path`` unless it is a directory (or absent, when allowed)."""
    try:
        mode = path.stat().st_mode
    except FileNotFoundError:
        if must_exist:
            raise ArchiveError(f"{what} {path} does not exist") from None
        return
    except NotADirectoryError:
        raise ArchiveError(
            f"{what} {path}: a part of the path is a file, not a directory"
        ) from None
    except OSError as exc:
        raise ArchiveError(f"cannot use {what} {path}: {exc.strerror or exc}") from None
    if not stat.S_ISDIR(mode):
        raise ArchiveError(f"{what} {path} is a file, not a directory")


def community_folder(directory: Path, community: CommunityId) -> Path:
    """The archive dir holding ``0x<id>/``: ``directory`` itself, or its parent when it is
    the community's folder."""
    if directory.name == str(community) and not (directory / str(community)).is_dir():
        return directory.parent
    return directory
