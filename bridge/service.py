"""The bridge service: every part in one asyncio event loop.

    service = BridgeService(load_config("bridge.toml"))
    await service.start()          # REST API, v1 listener, relay queue, schedulers
    ...
    await service.stop()           # graceful: see below

Start order: store (fails fast on a bad URL), REST API, relay publisher, live bridge, v1
mailserver (RLPx listener), seeder, then the background loops (history pull, archiving).
``/health`` says ``Initializing`` until all are up, then ``Ready``. With ``workers`` > 1
(``waku-legacy serve`` passes ``[server] workers``) the REST API is served by worker processes
as well (:mod:`waku_legacy.bridge.workers`); on a PostgreSQL store archiving, seeding and
history pulls run only while this instance holds the leader lock
(:mod:`waku_legacy.bridge.leader`).

Graceful stop (SIGTERM/SIGINT under :meth:`run_forever`): health turns ``Shutting Down``,
the background loops are cancelled (an archive run in progress finishes its file writes on
its worker thread: builds are crash-safe either way), the v1 listener closes its peers, the
HTTP server stops accepting and lets in-flight requests finish (``shutdown_timeout``), the
live bridge writes what it has buffered, the relay queue gets a bounded time to drain, the
store waits for submitted writes and closes, the seeder closes last.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import socket
from dataclasses import replace
from pathlib import Path
from typing import Any

import aiohttp
from aiohttp import web

from waku_legacy.archive.logos_storage import client_for
from waku_legacy.bridge.archiver import ArchiveScheduler, CommunityArchiver, SeederHost
from waku_legacy.bridge.clock import Clock, SystemClock
from waku_legacy.bridge.config import BridgeConfig
from waku_legacy.bridge.history import HistoryPuller
from waku_legacy.bridge.http_api import VERSION, health_document, make_app, make_runner
from waku_legacy.bridge.http_guard import HttpLimits
from waku_legacy.bridge.leader import LeaderLock
from waku_legacy.bridge.live import LiveBridge
from waku_legacy.bridge.logs import fields
from waku_legacy.bridge.metrics import BridgeMetrics, Snapshot
from waku_legacy.bridge.relay import RelayPublisher
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
from waku_legacy.bridge.store_threads import StoreAccess
from waku_legacy.bridge.workers import WorkerPool, bind_listener
from waku_legacy.errors import ConfigError, WakuLegacyError
from waku_legacy.identity.shards import GLOBAL_PUBSUB_TOPIC
from waku_legacy.identity.topic_mapping import TopicMapping
from waku_legacy.identity.topics import CommunityId
from waku_legacy.store import StoreUnavailable, is_postgres_url, sqlite_path

__all__ = ["BridgeService"]

log = logging.getLogger("waku_legacy.bridge")


class BridgeService:
    def __init__(
        self,
        config: BridgeConfig,
        *,
        clock: Clock | None = None,
        seed: bool = True,
        workers: int = 1,
    ) -> None:
        self.config = config
        # Processes serving the REST API (bridge.workers): `serve` passes [server] workers;
        # embedded (tests, library use) it is one unless asked.
        self.workers = workers
        self.clock = clock or SystemClock()
        self.metrics = BridgeMetrics()
        self.admin_token = config.admin.token
        self.state = "Initializing"
        self.started_at: float | None = None  # the service's clock, for the status page
        self.status_page = config.server.status_page
        self._window_counts = WindowCounts()
        self.seed_enabled = seed
        self.store: StoreAccess = None  # type: ignore[assignment]
        self.rest_port = 0
        self.relay: RelayPublisher | None = None
        self.live: LiveBridge | None = None
        self.mailserver: Any = None
        self.seeder: SeederHost | None = None
        self.archive: ArchiveScheduler | None = None
        self.history: HistoryPuller | None = None
        self.p2p: Any = None  # the libp2p store listener (bridge.p2p), when [libp2p] is on
        self._runner: web.AppRunner | None = None
        self._internal: web.AppRunner | None = None  # the primary's Unix socket for workers
        self.pool: WorkerPool | None = None
        self._listener: socket.socket | None = None  # bound here when there are workers
        self.leader: LeaderLock | None = None  # PostgreSQL: who archives, seeds, publishes
        self.is_leader = False
        self._singletons: list[asyncio.Task[None]] = []
        self._session: aiohttp.ClientSession | None = None
        self._tasks: list[asyncio.Task[None]] = []
        self._stopped = asyncio.Event()
        default_topic = config.relay.default_pubsub_topic if config.relay else GLOBAL_PUBSUB_TOPIC
        self.router = TopicMapping.build(default_topic, config.communities)
        self._keys = self._load_community_keys()
        self._register_probes()

    def _load_community_keys(self) -> dict[str, Any]:
        from waku_legacy.community_config import load_community_key

        keys = {}
        for community in self.config.communities:
            key = load_community_key(community)
            if key is not None:
                keys[str(community.id)] = key
        return keys

    def _register_probes(self) -> None:
        def peers() -> list[tuple[tuple[str, ...], float]]:
            return [((), float(len(self.mailserver.peers) if self.mailserver else 0))]

        def mailserver_stats() -> list[tuple[tuple[str, ...], float]]:
            stats = self.mailserver.stats if self.mailserver else {}
            return [((k,), float(v)) for k, v in stats.items()]

        def torrents(attribute: str) -> Any:
            def probe() -> list[tuple[tuple[str, ...], float]]:
                stats = self.seeder.stats() if self.seeder else []
                return [((s.name,), float(getattr(s, attribute))) for s in stats]

            return probe

        self.metrics.v1_peers._callback = peers
        self.metrics.v1_requests._callback = mailserver_stats
        self.metrics.libp2p_events._callback = lambda: [
            ((event,), float(count))
            for event, count in (self.p2p.stats() if self.p2p is not None else {}).items()
        ]
        self.metrics.store_reachable._callback = lambda: [
            ((), 0.0 if self.store is not None and self.store.health.down else 1.0)
        ]
        self.metrics.torrent_peers._callback = torrents("peers")
        self.metrics.torrent_uploaded._callback = torrents("uploaded")

    # -- lifecycle --------------------------------------------------------------------------

    async def start(self) -> None:
        config = self.config
        self.started_at = self.clock.time()
        self.store = await asyncio.to_thread(
            StoreAccess, config.store.url, readers=config.server.reader_threads
        )
        self._tasks.append(asyncio.create_task(self._watch_store(), name="store-probe"))
        self._session = aiohttp.ClientSession()
        await self._start_http()

        if config.relay is not None:
            self.relay = RelayPublisher(config.relay, self.metrics, self._session)
            self.relay.start()
        v1 = config.v1
        self.live = LiveBridge(
            store=self.store, router=self.router, metrics=self.metrics, clock=self.clock,
            relay=self.relay, seen_capacity=v1.seen_capacity if v1 else 100_000,
            live_window=v1.live_window if v1 else 300.0,
            spool=self._local_state_dir() / "live-spool.rlp",
        )  # fmt: skip
        self.live.start()
        if v1 is not None:
            await self._start_mailserver()
        if config.libp2p is not None:
            await self._start_p2p()

        if is_postgres_url(config.store.url):
            # instances sharing the store take turns at the singletons (bridge.leader)
            self.leader = LeaderLock(
                config.store.url, interval=config.store.leader_interval,
                on_acquired=self._start_singletons, on_lost=self._stop_singletons,
            )  # fmt: skip
            self._tasks.append(asyncio.create_task(self.leader.run(), name="leader-lock"))
        else:
            await self._start_singletons()  # SQLite: one instance per store, no lock
        if self.workers > 1:
            await self._start_workers()
        self.state = "Ready"
        log.info("bridge ready", extra=fields(**self.info()))

    async def _watch_store(self, interval: float = 5.0) -> None:
        """Probe the store every ``interval`` seconds, and on the reconnect schedule while it
        is down: an outage and the store's return show on ``/health`` (and are logged, by
        :class:`~waku_legacy.bridge.store_threads.StoreHealth`) even when no request or
        live row touches the store."""
        health = self.store.health
        while True:
            await asyncio.sleep(max(health.retry_in(), 0.1) if health.down else interval)
            try:
                await self.store.probe()
            except StoreUnavailable:
                pass  # logged once per outage by StoreHealth
            except Exception as exc:
                log.debug("store probe failed", extra=fields(error=str(exc)))

    async def _start_http(self) -> None:
        """The REST API: on its own socket, or (workers) on one this process binds for all."""
        server = self.config.server
        multi = self.workers > 1
        self._runner = make_runner(
            self, HttpLimits.from_config(server), shutdown_timeout=server.shutdown_timeout,
            process=str(os.getpid()) if multi else None,
        )  # fmt: skip
        await self._runner.setup()
        try:
            if multi:
                self._listener = bind_listener(server.host, server.port)
                site: web.BaseSite = web.SockSite(self._runner, self._listener)
            else:
                site = web.TCPSite(self._runner, server.host, server.port)
            await site.start()
        except OSError as exc:
            raise ConfigError(
                f"[server] listen: cannot listen on {server.host}:{server.port}: "
                f"{exc.strerror or exc}"
            ) from None
        self.rest_port = self._runner.addresses[0][1]  # the site's first socket

    async def _start_workers(self) -> None:
        """The worker processes on the REST socket, and the Unix socket they forward
        everything but the store routes to (no limits there: the worker applied them)."""
        server = self.config.server
        assert self._listener is not None  # bound by _start_http
        self.pool = WorkerPool(
            self.config, self._listener, self.workers, self.metrics,
            shutdown_timeout=server.shutdown_timeout, libp2p_listen=self._p2p_listen(),
        )  # fmt: skip
        internal = make_app(self, limits=HttpLimits(requests_per_second=0))
        self._internal = web.AppRunner(
            internal, handle_signals=False, access_log=None,
            shutdown_timeout=server.shutdown_timeout,
        )  # fmt: skip
        await self._internal.setup()
        await web.UnixSite(self._internal, str(self.pool.primary_socket)).start()
        await self.pool.start()

    def _p2p_listen(self) -> tuple[str, ...]:
        """The libp2p listener's addresses as bound (ports resolved, no /p2p/ suffix), for
        the workers to listen on as well; () without one."""
        if self.p2p is None:
            return ()
        listen = tuple(dict.fromkeys(a.split("/p2p/")[0] for a in self.p2p.multiaddrs))
        if any(a.rstrip("/").endswith(("/ws", "/wss")) for a in listen):
            # py-libp2p's WebSocket transport binds without SO_REUSEPORT, and its host then
            # cannot share the TCP port either: a worker logged "WebSocket server error:
            # [Errno 98] Address already in use" and failed at every start
            log.info("libp2p: WebSocket addresses cannot be shared; only the primary serves")
            return ()
        ports = [a.split("/tcp/")[1].split("/")[0] for a in listen if "/tcp/" in a]
        if len(set(ports)) < len(ports):
            # TCP and WebSocket on one port share one socket (py-libp2p's demultiplexer),
            # bound without SO_REUSEPORT: a second process cannot listen there
            log.info("libp2p: TCP and WebSocket share a port; only the primary serves libp2p")
            return ()
        return listen

    async def _start_singletons(self) -> None:
        """What one instance of a store does: archiving (build, seed, publish) and history
        pulls. SQLite: at start; PostgreSQL: while this instance holds the leader lock."""
        config = self.config
        assert self._session is not None  # made in start()
        self.is_leader = True
        self.metrics.leader.set(1)
        if config.archive is not None and config.communities:
            await self._start_archiving()
        if config.history is not None:
            self.history = HistoryPuller(
                config.history, store=self.store, metrics=self.metrics, clock=self.clock,
                session=self._session, pubsub_topics=self._history_topics(),
                state_dir=self._history_state_dir(), live=self.live,
            )  # fmt: skip
            self._singletons.append(asyncio.create_task(self.history.run(), name="history"))

    async def _stop_singletons(self) -> None:
        """The leader lock's session is gone: another instance may take the role now."""
        self.is_leader = False
        self.metrics.leader.set(0)
        tasks, self._singletons = self._singletons, []
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        if self.seeder is not None:
            await self.seeder.close()
        self.seeder = None
        self.archive = None
        self.history = None

    async def _start_p2p(self) -> None:
        """The libp2p listener (store v3, legacy store, metadata) on the same store threads'
        connections as the REST API (the REST workers listen on the same ports)."""
        from waku_legacy.bridge.p2p import start_p2p_listener
        from waku_legacy.store.legacy_query import LegacyCursorCache

        assert self.config.libp2p is not None
        libp2p = self.config.libp2p
        if not libp2p.shards_configured:
            # announce every shard this store answers for (js-waku picks its store peer by
            # the shards in metadata): the configured communities' plus the store's own
            stored = await self.store.read(_stored_shards, libp2p.cluster_id)
            shards = tuple(sorted(set(libp2p.shards) | stored))
            if shards != libp2p.shards:
                libp2p = replace(libp2p, shards=shards)
                # the workers get the config from here on: they announce the same shards
                self.config = replace(self.config, libp2p=libp2p)
        self.p2p = await start_p2p_listener(
            libp2p, self.store.stores, LegacyCursorCache(), exclusive=True
        )

    async def _start_mailserver(self) -> None:
        from waku_legacy.crypto.key_file import load_or_create_node_key
        from waku_legacy.mailserver_compat.server.mailserver import MailServer, MailServerConfig
        from waku_legacy.mailserver_compat.storage.envelope_store import V2StoreSource

        v1 = self.config.v1
        assert v1 is not None and self.live is not None
        key, created = await asyncio.to_thread(load_or_create_node_key, v1.node_key_file)
        if created:
            log.info("created a v1 node key", extra=fields(path=v1.node_key_file))
        ms_config = MailServerConfig(
            rate_limit=v1.rate_limit, min_pow=v1.min_pow,
            trusted_peers=frozenset(v1.trusted_peers), seen_capacity=v1.seen_capacity,
            limits=v1.limits,
        )  # fmt: skip
        self.mailserver = MailServer(
            V2StoreSource(self.store.stores), key, ms_config, sink=self.live.on_v1_envelope,
            on_refusal=self.metrics.count_v1_refusal,
        )  # fmt: skip
        self.live.mailserver = self.mailserver
        try:
            await self.mailserver.start(v1.host, v1.port)
        except OSError as exc:
            raise ConfigError(
                f"[v1] listen: cannot listen on {v1.host}:{v1.port}: {exc.strerror or exc}"
            ) from None

    async def _start_archiving(self) -> None:
        from waku_legacy.archive import SessionConfig

        archive = self.config.archive
        assert archive is not None
        Path(archive.archive_dir).mkdir(parents=True, exist_ok=True)
        Path(archive.torrent_dir).mkdir(parents=True, exist_ok=True)
        if self.seed_enabled:
            self.seeder = SeederHost(
                archive.archive_dir,
                SessionConfig(
                    listen=archive.seed_listen,
                    dht=archive.dht,
                    trackers=archive.trackers,
                    utp=archive.utp,
                ),
            )
            await self.seeder.start()
        archivers = [
            CommunityArchiver(
                community,
                archive,
                store=self.store,
                seeder=self.seeder,
                relay=self.relay,
                metrics=self.metrics,
                clock=self.clock,
                key=self._keys.get(str(community.id)),
                logos_storage=client_for(  # issue 12: None for the torrent back end
                    community.backend, self.config.logos_storage_url, f"community {community.id}"
                ),
                # asked for the clocks a community already used before a link is published
                store_nodes=self.config.history.nodes if self.config.history else (),
                store_node_timeout=self.config.history.timeout if self.config.history else 30.0,
            )
            for community in self.config.communities
        ]
        self.archive = ArchiveScheduler(archivers, clock=self.clock, seeder=self.seeder)
        self._singletons.append(asyncio.create_task(self.archive.run(), name="archive-scheduler"))

    def _history_topics(self) -> list[str]:
        history = self.config.history
        assert history is not None
        if history.pubsub_topics:
            return list(history.pubsub_topics)
        communities = {route.pubsub_topic for route in self.router.routes.values()}
        return sorted({*communities, self.router.default_pubsub_topic})

    def _history_state_dir(self) -> Path:
        history = self.config.history
        assert history is not None
        if history.state_dir:
            return Path(history.state_dir)
        return self._local_state_dir() / "history-state"

    def _local_state_dir(self) -> Path:
        """Where this instance keeps local state: beside a SQLite store, else the config's
        folder."""
        url = self.config.store.url
        if is_postgres_url(url):
            return Path(self.config.base_dir)
        return Path(sqlite_path(url)).parent

    async def stop(self) -> None:
        if self.state == "Stopped":
            return
        self.state = "Shutting Down"
        log.info("bridge stopping")
        timeout = self.config.server.shutdown_timeout
        if self.pool is not None:
            await self.pool.stop()  # workers finish their requests (forwarded ones need us)
        for task in [*self._tasks, *self._singletons]:
            task.cancel()
        for task in [*self._tasks, *self._singletons]:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        self._tasks.clear()
        self._singletons.clear()
        if self.mailserver is not None:
            await self.mailserver.close()
        if self.p2p is not None:
            await self.p2p.stop()  # bounded (ListenerLimits.stop_timeout)
        if self._runner is not None:
            await self._runner.cleanup()  # in-flight requests finish (shutdown_timeout)
            self._runner = None
        if self._internal is not None:
            await self._internal.cleanup()
            self._internal = None
        if self._listener is not None:
            self._listener.close()
            self._listener = None
        if self.live is not None:
            await self.live.close(timeout)  # buffered v1 envelopes reach the store
        if self.relay is not None:
            await self.relay.close(timeout=min(timeout, 10.0))
        if self.store is not None:
            await self.store.close(timeout=timeout)
        if self._session is not None:
            await self._session.close()
        if self.seeder is not None:
            await self.seeder.close()
        self.state = "Stopped"
        self._stopped.set()
        log.info("bridge stopped")

    async def run_forever(self) -> None:
        """Start, serve until SIGTERM/SIGINT, stop gracefully."""
        loop = asyncio.get_running_loop()
        stop = asyncio.Event()
        for sig in (signal.SIGTERM, signal.SIGINT):
            with contextlib.suppress(NotImplementedError):
                loop.add_signal_handler(sig, stop.set)
        try:
            await self.start()
            await stop.wait()
        finally:
            await self.stop()

    # -- what the HTTP API shows --------------------------------------------------------------

    def health(self) -> tuple[str, list[dict[str, str]]]:
        outage = self.store.health.describe() if self.store is not None else None
        if outage is not None and self.state == "Ready":
            # the store cannot be reached: queries answer 503, live rows go to the spool
            protocols = [{"Store": f"Not Ready: {outage}"}]
            node = "Not Ready"
        else:
            protocols = [{"Store": self.state}]
            node = self.state
        if self.config.v1 is not None:
            up = self.mailserver is not None and self.mailserver._server is not None
            protocols.append({"Waku v1 mailserver": "Ready" if up else self.state})
        if self.config.relay is not None:
            protocols.append({"Relay publisher": "Ready" if self.relay else self.state})
        if self.config.libp2p is not None:
            p2p = self.p2p
            if p2p is None or self.state != "Ready":
                libp2p = self.state
            else:
                libp2p = "Ready" if p2p.running else f"Not Ready: {p2p.failure or 'stopped'}"
            protocols.append({"Store (libp2p)": libp2p})
        if self.leader is not None and not self.is_leader and self.config.communities:
            protocols.append({"Archives": "Standby: another instance on this store archives"})
        if self.archive is not None:
            archives = "Ready" if self.seeder or not self.seed_enabled else self.state
            degraded = self.archive.degraded()
            if degraded and node == "Ready":
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
        if self.mailserver is not None and self.mailserver._server is not None:
            enode = str(self.mailserver.enode)
            listen.append(enode)
        if self.p2p is not None:
            listen.extend(self.p2p.multiaddrs)  # each ends in /p2p/<peer id>, as nwaku's
        return {
            "listenAddresses": listen,
            # 31/WAKU2-ENR of the libp2p listener ("" without one, or nothing dialable)
            "enrUri": (self.p2p.enr or "") if self.p2p is not None else "",
            "version": VERSION,
            "enode": enode,
            "seedPort": self.seeder.port if self.seeder else None,
            "communities": [str(c.id) for c in self.config.communities],
            # one service, several processes (bridge.workers), one leader per store
            "processes": {"primary": os.getpid(), "workers": self.pool.pids() if self.pool else []},
            "leader": self.is_leader,
            "libp2p": None if self.p2p is None else {
                "peerId": self.p2p.peer_id, "multiaddrs": self.p2p.multiaddrs,
                "listening": self.p2p.bound,
                "clusterId": self.p2p.metadata.cluster_id,
                "shards": list(self.p2p.metadata.shards),
            },
        }  # fmt: skip

    async def metric_snapshots(self) -> list[Snapshot]:
        """The workers' metrics, added to this process's on ``/metrics``."""
        return [] if self.pool is None else await self.pool.snapshots()

    def communities_report(self) -> list[dict[str, Any]]:
        if self.archive is None:
            return []
        return [a.report() for a in self.archive.archivers.values()]

    def _archiver(self, community: str) -> CommunityArchiver:
        try:
            name = str(CommunityId.parse(community))
        except WakuLegacyError as exc:
            raise RestError(400, f"bad community id: {exc}") from None
        if self.archive is None or name not in self.archive.archivers:
            raise RestError(404, f"community {name} is not configured here")
        return self.archive.archivers[name]

    def archives_report(self, community: str) -> dict[str, Any]:
        return self._archiver(community).report()

    async def trigger_archive(self, community: str | None) -> list[dict[str, Any]]:
        if self.archive is None and self.leader is not None and not self.is_leader:
            raise RestError(
                503, "another bridge instance on this store holds the archiving role (leader "
                "lock); ask that one"
            )  # fmt: skip
        if self.archive is None:
            raise RestError(404, "archiving is not configured (no [archive] and [[community]])")
        if community is not None:
            return [(await self._archiver(community).run("admin")).to_json()]
        return [r.to_json() for r in await self.archive.trigger(None)]

    async def status_report(self) -> StatusReport:
        """What the status page shows (``GET /``, ``GET /debug/v1/status``)."""
        node, protocols = self.health()
        health, _ = health_document(node, protocols)
        info = self.info()
        now = self.clock.time()
        service = ServiceStatus(
            version=VERSION, state=self.state, health=health["nodeHealth"],
            protocols=protocol_health(health["protocolsHealth"]), started=self.started_at,
            now=now, uptime=None if self.started_at is None else now - self.started_at,
            listeners=tuple(info["listenAddresses"]), seed_port=info["seedPort"],
            store=public_store_url(self.config.store.url),
            store_backlog=self.live.writer.backlog if self.live is not None else 0,
        )  # fmt: skip
        return StatusReport(
            service=service,
            communities=await asyncio.to_thread(self._communities_status),
            v1=None if self.mailserver is None else v1_status(self.mailserver),
            history=None if self.history is None else history_status(self.history),
        )

    def _communities_status(self) -> tuple[CommunityStatus, ...]:
        """Every configured community (reads index and link files, may decode archives)."""
        archivers = self.archive.archivers if self.archive is not None else {}
        return tuple(
            community_status(c, archivers.get(str(c.id)), self._window_counts)
            for c in self.config.communities
        )


def _stored_shards(store: Any, cluster_id: int) -> set[int]:
    """The shards of ``cluster_id`` the store's messages are on (static-sharding topics)."""
    from waku_legacy.identity.shards import parse_pubsub_topic

    found = set()
    for topic in getattr(store, "pubsub_topics", lambda: [])():
        try:
            shard = parse_pubsub_topic(topic)
        except WakuLegacyError:
            continue  # a named or malformed topic: no shard to announce
        if shard.cluster == cluster_id:
            found.add(shard.shard)
    return found
