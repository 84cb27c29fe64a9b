"""Headless Chromium for tests that must see a page as a browser renders it (Debian's
``chromium``, which scripts/setup-env.sh installs): the rendered DOM, a screenshot, and a
check that the screenshot is a real, non-blank PNG."""

from __future__ import annotations

import asyncio
import html.parser
import struct
import time
import zlib
from pathlib import Path

import pytest

CHROMIUM = Path("/usr/bin/chromium")
WINDOW = (1280, 2400)


class _Text(html.parser.HTMLParser):
    """A page's text (what a reader sees) and the tags it holds."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []
        self.tags: set[str] = set()
        self.attributes: list[tuple[str, str | None]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.add(tag)
        self.attributes.extend(attrs)

    def handle_data(self, data: str) -> None:
        self.parts.append(data)


def page_text(document: str) -> _Text:
    parser = _Text()
    parser.feed(document)
    parser.close()
    return parser


def text_of(document: str) -> str:
    return " ".join(page_text(document).parts)


async def chromium(tmp_path: Path, url: str, *args: str) -> bytes:
    """Run headless Chromium on ``url`` (asynchronously: the bridge answers on this loop)."""
    if not CHROMIUM.exists():
        pytest.fail(f"{CHROMIUM} is missing: scripts/setup-env.sh installs it (as root)")
    profile = tmp_path / f"chromium-profile-{time.monotonic_ns()}"
    process = await asyncio.create_subprocess_exec(
        str(CHROMIUM), "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
        "--no-first-run", "--disable-background-networking", "--disable-component-update",
        "--disable-sync", f"--user-data-dir={profile}", *args, url,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    try:
        async with asyncio.timeout(120):
            out, err = await process.communicate()
    except TimeoutError:
        process.kill()
        await process.wait()
        raise
    assert process.returncode == 0, err.decode(errors="replace")[-2000:]
    return out


async def screenshot(tmp_path: Path, url: str, name: str) -> Path:
    path = tmp_path / name
    size = f"--window-size={WINDOW[0]},{WINDOW[1]}"
    await chromium(tmp_path, url, f"--screenshot={path}", size)
    return path


def check_png(path: Path, size: tuple[int, int]) -> None:
    """A real PNG of ``size`` pixels, not a blank one."""
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    length, kind = struct.unpack(">I4s", data[8:16])
    assert kind == b"IHDR" and length == 13
    assert struct.unpack(">II", data[16:24]) == size
    idat, offset = b"", 8
    while offset < len(data):
        length, kind = struct.unpack(">I4s", data[offset : offset + 8])
        if kind == b"IDAT":
            idat += data[offset + 8 : offset + 8 + length]
        offset += 12 + length
    pixels = zlib.decompress(idat)
    assert len(set(pixels)) > 16, "the screenshot is blank"
