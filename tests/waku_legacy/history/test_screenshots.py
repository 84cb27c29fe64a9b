"""Screenshots of the viewer's pages as a reader sees them (Debian's Chromium via Playwright):
the community index, a day of #general and a permalink, in the light and the dark scheme and
at a phone's width (390 px), each checked as a real, non-blank PNG of the viewport's size,
and the page's text checked for what the screenshot must show.

``WAKU_LEGACY_SCREENSHOTS=docs/screenshots`` also writes them there (the README shows them)."""

from __future__ import annotations

import os
import shutil
import struct
import zlib
from pathlib import Path

from tests.bridge.test_viewer import serve
from tests.browser import check_png
from tests.waku_legacy.history.memory_reader import COMMUNITY, GENERAL, mid, sample_history

CHROMIUM = "/usr/bin/chromium"
DESKTOP = (1100, 900)
PHONE = (390, 844)
VIEWS = (
    ("light", DESKTOP, "light"), ("dark", DESKTOP, "dark"),
    ("light", PHONE, "phone"), ("dark", PHONE, "phone-dark"),
)  # fmt: skip


def _photo(width: int = 480, height: int = 300) -> bytes:
    """A PNG with a sunset-like gradient (the image message's picture)."""
    rows = bytearray()
    for y in range(height):
        rows.append(0)
        for x in range(width):
            t = y / height
            sun = max(0.0, 1 - (((x - width * 0.7) ** 2 + (y - height * 0.55) ** 2) ** 0.5) / 60)
            r = int(250 * (1 - t) + 40 * t + 120 * sun)
            g = int(150 * (1 - t) + 50 * t + 100 * sun)
            b = int(90 * (1 - t) + 120 * t)
            if y > height * 0.72:  # the sea
                r, g, b = 30 + (x * 7 + y * 3) % 20, 60 + (y % 9), 110 + (x % 13)
            rows += bytes((min(r, 255), min(g, 255), min(b, 255)))

    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header)
            + chunk(b"IDAT", zlib.compress(bytes(rows), 6)) + chunk(b"IEND", b""))  # fmt: skip


async def test_screenshots_of_the_pages(tmp_path: Path):
    from playwright.async_api import async_playwright

    history = sample_history()
    photo = _photo()
    history.images[mid(6)] = ("png", photo)
    pages = {
        "index": f"/{COMMUNITY}/",
        "day": f"/{COMMUNITY}/{GENERAL}/2024-03-12",
        "permalink": f"/{COMMUNITY}/m/{mid(4)}",
    }
    expected = {
        "index": ["Status Builders", "general", "12 messages", "Magnet link"],
        "day": ["Tuesday, 12 March 2024", "Alice", "claims alice.eth", "Fond Bossy Buck",
                "@Fond Bossy Buck", "(edited)", "Pinned", "Voice message, 0:14"],
        "permalink": ["Provenance", "Waku message hash", "Archive window",
                      "Nice! Does it keep replies and reactions?"],
    }  # fmt: skip
    shots: list[Path] = []
    async with serve(history) as (_, base, _viewer), async_playwright() as playwright:
        browser = await playwright.chromium.launch(executable_path=CHROMIUM,
                                                   args=["--no-sandbox"])  # fmt: skip
        for scheme, size, suffix in VIEWS:
            context = await browser.new_context(
                viewport={"width": size[0], "height": size[1]}, color_scheme=scheme
            )
            page = await context.new_page()
            for name, path in pages.items():
                await page.goto(base + path, wait_until="networkidle")
                text = await page.inner_text("body")
                for value in expected[name]:
                    assert value.lower() in text.lower(), (name, value)
                # no horizontal scrolling at a phone's width
                width = await page.evaluate("document.documentElement.scrollWidth")
                assert width <= size[0], (name, suffix, width)
                shot = tmp_path / f"{name}-{suffix}.png"
                await page.screenshot(path=str(shot))
                check_png(shot, size)
                shots.append(shot)
            await context.close()
        await browser.close()
    target = os.environ.get("WAKU_LEGACY_SCREENSHOTS")
    if target:
        Path(target).mkdir(parents=True, exist_ok=True)
        for shot in shots:
            shutil.copyfile(shot, Path(target) / f"history-{shot.name}")
