"""The REST API on every core: worker processes beside the primary (``[server] workers``).

    waku-legacy serve --config bridge.toml      # [server] workers = N (default: the cores)

One port, N processes, each with its own listening socket bound with SO_REUSEPORT (the
primary binds first, port 0 included; the workers bind the port it got). The kernel spreads
new connections evenly over the sockets by their addresses. The alternative, one socket
bound by the primary and inherited by the workers, balances badly under asyncio: the
process whose event loop wakes first accepts every pending connection in one go (asyncio
accepts up to the backlog per wake-up), so a burst of keep-alive clients lands on one
process and stays there (200 keep-alive connections opened at once on two processes:
131/69 with one inherited socket, 101/99 with SO_REUSEPORT). The price of
SO_REUSEPORT: connections queued on a worker that dies are reset, and a busy process still
gets its share of new connections. aiohttp serves a bound socket through ``SockSite``.

Who does what:

- the primary serves the REST API too and keeps every singleton: the store writer, the live
  bridge and v1 RLPx listener, the relay publisher, history pulls, archiving and seeding,
  and the state behind ``/health``, ``/debug/v1/*``, the status page and the admin API;
- a worker answers the store routes (``/store/v3/messages``, ``/store/v1/messages``) from
  its own read-only store connections (SQLite WAL readers, PostgreSQL sessions in read-only
  transactions) and forwards every other request to the primary over a Unix socket in the
  pool's private directory, so ``/health``, ``/metrics``, the status page and admin calls
  answer the same whichever process accepted the connection, and only the primary mutates;
- the libp2p store (``[libp2p]``, :mod:`waku_legacy.bridge.p2p`): every worker starts a
  listener of its own on the primary's resolved addresses with the same key (one peer id;
  the listener binds TCP-only ports with SO_REUSEPORT), answering from its read-only store
  connections. It binds WebSocket ports (and a port shared by TCP and WebSocket) without
  SO_REUSEPORT, so with a WebSocket address the primary alone serves libp2p;
- metrics: the primary's ``/metrics`` adds every worker's counters, histograms and gauges
  (:meth:`~waku_legacy.bridge.metrics.Registry.render`), asked from each live worker at
  scrape time over that worker's own Unix socket (exact), plus the last values of workers
  that exited (each worker also writes its values to the directory every second), so
  counters never go backwards when a worker is replaced.

Lifetimes: a worker's stdin is a pipe from the primary; when the primary dies, however it
dies, the pipe closes and the worker stops. A worker that exits while the primary runs is
restarted (after 1 s, doubling up to 30 s while it keeps failing within a minute of its
start; ``waku_legacy_worker_restarts_total``). SIGTERM to the primary stops the workers
first (each finishes its in-flight requests within ``shutdown_timeout``; forwarded ones
need the primary, which is still up), then the primary stops as before.

Limits are per process: connection caps, the per-address request budget and the free
continuation of an answered page (a client paging on one keep-alive connection stays on one
process; a continuation that reaches another process is charged to the budget).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import pickle
import shutil
import signal
import socket
import struct
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import aiohttp
from aiohttp import web

from waku_legacy.bridge.logs import fields
from waku_legacy.bridge.metrics import BridgeMetrics, Snapshot
from waku_legacy.durable import write_atomic
from waku_legacy.errors import WakuLegacyError

if TYPE_CHECKING:
    from waku_legacy.bridge.config import BridgeConfig
    from waku_legacy.bridge.store_threads import StoreAccess
    from waku_legacy.p2p.transport.native import NativeListener

__all__ = ["WorkerPool", "bind_listener", "forwarding_handler", "main", "metrics_site"]

log = logging.getLogger("waku_legacy.bridge.workers")

PRIMARY_SOCKET = "primary.sock"
SNAPSHOT_EVERY = 1.0
RESTART_DELAY = 1.0
RESTART_DELAY_MAX = 30.0
STABLE_AFTER = 60.0  # a worker up this long had a clean start; the next restart waits 1 s
FORWARD_TIMEOUT = 600.0  # an admin archive run answers when it is done
# Headers a forwarded request keeps (the rest describe the client's connection).
REQUEST_HEADERS = ("Authorization", "Accept", "Content-Type", "User-Agent")
RESPONSE_HEADERS = (
    "Content-Type", "Allow", "WWW-Authenticate", "Retry-After", "Cache-Control",
    "Content-Security-Policy", "X-Content-Type-Options", "X-Request-Id",
)  # fmt: skip


def bind_listener(host: str, port: int, backlog: int = 1024) -> socket.socket:
    """One process's REST listening socket, sharing its port with the others'."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    return socket.create_server((host, port), family=family, backlog=backlog, reuse_port=True)


def worker_socket(run_dir: Path, pid: int) -> Path:
    return run_dir / f"worker-{pid}.sock"


def snapshot_file(run_dir: Path, pid: int) -> Path:
    return run_dir / f"metrics-{pid}.json"


def read_snapshot(path: Path) -> Snapshot:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _write_snapshot(path: Path, snapshot: Snapshot) -> None:
    # whole or absent for the primary's reader; no fsync: a live value rewritten every second
    write_atomic(path, json.dumps(snapshot).encode(), fsync=False)


# -- the primary's side --------------------------------------------------------------------------


class WorkerPool:
    """Starts, watches and stops the worker processes of one primary."""

    def __init__(
        self,
        config: BridgeConfig,
        listener: socket.socket,
        count: int,
        metrics: BridgeMetrics,
        *,
        shutdown_timeout: float,
        libp2p_listen: tuple[str, ...] = (),
    ) -> None:
        self.config = config
        # the primary's libp2p listen addresses, ports resolved: workers listen there too
        self.libp2p_listen = libp2p_listen
        self.listener = listener
        self.count = count
        self.metrics = metrics
        self.shutdown_timeout = shutdown_timeout
        self.run_dir = Path(tempfile.mkdtemp(prefix="waku-legacy-bridge-"))  # 0700
        self.processes: dict[int, asyncio.subprocess.Process] = {}  # slot -> process
        self.retired: list[Snapshot] = []  # last values of workers that exited
        self._watchers: list[asyncio.Task[None]] = []
        self._stopping = False
        self._session: aiohttp.ClientSession | None = None

    @property
    def primary_socket(self) -> Path:
        return self.run_dir / PRIMARY_SOCKET

    def stopping(self) -> bool:
        return self._stopping

    def pids(self) -> list[int]:
        return sorted(p.pid for p in self.processes.values() if p.returncode is None)

    async def start(self) -> None:
        self._session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=5))
        for slot in range(1, self.count):
            await self._spawn(slot)
            self._watchers.append(asyncio.create_task(self._watch(slot), name=f"worker-{slot}"))
        self._count_processes()

    async def _spawn(self, slot: int) -> None:
        host, port = self.listener.getsockname()[:2]
        process = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "waku_legacy.bridge.workers", stdin=asyncio.subprocess.PIPE
        )
        header = pickle.dumps({"config": self.config, "host": host, "port": port,
                               "run_dir": str(self.run_dir), "slot": slot,
                               "libp2p_listen": self.libp2p_listen})  # fmt: skip
        assert process.stdin is not None
        process.stdin.write(struct.pack(">I", len(header)) + header)
        await process.stdin.drain()  # stdin stays open: its end tells the worker we died
        self.processes[slot] = process
        log.info("worker started", extra=fields(slot=slot, pid=process.pid))

    async def _watch(self, slot: int) -> None:
        delay = RESTART_DELAY
        while True:
            process = self.processes[slot]
            started = time.monotonic()
            code = await process.wait()
            self._retire(process.pid)
            self._count_processes()
            if self._stopping:
                return
            delay = RESTART_DELAY if time.monotonic() - started > STABLE_AFTER else delay
            log.warning(
                "worker exited; restarting",
                extra=fields(slot=slot, pid=process.pid, code=code, after=delay),
            )
            await asyncio.sleep(delay)
            delay = min(delay * 2, RESTART_DELAY_MAX)
            if self.stopping():  # SIGTERM came while we waited
                return
            self.metrics.worker_restarts.inc()
            await self._spawn(slot)
            self._count_processes()

    def _retire(self, pid: int) -> None:
        """Keep an exited worker's last counters and histograms (its gauges are gone)."""
        path = snapshot_file(self.run_dir, pid)
        snapshot = read_snapshot(path)
        for name in [n for n in snapshot if n in _GAUGES]:
            del snapshot[name]
        if snapshot:
            self.retired.append(snapshot)
        path.unlink(missing_ok=True)
        worker_socket(self.run_dir, pid).unlink(missing_ok=True)

    def _count_processes(self) -> None:
        self.metrics.processes.set(1 + len(self.pids()))

    async def snapshots(self) -> list[Snapshot]:
        """Every worker's values: asked now from the live ones, kept from exited ones."""
        live = await asyncio.gather(*(self._ask(pid) for pid in self.pids()))
        return [*self.retired, *live]

    async def _ask(self, pid: int) -> Snapshot:
        assert self._session is not None
        path = worker_socket(self.run_dir, pid)
        try:
            connector = aiohttp.UnixConnector(path=str(path))
            async with aiohttp.ClientSession(
                connector=connector, timeout=self._session.timeout
            ) as s:
                async with s.get("http://worker/snapshot") as response:
                    data = await response.json()
                    return data if isinstance(data, dict) else {}
        except (aiohttp.ClientError, OSError, TimeoutError, ValueError):
            return read_snapshot(snapshot_file(self.run_dir, pid))  # at most 1 s old

    async def stop(self) -> None:
        """SIGTERM every worker, wait up to shutdown_timeout (+5 s), then SIGKILL."""
        self._stopping = True
        live = [p for p in self.processes.values() if p.returncode is None]
        for process in live:
            with contextlib.suppress(ProcessLookupError):
                process.send_signal(signal.SIGTERM)
        if live:
            await asyncio.wait(
                [asyncio.ensure_future(p.wait()) for p in live],
                timeout=self.shutdown_timeout + 5.0,
            )
            for process in live:
                if process.returncode is None:
                    with contextlib.suppress(ProcessLookupError):
                        process.kill()
                    await process.wait()
        for task in self._watchers:
            task.cancel()
        for task in self._watchers:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        if self._session is not None:
            await self._session.close()
        shutil.rmtree(self.run_dir, ignore_errors=True)
        log.info("workers stopped")


_GAUGES = frozenset({"waku_legacy_http_connections"})


# -- the worker's side ---------------------------------------------------------------------------


def forwarding_handler(
    session_of: Callable[[], aiohttp.ClientSession],
) -> Callable[[web.Request], Awaitable[web.StreamResponse]]:
    """A handler that answers with what the primary answers to the same request."""
    from waku_legacy.bridge.http_api import FORWARDED

    async def forward(request: web.Request) -> web.StreamResponse:
        body = await request.read() if request.body_exists else None
        headers = {k: request.headers[k] for k in REQUEST_HEADERS if k in request.headers}
        async with session_of().request(
            request.method, "http://primary" + request.rel_url.path_qs, data=body,
            headers=headers, allow_redirects=False,
        ) as answer:  # fmt: skip
            data = await answer.read()
            out = web.Response(status=answer.status, body=data)
            for key in RESPONSE_HEADERS:
                if key in answer.headers:
                    out.headers[key] = answer.headers[key]
        request[FORWARDED] = True
        return out

    return forward


def metrics_site(values: Callable[[], Snapshot]) -> web.Application:
    """A worker's private app (its own Unix socket): its metric values for the primary."""

    async def snapshot(request: web.Request) -> web.Response:
        return web.json_response(values())

    app = web.Application()
    app.router.add_get("/snapshot", snapshot)
    return app


class WorkerProcess:
    """One worker: the store routes on the shared socket, everything else forwarded."""

    def __init__(self, header: dict[str, Any]) -> None:
        self.config: BridgeConfig = header["config"]
        self.host: str = header["host"]
        self.port: int = header["port"]
        self.run_dir = Path(header["run_dir"])
        self.slot: int = header["slot"]
        self.metrics = BridgeMetrics()
        self.store: StoreAccess | None = None
        self.p2p: NativeListener | None = None  # the libp2p store listener, as the primary's
        self.libp2p_listen: tuple[str, ...] = tuple(header.get("libp2p_listen", ()))
        self._session: aiohttp.ClientSession | None = None
        self.orphaned = False

    def session(self) -> aiohttp.ClientSession:
        assert self._session is not None
        return self._session

    async def run(self) -> None:
        from waku_legacy.bridge.http_api import make_runner
        from waku_legacy.bridge.http_guard import HttpLimits
        from waku_legacy.bridge.store_threads import StoreAccess

        server = self.config.server
        loop = asyncio.get_running_loop()
        stop = asyncio.Event()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        self.store = store = await asyncio.to_thread(
            StoreAccess, self.config.store.url, readers=server.reader_threads, read_only=True,
            start_in_outage=True,
        )  # fmt: skip
        self._session = aiohttp.ClientSession(
            connector=aiohttp.UnixConnector(path=str(self.run_dir / PRIMARY_SOCKET), limit=64),
            timeout=aiohttp.ClientTimeout(total=FORWARD_TIMEOUT),
        )
        # Only the store routes run here; the rest is forwarded to the primary.
        runner = make_runner(
            store, self.metrics, HttpLimits.from_config(server),
            shutdown_timeout=server.shutdown_timeout,
            forward=forwarding_handler(self.session), process=str(os.getpid()),
        )  # fmt: skip
        await runner.setup()
        listener = bind_listener(self.host, self.port)  # the primary's port (SO_REUSEPORT)
        await web.SockSite(runner, listener).start()
        if self.libp2p_listen:
            await self._start_p2p(store)
        private = web.AppRunner(metrics_site(self.snapshot), handle_signals=False)
        await private.setup()
        await web.UnixSite(private, str(worker_socket(self.run_dir, os.getpid()))).start()
        watchers = [
            asyncio.create_task(self._parent_gone(stop)),
            asyncio.create_task(self._write_snapshots(stop)),
        ]
        log.info("worker ready", extra=fields(slot=self.slot, pid=os.getpid()))
        try:
            await stop.wait()
        finally:
            for task in watchers:
                task.cancel()
            await runner.cleanup()  # in-flight requests finish (shutdown_timeout)
            if self.p2p is not None:
                await self.p2p.stop()
            _write_snapshot(snapshot_file(self.run_dir, os.getpid()), self.snapshot())
            await private.cleanup()
            await self._session.close()
            await store.close(timeout=server.shutdown_timeout)
            if self.orphaned:
                shutil.rmtree(self.run_dir, ignore_errors=True)

    async def _start_p2p(self, store: StoreAccess) -> None:
        """The libp2p store on the primary's ports (bound with SO_REUSEPORT), the
        same key (one peer id), this worker's read-only store connections."""
        from dataclasses import replace

        from waku_legacy.bridge.p2p import start_p2p_listener
        from waku_legacy.store.legacy_query import LegacyCursorCache

        if self.config.libp2p is None:  # libp2p_listen is only sent with a [libp2p]
            return
        libp2p = replace(self.config.libp2p, listen=self.libp2p_listen)
        try:
            self.p2p = await start_p2p_listener(libp2p, store.stores, LegacyCursorCache())
        except WakuLegacyError as exc:  # the REST side still serves; the primary's libp2p too
            log.error("libp2p listener not started in this worker", extra=fields(error=str(exc)))

    def snapshot(self) -> Snapshot:
        """This worker's metric values, its libp2p listener's counters included."""
        if self.p2p is not None:
            for event, count in self.p2p.stats().items():
                self.metrics.libp2p_events.set(count, event)
        return self.metrics.registry.snapshot()

    async def _parent_gone(self, stop: asyncio.Event) -> None:
        """The primary holds our stdin open; its end (the primary exited) stops us."""
        reader = asyncio.StreamReader()
        loop = asyncio.get_running_loop()
        await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
        while await reader.read(4096):
            pass
        log.warning("the primary is gone; worker stopping", extra=fields(slot=self.slot))
        self.orphaned = True  # nobody else will remove the pool's directory
        stop.set()

    async def _write_snapshots(self, stop: asyncio.Event) -> None:
        path = snapshot_file(self.run_dir, os.getpid())
        while not stop.is_set():
            with contextlib.suppress(OSError):
                _write_snapshot(path, self.snapshot())
            await asyncio.sleep(SNAPSHOT_EVERY)


def _read_header() -> dict[str, Any]:
    stream = sys.stdin.buffer
    (size,) = struct.unpack(">I", stream.read(4))
    header = pickle.loads(stream.read(size))  # from our own parent, over a private pipe
    assert isinstance(header, dict)
    return header


def main() -> int:
    """A worker process (``python -m waku_legacy.bridge.workers``, started by the pool)."""
    from waku_legacy.bridge.logs import configure_logging

    header = _read_header()
    config = header["config"]
    configure_logging(config.logging.level, config.logging.format)
    asyncio.run(WorkerProcess(header).run())
    return 0


if __name__ == "__main__":
    sys.exit(main())
