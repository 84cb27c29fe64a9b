"""Every community's archiving when due, and the magnet-link republishing
(:class:`ArchiveScheduler`)."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from waku_legacy.bridge.archiver.community import (
    RECONCILE_RETRY,
    ArchiveRunReport,
    CommunityArchiver,
)
from waku_legacy.bridge.archiver.seeder_host import SeederHost
from waku_legacy.bridge.clock import Clock
from waku_legacy.bridge.logs import fields
from waku_legacy.errors import WakuLegacyError

__all__ = ["ArchiveScheduler"]

log = logging.getLogger("waku_legacy.bridge.archive")


class ArchiveScheduler:
    """Runs every community's archiving when due, and the magnet-link republishing."""

    def __init__(
        self,
        archivers: list[CommunityArchiver],
        *,
        clock: Clock,
        seeder: SeederHost | None,
    ) -> None:
        self.archivers = {a.name: a for a in archivers}
        self.clock = clock
        self.seeder = seeder

    async def seed_existing(self) -> None:
        """At start: finish any interrupted build, then seed the torrents built before (by an
        earlier run or the migration). A torrent that does not match its files is never seeded.
        """
        for archiver in self.archivers.values():
            await archiver.seed_current()

    def degraded(self) -> dict[str, str]:
        """community -> why its archives cannot be served as they are."""
        return {a.name: a.degraded for a in self.archivers.values() if a.degraded}

    async def trigger(self, name: str | None) -> list[ArchiveRunReport]:
        targets = list(self.archivers.values()) if name is None else [self.archivers[name]]
        return [await a.run("admin") for a in targets]

    async def run(self) -> None:
        for archiver in self.archivers.values():
            await archiver.load_schedule()  # before reconcile, which may ask for a publish
        await self.seed_existing()
        while True:
            for archiver in self.archivers.values():
                if archiver.degraded:
                    # neither runs nor publishes a link to files that do not match it; retry
                    if archiver.retry_at > self.clock.time() or not await archiver.seed_current():
                        continue
                try:
                    due = archiver.next_due()
                except WakuLegacyError as exc:
                    log.error("archive state unreadable", extra=fields(error=str(exc)))
                    continue
                if due <= self.clock.time():
                    await archiver.run("schedule" if archiver.last_run else "start")
                if not archiver.degraded and archiver.next_publish <= self.clock.time():
                    await archiver.publish()
                if archiver.pending_link is not None:
                    await archiver.publish_pending()
            healthy = [a for a in self.archivers.values() if not a.degraded]
            wake = min(
                [a.next_publish for a in healthy]
                + [a.retry_at for a in self.archivers.values() if a.degraded]
                + [a.pending_link[0] for a in healthy if a.pending_link is not None]
                + [a.next_due() for a in healthy if _safe(a.next_due)]
                + [self.clock.time() + RECONCILE_RETRY]
            )
            await self.clock.sleep_until(max(wake, self.clock.time() + 0.001))


def _safe(fn: Callable[[], Any]) -> bool:
    try:
        fn()
    except WakuLegacyError:
        return False
    return True
