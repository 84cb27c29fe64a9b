"""What the bridge shows of itself: the read interface the HTTP API serves
(:class:`~waku_legacy.bridge.http_api.BridgeBackend`) and the probes behind ``/metrics``,
read from the components' running objects and the service's state.

``/health`` lists the protocols in nwaku's manner, always in this order: ``Store``, then
``Waku v1 mailserver``, ``Relay publisher``, ``Store (libp2p)`` and ``Archives`` for those
configured. A component that does not serve (not started yet, or closed) shows the service's
state (``Initializing``, ``Shutting Down``, ``Stopped``).
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from waku_legacy.bridge.components import (
    ArchivingComponent,
    HistoryComponent,
    HttpApi,
    SeederComponent,
    WorkersComponent,
)
from waku_legacy.bridge.http_api import VERSION, health_document
from waku_legacy.bridge.lifecycle import READY, ServiceState
from waku_legacy.bridge.status import (
    CommunityStatus,
    ServiceStatus,
    StatusReport,
    WindowCounts,
    community_status,
    history_status,
    protocol_health,
    public_store_url,
    v1_status,
)
from waku_legacy.bridge.store_rest_server import RestError
from waku_legacy.errors import WakuLegacyError
from waku_legacy.identity.topics import CommunityId

if TYPE_CHECKING:  # the parts' types: the view reads them, the service builds them
    from waku_legacy.bridge import components as c
    from waku_legacy.bridge.archiver import ArchiveScheduler, CommunityArchiver, SeederHost
    from waku_legacy.bridge.history import HistoryPuller
    from waku_legacy.bridge.lifecycle import Lifecycle
    from waku_legacy.bridge.metrics import Snapshot
    from waku_legacy.mailserver_compat.server.asyncio_server import MailServer

__all__ = ["BridgeParts", "BridgeView"]

Samples = list[tuple[tuple[str, ...], float]]


@dataclass(frozen=True, slots=True)
class BridgeParts:
    """The components the view reads (None: not configured). The REST API and the worker
    processes, built after the view (it is what they serve), are read from the lifecycle
    once entered."""

    store: c.StoreComponent
    live: c.LiveComponent
    singletons: c.Singletons
    relay: c.RelayComponent | None = None
    v1: c.MailserverComponent | None = None
    libp2p: c.Libp2pComponent | None = None
    leader: c.LeaderComponent | None = None


class BridgeView:
    """The service's state and its components, as the HTTP API and the metrics read them."""

    def __init__(
        self, context: c.BridgeContext, lifecycle: Lifecycle, parts: BridgeParts, *,
        seed_enabled: bool,
    ) -> None:  # fmt: skip
        self.context = context
        self.config = context.config
        self.lifecycle = lifecycle
        self.parts = parts
        self.seed_enabled = seed_enabled
        self.admin_token = context.config.admin.token
        self.status_page = context.config.server.status_page
        self.started_at: float | None = None  # the service's clock, for the status page
        self._window_counts = WindowCounts()
        self._register_probes()

    # -- the running objects ----------------------------------------------------------------

    @property
    def state(self) -> ServiceState:
        return self.lifecycle.state

    @property
    def rest_port(self) -> int:
        http = self.lifecycle.find(HttpApi)
        return http.port if http is not None else 0

    @property
    def mailserver(self) -> MailServer | None:
        return self.parts.v1.server if self.parts.v1 is not None else None

    @property
    def archive(self) -> ArchiveScheduler | None:
        archiving = self.parts.singletons.part(ArchivingComponent)
        return archiving.scheduler if archiving is not None else None

    @property
    def seeder(self) -> SeederHost | None:
        seeder = self.parts.singletons.part(SeederComponent)
        return seeder.host if seeder is not None else None

    @property
    def history(self) -> HistoryPuller | None:
        history = self.parts.singletons.part(HistoryComponent)
        return history.puller if history is not None else None

    @property
    def is_leader(self) -> bool:
        return self.parts.singletons.is_leader

    def _register_probes(self) -> None:
        metrics, parts = self.context.metrics, self.parts

        def peers() -> Samples:
            mailserver = self.mailserver
            return [((), float(len(mailserver.peers) if mailserver else 0))]

        def mailserver_stats() -> Samples:
            stats = self.mailserver.stats if self.mailserver else {}
            return [((k,), float(v)) for k, v in stats.items()]

        def libp2p_events() -> Samples:
            listener = parts.libp2p.listener if parts.libp2p is not None else None
            stats = listener.stats() if listener is not None else {}
            return [((event,), float(count)) for event, count in stats.items()]

        def torrents(attribute: str) -> Callable[[], Samples]:
            def probe() -> Samples:
                stats = self.seeder.stats() if self.seeder else []
                return [((s.name,), float(getattr(s, attribute))) for s in stats]

            return probe

        metrics.v1_peers._callback = peers
        metrics.v1_requests._callback = mailserver_stats
        metrics.libp2p_events._callback = libp2p_events
        metrics.store_reachable._callback = lambda: [
            ((), 0.0 if parts.store.outage() is not None else 1.0)
        ]
        metrics.torrent_peers._callback = torrents("peers")
        metrics.torrent_uploaded._callback = torrents("uploaded")

    # -- BridgeBackend ------------------------------------------------------------------------

    def health(self) -> tuple[str, list[dict[str, str]]]:
        parts, state = self.parts, self.state.value
        outage = parts.store.outage()
        if outage is not None and self.state is ServiceState.READY:
            # the store cannot be reached: queries answer 503, live rows go to the spool
            protocols = [{"Store": f"Not Ready: {outage}"}]
            node = "Not Ready"
        else:
            protocols = [{"Store": state}]
            node = state
        if parts.v1 is not None:
            protocols.append({"Waku v1 mailserver": parts.v1.health() or state})
        if parts.relay is not None:
            protocols.append({"Relay publisher": parts.relay.health() or state})
        if parts.libp2p is not None:
            libp2p = parts.libp2p.health()  # told once the service is ready
            if libp2p is None or self.state is not ServiceState.READY:
                libp2p = state
            protocols.append({"Store (libp2p)": libp2p})
        leader = parts.leader.health() if parts.leader is not None else None
        if leader == "Standby" and self.config.communities:
            protocols.append({"Archives": "Standby: another instance on this store archives"})
        archiving = parts.singletons.part(ArchivingComponent)
        if archiving is not None and archiving.scheduler is not None:
            archives = archiving.health() or state
            degraded = archiving.scheduler.degraded()
            if degraded and node == READY:
                # an interrupted build that could not be finished, a torrent the files do not
                # match: the node answers, but its archives are not served (503 from /health)
                node = archives = "Degraded"
                archives += ": " + "; ".join(f"{name}: {why}" for name, why in degraded.items())
            protocols.append({"Archives": archives})
        return node, protocols

    def info(self) -> dict[str, Any]:
        host = self.config.server.host
        listen = [f"http://{host}:{self.rest_port}"]
        enode = None
        mailserver = self.mailserver
        if mailserver is not None and mailserver.listening:
            enode = str(mailserver.enode)
            listen.append(enode)
        p2p = self.parts.libp2p.listener if self.parts.libp2p is not None else None
        if p2p is not None:
            listen.extend(p2p.multiaddrs)  # each ends in /p2p/<peer id>, as nwaku's
        workers = self.lifecycle.find(WorkersComponent)
        return {
            "listenAddresses": listen,
            # 31/WAKU2-ENR of the libp2p listener ("" without one, or nothing dialable)
            "enrUri": (p2p.enr or "") if p2p is not None else "",
            "version": VERSION,
            "enode": enode,
            "seedPort": self.seeder.port if self.seeder else None,
            "communities": [str(c.id) for c in self.config.communities],
            # one service, several processes (bridge.workers), one leader per store
            "processes": {"primary": os.getpid(),
                          "workers": workers.pids() if workers is not None else []},
            "leader": self.is_leader,
            "libp2p": None if p2p is None else {
                "peerId": p2p.peer_id, "multiaddrs": p2p.multiaddrs, "listening": p2p.bound,
                "clusterId": p2p.metadata.cluster_id, "shards": list(p2p.metadata.shards),
            },
        }  # fmt: skip

    async def metric_snapshots(self) -> list[Snapshot]:
        """The workers' metrics, added to this process's on ``/metrics``."""
        workers = self.lifecycle.find(WorkersComponent)
        if workers is None or workers.pool is None:
            return []
        return await workers.pool.snapshots()

    def communities_report(self) -> list[dict[str, Any]]:
        archive = self.archive
        return [] if archive is None else [a.report() for a in archive.archivers.values()]

    def _archiver(self, community: str) -> CommunityArchiver:
        try:
            name = str(CommunityId.parse(community))
        except WakuLegacyError as exc:
            raise RestError(400, f"bad community id: {exc}") from None
        archive = self.archive
        if archive is None or name not in archive.archivers:
            raise RestError(404, f"community {name} is not configured here")
        return archive.archivers[name]

    def archives_report(self, community: str) -> dict[str, Any]:
        return self._archiver(community).report()

    async def trigger_archive(self, community: str | None) -> list[dict[str, Any]]:
        archive = self.archive
        if archive is None and self.parts.leader is not None and not self.is_leader:
            raise RestError(
                503, "another bridge instance on this store holds the archiving role (leader "
                "lock); ask that one"
            )  # fmt: skip
        if archive is None:
            raise RestError(404, "archiving is not configured (no [archive] and [[community]])")
        if community is not None:
            return [(await self._archiver(community).run("admin")).to_json()]
        return [r.to_json() for r in await archive.trigger(None)]

    async def status_report(self) -> StatusReport:
        """What the status page shows (``GET /``, ``GET /debug/v1/status``)."""
        node, protocols = self.health()
        health, _ = health_document(node, protocols)
        info = self.info()
        now = self.context.clock.time()
        started = self.started_at
        live = self.parts.live.bridge
        service = ServiceStatus(
            version=VERSION, state=self.state.value, health=health["nodeHealth"],
            protocols=protocol_health(health["protocolsHealth"]), started=started,
            now=now, uptime=None if started is None else now - started,
            listeners=tuple(info["listenAddresses"]), seed_port=info["seedPort"],
            store=public_store_url(self.config.store.url),
            store_backlog=live.writer.backlog if live is not None else 0,
        )  # fmt: skip
        mailserver, history = self.mailserver, self.history
        return StatusReport(
            service=service,
            communities=await asyncio.to_thread(self._communities_status),
            v1=None if mailserver is None else v1_status(mailserver),
            history=None if history is None else history_status(history),
        )

    def _communities_status(self) -> tuple[CommunityStatus, ...]:
        """Every configured community (reads index and link files, may decode archives)."""
        archive = self.archive
        archivers = archive.archivers if archive is not None else {}
        return tuple(
            community_status(c, archivers.get(str(c.id)), self._window_counts)
            for c in self.config.communities
        )
