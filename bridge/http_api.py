"""The bridge's HTTP API (aiohttp): nwaku-compatible store, operations, admin.

    GET  /store/v3/messages                     nwaku store v3 REST (see store_rest_server)
    GET  /store/v1/messages                     nwaku legacy store REST
    GET  /health                                nwaku's HealthReport; 503 only when Degraded
    GET  /debug/v1/info                         {"listenAddresses", "enrUri", ...}
    GET  /debug/v1/version                      text
    GET  /                                      the status page (HTML; [server] status_page)
    GET  /debug/v1/status                       the same data as JSON
    GET  /metrics                               Prometheus text exposition
    GET  /history/…                             the history viewer ([viewer]; bridge.viewer)
    GET  /admin/v1/communities                  (bearer token) communities, archives, magnets
    GET  /admin/v1/communities/{id}/archives    (bearer token) one community's index
    POST /admin/v1/communities/{id}/archive     (bearer token) run its archiving now
    POST /admin/v1/archive                      (bearer token) run every community's now

Errors are ``text/plain`` reasons with nwaku's status codes (400 bad request, 401/403
admin auth, 404, 405, 408 body too slow, 429 request budget, 431 request head over 64 KiB,
500 internal or the archive errors nwaku answers with 500, 503 unavailable); a failure is
logged with its traceback for operators and answered without one.

``/health`` is nwaku's ``HealthReport`` as current nwaku writes it (v0.36 on,
``rest_api/endpoint/health/types.nim``, ``node/health_monitor/health_status.nim``):
``{"nodeHealth": "READY", "protocolsHealth": [{"Store": "READY"}, {"Archives": "NOT_READY",
"desc": "…"}]}``, statuses the enum names INITIALIZING, SYNCHRONIZING, READY, NOT_READY,
NOT_MOUNTED, SHUTTING_DOWN, ``desc`` only when there is a reason, answered 200 whatever the
state (nwaku does). One addition: archives that cannot be reconciled make ``nodeHealth``
``"Degraded"`` and the answer 503, so that a probe notices.

Limits (:mod:`waku_legacy.bridge.http_guard`, ``[server]`` in the config): connection caps,
header/idle/body timeouts, and a request budget per client address in which the
continuation of a page answered to that address (its cursor) is free.
"""

from __future__ import annotations

import asyncio
import hmac
import json
import logging
import time
import uuid
from collections.abc import Awaitable, Callable, Hashable, Sequence
from typing import Any, Protocol

from aiohttp import web

from waku_legacy.bridge.http_guard import (
    ConnectionGuard,
    GuardedHandler,
    GuardedRunner,
    HttpLimits,
    RefusalLog,
    RequestBudget,
    retry_after,
)
from waku_legacy.bridge.logs import fields
from waku_legacy.bridge.metrics import CONTENT_TYPE, BridgeMetrics, Snapshot
from waku_legacy.bridge.status import StatusReport
from waku_legacy.bridge.status_page import CONTENT_SECURITY_POLICY, render_status_page
from waku_legacy.bridge.store_peer import parse_peer_addr, query_remote
from waku_legacy.bridge.store_rest_server import (
    LegacyCursor,
    LegacyCursorCache,
    RestError,
    nwaku_hash,
    parse_legacy_query,
    parse_v3_query,
    query_param,
    run_legacy_query,
    run_v3_query,
    store_error_status,
)
from waku_legacy.bridge.store_threads import StoreAccess
from waku_legacy.errors import WakuLegacyError
from waku_legacy.store import StoreUnavailable

__all__ = ["BridgeBackend", "make_app", "make_runner"]

log = logging.getLogger("waku_legacy.bridge.http")

VERSION = "waku-legacy-bridge/0.1.0"
JSON = "application/json"
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
REQUEST_ID = web.RequestKey("request_id", str)
NEXT_CURSOR = web.RequestKey("next_cursor", object)  # a store page's continuation key
FORWARDED = web.RequestKey("forwarded", bool)  # answered by the primary (bridge.workers)
PROCESS_HEADER = "X-Bridge-Process"  # which process answered, when there are several
UNBUDGETED = frozenset({"/health", "/metrics"})  # constant work: probes and scrapes
MAX_HEAD_LINE = 64 * 1024  # nwaku's REST server: request heads up to 64 KiB (then 431)
DEGRADED = "Degraded"  # the one nodeHealth of ours that nwaku does not have
# The service's states -> nwaku's HealthStatus names (health_status.nim, v0.36 on).
NWAKU_HEALTH = {
    "Initializing": "INITIALIZING",
    "Synchronizing": "SYNCHRONIZING",
    "Ready": "READY",
    "Not Ready": "NOT_READY",
    "Not Mounted": "NOT_MOUNTED",
    "Shutting Down": "SHUTTING_DOWN",
    "Stopped": "SHUTTING_DOWN",
}


class BridgeBackend(Protocol):
    """What the HTTP API reads of the running service, beside the store and the metrics
    (:class:`~waku_legacy.bridge.view.BridgeView`); a worker process, which forwards these
    routes to its primary, has none of it."""

    @property
    def admin_token(self) -> str | None: ...
    @property
    def status_page(self) -> bool: ...  # GET / and /debug/v1/status are served

    def health(self) -> tuple[str, list[dict[str, str]]]: ...
    async def metric_snapshots(self) -> list[Snapshot]: ...  # other processes' metrics
    async def status_report(self) -> StatusReport: ...
    def info(self) -> dict[str, Any]: ...
    def communities_report(self) -> list[dict[str, Any]]: ...
    def archives_report(self, community: str) -> dict[str, Any]: ...
    async def trigger_archive(self, community: str | None) -> list[dict[str, Any]]: ...


def _text(status: int, reason: str) -> web.Response:
    return web.Response(status=status, text=reason + "\n", content_type="text/plain")


def _json_bytes(body: bytes, status: int = 200) -> web.Response:
    return web.Response(status=status, body=body, content_type=JSON)


def _route_name(request: web.Request) -> str:
    info = request.match_info
    route = getattr(info, "route", None)
    resource: web.AbstractResource | None = getattr(route, "resource", None)
    if resource is None or getattr(info, "http_exception", None) is not None:
        return "unmatched"
    return resource.canonical


def _continuation(request: web.Request) -> Hashable | None:
    """The key under which a store request continues an answered page (its cursor)."""
    try:
        if request.path == "/store/v3/messages":
            text = request.query.get("cursor")
            digest = None if not text else nwaku_hash(text)
            return None if digest is None else ("v3", digest)
        if request.path == "/store/v1/messages":
            cursor = parse_legacy_query(request.query).cursor
            return None if cursor is None else _legacy_key(cursor)
    except (WakuLegacyError, UnicodeError):
        return None
    return None


def _legacy_key(cursor: LegacyCursor) -> Hashable:
    return ("v1", cursor.pubsub_topic, cursor.sender_time, cursor.digest)


class _Admission:
    """Whether a request is served at all: its body within ``body_timeout``, then the
    request budget of its address, in which continuing an answered page is free."""

    def __init__(self, limits: HttpLimits, refused: RefusalLog) -> None:
        self.limits = limits
        self.refused = refused
        self.budget = RequestBudget(limits.requests_per_second, limits.request_burst)

    async def read_body(self, request: web.Request, address: str) -> None:
        """Receive the body (bounded by client_max_size) within body_timeout."""
        if not request.body_exists:
            return
        try:
            async with asyncio.timeout(self.limits.body_timeout):
                await request.read()
        except TimeoutError:
            self.refused("body_timeout", address)
            raise RestError(
                408, f"the request body did not arrive within {self.limits.body_timeout:g} s"
            ) from None

    def admit(self, request: web.Request, address: str) -> None:
        if not self.budget.enabled or request.path in UNBUDGETED:
            return
        key = _continuation(request)
        if key is not None and self.budget.continues(address, key):
            return  # the next page of one this address was answered: never refused
        wait = self.budget.take(address)
        if wait > 0:
            self.refused("rate_limit", address, path=request.path)
            seconds = retry_after(wait)
            raise RestError(
                429,
                f"request budget of {address} exhausted "
                f"({self.limits.requests_per_second:g}/s, burst {self.limits.request_burst}); "
                f"retry after {seconds} s (continuing a page with its cursor is always allowed)",
                {"Retry-After": seconds},
            )

    def answered(self, request: web.Request, address: str) -> None:
        """A store page went out: its continuation is now free for ``address``."""
        next_cursor = request.get(NEXT_CURSOR)
        if next_cursor is not None:
            self.budget.issued(address, next_cursor)


def _make_middleware(
    metrics: BridgeMetrics, limits: HttpLimits, refused: RefusalLog, process: str | None = None
) -> Callable[..., Awaitable[web.StreamResponse]]:
    admission = _Admission(limits, refused)

    @web.middleware
    async def middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
        started = time.perf_counter()
        request_id = uuid.uuid4().hex
        request[REQUEST_ID] = request_id
        address = request.remote or "unknown"
        try:
            response = await _admit_and_handle(request, handler, admission, address)
        except RestError as exc:
            response = _rest_error_response(exc)
        except web.HTTPException as exc:
            if exc.status < 400:
                raise
            response = _http_error_response(request, exc)
        except Exception as exc:
            response = _internal_error_response(request, exc, request_id)
        _record(metrics, request, response, time.perf_counter() - started)
        if process is not None:
            response.headers[PROCESS_HEADER] = process
        return response

    return middleware


async def _admit_and_handle(
    request: web.Request, handler: Handler, admission: _Admission, address: str
) -> web.StreamResponse:
    protocol = request.protocol
    guarded = protocol if isinstance(protocol, GuardedHandler) else None
    if guarded is not None:
        guarded.request_started()
    try:
        await admission.read_body(request, address)
        admission.admit(request, address)
        response = await handler(request)
    finally:
        if guarded is not None:
            guarded.request_finished()
    admission.answered(request, address)
    return response


def _rest_error_response(exc: RestError) -> web.Response:
    response = _text(exc.status, exc.reason)
    response.headers.update(exc.headers)
    if exc.status == 408:
        response.force_close()  # the rest of the body is not waited for
    return response


def _http_error_response(request: web.Request, exc: web.HTTPException) -> web.Response:
    reason = exc.reason if exc.status != 404 else f"no such endpoint: {request.path}"
    response = _text(exc.status, reason)
    for key in ("Allow", "WWW-Authenticate"):
        if key in exc.headers:
            response.headers[key] = exc.headers[key]
    return response


def _internal_error_response(request: web.Request, exc: Exception, request_id: str) -> web.Response:
    """Logged with its traceback for operators, answered without one."""
    answer = store_error_status(exc)
    if isinstance(exc, StoreUnavailable):
        # an outage, logged once by the store's health (bridge.store_threads), not a bug:
        # no traceback per request (the request log line still names the 503)
        return _rest_error_response(answer)
    log.error(
        "request failed",
        exc_info=True,
        extra=fields(request_id=request_id, path=request.path, status=answer.status),
    )
    return _text(answer.status, answer.reason)


def _record(
    metrics: BridgeMetrics, request: web.Request, response: web.StreamResponse, elapsed: float
) -> None:
    """Count and time the answer, tag it with its request id, log it when it failed."""
    request_id = request[REQUEST_ID]
    if request.get(FORWARDED):
        return  # the primary counted, timed and tagged it (bridge.workers)
    route = _route_name(request)
    metrics.http_requests.inc(1, route, request.method, str(response.status))
    metrics.http_latency.observe(elapsed, route)
    response.headers["X-Request-Id"] = request_id
    if response.status >= 400 or log.isEnabledFor(logging.DEBUG):
        log.log(
            logging.INFO if response.status < 500 else logging.WARNING,
            "http request",
            extra=fields(
                request_id=request_id,
                method=request.method,
                path=request.path,
                status=response.status,
                ms=round(elapsed * 1000, 3),
            ),
        )


def health_document(
    node: str, protocols: list[dict[str, str]]
) -> tuple[dict[str, Any], int]:
    """nwaku's ``HealthReport`` JSON and status from the service's states: each protocol
    ``{name: STATUS}``, plus ``desc`` for one that is not ready with a reason (a state
    text ``"<state>: <reason>"``, as the service gives a degraded one)."""
    entries: list[dict[str, str]] = []
    for entry in protocols:
        for name, state in entry.items():
            status = NWAKU_HEALTH.get(state)
            if status is not None:
                entries.append({name: status})
            else:
                entries.append({name: "NOT_READY", "desc": state})
    degraded = node == DEGRADED
    document = {
        "nodeHealth": DEGRADED if degraded else NWAKU_HEALTH.get(node, "NOT_READY"),
        "protocolsHealth": entries,
    }
    return document, 503 if degraded else 200


def _unauthorized(reason: str) -> web.HTTPUnauthorized:
    return web.HTTPUnauthorized(
        reason=reason, headers={"WWW-Authenticate": 'Bearer realm="waku-legacy admin"'}
    )


def _check_admin(request: web.Request, token: str | None) -> None:
    header = request.headers.get("Authorization", "")
    scheme, _, given = header.partition(" ")
    if not header or scheme.lower() != "bearer" or not given.strip():
        raise _unauthorized("admin endpoints need 'Authorization: Bearer <token>'")
    try:
        # Header bytes that are not UTF-8 arrive as surrogate escapes: no token has them.
        given_bytes = given.strip().encode("utf-8")
    except UnicodeEncodeError:
        raise _unauthorized("the bearer token is not valid UTF-8") from None
    if token is None:
        raise web.HTTPForbidden(reason="the admin API is disabled (no [admin] token configured)")
    if not hmac.compare_digest(given_bytes, token.encode()):
        raise web.HTTPForbidden(reason="wrong admin token")


def make_runner(
    store: StoreAccess,
    metrics: BridgeMetrics,
    limits: HttpLimits,
    *,
    shutdown_timeout: float,
    service: BridgeBackend | None = None,
    forward: Handler | None = None,
    process: str | None = None,
    subapps: Sequence[tuple[str, web.Application]] = (),
) -> web.AppRunner:
    """The HTTP API behind its limits: connection caps, header/idle/body timeouts, budget.

    The store routes answer from ``store``; every other route from ``service`` (the primary)
    or, in a worker process (:mod:`waku_legacy.bridge.workers`), by ``forward``, which hands
    the request to the primary. ``process``: the value of the ``X-Bridge-Process`` header on
    every answer (which process answered)."""
    refused = RefusalLog(metrics)
    app = make_app(
        store, metrics, service=service, forward=forward, limits=limits, refused=refused,
        process=process, subapps=subapps,
    )  # fmt: skip
    return GuardedRunner(
        app,
        guard=ConnectionGuard(limits, refused),
        handle_signals=False,
        access_log=None,
        shutdown_timeout=shutdown_timeout,
        keepalive_timeout=limits.idle_timeout,  # aiohttp: idle and first-request timeout
        # Bodies are read by the middleware (within body_timeout); what is left after a 408
        # or 413 is drained only this long before the connection closes (aiohttp: 10 s).
        lingering_time=0.5,
        max_line_size=MAX_HEAD_LINE,  # a longer request line or header: 431 (GuardedHandler)
        max_field_size=MAX_HEAD_LINE,
    )


def make_app(
    store: StoreAccess,
    metrics: BridgeMetrics,
    *,
    service: BridgeBackend | None = None,
    forward: Handler | None = None,
    limits: HttpLimits | None = None,
    refused: RefusalLog | None = None,
    process: str | None = None,
    subapps: Sequence[tuple[str, web.Application]] = (),
) -> web.Application:
    """The routes (without the connection guard): exactly one of ``service`` and
    ``forward`` answers those that are not the store's; ``subapps`` (prefix, application),
    such as the history viewer, are served by the primary beside them."""
    limits = limits or HttpLimits()
    refused = refused or RefusalLog(metrics)
    app = web.Application(
        middlewares=[_make_middleware(metrics, limits, refused, process)],
        client_max_size=64 * 1024,
    )
    _add_store_routes(app, store, metrics)
    if service is None and forward is not None:
        app.router.add_route("*", "/{tail:.*}", forward)
    elif service is not None and forward is None:
        _add_operations_routes(app, service, store, metrics)
        if service.status_page:
            _add_status_routes(app, service)
        _add_admin_routes(app, service)
        for prefix, subapp in subapps:
            app.add_subapp(prefix, subapp)
    else:
        raise ValueError("make_app needs exactly one of service and forward")
    return app


def _add_store_routes(app: web.Application, store: StoreAccess, metrics: BridgeMetrics) -> None:
    """nwaku's store REST, v3 and legacy."""
    legacy_cursors = LegacyCursorCache()

    async def store_v3(request: web.Request) -> web.Response:
        query = parse_v3_query(request.query)
        peer = parse_peer_addr(query_param(request.query, "peerAddr"))
        if peer is not None:  # nwaku: ask that peer (bridge.store_peer)
            answer = await query_remote(peer, query, request[REQUEST_ID])
            return _json_bytes(json.dumps(answer, separators=(",", ":")).encode())
        started = time.perf_counter()
        cursors: list[bytes | None] = []
        try:
            body = await store.read(run_v3_query, query, request[REQUEST_ID], cursor_out=cursors)
        finally:
            metrics.store_query_latency.observe(time.perf_counter() - started, "v3")
        if cursors and cursors[0] is not None:
            request[NEXT_CURSOR] = ("v3", cursors[0])
        return _json_bytes(body)

    async def store_v1(request: web.Request) -> web.Response:
        query = parse_legacy_query(request.query)
        started = time.perf_counter()
        cursors: list[LegacyCursor | None] = []
        try:
            body = await store.read(run_legacy_query, query, legacy_cursors, cursor_out=cursors)
        finally:
            metrics.store_query_latency.observe(time.perf_counter() - started, "v1")
        if cursors and cursors[0] is not None:
            request[NEXT_CURSOR] = _legacy_key(cursors[0])
        return _json_bytes(body)

    app.router.add_get("/store/v3/messages", store_v3)
    app.router.add_get("/store/v1/messages", store_v1)


def _add_operations_routes(
    app: web.Application, backend: BridgeBackend, store: StoreAccess, metrics: BridgeMetrics
) -> None:
    """Health, node info, version and metrics: what probes and scrapers read."""

    async def health(request: web.Request) -> web.Response:
        document, status = health_document(*backend.health())
        return web.json_response(document, status=status)

    async def info(request: web.Request) -> web.Response:
        return web.json_response(backend.info())

    async def version(request: web.Request) -> web.Response:
        return web.Response(text=VERSION, content_type="text/plain")

    async def metrics_page(request: web.Request) -> web.Response:
        metrics.pending_writes.set(store.pending_writes)
        others = await backend.metric_snapshots()
        return web.Response(
            body=metrics.registry.render(others).encode(), headers={"Content-Type": CONTENT_TYPE}
        )

    app.router.add_get("/health", health)
    app.router.add_get("/debug/v1/info", info)
    app.router.add_get("/debug/v1/version", version)
    app.router.add_get("/metrics", metrics_page)


def _add_status_routes(app: web.Application, backend: BridgeBackend) -> None:
    """The status page: the service's state for an operator, no token (nothing secret)."""

    async def status_page(request: web.Request) -> web.Response:
        page = render_status_page(await backend.status_report())
        return web.Response(
            text=page, content_type="text/html", charset="utf-8",
            headers={
                "Content-Security-Policy": CONTENT_SECURITY_POLICY,
                "X-Content-Type-Options": "nosniff", "Cache-Control": "no-store",
            },
        )  # fmt: skip

    async def status_json(request: web.Request) -> web.Response:
        report = await backend.status_report()
        return web.json_response(report.to_json(), headers={"Cache-Control": "no-store"})

    app.router.add_get("/", status_page)
    app.router.add_get("/debug/v1/status", status_json)


def _add_admin_routes(app: web.Application, backend: BridgeBackend) -> None:
    """The bearer-token admin API: communities, their archives, archiving now."""

    async def admin_communities(request: web.Request) -> web.Response:
        _check_admin(request, backend.admin_token)
        return web.json_response({"communities": backend.communities_report()})

    async def admin_archives(request: web.Request) -> web.Response:
        _check_admin(request, backend.admin_token)
        return web.json_response(backend.archives_report(request.match_info["community"]))

    async def admin_trigger_one(request: web.Request) -> web.Response:
        _check_admin(request, backend.admin_token)
        runs = await backend.trigger_archive(request.match_info["community"])
        return web.json_response({"runs": runs})

    async def admin_trigger_all(request: web.Request) -> web.Response:
        _check_admin(request, backend.admin_token)
        return web.json_response({"runs": await backend.trigger_archive(None)})

    app.router.add_get("/admin/v1/communities", admin_communities)
    app.router.add_get("/admin/v1/communities/{community}/archives", admin_archives)
    app.router.add_post("/admin/v1/communities/{community}/archive", admin_trigger_one)
    app.router.add_post("/admin/v1/archive", admin_trigger_all)
