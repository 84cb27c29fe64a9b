"""Where fetched archive messages go: JSONL or a SQLite file; and the member's record of the
archive ids already fetched (status-go keeps the same list in its database)."""

from __future__ import annotations

import json
import os
import sqlite3
from collections.abc import Iterable
from pathlib import Path

from waku_legacy.archive.message import ArchiveMessage
from waku_legacy.durable import write_atomic
from waku_legacy.errors import ConfigError

MAX_RECORD_BYTES = 64 * 1024 * 1024  # ~70 bytes per fetched archive id: far beyond any record

__all__ = ["FetchRecord", "write_jsonl", "write_sqlite"]

SQLITE_SCHEMA = """
CREATE TABLE IF NOT EXISTS archive_messages (
    hash BLOB NOT NULL,
    archive_id TEXT NOT NULL,
    community_id TEXT NOT NULL,
    timestamp INTEGER NOT NULL,        -- seconds
    topic BLOB NOT NULL,
    payload BLOB NOT NULL,
    padding BLOB NOT NULL,
    sig BLOB NOT NULL,
    third_party_id TEXT NOT NULL,
    PRIMARY KEY (hash, archive_id)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS archive_messages_timestamp ON archive_messages (timestamp);
"""


def write_jsonl(
    path: str | os.PathLike[str],
    rows: Iterable[tuple[str, ArchiveMessage]],
    *,
    community_id: str,
    append: bool = False,
) -> int:
    """One JSON object per message (the archive-build input format plus ``archiveId`` and
    ``communityId``); returns the count."""
    count = 0
    with open(path, "a" if append else "w", encoding="utf-8") as handle:
        for archive_id, message in rows:
            obj = message.to_json()
            obj["archiveId"] = archive_id
            obj["communityId"] = community_id
            handle.write(json.dumps(obj, separators=(",", ":")) + "\n")
            count += 1
    return count


def write_sqlite(
    path: str | os.PathLike[str],
    rows: Iterable[tuple[str, ArchiveMessage]],
    *,
    community_id: str,
) -> int:
    """Insert messages into ``archive_messages`` (re-runs replace the same rows)."""
    connection = sqlite3.connect(path)
    try:
        connection.executescript(SQLITE_SCHEMA)
        count = 0
        with connection:
            for archive_id, m in rows:
                connection.execute(
                    "INSERT OR REPLACE INTO archive_messages VALUES (?,?,?,?,?,?,?,?,?)",
                    (
                        m.hash, archive_id, community_id, m.timestamp, m.topic, m.payload,
                        m.padding, m.sig, m.third_party_id,
                    ),
                )  # fmt: skip
                count += 1
        return count
    finally:
        connection.close()


class FetchRecord:
    """JSON file ``{"<community id>": {"archives": [ids...], "last_clock": ms, "last_link": …}}``
    (``last_link``: the archive link last fetched in full, status-go's
    ``lastSeenArchiveLink``)."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        from waku_legacy.files import read_small_file

        self.path = Path(path)
        try:
            raw = read_small_file(self.path, what="fetch record", max_size=MAX_RECORD_BYTES)
        except ConfigError:
            if self.path.exists() or self.path.is_symlink():
                raise  # a directory, a device, too large, unreadable: say so
            raw = b"{}"  # no record yet
        try:
            self._data = json.loads(raw)
        except (ValueError, RecursionError) as exc:  # RecursionError: nested too deeply
            raise ConfigError(f"fetch record {self.path} is not JSON: {exc}") from exc
        if not isinstance(self._data, dict) or not all(
            isinstance(entry, dict) for entry in self._data.values()
        ):
            raise ConfigError(
                f"fetch record {self.path} must hold a JSON object of objects (one per community)"
            )

    def fetched(self, community_id: str) -> set[str]:
        return set(self._data.get(community_id, {}).get("archives", []))

    def last_clock(self, community_id: str) -> int | None:
        value = self._data.get(community_id, {}).get("last_clock")
        return value if isinstance(value, int) else None

    def add(self, community_id: str, archive_ids: Iterable[str]) -> None:
        entry = self._data.setdefault(community_id, {})
        entry["archives"] = sorted(set(entry.get("archives", [])) | set(archive_ids))

    def set_last_clock(self, community_id: str, clock: int) -> None:
        self._data.setdefault(community_id, {})["last_clock"] = clock

    def last_link(self, community_id: str) -> str | None:
        value = self._data.get(community_id, {}).get("last_link")
        return value if isinstance(value, str) else None

    def set_last_link(self, community_id: str, link: str) -> None:
        self._data.setdefault(community_id, {})["last_link"] = link

    def save(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        body = json.dumps(self._data, indent=1, sort_keys=True) + "\n"
        write_atomic(self.path, body.encode(), step="fetch-record")
