"""Sources, read in parallel Spark partitions with provenance per record.

Each source is first *planned* on the driver (cheap: key-range or byte-range splits, no data
read) into read tasks, small picklable dicts; every task becomes one Spark partition whose
Python worker reads its range and emits RAW Arrow batches (:mod:`~waku_legacy.migrate.records`).

=====================  ============================================  ==========================
kind                   one task reads                                location of a record
=====================  ============================================  ==========================
mailserver-postgres    an id range, server-side cursor (psycopg)     ``id=0x<db key>``
mailserver-leveldb     a DB-key range of a private snapshot          ``key=0x<db key>``
envelope-dump          a record-aligned byte range of one file       ``<file>@<offset>``
store-rest (url)       a time slice, paged with cursors, resumable   ``page=<n>/<slice>#<i>``
store-rest (path)      some saved response files                     ``<file>#<i>``
store-sqlite           a messageHash range of an nwaku SQLite file   ``hash=0x<hash>``
=====================  ============================================  ==========================

No JDBC: the PostgreSQL driver runs inside the partitions (no jars to fetch). Paths must be
readable by the executors (a shared filesystem on a multi-host cluster).
"""

from __future__ import annotations

import glob
import itertools
import json
import os
import shutil
import sqlite3
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from waku_legacy.errors import ConfigError, WakuLegacyError
from waku_legacy.faults import task_fault
from waku_legacy.files import check_path_component
from waku_legacy.migrate.config import SourceConfig, SourceKind
from waku_legacy.migrate.records import (
    FORMAT_V1,
    FORMAT_V2_JSON,
    FORMAT_V2_PROTO,
    RAW_SCHEMA,
)

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from waku_legacy.identity.topic_mapping import TopicMapping
    from waku_legacy.store.rest_client import RestPage

__all__ = [
    "BATCH_ROWS",
    "SourceError",
    "plan_source",
    "plan_sources",
    "read_task",
]

BATCH_ROWS = 4096
Task = dict[str, Any]


class SourceError(WakuLegacyError):
    """A source that cannot be planned or read."""


class _Batcher:
    """Accumulates RAW rows column-wise and emits Arrow batches of BATCH_ROWS rows: RAW
    batches, or with a topic ``mapping`` the MESSAGE batches of the same rows decoded
    straight from the Python columns (no RAW Arrow batch built and read back)."""

    def __init__(self, task: Task, mapping: TopicMapping | None = None) -> None:
        self.source = task["source"]
        self.kind = task["kind"]
        self.rank = task["rank"]
        self.mapping = mapping
        self._reset()

    def _reset(self) -> None:
        self.location: list[str] = []
        self.format: list[str] = []
        self.data: list[bytes | None] = []
        self.pubsub: list[str | None] = []
        self.claimed: list[bytes | None] = []
        self.error: list[str | None] = []

    def add(
        self,
        location: str,
        fmt: str,
        data: bytes | None,
        pubsub_topic: str | None = None,
        claimed_hash: bytes | None = None,
        error: str | None = None,
    ) -> pa.RecordBatch | None:
        self.location.append(location)
        self.format.append(fmt)
        self.data.append(data)
        self.pubsub.append(pubsub_topic)
        self.claimed.append(claimed_hash)
        self.error.append(error)
        return self.flush() if len(self.location) >= BATCH_ROWS else None

    def flush(self) -> pa.RecordBatch | None:
        n = len(self.location)
        if not n:
            return None
        if self.mapping is not None:
            from waku_legacy.migrate.decode import decode_columns

            # The same values a RAW batch would hand back: bytes, not views or bytearrays.
            data = [d if d is None or type(d) is bytes else bytes(d) for d in self.data]
            columns = [[self.source] * n, [self.kind] * n, self.location, [self.rank] * n,
                       self.format, data, self.pubsub, self.claimed, self.error]  # fmt: skip
            self._reset()
            return decode_columns(columns, self.mapping)
        batch = pa.RecordBatch.from_arrays(
            [
                pa.array([self.source] * n, pa.string()),
                pa.array([self.kind] * n, pa.string()),
                pa.array(self.location, pa.string()),
                pa.array([self.rank] * n, pa.int32()),
                pa.array(self.format, pa.string()),
                pa.array(self.data, pa.binary()),
                pa.array(self.pubsub, pa.string()),
                pa.array(self.claimed, pa.binary()),
                pa.array(self.error, pa.string()),
            ],
            schema=RAW_SCHEMA,
        )
        self._reset()
        return batch


def _hex(value: bytes | None) -> str | None:
    return None if value is None else value.hex()


def _unhex(value: str | None) -> bytes | None:
    return None if value is None else bytes.fromhex(value)


def _expand_paths(pattern: str, what: str) -> list[str]:
    path = Path(pattern)
    if path.is_dir():
        files = sorted(str(p) for p in path.iterdir() if p.is_file() and not p.name.startswith("."))
    elif any(ch in pattern for ch in "*?["):
        files = sorted(glob.glob(pattern))
    else:
        files = [pattern] if path.exists() else []
    if not files:
        raise SourceError(f"{what}: no file matches {pattern}")
    return files


# -- planning (driver) -----------------------------------------------------------------------


def plan_source(source: SourceConfig, parts: int, work_dir: str) -> list[Task]:
    """Split one source into read tasks (at most about ``parts`` of them)."""
    base = {"source": source.name, "kind": str(source.kind), "rank": source.rank}
    parts = max(1, source.partitions or parts)
    try:
        if source.kind in (SourceKind.MAILSERVER_LEVELDB, SourceKind.MAILSERVER_POSTGRES):
            return _plan_mailserver(source, base, parts)
        if source.kind is SourceKind.ENVELOPE_DUMP:
            from waku_legacy.mailserver_compat.storage.dump import plan_dump_splits

            assert source.path is not None
            files = _expand_paths(source.path, f"source {source.name}")
            sizes = [max(1, os.path.getsize(f)) for f in files]
            total = sum(sizes)
            tasks = []
            for file, size in zip(files, sizes, strict=True):
                share = max(1, round(parts * size / total))
                for start, stop in plan_dump_splits(file, share):
                    tasks.append({**base, "path": file, "start": start, "stop": stop})
            return tasks
        if source.kind is SourceKind.STORE_SQLITE:
            assert source.path is not None
            _nwaku_sqlite_columns(source.path)  # fails early on a file that is not one
            edges = [None, *(bytes([(256 * i) // parts]) for i in range(1, parts)), None]
            return [
                {**base, "path": source.path, "lo": _hex(a), "hi": _hex(b)}
                for a, b in itertools.pairwise(edges)
            ]
        if source.kind is SourceKind.STORE_REST:
            if source.path is not None:
                files = _expand_paths(source.path, f"source {source.name}")
                chunk = max(1, -(-len(files) // parts))
                return [
                    {**base, "files": files[i : i + chunk], "pubsub_topic": source.pubsub_topic}
                    for i in range(0, len(files), chunk)
                ]
            return _plan_rest(source, base, parts, work_dir)
    except WakuLegacyError:
        raise
    except OSError as exc:
        raise SourceError(f"source {source.name} ({source.kind}): {exc}") from exc
    raise ConfigError(f"source kind {source.kind} has no reader")  # pragma: no cover


def _plan_mailserver(source: SourceConfig, base: Task, parts: int) -> list[Task]:
    """A mailserver database's key ranges, one task each (LevelDB by path, PostgreSQL by DSN)."""
    from waku_legacy.mailserver_compat.storage.leveldb import LevelDBEnvelopeStore
    from waku_legacy.mailserver_compat.storage.postgres import PostgresEnvelopeStore

    db: LevelDBEnvelopeStore | PostgresEnvelopeStore
    if source.kind is SourceKind.MAILSERVER_LEVELDB:
        assert source.path is not None
        location = {"path": source.path}
        db = LevelDBEnvelopeStore(source.path)
    else:
        assert source.dsn is not None
        location = {"dsn": source.dsn}
        db = PostgresEnvelopeStore(source.dsn)
    with db:
        splits = db.plan_splits(parts)
    return [{**base, **location, "start": _hex(a), "stop": _hex(b)} for a, b in splits]


def _plan_rest(source: SourceConfig, base: Task, parts: int, work_dir: str) -> list[Task]:
    # Cursor paging is sequential; parallelism comes from time slices, which only make sense
    # when the time range is known (explicitly configured).
    start, end = source.start_time, source.end_time
    if start is None or end is None or not source.partitions:
        slices: list[tuple[int | None, int | None]] = [(start, end)]
    else:
        n = max(1, source.partitions)
        cuts = [start + ((end - start + 1) * i) // n for i in range(n + 1)]
        slices = [(cuts[i], cuts[i + 1] - 1) for i in range(n) if cuts[i + 1] > cuts[i]]
    if source.state_file:
        state_root = source.state_file
    else:
        # The name is checked by the config parser; a SourceConfig built in code gets the same
        # rule, so the saved pages always stay under work_dir.
        name = check_path_component(source.name, where=f"source {source.name!r}", key="name")
        state_root = os.path.join(work_dir, "rest-pages", name)
    tasks = []
    for i, (a, b) in enumerate(slices):
        tasks.append(
            {
                **base,
                "url": source.url,
                "pubsub_topic": source.pubsub_topic,
                "content_topics": list(source.content_topics),
                "start_time": a,
                "end_time": b,
                "page_size": source.page_size,
                "retries": source.retries,
                "timeout": source.timeout,
                "save_dir": os.path.join(state_root, f"slice-{i:03d}-of-{len(slices):03d}"),
                "slice": i,
            }
        )
    return tasks


# -- reading (executors) -----------------------------------------------------------------------


def _read_leveldb(task: Task, out: _Batcher) -> Iterator[pa.RecordBatch | None]:
    from waku_legacy.mailserver_compat.storage.leveldb import LevelDBEnvelopeStore, snapshot_copy

    scratch = tempfile.mkdtemp(prefix="waku-legacy-ldb-")
    try:
        snapshot = snapshot_copy(task["path"], Path(scratch) / "db")
        with LevelDBEnvelopeStore(snapshot) as db:
            for key, value in db.iter_range(_unhex(task["start"]), _unhex(task["stop"])):
                yield out.add("key=0x" + key.hex(), FORMAT_V1, value)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def _read_postgres(task: Task, out: _Batcher) -> Iterator[pa.RecordBatch | None]:
    from waku_legacy.mailserver_compat.storage.postgres import PostgresEnvelopeStore

    with PostgresEnvelopeStore(task["dsn"]) as db:
        for key, data in db.iter_id_range(_unhex(task["start"]), _unhex(task["stop"])):
            yield out.add("id=0x" + key.hex(), FORMAT_V1, data)


def _read_dump(task: Task, out: _Batcher) -> Iterator[pa.RecordBatch | None]:
    from waku_legacy.mailserver_compat.storage.dump import iter_dump_records

    name = task["path"]
    for record in iter_dump_records(name, start=task["start"], stop=task["stop"]):
        yield out.add(f"{name}@{record.offset}", FORMAT_V1, record.data, error=record.error)


def _nwaku_sqlite_columns(path: str) -> set[str]:
    try:
        with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as db:
            cols = {r[1] for r in db.execute("PRAGMA table_info(Message)")}
    except sqlite3.Error as exc:
        raise SourceError(f"{path} is not a readable SQLite file: {exc}") from exc
    if not {"pubsubTopic", "contentTopic", "payload", "timestamp"} <= cols:
        raise SourceError(f"{path} has no nwaku Message table")
    return cols


def _read_sqlite(task: Task, out: _Batcher) -> Iterator[pa.RecordBatch | None]:
    from waku_legacy.proto import waku_message_pb2

    path = task["path"]
    cols = _nwaku_sqlite_columns(path)
    has_hash = "messageHash" in cols
    select = ", ".join(
        [
            "messageHash" if has_hash else "NULL",
            "pubsubTopic",
            "contentTopic",
            "payload",
            "version" if "version" in cols else "0",
            "timestamp",
            "meta" if "meta" in cols else "NULL",
        ]
    )
    where, args = [], []
    if has_hash and task["lo"] is not None:
        where.append("messageHash >= ?")
        args.append(_unhex(task["lo"]))
    if has_hash and task["hi"] is not None:
        where.append("messageHash < ?")
        args.append(_unhex(task["hi"]))
    if not has_hash and task["lo"] is not None:
        return  # an old file without hashes is read by the first task only
    sql = f"SELECT {select} FROM Message" + (" WHERE " + " AND ".join(where) if where else "")
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as db:
        for n, (h, pubsub, content, payload, version, timestamp, meta) in enumerate(
            db.execute(sql, args)
        ):
            location = f"hash=0x{bytes(h).hex()}" if h else f"row={n}"
            try:
                message = waku_message_pb2.WakuMessage(
                    payload=bytes(payload or b""),
                    content_topic=_text(content),
                    version=int(version),
                    timestamp=int(timestamp),
                )
                if meta:
                    message.meta = bytes(meta)
                data = message.SerializeToString()
            except (ValueError, TypeError, UnicodeDecodeError) as exc:
                yield out.add(location, FORMAT_V2_PROTO, None, error=f"unreadable row: {exc}")
                continue
            yield out.add(location, FORMAT_V2_PROTO, data, _text(pubsub), bytes(h) if h else None)


def _text(value: bytes | str | None) -> str:
    if value is None:
        return ""
    return value if isinstance(value, str) else bytes(value).decode("utf-8")


def _rest_rows(
    page: RestPage, prefix: str, pubsub: str | None, out: _Batcher
) -> Iterator[pa.RecordBatch | None]:
    for i, entry in enumerate(page.messages):
        yield out.add(
            f"{prefix}#{i}",
            FORMAT_V2_JSON,
            json.dumps(entry, separators=(",", ":"), sort_keys=True).encode(),
            pubsub,
        )


def _read_rest(task: Task, out: _Batcher) -> Iterator[pa.RecordBatch | None]:
    from waku_legacy.store.rest_client import StorePager, fetch_pages

    pubsub = task.get("pubsub_topic")
    if "files" in task:
        for path, page in _safe_saved_pages(task["files"]):
            if page is None:
                yield out.add(str(path), FORMAT_V2_JSON, None, error=f"unreadable page: {path}")
                continue
            yield from _rest_rows(page, str(path), pubsub, out)
        return
    pager = StorePager(
        pubsub_topic=pubsub,
        content_topics=task["content_topics"],
        start_time=task["start_time"],
        end_time=task["end_time"],
        page_size=task["page_size"],
    )
    for page in fetch_pages(
        task["url"], pager, save_dir=task["save_dir"], retries=task["retries"],
        timeout=task["timeout"],
    ):  # fmt: skip
        yield from _rest_rows(page, f"page={page.number}/{task['slice']}", pubsub, out)


def _safe_saved_pages(files: list[str]) -> Iterator[tuple[Path, RestPage | None]]:
    from waku_legacy.store.rest_client import iter_saved_pages

    for file in files:
        try:
            yield from iter_saved_pages([file])
        except (WakuLegacyError, OSError):
            yield Path(file), None


_READERS: dict[str, Callable[[Task, _Batcher], Iterator[pa.RecordBatch | None]]] = {
    SourceKind.MAILSERVER_LEVELDB.value: _read_leveldb,
    SourceKind.MAILSERVER_POSTGRES.value: _read_postgres,
    SourceKind.ENVELOPE_DUMP.value: _read_dump,
    SourceKind.STORE_SQLITE.value: _read_sqlite,
    SourceKind.STORE_REST.value: _read_rest,
}


def read_task(task: Task, mapping: TopicMapping | None = None) -> Iterator[pa.RecordBatch]:
    """Every RAW batch of one read task (with a topic ``mapping``: decoded, MESSAGE)."""
    task_fault(f"read:{task['kind']}")
    out = _Batcher(task, mapping)
    for batch in _READERS[task["kind"]](task, out):
        if batch is not None:
            yield batch
    last = out.flush()
    if last is not None:
        yield last


def plan_sources(
    spark: SparkSession,
    sources: list[SourceConfig] | tuple[SourceConfig, ...],
    *,
    work_dir: str,
    parts: int | None = None,
) -> list[Task]:
    """The read tasks of every source, each split into about ``parts`` tasks (default: the
    cluster's parallelism, at least 2)."""
    default_parts = parts or max(2, spark.sparkContext.defaultParallelism)
    tasks: list[Task] = []
    for source in sources:
        tasks.extend(plan_source(source, default_parts, work_dir))
    return tasks
