"""Every community's archiving on its schedule, as a component (:class:`ArchivingComponent`)."""

from __future__ import annotations

import asyncio
import contextlib

from waku_legacy.archive.logos_storage import client_for
from waku_legacy.bridge.archiver import ArchiveScheduler, CommunityArchiver
from waku_legacy.bridge.components.context import BridgeContext
from waku_legacy.bridge.components.relay import RelayComponent
from waku_legacy.bridge.components.seeder import SeederComponent, archive_dirs
from waku_legacy.bridge.components.store import StoreComponent
from waku_legacy.bridge.config import ArchiveConfig, HistoryConfig
from waku_legacy.bridge.leader import LeaderLock, LocalRole, Role
from waku_legacy.bridge.lifecycle import READY, Component, cancel_task
from waku_legacy.config.keys import default_of
from waku_legacy.store import sqlite_path

__all__ = ["ArchivingComponent"]


class ArchivingComponent(Component):
    """Every community's archiving (build, seed, publish) on its schedule. Closing cancels
    the scheduler (a build in progress finishes its file writes on its worker thread: builds
    are crash-safe either way), then waits up to ``shutdown_timeout`` for runs an admin
    request started, so that they finish with the seeder that closes after this."""

    name = "archiving"

    def __init__(
        self, context: BridgeContext, archive: ArchiveConfig, store: StoreComponent,
        seeder: SeederComponent | None, relay: RelayComponent | None,
        role: LeaderLock | None = None,
    ) -> None:  # fmt: skip
        self.context = context
        self.archive = archive
        self.store = store
        self.seeder = seeder
        self.relay = relay
        self.needs = tuple(part.name for part in (store, seeder, relay) if part is not None)
        # the archiving role's fencing and link schedule: the leader lock (PostgreSQL), or
        # this instance's own in the SQLite file (bridge.leader)
        self.role = role
        self._local_role: LocalRole | None = None
        self.scheduler: ArchiveScheduler | None = None
        self._task: asyncio.Task[None] | None = None

    async def open(self) -> None:
        context, archive = self.context, self.archive
        config = context.config
        archive_dirs(archive)
        history = config.history
        node_timeout = history.timeout if history else default_of(HistoryConfig, "timeout")
        seeder = self.seeder.host if self.seeder is not None else None
        role: Role | None = self.role
        if role is None:  # SQLite: one instance per store, the role its own
            self._local_role = await asyncio.to_thread(LocalRole, sqlite_path(config.store.url))
            role = self._local_role
        archivers = [
            CommunityArchiver(
                community, archive, store=self.store.opened, seeder=seeder,
                relay=self.relay.publisher if self.relay else None, metrics=context.metrics,
                clock=context.clock, key=context.keys.get(str(community.id)),
                logos_storage=client_for(  # issue 12: None for the torrent back end
                    community.backend, config.logos_storage_url, f"community {community.id}"
                ),
                # asked for the clocks a community already used before a link is published
                store_nodes=history.nodes if history else (),
                store_node_timeout=node_timeout,
                role=role,
            )
            for community in config.communities
        ]  # fmt: skip
        self.scheduler = ArchiveScheduler(archivers, clock=context.clock, seeder=seeder)
        self._task = asyncio.create_task(self.scheduler.run(), name="archive-scheduler")

    async def close(self) -> None:
        task, self._task = self._task, None
        local, self._local_role = self._local_role, None
        async with contextlib.AsyncExitStack() as then:  # each step even when one before raised
            if local is not None:
                then.push_async_callback(asyncio.to_thread, local.close)  # last: runs fence with it
            if task is not None:
                then.push_async_callback(self._wait_for_admin_runs)
            await cancel_task(task)

    async def _wait_for_admin_runs(self) -> None:
        scheduler = self.scheduler
        if scheduler is None:
            return
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(self.context.shutdown_timeout):
                for archiver in scheduler.archivers.values():
                    await archiver.lock.acquire()  # held from now on: this archiver runs no more

    def health(self) -> str | None:
        return READY if self._task is not None else None
