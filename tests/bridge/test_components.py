"""The bridge as components on one lifecycle: stop is the reverse of start, a component is
refused before those it needs, a failed start closes what had started and says why, a close
that raises is logged and the others still close, the service's states, and the HTTP API
served from a stub of its narrow read interface (no service behind it)."""

from __future__ import annotations

import asyncio
import logging
import socket
from typing import Any

import aiohttp
import pytest
from aiohttp.test_utils import TestClient, TestServer

from tests.bridge.support import ADMIN_TOKEN, bridge_config
from waku_legacy.bridge.http_api import make_app
from waku_legacy.bridge.lifecycle import (
    BackgroundTask,
    Component,
    ComponentOrderError,
    Lifecycle,
    ServiceState,
)
from waku_legacy.bridge.logs import _FIELDS
from waku_legacy.bridge.metrics import BridgeMetrics, Snapshot
from waku_legacy.bridge.service import BridgeService
from waku_legacy.bridge.status import StatusReport
from waku_legacy.bridge.store_rest_server import RestError
from waku_legacy.bridge.store_threads import StoreAccess
from waku_legacy.errors import ConfigError


class Recorded(Component):
    """A component that records its start and close in ``events``; ``fail`` makes its start
    acquire something (recorded) and then raise."""

    def __init__(
        self, name: str, events: list[str], *, fail: bool = False, needs: tuple[str, ...] = ()
    ) -> None:
        self.name = name
        self.events = events
        self.fail = fail
        self.needs = needs

    async def open(self) -> None:
        self.events.append(f"start {self.name}")
        if self.fail:
            raise RuntimeError(f"{self.name} cannot start")

    async def close(self) -> None:
        self.events.append(f"close {self.name}")


async def test_lifecycle_closes_in_reverse_and_after_a_failed_start() -> None:
    events: list[str] = []
    lifecycle = Lifecycle()
    for name in ("a", "b", "c"):
        await lifecycle.enter(Recorded(name, events))
    assert lifecycle.state is ServiceState.INITIALIZING
    await lifecycle.aclose()
    assert events == ["start a", "start b", "start c", "close c", "close b", "close a"]
    assert lifecycle.state is ServiceState.STOPPED

    events.clear()
    lifecycle = Lifecycle()
    await lifecycle.enter(Recorded("a", events))
    with pytest.raises(RuntimeError, match="b cannot start"):
        await lifecycle.enter(Recorded("b", events, fail=True))
    await lifecycle.aclose()
    # the half-started one is closed too (what it acquired before failing), then the rest
    assert events == ["start a", "start b", "close b", "close a"]


async def test_lifecycle_start_turns_ready_and_closes_each_component_once() -> None:
    events: list[str] = []
    lifecycle = Lifecycle()
    a, b = Recorded("a", events), Recorded("b", events, needs=("a",))
    await lifecycle.start([a, b])
    assert lifecycle.state is ServiceState.READY
    assert lifecycle.find(Recorded) is a
    await b.__aexit__(None, None, None)  # closed early by hand: the stack's exit does nothing
    await lifecycle.aclose()
    await lifecycle.aclose()
    assert events == ["start a", "start b", "close b", "close a"]
    assert a.closed and b.closed
    with pytest.raises(RuntimeError, match="starts once"):
        await lifecycle.start([Recorded("c", events)])


async def test_a_component_is_refused_before_what_it_needs() -> None:
    events: list[str] = []
    lifecycle = Lifecycle()
    await lifecycle.enter(Recorded("store", events))
    with pytest.raises(ComponentOrderError, match="http needs relay, live entered before it"):
        await lifecycle.enter(Recorded("http", events, needs=("store", "relay", "live")))
    with pytest.raises(ComponentOrderError, match="already entered"):
        await lifecycle.enter(Recorded("store", events))
    # the singletons' own lifecycle sees what the service's has entered
    inner = Lifecycle(within=lifecycle)
    await inner.enter(Recorded("archiving", events, needs=("store",)))
    await inner.aclose()
    await lifecycle.aclose()
    assert events == ["start store", "start archiving", "close archiving", "close store"]


async def test_a_close_that_raises_is_logged_and_does_not_keep_the_others_open(
    caplog: pytest.LogCaptureFixture,
) -> None:
    events: list[str] = []

    class Broken(Recorded):
        async def close(self) -> None:
            await super().close()
            raise OSError("socket already gone")

    async def dies() -> None:
        raise ValueError("the loop died")

    lifecycle = Lifecycle()
    await lifecycle.enter(Recorded("a", events))
    await lifecycle.enter(Broken("b", events))
    await lifecycle.enter(BackgroundTask("loop", dies))
    await lifecycle.enter(Recorded("c", events))
    await asyncio.sleep(0)  # the loop runs, and dies
    with caplog.at_level(logging.ERROR, logger="waku_legacy.bridge"):
        await lifecycle.aclose()
    assert events[3:] == ["close c", "close b", "close a"]
    assert lifecycle.state is ServiceState.STOPPED
    logged = [
        (r.getMessage(), getattr(r, _FIELDS)["component"], getattr(r, _FIELDS)["error"])
        for r in caplog.records
    ]
    # a background loop that had died says so when it is closed (its error is not swallowed)
    assert logged == [
        ("component did not close cleanly", "loop", "the loop died"),
        ("component did not close cleanly", "b", "socket already gone"),
    ]


def _record(service: BridgeService, events: list[tuple[str, str, ServiceState]]) -> None:
    """Wrap every component's open and close: (event, name, service state at that time)."""
    for component in service.components:
        start, aclose, name = component.open, component.close, component.name

        async def recorded_start(start: Any = start, name: str = name) -> None:
            events.append(("start", name, service.state))
            await start()

        async def recorded_aclose(aclose: Any = aclose, name: str = name) -> None:
            events.append(("close", name, service.state))
            await aclose()

        component.open = recorded_start  # type: ignore[method-assign]
        component.close = recorded_aclose  # type: ignore[method-assign]


def _v1(tmp_path: Any, port: int = 0) -> dict[str, Any]:
    return {"listen": f"127.0.0.1:{port}", "node_key_file": str(tmp_path / "nodekey")}


@pytest.mark.network
async def test_service_stops_in_reverse_start_order_through_its_states(tmp_path) -> None:
    config = bridge_config(tmp_path, f"sqlite:///{tmp_path}/s.sqlite3", v1=_v1(tmp_path))
    service = BridgeService(config)
    events: list[tuple[str, str, ServiceState]] = []
    _record(service, events)
    assert service.state is ServiceState.INITIALIZING
    await service.start()
    assert service.state is ServiceState.READY
    assert service.state == "Ready"  # the /health text, as nwaku's
    async with aiohttp.ClientSession() as http:
        async with http.get(f"http://127.0.0.1:{service.rest_port}/health") as response:
            assert (await response.json())["nodeHealth"] == "READY"
    await service.stop()
    assert service.state is ServiceState.STOPPED
    await service.stop()  # a second stop does nothing
    with pytest.raises(RuntimeError, match="starts once"):
        await service.start()

    started = [name for event, name, _ in events if event == "start"]
    closed = [name for event, name, _ in events if event == "close"]
    assert started == ["store", "store-probe", "http-client", "live", "http", "v1", "singletons"]
    assert closed == started[::-1]
    assert {state for event, _, state in events if event == "start"} == {ServiceState.INITIALIZING}
    assert {state for event, _, state in events if event == "close"} == {ServiceState.SHUTTING_DOWN}
    # what the service made is gone: the REST port and the v1 port refuse connections
    for port in (service.rest_port, service.mailserver.port):
        with pytest.raises(OSError):
            socket.create_connection(("127.0.0.1", port), timeout=2).close()


@pytest.mark.network
async def test_health_says_initializing_until_every_component_is_up(tmp_path) -> None:
    config = bridge_config(tmp_path, f"sqlite:///{tmp_path}/s.sqlite3", v1=_v1(tmp_path))
    service = BridgeService(config)
    v1 = next(c for c in service.components if c.name == "v1")
    release = asyncio.Event()
    v1_start = v1.open

    async def slow_start() -> None:
        await release.wait()
        await v1_start()

    v1.open = slow_start  # type: ignore[method-assign]
    starting = asyncio.create_task(service.start())
    try:
        while service.rest_port == 0:
            await asyncio.sleep(0.01)
        async with aiohttp.ClientSession() as http:
            async with http.get(f"http://127.0.0.1:{service.rest_port}/health") as response:
                document = await response.json()
        assert response.status == 200
        assert document == {
            "nodeHealth": "INITIALIZING",
            "protocolsHealth": [{"Store": "INITIALIZING"}, {"Waku v1 mailserver": "INITIALIZING"}],
        }
        assert service.health()[0] == "Initializing"
        release.set()
        await starting
        assert service.health() == ("Ready", [{"Store": "Ready"}, {"Waku v1 mailserver": "Ready"}])
    finally:
        release.set()
        await service.stop()
    assert service.health() == (
        "Stopped", [{"Store": "Stopped"}, {"Waku v1 mailserver": "Stopped"}]
    )  # fmt: skip


@pytest.mark.network
async def test_a_failed_start_closes_what_started_and_says_why(tmp_path) -> None:
    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen()
    try:
        port = taken.getsockname()[1]
        config = bridge_config(tmp_path, f"sqlite:///{tmp_path}/s.sqlite3", v1=_v1(tmp_path, port))
        service = BridgeService(config)
        events: list[tuple[str, str, ServiceState]] = []
        _record(service, events)
        with pytest.raises(ConfigError, match=rf"\[v1\] listen: cannot listen on 127.0.0.1:{port}"):
            await service.start()
    finally:
        taken.close()
    assert service.state is ServiceState.STOPPED
    assert service.failure is not None and service.failure.startswith("v1: [v1] listen")
    started = [name for event, name, _ in events if event == "start"]
    closed = [name for event, name, _ in events if event == "close"]
    assert started == ["store", "store-probe", "http-client", "live", "http", "v1"]
    assert closed == started[::-1]  # v1 itself too: what it made before failing is released
    rest_port = service.rest_port
    assert rest_port != 0
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", rest_port), timeout=2).close()
    await service.stop()  # what the CLI's run_forever does after a failed start: nothing left


@pytest.mark.network
async def test_the_service_refuses_a_start_order_that_puts_http_before_live(tmp_path) -> None:
    config = bridge_config(tmp_path, f"sqlite:///{tmp_path}/s.sqlite3", v1=_v1(tmp_path))
    service = BridgeService(config)
    names = [c.name for c in service.components]
    assert names == ["store", "store-probe", "http-client", "live", "http", "v1", "singletons"]
    http = service.components.pop(names.index("http"))
    service.components.insert(names.index("live"), http)  # the REST API before the live bridge
    events: list[tuple[str, str, ServiceState]] = []
    _record(service, events)
    with pytest.raises(ComponentOrderError, match="http needs live entered before it"):
        await service.start()
    assert service.failure == "http: http needs live entered before it"
    assert service.state is ServiceState.STOPPED
    started = [name for event, name, _ in events if event == "start"]
    assert started == ["store", "store-probe", "http-client"]  # http was never opened
    assert [name for event, name, _ in events if event == "close"] == started[::-1]


# -- the HTTP API against a stub of its read interface ---------------------------------------------


class StubBackend:
    """What the HTTP API reads of a service, with canned answers."""

    admin_token = ADMIN_TOKEN
    status_page = False

    def __init__(self) -> None:
        self.triggered: list[str | None] = []

    def health(self) -> tuple[str, list[dict[str, str]]]:
        return "Shutting Down", [{"Store": "Shutting Down"}, {"Archives": "Not Ready: disk full"}]

    async def metric_snapshots(self) -> list[Snapshot]:
        return []

    async def status_report(self) -> StatusReport:
        raise AssertionError("the status page is off: never asked")

    def info(self) -> dict[str, Any]:
        return {"listenAddresses": ["http://stub"], "enrUri": "", "version": "stub"}

    def communities_report(self) -> list[dict[str, Any]]:
        return [{"id": "stub-community"}]

    def archives_report(self, community: str) -> dict[str, Any]:
        raise RestError(404, f"community {community} is not configured here")

    async def trigger_archive(self, community: str | None) -> list[dict[str, Any]]:
        self.triggered.append(community)
        return [{"community": community, "ok": True}]


async def test_http_api_serves_a_stub_of_its_read_interface(tmp_path) -> None:
    store = await asyncio.to_thread(StoreAccess, f"sqlite:///{tmp_path}/s.sqlite3", readers=1)
    stub = StubBackend()
    app = make_app(store, BridgeMetrics(), service=stub)
    auth = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
    try:
        async with TestClient(TestServer(app)) as client:
            response = await client.get("/health")
            assert response.status == 200
            assert await response.json() == {
                "nodeHealth": "SHUTTING_DOWN",
                "protocolsHealth": [
                    {"Store": "SHUTTING_DOWN"},
                    {"Archives": "NOT_READY", "desc": "Not Ready: disk full"},
                ],
            }  # fmt: skip
            response = await client.get("/debug/v1/info")
            assert await response.json() == stub.info()
            response = await client.get("/admin/v1/communities", headers=auth)
            assert await response.json() == {"communities": [{"id": "stub-community"}]}
            response = await client.get("/admin/v1/communities")
            assert response.status == 401
            response = await client.post("/admin/v1/archive", headers=auth)
            assert await response.json() == {"runs": [{"community": None, "ok": True}]}
            assert stub.triggered == [None]
            response = await client.get("/admin/v1/communities/xyz/archives", headers=auth)
            assert response.status == 404
            assert await response.text() == "community xyz is not configured here\n"
            response = await client.get("/")  # status_page off: like any unknown path
            assert response.status == 404
            response = await client.get("/store/v3/messages")  # from the store given
            assert response.status == 200 and (await response.json())["messages"] == []
            response = await client.get("/metrics")
            assert "waku_legacy_http_requests_total" in await response.text()
    finally:
        await store.close()


def test_http_app_needs_exactly_one_answerer_for_the_other_routes(tmp_path) -> None:
    async def forward(request: Any) -> Any:
        raise AssertionError("never called")

    metrics = BridgeMetrics()
    store: Any = object()  # the store routes only keep it until a request comes
    with pytest.raises(ValueError, match="exactly one"):
        make_app(store, metrics)
    with pytest.raises(ValueError, match="exactly one"):
        make_app(store, metrics, service=StubBackend(), forward=forward)
