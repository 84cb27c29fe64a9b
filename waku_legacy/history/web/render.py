"""The readable history's pages: each one a JSON-able document and the same data as HTML.

Pages (the viewer serves them under its path prefix; ``history export --format html`` writes
them as a static site with relative links):

- the community index: channels with their counts and date ranges, the archive link (magnet
  or Logos Storage CID) and when it was last archived;
- a channel's day: one UTC day's messages, the previous and next days that have messages, a
  jump-to-date form (a plain GET form: no JavaScript);
- a message's permalink: its reply context, reactions, edited/pinned marks and provenance
  (Waku message hash, recovered signer, the archive window it sits in);
- search results with snippets, the query echoed (escaped).

The JSON form of a page (``*_document``) is what the HTML is rendered from, so the two hold
the same data; exports write the message objects of it (:func:`message_document`).

Everything a stranger wrote reaches the HTML only through Jinja2's autoescape (every template,
:class:`~jinja2.StrictUndefined`), or through :func:`~.markdown.render_markdown` (raw HTML off,
links limited to http/https/mailto). No page has a script; the stylesheet is a static file
(``static/history.css``) so that ``style-src 'self'`` holds.

Names: the name shown first is the display name the author's messages carry, else the
three-word alias status-go derives from the key; an ENS name in a message is the sender's
claim (nothing here resolves it), so it is shown as "claims alice.eth", never as the name.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any, Protocol
from urllib.parse import quote, urlencode

import jinja2
from markupsafe import Markup

from waku_legacy.history.model import (
    Author,
    CommunitySummary,
    ContentType,
    HistoryReader,
    ReadableMessage,
    SearchHit,
)
from waku_legacy.history.web.markdown import LINK_REL, render_markdown

__all__ = [
    "CONTENT_TYPE_NAMES",
    "Links",
    "ServerLinks",
    "StaticLinks",
    "channel_document",
    "communities_document",
    "day_document",
    "error_html",
    "index_document",
    "message_document",
    "message_page_document",
    "render_html",
    "render_json",
    "search_document",
    "stylesheet",
]

CONTENT_TYPE_NAMES = {
    ContentType.UNKNOWN: "unknown",
    ContentType.TEXT_PLAIN: "text",
    ContentType.STICKER: "sticker",
    ContentType.STATUS: "status",
    ContentType.EMOJI: "emoji",
    ContentType.TRANSACTION_COMMAND: "transaction",
    ContentType.SYSTEM_MESSAGE_CONTENT_PRIVATE_GROUP: "system",
    ContentType.IMAGE: "image",
    ContentType.AUDIO: "audio",
    ContentType.COMMUNITY: "community",
    ContentType.SYSTEM_MESSAGE_GAP: "system",
    ContentType.CONTACT_REQUEST: "contact-request",
    ContentType.DISCORD_MESSAGE: "discord",
    ContentType.IDENTITY_VERIFICATION: "identity-verification",
    ContentType.SYSTEM_MESSAGE_PINNED_MESSAGE: "system-pinned",
    ContentType.SYSTEM_MESSAGE_MUTUAL_EVENT_SENT: "system",
    ContentType.SYSTEM_MESSAGE_MUTUAL_EVENT_ACCEPTED: "system",
    ContentType.SYSTEM_MESSAGE_MUTUAL_EVENT_REMOVED: "system",
    ContentType.BRIDGE_MESSAGE: "bridge",
}

#: Avatar colours (Status's user colour palette, as its clients draw identicon rings).
AVATAR_COLOURS = (
    "#2946c4", "#887af9", "#51d0f0", "#d37ef4", "#fa6565", "#ffca0f",
    "#7cda00", "#26a69a", "#8b3131", "#9b832f", "#4360df", "#e95460",
)  # fmt: skip
SNIPPET_TERMS = 8  # query words marked in a snippet
REPLY_EXCERPT = 140  # characters of the replied-to text shown above a reply
GROUP_WINDOW_MS = 5 * 60 * 1000  # same author within this: one group (no repeated header)


# -- links ----------------------------------------------------------------------------------


class Links(Protocol):
    """Where a page links to: the viewer's URLs or a static export's relative files."""

    @property
    def static(self) -> bool: ...  # a static export (no server: no search, no date form)

    def home(self) -> str: ...
    def community(self, community_id: str) -> str: ...
    def channel(self, community_id: str, channel_id: str) -> str: ...
    def day(self, community_id: str, channel_id: str, day: dt.date) -> str: ...
    def message(self, community_id: str, message: ReadableMessage) -> str: ...
    def image(self, community_id: str, message_id: str, image_type: str) -> str: ...
    def search(self, community_id: str) -> str | None: ...
    def json(self, html_url: str) -> str | None: ...
    def css(self) -> str: ...


@dataclass(frozen=True, slots=True)
class ServerLinks:
    """The viewer's URLs under ``prefix`` (no trailing slash, e.g. ``/history``)."""

    prefix: str
    static: bool = False

    def home(self) -> str:
        return f"{self.prefix}/"

    def community(self, community_id: str) -> str:
        return f"{self.prefix}/{community_id}/"

    def channel(self, community_id: str, channel_id: str) -> str:
        return f"{self.prefix}/{community_id}/{channel_id}/"

    def day(self, community_id: str, channel_id: str, day: dt.date) -> str:
        return f"{self.prefix}/{community_id}/{channel_id}/{day.isoformat()}"

    def message(self, community_id: str, message: ReadableMessage) -> str:
        return f"{self.prefix}/{community_id}/m/{message.id}"

    def image(self, community_id: str, message_id: str, image_type: str) -> str:
        return f"{self.prefix}/{community_id}/image/{message_id}"

    def search(self, community_id: str) -> str | None:
        return f"{self.prefix}/{community_id}/search"

    def json(self, html_url: str) -> str | None:
        path, _, query = html_url.partition("?")
        path = path + "index.json" if path.endswith("/") else path + ".json"
        return f"{path}?{query}" if query else path

    def css(self) -> str:
        return f"{self.prefix}/static/history.css"


@dataclass(frozen=True, slots=True)
class StaticLinks:
    """A static export's relative links, from a page ``depth`` folders below the root.

    Layout: ``index.html`` (the community), ``history.css``, ``<channel>/index.html`` (its
    days), ``<channel>/<YYYY-MM-DD>.html``, ``images/<message id>.<type>``. A message's
    permalink is its anchor in its day page (a file per message would be millions)."""

    depth: int
    static: bool = True

    @property
    def root(self) -> str:
        return "../" * self.depth

    def home(self) -> str:
        return f"{self.root}index.html"

    def community(self, community_id: str) -> str:
        return f"{self.root}index.html"

    def channel(self, community_id: str, channel_id: str) -> str:
        return f"{self.root}{channel_id}/index.html"

    def day(self, community_id: str, channel_id: str, day: dt.date) -> str:
        return f"{self.root}{channel_id}/{day.isoformat()}.html"

    def message(self, community_id: str, message: ReadableMessage) -> str:
        page = self.day(community_id, message.channel_id, message.day)
        return f"{page}#m-{message.id}"

    def image(self, community_id: str, message_id: str, image_type: str) -> str:
        return f"{self.root}images/{message_id}.{image_type}"

    def search(self, community_id: str) -> str | None:
        return None  # a static site has no server to search

    def json(self, html_url: str) -> str | None:
        return None

    def css(self) -> str:
        return f"{self.root}history.css"


# -- documents (the JSON forms) -------------------------------------------------------------


def _iso(ms: int) -> str | None:
    if ms <= 0:
        return None
    moment = dt.datetime.fromtimestamp(ms / 1000, dt.UTC)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _day_of(ms: int) -> str | None:
    return None if ms <= 0 else dt.datetime.fromtimestamp(ms / 1000, dt.UTC).date().isoformat()


def shown_name(author: Author) -> str:
    """The name shown first: the display name, else the alias (an ENS name is a claim)."""
    name = author.shown_name or author.display_name or author.alias
    if author.ens_name and name == author.ens_name:
        name = author.display_name or author.alias
    return name or author.compressed or author.public_key


def author_document(author: Author) -> dict[str, Any]:
    return {
        "public_key": author.public_key,
        "compressed": author.compressed,
        "alias": author.alias,
        "display_name": author.display_name,
        "ens_claim": author.ens_name,  # unverified: what the messages say
        "shown_name": shown_name(author),
    }


def message_document(message: ReadableMessage) -> dict[str, Any]:
    """One message as the JSON forms and the exports write it."""
    provenance = message.provenance
    return {
        "id": message.id,
        "community_id": message.community_id,
        "channel_id": message.channel_id,
        "author": author_document(message.author),
        "timestamp_ms": message.timestamp_ms,
        "time": _iso(message.timestamp_ms),
        "clock": message.clock,
        "content_type": CONTENT_TYPE_NAMES.get(message.content_type, "unknown"),
        "text": message.text,
        "response_to": message.response_to or None,
        "edited": message.edited,
        "edited_at": _iso(message.edited_at_ms) if message.edited else None,
        "pinned": message.pinned,
        "pinned_by": message.pinned_by or None,
        "reactions": [
            {"emoji": r.emoji, "count": r.count, "authors": list(r.authors)}
            for r in message.reactions
        ],
        "mentions": dict(message.mentions),
        "image": (
            {"type": message.image_type, "size": message.image_size}
            if message.content_type == ContentType.IMAGE and message.image_type
            else None
        ),
        "sticker_hash": message.sticker_hash or None,
        "audio_duration_ms": message.audio_duration_ms or None,
        "discord": (
            {"author": message.discord_author, "timestamp": message.discord_timestamp}
            if message.discord_author or message.discord_timestamp
            else None
        ),
        "provenance": None
        if provenance is None
        else {
            "waku_hash": provenance.waku_hash,
            "content_topic": provenance.content_topic,
            "pubsub_topic": provenance.pubsub_topic or None,
            "signer": provenance.signer,
            "whisper_timestamp": provenance.whisper_timestamp,
            "archive_window": list(provenance.archive_window)
            if provenance.archive_window
            else None,
            "source": provenance.source or None,
        },
    }


def _archive(summary: CommunitySummary) -> dict[str, Any] | None:
    if not summary.archive_link and not summary.last_archived_s:
        return None
    link = summary.archive_link
    kind = "magnet" if link.startswith("magnet:") else "cid" if link else None
    return {
        "link": link or None,
        "kind": kind,
        "last_archived": None
        if not summary.last_archived_s
        else _iso(summary.last_archived_s * 1000),
    }


def _community_head(summary: CommunitySummary) -> dict[str, Any]:
    return {"id": summary.id, "name": summary.name, "description": summary.description}


def index_document(summary: CommunitySummary) -> dict[str, Any]:
    """The community index page's data."""
    return {
        "page": "community",
        "community": {
            **_community_head(summary),
            "messages": summary.messages,
            "description_clock": summary.description_clock,
            "archive": _archive(summary),
        },
        "channels": [
            {
                "id": c.id,
                "name": c.name,
                "description": c.description,
                "messages": c.messages,
                "first": _iso(c.first_ms),
                "last": _iso(c.last_ms),
                "first_day": _day_of(c.first_ms),
                "last_day": _day_of(c.last_ms),
                "deleted": c.deleted,
            }
            for c in summary.channels
        ],
    }


def _channel_head(summary: CommunitySummary, channel_id: str) -> dict[str, Any]:
    for channel in summary.channels:
        if channel.id == channel_id:
            return {"id": channel.id, "name": channel.name, "description": channel.description}
    return {"id": channel_id, "name": "", "description": ""}


def _neighbours(days: Sequence[dt.date], day: dt.date) -> tuple[dt.date | None, dt.date | None]:
    import bisect

    at = bisect.bisect_left(days, day)
    previous = days[at - 1] if at > 0 else None
    after = at + 1 if at < len(days) and days[at] == day else at
    following = days[after] if after < len(days) else None
    return previous, following


def _replied(
    reader: HistoryReader, community_id: str, messages: Iterable[ReadableMessage]
) -> dict[str, ReadableMessage]:
    """The messages replied to (shown ones only: a deleted or hidden one stays absent)."""
    known = {m.id: m for m in messages}
    found: dict[str, ReadableMessage] = {}
    for message in known.values():
        target = message.response_to
        if not target or target in found:
            continue
        original = known.get(target) or reader.message(community_id, target)
        if original is not None:
            found[target] = original
    return found


def _reply_document(original: ReadableMessage | None) -> dict[str, Any] | None:
    if original is None:
        return None
    text = (
        original.text
        if len(original.text) <= REPLY_EXCERPT
        else original.text[:REPLY_EXCERPT] + "…"
    )
    return {
        "id": original.id,
        "channel_id": original.channel_id,
        "author": author_document(original.author),
        "text": text,
        "content_type": CONTENT_TYPE_NAMES.get(original.content_type, "unknown"),
        "timestamp_ms": original.timestamp_ms,
    }


def day_document(
    reader: HistoryReader,
    summary: CommunitySummary,
    channel_id: str,
    day: dt.date,
    *,
    messages: Sequence[ReadableMessage] | None = None,
    days: Sequence[dt.date] | None = None,
) -> dict[str, Any]:
    """A channel's UTC day: its messages, the previous and next days that have any
    (``messages``, ``days``: a selection of them instead of the reader's, for exports)."""
    if messages is None:
        messages = list(reader.day(summary.id, channel_id, day))
    if days is None:
        days = list(reader.days(summary.id, channel_id))
    previous, following = _neighbours(days, day)
    replied = _replied(reader, summary.id, messages)
    entries = []
    for message in messages:
        entry = message_document(message)
        entry["reply"] = _reply_document(replied.get(message.response_to))
        entries.append(entry)
    return {
        "page": "day",
        "community": _community_head(summary),
        "channel": _channel_head(summary, channel_id),
        "day": day.isoformat(),
        "previous_day": previous.isoformat() if previous else None,
        "next_day": following.isoformat() if following else None,
        "messages": entries,
    }


def message_page_document(
    reader: HistoryReader, summary: CommunitySummary, message: ReadableMessage
) -> dict[str, Any]:
    """A message's permalink: the message, what it replies to, where it sits."""
    entry = message_document(message)
    original = reader.message(summary.id, message.response_to) if message.response_to else None
    entry["reply"] = _reply_document(original)
    return {
        "page": "message",
        "community": _community_head(summary),
        "channel": _channel_head(summary, message.channel_id),
        "day": message.day.isoformat(),
        "message": entry,
    }


def search_document(
    summary: CommunitySummary,
    query: str,
    hits: Sequence[SearchHit],
    *,
    page: int,
    page_size: int,
) -> dict[str, Any]:
    """Search results (``hits``: the page asked for, plus one more when there is a next)."""
    shown = list(hits[:page_size])
    return {
        "page": "search",
        "community": _community_head(summary),
        "query": query,
        "page_number": page,
        "next_page": page + 1 if len(hits) > page_size else None,
        "results": [
            {
                "message": message_document(h.message),
                "channel": _channel_head(summary, h.message.channel_id),
                "snippet": h.snippet,
            }
            for h in shown
        ],
    }


def render_json(document: Mapping[str, Any]) -> bytes:
    return json.dumps(document, ensure_ascii=False, separators=(",", ":")).encode()


# -- HTML -----------------------------------------------------------------------------------


@cache
def _environment() -> jinja2.Environment:
    environment = jinja2.Environment(
        loader=jinja2.PackageLoader("waku_legacy.history.web", "templates"),
        autoescape=True,  # every template, whatever its name
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    environment.filters["clock"] = _clock
    environment.filters["long_day"] = _long_day
    environment.filters["utc"] = _utc
    environment.filters["as_date"] = dt.date.fromisoformat
    environment.globals["LINK_REL"] = LINK_REL
    return environment


def stylesheet() -> bytes:
    """``static/history.css`` (served at the CSS link; copied beside a static export)."""
    return resources.files("waku_legacy.history.web").joinpath("static/history.css").read_bytes()


def _clock(ms: int) -> str:
    return dt.datetime.fromtimestamp(ms / 1000, dt.UTC).strftime("%H:%M")


def _utc(ms: int | None) -> str:
    if not ms:
        return "–"
    return dt.datetime.fromtimestamp(ms / 1000, dt.UTC).strftime("%Y-%m-%d %H:%M UTC")


def _long_day(day: str) -> str:
    date = dt.date.fromisoformat(day)
    return f"{date.strftime('%A')}, {date.day} {date.strftime('%B %Y')}"


_INITIAL = re.compile(r"\w", re.UNICODE)


def _avatar(author: Mapping[str, Any]) -> dict[str, str]:
    """Initials and a colour from the key (the same key: the same colour everywhere)."""
    words = str(author["shown_name"]).split()
    initials = "".join(m.group(0) for w in words[:2] if (m := _INITIAL.search(w)))
    digest = hashlib.sha256(str(author["public_key"]).encode()).digest()
    return {
        "initials": (initials or "?").upper()[:2],
        "colour_class": f"c{digest[0] % len(AVATAR_COLOURS)}",
    }


def _short_key(compressed: str) -> str:
    return compressed if len(compressed) <= 14 else f"{compressed[:7]}…{compressed[-4:]}"


def _marked(snippet: str, query: str) -> list[tuple[str, bool]]:
    """The snippet cut at the query's words: (text, is_match) pieces, escaped by the template."""
    words = [w for w in re.findall(r"\w+", query, re.UNICODE) if len(w) > 1][:SNIPPET_TERMS]
    if not words:
        return [(snippet, False)]
    pattern = re.compile("|".join(re.escape(w) for w in words), re.IGNORECASE)
    pieces: list[tuple[str, bool]] = []
    position = 0
    for match in pattern.finditer(snippet):
        if match.start() > position:
            pieces.append((snippet[position : match.start()], False))
        pieces.append((match.group(0), True))
        position = match.end()
    if position < len(snippet):
        pieces.append((snippet[position:], False))
    return pieces


@dataclass(frozen=True, slots=True)
class _View:
    """What a template needs beside the document: links and the HTML of message texts."""

    links: Links
    community_id: str
    messages: Mapping[str, ReadableMessage]

    def body(self, entry: Mapping[str, Any]) -> Markup:
        # render_markdown escapes the text (raw HTML off) and the mentioned names
        return Markup(render_markdown(str(entry["text"]), entry.get("mentions") or {}))

    def permalink(self, entry: Mapping[str, Any]) -> str:
        message = self.messages.get(str(entry["id"]))
        if message is None:
            return "#"
        return self.links.message(self.community_id, message)

    def reply_link(self, reply: Mapping[str, Any]) -> str:
        message = self.messages.get(str(reply["id"]))
        return "#" if message is None else self.links.message(self.community_id, message)

    def image(self, entry: Mapping[str, Any]) -> str:
        image = entry["image"]
        return self.links.image(self.community_id, str(entry["id"]), str(image["type"]))


def _grouped(entries: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Mark messages that continue the previous one's group (same author, within 5 minutes,
    no reply): Status draws them without a repeated avatar and name."""
    out: list[dict[str, Any]] = []
    previous: Mapping[str, Any] | None = None
    for entry in entries:
        continued = (
            previous is not None
            and previous["author"]["public_key"] == entry["author"]["public_key"]
            and 0 <= entry["timestamp_ms"] - previous["timestamp_ms"] <= GROUP_WINDOW_MS
            and entry.get("reply") is None
            and entry["content_type"] not in ("system", "system-pinned")
        )
        out.append({"entry": entry, "continued": continued})
        previous = entry
    return out


def render_html(
    document: Mapping[str, Any],
    links: Links,
    *,
    messages: Iterable[ReadableMessage] = (),
    noindex: bool = True,
    channel_days: Sequence[str] = (),
) -> str:
    """A page's HTML from its document (``messages``: the ReadableMessages behind it, for
    permalinks; ``channel_days``: a static export's list of a channel's days)."""
    kind = str(document["page"])
    community_id = str(document["community"]["id"]) if "community" in document else ""
    known: dict[str, ReadableMessage] = {}
    for message in messages:
        known[message.id] = message
    view = _View(links, community_id, known)
    template = _environment().get_template(f"{kind}.html")
    self_url = _self_url(document, links, known)
    context: dict[str, Any] = {
        "doc": document,
        "links": links,
        "view": view,
        "noindex": noindex,
        "json_url": links.json(self_url) if self_url else None,
        "avatar": _avatar,
        "short_key": _short_key,
        "marked": _marked,
        "grouped": _grouped,
        "channel_days": channel_days,
        "search_url": links.search(community_id) if community_id else None,
    }
    return template.render(context)


def _self_url(
    document: Mapping[str, Any], links: Links, known: Mapping[str, ReadableMessage]
) -> str | None:
    kind = document["page"]
    community_id = str(document.get("community", {}).get("id", ""))
    if kind == "community":
        return links.community(community_id)
    if kind == "day":
        day = dt.date.fromisoformat(str(document["day"]))
        return links.day(community_id, str(document["channel"]["id"]), day)
    if kind == "message":
        message = known.get(str(document["message"]["id"]))
        return None if message is None else links.message(community_id, message)
    if kind == "channel":
        return links.channel(community_id, str(document["channel"]["id"]))
    if kind == "communities":
        return links.home()
    if kind == "search":
        base = links.search(community_id)
        if base is None:
            return None
        query = {"q": str(document["query"])}
        if document["page_number"] > 1:
            query["page"] = str(document["page_number"])
        return f"{base}?{urlencode(query, quote_via=quote)}"
    return None


def channel_document(
    reader: HistoryReader, summary: CommunitySummary, channel_id: str
) -> dict[str, Any]:
    """A channel's days that have messages (and, in the viewer, the jump-to-date form)."""
    return {
        "page": "channel",
        "community": _community_head(summary),
        "channel": _channel_head(summary, channel_id),
        "days": [d.isoformat() for d in reader.days(summary.id, channel_id)],
    }


def communities_document(summaries: Sequence[CommunitySummary]) -> dict[str, Any]:
    """The viewer's root: the communities it shows."""
    return {
        "page": "communities",
        "communities": [
            {**_community_head(s), "messages": s.messages, "channels": len(s.channels)}
            for s in summaries
        ],
    }


def error_html(status: int, reason: str, links: Links, *, noindex: bool = True) -> str:
    """An error page (the reason is escaped like any other text)."""
    template = _environment().get_template("error.html")
    return template.render(status=status, reason=reason, links=links, noindex=noindex)


#: (document, links) -> HTML, for callers that pass the function around
Renderer = Callable[..., str]
