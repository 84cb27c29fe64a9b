"""Reading messages from an nwaku node's store REST API (``GET /store/v3/messages``).

- :class:`StorePager` is the sans-IO part: it builds each page's query string and digests each
  response (messages, next cursor, done), handling both cursor encodings nwaku has used:
  ``0x`` hex (nwaku >= 0.35) and base64 (earlier; ``+`` and ``/`` must be percent-encoded in
  the URL, which is why the query string is built here and not by an HTTP library). Hashes
  in responses are parsed in either encoding (:mod:`waku_legacy.store.rest_json`, the shared
  REST codec); a cursor is sent back exactly as received.
- :func:`fetch_pages` is the thin blocking adapter (urllib; it runs inside Spark partitions,
  which have no event loop): retries with exponential back-off (connection errors, 5xx, 429
  honouring ``Retry-After``) and a resumable position: every page is saved (atomically) as
  ``page-<n>.json`` in a directory before it is used, and a rerun replays the saved pages and
  continues from the last saved cursor, so nothing fetched is fetched twice or lost.
- :func:`iter_saved_pages` reads saved pages (ours, or responses saved by hand with curl).

Response shape (nwaku REST, store v3)::

    {"requestId": "...", "statusCode": 200, "statusDesc": "OK",
     "messages": [{"messageHash": "0x…", "pubsubTopic": "/waku/2/…",
                   "message": {"payload": "<base64>", "contentTopic": "…", "version": 1,
                               "timestamp": 1700000000000000000, "meta": "<base64>"}}],
     "paginationCursor": "0x…"}
"""

from __future__ import annotations

import json
import os
import random
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote

from waku_legacy.durable import write_atomic
from waku_legacy.errors import ConfigError, WakuLegacyError
from waku_legacy.files import read_small_file
from waku_legacy.store.rest_json import parse_hash

__all__ = [
    "MAX_PAGE_SIZE",
    "RestPage",
    "StorePager",
    "StoreRestError",
    "fetch_pages",
    "iter_saved_pages",
    "parse_page",
]

MAX_PAGE_SIZE = 100
MAX_RESPONSE_BYTES = 64 * 1024 * 1024
_PAGE_GLOB = "page-*.json"


class StoreRestError(WakuLegacyError):
    """A store REST endpoint that fails or answers something that is not a store page."""


@dataclass(slots=True)
class RestPage:
    """One store response: its raw message entries and the cursor to the next page."""

    number: int
    messages: list[dict[str, Any]]
    cursor: str | None
    body: bytes = b""


@dataclass(slots=True)
class StorePager:
    """Sans-IO paging over ``GET /store/v3/messages`` (forward, oldest first)."""

    pubsub_topic: str | None = None
    content_topics: Sequence[str] = ()
    start_time: int | None = None
    end_time: int | None = None
    page_size: int = MAX_PAGE_SIZE
    cursor: str | None = None
    done: bool = False
    pages: int = 0
    seen_cursors: set[str] = field(default_factory=set)

    def request_path(self) -> str:
        """Path and query string of the next request."""
        params: list[tuple[str, str]] = [
            ("includeData", "true"),
            ("ascending", "true"),
            ("pageSize", str(min(self.page_size, MAX_PAGE_SIZE))),
        ]
        if self.pubsub_topic:
            params.append(("pubsubTopic", self.pubsub_topic))
        if self.content_topics:
            params.append(("contentTopics", ",".join(self.content_topics)))
        if self.start_time is not None:
            params.append(("startTime", str(self.start_time)))
        if self.end_time is not None:
            params.append(("endTime", str(self.end_time)))
        if self.cursor:
            params.append(("cursor", self.cursor))
        query = "&".join(f"{k}={quote(v, safe='')}" for k, v in params)
        return f"/store/v3/messages?{query}"

    def on_response(self, body: bytes) -> RestPage:
        """Digest one 200 response body; advances the cursor (or finishes)."""
        page = parse_page(body, self.pages + 1)
        self.pages += 1
        if page.cursor is None or not page.messages:
            self.done = True
            self.cursor = None
        else:
            if page.cursor in self.seen_cursors:
                raise StoreRestError(
                    f"the store returned cursor {page.cursor[:80]} twice; refusing to loop"
                )
            self.seen_cursors.add(page.cursor)
            self.cursor = page.cursor
        page.body = body
        return page


def parse_page(body: bytes, number: int = 0) -> RestPage:
    """Parse one store v3 response body (nwaku JSON)."""
    if len(body) > MAX_RESPONSE_BYTES:
        raise StoreRestError(f"store page {number} is over {MAX_RESPONSE_BYTES} bytes")
    try:
        doc = json.loads(body)
    except (ValueError, RecursionError) as exc:  # RecursionError: nested too deeply
        raise StoreRestError(f"store page {number} is not JSON: {exc}") from exc
    if not isinstance(doc, dict):
        raise StoreRestError(f"store page {number} is not a JSON object")
    status = doc.get("statusCode", 200)
    if status not in (200, None):
        raise StoreRestError(
            f"store page {number}: status {status} {str(doc.get('statusDesc', ''))[:200]}"
        )
    messages = doc.get("messages", [])
    if not isinstance(messages, list):
        raise StoreRestError(f"store page {number}: 'messages' is not a list")
    cursor = doc.get("paginationCursor")
    if cursor is not None and not isinstance(cursor, str):
        raise StoreRestError(f"store page {number}: 'paginationCursor' is not a string")
    if cursor is not None:
        parse_hash(cursor, "pagination cursor")  # hex or base64, 32 bytes
    return RestPage(number, [m for m in messages if isinstance(m, dict)], cursor or None)


# -- the blocking adapter ---------------------------------------------------------------------


Fetch = Callable[[str, float], tuple[int, bytes, dict[str, str]]]


def _urllib_fetch(url: str, timeout: float) -> tuple[int, bytes, dict[str, str]]:
    request = urllib.request.Request(url, headers={"Accept": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return response.status, response.read(MAX_RESPONSE_BYTES + 1), dict(response.headers)
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read(64 * 1024), dict(exc.headers or {})


def fetch_pages(
    base_url: str,
    pager: StorePager,
    *,
    save_dir: str | os.PathLike[str] | None = None,
    retries: int = 5,
    timeout: float = 30.0,
    backoff: float = 0.5,
    max_backoff: float = 30.0,
    fetch: Fetch = _urllib_fetch,
    sleep: Callable[[float], None] = time.sleep,
) -> Iterator[RestPage]:
    """Yield every page of ``pager``'s query from the node at ``base_url``.

    With ``save_dir``, pages saved by an earlier (interrupted) run are replayed first and
    fetching resumes after the last of them; each new page is saved before it is yielded.
    """
    directory = Path(save_dir) if save_dir is not None else None
    if directory is not None:
        directory.mkdir(parents=True, exist_ok=True)
        for number, saved in enumerate(sorted(directory.glob(_PAGE_GLOB)), start=1):
            page = pager.on_response(read_page_file(saved, number))
            yield page
        if pager.done:
            return
    base = base_url.rstrip("/")
    while not pager.done:
        url = base + pager.request_path()
        attempt = 0
        while True:
            try:
                status, body, headers = fetch(url, timeout)
            except (OSError, urllib.error.URLError) as exc:
                status, body, headers = 0, str(exc).encode(), {}
            if status == 200:
                break
            retryable = status == 0 or status == 429 or status >= 500
            if not retryable or attempt >= retries:
                raise StoreRestError(
                    f"GET {url[:200]} failed with "
                    f"{'a connection error' if status == 0 else f'HTTP {status}'}: "
                    f"{body[:200].decode('utf-8', 'replace')}"
                    + (f" (after {attempt} retries)" if attempt else "")
                )
            delay = min(max_backoff, backoff * (2**attempt)) * (0.5 + random.random() / 2)
            retry_after = headers.get("Retry-After") or headers.get("retry-after")
            if status == 429 and retry_after and retry_after.isdigit():
                delay = max(delay, float(retry_after))
            sleep(delay)
            attempt += 1
        page = pager.on_response(body)
        if directory is not None:
            write_atomic(directory / f"page-{page.number:06d}.json", body)
        yield page


def iter_saved_pages(paths: Sequence[str | os.PathLike[str]]) -> Iterator[tuple[Path, RestPage]]:
    """Saved store responses, one JSON document per file, in the order given."""
    for number, path in enumerate(paths, start=1):
        path = Path(path)
        yield path, parse_page(read_page_file(path, number), number)


def read_page_file(path: str | os.PathLike[str], number: int) -> bytes:
    """A saved page's bytes: a regular file of at most MAX_RESPONSE_BYTES (a FIFO, a
    device or a huge file under the configured path is refused before it is read)."""
    try:
        return read_small_file(path, what=f"saved store page {number}",
                               max_size=MAX_RESPONSE_BYTES)  # fmt: skip
    except ConfigError as exc:
        raise StoreRestError(str(exc)) from None
