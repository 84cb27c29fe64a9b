"""The history viewer over a real aiohttp server: its security headers on every answer
(errors too), noindex unless opted in, bounded query parameters answered 400 with a reason,
the takedown file re-read without a restart, and images served only when their bytes sniff
as JPEG/PNG/WebP/GIF within the cap (never SVG, never by a declared type)."""

from __future__ import annotations

import json
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import aiohttp
import pytest
from aiohttp import web

from tests.browser import text_of
from tests.waku_legacy.history.memory_reader import (
    COMMUNITY,
    DEV,
    GENERAL,
    PNG_1X1,
    MemoryHistory,
    key,
    mid,
    sample_history,
)
from waku_legacy.bridge.viewer import (
    CONTENT_SECURITY_POLICY,
    TakedownList,
    Viewer,
    ViewerSettings,
    parse_takedown,
)
from waku_legacy.errors import ConfigError
from waku_legacy.history.web.images import MAX_IMAGE_BYTES

SECURITY = {
    "Content-Security-Policy": CONTENT_SECURITY_POLICY,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
}


@asynccontextmanager
async def serve(
    history: MemoryHistory, **settings: object
) -> AsyncIterator[tuple[aiohttp.ClientSession, str, Viewer]]:
    viewer = Viewer(ViewerSettings(**settings), history.reader)  # type: ignore[arg-type]
    app = web.Application()
    app.add_subapp(viewer.prefix, viewer.app())
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    try:
        async with aiohttp.ClientSession() as session:
            yield session, f"http://127.0.0.1:{port}{viewer.prefix}", viewer
    finally:
        viewer.close()
        await runner.cleanup()


def _check_security(response: aiohttp.ClientResponse, *, noindex: bool = True) -> None:
    for name, value in SECURITY.items():
        assert response.headers.get(name) == value, name
    if noindex:
        assert response.headers.get("X-Robots-Tag") == "noindex, nofollow"
    else:
        assert "X-Robots-Tag" not in response.headers


async def test_pages_and_their_json_carry_the_security_headers():
    async with serve(sample_history()) as (session, base, _):
        urls = [
            "/", "/index.json", f"/{COMMUNITY}/", f"/{COMMUNITY}/index.json",
            f"/{COMMUNITY}/{GENERAL}/", f"/{COMMUNITY}/{GENERAL}/2024-03-12",
            f"/{COMMUNITY}/{GENERAL}/2024-03-12.json", f"/{COMMUNITY}/m/{mid(4)}",
            f"/{COMMUNITY}/m/{mid(4)}.json", f"/{COMMUNITY}/search?q=call",
            f"/{COMMUNITY}/search.json?q=call", f"/{COMMUNITY}/image/{mid(6)}",
            "/static/history.css",
        ]  # fmt: skip
        for url in urls:
            async with session.get(base + url) as response:
                assert response.status == 200, (url, await response.text())
                _check_security(response)
                body = await response.read()
                if url.endswith(".json") or ".json?" in url:
                    assert response.content_type == "application/json"
                    json.loads(body)
                elif "/image/" in url:
                    assert response.content_type == "image/png" and body == PNG_1X1
                    assert response.headers["Content-Disposition"] == "inline"
                elif url.endswith(".css"):
                    assert response.content_type == "text/css"
                else:
                    assert response.content_type == "text/html"
                    assert b'<meta name="robots" content="noindex,nofollow">' in body
                    assert b"<script" not in body
        async with session.get(f"{base}/{COMMUNITY}/{GENERAL}/2024-03-12.json") as response:
            day = await response.json()
        assert [m["id"] for m in day["messages"]][:3] == [mid(1), mid(2), mid(3)]
        assert day["next_day"] == "2024-03-14"


async def test_the_prefix_without_its_slash_goes_to_the_root():
    async with serve(sample_history()) as (session, base, _):
        async with session.get(base, allow_redirects=False) as response:
            assert response.status == 301 and response.headers["Location"] == "/history/"
            _check_security(response)


async def test_search_engines_opt_in_drops_noindex():
    async with serve(sample_history(), allow_search_engines=True) as (session, base, _):
        async with session.get(f"{base}/{COMMUNITY}/") as response:
            _check_security(response, noindex=False)
            assert "robots" not in await response.text()


async def test_bad_parameters_are_400_with_a_reason_and_the_headers():
    async with serve(sample_history()) as (session, base, _):
        cases = {
            "/0xzz/": "community id",
            f"/{COMMUNITY}/not-a-uuid/2024-03-12": "channel id must be a UUID",
            f"/{COMMUNITY}/{GENERAL}/2024-13-45": "not a calendar date",
            f"/{COMMUNITY}/{GENERAL}/12-03-2024": "YYYY-MM-DD",
            f"/{COMMUNITY}/{GENERAL}/1999-01-01": "between 2015 and 2100",
            f"/{COMMUNITY}/{GENERAL}/?date=tomorrow": "YYYY-MM-DD",
            f"/{COMMUNITY}/m/0x1234": "message id",
            f"/{COMMUNITY}/search?q=": "give the words",
            f"/{COMMUNITY}/search?q=" + "a" * 201: "over 200 characters",
            f"/{COMMUNITY}/search?q=call&page=0": "page must be",
            f"/{COMMUNITY}/search?q=call&page=99999": "page must be",
            f"/{COMMUNITY}/search?q=call&page=-1": "page must be",
            f"/{COMMUNITY}/image/<svg>": "message id",
        }
        for url, reason in cases.items():
            async with session.get(base + url) as response:
                text = await response.text()
                assert response.status == 400, (url, response.status)
                _check_security(response)
                assert reason in text_of(text), (url, text)
                assert "<script" not in text
        async with session.get(f"{base}/{COMMUNITY}/{GENERAL}/<script>alert(1)</script>") as r:
            assert r.status in (400, 404)
            _check_security(r)
            assert "<script>" not in await r.text()
        async with session.get(f"{base}/no/such/page/at/all") as response:
            assert response.status == 404
            _check_security(response)
        async with session.post(f"{base}/{COMMUNITY}/") as response:
            assert response.status == 405
            _check_security(response)
        other = "0x03" + "11" * 32
        async with session.get(f"{base}/{other}/") as response:
            assert response.status == 404  # not indexed


async def test_jump_to_date_redirects_to_the_nearest_day_with_messages():
    async with serve(sample_history()) as (session, base, _):
        cases = {
            "2024-03-13": "2024-03-14",  # the next day with messages
            "2024-01-01": "2024-03-12",
            "2024-03-12": "2024-03-12",
            "2025-06-01": "2024-03-14",  # after the last: the last
        }
        for asked, landed in cases.items():
            url = f"{base}/{COMMUNITY}/{GENERAL}/?date={asked}"
            async with session.get(url, allow_redirects=False) as response:
                assert response.status == 303
                _check_security(response)
                assert response.headers["Location"] == (f"/history/{COMMUNITY}/{GENERAL}/{landed}")


async def test_only_the_configured_communities_are_shown():
    settings = {"communities": frozenset({"0x03" + "11" * 32})}
    async with serve(sample_history(), **settings) as (session, base, _):
        async with session.get(f"{base}/{COMMUNITY}/") as response:
            assert response.status == 404
        async with session.get(f"{base}/index.json") as response:
            assert (await response.json())["communities"] == []


async def test_takedown_file_is_reloaded_without_a_restart(tmp_path: Path):
    takedown = tmp_path / "takedown.txt"
    takedown.write_text(f"# spam\n{mid(3)}\n")
    async with serve(sample_history(), takedown_file=str(takedown)) as (session, base, _):
        day = f"{base}/{COMMUNITY}/{GENERAL}/2024-03-12.json"
        async with session.get(day) as response:
            ids = [m["id"] for m in (await response.json())["messages"]]
        assert mid(3) not in ids and mid(4) in ids
        async with session.get(f"{base}/{COMMUNITY}/m/{mid(3)}") as response:
            assert response.status == 404
        # the owner adds Alice's key: her messages go; message 3 comes back
        takedown.write_text(json.dumps({"authors": [key(9)]}))
        os.utime(takedown, ns=(1, 10**18))
        async with session.get(day) as response:
            ids = [m["id"] for m in (await response.json())["messages"]]
        assert ids == [mid(3), mid(4), mid(6), mid(7), mid(8)]
        async with session.get(f"{base}/{COMMUNITY}/search.json?q=migration") as response:
            assert (await response.json())["results"] == []
        # a broken edit keeps the last good list in force
        takedown.write_text("not an id\n")
        os.utime(takedown, ns=(2, 2 * 10**18))
        async with session.get(day) as response:
            assert response.status == 200
            ids = [m["id"] for m in (await response.json())["messages"]]
        assert mid(1) not in ids
        # removed: nothing is taken down
        takedown.unlink()
        async with session.get(day) as response:
            ids = [m["id"] for m in (await response.json())["messages"]]
        assert mid(1) in ids and mid(3) in ids


def test_takedown_formats():
    toml = f'messages = ["{mid(1)}"]\nauthors = ["{key(22)}"]\n'
    assert parse_takedown(toml, "t") == (frozenset({mid(1)}), frozenset({key(22)}))
    assert parse_takedown(json.dumps([mid(2).upper().replace("0X", "0x")]), "t") == (
        frozenset({mid(2)}), frozenset(),
    )  # fmt: skip
    with pytest.raises(ConfigError, match="neither a message id"):
        parse_takedown("0x1234\n", "t")
    with pytest.raises(ConfigError, match="unknown keys"):
        parse_takedown('{"ids": []}', "t")
    with pytest.raises(ConfigError, match="takedown_file"):
        TakedownList("/dev/null/nope")  # not a readable file at start: refused
    with pytest.raises(ConfigError, match="takedown_file"):
        TakedownList("/dev/zero")  # a device, not a regular file


SVG = b'<?xml version="1.0"?><svg xmlns="http://www.w3.org/2000/svg" onload="alert(1)"/>'
HTML_AS_PNG = b"<html><script>alert(1)</script></html>"
GIF = b"GIF89a\x01\x00\x01\x00\x80\x00\x00\x00\x00\x00\xff\xff\xff!\xf9\x04\x01\x00\x00\x00\x00,\x00\x00\x00\x00\x01\x00\x01\x00\x00\x02\x02D\x01\x00;"  # noqa: E501
JPEG = b"\xff\xd8\xff\xe0\x00\x10JFIF\x00" + b"\x00" * 32
WEBP = b"RIFF\x1a\x00\x00\x00WEBPVP8 " + b"\x00" * 16


async def test_images_are_served_only_when_they_sniff_as_an_image():
    history = sample_history()
    cases = {
        "svg": (SVG, 415), "html": (HTML_AS_PNG, 415), "empty": (b"", 415),
        "oversize": (b"\x89PNG\r\n\x1a\n" + b"\x00" * MAX_IMAGE_BYTES, 415),
        "gif": (GIF, 200), "jpeg": (JPEG, 200), "webp": (WEBP, 200),
    }  # fmt: skip
    types = {"gif": "image/gif", "jpeg": "image/jpeg", "webp": "image/webp"}
    async with serve(history) as (session, base, _):
        for name, (data, status) in cases.items():
            # the declared type says png whatever the bytes are: never trusted
            history.images[mid(6)] = ("png", data)
            async with session.get(f"{base}/{COMMUNITY}/image/{mid(6)}") as response:
                assert response.status == status, name
                _check_security(response)
                if status == 200:
                    assert response.content_type == types[name]
                    assert await response.read() == data
                    assert response.headers["Content-Disposition"] == "inline"
                else:
                    assert response.content_type == "text/html"
                    assert "<svg" not in await response.text()
        async with session.get(f"{base}/{COMMUNITY}/image/{mid(1)}") as response:
            assert response.status == 404  # a text message has no image
        async with session.get(f"{base}/{COMMUNITY}/{DEV}/2024-03-12") as response:
            assert "The bridge serves the store" in await response.text()


async def test_a_failed_database_connection_is_reopened_once_without_a_restart():
    """A reader whose connection fails (SQLite's "disk I/O error", a restarted PostgreSQL):
    the viewer closes it and reads again on a new one; a second failure in a row is a 500."""
    import sqlite3

    history = sample_history()
    failures = [1]
    resets: list[int] = []

    class Failing:
        def __init__(self, inner: object) -> None:
            self.inner = inner

        def __getattr__(self, name: str) -> object:
            if failures[0] > 0:
                failures[0] -= 1
                raise sqlite3.OperationalError("disk I/O error")
            return getattr(self.inner, name)

    def reader(policy):  # type: ignore[no-untyped-def]
        return Failing(history.reader(policy))

    viewer = Viewer(ViewerSettings(), reader, lambda: resets.append(1))  # type: ignore[arg-type]
    app = web.Application()
    app.add_subapp(viewer.prefix, viewer.app())
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    base = f"http://127.0.0.1:{runner.addresses[0][1]}{viewer.prefix}"
    try:
        async with aiohttp.ClientSession() as session:
            async with session.get(f"{base}/{COMMUNITY}/index.json") as response:
                assert response.status == 200
                assert (await response.json())["community"]["id"] == COMMUNITY
            assert resets == [1]
            failures[0] = 2  # fails again after the reopen: an error, the viewer still serves
            async with session.get(f"{base}/{COMMUNITY}/index.json") as response:
                assert response.status == 500
            async with session.get(f"{base}/{COMMUNITY}/index.json") as response:
                assert response.status == 200
    finally:
        viewer.close()
        await runner.cleanup()
