"""The history viewer (``[viewer]``): a community's old channels as web pages, on the bridge's
HTTP app under ``path_prefix`` (default ``/history``).

    GET {prefix}/                                   the communities shown (index.json: JSON)
    GET {prefix}/static/history.css                 the pages' one stylesheet
    GET {prefix}/{community}/                       channels, counts, date ranges, archive link
    GET {prefix}/{community}/{channel}/             the channel's days; ?date=YYYY-MM-DD jumps
    GET {prefix}/{community}/{channel}/{YYYY-MM-DD} one UTC day of messages (.json: JSON)
    GET {prefix}/{community}/m/{message id}         a message's permalink (.json: JSON)
    GET {prefix}/{community}/search?q=…&page=N      full-text search (search.json: JSON)
    GET {prefix}/{community}/image/{message id}     an image message's bytes (sniffed)

Policy (the config's defaults): messages of authors banned in the newest signed description are
hidden (``hide_banned``); the owner's takedown list (``takedown_file``: message ids and author
keys, TOML, JSON or one per line) is re-read when its modification time changes, without a
restart; pages say ``noindex`` (robots meta and ``X-Robots-Tag``) unless
``allow_search_engines``.

Every answer, errors included, carries a Content-Security-Policy that allows no script at all
and styles only from this origin, ``X-Content-Type-Options: nosniff`` and ``Referrer-Policy:
no-referrer``. Query values are bounded and checked (dates, page numbers, ids, the search
query's length); a bad one is a 400 naming it. The reader's calls (database reads) run on one
thread of their own, never on the event loop.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import functools
import json
import logging
import re
import time
import tomllib
from collections.abc import Awaitable, Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from aiohttp import web

from waku_legacy.bridge.lifecycle import READY, Component, cancel_task
from waku_legacy.bridge.logs import fields
from waku_legacy.errors import ConfigError, WakuLegacyError
from waku_legacy.files import read_small_text
from waku_legacy.history.model import CommunitySummary, HistoryReader, ViewPolicy
from waku_legacy.history.web import render
from waku_legacy.history.web.images import image_headers, sniff_image

__all__ = [
    "CONTENT_SECURITY_POLICY",
    "MAX_QUERY_CHARS",
    "TakedownList",
    "Viewer",
    "ViewerComponent",
    "ViewerSettings",
    "parse_takedown",
]

log = logging.getLogger("waku_legacy.bridge.viewer")

CONTENT_SECURITY_POLICY = (
    "default-src 'none'; style-src 'self'; img-src 'self'; form-action 'self'; "
    "base-uri 'none'; frame-ancestors 'none'"
)
MAX_QUERY_CHARS = 200  # a search query's length
MAX_PAGE = 1000  # search result pages
PAGE_SIZE = 25  # search results per page
MAX_TAKEDOWN_BYTES = 16 * 1024 * 1024
MIN_YEAR, MAX_YEAR = 2015, 2100  # Status did not exist before; nothing is dated after

COMMUNITY_RE = re.compile(r"0x0[23][0-9a-f]{64}")
CHANNEL_RE = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
MESSAGE_RE = re.compile(r"0x[0-9a-f]{64}")
AUTHOR_RE = re.compile(r"0x04[0-9a-f]{128}")
DATE_RE = re.compile(r"\d{4}-\d{2}-\d{2}")

if TYPE_CHECKING:
    from waku_legacy.bridge.archiver import CommunityArchiver
    from waku_legacy.bridge.config import BridgeConfig
    from waku_legacy.bridge.live import LiveBridge
    from waku_legacy.history.events import Undecodable
    from waku_legacy.history.index import HistoryIndex
    from waku_legacy.history.sources import WakuRow
    from waku_legacy.store import StoredMessage

T = TypeVar("T")
INDEX_INTERVAL = 2.0  # live rows are indexed in batches this often; archive runs noticed so
# After an archive run the store is read again from the last pass's time minus this: history
# pulls store messages up to [history] window (30 days by default) old.
REREAD_MARGIN_NS = 31 * 86_400 * 1_000_000_000


class ViewerError(WakuLegacyError):
    """A request the viewer answers with an error page (``status``, a reason to act on)."""

    def __init__(self, status: int, reason: str) -> None:
        super().__init__(reason)
        self.status = status
        self.reason = reason


# -- the takedown list --------------------------------------------------------------------------


def parse_takedown(text: str, where: str) -> tuple[frozenset[str], frozenset[str]]:
    """(message ids, author keys) from a takedown file: a JSON list or ``{"messages": [...],
    "authors": [...]}``, the same as TOML (``messages = [...]``, ``authors = [...]``), or one
    entry per line (``#`` comments). Each entry is a message id (``0x`` + 64 hex) or an
    author key (``0x04`` + 128 hex); anything else is a ConfigError naming it."""
    stripped = text.strip()
    entries: list[Any]
    if stripped.startswith(("[", "{")):
        try:
            data = json.loads(stripped)
        except json.JSONDecodeError as exc:
            raise ConfigError(f"{where}: not valid JSON: {exc}") from None
        entries = _listed(data, where)
    elif re.search(r"^\s*(messages|authors)\s*=", stripped, re.MULTILINE):
        try:
            entries = _listed(tomllib.loads(stripped), where)
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError(f"{where}: not valid TOML: {exc}") from None
    else:
        entries = [line.split("#", 1)[0].strip() for line in text.splitlines()]
        entries = [e for e in entries if e]
    ids: set[str] = set()
    authors: set[str] = set()
    for entry in entries:
        value = str(entry).strip().lower() if isinstance(entry, str) else None
        if value is not None and AUTHOR_RE.fullmatch(value):
            authors.add(value)
        elif value is not None and MESSAGE_RE.fullmatch(value):
            ids.add(value)
        else:
            raise ConfigError(
                f"{where}: {entry!r} is neither a message id (0x + 64 hex) nor an author key "
                "(0x04 + 128 hex)"
            )
    return frozenset(ids), frozenset(authors)


def _listed(data: Any, where: str) -> list[Any]:
    if isinstance(data, list):
        return data
    if isinstance(data, dict):
        unknown = set(data) - {"messages", "authors"}
        if unknown:
            raise ConfigError(f"{where}: unknown keys {sorted(unknown)} (messages, authors)")
        out: list[Any] = []
        for name in ("messages", "authors"):
            value = data.get(name, [])
            if not isinstance(value, list):
                raise ConfigError(f"{where}: '{name}' must be a list")
            out += value
        return out
    raise ConfigError(f"{where}: a list of message ids and author keys was expected")


class TakedownList:
    """The owner's takedown file, re-read when its modification time (or size) changes.

    A file that no longer parses keeps the last good list in force (and is logged): an
    owner's typo must not bring taken-down messages back."""

    def __init__(self, path: str | None) -> None:
        self.path = Path(path) if path else None
        self._stamp: tuple[int, int] | None = None
        self.ids: frozenset[str] = frozenset()
        self.authors: frozenset[str] = frozenset()
        self.error: str | None = None
        if self.path is not None:
            self.refresh(strict=True)

    def refresh(self, *, strict: bool = False) -> bool:
        """Re-read the file when it changed; True when the list changed."""
        if self.path is None:
            return False
        where = f"[viewer] takedown_file {self.path}"
        try:
            status = self.path.stat()
            stamp = (status.st_mtime_ns, status.st_size)
        except FileNotFoundError:
            stamp = (0, -1)  # no file: nothing taken down (the owner may create it later)
        except OSError as exc:
            if strict:
                raise ConfigError(f"{where}: {exc.strerror or exc}") from None
            log.error("takedown file not reloaded", extra=fields(error=str(exc)))
            return False
        if stamp == self._stamp:
            return False
        self._stamp = stamp
        try:
            if stamp[1] < 0:
                ids, authors = frozenset[str](), frozenset[str]()
            else:
                text = read_small_text(self.path, what=where, max_size=MAX_TAKEDOWN_BYTES)
                ids, authors = parse_takedown(text, where)
        except WakuLegacyError as exc:
            if strict:
                raise
            self.error = str(exc)
            log.error("takedown file not reloaded", extra=fields(error=str(exc)))
            return False
        changed = (ids, authors) != (self.ids, self.authors)
        self.ids, self.authors, self.error = ids, authors, None
        if changed:
            log.info(
                "takedown list loaded",
                extra=fields(path=str(self.path), messages=len(ids), authors=len(authors)),
            )
        return changed


# -- the viewer ---------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ViewerSettings:
    """What the viewer needs of ``[viewer]`` (bridge.config.ViewerConfig)."""

    path_prefix: str = "/history"
    communities: frozenset[str] | None = None  # None: every community the reader has
    hide_banned: bool = True
    takedown_file: str | None = None
    allow_search_engines: bool = False


def _database_errors() -> tuple[type[Exception], ...]:
    import sqlite3

    import psycopg

    return (sqlite3.OperationalError, psycopg.OperationalError)


_DATABASE_ERRORS = _database_errors()

ReaderFactory = Callable[[ViewPolicy], HistoryReader]


class Viewer:
    """The viewer's aiohttp sub-application over a reader (one per policy)."""

    def __init__(
        self, settings: ViewerSettings, reader_factory: ReaderFactory,
        reader_reset: Callable[[], None] | None = None,
    ) -> None:  # fmt: skip
        self.settings = settings
        self.prefix = settings.path_prefix.rstrip("/")
        self.links = render.ServerLinks(self.prefix)
        self.takedown = TakedownList(settings.takedown_file)
        self._factory = reader_factory
        # closes what the factory opened, so that the next reader opens anew
        self._reset = reader_reset
        self._reader: HistoryReader | None = None
        self._policy: ViewPolicy | None = None
        # one thread: a SQLite connection stays on the thread that made it
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="viewer")

    @property
    def noindex(self) -> bool:
        return not self.settings.allow_search_engines

    def close(self) -> None:
        self._executor.shutdown(wait=False, cancel_futures=True)

    async def aclose(self, cleanup: Callable[[], None] | None = None) -> None:
        """Run ``cleanup`` (closing what the reader factory opened) on the reader's thread,
        then stop the thread."""
        if cleanup is not None:
            loop = asyncio.get_running_loop()
            await loop.run_in_executor(self._executor, cleanup)
        self._executor.shutdown(wait=True, cancel_futures=True)

    def _current_reader(self) -> HistoryReader:
        """The reader under the current policy (the takedown list re-read when it changed)."""
        self.takedown.refresh()
        policy = ViewPolicy(
            hide_banned=self.settings.hide_banned,
            takedown_ids=self.takedown.ids,
            takedown_authors=self.takedown.authors,
        )
        if self._reader is None or policy != self._policy:
            self._reader = self._factory(policy)
            self._policy = policy
        return self._reader

    async def _read(self, work: Callable[[HistoryReader], T]) -> T:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._executor, functools.partial(self._attempt, work))

    def _attempt(self, work: Callable[[HistoryReader], T]) -> T:
        """``work`` on the current reader; a database error on its connection (a server that
        restarted, a SQLite "disk I/O error") reopens the reader once, without a restart."""
        try:
            return work(self._current_reader())
        except _DATABASE_ERRORS as exc:
            if self._reset is None:
                raise
            log.warning("viewer: the history database failed; reading again on a new connection",
                        extra=fields(error=str(exc)))  # fmt: skip
            self._reader = None
            self._reset()
            return work(self._current_reader())

    # -- responses

    def headers(self) -> dict[str, str]:
        headers = {
            "Content-Security-Policy": CONTENT_SECURITY_POLICY,
            "X-Content-Type-Options": "nosniff",
            "Referrer-Policy": "no-referrer",
            "X-Frame-Options": "DENY",
        }
        if self.noindex:
            headers["X-Robots-Tag"] = "noindex, nofollow"
        return headers

    def _html(self, page: str, status: int = 200) -> web.Response:
        return web.Response(status=status, text=page, content_type="text/html", charset="utf-8")

    def _json(self, document: dict[str, Any]) -> web.Response:
        return web.Response(body=render.render_json(document), content_type="application/json")

    def _page(
        self, document: dict[str, Any], as_json: bool, messages: Iterable[Any] = ()
    ) -> web.Response:
        if as_json:
            return self._json(document)
        html = render.render_html(document, self.links, messages=messages, noindex=self.noindex)
        return self._html(html)

    def error_response(self, status: int, reason: str) -> web.Response:
        page = render.error_html(status, reason, self.links, noindex=self.noindex)
        return self._html(page, status)

    # -- the application

    def app(self) -> web.Application:
        app = web.Application(middlewares=[self._middleware])
        route = app.router.add_get
        route("/", self._communities)
        route("/index.json", self._communities)
        route("/static/history.css", self._css)
        route("/{community}", self._community)
        route("/{community}/", self._community)
        route("/{community}/index.json", self._community)
        route("/{community}/search", self._search)
        route("/{community}/search.json", self._search)
        route("/{community}/m/{message}", self._message)
        route("/{community}/image/{message}", self._image)
        route("/{community}/{channel}/", self._channel)
        route("/{community}/{channel}/index.json", self._channel)
        route("/{community}/{channel}/{day}", self._day)
        app.router.add_route("*", "/{tail:.*}", self._not_found)
        return app

    @web.middleware
    async def _middleware(
        self, request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
    ) -> web.StreamResponse:
        try:
            if request.method not in ("GET", "HEAD"):
                raise ViewerError(405, "the history viewer answers GET only")
            if request.path == self.prefix:  # "/history": the root is "/history/"
                response: web.StreamResponse = web.Response(
                    status=301, headers={"Location": self.prefix + "/"}
                )
            else:
                response = await handler(request)
        except ViewerError as exc:
            response = self.error_response(exc.status, exc.reason)
            if exc.status == 405:
                response.headers["Allow"] = "GET, HEAD"
        except web.HTTPException as exc:
            response = self.error_response(exc.status, exc.reason)
        except Exception:
            log.error("viewer request failed", exc_info=True, extra=fields(path=request.path))
            response = self.error_response(500, "the history could not be read; see the log")
        response.headers.update(self.headers())
        return response

    async def _not_found(self, request: web.Request) -> web.Response:
        raise ViewerError(404, "no such page in the history viewer")

    async def _css(self, request: web.Request) -> web.Response:
        return web.Response(
            body=render.stylesheet(), content_type="text/css", charset="utf-8",
            headers={"Cache-Control": "public, max-age=3600"},
        )  # fmt: skip

    def _community_id(self, request: web.Request) -> str:
        value = request.match_info["community"].lower()
        if not COMMUNITY_RE.fullmatch(value):
            raise ViewerError(
                400, "the community id must be 0x02 or 0x03 followed by 64 hex digits"
            )
        allowed = self.settings.communities
        if allowed is not None and value not in allowed:
            raise ViewerError(404, "this community's history is not shown here")
        return value

    async def _summary(self, community_id: str) -> CommunitySummary:
        summary = await self._read(lambda r: r.community(community_id))
        if summary is None:
            raise ViewerError(404, "no history of this community is indexed here")
        return summary

    async def _communities(self, request: web.Request) -> web.Response:
        allowed = self.settings.communities
        summaries = await self._read(lambda r: list(r.communities()))
        shown = [s for s in summaries if allowed is None or s.id in allowed]
        return self._page(render.communities_document(shown), request.path.endswith(".json"))

    async def _community(self, request: web.Request) -> web.Response:
        summary = await self._summary(self._community_id(request))
        return self._page(render.index_document(summary), request.path.endswith(".json"))

    def _channel_id(self, request: web.Request) -> str:
        value = request.match_info["channel"].lower()
        if not CHANNEL_RE.fullmatch(value):
            raise ViewerError(400, "the channel id must be a UUID (8-4-4-4-12 hex digits)")
        return value

    async def _channel(self, request: web.Request) -> web.StreamResponse:
        community_id = self._community_id(request)
        channel_id = self._channel_id(request)
        summary = await self._summary(community_id)
        if channel_id not in {c.id for c in summary.channels}:
            raise ViewerError(404, "no such channel in this community's history")
        wanted = request.query.get("date")
        if wanted is not None:
            day = _parse_day(wanted, "date")
            days = await self._read(lambda r: list(r.days(community_id, channel_id)))
            target = _nearest(days, day)
            if target is not None:
                location = self.links.day(community_id, channel_id, target)
                return web.Response(status=303, headers={"Location": location})
        document = await self._read(lambda r: render.channel_document(r, summary, channel_id))
        return self._page(document, request.path.endswith(".json"))

    async def _day(self, request: web.Request) -> web.Response:
        community_id = self._community_id(request)
        channel_id = self._channel_id(request)
        text = request.match_info["day"]
        as_json = text.endswith(".json")
        day = _parse_day(text.removesuffix(".json"), "the day in the path")
        summary = await self._summary(community_id)
        if channel_id not in {c.id for c in summary.channels}:
            raise ViewerError(404, "no such channel in this community's history")

        def read(reader: HistoryReader) -> tuple[dict[str, Any], list[Any]]:
            document = render.day_document(reader, summary, channel_id, day)
            messages = list(reader.day(community_id, channel_id, day))
            replied = [m for m in messages if m.response_to]
            for message in replied:
                original = reader.message(community_id, message.response_to)
                if original is not None:
                    messages.append(original)
            return document, messages

        document, messages = await self._read(read)
        return self._page(document, as_json, messages)

    def _message_id(self, request: web.Request) -> tuple[str, bool]:
        text = request.match_info["message"].lower()
        as_json = text.endswith(".json")
        value = text.removesuffix(".json")
        if not MESSAGE_RE.fullmatch(value):
            raise ViewerError(400, "the message id must be 0x followed by 64 hex digits")
        return value, as_json

    async def _message(self, request: web.Request) -> web.Response:
        community_id = self._community_id(request)
        message_id, as_json = self._message_id(request)
        summary = await self._summary(community_id)

        def read(reader: HistoryReader) -> tuple[dict[str, Any], list[Any]] | None:
            message = reader.message(community_id, message_id)
            if message is None:
                return None
            document = render.message_page_document(reader, summary, message)
            original = (
                reader.message(community_id, message.response_to) if message.response_to else None
            )
            return document, [message] + ([original] if original is not None else [])

        found = await self._read(read)
        if found is None:
            raise ViewerError(404, "no such message is shown in this history")
        return self._page(found[0], as_json, found[1])

    async def _search(self, request: web.Request) -> web.Response:
        community_id = self._community_id(request)
        query = request.query.get("q", "").strip()
        if not query:
            raise ViewerError(400, "give the words to search for: ?q=…")
        if len(query) > MAX_QUERY_CHARS:
            raise ViewerError(400, f"the search query is over {MAX_QUERY_CHARS} characters")
        page = _parse_page(request.query.get("page", "1"))
        summary = await self._summary(community_id)
        hits = await self._read(
            lambda r: list(
                r.search(community_id, query, limit=PAGE_SIZE + 1, offset=(page - 1) * PAGE_SIZE)
            )
        )
        document = render.search_document(summary, query, hits, page=page, page_size=PAGE_SIZE)
        return self._page(document, request.path.endswith(".json"), [h.message for h in hits])

    async def _image(self, request: web.Request) -> web.Response:
        community_id = self._community_id(request)
        message_id, _ = self._message_id(request)
        found = await self._read(lambda r: r.image(community_id, message_id))
        if found is None:
            raise ViewerError(404, "no image is shown for this message")
        try:
            image = sniff_image(found[1])
        except WakuLegacyError as exc:
            raise ViewerError(415, f"this image is not served: {exc}") from None
        headers = image_headers(image)
        headers.pop("Content-Length")
        headers["Cache-Control"] = "public, max-age=86400"
        return web.Response(body=image.data, headers=headers)


def _parse_day(text: str, what: str) -> dt.date:
    if len(text) > 10 or not DATE_RE.fullmatch(text):
        raise ViewerError(400, f"{what} must be a date written YYYY-MM-DD (UTC)")
    try:
        day = dt.date.fromisoformat(text)
    except ValueError:
        raise ViewerError(400, f"{what} is not a calendar date (YYYY-MM-DD)") from None
    if not MIN_YEAR <= day.year <= MAX_YEAR:
        raise ViewerError(400, f"{what} must be between {MIN_YEAR} and {MAX_YEAR}")
    return day


def _parse_page(text: str) -> int:
    if not text.isdigit() or len(text) > 4 or not 1 <= int(text) <= MAX_PAGE:
        raise ViewerError(400, f"page must be a whole number from 1 to {MAX_PAGE}")
    return int(text)


def _nearest(days: list[dt.date], day: dt.date) -> dt.date | None:
    """The first day with messages on or after ``day``, else the last one before it."""
    import bisect

    if not days:
        return None
    at = bisect.bisect_left(days, day)
    return days[at] if at < len(days) else days[-1]


# -- in the bridge ------------------------------------------------------------------------------


class ViewerComponent(Component):
    """``[viewer]`` in the bridge: the pages (a sub-application of the REST API, made here so
    that the API serves it from its start) over the readable tables in the store's database,
    kept current: each v1 envelope the live bridge stores is decrypted with its channel's key
    and indexed (in batches, every :data:`INDEX_INTERVAL`); when an archive run of a
    community has completed, the community's stored messages are indexed (idempotent: what
    the live path added is not added twice; this also takes the messages the history pulls
    stored) and its archive link and last window recorded. A community with no readable
    rows at start is indexed from the store then. Reads and writes each have a thread and a
    database connection of their own. After the first pass over a community's store, later
    passes read what was stored from the last pass's time on (less :data:`REREAD_MARGIN_NS`)."""

    name = "viewer"
    needs = ("live",)  # its hook on the live bridge is removed before the bridge closes

    def __init__(
        self,
        config: BridgeConfig,
        *,
        live: Callable[[], LiveBridge | None],
        archivers: Callable[[], Iterable[CommunityArchiver]],
    ) -> None:
        from waku_legacy.identity.topics import (
            chat_topic,
            symmetric_key_for_chat,
            v1_topic_to_content_topic,
        )

        viewer = config.viewer
        configured = [str(c.id) for c in config.communities]
        shown = viewer.communities or tuple(configured)
        settings = ViewerSettings(
            path_prefix=viewer.path_prefix, communities=frozenset(shown) if shown else None,
            hide_banned=viewer.hide_banned, takedown_file=viewer.takedown_file,
            allow_search_engines=viewer.allow_search_engines,
        )  # fmt: skip
        self.config = config
        self.url = config.store.url
        self.viewer = Viewer(settings, self._reader, self._reset_reader)
        self.subapp = (self.viewer.prefix, self.viewer.app())
        self._live = live
        self._archivers = archivers
        # content topic -> (community id, the channel's symmetric key)
        self.topics: dict[str, tuple[str, bytes]] = {}
        for community in config.communities:
            for channel in community.channels:
                chat = community.id.channel_chat_id(channel)
                topic = v1_topic_to_content_topic(chat_topic(chat))
                self.topics[topic] = (str(community.id), symmetric_key_for_chat(chat))
        self._read_index: HistoryIndex | None = None  # the viewer's thread's
        self._write_index: HistoryIndex | None = None  # the indexer's thread's
        self._indexer = ThreadPoolExecutor(max_workers=1, thread_name_prefix="viewer-index")
        self._pending: list[tuple[str, StoredMessage]] = []
        self._runs: dict[str, object] = {}  # community -> the archive run last indexed after
        self._passes: dict[str, int] = {}  # community -> when its store was last read (ns)
        self._task: asyncio.Task[None] | None = None
        self.indexed_live = 0  # rows the live path indexed (tests and the log)
        self.indexed_runs = 0  # archive runs indexed after

    def _reader(self, policy: ViewPolicy) -> HistoryReader:
        from waku_legacy.history.index import HistoryIndex

        if self._read_index is None:
            self._read_index = HistoryIndex.open(self.url)
        return self._read_index.reader(policy)

    def _reset_reader(self) -> None:
        """Close the readers' connection (on the readers' thread); the next read opens one."""
        index, self._read_index = self._read_index, None
        if index is not None:
            try:
                index.close()
            except _DATABASE_ERRORS as exc:  # a broken connection may not close cleanly
                log.warning("viewer: closing a failed connection", extra=fields(error=str(exc)))

    def _writer(self) -> HistoryIndex:
        from waku_legacy.history.index import HistoryIndex

        if self._write_index is None:
            self._write_index = HistoryIndex.open(self.url)
        return self._write_index

    async def open(self) -> None:
        live = self._live()
        if live is not None:
            live.stored_hooks.append(self.on_stored)
        self._task = asyncio.create_task(self._run(), name="viewer-index")

    def on_stored(self, row: StoredMessage) -> None:
        """The live bridge stored ``row``: indexed with the next batch when it is a channel's."""
        if row.content_topic in self.topics:
            self._pending.append((self.topics[row.content_topic][0], row))

    async def _in_indexer(self, work: Callable[[], T]) -> T:
        return await asyncio.get_running_loop().run_in_executor(self._indexer, work)

    async def _run(self) -> None:
        try:
            await self._in_indexer(self._catch_up)
        except Exception as exc:
            log.error("viewer: the first indexing failed", exc_info=True,
                      extra=fields(error=str(exc)))  # fmt: skip
        while True:
            await asyncio.sleep(INDEX_INTERVAL)
            try:
                await self.index_now()
            except Exception as exc:
                log.error("viewer: indexing failed (retried)", exc_info=True,
                          extra=fields(error=str(exc)))  # fmt: skip

    async def index_now(self) -> None:
        """Index the live rows waiting, and after the archive runs completed since the last
        call."""
        pending, self._pending = self._pending, []
        if pending:
            await self._in_indexer(lambda: self._index_live(pending))
        for archiver in list(self._archivers()):
            run = archiver.last_run
            if run is None or archiver.lock.locked() or self._runs.get(archiver.name) is run:
                continue
            self._runs[archiver.name] = run
            if run.error is not None:
                continue
            link, last_end = archiver.magnet_uri(), archiver.last_end()
            work = functools.partial(self._index_after_run, archiver.community, link, last_end)
            await self._in_indexer(work)

    def _index_live(self, pending: list[tuple[str, StoredMessage]]) -> None:
        from waku_legacy.history.sources import stored_row

        index = self._writer()
        by_community: dict[str, list[WakuRow | Undecodable]] = {}
        for community, row in pending:
            key = self.topics[row.content_topic][1]
            by_community.setdefault(community, []).append(stored_row(row, key, source="bridge"))
        for community, rows in by_community.items():
            index.add_waku_messages(community, rows)  # type: ignore[arg-type]
        self.indexed_live += len(pending)

    def _index_after_run(self, community: Any, link: str | None, last_end: int | None) -> None:
        from waku_legacy.history.sources import index_from_store

        index = self._writer()
        name = str(community.id)
        started = time.time_ns()
        last = self._passes.get(name)
        since = None if last is None else last - REREAD_MARGIN_NS
        counts = index_from_store(self.url, [community], index, since_ns=since)
        self._passes[name] = started
        if link or last_end:
            index.set_archive_link(str(community.id), link or "", last_end or 0)
        self.indexed_runs += 1
        log.info("viewer: indexed after an archive run",
                 extra=fields(community=str(community.id), **counts.to_json()))  # fmt: skip

    def _catch_up(self) -> None:
        """Index from the store the configured communities that have no readable rows."""
        from waku_legacy.history.sources import index_from_store

        index = self._writer()
        for community in self.config.communities:
            summary = index.reader().community(str(community.id))
            if summary is not None and summary.messages:
                # indexed before (the migration's readable step, an earlier run): later
                # passes read from its newest message on
                newest_ms = max((c.last_ms for c in summary.channels), default=0)
                self._passes[str(community.id)] = newest_ms * 1_000_000
                continue
            started = time.time_ns()
            counts = index_from_store(self.url, [community], index)
            self._passes[str(community.id)] = started
            log.info("viewer: indexed the store", extra=fields(
                community=str(community.id), **counts.to_json()))  # fmt: skip

    async def close(self) -> None:
        task, self._task = self._task, None
        try:
            await cancel_task(task)
            if task is not None:
                await self.index_now()  # what the live path stored before the stop
        finally:
            live = self._live()
            if live is not None and self.on_stored in live.stored_hooks:
                live.stored_hooks.remove(self.on_stored)
            await self._close_indexes()

    async def _close_indexes(self) -> None:
        """Each index on the thread that opened it."""

        def close_writer() -> None:
            if self._write_index is not None:
                self._write_index.close()
                self._write_index = None

        def close_reader() -> None:
            if self._read_index is not None:
                self._read_index.close()
                self._read_index = None

        await self._in_indexer(close_writer)
        self._indexer.shutdown(wait=True)
        await self.viewer.aclose(close_reader)

    def health(self) -> str | None:
        return READY if self._task is not None else None
