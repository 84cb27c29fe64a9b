"""The bridge's HTTP API (aiohttp): nwaku-compatible store, operations, admin.

    GET  /store/v3/messages                     nwaku store v3 REST (see rest_store)
    GET  /store/v1/messages                     nwaku legacy store REST
    GET  /health                                {"nodeHealth", "protocolsHealth"}; 503 unless Ready
    GET  /debug/v1/info                         {"listenAddresses", "enrUri", ...}
    GET  /debug/v1/version                      text
    GET  /metrics                               Prometheus text exposition
    GET  /admin/v1/communities                  (bearer token) communities, archives, magnets
    GET  /admin/v1/communities/{id}/archives    (bearer token) one community's index
    POST /admin/v1/communities/{id}/archive     (bearer token) run its archiving now
    POST /admin/v1/archive                      (bearer token) run every community's now

Errors are ``text/plain`` reasons with nwaku's status codes (400 bad request, 401/403
admin auth, 404, 405, 500 internal, 503 unavailable); a failure is logged with its
traceback for operators and answered without one.
"""

from __future__ import annotations

import hmac
import logging
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

from aiohttp import web

from waku_legacy.bridge.logs import fields
from waku_legacy.bridge.metrics import CONTENT_TYPE, BridgeMetrics
from waku_legacy.bridge.rest_store import (
    RestError,
    parse_legacy_query,
    parse_v3_query,
    run_legacy_query,
    run_v3_query,
    store_error_status,
)
from waku_legacy.bridge.store_access import StoreAccess

__all__ = ["BridgeBackend", "make_app"]

log = logging.getLogger("waku_legacy.bridge.http")

VERSION = "waku-legacy-bridge/0.1.0"
JSON = "application/json"
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
REQUEST_ID = web.RequestKey("request_id", str)


class BridgeBackend(Protocol):
    """What the HTTP API needs from the running service."""

    store: StoreAccess
    metrics: BridgeMetrics
    admin_token: str | None

    def health(self) -> tuple[str, list[dict[str, str]]]: ...
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
    resource = getattr(route, "resource", None)
    if resource is None or getattr(info, "http_exception", None) is not None:
        return "unmatched"
    return resource.canonical


def _make_middleware(backend: BridgeBackend) -> Callable[..., Awaitable[web.StreamResponse]]:
    @web.middleware
    async def middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
        started = time.perf_counter()
        request_id = uuid.uuid4().hex
        request[REQUEST_ID] = request_id
        try:
            response = await handler(request)
        except RestError as exc:
            response = _text(exc.status, exc.reason)
        except web.HTTPException as exc:
            if exc.status < 400:
                raise
            reason = exc.reason if exc.status != 404 else f"no such endpoint: {request.path}"
            response = _text(exc.status, reason)
            for key in ("Allow", "WWW-Authenticate"):
                if key in exc.headers:
                    response.headers[key] = exc.headers[key]
        except Exception as exc:
            answer = store_error_status(exc)
            log.error(
                "request failed",
                exc_info=True,
                extra=fields(request_id=request_id, path=request.path, status=answer.status),
            )
            response = _text(answer.status, answer.reason)
        elapsed = time.perf_counter() - started
        route = _route_name(request)
        backend.metrics.http_requests.inc(1, route, request.method, str(response.status))
        backend.metrics.http_latency.observe(elapsed, route)
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
        return response

    return middleware


def _check_admin(request: web.Request, token: str | None) -> None:
    header = request.headers.get("Authorization", "")
    scheme, _, given = header.partition(" ")
    if not header or scheme.lower() != "bearer" or not given.strip():
        raise web.HTTPUnauthorized(
            reason="admin endpoints need 'Authorization: Bearer <token>'",
            headers={"WWW-Authenticate": 'Bearer realm="waku-legacy admin"'},
        )
    if token is None:
        raise web.HTTPForbidden(reason="the admin API is disabled (no [admin] token configured)")
    if not hmac.compare_digest(given.strip().encode(), token.encode()):
        raise web.HTTPForbidden(reason="wrong admin token")


def make_app(backend: BridgeBackend) -> web.Application:
    metrics = backend.metrics
    store = backend.store

    async def store_v3(request: web.Request) -> web.Response:
        query = parse_v3_query(request.query)
        started = time.perf_counter()
        try:
            body = await store.read(run_v3_query, query, request[REQUEST_ID])
        finally:
            metrics.store_query_latency.observe(time.perf_counter() - started, "v3")
        return _json_bytes(body)

    async def store_v1(request: web.Request) -> web.Response:
        query = parse_legacy_query(request.query)
        started = time.perf_counter()
        try:
            body = await store.read(run_legacy_query, query)
        finally:
            metrics.store_query_latency.observe(time.perf_counter() - started, "v1")
        return _json_bytes(body)

    async def health(request: web.Request) -> web.Response:
        node, protocols = backend.health()
        return web.json_response(
            {"nodeHealth": node, "protocolsHealth": protocols},
            status=200 if node == "Ready" else 503,
        )

    async def info(request: web.Request) -> web.Response:
        return web.json_response(backend.info())

    async def version(request: web.Request) -> web.Response:
        return web.Response(text=VERSION, content_type="text/plain")

    async def metrics_page(request: web.Request) -> web.Response:
        metrics.pending_writes.set(store.pending_writes)
        return web.Response(
            body=metrics.registry.render().encode(), headers={"Content-Type": CONTENT_TYPE}
        )

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

    app = web.Application(middlewares=[_make_middleware(backend)], client_max_size=64 * 1024)
    app.router.add_get("/store/v3/messages", store_v3)
    app.router.add_get("/store/v1/messages", store_v1)
    app.router.add_get("/health", health)
    app.router.add_get("/debug/v1/info", info)
    app.router.add_get("/debug/v1/version", version)
    app.router.add_get("/metrics", metrics_page)
    app.router.add_get("/admin/v1/communities", admin_communities)
    app.router.add_get("/admin/v1/communities/{community}/archives", admin_archives)
    app.router.add_post("/admin/v1/communities/{community}/archive", admin_trigger_one)
    app.router.add_post("/admin/v1/archive", admin_trigger_all)
    return app
