"""Nothing a stranger wrote runs, in a real browser: Debian's Chromium (headless, driven by
Playwright with ``executable_path``; no browser download) loads every viewer page and a static
export whose every user-controlled field holds payloads from public XSS filter-evasion lists
(``data/xss_payloads.txt``: the OWASP XSS Filter Evasion Cheat Sheet's vectors, PortSwigger's
cheat sheet's event handlers, Markdown link forms; >= 200 of them).

The fields: message text, display and ENS names, mention names, channel and community names
and descriptions, Discord author names and timestamps, reaction emoji, image bytes (a PNG
carrying a payload in a text chunk; an SVG, refused), search queries and URL path parts.
On each page: no dialog opened, no call of alert/confirm/prompt/print (hooked by an init
script before any page script could run) and no Content-Security-Policy violation (recorded by
the same init script: a blocked inline script would mean an escape failed)."""

from __future__ import annotations

import asyncio
import datetime as dt
import struct
import time
import zlib
from pathlib import Path
from urllib.parse import quote

import pytest

from tests.bridge.test_viewer import serve
from tests.waku_legacy.history.memory_reader import (
    COMMUNITY,
    MemoryHistory,
    key,
    message,
    mid,
)
from waku_legacy.history.export import export_history
from waku_legacy.history.model import (
    Author,
    ChannelSummary,
    CommunitySummary,
    ContentType,
    Reaction,
)

CHROMIUM = "/usr/bin/chromium"
PAYLOADS_FILE = Path(__file__).parent / "data" / "xss_payloads.txt"
CHANNELS = [
    "0a000000-0000-4000-8000-000000000001",
    "0a000000-0000-4000-8000-000000000002",
    "0a000000-0000-4000-8000-000000000003",
]
DAYS = [dt.datetime(2024, 5, d, tzinfo=dt.UTC) for d in (1, 2, 3)]
TABS = 3  # pages loaded at once

HOOKS = """
(() => {
  window.__xss = [];
  window.__csp = [];
  for (const name of ["alert", "confirm", "prompt", "print"]) {
    try {
      Object.defineProperty(window, name, {
        value: (...args) => { window.__xss.push(name + "(" + args.join(",") + ")"); },
        writable: false, configurable: false,
      });
    } catch (e) { window.__xss.push("hook failed: " + name); }
  }
  document.addEventListener("securitypolicyviolation", (e) => {
    window.__csp.push(e.violatedDirective + " " + e.blockedURI + " " + (e.sample || ""));
  }, true);
})();
"""


def payloads() -> list[str]:
    lines = PAYLOADS_FILE.read_text(encoding="utf-8").splitlines()
    return [line for line in lines if line.strip() and not line.startswith("# ")]


def _png_with_text(text: str) -> bytes:
    """A 1x1 PNG carrying ``text`` in a tEXt chunk (image metadata a stranger controls)."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

    header = struct.pack(">IIBBBBB", 1, 1, 8, 6, 0, 0, 0)
    pixels = zlib.compress(b"\x00\xff\x00\x00\xff")
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header)
            + chunk(b"tEXt", b"Comment\x00" + text.encode("utf-8", "replace"))
            + chunk(b"IDAT", pixels) + chunk(b"IEND", b""))  # fmt: skip


def hostile_history(corpus: list[str]) -> MemoryHistory:
    """A community where every field a stranger controls holds payloads."""
    pick = iter(corpus * 3)
    authors = [
        Author(key(n + 1), f"zQ3sh{n:044d}", next(pick), display_name=next(pick),
               ens_name=next(pick), shown_name="")
        for n in range(12)
    ]  # fmt: skip
    authors.append(Author(key(40), "zQ3shplain", next(pick), ens_name=next(pick)))  # ENS only
    messages = []
    for n, text in enumerate(corpus):
        author = authors[n % len(authors)]
        at = DAYS[n % 3] + dt.timedelta(minutes=n)
        extra: dict[str, object] = {}
        if n % 3 == 1:
            extra["response_to"] = mid(1000 + n - 1)
        if n % 5 == 0:
            mentioned = authors[(n + 1) % len(authors)].public_key
            text = f"{text} @{mentioned}"
            extra["mentions"] = {mentioned: corpus[(n + 7) % len(corpus)]}
        if n % 7 == 0:
            extra.update(content_type=ContentType.DISCORD_MESSAGE,
                         discord_author=corpus[(n + 3) % len(corpus)],
                         discord_timestamp=corpus[(n + 4) % len(corpus)])  # fmt: skip
        if n % 11 == 0:
            extra["reactions"] = (Reaction(corpus[(n + 5) % len(corpus)], 1, (key(1),)),)
        if n % 13 == 0:
            extra.update(edited=True, edited_at_ms=int(at.timestamp() * 1000) + 1,
                         pinned=True, pinned_by=key(2))  # fmt: skip
        messages.append(message(1000 + n, author, at, text, channel=CHANNELS[n % 3], **extra))
    image_at = DAYS[0] + dt.timedelta(hours=20)
    for n, kind in ((5000, "png"), (5001, "png")):
        messages.append(message(n, authors[0], image_at, corpus[n % len(corpus)],
                                channel=CHANNELS[0], content_type=ContentType.IMAGE,
                                image_type=kind, image_size=100))  # fmt: skip
    messages.append(message(5002, authors[1], image_at, corpus[3], channel=CHANNELS[0],
                            content_type=ContentType.SYSTEM_MESSAGE_PINNED_MESSAGE))  # fmt: skip
    svg = (b'<svg xmlns="http://www.w3.org/2000/svg" onload="alert(1)">'
           b"<script>alert(2)</script></svg>")  # fmt: skip
    channels = tuple(
        ChannelSummary(c, corpus[10 + i], corpus[20 + i], 0, 0, 0) for i, c in enumerate(CHANNELS)
    )
    summary = CommunitySummary(
        COMMUNITY, corpus[0], corpus[1], channels, 0,
        archive_link="magnet:?xt=urn:btih:" + "cd" * 20 + "&dn=" + quote(corpus[2]),
        last_archived_s=int(DAYS[2].timestamp()),
    )  # fmt: skip
    return MemoryHistory(
        [summary], messages,
        images={mid(5000): ("png", _png_with_text(corpus[5])), mid(5001): ("png", svg)},
    )  # fmt: skip


class Browser:
    """Pages loaded with the hooks, their findings collected."""

    def __init__(self, context: object) -> None:
        self.context = context
        self.findings: list[str] = []
        self.loaded = 0

    async def check(self, page: object, url: str) -> None:
        dialogs: list[str] = []
        page.on("dialog", lambda d: (dialogs.append(d.message), asyncio.ensure_future(d.dismiss())))  # type: ignore[attr-defined]
        await page.goto(url, wait_until="load")  # type: ignore[attr-defined]
        await page.wait_for_timeout(20)  # type: ignore[attr-defined]
        calls, violations = await page.evaluate("[window.__xss, window.__csp]")  # type: ignore[attr-defined]
        self.loaded += 1
        if "/image/" in url:
            # the browser's own image document styles itself inline (refused by the CSP's
            # style-src 'self'): only script violations count there
            violations = [v for v in violations if v.startswith("script-src")]
        for what, found in (("dialog", dialogs), ("call", calls), ("csp", violations)):
            self.findings += [f"{what} on {url}: {x}" for x in found]

    async def visit(self, urls: list[str]) -> None:
        queue = list(urls)

        async def worker() -> None:
            page = await self.context.new_page()  # type: ignore[attr-defined]
            try:
                while queue:
                    await self.check(page, queue.pop())
            finally:
                await page.close()

        await asyncio.gather(*(worker() for _ in range(TABS)))


@pytest.mark.timeout(240)
async def test_no_payload_runs_on_any_page_or_export(tmp_path: Path):
    from playwright.async_api import async_playwright

    corpus = payloads()
    assert len(corpus) >= 200
    history = hostile_history(corpus)
    site = tmp_path / "site"
    export_history(history.reader(), COMMUNITY, "html", site)
    started = time.monotonic()
    async with serve(history) as (_, base, _viewer), async_playwright() as playwright:
        browser = await playwright.chromium.launch(
            executable_path=CHROMIUM, args=["--no-sandbox", "--disable-gpu"]
        )
        context = await browser.new_context()
        await context.add_init_script(HOOKS)
        checker = Browser(context)
        community = f"{base}/{COMMUNITY}"
        urls = [f"{base}/", f"{community}/", f"{community}/index.json"]
        urls += [f"{community}/{c}/" for c in CHANNELS]
        urls += [f"{community}/{c}/{d.date().isoformat()}" for c in CHANNELS for d in DAYS]
        # permalinks: every other message (each message is on its day page already)
        urls += [f"{community}/m/{m.id}" for m in history.messages[::2]]
        urls += [f"{community}/image/{mid(5000)}", f"{community}/image/{mid(5001)}"]
        # search: every payload as the query (echoed on the page), a few as JSON
        urls += [f"{community}/search?q={quote(p[:200], safe='')}" for p in corpus]
        urls += [f"{community}/search.json?q={quote(p[:200], safe='')}" for p in corpus[:5]]
        # URL path parts: each payload in one of the four positions
        for n, p in enumerate(corpus):
            part = quote(p, safe="")
            position = n % 4
            urls.append(
                [f"{base}/{part}/", f"{community}/{part}/2024-05-01",
                 f"{community}/{CHANNELS[0]}/{part}", f"{community}/m/{part}"][position]
            )  # fmt: skip
        urls += [f"{community}/{CHANNELS[0]}/?date={quote(p, safe='')}" for p in corpus[:20]]
        urls += [(site / p).as_uri() for p in sorted(
            str(x.relative_to(site)) for x in site.rglob("*.html"))]  # fmt: skip
        await checker.visit(urls)
        # the hooks do see what runs: two deliberately vulnerable pages (controls)
        control = Browser(context)
        open_page, csp_page = tmp_path / "open.html", tmp_path / "csp.html"
        vulnerable = "<img src=x onerror=alert(1)><script>confirm(2)</script>"
        open_page.write_text(vulnerable)
        csp_page.write_text('<meta http-equiv="Content-Security-Policy" '
                            "content=\"script-src 'none'\">" + vulnerable)  # fmt: skip
        await control.visit([open_page.as_uri(), csp_page.as_uri()])
        await browser.close()
    elapsed = time.monotonic() - started
    assert checker.loaded == len(urls)
    assert checker.findings == [], "\n".join(checker.findings[:20])
    found = "\n".join(control.findings)
    assert "call on file://" in found and "alert(1)" in found and "confirm(2)" in found
    assert "csp on file://" in found and "script-src" in found
    # the image that sniffed as a PNG was exported; the SVG declared as PNG was not
    assert (site / "images" / f"{mid(5000)}.png").is_file()
    assert not (site / "images" / f"{mid(5001)}.png").exists()
    print(f"{len(corpus)} payloads, {len(urls)} pages in {elapsed:.1f} s")


def test_the_corpus_names_its_sources_and_is_large_enough():
    head = PAYLOADS_FILE.read_text(encoding="utf-8").split("\n", 12)[:12]
    text = "\n".join(head)
    assert "OWASP" in text and "PortSwigger" in text
    corpus = payloads()
    assert len(corpus) >= 200 and len(set(corpus)) >= 200
    assert sum("alert" in p or "xss.js" in p or "javascript:" in p.lower() for p in corpus) >= 200
