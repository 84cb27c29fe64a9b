"""The readable history's tables, in the v2 store's own database, folded at write time.

``HistoryIndex.open(store_url)`` opens the database the store lives in (the SQLite file of
nwaku's ``Message`` table, or the PostgreSQL database of its ``messages`` table) or a
standalone SQLite file for histories read from archives only, and keeps these tables there
(all prefixed ``history_``, never touching the store's own)::

    history_messages   one row per shown-or-deleted chat message (community, status-go id),
                       its current text (edits applied), deleted flag, pin, reactions and
                       mentions materialized, provenance; indexed on (community, channel, day,
                       timestamp, clock, id), so a day page and a permalink are one indexed
                       query each; ``rid`` is time-ordered (timestamp ms * 10^6 + a slot taken
                       from the id), so a search reads its matches newest first and stops
                       after a page
    history_fts        SQLite: FTS5 over the text of the messages not deleted (external
                       content, unicode61 remove_diacritics 2); PostgreSQL: a ``tsv`` column
                       generated with the 'simple' configuration and a GIN index
    history_pending    SQLite: ``fts`` while a bulk load into empty tables has left
                       history_fts to its end (:meth:`HistoryIndex.bulk_load`)
    history_edits / history_deletes / history_reactions / history_pins
                       every modifier, kept (newest clock per author, per author and emoji,
                       per author): one that arrives before its target waits here and applies
                       when the target is added; rebuilding a message from them gives the
                       same row whatever the arrival order
    history_authors    per key: compressed key, three-word alias, newest display name
    history_communities / history_channels / history_banned / history_images
                       the newest signed description's names, moderators, pinners and bans; per
                       channel the count of non-deleted messages; image bytes apart from the
                       rows a page reads

Rules (status-go's, owned by :mod:`.rules`): an edit counts only from the original's author,
the newest clock wins; a delete counts from the author or a moderator of the newest
description; a reaction per (author, emoji) is its newest clock's state (retracted or not);
a pin is the newest clock's among those of the description's owners, admins and token
masters (anyone's when it opens pinning to all members, or when no description is known).
Adding the same message twice (its channel-topic and ``-memberUpdate`` copies) keeps one
row, the first copy's provenance; adding everything again changes nothing. Writes go in
bounded batches, one transaction each (a bulk load into empty SQLite tables: several batches
per transaction, and history_fts made once at its end).
"""

from __future__ import annotations

import contextlib
import itertools
import json
import threading
from collections import defaultdict
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from waku_legacy.errors import ConfigError, WakuLegacyError
from waku_legacy.history.events import (
    ChatMessageEvent,
    DeleteEvent,
    EditEvent,
    Event,
    IdentityEvent,
    PinEvent,
    ReactionEvent,
    Undecodable,
)

if TYPE_CHECKING:
    from waku_legacy.history.model import ViewPolicy
    from waku_legacy.history.reader import IndexReader
    from waku_legacy.history.segments import SegmentJoiner
    from waku_legacy.history.sources import WakuRow
    from waku_legacy.identity.descriptions import SignedDescription

__all__ = ["BATCH", "Authority", "HistoryIndex", "HistoryIndexError", "IndexCounts"]

BATCH = 5000  # events folded together (and per write transaction, but in a bulk load)
#: SQLite, in a bulk load into empty tables: BATCH-event batches per write transaction. Each
#: commit writes every page it changed, and the id indexes take their keys at random (most
#: of their pages change in every batch): 10 per commit folded the 1M bench's 100k messages
#: with 4.0-4.1 CPU seconds instead of 4.6
BULK_BATCHES = 10
ANALYZE_AFTER = 20_000  # messages added by one call that make the statistics stale
DAY_MS = 86_400_000
MAX_TIMESTAMP_MS = 253_402_300_799_999  # 9999-12-31T23:59:59.999Z: a date Python can show
_SLOTS = 1_000_000  # rids per millisecond


class HistoryIndexError(WakuLegacyError):
    """The readable history's tables cannot be opened or written."""


@dataclass(slots=True)
class IndexCounts:
    """What one ``add_*`` call did (messages new to the index, and what was set aside)."""

    messages: int = 0  # chat messages new to the index
    duplicates: int = 0  # chat messages already indexed (another copy of the same id)
    edits: int = 0
    deletes: int = 0
    reactions: int = 0
    pins: int = 0
    identities: int = 0
    other_chat: int = 0  # chat messages on no channel of this community
    undecodable: dict[str, int] = field(default_factory=dict)  # reason -> messages

    def merge(self, other: IndexCounts) -> None:
        for name in ("messages", "duplicates", "edits", "deletes", "reactions", "pins",
                     "identities", "other_chat"):  # fmt: skip
            setattr(self, name, getattr(self, name) + getattr(other, name))
        for reason, n in other.undecodable.items():
            self.undecodable[reason] = self.undecodable.get(reason, 0) + n

    def to_json(self) -> dict[str, Any]:
        return {
            "messages": self.messages, "duplicates": self.duplicates, "edits": self.edits,
            "deletes": self.deletes, "reactions": self.reactions, "pins": self.pins,
            "identities": self.identities, "other_chat": self.other_chat,
            "undecodable": dict(sorted(self.undecodable.items())),
        }  # fmt: skip


# -- schema ------------------------------------------------------------------------------------

_MESSAGE_COLUMNS = (
    "rid", "community", "id", "channel", "day", "ts_ms", "clock", "author", "content_type",
    "text", "response_to", "ens_name", "display_name", "sticker_hash", "image_type",
    "image_size", "audio_ms", "discord_author", "discord_timestamp", "edited_clock", "deleted",
    "pinned", "pinned_by", "reactions", "mentions", "waku_hash", "content_topic",
    "pubsub_topic", "whisper_ts", "window_from", "window_to", "source", "legacy_id", "album_id",
    "sent_type",
)  # fmt: skip


#: indexes only the reader uses (the fold reads by id, rid, legacy id and album): built after
#: a bulk load into empty tables (:meth:`HistoryIndex.bulk_load`)
READ_INDEXES = {
    "history_messages_day": "CREATE INDEX IF NOT EXISTS history_messages_day ON"
    " history_messages (community, channel, day, ts_ms, clock, id)",
    # the authors a policy hides (few): a narrow index, each entry its row's key only
    "history_messages_author": "CREATE INDEX IF NOT EXISTS history_messages_author ON"
    " history_messages (author)",
}
POSTGRES_READ_INDEXES = {
    "history_messages_tsv": "CREATE INDEX IF NOT EXISTS history_messages_tsv ON"
    " history_messages USING GIN (tsv)",
    "history_messages_recent": "CREATE INDEX IF NOT EXISTS history_messages_recent ON"
    " history_messages (community, rid)",
}


# each author's newest pin or unpin of a message: whose count depends on the description
PINS_TABLE = (
    "CREATE TABLE IF NOT EXISTS history_pins (community TEXT NOT NULL,"
    " target TEXT NOT NULL, author TEXT NOT NULL, clock {big} NOT NULL, id TEXT NOT NULL,"
    " pinned INTEGER NOT NULL, PRIMARY KEY (community, target, author))"
)
# tables made before (2026-11-29) kept one pin per message, whoever made it: copied over
PINS_BY_AUTHOR = (
    "ALTER TABLE history_pins RENAME TO history_pins_before",
    PINS_TABLE,
    "INSERT INTO history_pins (community, target, author, clock, id, pinned)"
    " SELECT community, target, author, clock, id, pinned FROM history_pins_before",
    "DROP TABLE history_pins_before",
)


def _tables(blob: str, big: str) -> tuple[str, ...]:
    return (
        "CREATE TABLE IF NOT EXISTS history_messages ("
        f" rid {big} PRIMARY KEY, community TEXT NOT NULL, id TEXT NOT NULL,"
        f" channel TEXT NOT NULL, day {big} NOT NULL, ts_ms {big} NOT NULL,"
        f" clock {big} NOT NULL, author TEXT NOT NULL, content_type INTEGER NOT NULL,"
        " text TEXT NOT NULL, response_to TEXT NOT NULL, ens_name TEXT NOT NULL,"
        " display_name TEXT NOT NULL, sticker_hash TEXT NOT NULL, image_type TEXT NOT NULL,"
        f" image_size INTEGER NOT NULL, audio_ms {big} NOT NULL, discord_author TEXT NOT NULL,"
        f" discord_timestamp TEXT NOT NULL, edited_clock {big} NOT NULL,"
        " deleted INTEGER NOT NULL, pinned INTEGER NOT NULL, pinned_by TEXT NOT NULL,"
        " reactions TEXT NOT NULL, mentions TEXT NOT NULL, waku_hash TEXT NOT NULL,"
        " content_topic TEXT NOT NULL, pubsub_topic TEXT NOT NULL,"
        f" whisper_ts {big} NOT NULL, window_from {big}, window_to {big},"
        " source TEXT NOT NULL, legacy_id TEXT NOT NULL, album_id TEXT NOT NULL,"
        " sent_type INTEGER NOT NULL,"
        " UNIQUE (community, id))",
        # a delete of one image of an album deletes the album (few messages are in one)
        "CREATE INDEX IF NOT EXISTS history_messages_album ON history_messages"
        " (community, album_id) WHERE album_id <> ''",
        READ_INDEXES["history_messages_day"],
        # modifiers may name a message by its pre-2019 id
        "CREATE INDEX IF NOT EXISTS history_messages_legacy ON history_messages"
        " (community, legacy_id)",
        READ_INDEXES["history_messages_author"],
        "CREATE TABLE IF NOT EXISTS history_edits (community TEXT NOT NULL,"
        f" target TEXT NOT NULL, author TEXT NOT NULL, clock {big} NOT NULL, id TEXT NOT NULL,"
        " text TEXT NOT NULL, content_type INTEGER NOT NULL,"
        " PRIMARY KEY (community, target, author))",
        "CREATE TABLE IF NOT EXISTS history_deletes (community TEXT NOT NULL,"
        f" target TEXT NOT NULL, author TEXT NOT NULL, clock {big} NOT NULL, id TEXT NOT NULL,"
        " PRIMARY KEY (community, target, author))",
        "CREATE TABLE IF NOT EXISTS history_reactions (community TEXT NOT NULL,"
        " target TEXT NOT NULL, author TEXT NOT NULL, emoji TEXT NOT NULL,"
        f" clock {big} NOT NULL, id TEXT NOT NULL, retracted INTEGER NOT NULL,"
        " PRIMARY KEY (community, target, author, emoji))",
        PINS_TABLE.format(big=big),
        "CREATE TABLE IF NOT EXISTS history_authors (key TEXT PRIMARY KEY,"
        " compressed TEXT NOT NULL, alias TEXT NOT NULL, display_name TEXT NOT NULL,"
        f" name_clock {big} NOT NULL)",
        "CREATE TABLE IF NOT EXISTS history_communities (community TEXT PRIMARY KEY,"
        f" name TEXT NOT NULL, clock {big} NOT NULL, channels TEXT NOT NULL,"
        " moderators TEXT NOT NULL, archive_link TEXT NOT NULL,"
        f" last_archived_s {big} NOT NULL, description TEXT NOT NULL DEFAULT '',"
        " pinners TEXT NOT NULL DEFAULT 'null')",
        "CREATE TABLE IF NOT EXISTS history_channels (community TEXT NOT NULL,"
        f" channel TEXT NOT NULL, messages {big} NOT NULL, PRIMARY KEY (community, channel))",
        "CREATE TABLE IF NOT EXISTS history_days (community TEXT NOT NULL,"
        f" channel TEXT NOT NULL, day {big} NOT NULL, messages {big} NOT NULL,"
        " PRIMARY KEY (community, channel, day))",
        "CREATE TABLE IF NOT EXISTS history_banned (community TEXT NOT NULL,"
        " author TEXT NOT NULL, PRIMARY KEY (community, author))",
        "CREATE TABLE IF NOT EXISTS history_images (community TEXT NOT NULL, id TEXT NOT NULL,"
        f" image_type TEXT NOT NULL, bytes {blob} NOT NULL, PRIMARY KEY (community, id))",
    )


SQLITE_SCHEMA = (
    *_tables("BLOB", "INTEGER"),
    "CREATE VIRTUAL TABLE IF NOT EXISTS history_fts USING fts5(text,"
    " content='history_messages', content_rowid='rid',"
    " tokenize='unicode61 remove_diacritics 2')",
    "CREATE TABLE IF NOT EXISTS history_pending (work TEXT PRIMARY KEY)",
)
#: history_fts made again from the rows (what the writes one by one keep it: the text of
#: every message not deleted), as FTS5 builds it fastest: one insert of them all (0.3 s per
#: 100k messages, where inserting them a batch at a time beside their rows took 1.5 s)
REBUILD_FTS = (
    "INSERT INTO history_fts (history_fts) VALUES ('delete-all')",
    "INSERT INTO history_fts (rowid, text) SELECT rid, text FROM history_messages"
    " WHERE deleted = 0 ORDER BY rid",
    "DELETE FROM history_pending WHERE work = 'fts'",
)
POSTGRES_SCHEMA = (
    *_tables("BYTEA", "BIGINT"),
    # tables made before the description column (2026-11-29) get it
    "ALTER TABLE history_communities ADD COLUMN IF NOT EXISTS description TEXT NOT NULL"
    " DEFAULT ''",
    "ALTER TABLE history_communities ADD COLUMN IF NOT EXISTS pinners TEXT NOT NULL"
    " DEFAULT 'null'",
    "ALTER TABLE history_messages ADD COLUMN IF NOT EXISTS tsv tsvector"
    " GENERATED ALWAYS AS (to_tsvector('simple', text)) STORED",
    *POSTGRES_READ_INDEXES.values(),
)


# -- the connection ----------------------------------------------------------------------------


class Database:
    """One connection to SQLite or PostgreSQL; statements are written with ``?`` and run on
    PostgreSQL with ``%s``. Every call holds the lock (the viewer reads from threads)."""

    def __init__(self, conn: Any, postgres: bool, where: str) -> None:
        self.conn = conn
        self.postgres = postgres
        self.where = where
        self.lock = threading.RLock()
        self._depth = 0

    def _sql(self, sql: str) -> str:
        return sql.replace("?", "%s") if self.postgres else sql

    def execute(self, sql: str, params: Sequence[object] = ()) -> list[tuple[Any, ...]]:
        with self.lock:
            cur = self.conn.execute(self._sql(sql), params)
            rows = cur.fetchall() if cur.description is not None else []
            if self.postgres and self._depth == 0:
                self.conn.rollback()  # end the read transaction
            return list(rows)

    def stream(self, sql: str, params: Sequence[object] = ()) -> list[tuple[Any, ...]]:
        """Rows of a read inside a transaction already open (no rollback after it)."""
        cur = self.conn.execute(self._sql(sql), params)
        return list(cur.fetchall()) if cur.description is not None else []

    def executemany(self, sql: str, rows: Sequence[Sequence[object]]) -> None:
        if not rows:
            return
        if self.postgres:
            with self.conn.cursor() as cur:
                cur.executemany(self._sql(sql), rows)
        else:
            self.conn.executemany(sql, rows)

    @contextlib.contextmanager
    def transaction(self) -> Iterator[None]:
        """One transaction for the block; inside another, the block joins it (committed or
        rolled back with it)."""
        with self.lock:
            if self._depth:
                yield
                return
            self._depth += 1
            try:
                if not self.postgres:
                    self.conn.execute("BEGIN IMMEDIATE")
                try:
                    yield
                except BaseException:
                    self.conn.rollback() if self.postgres else self.conn.execute("ROLLBACK")
                    raise
                self.conn.commit() if self.postgres else self.conn.execute("COMMIT")
            finally:
                self._depth -= 1

    def in_list(self, column: str, values: Sequence[object]) -> tuple[str, list[object]]:
        """``column IN (…)`` for at most 500 values (callers chunk)."""
        if self.postgres:
            return f"{column} = ANY(?)", [list(values)]
        return f"{column} IN ({', '.join('?' * len(values))})", list(values)

    def close(self) -> None:
        with self.lock, contextlib.suppress(Exception):
            self.conn.close()


def _batches(events: Iterable[Event], size: int) -> Iterator[list[Event]]:
    batch: list[Event] = []
    for event in events:
        batch.append(event)
        if len(batch) >= size:
            yield batch
            batch = []
    if batch:
        yield batch


def _chunks(values: Sequence[Any], size: int = 500) -> Iterator[Sequence[Any]]:
    for at in range(0, len(values), size):
        yield values[at : at + size]


def _open_database(dsn: str, create: bool) -> Database:
    from waku_legacy.store import check_store_file, is_postgres_url, sqlite_path
    from waku_legacy.store.dsn import redact_dsn
    from waku_legacy.store.types import StoreError

    dsn = dsn.strip()
    if is_postgres_url(dsn):
        import psycopg

        try:
            conn = psycopg.connect(dsn, connect_timeout=10)
            with conn.transaction():
                conn.execute("SELECT pg_advisory_xact_lock(7377657)")  # one creator at a time
                for statement in POSTGRES_SCHEMA:
                    conn.execute(statement)
                primary = conn.execute(
                    "SELECT a.attname FROM pg_index i JOIN pg_attribute a ON"
                    " a.attrelid = i.indrelid AND a.attnum = ANY(i.indkey)"
                    " WHERE i.indrelid = 'history_pins'::regclass AND i.indisprimary"
                ).fetchall()
                if "author" not in {name for (name,) in primary}:
                    for statement in PINS_BY_AUTHOR:
                        conn.execute(statement.format(big="BIGINT"))
            conn.commit()
        except psycopg.Error as exc:
            line = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
            raise HistoryIndexError(
                f"cannot open the history tables in {redact_dsn(dsn)}: {line}"
            ) from None
        return Database(conn, True, redact_dsn(dsn))
    import sqlite3

    try:
        check_store_file(dsn, create=create)
    except StoreError as exc:
        raise HistoryIndexError(str(exc).replace("the store", "the history database", 1)) from None
    path = sqlite_path(dsn)
    try:
        lite = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        lite.execute("PRAGMA journal_mode=WAL")
        lite.execute("PRAGMA synchronous=NORMAL")
        lite.execute("PRAGMA busy_timeout=30000")
        # the id and day indexes take rows in random order: keep their pages in memory
        lite.execute("PRAGMA cache_size=-131072")
        lite.execute("BEGIN IMMEDIATE")
        for statement in SQLITE_SCHEMA:
            lite.execute(statement)
        # a bulk load that left history_fts to its end stopped before it (or runs in another
        # connection, whose end makes it again): made from the rows now
        if lite.execute("SELECT 1 FROM history_pending WHERE work = 'fts'").fetchone():
            for statement in REBUILD_FTS:
                lite.execute(statement)
        # tables made before the description and pinners columns (2026-11-29) get them
        columns = {row[1] for row in lite.execute("PRAGMA table_info(history_communities)")}
        if "description" not in columns:
            lite.execute(
                "ALTER TABLE history_communities ADD COLUMN description TEXT NOT NULL DEFAULT ''"
            )
        if "pinners" not in columns:
            lite.execute(
                "ALTER TABLE history_communities ADD COLUMN pinners TEXT NOT NULL DEFAULT 'null'"
            )
        if "author" not in {row[1] for row in lite.execute("PRAGMA table_info(history_pins)")
                            if row[5]}:  # fmt: skip
            for statement in PINS_BY_AUTHOR:
                lite.execute(statement.format(big="INTEGER"))
        lite.execute("COMMIT")
    except sqlite3.Error as exc:
        raise HistoryIndexError(f"cannot open the history tables in {path}: {exc}") from None
    return Database(lite, False, path)


#: seconds between the WAL checkpoints a bulk load's own thread makes (:func:`_checkpoints_beside`)
CHECKPOINT_EVERY = 0.1


@contextlib.contextmanager
def _checkpoints_beside(db: Database) -> Iterator[None]:
    """SQLite: for the block, the WAL copied into the database file by a thread of its own
    on a connection of its own (``wal_checkpoint(PASSIVE)`` every :data:`CHECKPOINT_EVERY`
    seconds: it never blocks the writer), instead of by ``db``'s commits (autocheckpoint),
    which waited for it: a checkpoint is one long call that releases the GIL, so it runs on
    another core while ``db``'s thread folds the next events (1M bench: the step's commits
    ~0.4 s shorter). A checkpoint's error is raised at the block's end; the rows are the
    same either way (the WAL holds them until copied)."""
    import sqlite3

    (previous,) = db.conn.execute("PRAGMA wal_autocheckpoint").fetchone()
    stop = threading.Event()
    failed: list[BaseException] = []

    def checkpoint() -> None:
        try:
            lite = sqlite3.connect(db.where, isolation_level=None, check_same_thread=False)
        except BaseException as exc:
            failed.append(exc)
            return
        try:
            lite.execute("PRAGMA busy_timeout=30000")
            while not stop.wait(CHECKPOINT_EVERY):
                lite.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()
        except BaseException as exc:
            failed.append(exc)
        finally:
            lite.close()

    thread = threading.Thread(target=checkpoint, name="history-wal-checkpoints", daemon=True)
    with db.lock:
        db.conn.execute("PRAGMA wal_autocheckpoint=0")
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()
        with db.lock:
            db.conn.execute(f"PRAGMA wal_autocheckpoint={int(previous)}")
    if failed:
        raise HistoryIndexError(f"checkpointing {db.where}: {failed[0]}") from failed[0]


# -- the fold ----------------------------------------------------------------------------------


def message_rid(timestamp_ms: int, message_id: str) -> int:
    """A message's time-ordered row id: its (clamped) timestamp's millisecond, then a slot
    from its id (a clash moves it to the next free slot)."""
    return _clamp_ms(timestamp_ms) * _SLOTS + int(message_id[-8:] or "0", 16) % _SLOTS


def _clamp_ms(timestamp_ms: int) -> int:
    return min(max(int(timestamp_ms), 0), MAX_TIMESTAMP_MS)


def _edit_applies(edit_author: str, original_author: str) -> bool:
    from waku_legacy.history import rules

    probe_edit = EditEvent("", edit_author, "", "", 0, "")
    probe = ChatMessageEvent("", original_author, "", "", 0, 0, 0, "")
    return bool(rules.edit_applies(probe_edit, probe))


def _delete_applies(delete_author: str, original_author: str, moderators: frozenset[str]) -> bool:
    from waku_legacy.history import rules

    probe_delete = DeleteEvent("", delete_author, "", "", 0)
    probe = ChatMessageEvent("", original_author, "", "", 0, 0, 0, "")
    return bool(rules.delete_applies(probe_delete, probe, moderators))


def _mentions(text: str) -> list[str]:
    if "@" not in text:  # most messages mention no one: no regex pass
        return []
    from waku_legacy.history import rules

    return list(dict.fromkeys(k.lower() for k in rules.mentioned_keys(text)))


def author_names(public_key: str) -> tuple[str, str]:
    """(compressed ``zQ3…`` key, three-word alias) of a ``0x04…`` key."""
    from waku_legacy.history import alias

    return alias.compressed_key(public_key), alias.alias(public_key)


@dataclass(slots=True)
class _Modifiers:
    # author, clock, id, text, content type (0: the original's)
    edits: list[tuple[str, int, str, str, int]] = field(default_factory=list)
    deletes: list[str] = field(default_factory=list)  # authors
    reactions: list[tuple[str, str, int, str, int]] = field(default_factory=list)
    pins: list[tuple[str, int, str, int]] = field(default_factory=list)  # author clock id pinned


@dataclass(frozen=True, slots=True)
class Authority:
    """What the newest description kept says of a community's members' powers."""

    moderators: frozenset[str]  # who may delete others' messages
    pinners: frozenset[str] | None  # whose pins count (None: anyone's, also with no description)


def _fold(
    author: str, text: str, sent_type: int, mods: _Modifiers, authority: Authority
) -> tuple[str, int, int, int, str, str, str, int]:
    """(text, edited clock, deleted, pinned, pinned by, reactions JSON, mentions JSON,
    content type) of a message by ``author`` whose original text is ``text`` (a text edited
    before is fine: see :meth:`HistoryIndex._refold`) and content type ``sent_type``, given
    every modifier of it. The newest applicable edit gives the text, and its content type
    when not 0 (status-go's applyEditMessage); a delete counts from the author or
    ``authority``'s moderators, and the newest pin or unpin of its pinners
    (:func:`~.rules.pin_applies`) says whether it is pinned."""
    edited, content_type = 0, sent_type
    best: tuple[int, str] | None = None
    for edit_author, clock, edit_id, edit_text, edit_type in mods.edits:
        if _edit_applies(edit_author, author) and (best is None or (clock, edit_id) > best):
            best, text, edited = (clock, edit_id), edit_text, clock
            content_type = edit_type or sent_type
    deleted = any(_delete_applies(d, author, authority.moderators) for d in mods.deletes)
    pinned, pinned_by = 0, ""
    if mods.pins:
        from waku_legacy.history.rules import pin_applies

        counted = [p for p in mods.pins if pin_applies(p[0], authority.pinners)]
        newest = max(counted, key=lambda p: (p[1], p[2]), default=None)
        if newest is not None and newest[3]:
            pinned, pinned_by = 1, newest[0]
    mentions = _mentions(text)
    return (text, edited, int(deleted), pinned, pinned_by, reactions_json(mods.reactions),
            json.dumps(mentions) if mentions else "[]", content_type)  # fmt: skip


def reactions_json(rows: Sequence[tuple[str, str, int, str, int]]) -> str:
    """``[[emoji, [author, …]], …]`` of the reactions not retracted (each row is the newest
    state of one (author, emoji)), emojis in the order first reacted, authors likewise."""
    if not rows:
        return "[]"
    by_emoji: dict[str, list[tuple[int, str]]] = defaultdict(list)
    for reactor, emoji, clock, _id, retracted in rows:
        if not retracted:
            by_emoji[emoji].append((clock, reactor))
    ordered = sorted(by_emoji.items(), key=lambda item: (min(item[1]), item[0]))
    return json.dumps([[emoji, [a for _, a in sorted(who)]] for emoji, who in ordered])


class HistoryIndex:
    """The readable tables of one database (see the module docstring)."""

    def __init__(self, db: Database) -> None:
        self.db = db
        self._authority: dict[str, Authority] = {}
        self._known_authors: set[str] = set()
        self._bulk = False  # SQLite, in a bulk load into empty tables (:meth:`bulk_load`)
        self._segments: SegmentJoiner | None = None

    @classmethod
    def open(cls, dsn: str, *, create: bool = False) -> HistoryIndex:
        """The tables in the store at ``dsn`` (a SQLite path or URL, or ``postgresql://…``),
        created when missing; a missing SQLite file is created only with ``create``."""
        if not isinstance(dsn, str) or not dsn.strip():
            raise ConfigError("the history database URL is empty")
        return cls(_open_database(dsn, create))

    def __enter__(self) -> HistoryIndex:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self.db.close()

    def reader(self, policy: ViewPolicy | None = None) -> IndexReader:
        from waku_legacy.history.model import ViewPolicy
        from waku_legacy.history.reader import IndexReader

        return IndexReader(self, policy or ViewPolicy())

    # -- communities ---------------------------------------------------------------------------

    def authority(self, community_id: str) -> Authority:
        """Who may delete others' messages and whose pins count, as the newest description
        kept says (read once per community, then remembered)."""
        if community_id not in self._authority:
            rows = self.db.execute(
                "SELECT moderators, pinners FROM history_communities WHERE community = ?",
                [community_id],
            )
            moderators = json.loads(rows[0][0]) if rows else []
            pinners = json.loads(rows[0][1]) if rows else None
            self._authority[community_id] = Authority(
                frozenset(moderators), None if pinners is None else frozenset(pinners)
            )
        return self._authority[community_id]

    def set_description(
        self, description: SignedDescription, community_id: str | None = None
    ) -> None:
        """Keep ``description`` when it is newer than the one kept: channel names, bans and
        moderators (deletes by them are applied again). ``community_id``: whose it is (a
        SignedDescription does not say; it may be left out when the index holds one
        community only)."""
        from waku_legacy.history import rules

        community = community_id or self._only_community()
        rows = self.db.execute(
            "SELECT clock FROM history_communities WHERE community = ?", [community]
        )
        if rows and int(rows[0][0]) > description.clock:
            return
        from waku_legacy.identity.topics import CommunityId

        # the control node (the community key) may always delete
        owner = "0x" + CommunityId.parse(community).uncompressed.hex()
        moderators = sorted({*rules.moderators_of(description), owner})
        pinners = rules.pinners_of(description)
        pinners_json = "null" if pinners is None else json.dumps(sorted(pinners))
        pin_rule_changed = self.authority(community).pinners != pinners
        channels = [[c.uuid, c.name, c.position, c.description] for c in description.channels]
        with self.db.transaction():
            self.db.stream(
                "INSERT INTO history_communities (community, name, clock, channels, moderators,"
                " archive_link, last_archived_s, description, pinners)"
                " VALUES (?, ?, ?, ?, ?, '', 0, ?, ?)"
                " ON CONFLICT (community) DO UPDATE SET name = excluded.name,"
                " clock = excluded.clock, channels = excluded.channels,"
                " moderators = excluded.moderators, description = excluded.description,"
                " pinners = excluded.pinners",
                [community, description.name, description.clock, json.dumps(channels),
                 json.dumps(moderators), description.description, pinners_json],
            )  # fmt: skip
            self.db.stream("DELETE FROM history_banned WHERE community = ?", [community])
            self.db.executemany(
                "INSERT INTO history_banned (community, author) VALUES (?, ?)",
                [(community, key) for key in sorted(description.banned)],
            )
            self._authority[community] = Authority(frozenset(moderators), pinners)
            # deletes by others than the author may now apply, or no longer
            targets = self.db.stream(
                "SELECT DISTINCT d.target FROM history_deletes d JOIN history_messages m"
                " ON m.community = d.community AND m.id = d.target"
                " WHERE d.community = ? AND d.author <> m.author",
                [community],
            )
            refold = {t for (t,) in targets}
            if pin_rule_changed:  # pins by others than its admins may now count, or no longer
                refold.update(t for (t,) in self.db.stream(
                    "SELECT DISTINCT target FROM history_pins WHERE community = ?", [community]
                ))  # fmt: skip
            self._refold(community, sorted(refold))

    def _only_community(self) -> str:
        rows = self.db.execute(
            "SELECT DISTINCT community FROM history_channels UNION"
            " SELECT community FROM history_communities"
        )
        if len(rows) != 1:
            raise ConfigError(
                f"set_description: the index holds {len(rows)} communities; say which one "
                "the description is of (community_id)"
            )
        return str(rows[0][0])

    def set_archive_link(self, community_id: str, link: str, last_archived_s: int) -> None:
        """The newest archive link (magnet URI or CID) and the end of its newest window."""
        with self.db.transaction():
            self.db.stream(
                "INSERT INTO history_communities (community, name, clock, channels, moderators,"
                " archive_link, last_archived_s) VALUES (?, '', 0, '[]', '[]', ?, ?)"
                " ON CONFLICT (community) DO UPDATE SET archive_link = excluded.archive_link,"
                " last_archived_s = excluded.last_archived_s",
                [community_id, link, int(last_archived_s)],
            )

    # -- writing -------------------------------------------------------------------------------

    def add_waku_messages(self, community_id: str, rows: Iterable[WakuRow]) -> IndexCounts:
        """Decrypted Waku messages (:class:`~.sources.WakuRow`: the 26/WAKU-PAYLOAD data, its
        signer and provenance) decoded and added: the bridge's hook for live envelopes."""
        from waku_legacy.history.segments import SegmentJoiner
        from waku_legacy.history.sources import decode_rows

        if self._segments is None:  # kept: a live message's segments arrive one by one
            self._segments = SegmentJoiner()
        return self.add_events(community_id, decode_rows(rows, community_id, joiner=self._segments))

    def add_events(self, community_id: str, events: Iterable[Event]) -> IndexCounts:
        """Fold decoded events into the tables, :data:`BATCH` at a time, each batch a
        transaction read before it starts (in a bulk load into empty SQLite tables,
        :data:`BULK_BATCHES` batches per transaction: the first read before it starts, the
        others as it goes)."""
        counts = IndexCounts()
        per_transaction = BULK_BATCHES if self._bulk else 1
        batches = _batches(events, BATCH)
        for first in batches:
            with self.db.transaction():  # each batch's own joins it
                counts.merge(self._add_batch(community_id, first))
                for batch in itertools.islice(batches, per_transaction - 1):
                    counts.merge(self._add_batch(community_id, batch))
        if counts.messages >= ANALYZE_AFTER and not self._bulk:  # a bulk load's end does it
            self.analyze()
        return counts

    @contextlib.contextmanager
    def bulk_load(self) -> Iterator[None]:
        """Into empty tables, add without the indexes only pages and searches read, and build
        them at the end (a sort instead of random inserts: PostgreSQL's GIN index above all);
        SQLite's history_fts likewise, made from the rows at the end (:data:`REBUILD_FTS`).
        A crash inside leaves the tables consistent; the next open builds the indexes and
        history_fts (``history_pending`` says it is still to make)."""
        indexes = dict(READ_INDEXES)
        if self.db.postgres:
            indexes.update(POSTGRES_READ_INDEXES)
        empty = not self.db.execute("SELECT 1 FROM history_messages LIMIT 1")
        defer_fts = empty and not self.db.postgres
        if empty:
            with self.db.transaction():
                for name in indexes:
                    self.db.stream(f"DROP INDEX IF EXISTS {name}")
                if defer_fts:
                    self.db.stream(
                        "INSERT INTO history_pending (work) VALUES ('fts')"
                        " ON CONFLICT (work) DO NOTHING"
                    )
        deferred = self._bulk
        self._bulk = deferred or defer_fts
        with _checkpoints_beside(self.db) if defer_fts else contextlib.nullcontext():
            try:
                yield
            finally:
                self._bulk = deferred
                if empty:
                    with self.db.transaction():
                        if self.db.postgres:
                            self.db.stream("SET LOCAL maintenance_work_mem = '256MB'")
                        if defer_fts:
                            for statement in REBUILD_FTS:
                                self.db.stream(statement)
                        for statement in indexes.values():
                            self.db.stream(statement)
                    self.analyze()

    def analyze(self) -> None:
        """Refresh the planner's statistics (after a bulk load: PostgreSQL plans a search by
        them, and autovacuum may come minutes later)."""
        with self.db.lock:
            if self.db.postgres:
                self.db.conn.execute("ANALYZE history_messages")
                self.db.conn.commit()
            else:
                self.db.conn.execute("ANALYZE history_messages")

    def _add_batch(self, community: str, events: list[Event]) -> IndexCounts:
        counts = IndexCounts()
        chats: dict[str, ChatMessageEvent] = {}
        edits: dict[tuple[str, str], EditEvent] = {}
        deletes: dict[tuple[str, str], DeleteEvent] = {}
        reactions: dict[tuple[str, str, str], ReactionEvent] = {}
        pins: dict[tuple[str, str], PinEvent] = {}
        names: dict[str, tuple[int, str]] = {}
        for event in events:
            if isinstance(event, ChatMessageEvent):
                if not event.channel_id:
                    counts.other_chat += 1
                elif event.id in chats:
                    counts.duplicates += 1
                else:
                    chats[event.id] = event
                if event.display_name:
                    _newest_name(names, event.author, event.clock, event.display_name)
            elif isinstance(event, EditEvent):
                counts.edits += 1
                _keep_newest(edits, (event.target_id, event.author), event)
            elif isinstance(event, DeleteEvent):
                counts.deletes += 1
                _keep_newest(deletes, (event.target_id, event.author), event)
            elif isinstance(event, ReactionEvent):
                counts.reactions += 1
                _keep_newest(reactions, (event.target_id, event.author, event.emoji), event)
            elif isinstance(event, PinEvent):
                counts.pins += 1
                _keep_newest(pins, (event.target_id, event.author), event)
            elif isinstance(event, IdentityEvent):
                counts.identities += 1
                _newest_name(names, event.author, event.clock, event.display_name)
            elif isinstance(event, Undecodable):
                counts.undecodable[event.reason] = counts.undecodable.get(event.reason, 0) + 1
        with self.db.transaction():
            self._write_authors(names, [c.author for c in chats.values()])
            self._write_modifiers(community, edits, deletes, reactions, pins)
            new = self._write_messages(community, chats)
            counts.messages += len(new)
            counts.duplicates += len(chats) - len(new)
            # modifiers of messages indexed before this batch
            targets = {e.target_id for e in edits.values()} | {
                d.target_id for d in deletes.values()
            }
            targets |= {r.target_id for r in reactions.values()}
            targets |= {p.target_id for p in pins.values()}
            self._refold(community, sorted(targets - set(new)))
        return counts

    def _write_authors(self, names: dict[str, tuple[int, str]], authors: list[str]) -> None:
        fresh = sorted({*names, *authors} - self._known_authors)
        rows = []
        for key in fresh:
            compressed, alias = author_names(key)
            rows.append((key, compressed, alias))
        self.db.executemany(
            "INSERT INTO history_authors (key, compressed, alias, display_name, name_clock)"
            " VALUES (?, ?, ?, '', -1) ON CONFLICT (key) DO NOTHING",
            rows,
        )
        self.db.executemany(
            "UPDATE history_authors SET display_name = ?, name_clock = ?"
            " WHERE key = ? AND name_clock < ?",
            [(name, clock, key, clock) for key, (clock, name) in sorted(names.items())],
        )
        self._known_authors.update(fresh)
        if len(self._known_authors) > 200_000:  # a cache, bounded
            self._known_authors.clear()

    def _write_modifiers(
        self,
        community: str,
        edits: dict[tuple[str, str], EditEvent],
        deletes: dict[tuple[str, str], DeleteEvent],
        reactions: dict[tuple[str, str, str], ReactionEvent],
        pins: dict[tuple[str, str], PinEvent],
    ) -> None:
        newer = "WHERE excluded.clock > {t}.clock OR (excluded.clock = {t}.clock AND excluded.id > {t}.id)"  # noqa: E501
        self.db.executemany(
            "INSERT INTO history_edits (community, target, author, clock, id, text,"
            " content_type) VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT (community, target, author)"
            " DO UPDATE SET clock = excluded.clock, id = excluded.id, text = excluded.text,"
            " content_type = excluded.content_type " + newer.format(t="history_edits"),
            [
                (community, e.target_id, e.author, e.clock, e.id, e.text, e.content_type)
                for e in edits.values()
            ],
        )
        self.db.executemany(
            "INSERT INTO history_deletes (community, target, author, clock, id)"
            " VALUES (?, ?, ?, ?, ?) ON CONFLICT (community, target, author) DO UPDATE"
            " SET clock = excluded.clock, id = excluded.id " + newer.format(t="history_deletes"),
            [(community, d.target_id, d.author, d.clock, d.id) for d in deletes.values()],
        )
        self.db.executemany(
            "INSERT INTO history_reactions (community, target, author, emoji, clock, id,"
            " retracted) VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT (community, target, author,"
            " emoji) DO UPDATE SET clock = excluded.clock, id = excluded.id,"
            " retracted = excluded.retracted " + newer.format(t="history_reactions"),
            [(community, r.target_id, r.author, r.emoji, r.clock, r.id, int(r.retracted))
             for r in reactions.values()],
        )  # fmt: skip
        self.db.executemany(
            "INSERT INTO history_pins (community, target, author, clock, id, pinned)"
            " VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (community, target, author) DO UPDATE"
            " SET clock = excluded.clock, id = excluded.id,"
            " pinned = excluded.pinned " + newer.format(t="history_pins"),
            [(community, p.target_id, p.author, p.clock, p.id, int(p.pinned))
             for p in pins.values()],
        )  # fmt: skip

    def _modifiers(self, community: str, targets: Sequence[str]) -> dict[str, _Modifiers]:
        """Every stored modifier of ``targets`` (a table holding none of the community's is
        not searched: a history without edits, say, is asked once per batch, not per 500
        targets)."""
        mods: dict[str, _Modifiers] = defaultdict(_Modifiers)
        db = self.db
        held = {
            table for table in ("history_edits", "history_deletes", "history_reactions",
                                "history_pins")
            if db.stream(f"SELECT 1 FROM {table} WHERE community = ? LIMIT 1", [community])
        }  # fmt: skip
        for chunk in _chunks(targets if held else ()):
            clause, values = db.in_list("target", chunk)
            where = f"WHERE community = ? AND {clause}"
            for target, author, clock, edit_id, text, edit_type in db.stream(
                f"SELECT target, author, clock, id, text, content_type FROM history_edits {where}",
                [community, *values],
            ) if "history_edits" in held else ():
                mods[target].edits.append((author, int(clock), edit_id, text, int(edit_type)))
            for target, author in db.stream(
                f"SELECT target, author FROM history_deletes {where}", [community, *values]
            ) if "history_deletes" in held else ():
                mods[target].deletes.append(author)
            for target, author, emoji, clock, rid, retracted in db.stream(
                "SELECT target, author, emoji, clock, id, retracted FROM history_reactions"
                f" {where}",
                [community, *values],
            ) if "history_reactions" in held else ():
                mods[target].reactions.append((author, emoji, int(clock), rid, int(retracted)))
            for target, author, clock, pin_id, pinned in db.stream(
                f"SELECT target, author, clock, id, pinned FROM history_pins {where}",
                [community, *values],
            ) if "history_pins" in held else ():
                mods[target].pins.append((author, int(clock), pin_id, int(pinned)))
        return mods

    def _write_messages(self, community: str, chats: dict[str, ChatMessageEvent]) -> list[str]:
        """Insert the messages not indexed yet, their modifiers folded in; their ids."""
        db = self.db
        ids = sorted(chats)
        existing: set[str] = set()
        for chunk in _chunks(ids):
            clause, values = db.in_list("id", chunk)
            existing.update(
                i for (i,) in db.stream(
                    f"SELECT id FROM history_messages WHERE community = ? AND {clause}",
                    [community, *values],
                )
            )  # fmt: skip
        new = [chats[i] for i in ids if i not in existing]
        if not new:
            return []
        rids = self._free_rids(new)
        mods = self._modifiers(community, [*(c.id for c in new),
                                           *(c.legacy_id for c in new if c.legacy_id)])  # fmt: skip
        authority = self.authority(community)
        albums = sorted({c.album_id for c in new if c.album_id})
        album_deletes = self._album_deletes(community, albums)
        for chat in new:  # deletes of images of this batch
            if chat.album_id:
                album_deletes[chat.album_id] += _both(mods, chat.id, chat.legacy_id).deletes
        rows = []
        images = []
        per_day: dict[tuple[str, int], int] = defaultdict(int)
        for chat, rid in zip(new, rids, strict=True):
            facts = chat.facts
            text, edited, deleted, pinned, pinned_by, reactions, mentions, content_type = _fold(
                chat.author, chat.text, chat.content_type,
                _with_deletes(_both(mods, chat.id, chat.legacy_id),
                              album_deletes.get(chat.album_id, [])),
                authority,
            )  # fmt: skip
            ts = _clamp_ms(chat.timestamp_ms)
            rows.append((
                rid, community, chat.id, chat.channel_id, ts // DAY_MS, ts, chat.clock,
                chat.author, content_type, text, chat.response_to, chat.ens_name,
                chat.display_name, chat.sticker_hash, chat.image_type,
                chat.image_size or len(chat.image), chat.audio_duration_ms,
                chat.discord_author, chat.discord_timestamp, edited, deleted, pinned, pinned_by,
                reactions, mentions,
                facts.waku_hash if facts else "", facts.content_topic if facts else "",
                facts.pubsub_topic if facts else "",
                facts.whisper_timestamp if facts else 0,
                facts.archive_window[0] if facts and facts.archive_window else None,
                facts.archive_window[1] if facts and facts.archive_window else None,
                facts.source if facts else "", chat.legacy_id, chat.album_id,
                chat.content_type,
            ))  # fmt: skip
            if chat.image_type and chat.image:
                images.append((community, chat.id, chat.image_type, bytes(chat.image)))
            if not deleted:
                per_day[chat.channel_id, ts // DAY_MS] += 1
        columns = ", ".join(_MESSAGE_COLUMNS)
        marks = ", ".join("?" * len(_MESSAGE_COLUMNS))
        if db.postgres:  # COPY, then one INSERT … SELECT (a racing writer's rows are kept)
            with db.conn.cursor() as cur:
                cur.execute(
                    "CREATE TEMP TABLE IF NOT EXISTS history_messages_load"
                    " (LIKE history_messages) ON COMMIT DELETE ROWS"
                )
                with cur.copy(f"COPY history_messages_load ({columns}) FROM STDIN") as copy:
                    for row in rows:
                        copy.write_row(row)
                cur.execute(
                    f"INSERT INTO history_messages ({columns}) SELECT {columns}"
                    " FROM history_messages_load ON CONFLICT DO NOTHING"
                )
        else:
            db.executemany(f"INSERT INTO history_messages ({columns}) VALUES ({marks})", rows)
        if not db.postgres and not self._bulk:
            db.executemany(
                "INSERT INTO history_fts (rowid, text) VALUES (?, ?)",
                [(r[0], r[9]) for r in rows if not r[20]],
            )
        db.executemany(
            "INSERT INTO history_images (community, id, image_type, bytes) VALUES (?, ?, ?, ?)"
            " ON CONFLICT (community, id) DO NOTHING",
            images,
        )
        self._count(community, per_day)
        if any(album_deletes.values()):  # the images indexed before: deleted with the album
            self._refold(community, self._album_members(community, albums))
        return [c.id for c in new]

    def _album_members(self, community: str, albums: Sequence[str]) -> list[str]:
        ids: list[str] = []
        for chunk in _chunks(albums):
            clause, values = self.db.in_list("album_id", chunk)
            ids += [i for (i,) in self.db.stream(
                f"SELECT id FROM history_messages WHERE community = ? AND {clause}",
                [community, *values],
            )]  # fmt: skip
        return ids

    def _album_deletes(self, community: str, albums: Sequence[str]) -> dict[str, list[str]]:
        """Album id -> the authors of deletes naming any indexed image of it."""
        found: dict[str, list[str]] = defaultdict(list)
        for chunk in _chunks(albums):
            clause, values = self.db.in_list("m.album_id", chunk)
            for album, author in self.db.stream(
                "SELECT m.album_id, d.author FROM history_deletes d JOIN history_messages m"
                " ON m.community = d.community AND (d.target = m.id OR d.target = m.legacy_id)"
                f" WHERE m.community = ? AND {clause}",
                [community, *values],
            ):
                found[album].append(author)
        return found

    def _count(self, community: str, per_day: dict[tuple[str, int], int]) -> None:
        """Add to the non-deleted message counts of channels and their days."""
        per_channel: dict[str, int] = defaultdict(int)
        for (channel, _), n in per_day.items():
            per_channel[channel] += n
        self.db.executemany(
            "INSERT INTO history_days (community, channel, day, messages) VALUES (?, ?, ?, ?)"
            " ON CONFLICT (community, channel, day) DO UPDATE"
            " SET messages = history_days.messages + excluded.messages",
            [(community, channel, day, n) for (channel, day), n in sorted(per_day.items())],
        )
        self.db.executemany(
            "INSERT INTO history_channels (community, channel, messages) VALUES (?, ?, ?)"
            " ON CONFLICT (community, channel) DO UPDATE"
            " SET messages = history_channels.messages + excluded.messages",
            [(community, channel, n) for channel, n in sorted(per_channel.items())],
        )

    def _free_rids(self, new: list[ChatMessageEvent]) -> list[int]:
        """Each message's rid, moved past rids taken (in the table or earlier in ``new``)."""
        wanted = [message_rid(c.timestamp_ms, c.id) for c in new]
        taken: set[int] = set()
        for chunk in _chunks(sorted(set(wanted))):
            clause, values = self.db.in_list("rid", chunk)
            taken.update(
                int(r) for (r,) in self.db.stream(
                    f"SELECT rid FROM history_messages WHERE {clause}", values
                )
            )  # fmt: skip
        out = []
        for rid in wanted:
            while rid in taken:
                rid += 1
                if rid in taken:
                    continue
                rows = self.db.stream("SELECT 1 FROM history_messages WHERE rid = ?", [rid])
                if rows:
                    taken.add(rid)
            taken.add(rid)
            out.append(rid)
        return out

    def _refold(self, community: str, targets: Sequence[str]) -> None:
        """Fold the stored modifiers into the indexed messages among ``targets`` again."""
        if not targets:
            return
        db = self.db
        found: dict[int, tuple[Any, ...]] = {}
        for column in ("id", "legacy_id"):
            for chunk in _chunks(targets):
                clause, values = db.in_list(column, chunk)
                for row in db.stream(
                    "SELECT rid, id, legacy_id, channel, day, author, text, deleted, album_id,"
                    f" sent_type FROM history_messages WHERE community = ? AND {clause}",
                    [community, *values],
                ):
                    found[int(row[0])] = row
        albums = sorted({row[8] for row in found.values() if row[8]})
        for chunk in _chunks(albums):  # an image's delete is its album's
            clause, values = db.in_list("album_id", chunk)
            for row in db.stream(
                "SELECT rid, id, legacy_id, channel, day, author, text, deleted, album_id,"
                f" sent_type FROM history_messages WHERE community = ? AND {clause}",
                [community, *values],
            ):
                found[int(row[0])] = row
        if not found:
            return
        album_deletes = self._album_deletes(community, albums)
        rows = [found[rid] for rid in sorted(found)]
        mods = self._modifiers(community, [*(r[1] for r in rows), *(r[2] for r in rows if r[2])])
        authority = self.authority(community)
        updates = []
        fts: list[tuple[Any, ...]] = []
        per_day: dict[tuple[str, int], int] = defaultdict(int)
        for rid, message_id, legacy_id, channel, day, author, text, deleted, album, sent in rows:
            # An edited row's text is its newest applicable edit's; edits are never
            # removed, so folding again picks that edit or a newer one: the text sent
            # is needed only while no edit applies, and then it is the row's.
            mine = _both(mods, message_id, legacy_id)
            folded = _fold(author, text, int(sent),
                           _with_deletes(mine, album_deletes.get(album, [])),
                           authority)  # fmt: skip
            updates.append((*folded, rid))
            new_text, new_deleted = folded[0], folded[2]
            if not db.postgres and not self._bulk and (
                new_text != text or new_deleted != deleted
            ):
                if not deleted:
                    fts.append(("delete", rid, text))
                if not new_deleted:
                    fts.append(("insert", rid, new_text))
            if new_deleted != deleted:
                per_day[channel, int(day)] += -1 if new_deleted else 1
        db.executemany(
            "UPDATE history_messages SET text = ?, edited_clock = ?, deleted = ?, pinned = ?,"
            " pinned_by = ?, reactions = ?, mentions = ?, content_type = ? WHERE rid = ?",
            updates,
        )
        for op, rid, text in fts:
            if op == "delete":
                db.stream(
                    "INSERT INTO history_fts (history_fts, rowid, text) VALUES ('delete', ?, ?)",
                    [rid, text],
                )
            else:
                db.stream("INSERT INTO history_fts (rowid, text) VALUES (?, ?)", [rid, text])
        self._count(community, per_day)


def _both(mods: dict[str, _Modifiers], message_id: str, legacy_id: str) -> _Modifiers:
    """The modifiers naming a message by its id or by its legacy id."""
    first = mods.get(message_id) or _Modifiers()
    second = mods.get(legacy_id) if legacy_id else None
    if second is None:
        return first
    return _Modifiers(
        first.edits + second.edits, first.deletes + second.deletes,
        first.reactions + second.reactions, first.pins + second.pins,
    )  # fmt: skip


def _with_deletes(mods: _Modifiers, deletes: list[str]) -> _Modifiers:
    """``mods`` with more delete authors (an album's)."""
    if not deletes:
        return mods
    return _Modifiers(mods.edits, mods.deletes + deletes, mods.reactions, mods.pins)


def _keep_newest(into: dict[Any, Any], key: Any, event: Any) -> None:
    kept = into.get(key)
    if kept is None or (event.clock, event.id) > (kept.clock, kept.id):
        into[key] = event


def _newest_name(into: dict[str, tuple[int, str]], author: str, clock: int, name: str) -> None:
    kept = into.get(author)
    if kept is None or (clock, name) > kept:
        into[author] = (clock, name)
