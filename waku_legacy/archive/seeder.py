"""Seeding: one libtorrent session that serves exactly the latest torrent of each community.

A new build replaces the community's torrent (the old one is removed from the session, its
files kept); :meth:`Seeder.refresh` rescans a torrent folder and does that for every
community whose .torrent changed. Each added torrent is checked against the files on disk and
must reach the seeding state; a mismatch is a :class:`SeederError`.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from waku_legacy.archive.errors import SeederError
from waku_legacy.archive.session import SessionConfig, make_session
from waku_legacy.archive.torrent import TorrentFile, load_torrent
from waku_legacy.errors import WakuLegacyError

if TYPE_CHECKING:
    import libtorrent as lt

__all__ = ["SeedStats", "Seeder"]


@dataclass(frozen=True, slots=True)
class SeedStats:
    name: str  # 0x<community id>
    info_hash: str
    state: str
    progress: float
    peers: int
    uploaded: int  # payload bytes uploaded in this session
    torrent_path: str


@dataclass(slots=True)
class _Seeding:
    handle: lt.torrent_handle
    torrent: TorrentFile
    path: Path
    mtime_ns: int


class Seeder:
    """Seeds the latest torrent per community from ``archive_dir`` (libtorrent save path)."""

    def __init__(
        self, archive_dir: str | os.PathLike[str], config: SessionConfig | None = None
    ) -> None:
        self.archive_dir = Path(archive_dir)
        self.config = config or SessionConfig()
        self._session: lt.session | None = make_session(self.config)
        self._seeding: dict[str, _Seeding] = {}

    # -- lifecycle -----------------------------------------------------------------------------

    def close(self) -> None:
        if self._session is not None:
            for item in self._seeding.values():
                self._session.remove_torrent(item.handle)
            self._seeding.clear()
            self._session = None

    def __enter__(self) -> Seeder:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def listen_port(self) -> int:
        return int(self._open_session().listen_port())

    def _open_session(self) -> lt.session:
        if self._session is None:
            raise SeederError("the seeder is closed")
        return self._session

    # -- torrents ------------------------------------------------------------------------------

    def seed(self, torrent_path: str | os.PathLike[str], *, wait: float | None = 30.0) -> SeedStats:
        """Seed ``torrent_path``, replacing whatever this community seeded before."""
        import libtorrent as lt

        path = Path(torrent_path)
        torrent = load_torrent(path)
        current = self._seeding.get(torrent.name)
        if current is not None:
            if current.torrent.info_hash == torrent.info_hash:
                current.mtime_ns = path.stat().st_mtime_ns
                return self._stats(current)
            self._open_session().remove_torrent(current.handle)  # files stay: only the torrent goes
            del self._seeding[torrent.name]
        params = lt.add_torrent_params()
        params.ti = lt.torrent_info(path.read_bytes())
        params.save_path = str(self.archive_dir)
        if not self.config.trackers:
            params.trackers = []
        handle = self._open_session().add_torrent(params)
        item = _Seeding(handle, torrent, path, path.stat().st_mtime_ns)
        self._seeding[torrent.name] = item
        if wait:
            try:
                self.wait_seeding(torrent.name, timeout=wait)
            except SeederError:
                # never leave a torrent the files do not match in the session: it would sit
                # there "downloading" (and announce itself) instead of seeding
                self.stop(torrent.name)
                raise
        return self._stats(item)

    def wait_seeding(self, name: str, *, timeout: float = 30.0) -> None:
        """Block until the community's torrent is checked and seeding (SeederError if not)."""
        import libtorrent as lt

        item = self._seeding[name]
        deadline = time.monotonic() + timeout
        while True:
            status = item.handle.status()
            if status.errc.value():
                raise SeederError(f"seeding {name}: {status.errc.message()}")
            checking = status.state in (
                lt.torrent_status.checking_files,
                lt.torrent_status.checking_resume_data,
            )
            if status.state == lt.torrent_status.seeding:
                return
            if not checking and status.has_metadata and status.progress < 1.0:
                raise SeederError(
                    f"seeding {name}: files in {self.archive_dir / name} do not match the "
                    f"torrent ({status.progress:.0%} of pieces verify)"
                )
            if time.monotonic() > deadline:
                raise SeederError(f"seeding {name}: not seeding after {timeout:.0f} s")
            time.sleep(0.02)

    def refresh(
        self,
        torrent_dir: str | os.PathLike[str],
        *,
        prepare: Callable[[Path], None] | None = None,
        on_error: Callable[[Path, WakuLegacyError], None] | None = None,
    ) -> list[SeedStats]:
        """Seed every ``0x<id>.torrent`` in ``torrent_dir``, replacing changed ones.

        ``prepare(path)`` runs before a new or changed torrent is seeded (the seed command
        finishes an interrupted build there: libtorrent alone accepts an old torrent whose
        files grew, it only checks the bytes the torrent covers). Without ``on_error`` the
        first torrent that cannot be seeded raises; with it, each failure is handed over and
        the others are still seeded.
        """
        out = []
        for path in sorted(Path(torrent_dir).glob("0x*.torrent")):
            name = path.name[: -len(".torrent")]
            current = self._seeding.get(name)
            if current is not None and current.mtime_ns == path.stat().st_mtime_ns:
                out.append(self._stats(current))
                continue
            try:
                if prepare is not None:
                    prepare(path)
                out.append(self.seed(path))
            except WakuLegacyError as exc:
                if on_error is None:
                    raise
                on_error(path, exc)
        return out

    def stop(self, name: str) -> None:
        item = self._seeding.pop(name, None)
        if item is not None:
            self._open_session().remove_torrent(item.handle)

    def stats(self) -> list[SeedStats]:
        return [self._stats(item) for _, item in sorted(self._seeding.items())]

    def _stats(self, item: _Seeding) -> SeedStats:
        status = item.handle.status()
        return SeedStats(
            name=item.torrent.name,
            info_hash=item.torrent.info_hash,
            state=str(status.state),
            progress=float(status.progress),
            peers=int(status.num_peers),
            uploaded=int(status.total_payload_upload),
            torrent_path=str(item.path),
        )

    def seeding(self) -> dict[str, str]:
        """community name -> info-hash of what is seeded now."""
        return {name: item.torrent.info_hash for name, item in self._seeding.items()}
