"""``history export``: a community's readable history as files a person keeps.

Formats (DiscordChatExporter's, for people who know it):

- ``html``: the viewer's pages as a static site with relative links (open ``index.html`` from
  disk, or host the folder anywhere: a torrent, Logos Storage): ``index.html`` (the
  community), ``history.css``, ``<channel uuid>/index.html`` (its days),
  ``<channel uuid>/<YYYY-MM-DD>.html`` (a message's permalink is its anchor there, with its
  provenance folded under it) and ``images/<message id>.<type>`` (sniffed bytes only);
- ``json``: per channel one document ``{"community", "channel", "messages": [...]}``;
- ``jsonl``: per channel one message object a line;
- ``csv``: per channel one row a message (:data:`CSV_COLUMNS`);
- ``txt``: per channel a plain-text transcript;
- ``md``: per channel Markdown, a heading per day (the texts' own Markdown kept; ``<``, ``>``
  and ``&`` escaped so that no viewer renders a stranger's HTML).

Message objects are the JSON form's (:func:`~.web.render.message_document`). Channel files are
named ``<name>-<uuid's first 8>.<ext>`` with the name reduced to ``[A-Za-z0-9_-]`` (a
channel name is a stranger's text and never a path). Memory stays flat: messages are read from
the reader in bounded batches and written as they come (a static site keeps one day's page in
memory). Everything is written into a temporary folder beside ``out`` and renamed into place
when complete: an interrupted export leaves the previous one, if any, untouched.
"""

from __future__ import annotations

import csv
import datetime as dt
import json
import os
import re
import shutil
import tempfile
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from waku_legacy.errors import ConfigError, WakuLegacyError
from waku_legacy.history.model import (
    ChannelSummary,
    CommunitySummary,
    ContentType,
    HistoryReader,
    ReadableMessage,
    ViewPolicy,
)
from waku_legacy.history.web import render
from waku_legacy.history.web.images import sniff_image

__all__ = [
    "CSV_COLUMNS",
    "FORMATS",
    "ExportCounts",
    "ExportFilter",
    "channel_file_name",
    "export_history",
    "index_reader",
]

FORMATS = ("html", "json", "jsonl", "csv", "txt", "md")
CSV_COLUMNS = (
    "id", "time", "timestamp_ms", "channel_id", "channel", "author_key", "author_compressed",
    "author_alias", "author_display_name", "author_ens_claim", "author_shown_name",
    "content_type", "text", "response_to", "edited", "edited_at", "pinned", "reactions",
    "image_type", "sticker_hash", "audio_duration_ms", "discord_author", "discord_timestamp",
    "waku_hash", "signer", "archive_window",
)  # fmt: skip

#: Called with the number of messages written since the last call.
Advance = Callable[[int], None]


@dataclass(frozen=True, slots=True)
class ExportFilter:
    """Which messages: one channel, a time range ([after_ms, before_ms)), one author."""

    channel_id: str | None = None
    after_ms: int | None = None
    before_ms: int | None = None
    author: str | None = None  # "0x04…"

    def keeps(self, message: ReadableMessage) -> bool:
        if self.after_ms is not None and message.timestamp_ms < self.after_ms:
            return False
        if self.before_ms is not None and message.timestamp_ms >= self.before_ms:
            return False
        return self.author is None or message.author.public_key == self.author


@dataclass
class ExportCounts:
    messages: int = 0
    channels: int = 0
    pages: int = 0  # html: day pages
    images: int = 0  # html: image files written
    images_refused: int = 0  # html: image messages whose bytes did not sniff or were too big
    files: list[str] = field(default_factory=list)  # relative paths of what was written

    def to_json(self) -> dict[str, Any]:
        return {
            "messages": self.messages, "channels": self.channels, "pages": self.pages,
            "images": self.images, "images_refused": self.images_refused,
            "files": len(self.files),
        }  # fmt: skip


_UNSAFE = re.compile(r"[^A-Za-z0-9_-]+")


def channel_file_name(channel: ChannelSummary, extension: str) -> str:
    """A channel's file name: its name made path-safe, and its uuid's first 8 digits."""
    name = _UNSAFE.sub("_", channel.name).strip("_")[:48] or "channel"
    return f"{name}-{channel.id[:8]}.{extension}"


def export_history(
    reader: HistoryReader,
    community_id: str,
    fmt: str,
    out: Path,
    *,
    selection: ExportFilter | None = None,
    advance: Advance | None = None,
    noindex: bool = True,
    workers: int = 1,
    reader_factory: Callable[[], HistoryReader] | None = None,
) -> ExportCounts:
    """Write the community's history as ``fmt`` into the folder ``out`` (replaced whole).

    ``html`` with ``workers`` > 1 and a ``reader_factory`` (picklable, e.g.
    ``functools.partial(index_reader, dsn, policy)``) renders the day pages in that many
    processes, each with a reader of its own; the pages are the same bytes."""
    if fmt not in FORMATS:
        raise ConfigError(f"history export: --format must be one of {', '.join(FORMATS)}")
    selection = selection or ExportFilter()
    summary = reader.community(community_id)
    if summary is None:
        raise ConfigError(f"history export: no history of {community_id} in the source given")
    channels = [c for c in summary.channels
                if selection.channel_id is None or c.id == selection.channel_id]  # fmt: skip
    if selection.channel_id is not None and not channels:
        known = ", ".join(f"{c.name or '?'} ({c.id})" for c in summary.channels) or "none"
        raise ConfigError(
            f"history export: --channel {selection.channel_id} is not a channel of "
            f"{community_id} (channels: {known})"
        )
    out = out.resolve()
    out.parent.mkdir(parents=True, exist_ok=True)
    counts = ExportCounts()
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.", suffix=".tmp", dir=out.parent))
    try:
        writer = _StaticSite if fmt == "html" else _ChannelFiles
        writer(reader, summary, tmp, counts, selection, advance or _no_advance,
               fmt, noindex, workers, reader_factory).write(channels)  # fmt: skip
        _replace_folder(tmp, out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return counts


def _replace_folder(new: Path, out: Path) -> None:
    """``new`` renamed to ``out``; an existing ``out`` folder moved aside first, then removed.
    Every file is on disk before the rename (fsynced by a few threads at once: a static site
    is thousands of pages, and each fsync waits on the disk)."""
    from concurrent.futures import ThreadPoolExecutor

    files: list[Path] = []
    folders: list[Path] = []
    for walked, _, names in os.walk(new):
        files += [Path(walked) / name for name in names]
        folders.append(Path(walked))
    with ThreadPoolExecutor(max_workers=8, thread_name_prefix="export-fsync") as pool:
        list(pool.map(_fsync, files))
    for folder in folders:
        _fsync(folder)
    if out.exists() and not out.is_dir():
        raise ConfigError(f"history export: --out {out} is a file, not a folder")
    old: Path | None = None
    if out.exists():
        old = out.with_name(f".{out.name}.old-{os.getpid()}")
        os.replace(out, old)
    os.replace(new, out)
    _fsync(out.parent)
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)


def _fsync(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


@dataclass
class _Writer:
    reader: HistoryReader
    summary: CommunitySummary
    root: Path
    counts: ExportCounts
    selection: ExportFilter
    advance: Advance
    fmt: str
    noindex: bool
    workers: int = 1
    reader_factory: Callable[[], HistoryReader] | None = None

    def messages(self, channel: ChannelSummary) -> Iterator[ReadableMessage]:
        s = self.selection
        return self.reader.iter_messages(
            self.summary.id, channel.id, after_ms=s.after_ms, before_ms=s.before_ms,
            author=s.author,
        )  # fmt: skip

    def open(self, relative: str) -> TextIO:
        self.counts.files.append(relative)
        path = self.root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        return path.open("w", encoding="utf-8", newline="")


# -- one file per channel ---------------------------------------------------------------------


def _dump(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def _csv_row(entry: dict[str, Any], channel: ChannelSummary) -> list[Any]:
    author, prov = entry["author"], entry["provenance"] or {}
    discord, image = entry["discord"] or {}, entry["image"] or {}
    window = prov.get("archive_window")
    reactions = "; ".join(f"{r['emoji']} {r['count']}" for r in entry["reactions"])
    return [
        entry["id"], entry["time"], entry["timestamp_ms"], entry["channel_id"], channel.name,
        author["public_key"], author["compressed"], author["alias"], author["display_name"],
        author["ens_claim"], author["shown_name"], entry["content_type"], entry["text"],
        entry["response_to"] or "", entry["edited"], entry["edited_at"] or "", entry["pinned"],
        reactions, image.get("type", ""), entry["sticker_hash"] or "",
        entry["audio_duration_ms"] or "", discord.get("author", ""), discord.get("timestamp", ""),
        prov.get("waku_hash", ""), prov.get("signer", ""),
        f"{window[0]}-{window[1]}" if window else "",
    ]  # fmt: skip


def _md_text(text: str) -> str:
    """A stranger's text in a Markdown file: its Markdown kept, any HTML made text."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


_MD_SPECIAL = re.compile(r"([\\`*_\[\]<>&~|#])")


def _md_name(text: str) -> str:
    """A name in Markdown: every character Markdown gives a meaning to escaped."""
    return _MD_SPECIAL.sub(r"\\\1", text.replace("\n", " "))


def _who(entry: dict[str, Any]) -> str:
    author = entry["author"]
    parts = [author["compressed"]]
    if author["alias"] and author["alias"] != author["shown_name"]:
        parts.append(author["alias"])
    if author["ens_claim"]:
        parts.append(f"claims {author['ens_claim']}")
    return f"{author['shown_name']} ({', '.join(parts)})"


def _content_line(entry: dict[str, Any]) -> str:
    kind = entry["content_type"]
    if kind == "image":
        return "[image]" if entry["image"] else "[image not kept: not JPEG/PNG/WebP/GIF]"
    if kind == "sticker":
        return "[sticker]"
    if kind == "audio":
        seconds = (entry["audio_duration_ms"] or 0) // 1000
        return f"[voice message {seconds // 60}:{seconds % 60:02d}]"
    return ""


def _marks(entry: dict[str, Any]) -> list[str]:
    marks = []
    if entry["response_to"]:
        marks.append(f"in reply to {entry['response_to']}")
    if entry["edited"]:
        marks.append("edited")
    if entry["pinned"]:
        marks.append("pinned")
    if entry["discord"]:
        marks.append(f"from Discord: {entry['discord']['author']}")
    return marks


class _ChannelFiles(_Writer):
    def write(self, channels: Sequence[ChannelSummary]) -> None:
        for channel in channels:
            self.counts.channels += 1
            name = channel_file_name(channel, self.fmt)
            with self.open(name) as handle:
                getattr(self, f"_{self.fmt}")(handle, channel)

    def _entries(self, channel: ChannelSummary) -> Iterator[dict[str, Any]]:
        for message in self.messages(channel):
            self.counts.messages += 1
            self.advance(1)
            yield render.message_document(message)

    def _head(self, channel: ChannelSummary) -> dict[str, Any]:
        return {
            "community": {"id": self.summary.id, "name": self.summary.name},
            "channel": {"id": channel.id, "name": channel.name,
                        "description": channel.description},
        }  # fmt: skip

    def _json(self, handle: TextIO, channel: ChannelSummary) -> None:
        head = _dump(self._head(channel))
        handle.write(head[:-1] + ',"messages":[')
        for number, entry in enumerate(self._entries(channel)):
            handle.write(("," if number else "") + "\n" + _dump(entry))
        handle.write("\n]}\n")

    def _jsonl(self, handle: TextIO, channel: ChannelSummary) -> None:
        for entry in self._entries(channel):
            handle.write(_dump(entry) + "\n")

    def _csv(self, handle: TextIO, channel: ChannelSummary) -> None:
        rows = csv.writer(handle)
        rows.writerow(CSV_COLUMNS)
        for entry in self._entries(channel):
            rows.writerow(_csv_row(entry, channel))

    def _txt(self, handle: TextIO, channel: ChannelSummary) -> None:
        rule = "=" * 72
        handle.write(f"{rule}\nCommunity: {self.summary.name} ({self.summary.id})\n")
        handle.write(f"Channel: #{channel.name} ({channel.id})\n")
        if channel.description:
            handle.write(f"Topic: {channel.description}\n")
        handle.write(f"{rule}\n\n")
        for entry in self._entries(channel):
            stamp = render._utc(entry["timestamp_ms"])
            marks = _marks(entry)
            handle.write(
                f"[{stamp}] {_who(entry)}{' (' + '; '.join(marks) + ')' if marks else ''}\n"
            )
            body = "\n".join(x for x in (_content_line(entry), entry["text"]) if x)
            if body:
                handle.write(body + "\n")
            if entry["reactions"]:
                pills = ", ".join(f"{r['emoji']} {r['count']}" for r in entry["reactions"])
                handle.write(f"{{Reactions}} {pills}\n")
            handle.write("\n")

    def _md(self, handle: TextIO, channel: ChannelSummary) -> None:
        handle.write(f"# {_md_name(self.summary.name)}: \\#{_md_name(channel.name)}\n\n")
        if channel.description:
            handle.write(f"> {_md_name(channel.description)}\n\n")
        day = ""
        for entry in self._entries(channel):
            this_day = str(entry["time"])[:10]
            if this_day != day:
                day = this_day
                handle.write(f"## {day}\n\n")
            marks = _marks(entry)
            clock = render._clock(entry["timestamp_ms"])
            who = _md_name(_who(entry))
            handle.write(f"**{who}** · {clock} UTC{' · ' + '; '.join(marks) if marks else ''}\n\n")
            body = "\n".join(x for x in (_content_line(entry), _md_text(entry["text"])) if x)
            if body:
                handle.write(body + "\n\n")
            if entry["reactions"]:
                pills = " ".join(f"{r['emoji']} {r['count']}" for r in entry["reactions"])
                handle.write(f"_{pills}_\n\n")


# -- the static site --------------------------------------------------------------------------


def _no_advance(done: int) -> None:
    del done


def index_reader(dsn: str, policy: ViewPolicy) -> HistoryReader:
    """A reader over the readable index at ``dsn`` (a picklable ``reader_factory`` with
    :func:`functools.partial`: each export process opens its own)."""
    from waku_legacy.history.index import HistoryIndex

    return HistoryIndex.open(dsn).reader(policy)


DAYS_PER_TASK = 64  # day pages one export process renders per task
_PROCESS_READER: HistoryReader | None = None  # an export process's own reader


def _render_days(
    factory: Callable[[], HistoryReader],
    summary: CommunitySummary,
    root: Path,
    selection: ExportFilter,
    noindex: bool,
    channel: ChannelSummary,
    chunk: Sequence[dt.date],
    days: list[dt.date],
) -> ExportCounts:
    """An export process's task: ``chunk``'s day pages of ``channel``."""
    global _PROCESS_READER
    if _PROCESS_READER is None:
        _PROCESS_READER = factory()
    counts = ExportCounts()
    site = _StaticSite(_PROCESS_READER, summary, root, counts, selection, _no_advance, "html",
                       noindex)  # fmt: skip
    for day in chunk:
        site._day(channel, day, days)
    return counts


class _StaticSite(_Writer):
    def write(self, channels: Sequence[ChannelSummary]) -> None:
        (self.root / "history.css").write_bytes(render.stylesheet())
        self.counts.files.append("history.css")
        shown = self._summary_shown(channels)
        with self.open("index.html") as handle:
            handle.write(self._html(render.index_document(shown), 0))
        tasks: list[tuple[ChannelSummary, list[dt.date], list[dt.date]]] = []
        for channel in channels:
            self.counts.channels += 1
            days = self._channel(channel)
            for at in range(0, len(days), DAYS_PER_TASK):
                tasks.append((channel, days[at : at + DAYS_PER_TASK], days))
        if self.workers > 1 and self.reader_factory is not None and len(tasks) > 1:
            self._in_processes(tasks, self.reader_factory)
            return
        for channel, chunk, days in tasks:
            for day in chunk:
                self._day(channel, day, days)

    def _in_processes(
        self,
        tasks: list[tuple[ChannelSummary, list[dt.date], list[dt.date]]],
        factory: Callable[[], HistoryReader],
    ) -> None:
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor, as_completed

        context = multiprocessing.get_context("spawn")  # no inherited connections
        with ProcessPoolExecutor(max_workers=self.workers, mp_context=context) as pool:
            futures = [
                pool.submit(_render_days, factory, self.summary, self.root, self.selection,
                            self.noindex, channel, chunk, days)
                for channel, chunk, days in tasks
            ]  # fmt: skip
            for future in as_completed(futures):
                done = future.result()
                self.counts.messages += done.messages
                self.counts.pages += done.pages
                self.counts.images += done.images
                self.counts.images_refused += done.images_refused
                self.counts.files += done.files
                self.advance(done.messages)

    def _summary_shown(self, channels: Sequence[ChannelSummary]) -> CommunitySummary:
        import dataclasses

        return dataclasses.replace(self.summary, channels=tuple(channels))

    def _html(self, document: dict[str, Any], depth: int, **extra: Any) -> str:
        return render.render_html(
            document, render.StaticLinks(depth), noindex=self.noindex, **extra
        )

    def _days(self, channel: ChannelSummary) -> list[dt.date]:
        """The channel's days within the selection (an author filter: days they wrote on)."""
        s = self.selection
        days = list(self.reader.days(self.summary.id, channel.id))
        if s.after_ms is not None:
            first = dt.datetime.fromtimestamp(s.after_ms / 1000, dt.UTC).date()
            days = [d for d in days if d >= first]
        if s.before_ms is not None:
            last = dt.datetime.fromtimestamp((s.before_ms - 1) / 1000, dt.UTC).date()
            days = [d for d in days if d <= last]
        if s.author is not None:
            written = {m.day for m in self.messages(channel)}
            days = [d for d in days if d in written]
        return days

    def _channel(self, channel: ChannelSummary) -> list[dt.date]:
        """The channel's page of days; returns the days."""
        days = self._days(channel)
        document = {
            "page": "channel",
            "community": {"id": self.summary.id, "name": self.summary.name,
                          "description": self.summary.description},
            "channel": {"id": channel.id, "name": channel.name,
                        "description": channel.description},
            "days": [d.isoformat() for d in days],
        }  # fmt: skip
        with self.open(f"{channel.id}/index.html") as handle:
            handle.write(self._html(document, 1))
        return days

    def _day(self, channel: ChannelSummary, day: dt.date, days: list[dt.date]) -> None:
        reader, community_id = self.reader, self.summary.id
        messages = [m for m in reader.day(community_id, channel.id, day) if self.selection.keeps(m)]
        document = render.day_document(
            reader, self.summary, channel.id, day, messages=messages, days=days
        )
        originals = []
        for message in messages:
            if message.response_to:
                original = reader.message(community_id, message.response_to)
                if original is not None:
                    originals.append(original)
            if message.content_type == ContentType.IMAGE and message.image_type:
                self._image(message)
        with self.open(f"{channel.id}/{day.isoformat()}.html") as handle:
            handle.write(self._html(document, 1, messages=[*messages, *originals]))
        self.counts.pages += 1
        self.counts.messages += len(messages)
        self.advance(len(messages))

    def _image(self, message: ReadableMessage) -> None:
        found = self.reader.image(self.summary.id, message.id)
        try:
            if found is None:
                raise ConfigError("no image bytes")
            image = sniff_image(found[1])
        except WakuLegacyError:
            self.counts.images_refused += 1
            return
        relative = f"images/{message.id}.{image.image_type}"
        path = self.root / relative
        path.parent.mkdir(exist_ok=True)
        path.write_bytes(image.data)
        self.counts.files.append(relative)
        self.counts.images += 1
