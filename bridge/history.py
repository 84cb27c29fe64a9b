"""Keeping history complete: pull the last ``window`` (30 days) from v2 store nodes.

The paging itself is :class:`~waku_legacy.store.rest_client.StorePager`, sans-IO and shared
with the migration (query strings, both cursor encodings, loop guard); this module is its
asyncio adapter (aiohttp, retries with backoff, 429 slower) plus the bridge's bookkeeping.

On start and every ``interval``, for each configured node and pubsub topic, page through
``GET /store/v3/messages`` (ascending, ``includeData``) from where the last complete pull
ended (minus an overlap, for messages that arrived late) -- or from ``now - window`` the
first time or after a long downtime -- up to now. Each page's messages are hash-checked
(a node that returns messages whose hash does not match their contents is not trusted for
them: counted and dropped), the ones the store lacks are inserted and handed to the live
bridge (which offers recent v1-topic messages to v1 peers).

Resumable: after each stored page the position (window and cursor) is written to a state
file (temp file, fsync, rename) per node and topic; a restart continues the interrupted pull
from its cursor instead of starting over, as long as its window is still inside the
retention window.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import aiohttp

from waku_legacy.bridge.clock import Clock
from waku_legacy.bridge.config import HistoryConfig
from waku_legacy.bridge.http_body import ResponseTooLarge, read_body, read_text
from waku_legacy.bridge.live import LiveBridge
from waku_legacy.bridge.logs import fields
from waku_legacy.bridge.metrics import BridgeMetrics
from waku_legacy.bridge.store_threads import StoreAccess
from waku_legacy.durable import write_atomic
from waku_legacy.store import MessageStore, StoredMessage, StoreQuery
from waku_legacy.store.rest_client import MAX_RESPONSE_BYTES, StorePager, StoreRestError
from waku_legacy.store.rest_json import HashMismatch, RestJsonError, parse_key_value

__all__ = ["HistoryPuller", "PullReport"]

log = logging.getLogger("waku_legacy.bridge.history")

NS = 1_000_000_000
OVERLAP = 3600  # seconds re-read before the last complete end: late arrivals at the node
ERROR_BODY_BYTES = 64 * 1024  # of a non-200 answer, only the start is shown


@dataclass(slots=True)
class PullReport:
    node: str
    pubsub_topic: str
    start: int  # ns
    end: int  # ns
    resumed: bool = False
    pages: int = 0
    messages: int = 0
    new: int = 0
    bad_hashes: int = 0
    malformed: int = 0
    offered_v1: int = 0
    error: str | None = None

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(slots=True)
class PullState:
    start: int | None = None  # window of the pull in progress (ns)
    end: int | None = None
    cursor: str | None = None  # the last stored page's cursor, as the node sent it
    complete_end: int | None = None  # end of the last finished pull (ns)
    extra: dict[str, Any] = field(default_factory=dict)


def _missing(store: MessageStore, hashes: list[bytes]) -> set[bytes]:
    found: set[bytes] = set()
    for i in range(0, len(hashes), 100):
        chunk = hashes[i : i + 100]
        page = store.query(StoreQuery(hashes=chunk, include_data=False, limit=len(chunk)))
        found.update(m.message_hash for m in page.messages)
    return set(hashes) - found


class HistoryPuller:
    def __init__(
        self,
        config: HistoryConfig,
        *,
        store: StoreAccess,
        metrics: BridgeMetrics,
        clock: Clock,
        session: aiohttp.ClientSession,
        pubsub_topics: list[str],
        state_dir: Path,
        live: LiveBridge | None = None,
        backoff: float = 0.5,
        max_response_bytes: int = MAX_RESPONSE_BYTES,
    ) -> None:
        self.config = config
        self.store = store
        self.metrics = metrics
        self.clock = clock
        self.session = session
        self.pubsub_topics = pubsub_topics
        self.state_dir = state_dir
        self.live = live
        self.backoff = backoff
        self.max_response_bytes = max_response_bytes
        self.last_reports: list[PullReport] = []
        self._lock = asyncio.Lock()
        self._pulling: dict[tuple[str, str], asyncio.Lock] = {}

    # -- state files ------------------------------------------------------------------------

    def _state_path(self, node: str, topic: str) -> Path:
        key = hashlib.sha256(f"{node}\n{topic}".encode()).hexdigest()[:16]
        return self.state_dir / f"history-{key}.json"

    def _load(self, node: str, topic: str) -> PullState:
        try:
            data = json.loads(self._state_path(node, topic).read_text())
        except FileNotFoundError:
            return PullState()
        except (OSError, ValueError):
            log.warning("unreadable history state; starting over", extra=fields(node=node))
            return PullState()
        state = PullState()
        for key in ("start", "end", "complete_end"):
            value = data.get(key)
            setattr(state, key, value if isinstance(value, int) else None)
        cursor = data.get("cursor")
        state.cursor = cursor if isinstance(cursor, str) else None
        return state

    def _save(self, node: str, topic: str, state: PullState) -> None:
        self.state_dir.mkdir(parents=True, exist_ok=True)
        body = {"node": node, "pubsub_topic": topic, **asdict(state)}
        body.pop("extra", None)
        write_atomic(
            self._state_path(node, topic),
            (json.dumps(body, sort_keys=True) + "\n").encode(),
            step="history-state",
        )

    # -- pulling ----------------------------------------------------------------------------

    async def pull_all(self) -> list[PullReport]:
        async with self._lock:
            reports = []
            for node in self.config.nodes:
                for topic in self.pubsub_topics:
                    reports.append(await self.pull(node, topic))
            self.last_reports = reports
            return reports

    async def pull(self, node: str, topic: str) -> PullReport:
        """One pull of ``topic`` from ``node`` (pulls of the same pair never overlap)."""
        lock = self._pulling.setdefault((node, topic), asyncio.Lock())
        async with lock:
            return await self._pull(node, topic)

    async def _pull(self, node: str, topic: str) -> PullReport:
        now_ns = int(self.clock.time() * NS)
        window_start = now_ns - int(self.config.window * NS)
        state = await asyncio.to_thread(self._load, node, topic)
        resumed = state.start is not None and state.end is not None and state.start >= window_start
        if resumed:
            assert state.start is not None and state.end is not None
            start, end = state.start, state.end
            cursor = state.cursor
        else:
            start = window_start
            if state.complete_end is not None:
                start = max(window_start, state.complete_end - OVERLAP * NS)
            end, cursor = now_ns, None
            state.start, state.end, state.cursor = start, end, None
            await asyncio.to_thread(self._save, node, topic, state)
        report = PullReport(node, topic, start, end, resumed=resumed)
        pager = StorePager(
            pubsub_topic=topic, start_time=start, end_time=end,
            page_size=self.config.page_size, cursor=cursor,
        )  # fmt: skip
        try:
            while not pager.done:
                body = await self._fetch(node, pager.request_path())
                page = pager.on_response(body)
                await self._take_page(node, page.messages, report)
                state.cursor = pager.cursor
                await asyncio.to_thread(self._save, node, topic, state)
        except StoreRestError as exc:
            report.error = str(exc)
            self.metrics.history_pulls.inc(1, node, "error")
            log.warning("history pull failed; will resume", extra=fields(**report.to_json()))
            return report
        state.start = state.end = state.cursor = None
        state.complete_end = end
        await asyncio.to_thread(self._save, node, topic, state)
        self.metrics.history_pulls.inc(1, node, "ok")
        self.metrics.history_last_success.set(self.clock.time(), node)
        log.info("history pulled", extra=fields(**report.to_json()))
        return report

    async def _fetch(self, node: str, path: str) -> bytes:
        """GET one page with retries: connection errors, timeouts, 5xx and 429 (slower)."""
        url = node.rstrip("/") + path
        timeout = aiohttp.ClientTimeout(total=self.config.timeout)
        problem = ""
        for attempt in range(self.config.retries + 1):
            if attempt:
                slower = 4 if problem.startswith("HTTP 429") else 1
                await asyncio.sleep(self.backoff * 2 ** (attempt - 1) * slower)
            try:
                async with self.session.get(url, timeout=timeout) as response:
                    if response.status == 200:
                        try:
                            return await read_body(
                                response, self.max_response_bytes, f"GET {url[:200]}"
                            )
                        except ResponseTooLarge as exc:  # the same page again: not retried
                            raise StoreRestError(str(exc)) from None
                    text = await read_text(response, ERROR_BODY_BYTES, "error answer")
                    problem = f"HTTP {response.status}: {text[:200]}"
                    if 400 <= response.status < 500 and response.status != 429:
                        break  # the node refuses this query; retrying will not help
            except (aiohttp.ClientError, TimeoutError, OSError) as exc:
                problem = f"{type(exc).__name__}: {exc}"
        raise StoreRestError(f"GET {url[:200]} failed: {problem.strip()}")

    async def _take_page(
        self, node: str, entries: list[dict[str, Any]], report: PullReport
    ) -> None:
        report.pages += 1
        self.metrics.history_pages.inc(1, node)
        rows: list[StoredMessage] = []
        for n, raw in enumerate(entries):
            report.messages += 1
            try:
                entry = parse_key_value(raw, f"{node} page {report.pages} entry {n}")
                if entry.message is not None and entry.message.ephemeral:
                    self.metrics.history_messages.inc(1, node, "ephemeral")
                    continue
                rows.append(entry.stored())
            except HashMismatch:
                report.bad_hashes += 1
                self.metrics.history_messages.inc(1, node, "bad_hash")
            except RestJsonError as exc:
                report.malformed += 1
                self.metrics.history_messages.inc(1, node, "malformed")
                log.debug("malformed store entry", extra=fields(node=node, error=str(exc)))
        if not rows:
            return
        missing = await self.store.read(_missing, [r.message_hash for r in rows])
        new_rows = [r for r in rows if r.message_hash in missing]
        if new_rows:
            report.new += await self.store.insert(new_rows)
            self.metrics.history_messages.inc(len(new_rows), node, "new")
            if self.live is not None:
                report.offered_v1 += await self.live.on_v2_messages(new_rows)
        self.metrics.history_messages.inc(len(rows) - len(new_rows), node, "known")

    async def run(self) -> None:
        """Pull now, then every ``interval`` (errors are logged; the loop keeps going)."""
        while True:
            try:
                await self.pull_all()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.error("history pull crashed", exc_info=True)
            await self.clock.sleep_until(self.clock.time() + self.config.interval)
