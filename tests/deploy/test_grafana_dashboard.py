"""deploy/grafana's dashboard names only metrics the bridge exports: a running bridge (REST
queries, a v1 peer, an archive run with seeding, a history pull, one refusal on each side)
is scraped at ``GET /metrics`` and every metric name in every panel's PromQL and every
variable query must be there. The checker itself is tested on made-up expressions, so a
dashboard that names a missing metric is known to fail."""

from __future__ import annotations

import json
import re
import time
import uuid
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from tests.bridge.support import FakeNwaku, bridge_config
from tests.conftest import REPO_ROOT
from tests.helpers import (
    start_until_archive_published,
    store_channel_messages,
    stored_channel_message,
    wait_until,
)
from waku_legacy.bridge.clock import ManualClock
from waku_legacy.bridge.service import BridgeService
from waku_legacy.crypto.secp256k1 import generate_private_key, private_key_from_bytes
from waku_legacy.identity.topics import CommunityId, chat_topic
from waku_legacy.mailserver_compat.waku_peer import connect
from waku_legacy.mailserver_compat.wire.pow import seal

DASHBOARD = REPO_ROOT / "deploy" / "grafana" / "waku-legacy-bridge.json"
DAY = 86_400

# -- the exposition format -------------------------------------------------------------------

SUFFIXES = {"histogram": ("_bucket", "_sum", "_count"), "summary": ("_sum", "_count")}
SAMPLE_NAME = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{| )")


def declared_names(exposition: str) -> set[str]:
    """Every series name the ``# TYPE`` lines declare (a histogram's ``_bucket``, ``_sum``
    and ``_count``), whether or not it has a sample yet."""
    names = set()
    for line in exposition.splitlines():
        if line.startswith("# TYPE "):
            _, _, name, kind = line.split(" ", 3)
            names.add(name)
            names.update(name + suffix for suffix in SUFFIXES.get(kind, ()))
    return names


def sampled_names(exposition: str) -> set[str]:
    """The series names that have at least one sample."""
    found = (SAMPLE_NAME.match(line) for line in exposition.splitlines() if line[:1] != "#")
    return {match.group(1) for match in found if match}


# -- PromQL -----------------------------------------------------------------------------------

STRING = re.compile(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'|`[^`]*`')
MATCHERS = re.compile(r"\{[^{}]*\}")
RANGE = re.compile(r"\[[^\[\]]*\]")
GROUPING = re.compile(r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^()]*\)")
VARIABLE = re.compile(r"\$\{[^}]*\}|\$\w+")
IDENTIFIER = re.compile(r"(?<![\w.:])([a-zA-Z_:][a-zA-Z0-9_:]*)(\s*\()?")
KEYWORDS = {
    "by", "without", "on", "ignoring", "group_left", "group_right", "bool",
    "and", "or", "unless", "offset", "inf", "nan",
}  # fmt: skip


def promql_metric_names(expr: str) -> set[str]:
    """The metric names an expression selects: identifiers that are not functions or
    aggregations (followed by ``(``), keywords, label names (inside ``{}`` or a grouping
    clause), numbers, durations or Grafana variables."""
    text = STRING.sub('""', expr)
    text = MATCHERS.sub(" ", text)
    text = RANGE.sub(" ", text)
    text = GROUPING.sub(" ", text)
    text = VARIABLE.sub(" ", text)
    names = set()
    for match in IDENTIFIER.finditer(text):
        name, call = match.groups()
        if call is None and name.lower() not in KEYWORDS:
            names.add(name)
    return names


LABEL_VALUES = re.compile(r"^\s*label_values\((.*),\s*[a-zA-Z_]\w*\s*\)\s*$", re.S)


def dashboard_expressions(dashboard: dict[str, Any]) -> list[tuple[str, str]]:
    """(where, PromQL) for every panel target and every query variable; a variable's
    ``label_values(selector, label)`` counts as its selector."""
    found = []
    for panel in all_panels(dashboard):
        for target in panel.get("targets", []):
            found.append((f"panel {panel['id']} {panel['title']!r}", target["expr"]))
    for variable in dashboard.get("templating", {}).get("list", []):
        if variable.get("type") != "query":
            continue
        query = variable["query"]
        query = query["query"] if isinstance(query, dict) else query
        selector = LABEL_VALUES.match(query)
        found.append((f"variable ${variable['name']}", selector.group(1) if selector else query))
    return found


def all_panels(dashboard: dict[str, Any]) -> list[dict[str, Any]]:
    """Panels, with those inside collapsed rows, rows excluded."""
    out = []
    for panel in dashboard["panels"]:
        if panel["type"] == "row":
            out += panel.get("panels", [])
        else:
            out.append(panel)
    return out


def unknown_metrics(dashboard: dict[str, Any], exported: set[str]) -> list[str]:
    """One line per (place, metric name) the dashboard uses and the bridge does not export,
    and per expression that selects no metric at all (a parsing slip would hide names)."""
    problems = []
    for where, expr in dashboard_expressions(dashboard):
        names = promql_metric_names(expr)
        if not names:
            problems.append(f"{where}: no metric in {expr!r}")
        problems += [f"{where}: {name} is not exported" for name in sorted(names - exported)]
    return problems


def structure_problems(dashboard: dict[str, Any]) -> list[str]:
    """What would stop Grafana importing the dashboard or leave a panel empty."""
    problems = []
    if not isinstance(dashboard.get("schemaVersion"), int) or dashboard["schemaVersion"] < 36:
        problems.append("schemaVersion missing or older than Grafana 9")
    variables = {v["name"]: v for v in dashboard.get("templating", {}).get("list", [])}
    if variables.get("datasource", {}).get("type") != "datasource":
        problems.append("no $datasource variable")
    problems += [f"no ${name} variable" for name in ("job", "instance") if name not in variables]
    ids = [p["id"] for p in dashboard["panels"]] + [
        p["id"] for row in dashboard["panels"] for p in row.get("panels", [])
    ]
    problems += [f"panel id {i} used twice" for i in sorted({i for i in ids if ids.count(i) > 1})]
    for panel in dashboard["panels"] + all_panels(dashboard):
        where = f"panel {panel.get('id')} {panel.get('title')!r}"
        if not {"h", "w", "x", "y"} <= set(panel.get("gridPos", {})):
            problems.append(f"{where}: gridPos incomplete")
        if panel.get("type") == "row":
            continue
        if panel.get("datasource", {}).get("uid") != "${datasource}":
            problems.append(f"{where}: datasource is not $datasource")
        if not panel.get("targets") or not all(t.get("expr") for t in panel["targets"]):
            problems.append(f"{where}: no targets or an empty expression")
        for target in panel.get("targets", []):
            if "$job" not in target.get("expr", "") or "$instance" not in target["expr"]:
                problems.append(f"{where}: {target['refId']} ignores $job or $instance")
    return problems


def load_dashboard() -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(DASHBOARD.read_text())
    return loaded


# -- the checker, on made-up input ------------------------------------------------------------


def test_promql_metric_names_skips_functions_labels_and_variables():
    expr = (
        'histogram_quantile(0.95, sum by (route, le) (rate(a_seconds_bucket{job=~"$job",'
        'route!="/x{y}"}[$__rate_interval]))) / on(instance) group_left(node) '
        "sum without (kind) (b_total offset 5m) > bool 0.5e3 or vector(1) and "
        "time() - c_timestamp_seconds{} unless absent(d_up)"
    )
    assert promql_metric_names(expr) == {"a_seconds_bucket", "b_total", "c_timestamp_seconds",
                                         "d_up"}  # fmt: skip
    assert promql_metric_names("sum(rate(x:recorded:rate5m[1h]))") == {"x:recorded:rate5m"}


def test_exposition_names_cover_histogram_series_without_samples():
    text = (
        "# HELP a_seconds Latency\n# TYPE a_seconds histogram\n"
        "# HELP b_total Requests\n# TYPE b_total counter\n"
        'b_total{route="/a b"} 3\n'
    )
    assert declared_names(text) == {"a_seconds", "a_seconds_bucket", "a_seconds_sum",
                                    "a_seconds_count", "b_total"}  # fmt: skip
    assert sampled_names(text) == {"b_total"}


def test_checker_fails_on_a_panel_naming_a_missing_metric():
    dashboard = load_dashboard()
    exported = set().union(*(promql_metric_names(e) for _, e in dashboard_expressions(dashboard)))
    assert unknown_metrics(dashboard, exported) == []
    panel = all_panels(dashboard)[0]
    missing = 'rate(waku_legacy_no_such_total{job=~"$job",instance=~"$instance"}[5m])'
    panel["targets"].append({"refId": "Z", "expr": missing + " * vector(1)"})
    assert unknown_metrics(dashboard, exported) == [
        f"panel {panel['id']} {panel['title']!r}: waku_legacy_no_such_total is not exported"
    ]
    panel["targets"][-1]["expr"] = "vector(1)"
    assert unknown_metrics(dashboard, exported) == [
        f"panel {panel['id']} {panel['title']!r}: no metric in 'vector(1)'"
    ]


def test_checker_fails_on_a_broken_dashboard():
    dashboard = load_dashboard()
    panels = all_panels(dashboard)
    panels[1]["id"] = panels[0]["id"]
    del panels[2]["datasource"]
    panels[3]["targets"] = []
    del panels[4]["gridPos"]["y"]
    problems = structure_problems(dashboard)
    assert f"panel id {panels[0]['id']} used twice" in problems
    assert any("datasource is not $datasource" in p for p in problems)
    assert any("no targets" in p for p in problems)
    assert any("gridPos incomplete" in p for p in problems)


def test_dashboard_is_an_importable_grafana_dashboard():
    dashboard = load_dashboard()
    assert structure_problems(dashboard) == []
    assert dashboard["uid"] and dashboard["title"] and all_panels(dashboard)


# -- against a running bridge -----------------------------------------------------------------

# counted only when the bridge drops a message (a repeat, a loop, ...), not provoked here
ONLY_AFTER_TROUBLE = {"waku_legacy_envelopes_dropped_total"}


@pytest.mark.network
@pytest.mark.torrent
async def test_every_dashboard_metric_is_exported_by_a_working_bridge(tmp_path):
    exposition = await _scrape_a_working_bridge(tmp_path)
    dashboard = load_dashboard()
    assert unknown_metrics(dashboard, declared_names(exposition)) == []
    used = set().union(*(promql_metric_names(e) for _, e in dashboard_expressions(dashboard)))
    assert sorted(used - sampled_names(exposition) - ONLY_AFTER_TROUBLE) == []
    # labelled series from each kind of work the bridge did (a regular expression a line
    # of the exposition matches)
    for series in (
        r'waku_legacy_http_request_duration_seconds_count\{route="/store/v3/messages"\} 1',
        r'waku_legacy_http_refused_total\{reason="head_too_long"\} 1',
        r'waku_legacy_envelopes_bridged_total\{direction="v1_to_v2"\} 1',
        r'waku_legacy_v1_refused_total\{kind="live",reason="expired"\} 1',
        r"waku_legacy_v1_peers 1",
        r'waku_legacy_archive_runs_total\{community="0x\w+",result="ok"\} 1',
        r'waku_legacy_archive_run_duration_seconds_count\{community="0x\w+"\} 1',
        r'waku_legacy_archive_last_success_timestamp_seconds\{community="0x\w+"\} 1\d{9}',
        r'waku_legacy_torrent_uploaded_bytes\{community="0x\w+"\} \d+',
        r'waku_legacy_history_pages_total\{node="http://[^"]+"\} 1',
        r'waku_legacy_history_last_success_timestamp_seconds\{node="http://[^"]+"\} 1\d{9}',
    ):
        assert any(re.fullmatch(series, line) for line in exposition.splitlines()), series


async def _scrape_a_working_bridge(tmp_path: Path) -> str:
    """Start a bridge with one community (archive and seeding), v1, relay and history on a
    fake nwaku; make it work; the text of ``GET /metrics``."""
    key = private_key_from_bytes(bytes.fromhex("4d" * 32))
    community = CommunityId(key.public_key.format(compressed=True))
    channel = str(uuid.UUID(int=16))
    pubsub = "/waku/2/rs/16/128"
    (tmp_path / "c.key").write_text(key.secret.hex())
    url = f"sqlite:///{tmp_path}/store.sqlite3"
    now = int(time.time())
    store_channel_messages(url, community, channel, now - 2 * DAY, 3, pubsub)
    on_node = stored_channel_message(community, channel, pubsub, expiry=now - 60, text=b"v2")
    nwaku = await FakeNwaku([on_node]).start()
    config = bridge_config(
        tmp_path, url, relay={"url": nwaku.url},
        v1={"listen": "127.0.0.1:0", "node_key_file": str(tmp_path / "nodekey"),
            "rate_limit": 0, "min_pow": 0.001},
        history={"nodes": [nwaku.url], "interval": "1h", "pubsub_topics": [pubsub]},
        archive={"archive_dir": str(tmp_path / "a"), "torrent_dir": str(tmp_path / "t"),
                 "seed_listen": "127.0.0.1:0", "trackers": False, "utp": False},
        community=[{"id": str(community), "channels": [channel], "shard": 128,
                    "key_file": "c.key"}],
    )  # fmt: skip
    service = BridgeService(config, clock=ManualClock(now))
    try:
        await start_until_archive_published(service, community)
        assert service.history is not None and service.mailserver is not None
        await wait_until(lambda: service.history.last_reports, what="a history pull")
        peer = await connect(service.mailserver.enode, generate_private_key())
        topic = chat_topic(community.channel_chat_id(channel))
        fresh = seal(int(time.time()) + 30, 30, topic, b"live", 0.002)
        expired = seal(int(time.time()) - 30, 30, topic, b"late", 0.002)
        await peer.send_envelopes([fresh.encode(), expired.encode()])
        await wait_until(lambda: service.mailserver.stats["live_rejected"], what="a refusal")
        async with aiohttp.ClientSession(f"http://127.0.0.1:{service.rest_port}") as http:
            async with http.get("/store/v3/messages", params={"pubsubTopic": pubsub}) as answer:
                assert answer.status == 200
            async with http.get("/health", headers={"X-Long": "x" * 70_000}) as answer:
                assert answer.status == 431
            async with http.get("/metrics") as answer:
                assert answer.status == 200
                exposition = await answer.text()
        await peer.disconnect()
        return exposition
    finally:
        await service.stop()
        await nwaku.stop()
