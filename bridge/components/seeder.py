"""The libtorrent seeder as a component (:class:`SeederComponent`), and the archive folders
it and the archivers write (:func:`archive_dirs`)."""

from __future__ import annotations

from pathlib import Path

from waku_legacy.bridge.archiver import SeederHost
from waku_legacy.bridge.config import ArchiveConfig
from waku_legacy.bridge.lifecycle import READY, Component

__all__ = ["SeederComponent", "archive_dirs"]


def archive_dirs(archive: ArchiveConfig) -> None:
    """Make the archive and torrent folders (both may already be there)."""
    Path(archive.archive_dir).mkdir(parents=True, exist_ok=True)
    Path(archive.torrent_dir).mkdir(parents=True, exist_ok=True)


class SeederComponent(Component):
    """The libtorrent seeder on its own thread."""

    name = "seeder"

    def __init__(self, archive: ArchiveConfig) -> None:
        self.archive = archive
        self.host: SeederHost | None = None

    async def open(self) -> None:
        from waku_legacy.archive import SessionConfig

        archive = self.archive
        archive_dirs(archive)
        self.host = SeederHost(
            archive.archive_dir,
            SessionConfig(
                listen=archive.seed_listen, dht=archive.dht, trackers=archive.trackers,
                utp=archive.utp,
            ),
        )  # fmt: skip
        await self.host.start()

    async def close(self) -> None:
        if self.host is not None:
            await self.host.close()

    def health(self) -> str | None:
        return READY if self.host is not None and not self.closed else None
