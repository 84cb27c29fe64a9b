"""The bridge service: every part in one asyncio event loop, as components on one stack.

    service = BridgeService(load_config("bridge.toml"))
    await service.start()          # REST API, v1 listener, relay queue, schedulers
    ...
    await service.stop()           # graceful: see below

The parts are components (:mod:`waku_legacy.bridge.components`): async context managers,
each with its own health and the names of the components it needs; this module says which
run, from which config, and lists them in a start order. They are entered on one
:class:`~waku_legacy.bridge.lifecycle.Lifecycle` (an ``AsyncExitStack``), which refuses a
component before those it needs (so the order is checked, not only written down) and keeps
the service's state (:class:`~waku_legacy.bridge.lifecycle.ServiceState`, ``Ready`` included);
stopping closes them in the reverse of their start order, and a start that fails closes what
had started (then raises; :attr:`BridgeService.failure` says why).

Start order: the store (fails fast on a bad URL) and its watcher, the HTTP client session,
the relay publisher, the live bridge, the history viewer, the REST API, the v1 mailserver
(RLPx listener), the libp2p listener, the singletons (seeder, archiving, history pulls: on a
PostgreSQL store under the leader lock, :mod:`waku_legacy.bridge.leader`, while this instance
holds it), the worker processes (``[server] workers`` > 1, embedded too;
:mod:`waku_legacy.bridge.workers`). ``/health`` says ``Initializing`` from the REST
API's start until all are up, then ``Ready``. The REST API needs the relay publisher, the live
bridge and the viewer (``HttpApi.needs``): they start before it so that they close after it,
and its in-flight requests never meet them closed.

Graceful stop (SIGTERM/SIGINT under :meth:`BridgeService.run_forever`), the reverse of the
above: health turns ``Shutting Down``; the workers finish their requests (forwarded ones need
this process, still up) and exit; the singletons stop (history pulls and the archive
scheduler are cancelled, an archive run in progress finishes its file writes on its worker
thread as builds are crash-safe either way, runs an admin request started get up to
``shutdown_timeout`` to finish, then the seeder closes); the libp2p listener stops (bounded)
and the v1 listener closes its peers; the HTTP server stops accepting and lets in-flight
requests finish (``shutdown_timeout``); the live bridge writes what it has buffered; the relay
queue gets a bounded time to drain; the client session closes; the store watcher stops; the
store waits for submitted writes and closes.

Differences from the hand-ordered stop this replaced, none of which matters: the seeder used
to close last, after the store (it shares nothing with the others: it closes with the
singletons now, as it already did on PostgreSQL when the leader lock went); the store watcher
used to stop with the background loops (it only probes the store, so it now stops right
before the store closes); libp2p stopped after the v1 listener (independent listeners).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
from typing import TYPE_CHECKING, Any

import coincurve

from waku_legacy.bridge.clock import Clock, SystemClock
from waku_legacy.bridge.components import (
    ArchivingComponent,
    BridgeContext,
    HistoryComponent,
    HttpApi,
    HttpClient,
    LeaderComponent,
    Libp2pComponent,
    LiveComponent,
    MailserverComponent,
    RelayComponent,
    SeederComponent,
    Singletons,
    StoreComponent,
    WorkersComponent,
    store_watcher,
)
from waku_legacy.bridge.config import BridgeConfig
from waku_legacy.bridge.lifecycle import Component, Lifecycle, ServiceState
from waku_legacy.bridge.live import LiveBridge
from waku_legacy.bridge.logs import fields
from waku_legacy.bridge.metrics import BridgeMetrics
from waku_legacy.bridge.relay import RelayPublisher
from waku_legacy.bridge.store_threads import StoreAccess
from waku_legacy.bridge.view import BridgeParts, BridgeView
from waku_legacy.identity.shards import GLOBAL_PUBSUB_TOPIC
from waku_legacy.identity.topic_mapping import TopicMapping
from waku_legacy.store import is_postgres_url

if TYPE_CHECKING:
    from waku_legacy.bridge.archiver import ArchiveScheduler, SeederHost
    from waku_legacy.bridge.history import HistoryPuller
    from waku_legacy.bridge.leader import LeaderLock
    from waku_legacy.bridge.workers import WorkerPool
    from waku_legacy.mailserver_compat.server.asyncio_server import MailServer
    from waku_legacy.p2p.transport.native import NativeListener

__all__ = ["BridgeService"]

log = logging.getLogger("waku_legacy.bridge")


def _load_community_keys(config: BridgeConfig) -> dict[str, coincurve.PrivateKey]:
    from waku_legacy.community_config import load_community_key

    keys = {}
    for community in config.communities:
        key = load_community_key(community)
        if key is not None:
            keys[str(community.id)] = key
    return keys


class BridgeService:
    def __init__(
        self,
        config: BridgeConfig,
        *,
        clock: Clock | None = None,
        seed: bool = True,
    ) -> None:
        self.config = config
        # Processes serving the REST API (bridge.workers): [server] workers, embedded or not
        # (it was 1 here unless asked while the key's default is the core count: the key won)
        self.workers = config.server.workers
        self.clock = clock or SystemClock()
        self.metrics = BridgeMetrics()
        self.seed_enabled = seed
        self.lifecycle = Lifecycle()
        self.failure: str | None = None  # why start() failed, when it did
        default_topic = config.relay.default_pubsub_topic if config.relay else GLOBAL_PUBSUB_TOPIC
        self.router = TopicMapping.build(default_topic, config.communities)
        self._keys = _load_community_keys(config)
        self.context = BridgeContext(config, self.metrics, self.clock, self.router, self._keys)
        self.components = self._wire()

    # -- wiring: which components, from which config, in which order ----------------------------

    def _wire(self) -> list[Component]:
        config, context, metrics = self.config, self.context, self.metrics
        timeout = config.server.shutdown_timeout
        store = StoreComponent(
            config.store.url, readers=config.server.reader_threads, shutdown_timeout=timeout
        )
        client = HttpClient()
        relay = None if config.relay is None else RelayComponent(
            config.relay, metrics, client, timeout
        )  # fmt: skip
        live = LiveComponent(context, store, relay)
        v1 = None if config.v1 is None else MailserverComponent(config.v1, store, live, metrics)
        libp2p = None if config.libp2p is None else Libp2pComponent(config.libp2p, store)

        leader: LeaderComponent | None = None

        def singleton_parts() -> list[Component]:
            parts: list[Component] = []
            archive = config.archive
            if archive is not None and config.communities:
                seeder = SeederComponent(archive) if self.seed_enabled else None
                if seeder is not None:
                    parts.append(seeder)
                role = leader.lock if leader is not None else None  # fences the archivers
                parts.append(ArchivingComponent(context, archive, store, seeder, relay, role))
            if config.history is not None:
                parts.append(HistoryComponent(context, config.history, store, client, live))
            return parts

        singletons = Singletons(metrics, singleton_parts, within=self.lifecycle)
        if is_postgres_url(config.store.url):
            # instances sharing the store take turns at the singletons (bridge.leader)
            leader = LeaderComponent(config.store.url, config.store.leader_interval, singletons)
        self.parts = BridgeParts(
            store=store, live=live, singletons=singletons, relay=relay, v1=v1, libp2p=libp2p,
            leader=leader,
        )  # fmt: skip
        self.view = BridgeView(context, self.lifecycle, self.parts, seed_enabled=self.seed_enabled)
        viewer = None
        if config.viewer.enabled:
            from waku_legacy.bridge.viewer import ViewerComponent

            view = self.view
            viewer = ViewerComponent(
                config, live=lambda: live.bridge,
                archivers=lambda: view.archive.archivers.values() if view.archive else (),
            )  # fmt: skip
        self.viewer = viewer
        http = HttpApi(
            self.view, store, metrics, config.server, shared_socket=self.workers > 1,
            subapps=[viewer.subapp] if viewer is not None else [], serves=(live, relay, viewer),
        )  # fmt: skip
        self.workers_component = None if self.workers <= 1 else WorkersComponent(
            context, self.workers, self.view, http, store, libp2p,
            # the app answering what workers forward mounts a viewer app of its own (an aiohttp
            # application has one parent)
            subapps=[(viewer.viewer.prefix, viewer.viewer.app())] if viewer is not None else [],
        )  # fmt: skip
        ordered: list[Component | None] = [
            store, store_watcher(store), client, relay, live, viewer, http, v1, libp2p,
            leader or singletons,  # SQLite: one instance per store, no lock
            self.workers_component,
        ]  # fmt: skip
        return [component for component in ordered if component is not None]

    # -- lifecycle ------------------------------------------------------------------------------

    @property
    def state(self) -> ServiceState:
        return self.lifecycle.state

    async def start(self) -> None:
        """Start every component in order; on a failure close those started, then raise."""
        if self.state is not ServiceState.INITIALIZING:
            raise RuntimeError(f"a bridge service starts once (this one is {self.state})")
        self.view.started_at = self.clock.time()
        try:
            await self.lifecycle.start(self.components)  # Ready once every one is entered
        except BaseException as exc:
            failed = self.lifecycle.failed or "bridge"
            self.failure = f"{failed}: {exc}"
            log.error("bridge not started", extra=fields(component=failed, error=str(exc)))
            await self.stop()
            raise
        log.info("bridge ready", extra=fields(**self.view.info()))

    async def stop(self) -> None:
        """Close every started component, the last started first (see the module's doc)."""
        if self.lifecycle.state in (ServiceState.SHUTTING_DOWN, ServiceState.STOPPED):
            return
        log.info("bridge stopping")
        await self.lifecycle.aclose()
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

    # -- the running parts (tests, the CLI and library users read them) --------------------------

    @property
    def store(self) -> StoreAccess:
        return self.parts.store.opened

    @property
    def rest_port(self) -> int:
        return self.view.rest_port

    @property
    def relay(self) -> RelayPublisher | None:
        return self.parts.relay.publisher if self.parts.relay is not None else None

    @property
    def live(self) -> LiveBridge | None:
        return self.parts.live.bridge

    @property
    def mailserver(self) -> MailServer | None:
        return self.view.mailserver

    @property
    def p2p(self) -> NativeListener | None:
        """The libp2p store listener (bridge.p2p), when [libp2p] is on."""
        return self.parts.libp2p.listener if self.parts.libp2p is not None else None

    @property
    def seeder(self) -> SeederHost | None:
        return self.view.seeder

    @property
    def archive(self) -> ArchiveScheduler | None:
        return self.view.archive

    @property
    def history(self) -> HistoryPuller | None:
        return self.view.history

    @property
    def leader(self) -> LeaderLock | None:
        """PostgreSQL: who archives, seeds, publishes."""
        return self.parts.leader.lock if self.parts.leader is not None else None

    @property
    def is_leader(self) -> bool:
        return self.view.is_leader

    @property
    def pool(self) -> WorkerPool | None:
        workers = self.workers_component
        return workers.pool if workers is not None else None

    @property
    def started_at(self) -> float | None:
        return self.view.started_at

    # -- what the HTTP API shows (bridge.view) ----------------------------------------------------

    def health(self) -> tuple[str, list[dict[str, str]]]:
        return self.view.health()

    def info(self) -> dict[str, Any]:
        return self.view.info()
