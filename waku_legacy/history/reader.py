"""The :class:`~.model.HistoryReader` over the readable tables of :mod:`.index`.

Every read is one indexed query (a day page: the (community, channel, day) range in index
order; a permalink: the (community, id) key; a search: the full-text index read newest
first, FTS5's by time-ordered rowid, PostgreSQL's GIN index beside the (community, rid)
index) plus, when a page mentions keys, one lookup of their names. What the
:class:`~.model.ViewPolicy` hides is excluded in the query itself, so counts, pages and
offsets agree: deleted messages always, authors banned in the newest signed description
(``hide_banned``), the takedown ids and authors.

A user's search words are never engine syntax: the query is cut into words (``\\w+``), each
quoted as one FTS5 string (``"word"``, implicit AND) or passed to PostgreSQL's
``plainto_tsquery('simple', …)``.
"""

from __future__ import annotations

import datetime as dt
import json
import re
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

from waku_legacy.history.index import DAY_MS, author_names
from waku_legacy.history.model import (
    Author,
    ChannelSummary,
    CommunitySummary,
    Provenance,
    Reaction,
    ReadableMessage,
    SearchHit,
    ViewPolicy,
)

if TYPE_CHECKING:
    from waku_legacy.history.index import HistoryIndex

__all__ = ["ITER_BATCH", "MAX_SEARCH_LIMIT", "IndexReader", "query_terms"]

ITER_BATCH = 1000  # rows per read of iter_messages
MAX_SEARCH_LIMIT = 200
MAX_SEARCH_OFFSET = 10_000
PG_RECENT = 5_000  # a PostgreSQL search reads this many newest rows before the GIN index
MAX_TERMS = 16
MAX_TERM_LENGTH = 64
SNIPPET_CONTEXT = 80  # characters each side of the first match
IMAGE_TYPES = frozenset({"jpeg", "png", "webp", "gif"})

_COLUMNS = (
    "m.id, m.channel, m.ts_ms, m.clock, m.author, m.content_type, m.text, m.response_to,"
    " m.ens_name, m.display_name, m.sticker_hash, m.image_type, m.image_size, m.audio_ms,"
    " m.discord_author, m.discord_timestamp, m.edited_clock, m.pinned, m.pinned_by,"
    " m.reactions, m.mentions, m.waku_hash, m.content_topic, m.pubsub_topic, m.author,"
    " m.whisper_ts, m.window_from, m.window_to, m.source, m.day,"
    " a.compressed, a.alias, a.display_name"
)
_FROM = "history_messages m LEFT JOIN history_authors a ON a.key = m.author"
_WORD = re.compile(r"\w+")


def query_terms(query: str) -> list[str]:
    """The words of a user's query (at most 16, each at most 64 characters), lowercased."""
    return [w[:MAX_TERM_LENGTH].lower() for w in _WORD.findall(query or "")][:MAX_TERMS]


def _snippet(text: str, terms: Sequence[str]) -> str:
    """Plain text around the first place a term occurs (case-insensitive)."""
    lowered = text.lower()
    found = [at for at in (lowered.find(t) for t in terms) if at >= 0]
    at = min(found) if found else 0
    start = max(0, at - SNIPPET_CONTEXT)
    end = min(len(text), at + SNIPPET_CONTEXT * 2)
    piece = " ".join(text[start:end].split())
    return ("…" if start > 0 else "") + piece + ("…" if end < len(text) else "")


class IndexReader:
    """What the viewer and the exports read, over one :class:`~.index.HistoryIndex`."""

    def __init__(self, index: HistoryIndex, policy: ViewPolicy) -> None:
        self.index = index
        self.db = index.db
        self.policy = policy

    # -- the policy as SQL ----------------------------------------------------------------------

    def _shown(self) -> tuple[str, list[object]]:
        """The WHERE clauses (after ``m.community = ?``) that hide what is not shown."""
        sql = " AND m.deleted = 0"
        params: list[object] = []
        if self.policy.hide_banned:
            sql += (
                " AND NOT EXISTS (SELECT 1 FROM history_banned b"
                " WHERE b.community = m.community AND b.author = m.author)"
            )
        for column, values in (("m.id", self.policy.takedown_ids),
                               ("m.author", self.policy.takedown_authors)):  # fmt: skip
            if values:
                listed = sorted(v.lower() for v in values)
                sql += self._not_in(column)
                params.append(self._listed(listed))
        return sql, params

    def _not_in(self, column: str) -> str:
        """`` AND column`` not in one list parameter (:meth:`_listed`): any length (SQLite
        takes at most 32,766 parameters, a takedown list may hold more)."""
        if self.db.postgres:
            return f" AND NOT ({column} = ANY(?))"
        return f" AND {column} NOT IN (SELECT value FROM json_each(?))"

    def _listed(self, values: list[str]) -> object:
        return values if self.db.postgres else json.dumps(values)

    def _hidden_authors(self, community_id: str) -> list[str]:
        keys = set(self.policy.takedown_authors)
        if self.policy.hide_banned:
            keys.update(
                k for (k,) in self.db.execute(
                    "SELECT author FROM history_banned WHERE community = ?", [community_id]
                )
            )  # fmt: skip
        return sorted(k.lower() for k in keys)

    def _hidden_per_day(
        self, community_id: str, channel_id: str | None
    ) -> dict[tuple[str, int], int]:
        """Non-deleted messages the policy hides, per (channel, day)."""
        hidden: dict[tuple[str, int], int] = {}
        where = " AND m.channel = ?" if channel_id is not None else ""
        extra: list[object] = [channel_id] if channel_id is not None else []
        authors = self._hidden_authors(community_id)
        for at in range(0, len(authors), 500):
            clause, values = self.db.in_list("m.author", authors[at : at + 500])
            for channel, day, n in self.db.execute(
                "SELECT m.channel, m.day, count(*) FROM history_messages m WHERE"
                f" m.community = ? AND {clause}{where} AND m.deleted = 0"
                " GROUP BY m.channel, m.day",
                [community_id, *values, *extra],
            ):
                hidden[channel, int(day)] = hidden.get((channel, int(day)), 0) + int(n)
        ids = sorted(i.lower() for i in self.policy.takedown_ids)
        for at in range(0, len(ids), 500):
            clause, values = self.db.in_list("m.id", ids[at : at + 500])
            author_clause = ""
            author_values: list[object] = []
            if authors:  # already counted above
                author_clause = self._not_in("m.author")
                author_values = [self._listed(authors)]
            for channel, day, n in self.db.execute(
                "SELECT m.channel, m.day, count(*) FROM history_messages m WHERE"
                f" m.community = ? AND {clause}{where} AND m.deleted = 0{author_clause}"
                " GROUP BY m.channel, m.day",
                [community_id, *values, *extra, *author_values],
            ):
                hidden[channel, int(day)] = hidden.get((channel, int(day)), 0) + int(n)
        return hidden

    # -- rows -> messages ------------------------------------------------------------------------

    def _messages(self, rows: Sequence[Sequence[Any]], community_id: str) -> list[ReadableMessage]:
        mentioned: set[str] = set()
        for row in rows:
            if row[20] not in ("", "[]"):
                mentioned.update(json.loads(row[20]))
        names = self._names(sorted(mentioned))
        return [self._message(row, community_id, names) for row in rows]

    def _names(self, keys: Sequence[str]) -> dict[str, str]:
        """Key -> the name shown for it (newest display name, else its alias)."""
        names: dict[str, str] = {}
        for at in range(0, len(keys), 500):
            clause, values = self.db.in_list("key", keys[at : at + 500])
            for key, alias, display in self.db.execute(
                f"SELECT key, alias, display_name FROM history_authors WHERE {clause}", values
            ):
                names[key] = display or alias
        for key in keys:
            if key not in names:
                try:
                    names[key] = author_names(key)[1]
                except Exception:  # a mention of something that is no key: shown as written
                    names[key] = key
        return names

    @staticmethod
    def _message(row: Sequence[Any], community_id: str, names: dict[str, str]) -> ReadableMessage:
        (message_id, channel, ts_ms, clock, author, content_type, text, response_to, ens,
         message_name, sticker, image_type, image_size, audio_ms, discord_author,
         discord_ts, edited_clock, pinned, pinned_by, reactions, mentions, waku_hash,
         content_topic, pubsub_topic, signer, whisper_ts, window_from, window_to, source, _day,
         compressed, alias, display) = row  # fmt: skip
        if compressed is None:
            compressed, alias = author_names(author)
        display_name = display or message_name or ""
        shown = display_name or ens or alias
        return ReadableMessage(
            id=message_id,
            community_id=community_id,
            channel_id=channel,
            author=Author(author, compressed, alias, display_name, ens, shown),
            clock=int(clock),
            timestamp_ms=int(ts_ms),
            content_type=int(content_type),
            text=text,
            response_to=response_to,
            edited=bool(edited_clock),
            edited_at_ms=int(edited_clock),
            pinned=bool(pinned),
            pinned_by=pinned_by,
            reactions=tuple(
                Reaction(emoji, len(who), tuple(who)) for emoji, who in json.loads(reactions)
            ),
            sticker_hash=sticker,
            image_type=image_type,
            image_size=int(image_size),
            audio_duration_ms=int(audio_ms),
            discord_author=discord_author,
            discord_timestamp=discord_ts,
            mentions={k: names[k] for k in json.loads(mentions)} if mentions != "[]" else {},
            provenance=Provenance(
                waku_hash,
                content_topic,
                pubsub_topic,
                signer,
                int(whisper_ts),
                None if window_from is None else (int(window_from), int(window_to)),
                source,
            ),
        )

    # -- HistoryReader ---------------------------------------------------------------------------

    def communities(self) -> Sequence[CommunitySummary]:
        ids = sorted(
            c for (c,) in self.db.execute(
                "SELECT community FROM history_communities UNION"
                " SELECT DISTINCT community FROM history_channels"
            )
        )  # fmt: skip
        return [s for s in (self.community(c) for c in ids) if s is not None]

    def community(self, community_id: str) -> CommunitySummary | None:
        described = self.db.execute(
            "SELECT name, clock, channels, archive_link, last_archived_s, description"
            " FROM history_communities WHERE community = ?",
            [community_id],
        )
        counted = {
            channel: int(n) for channel, n in self.db.execute(
                "SELECT channel, messages FROM history_channels WHERE community = ?",
                [community_id],
            )
        }  # fmt: skip
        if not described and not counted:
            return None
        name, clock, channels_json, link, last, about = (
            described[0] if described else ("", 0, "[]", "", 0, "")
        )
        # [uuid, name, position, description]; rows written before 2026-11-29 lack the last
        entries = json.loads(channels_json)
        listed = [(entry[0], entry[1]) for entry in entries]
        abouts = {entry[0]: entry[3] if len(entry) > 3 else "" for entry in entries}
        order = [*listed, *sorted((c, "") for c in counted if c not in dict(listed))]
        hidden: dict[str, int] = {}
        for (channel, _), n in self._hidden_per_day(community_id, None).items():
            hidden[channel] = hidden.get(channel, 0) + n
        channels = []
        for uuid, channel_name in order:
            shown = counted.get(uuid, 0) - hidden.get(uuid, 0)
            first, last_ms = self._ends(community_id, uuid) if shown > 0 else (0, 0)
            channels.append(ChannelSummary(
                uuid, channel_name, abouts.get(uuid, ""), shown, first, last_ms,
                deleted=bool(described) and uuid not in dict(listed),
            ))  # fmt: skip
        return CommunitySummary(
            community_id, name, about, tuple(channels), sum(c.messages for c in channels),
            archive_link=link, last_archived_s=int(last), description_clock=int(clock),
        )  # fmt: skip

    def _ends(self, community_id: str, channel_id: str) -> tuple[int, int]:
        """The first and last shown message's timestamps (ms) of a channel."""
        shown, params = self._shown()
        ends = []
        for order in ("ASC", "DESC"):
            rows = self.db.execute(
                f"SELECT m.ts_ms FROM history_messages m WHERE m.community = ? AND m.channel = ?"
                f"{shown} ORDER BY m.day {order}, m.ts_ms {order} LIMIT 1",
                [community_id, channel_id, *params],
            )
            ends.append(int(rows[0][0]) if rows else 0)
        return ends[0], ends[1]

    def days(self, community_id: str, channel_id: str) -> Sequence[dt.date]:
        counted = self.db.execute(
            "SELECT day, messages FROM history_days WHERE community = ? AND channel = ?"
            " AND messages > 0 ORDER BY day",
            [community_id, channel_id],
        )
        hidden = self._hidden_per_day(community_id, channel_id)
        epoch = dt.date(1970, 1, 1)
        return [
            epoch + dt.timedelta(days=int(day))
            for day, n in counted
            if int(n) > hidden.get((channel_id, int(day)), 0)
        ]

    def day(self, community_id: str, channel_id: str, day: dt.date) -> Sequence[ReadableMessage]:
        shown, params = self._shown()
        number = (day - dt.date(1970, 1, 1)).days
        rows = self.db.execute(
            f"SELECT {_COLUMNS} FROM {_FROM} WHERE m.community = ? AND m.channel = ?"
            f" AND m.day = ?{shown} ORDER BY m.ts_ms, m.clock, m.id",
            [community_id, channel_id, number, *params],
        )
        return self._messages(rows, community_id)

    def message(self, community_id: str, message_id: str) -> ReadableMessage | None:
        shown, params = self._shown()
        rows = self.db.execute(
            f"SELECT {_COLUMNS} FROM {_FROM} WHERE m.community = ? AND m.id = ?{shown}",
            [community_id, message_id.lower(), *params],
        )
        return self._messages(rows, community_id)[0] if rows else None

    def search(
        self, community_id: str, query: str, *, limit: int = 50, offset: int = 0
    ) -> Sequence[SearchHit]:
        terms = query_terms(query)
        if not terms:
            return []
        limit = min(max(int(limit), 1), MAX_SEARCH_LIMIT)
        offset = min(max(int(offset), 0), MAX_SEARCH_OFFSET)
        shown, params = self._shown()
        if self.db.postgres:
            rows = self._pg_search(community_id, " ".join(terms), shown, params, limit, offset)
        else:
            match = " ".join('"' + t.replace('"', '""') + '"' for t in terms)
            rows = self.db.execute(
                f"SELECT {_COLUMNS} FROM history_fts f JOIN history_messages m"
                " ON m.rid = f.rowid LEFT JOIN history_authors a ON a.key = m.author"
                f" WHERE history_fts MATCH ? AND m.community = ?{shown}"
                " ORDER BY f.rowid DESC LIMIT ? OFFSET ?",
                [match, community_id, *params, limit, offset],
            )
        return [SearchHit(m, _snippet(m.text, terms)) for m in self._messages(rows, community_id)]

    def _pg_search(
        self,
        community_id: str,
        words: str,
        shown: str,
        params: list[object],
        limit: int,
        offset: int,
    ) -> list[tuple[Any, ...]]:
        """Newest first, by the plan that reads least: the community's newest
        :data:`PG_RECENT` rows are checked first (a common word fills a page there, and a
        page found there is exactly the newest matches); otherwise the matches are collected
        from the GIN index (then they are few) and sorted."""
        match = "plainto_tsquery('simple', ?)"
        rows = self.db.execute(
            "WITH recent AS MATERIALIZED (SELECT rid, tsv FROM history_messages"
            f" WHERE community = ? ORDER BY rid DESC LIMIT {PG_RECENT})"
            f" SELECT {_COLUMNS} FROM recent r JOIN {_FROM} ON m.rid = r.rid"
            f" WHERE r.tsv @@ {match}{shown} ORDER BY m.rid DESC LIMIT ? OFFSET ?",
            [community_id, words, *params, limit, offset],
        )
        if len(rows) == limit:
            return rows
        return self.db.execute(
            "WITH hits AS MATERIALIZED (SELECT m.rid FROM history_messages m"
            f" WHERE m.tsv @@ {match} AND m.community = ?{shown})"
            f" SELECT {_COLUMNS} FROM hits h JOIN {_FROM} ON m.rid = h.rid"
            " ORDER BY m.rid DESC LIMIT ? OFFSET ?",
            [words, community_id, *params, limit, offset],
        )

    def image(self, community_id: str, message_id: str) -> tuple[str, bytes] | None:
        shown, params = self._shown()
        rows = self.db.execute(
            "SELECT i.image_type, i.bytes FROM history_images i JOIN history_messages m"
            " ON m.community = i.community AND m.id = i.id"
            f" WHERE m.community = ? AND m.id = ?{shown}",
            [community_id, message_id.lower(), *params],
        )
        if not rows or rows[0][0] not in IMAGE_TYPES:
            return None
        return str(rows[0][0]), bytes(rows[0][1])

    def iter_messages(
        self,
        community_id: str,
        channel_id: str | None = None,
        *,
        after_ms: int | None = None,
        before_ms: int | None = None,
        author: str | None = None,
    ) -> Iterator[ReadableMessage]:
        """Shown messages, channel by channel (the description's order, then the others),
        each in time order, read :data:`ITER_BATCH` rows at a time; ``after_ms`` inclusive,
        ``before_ms`` exclusive (message timestamps, ms)."""
        if channel_id is not None:
            channels = [channel_id]
        else:
            summary = self.community(community_id)
            channels = [c.id for c in summary.channels] if summary else []
        shown, params = self._shown()
        bounds = ""
        extra: list[object] = []
        if after_ms is not None:
            bounds += " AND m.day >= ? AND m.ts_ms >= ?"
            extra += [int(after_ms) // DAY_MS, int(after_ms)]
        if before_ms is not None:
            bounds += " AND m.day <= ? AND m.ts_ms < ?"
            extra += [int(before_ms) // DAY_MS, int(before_ms)]
        if author is not None:
            bounds += " AND m.author = ?"
            extra.append(author.lower())
        for channel in channels:
            cursor: tuple[object, ...] = (-1, -1, -1, "")
            while True:
                rows = self.db.execute(
                    f"SELECT {_COLUMNS} FROM {_FROM} WHERE m.community = ? AND m.channel = ?"
                    f" AND (m.day, m.ts_ms, m.clock, m.id) > (?, ?, ?, ?){bounds}{shown}"
                    f" ORDER BY m.day, m.ts_ms, m.clock, m.id LIMIT {ITER_BATCH}",
                    [community_id, channel, *cursor, *extra, *params],
                )
                if not rows:
                    break
                yield from self._messages(rows, community_id)
                last = rows[-1]
                cursor = (last[29], last[2], last[3], last[0])
                if len(rows) < ITER_BATCH:
                    break
