"""The Waku v2 message store in nwaku's schema (SQLite by default, PostgreSQL by URL).

    store = open_store("sqlite:///var/lib/waku-legacy/store.sqlite3")   # or a plain path
    store = open_store("postgresql://user@host/db")
    store.insert_messages(rows)        # StoredMessage rows (or tuples in that order)
    page = store.query(StoreQuery(pubsub_topic=..., content_topics=[...], start_time=...,
                                  end_time=..., cursor=page.cursor, ascending=True, limit=20))
    store.get_envelope(message_hash)   # the original v1 envelope bytes, when it came from one
    store.query_v1_envelopes(V1EnvelopeQuery(lower_key, upper_key, topics=..., cursor=...))

URLs: ``sqlite:///abs/path``, ``sqlite:relative/path``, a bare filesystem path (SQLite),
``postgresql://...`` or ``postgres://...``. A ``?synchronous=FULL`` query on a SQLite URL
sets SQLite's durability level; ``?mmap_size=<bytes>`` lets SQLite read the file through
memory-mapped I/O (about half the time of a 100-message page on a 1M-message store);
``?busy_timeout=<ms>`` how long a write waits for another process's lock on the file (30 s)
before the store counts as unavailable.

A lost connection (PostgreSQL server gone, SQLite file locked or gone) raises
:class:`StoreUnavailable` and is re-opened by a later call, on the schedule of the
``reconnect`` passed to :func:`open_store` (:mod:`waku_legacy.store.reconnect`; share one
between the connections to one store).

Modules: ``types`` (rows, pages, errors, the store interface); ``sql`` (the queries once,
over a ``Dialect``); ``sqlite`` and ``postgres`` (the two back ends), ``pg_load``
(PostgreSQL bulk load), ``dsn`` (connection strings without their password); ``query``
(nwaku's query semantics) and ``legacy_query`` (v2-beta4's); ``rest_json`` (nwaku's REST
JSON) and ``rest_client`` (reading a node's REST store); ``protocol/`` (the store protocols
over libp2p, sans-IO); ``reconnect`` (the reconnect schedule); ``role`` (the archiving
role's fencing token and the link schedule).
"""

from __future__ import annotations

from urllib.parse import parse_qs, urlsplit

from waku_legacy.store import types
from waku_legacy.store.reconnect import Reconnect
from waku_legacy.store.types import *  # noqa: F403  (the store's values and errors)
from waku_legacy.store.types import MessageStore, StoreError

__all__ = ["Reconnect", "check_store_file", "is_postgres_url", "open_store", "sqlite_path"]
__all__ += types.__all__


def is_postgres_url(url: str) -> bool:
    return url.startswith(("postgresql://", "postgres://"))


def sqlite_path(url: str) -> str:
    """The filesystem path of a SQLite store URL (file-URL rules: ``sqlite:///abs/path`` is
    absolute, ``sqlite:relative/path`` relative) or of a bare path."""
    if url.startswith("sqlite:"):
        parts = urlsplit(url)
        if parts.netloc not in ("", "localhost"):
            raise StoreError(
                f"store URL {url!r}: use sqlite:///absolute/path or sqlite:relative/path"
            )
        path = parts.path
        return "/" + path.lstrip("/") if path.startswith("/") else path
    if "://" in url:
        raise StoreError(
            f"store URL {url!r} is neither sqlite:///… nor postgresql://… (nor a file path)"
        )
    return url


#: The first 16 bytes of every SQLite 3 database file (sqlite.org/fileformat.html, 1.3).
SQLITE_HEADER = b"SQLite format 3\x00"


def check_store_file(url: str, *, create: bool) -> None:
    """Refuse a SQLite store that is missing (unless ``create``) or is not a SQLite file,
    before anything opens it: opening creates a missing file, and a service would then serve
    an empty store without a word. PostgreSQL URLs are not checked here (a server to ask).

    The file is never opened outside SQLite while it may be a database: closing any
    descriptor of a file drops every POSIX lock the process holds on it, the shared locks of
    its open SQLite connections included; another process's last connection then deletes
    the WAL and shared-memory files under them ("disk I/O error", lost commits;
    sqlite.org/howtocorrupt.html 2.2). SQLite's own descriptors do not have that effect."""
    if is_postgres_url(url.strip()):
        return
    import os
    import sqlite3
    import stat
    from urllib.parse import quote

    path = sqlite_path(url.strip())
    try:
        info = os.stat(path)
    except FileNotFoundError:
        if create:
            return
        raise StoreError(
            f"the store {path} does not exist: give the file `waku-legacy migrate` wrote "
            "(its [output] store), or set [store] create = true to start an empty one"
        ) from None
    except OSError as exc:
        raise StoreError(f"cannot read the store {path}: {exc.strerror or exc}") from None
    if stat.S_ISDIR(info.st_mode):
        raise StoreError(f"the store {path} is a directory, not a SQLite file")
    if info.st_size == 0:
        if create:
            return
        raise StoreError(
            f"the store {path} is an empty file (no messages): give the file `waku-legacy "
            "migrate` wrote, or set [store] create = true to start an empty one"
        )
    if not os.access(path, os.R_OK):
        raise StoreError(f"cannot read the store {path}: Permission denied")
    try:
        # mode=rw: never creates the file; reading the schema version reads the header
        # timeout 0: a file another connection holds is not waited for (see below)
        db = sqlite3.connect(f"file:{quote(os.path.abspath(path))}?mode=rw", uri=True, timeout=0)
        try:
            db.execute("PRAGMA schema_version").fetchone()
        finally:
            db.close()
        return
    except sqlite3.OperationalError:
        # locked, busy, cannot open now: a database maybe (its locks must stay): opening it
        # will tell
        return
    except sqlite3.DatabaseError:
        pass  # SQLite's "file is not a database": said below with its first bytes
    try:
        with open(path, "rb") as handle:  # no SQLite connection holds locks on a non-database
            header = handle.read(len(SQLITE_HEADER))
    except OSError as exc:
        raise StoreError(f"cannot read the store {path}: {exc.strerror or exc}") from None
    if header == SQLITE_HEADER:
        return  # the magic with a damaged header: opening it will tell
    raise StoreError(f"the store {path} is not a SQLite database (its first bytes: {header!r})")


def _count_option(
    url: str, options: dict[str, list[str]], name: str, default: int, unit: str
) -> int:
    text = options.get(name, [str(default)])[-1]
    if not text.isdigit():
        raise StoreError(f"store URL {url!r}: {name} must be a {unit}, not {text!r}")
    return int(text)


def open_store(url: str, *, reconnect: Reconnect | None = None) -> MessageStore:
    """Open (creating tables when missing) the v2 store at ``url``; ``reconnect``: when a
    lost connection may be opened again (one per store, shared by its connections)."""
    if not isinstance(url, str) or not url.strip():
        raise StoreError("the store URL is empty")
    url = url.strip()
    if is_postgres_url(url):
        from waku_legacy.store.postgres import PostgresMessageStore

        return PostgresMessageStore(url, reconnect=reconnect)
    path = sqlite_path(url)
    if not path:
        raise StoreError(f"store URL {url!r} names no file")
    synchronous = "NORMAL"
    options: dict[str, list[str]] = {}
    if url.startswith("sqlite:") and "?" in url:
        options = parse_qs(urlsplit(url).query)
        synchronous = options.get("synchronous", [synchronous])[-1]
    from waku_legacy.store.sqlite import SqliteMessageStore

    return SqliteMessageStore(
        path, synchronous=synchronous,
        mmap_size=_count_option(url, options, "mmap_size", 0, "byte count"),
        busy_timeout=_count_option(url, options, "busy_timeout", 30000, "time in ms"),
        reconnect=reconnect,
    )  # fmt: skip
