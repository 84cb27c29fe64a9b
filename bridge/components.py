"""The bridge's parts as components (:class:`~waku_legacy.bridge.lifecycle.Component`):
each starts, closes and tells its own health; :mod:`waku_legacy.bridge.service` says which
run, from which config, in which order.

A component is built with the components it depends on (built, not yet started) and takes
their running objects in its ``start()``: it starts after them and closes before them. Each
``aclose()`` is idempotent and safe after a ``start()`` that stopped half-way. The running
objects stay readable after the close (``/debug/v1/info`` and the tests read them after a
stop), except the singletons' when the leader lock is lost (:meth:`Singletons.release`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
from collections.abc import Callable, Coroutine, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

import aiohttp
import coincurve
from aiohttp import web

from waku_legacy.archive.logos_storage import client_for
from waku_legacy.bridge.archiver import ArchiveScheduler, CommunityArchiver, SeederHost
from waku_legacy.bridge.clock import Clock
from waku_legacy.bridge.config import (
    ArchiveConfig,
    BridgeConfig,
    HistoryConfig,
    Libp2pConfig,
    RelayConfig,
    ServerConfig,
    V1Config,
)
from waku_legacy.bridge.history import HistoryPuller
from waku_legacy.bridge.http_api import BridgeBackend, make_app, make_runner
from waku_legacy.bridge.http_guard import HttpLimits
from waku_legacy.bridge.leader import LeaderLock, LocalRole, Role
from waku_legacy.bridge.lifecycle import Component, Lifecycle
from waku_legacy.bridge.live import LiveBridge
from waku_legacy.bridge.logs import fields
from waku_legacy.bridge.metrics import BridgeMetrics
from waku_legacy.bridge.relay import RelayPublisher
from waku_legacy.bridge.store_threads import StoreAccess
from waku_legacy.bridge.workers import WorkerPool, bind_listener
from waku_legacy.errors import ConfigError, WakuLegacyError
from waku_legacy.identity.topic_mapping import TopicMapping
from waku_legacy.store import StoreUnavailable, is_postgres_url, sqlite_path

if TYPE_CHECKING:  # imported when started: py-libp2p and the v1 stack load only when used
    from waku_legacy.mailserver_compat.server.asyncio_server import MailServer
    from waku_legacy.p2p.listener import P2PListener

__all__ = [
    "ArchivingComponent",
    "BackgroundTask",
    "BridgeContext",
    "HistoryComponent",
    "HttpApi",
    "HttpClient",
    "LeaderComponent",
    "Libp2pComponent",
    "LiveComponent",
    "MailserverComponent",
    "RelayComponent",
    "SeederComponent",
    "Singletons",
    "StoreComponent",
    "WorkersComponent",
    "local_state_dir",
    "store_watcher",
]

log = logging.getLogger("waku_legacy.bridge")

T = TypeVar("T")
READY = "Ready"


def _require(value: T | None, what: str) -> T:
    """``value`` once its component has started; a RuntimeError naming it before that."""
    if value is None:
        raise RuntimeError(f"{what} is not started")
    return value


async def _cancel(task: asyncio.Task[None] | None) -> None:
    if task is None:
        return
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError, Exception):
        await task


def local_state_dir(config: BridgeConfig) -> Path:
    """Where this instance keeps local state: beside a SQLite store, else the config's
    folder."""
    url = config.store.url
    if is_postgres_url(url):
        return Path(config.base_dir)
    return Path(sqlite_path(url)).parent


def _archive_dirs(archive: ArchiveConfig) -> None:
    Path(archive.archive_dir).mkdir(parents=True, exist_ok=True)
    Path(archive.torrent_dir).mkdir(parents=True, exist_ok=True)


@dataclass(frozen=True, slots=True)
class BridgeContext:
    """What every part shares and nothing starts or closes."""

    config: BridgeConfig
    metrics: BridgeMetrics
    clock: Clock
    router: TopicMapping
    keys: dict[str, coincurve.PrivateKey]  # community id -> its key (signs archive links)

    @property
    def shutdown_timeout(self) -> float:
        return self.config.server.shutdown_timeout


class BackgroundTask:
    """A loop on the event loop: a task from ``start()``, cancelled by ``aclose()``."""

    def __init__(self, name: str, run: Callable[[], Coroutine[object, None, None]]) -> None:
        self._name = name
        self._run = run
        self._task: asyncio.Task[None] | None = None

    @property
    def name(self) -> str:
        return self._name

    async def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name=self._name)

    async def aclose(self) -> None:
        task, self._task = self._task, None
        await _cancel(task)

    def health(self) -> str | None:
        return None


# -- store access ---------------------------------------------------------------------------------


class StoreComponent:
    """The v2 store (:class:`~waku_legacy.bridge.store_threads.StoreAccess`): reader threads,
    the writer, the reconnect schedule. Closing waits for submitted writes."""

    name = "store"

    def __init__(self, url: str, *, readers: int, shutdown_timeout: float) -> None:
        self.url = url
        self.readers = readers
        self.shutdown_timeout = shutdown_timeout
        self.access: StoreAccess | None = None
        self._closed = False

    @property
    def opened(self) -> StoreAccess:
        return _require(self.access, "the store")

    async def start(self) -> None:
        self.access = await asyncio.to_thread(StoreAccess, self.url, readers=self.readers)

    async def aclose(self) -> None:
        if self.access is not None and not self._closed:
            self._closed = True
            await self.access.close(timeout=self.shutdown_timeout)

    def outage(self) -> str | None:
        """Why the store cannot be reached now (None: it can, or it is not open)."""
        return None if self.access is None else self.access.health.describe()

    def health(self) -> str | None:
        outage = self.outage()
        if outage is not None:
            return f"Not Ready: {outage}"
        return READY if self.access is not None and not self._closed else None


def store_watcher(store: StoreComponent, interval: float = 5.0) -> BackgroundTask:
    """Probes the store every ``interval`` seconds, and on the reconnect schedule while it is
    down: an outage and the store's return show on ``/health`` (and are logged, by
    :class:`~waku_legacy.bridge.store_threads.StoreHealth`) even when no request or live row
    touches the store."""

    async def watch() -> None:
        access = store.opened
        health = access.health
        while True:
            await asyncio.sleep(max(health.retry_in(), 0.1) if health.down else interval)
            try:
                await access.probe()
            except StoreUnavailable:
                pass  # logged once per outage by StoreHealth
            except Exception as exc:
                log.debug("store probe failed", extra=fields(error=str(exc)))

    return BackgroundTask("store-probe", watch)


# -- HTTP -----------------------------------------------------------------------------------------


class HttpClient:
    """The HTTP client session the relay publisher and the history pulls share."""

    name = "http-client"

    def __init__(self) -> None:
        self.session: aiohttp.ClientSession | None = None

    @property
    def opened(self) -> aiohttp.ClientSession:
        return _require(self.session, "the HTTP client session")

    async def start(self) -> None:
        self.session = aiohttp.ClientSession()

    async def aclose(self) -> None:
        if self.session is not None:
            await self.session.close()  # a second close does nothing

    def health(self) -> str | None:
        return None


class HttpApi:
    """The REST API (store, operations, status page, admin): on its own socket, or (worker
    processes) on one this process binds with SO_REUSEPORT for all. Closing stops accepting
    and lets in-flight requests finish (``shutdown_timeout``)."""

    name = "http"

    def __init__(
        self, service: BridgeBackend, store: StoreComponent, metrics: BridgeMetrics,
        server: ServerConfig, *, shared_socket: bool,
        subapps: Sequence[tuple[str, web.Application]] = (),
    ) -> None:  # fmt: skip
        self.service = service
        self.subapps = subapps  # (prefix, application): the history viewer's pages
        self.store = store
        self.metrics = metrics
        self.server = server
        self.shared_socket = shared_socket
        self.runner: web.AppRunner | None = None
        self.listener: socket.socket | None = None  # bound here when there are workers
        self.port = 0

    async def start(self) -> None:
        server = self.server
        self.runner = make_runner(
            self.store.opened, self.metrics, HttpLimits.from_config(server),
            service=self.service, shutdown_timeout=server.shutdown_timeout,
            process=str(os.getpid()) if self.shared_socket else None, subapps=self.subapps,
        )  # fmt: skip
        await self.runner.setup()
        try:
            if self.shared_socket:
                self.listener = bind_listener(server.host, server.port)
                site: web.BaseSite = web.SockSite(self.runner, self.listener)
            else:
                site = web.TCPSite(self.runner, server.host, server.port)
            await site.start()
        except OSError as exc:
            raise ConfigError(
                f"[server] listen: cannot listen on {server.host}:{server.port}: "
                f"{exc.strerror or exc}"
            ) from None
        self.port = self.runner.addresses[0][1]  # the site's first socket

    async def aclose(self) -> None:
        runner, self.runner = self.runner, None
        if runner is not None:
            await runner.cleanup()  # in-flight requests finish (shutdown_timeout)
        listener, self.listener = self.listener, None
        if listener is not None:
            listener.close()

    def health(self) -> str | None:
        return READY if self.runner is not None else None


# -- Waku v1 and v2 -------------------------------------------------------------------------------


class RelayComponent:
    """The relay publisher's queue (nwaku's REST relay): closing gives it a bounded time
    (``shutdown_timeout``, at most 10 s) to drain."""

    name = "relay"

    def __init__(
        self, config: RelayConfig, metrics: BridgeMetrics, client: HttpClient, timeout: float
    ) -> None:
        self.config = config
        self.metrics = metrics
        self.client = client
        self.timeout = timeout
        self.publisher: RelayPublisher | None = None

    async def start(self) -> None:
        self.publisher = RelayPublisher(self.config, self.metrics, self.client.opened)
        self.publisher.start()

    async def aclose(self) -> None:
        if self.publisher is not None:
            await self.publisher.close(timeout=min(self.timeout, 10.0))  # a second: no-op

    def health(self) -> str | None:
        return READY if self.publisher is not None else None


class LiveComponent:
    """The live bridge (v1 <-> v2) and its batch writer: closing writes what it buffered."""

    name = "live"

    def __init__(
        self, context: BridgeContext, store: StoreComponent, relay: RelayComponent | None
    ) -> None:
        self.context = context
        self.store = store
        self.relay = relay
        self.bridge: LiveBridge | None = None
        self._closed = False

    async def start(self) -> None:
        context = self.context
        v1 = context.config.v1
        self.bridge = LiveBridge(
            store=self.store.opened, router=context.router, metrics=context.metrics,
            clock=context.clock, relay=self.relay.publisher if self.relay else None,
            seen_capacity=v1.seen_capacity if v1 else 100_000,
            live_window=v1.live_window if v1 else 300.0,
            spool=local_state_dir(context.config) / "live-spool.rlp",
        )  # fmt: skip
        self.bridge.start()

    async def aclose(self) -> None:
        if self.bridge is not None and not self._closed:
            self._closed = True
            await self.bridge.close(self.context.shutdown_timeout)  # buffered rows reach the store

    def health(self) -> str | None:
        return READY if self.bridge is not None and not self._closed else None


class MailserverComponent:
    """The Waku v1 mailserver (RLPx listener): history requests from the store, live
    envelopes to the live bridge. Closing disconnects its peers."""

    name = "v1"

    def __init__(self, v1: V1Config, store: StoreComponent, live: LiveComponent,
                 metrics: BridgeMetrics) -> None:  # fmt: skip
        self.v1 = v1
        self.store = store
        self.live = live
        self.metrics = metrics
        self.server: MailServer | None = None

    async def start(self) -> None:
        from waku_legacy.crypto.key_file import load_or_create_node_key
        from waku_legacy.mailserver_compat.server.asyncio_server import MailServer
        from waku_legacy.mailserver_compat.server.core import MailServerConfig
        from waku_legacy.mailserver_compat.storage.envelope_store import V2StoreSource

        v1 = self.v1
        live = _require(self.live.bridge, "the live bridge")
        key, created = await asyncio.to_thread(load_or_create_node_key, v1.node_key_file)
        if created:
            log.info("created a v1 node key", extra=fields(path=v1.node_key_file))
        config = MailServerConfig(
            rate_limit=v1.rate_limit, min_pow=v1.min_pow,
            trusted_peers=frozenset(v1.trusted_peers), seen_capacity=v1.seen_capacity,
            limits=v1.limits,
        )  # fmt: skip
        self.server = MailServer(
            V2StoreSource(self.store.opened.stores), key, config, sink=live.on_v1_envelope,
            on_refusal=self.metrics.count_v1_refusal,
        )  # fmt: skip
        live.mailserver = self.server
        try:
            await self.server.start(v1.host, v1.port)
        except OSError as exc:
            raise ConfigError(
                f"[v1] listen: cannot listen on {v1.host}:{v1.port}: {exc.strerror or exc}"
            ) from None

    async def aclose(self) -> None:
        if self.server is not None:
            await self.server.close()  # a second close does nothing

    def health(self) -> str | None:
        return READY if self.server is not None and self.server.listening else None


class Libp2pComponent:
    """The libp2p store listener (:mod:`waku_legacy.bridge.p2p`) on the same store threads'
    connections as the REST API; closing is bounded (``ListenerLimits.stop_timeout``)."""

    name = "libp2p"

    def __init__(self, config: Libp2pConfig, store: StoreComponent) -> None:
        self.config = config  # after start: with the shards it announces
        self.store = store
        self.listener: P2PListener | None = None

    async def start(self) -> None:
        from waku_legacy.bridge.p2p import start_p2p_listener
        from waku_legacy.store.legacy_query import LegacyCursorCache

        store = self.store.opened
        libp2p = self.config
        if not libp2p.shards_configured:
            # announce every shard this store answers for (js-waku picks its store peer by
            # the shards in metadata): the configured communities' plus the store's own
            stored = await store.read(_stored_shards, libp2p.cluster_id)
            shards = tuple(sorted(set(libp2p.shards) | stored))
            if shards != libp2p.shards:
                self.config = replace(libp2p, shards=shards)  # the workers announce them too
        self.listener = await start_p2p_listener(
            self.config, store.stores, LegacyCursorCache(), exclusive=True
        )

    async def aclose(self) -> None:
        if self.listener is not None:
            await self.listener.stop()  # bounded; a second stop does nothing

    def health(self) -> str | None:
        listener = self.listener
        if listener is None:
            return None
        return READY if listener.running else f"Not Ready: {listener.failure or 'stopped'}"

    def shareable_listen(self) -> tuple[str, ...]:
        """The listener's addresses as bound (ports resolved, no /p2p/ suffix), for the
        worker processes to listen on as well; () when they cannot share them."""
        if self.listener is None:
            return ()
        listen = tuple(dict.fromkeys(a.split("/p2p/")[0] for a in self.listener.multiaddrs))
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


def _stored_shards(store: object, cluster_id: int) -> set[int]:
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


# -- what one instance of a store does --------------------------------------------------------


class SeederComponent:
    """The libtorrent seeder on its own thread."""

    name = "seeder"

    def __init__(self, archive: ArchiveConfig) -> None:
        self.archive = archive
        self.host: SeederHost | None = None
        self._closed = False

    async def start(self) -> None:
        from waku_legacy.archive import SessionConfig

        archive = self.archive
        _archive_dirs(archive)
        self.host = SeederHost(
            archive.archive_dir,
            SessionConfig(
                listen=archive.seed_listen, dht=archive.dht, trackers=archive.trackers,
                utp=archive.utp,
            ),
        )  # fmt: skip
        await self.host.start()

    async def aclose(self) -> None:
        if self.host is not None and not self._closed:
            self._closed = True
            await self.host.close()

    def health(self) -> str | None:
        return READY if self.host is not None and not self._closed else None


class ArchivingComponent:
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
        # the archiving role's fencing and link schedule: the leader lock (PostgreSQL), or
        # this instance's own in the SQLite file (bridge.leader)
        self.role = role
        self._local_role: LocalRole | None = None
        self.scheduler: ArchiveScheduler | None = None
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        context, archive = self.context, self.archive
        config = context.config
        _archive_dirs(archive)
        history = config.history
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
                store_node_timeout=history.timeout if history else 30.0,
                role=role,
            )
            for community in config.communities
        ]  # fmt: skip
        self.scheduler = ArchiveScheduler(archivers, clock=context.clock, seeder=seeder)
        self._task = asyncio.create_task(self.scheduler.run(), name="archive-scheduler")

    async def aclose(self) -> None:
        task, self._task = self._task, None
        await _cancel(task)
        if task is not None and self.scheduler is not None:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self.context.shutdown_timeout):
                    for archiver in self.scheduler.archivers.values():
                        # held from now on: this archiver runs no more
                        await archiver.lock.acquire()
        local, self._local_role = self._local_role, None
        if local is not None:
            await asyncio.to_thread(local.close)

    def health(self) -> str | None:
        return READY if self._task is not None else None


class HistoryComponent:
    """History pulls from the configured store nodes, every ``[history] interval``."""

    name = "history"

    def __init__(
        self, context: BridgeContext, history: HistoryConfig, store: StoreComponent,
        client: HttpClient, live: LiveComponent,
    ) -> None:  # fmt: skip
        self.context = context
        self.history = history
        self.store = store
        self.client = client
        self.live = live
        self.puller: HistoryPuller | None = None
        self._task = BackgroundTask("history", self._run)

    def pubsub_topics(self) -> list[str]:
        if self.history.pubsub_topics:
            return list(self.history.pubsub_topics)
        router = self.context.router
        communities = {route.pubsub_topic for route in router.routes.values()}
        return sorted({*communities, router.default_pubsub_topic})

    def state_dir(self) -> Path:
        if self.history.state_dir:
            return Path(self.history.state_dir)
        return local_state_dir(self.context.config) / "history-state"

    async def _run(self) -> None:
        await _require(self.puller, "the history puller").run()

    async def start(self) -> None:
        context = self.context
        self.puller = HistoryPuller(
            self.history, store=self.store.opened, metrics=context.metrics, clock=context.clock,
            session=self.client.opened, pubsub_topics=self.pubsub_topics(),
            state_dir=self.state_dir(), live=self.live.bridge,
        )  # fmt: skip
        await self._task.start()

    async def aclose(self) -> None:
        await self._task.aclose()

    def health(self) -> str | None:
        return None


class Singletons:
    """What one instance of a store does: seeding, archiving, history pulls, in that order
    on a lifecycle of their own. SQLite: entered with the service; PostgreSQL: started when
    this instance takes the leader lock, released when it loses it."""

    name = "singletons"

    def __init__(self, metrics: BridgeMetrics, parts: Callable[[], list[Component]]) -> None:
        self.metrics = metrics
        self._parts = parts
        self.parts: list[Component] = []
        self.is_leader = False
        self._lifecycle = Lifecycle()

    def part(self, kind: type[T]) -> T | None:
        """The running part of that type (None: not configured, or not running)."""
        for part in self.parts:
            if isinstance(part, kind):
                return part
        return None

    async def start(self) -> None:
        self.is_leader = True
        self.metrics.leader.set(1)
        self.parts = self._parts()
        self._lifecycle = Lifecycle()
        try:
            for part in self.parts:
                await self._lifecycle.enter(part)
        except BaseException:
            await self._lifecycle.aclose()
            raise

    async def aclose(self) -> None:
        """The service stops: close the parts (they stay readable, as their reports)."""
        await self._lifecycle.aclose()

    async def release(self) -> None:
        """The leader lock's session is gone: another instance may take the role now."""
        self.is_leader = False
        self.metrics.leader.set(0)
        await self._lifecycle.aclose()
        self.parts = []

    def health(self) -> str | None:
        return READY if self.is_leader else None


class LeaderComponent:
    """The leader lock (:mod:`waku_legacy.bridge.leader`): instances sharing a PostgreSQL
    store take turns at the singletons. Closing ends the lock's session (and releases the
    singletons when this instance held it)."""

    name = "leader"

    def __init__(self, url: str, interval: float, singletons: Singletons) -> None:
        self.url = url
        self.interval = interval
        self.singletons = singletons
        # made here: the archivers fence their writes with it (bridge.leader)
        self.lock = LeaderLock(
            self.url, interval=self.interval, on_acquired=self.singletons.start,
            on_lost=self.singletons.release,
        )  # fmt: skip
        self._started = False
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        self._started = True
        self._task = asyncio.create_task(self.lock.run(), name="leader-lock")

    async def aclose(self) -> None:
        task, self._task = self._task, None
        await _cancel(task)

    def health(self) -> str | None:
        if not self._started:
            return None
        return READY if self.singletons.is_leader else "Standby"


# -- worker processes -----------------------------------------------------------------------------


class WorkersComponent:
    """The worker processes on the REST socket, and the Unix socket they forward everything
    but the store routes to (no limits there: the worker applied them). Closing stops the
    workers first (each finishes its requests; forwarded ones need this process), then the
    Unix socket."""

    name = "workers"

    def __init__(
        self, context: BridgeContext, count: int, service: BridgeBackend, http: HttpApi,
        store: StoreComponent, libp2p: Libp2pComponent | None,
    ) -> None:  # fmt: skip
        self.context = context
        self.count = count
        self.service = service
        self.http = http
        self.store = store
        self.libp2p = libp2p
        self.pool: WorkerPool | None = None
        self._internal: web.AppRunner | None = None
        self._closed = False

    async def start(self) -> None:
        context = self.context
        timeout = context.shutdown_timeout
        config = context.config
        if self.libp2p is not None:  # the shards the primary announces, resolved at its start
            config = replace(config, libp2p=self.libp2p.config)
        self.pool = WorkerPool(
            config, _require(self.http.listener, "the REST socket"), self.count,
            context.metrics, shutdown_timeout=timeout,
            libp2p_listen=self.libp2p.shareable_listen() if self.libp2p else (),
        )  # fmt: skip
        internal = make_app(
            self.store.opened, context.metrics, service=self.service,
            limits=HttpLimits(requests_per_second=0),
        )  # fmt: skip
        self._internal = web.AppRunner(
            internal, handle_signals=False, access_log=None, shutdown_timeout=timeout
        )
        await self._internal.setup()
        await web.UnixSite(self._internal, str(self.pool.primary_socket)).start()
        await self.pool.start()

    async def aclose(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self.pool is not None:
            await self.pool.stop()  # workers finish their requests (forwarded ones need us)
        internal, self._internal = self._internal, None
        if internal is not None:
            await internal.cleanup()

    def pids(self) -> list[int]:
        return self.pool.pids() if self.pool is not None else []

    def health(self) -> str | None:
        return None
