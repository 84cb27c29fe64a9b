"""From the demo to a running bridge in one step (issue 16), as a new user goes: ``demo``
writes ``bridge.toml`` and prints how to serve it; the printed ``waku-legacy serve`` command
runs as a real process; the printed REST store query returns the channel's migrated messages,
the printed ``v1 pull`` fetches its original envelopes over RLPx from the printed enode, and
the bridge reports (and seeds) the printed magnet links, and its status page, rendered in
headless Chromium, names every demo community and its link. SIGTERM stops it cleanly, and a
rerun of ``demo --json`` on the folder keeps the token, node key and ports."""

from __future__ import annotations

import asyncio
import base64
import itertools
import json
import shlex
import signal
import sqlite3
import subprocess
import sys
import time
import tomllib
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlsplit

import aiohttp
import pytest

from tests.browser import WINDOW, check_png, chromium, screenshot, text_of
from waku_legacy.cli import main
from waku_legacy.mailserver_compat.storage.dump import read_dump

pytestmark = [pytest.mark.spark, pytest.mark.network, pytest.mark.torrent]

DEMO_ARGS = ["--communities", "2", "--channels", "2", "--days", "15", "--mailservers", "2",
             "--rate", "1.5", "--quiet"]  # fmt: skip


def _printed(text: str) -> dict[str, Any]:
    """What demo's table output names: the commands, the enode, the magnet links."""
    lines = [line.strip() for line in text.splitlines()]
    cli = shlex.join(_cli())
    (serve,) = [line for line in lines if line.startswith(f"{cli} serve --config ")]
    (store_query,) = [line for line in lines if line.startswith("curl -s 'http://")]
    (enode_line,) = [line for line in lines if line.startswith("v1 side, the mailserver's enode")]
    (pull,) = [line for line in lines if line.startswith(f"{cli} v1 pull ")]
    (p2p_query,) = [line for line in lines if line.startswith(f"{cli} store query ")]
    (fetch,) = [line for line in lines if line.startswith(f"{cli} fetch ")]
    magnets = {}
    for before, line in itertools.pairwise(lines):
        if line.startswith("magnet link: "):  # under "<name> (<community id>)"
            magnets[before.rpartition("(")[2].rstrip(")")] = line.removeprefix("magnet link: ")
    return {
        "command": serve,
        "store_query": store_query,
        "enode": enode_line.rpartition(" ")[2],
        "v1_pull": pull,
        "libp2p_store_query": p2p_query,
        "fetch": fetch,
        "magnet_links": magnets,
        "listed_magnets": [line for line in lines if line.startswith("magnet:?")],
    }


def _cli() -> list[str]:
    """This virtualenv's entry point by its absolute path, as the demo prints it."""
    script = Path(sys.executable).parent / "waku-legacy"
    return [str(script)] if script.exists() else [sys.executable, "-m", "waku_legacy.cli"]


def _argv(command: str) -> list[str]:
    """A printed command, run as printed: in a fresh shell without the virtualenv active
    (issue 24: a bare `waku-legacy` failed with exit 127 there)."""
    return ["env", "-i", f"HOME={Path.home()}", "PATH=/usr/bin:/bin", "sh", "-c", "exec " + command]


def _stored(store: Path, pubsub_topic: str, content_topic: str) -> dict[str, tuple[bytes, bytes]]:
    """What the demo migrated for one topic: 0x hash -> (payload, original v1 envelope)."""
    with sqlite3.connect(store) as db:
        rows = db.execute(
            "SELECT m.messageHash, m.payload, e.envelope FROM Message m JOIN v1_envelopes e"
            " ON e.messageHash = m.messageHash WHERE m.pubsubTopic = ? AND m.contentTopic = ?",
            (pubsub_topic.encode(), content_topic.encode()),
        ).fetchall()
    return {"0x" + h.hex(): (payload, envelope) for h, payload, envelope in rows}


@contextmanager
def _serving(command: str, log: Path) -> Iterator[subprocess.Popen[bytes]]:
    """The printed serve command as its own process; stopped with SIGTERM, exit 0."""
    with log.open("wb") as sink:
        proc = subprocess.Popen(_argv(command), stdout=sink, stderr=subprocess.STDOUT)
        try:
            yield proc
        finally:
            proc.send_signal(signal.SIGTERM)
            code = proc.wait(timeout=60)
    assert code == 0, log.read_text()[-3000:]
    assert "bridge stopped" in log.read_text()


async def _wait_healthy(http: aiohttp.ClientSession, rest: str, proc: subprocess.Popen[bytes],
                        log: Path) -> None:  # fmt: skip
    deadline = time.monotonic() + 90  # a loaded 2-core CI machine starts workers slowly
    while time.monotonic() < deadline:
        assert proc.poll() is None, f"serve exited: {log.read_text()[-3000:]}"
        try:
            async with http.get(f"{rest}/health") as response:
                if response.status == 200 and (await response.json())["nodeHealth"] == "READY":
                    return
        except aiohttp.ClientConnectionError:
            pass
        await asyncio.sleep(0.1)
    raise AssertionError(f"no healthy bridge at {rest}: {log.read_text()[-3000:]}")


async def _check_rest(http: aiohttp.ClientSession, url: str, store: Path) -> None:
    """The printed query is the first page of the channel's migrated messages; following the
    cursor gives all of them."""
    params = dict(parse_qsl(urlsplit(url).query))
    expected = _stored(store, params["pubsubTopic"], params["contentTopics"])
    assert expected and params["includeData"] == "true"
    async with http.get(url) as response:
        assert response.status == 200
        first = await response.json()
    assert len(first["messages"]) == min(int(params["pageSize"]), len(expected))
    got: dict[str, bytes] = {}
    params["pageSize"] = "100"
    page = first
    while True:
        for item in page["messages"]:
            got[item["messageHash"]] = base64.b64decode(item["message"]["payload"])
        if "paginationCursor" not in page:
            break
        params["cursor"] = page["paginationCursor"]
        async with http.get(url.partition("?")[0], params=params) as response:
            page = await response.json()
    assert got == {h: payload for h, (payload, _) in expected.items()}
    assert {m["messageHash"] for m in first["messages"]} <= set(got)


def _check_v1_pull(command: str, url: str, store: Path) -> None:
    """The printed ``v1 pull`` gets the channel's original envelopes over RLPx."""
    out = Path(shlex.split(command)[-1])
    run = subprocess.run(_argv(command + " --json"), capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr[-3000:]
    params = dict(parse_qsl(urlsplit(url).query))
    expected = _stored(store, params["pubsubTopic"], params["contentTopics"])
    pulled = list(read_dump(out))
    assert json.loads(run.stdout)["envelopes"] == len(pulled) == len(expected)
    assert sorted(pulled) == sorted(envelope for _, envelope in expected.values())


def _check_libp2p_and_fetch(printed: dict[str, Any], url: str, out: Path) -> None:
    """Issue 24: the printed libp2p `store query` answers the channel's messages, and the
    printed `fetch --peer` gets the first community's archives from the seeder, both run as
    printed from a shell without the virtualenv."""
    run = subprocess.run(_argv(printed["libp2p_store_query"] + " --json"), capture_output=True,
                         text=True, timeout=120)  # fmt: skip
    assert run.returncode == 0, run.stderr[-3000:]
    params = dict(parse_qsl(urlsplit(url).query))
    expected = _stored(out / "store.sqlite3", params["pubsubTopic"], params["contentTopics"])
    page = json.loads(run.stdout)["pages"][0]
    assert page["statusCode"] == 200 and page["messages"]
    assert {m["messageHash"] for m in page["messages"]} <= set(expected)
    fetched = subprocess.run(_argv(printed["fetch"] + " --json --quiet"), capture_output=True,
                             text=True, timeout=180)  # fmt: skip
    assert fetched.returncode == 0, fetched.stderr[-3000:]
    assert json.loads(fetched.stdout)["archives"]
    assert (out / "fetched" / "messages.jsonl").stat().st_size > 0


async def _check_magnets(http: aiohttp.ClientSession, rest: str, out: Path,
                         printed: dict[str, Any]) -> None:  # fmt: skip
    """The printed magnet links are the bridge's archive links, and it seeds them."""
    report = json.loads((out / "report.json").read_text())
    migrated = {c["community"]: c["magnet_uri"] for c in report["communities"]}
    assert printed["magnet_links"] == migrated and len(migrated) == 2
    assert sorted(printed["listed_magnets"]) == sorted(migrated.values())
    token = (out / "admin.token").read_text().strip()
    headers = {"Authorization": f"Bearer {token}"}
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        async with http.get(f"{rest}/admin/v1/communities", headers=headers) as response:
            assert response.status == 200
            communities = (await response.json())["communities"]
        if all(c["seeding"] for c in communities):
            break
        await asyncio.sleep(0.1)
    assert all(c["seeding"] for c in communities), f"not all seeding after 90 s: {communities}"
    assert {c["id"]: c["magnetUri"] for c in communities} == migrated
    for c in communities:
        assert c["seeding"]["infoHash"] in c["magnetUri"]  # magnet:?xt=urn:btih:<info hash>


async def _check_status_page(tmp_path: Path, rest: str, out: Path) -> None:
    """``GET /`` as a browser renders it: every community of the demo's config, by name and
    id, with its latest archive link (the one the migration published)."""
    config = tomllib.loads((out / "bridge.toml").read_text())
    report = json.loads((out / "report.json").read_text())
    links = {c["community"]: c["magnet_uri"] for c in report["communities"]}
    check_png(await screenshot(tmp_path, rest + "/", "demo-status.png"), WINDOW)
    text = text_of((await chromium(tmp_path, rest + "/", "--dump-dom")).decode())
    assert len(config["community"]) == 2
    for community in config["community"]:
        for value in (community["name"], community["id"], links[community["id"]]):
            assert value in text, value


async def _check_viewer(http: aiohttp.ClientSession, url: str, out: Path, log: Path) -> None:
    """The history pages the demo prints: the first community's channels with their
    messages (indexed from the store when the bridge starts), named as its description
    names them, with the viewer's headers."""
    config = tomllib.loads((out / "bridge.toml").read_text())
    assert config["viewer"] == {"enabled": True}
    first = config["community"][0]
    assert url.endswith(f"/history/{first['id']}/")
    deadline = time.monotonic() + 60
    while True:
        async with http.get(url + "index.json") as response:
            answer = f"{response.status} {(await response.text())[:500]}"
            document = await response.json() if response.status == 200 else None
        if document and document["community"]["messages"] > 0:
            break
        assert time.monotonic() < deadline, (
            f"the viewer did not index the demo's store; last answer {answer}; the bridge's"
            f" log ends:\n{log.read_text(errors='replace')[-6000:]}"
        )
        await asyncio.sleep(0.5)
    assert document["community"]["name"] == first["name"]
    assert [c["name"] for c in document["channels"]] == ["general", "dev", "random"][
        : len(document["channels"])
    ]
    assert all(c["messages"] > 0 for c in document["channels"])
    async with http.get(url) as response:
        assert response.status == 200 and "noindex" in response.headers["X-Robots-Tag"]
        assert "script-src" not in response.headers["Content-Security-Policy"]


async def test_demo_then_serve_answers_both_sides(spark, tmp_path: Path, capsys) -> None:
    out = tmp_path / "demo"
    capsys.readouterr()
    assert main(["demo", "--out", str(out), *DEMO_ARGS]) == 0
    text = capsys.readouterr().out
    printed = _printed(text)
    (viewer,) = [line.strip() for line in text.splitlines() if "/history/0x" in line]
    assert printed["command"] == shlex.join(
        [*_cli(), "serve", "--config", str(out / "bridge.toml")]
    )
    rest = urlsplit(shlex.split(printed["store_query"])[-1])
    rest_root = f"{rest.scheme}://{rest.netloc}"
    assert rest.hostname == "127.0.0.1"
    log = tmp_path / "serve.log"
    with _serving(printed["command"], log) as proc:
        async with aiohttp.ClientSession() as http:
            await _wait_healthy(http, rest_root, proc, log)
            async with http.get(f"{rest_root}/debug/v1/info") as response:
                assert (await response.json())["enode"] == printed["enode"]
            await _check_rest(http, rest.geturl(), out / "store.sqlite3")
            await asyncio.to_thread(
                _check_v1_pull, printed["v1_pull"], rest.geturl(), out / "store.sqlite3"
            )
            await _check_magnets(http, rest_root, out, printed)
            await asyncio.to_thread(_check_libp2p_and_fetch, printed, rest.geturl(), out)
            await _check_status_page(tmp_path, rest_root, out)
            await _check_viewer(http, viewer, out, log)

    # Rerun: same folder, JSON output; the token, node key (enode) and free ports are kept.
    token = (out / "admin.token").read_text()
    assert main(["demo", "--out", str(out), *DEMO_ARGS, "--json"]) == 0
    serve = json.loads(capsys.readouterr().out)["serve"]
    assert (out / "admin.token").read_text() == token
    for key in ("command", "store_query", "enode", "v1_pull", "libp2p_store_query", "fetch",
                "magnet_links"):
        assert serve[key] == printed[key], key
