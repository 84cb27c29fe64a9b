"""The PostgreSQL store's bulk load (waku_legacy.store.pg_load, the migration's sink): the
same rows and schema as the store's own inserts, idempotent reruns, a first load invisible to
the store's readers until it is whole, and a load killed with SIGKILL anywhere (mid-COPY,
after a commit, during the index builds, in the swap) followed by a rerun gives the rows and
indexes of an uninterrupted run."""

from __future__ import annotations

import hashlib
import os
import signal
import subprocess
import sys
from typing import Any

import psycopg
import pytest

from tests.conftest import REPO_ROOT
from tests.helpers import fresh_database
from waku_legacy.faults import ENV_VAR
from waku_legacy.store import open_store
from waku_legacy.store.pg_load import (
    LOAD_SCHEMA,
    connect_loader,
    finish_load,
    load_rows,
    prepare_load,
    secondary_indexes,
)

pytestmark = pytest.mark.postgres

ROOT = REPO_ROOT


def make_rows(n: int) -> list[tuple[Any, ...]]:
    """``n`` store rows (the migration's column order): some without meta, some without a
    v1 envelope, payloads of varying length, one pubsub topic per parity."""
    rows = []
    for i in range(n):
        h = hashlib.sha256(b"msg %d" % i).digest()
        envelope = None if i % 7 == 3 else b"\xf8" + hashlib.sha512(b"env %d" % i).digest()
        topic = b"\x01\x02\x03\x04"
        db_key = None if envelope is None else (1000 + i).to_bytes(4, "big") + h + topic
        meta = None if i % 3 else b"m%d" % i
        rows.append(
            (h, f"/waku/2/rs/16/{i % 2}", f"/waku/1/0x{i % 5:08x}/rfc26",
             b"p" * (i % 300), 1, 1_600_000_000_000_000_000 + i * 1_000_000, meta,
             envelope, db_key)
        )  # fmt: skip
    return rows


def _tables(url: str) -> dict[str, list[tuple[Any, ...]]]:
    with psycopg.connect(url) as conn:
        return {
            "messages": conn.execute(
                "SELECT messageHash, pubsubTopic, contentTopic, payload, version, timestamp, "
                "meta FROM messages ORDER BY messageHash"
            ).fetchall(),
            "messages_lookup": conn.execute(
                "SELECT timestamp, messageHash FROM messages_lookup ORDER BY messageHash"
            ).fetchall(),
            "v1_envelopes": conn.execute(
                "SELECT messageHash, envelope, dbKey FROM v1_envelopes ORDER BY messageHash"
            ).fetchall(),
        }


def _indexes(url: str) -> list[tuple[str, str]]:
    with psycopg.connect(url) as conn:
        rows = conn.execute(
            "SELECT indexname, indexdef FROM pg_indexes WHERE schemaname = 'public' "
            "ORDER BY indexname"
        ).fetchall()
    return [(name, definition) for name, definition in rows]


def _catalog(url: str) -> dict[str, list[tuple[Any, ...]]]:
    """The store's tables as the catalog describes them: columns, constraints, indexes, and
    the schemas that exist (no load schema left behind)."""
    with psycopg.connect(url) as conn:
        return {
            "columns": conn.execute(
                "SELECT table_name, column_name, ordinal_position, data_type, is_nullable, "
                "column_default FROM information_schema.columns WHERE table_schema = 'public' "
                "ORDER BY table_name, ordinal_position"
            ).fetchall(),
            "constraints": conn.execute(
                "SELECT conrelid::regclass::text, conname, contype, pg_get_constraintdef(oid) "
                "FROM pg_constraint WHERE connamespace = 'public'::regnamespace ORDER BY 1, 2"
            ).fetchall(),
            "indexes": _indexes(url),
            "schemas": conn.execute(
                "SELECT nspname FROM pg_namespace WHERE nspname NOT LIKE 'pg_%' "
                "AND nspname <> 'information_schema' ORDER BY 1"
            ).fetchall(),
        }


def _load(url: str, rows: list[tuple[Any, ...]], batch_size: int) -> tuple[int, int]:
    """(rows sent, new messages) as the migration's sink counts them."""
    first_load = prepare_load(url)
    with connect_loader(url) as conn:
        sent, new = load_rows(conn, rows, batch_size=batch_size, first_load=first_load)
    return sent, new - finish_load(url)


@pytest.fixture()
def two_databases(postgres_dsn: str):
    with fresh_database(postgres_dsn, "pgload_a_") as a:
        with fresh_database(postgres_dsn, "pgload_b_") as b:
            yield a, b


def test_load_equals_the_stores_inserts_and_reruns_add_nothing(two_databases) -> None:
    loaded, reference = two_databases
    rows = make_rows(1_000)
    with open_store(reference) as store:  # the store's own insert path, its own schema
        assert store.insert_messages(rows) == len(rows)
    assert _load(loaded, rows, batch_size=300) == (len(rows), len(rows))
    assert _tables(loaded) == _tables(reference)
    # the schema, keys and indexes included, exactly as the store makes it; no load schema
    assert _catalog(loaded) == _catalog(reference)
    assert {name for name, _ in _indexes(loaded)} >= set(secondary_indexes())

    # A rerun, and a load into a store that already holds some rows: nothing new, no index
    # dropped (the store was not empty).
    assert _load(loaded, rows, batch_size=300) == (len(rows), 0)
    assert _load(loaded, rows[:10] + make_rows(1_010)[1_000:], batch_size=300) == (20, 10)
    with open_store(reference) as store:
        store.insert_messages(make_rows(1_010)[1_000:])
    assert _tables(loaded) == _tables(reference)
    assert _catalog(loaded) == _catalog(reference)
    with open_store(loaded) as store:
        assert store.count() == 1_010
        assert store.get_envelope(rows[0][0]) == rows[0][7]
        assert store.get_message(rows[3][0]).payload == rows[3][3]


def test_first_load_keeps_one_of_rows_two_writers_sent(two_databases) -> None:
    loaded, reference = two_databases
    rows = make_rows(900)
    with open_store(reference) as store:
        store.insert_messages(rows)
    assert prepare_load(loaded) is True
    with connect_loader(loaded) as one, connect_loader(loaded) as other:
        # Two writers of a first load whose rows overlap (and a batch repeating a row, as a
        # retried Spark task would): the keys' builds meet the repeats and keep one of each.
        assert load_rows(one, rows[:500], batch_size=200, first_load=True) == (500, 500)
        sent, new = load_rows(
            other, rows[100:200] + rows[450:] + rows[899:], batch_size=200, first_load=True
        )
    assert (sent, new) == (551, 551)
    assert finish_load(loaded) == 151  # the writers' "new" that were repeats
    assert _tables(loaded) == _tables(reference)
    assert _catalog(loaded) == _catalog(reference)


def _load_schema_tables(url: str) -> dict[str, int]:
    with psycopg.connect(url) as conn:
        return {
            table: conn.execute(f"SELECT count(*) FROM {LOAD_SCHEMA}.{table}").fetchone()[0]
            for table in ("messages", "messages_lookup", "v1_envelopes")
        }


def _unfinished_first_load(
    loaded: str, reference: str, rows: list[tuple[Any, ...]], copied: list[tuple[Any, ...]]
) -> None:
    """``rows`` into ``reference`` by the store's own inserts; ``copied`` into a first load of
    ``loaded``, not finished."""
    with open_store(reference) as store:
        store.insert_messages(rows)
    assert prepare_load(loaded) is True
    with connect_loader(loaded) as conn:
        load_rows(conn, copied, batch_size=250, first_load=True)


def test_first_load_is_invisible_to_the_store_until_finished(two_databases) -> None:
    loaded, reference = two_databases
    rows = make_rows(600)
    _unfinished_first_load(loaded, reference, rows, rows)
    # Loaded but not finished: the store (what the bridge opens) is empty and whole, its
    # keys and indexes all there; the rows wait, unindexed, in the load schema.
    with open_store(loaded) as store:
        assert store.count() == 0
    empty = _catalog(loaded)
    assert empty["indexes"] == _indexes(reference)
    assert empty["constraints"] == _catalog(reference)["constraints"]
    assert _load_schema_tables(loaded) == {
        "messages": 600, "messages_lookup": 600, "v1_envelopes": 600 - 86,
    }  # fmt: skip
    with psycopg.connect(loaded) as conn:
        assert conn.execute(
            "SELECT count(*) FROM pg_indexes WHERE schemaname = %s", (LOAD_SCHEMA,)
        ).fetchone() == (0,)
    assert prepare_load(loaded) is True  # still empty: a rerun would start the load afresh
    assert _load_schema_tables(loaded) == {"messages": 0, "messages_lookup": 0, "v1_envelopes": 0}
    with connect_loader(loaded) as conn:
        load_rows(conn, rows, batch_size=250, first_load=True)
    assert finish_load(loaded) == 0
    assert _tables(loaded) == _tables(reference)
    assert _catalog(loaded) == _catalog(reference)
    assert prepare_load(loaded) is False  # not empty any more: the next load is staged


def test_rows_the_bridge_writes_during_a_first_load_are_kept(two_databases) -> None:
    loaded, reference = two_databases
    rows = make_rows(700)
    _unfinished_first_load(loaded, reference, rows, rows[:650])
    with open_store(loaded) as store:  # live messages, one also in the load
        assert store.insert_messages(rows[649:]) == 51
    assert finish_load(loaded) == 1  # the store already held one of the load's messages
    assert _tables(loaded) == _tables(reference)
    assert _catalog(loaded) == _catalog(reference)


_CHILD = """
import sys
from tests.waku_legacy.store.test_pg_load import make_rows
from waku_legacy.faults import fault_from_env
from waku_legacy.store.pg_load import connect_loader, finish_load, load_rows, prepare_load
url, n = sys.argv[1], int(sys.argv[2])
fault = fault_from_env()
first_load = prepare_load(url)
with connect_loader(url) as conn:
    rows = make_rows(n)
    load_rows(conn, rows, batch_size=400, fault=fault, first_load=first_load)
finish_load(url, fault=fault)
"""


def _child(url: str, fault: str | None, n: int = 2_000) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != ENV_VAR}
    if fault:
        env[ENV_VAR] = fault
    return subprocess.run(
        [sys.executable, "-c", _CHILD, url, str(n)], cwd=ROOT, env=env, capture_output=True,
        text=True, timeout=120,
    )  # fmt: skip


def _store_count(url: str) -> int:
    with open_store(url) as store:
        return store.count()


def test_kill_9_mid_copy_then_rerun_gives_the_uninterrupted_rows(two_databases) -> None:
    killed, clean = two_databases
    done = _child(clean, None)
    assert done.returncode == 0, done.stderr
    # SIGKILL half-way through the COPY of the third batch of a first load (two batches
    # committed into the load schema): the store itself stays empty and whole.
    crashed = _child(killed, "store:copy:2")
    assert crashed.returncode == -signal.SIGKILL, crashed.stderr
    assert _load_schema_tables(killed)["messages"] == 800  # batches 0 and 1, none of batch 2
    assert _store_count(killed) == 0
    assert _indexes(killed) == _indexes(clean)
    rerun = _child(killed, None)
    assert rerun.returncode == 0, rerun.stderr
    assert _tables(killed) == _tables(clean)
    assert len(_tables(killed)["messages"]) == 2_000
    assert _catalog(killed) == _catalog(clean)


@pytest.mark.parametrize(
    "fault",
    [
        "store:batch:0",  # after the first batch's commit
        "store:index:messageindex",  # before the first key's build
        "store:index:idx_content_pubsub_time",  # with the keys built, among the others
        "store:swap",  # in the transaction that moves the tables in, before its commit
    ],
)
def test_kill_9_in_a_first_load_then_rerun_gives_the_uninterrupted_rows(
    two_databases, fault: str
) -> None:
    killed, clean = two_databases
    assert _child(clean, None).returncode == 0
    crashed = _child(killed, fault)
    assert crashed.returncode == -signal.SIGKILL, crashed.stderr
    assert _store_count(killed) == 0  # never a store without its keys: empty until the swap
    assert _indexes(killed) == _indexes(clean)
    rerun = _child(killed, None)
    assert rerun.returncode == 0, rerun.stderr
    assert _tables(killed) == _tables(clean)
    assert _catalog(killed) == _catalog(clean)


def test_kill_9_mid_copy_into_a_filled_store_then_rerun_gives_the_uninterrupted_rows(
    two_databases,
) -> None:
    killed, clean = two_databases
    for url in (killed, clean):  # a finished first load, then a second, larger one
        assert _child(url, None, n=1_000).returncode == 0
    assert _child(clean, None).returncode == 0
    crashed = _child(killed, "store:copy:3")  # staged: batches 0-2 inserted, 3 half-copied
    assert crashed.returncode == -signal.SIGKILL, crashed.stderr
    assert _store_count(killed) == 1_200
    with psycopg.connect(killed) as conn:  # the killed session's staging table is gone
        stale = conn.execute(
            "SELECT count(*) FROM pg_class WHERE relname = 'waku_store_stage'"
        ).fetchone()
    assert stale == (0,)
    assert _child(killed, None).returncode == 0
    assert _tables(killed) == _tables(clean)
    assert _catalog(killed) == _catalog(clean)


def _message_row(row: tuple[Any, ...], location: str, quarantined: bool = False) -> dict:
    """A step-1 MESSAGE row holding the store ``row`` (no hash when quarantined)."""
    from waku_legacy.migrate.records import MESSAGE_SCHEMA
    from waku_legacy.migrate.sinks import STORE_COLUMNS

    message = dict.fromkeys(MESSAGE_SCHEMA.names)
    message.update(zip(STORE_COLUMNS, row, strict=True))
    message.update(source="ms", location=location, quarantined=quarantined)
    if quarantined:
        message["message_hash"] = None
    return message


@pytest.mark.spark
def test_spark_sink_writes_every_file_and_reruns_add_nothing(
    spark, two_databases, tmp_path
) -> None:
    """write_postgres_store: a task per step-1 file, each leaving out its quarantined rows
    and the copies to drop in its own file; identical copies kept in two files (two sources,
    or a retried task) are stored once; a rerun adds nothing."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from waku_legacy.migrate.dedup import COPY_SCHEMA, part_file
    from waku_legacy.migrate.records import MESSAGE_SCHEMA
    from waku_legacy.migrate.sinks import write_postgres_store

    loaded, reference = two_databases
    rows = make_rows(3_000)
    files: list[list[dict]] = [[] for _ in range(4)]
    for i, row in enumerate(rows):
        files[i % 4].append(_message_row(row, f"a{i}"))
    # rows 0-99 again in the next file: the copies of 0-49 are to drop there, those of
    # 50-99 are kept in both files
    dropped = []
    for i, row in enumerate(rows[:100]):
        part = (i + 1) % 4
        files[part].append(_message_row(row, f"b{i}"))
        if i < 50:
            dropped.append({"message_hash": row[0], "source": "ms", "location": f"b{i}",
                            "part": part})  # fmt: skip
    files[2].append(_message_row(rows[7], "junk", quarantined=True))
    messages, duplicates = tmp_path / "messages", tmp_path / "duplicates"
    messages.mkdir()
    duplicates.mkdir()
    for part, file_rows in enumerate(files):  # as step 1 writes them: hash order, then junk
        hashed = sorted((r for r in file_rows if not r["quarantined"]),
                        key=lambda r: r["message_hash"])  # fmt: skip
        junk = [r for r in file_rows if r["quarantined"]]
        table = pa.Table.from_pylist(hashed + junk, schema=MESSAGE_SCHEMA)
        pq.write_table(table, part_file(messages, part), row_group_size=97)
    for bucket in range(2):  # the copies to drop in two bucket files, each hash-sorted
        copies = sorted(dropped[bucket::2], key=lambda d: d["message_hash"])
        pq.write_table(pa.Table.from_pylist(copies, schema=COPY_SCHEMA),
                       duplicates / f"part-{bucket:05d}.parquet")  # fmt: skip

    sent = spark.sparkContext.accumulator(0)
    assert write_postgres_store(spark, messages, duplicates, loaded, rows_written=sent) == len(rows)
    assert sent.value == len(rows) + 50  # the kept copies of 50-99 were sent twice
    with open_store(reference) as store:
        store.insert_messages(rows)
    assert _tables(loaded) == _tables(reference)
    assert _catalog(loaded) == _catalog(reference)
    assert write_postgres_store(spark, messages, duplicates, loaded) == 0
    assert _tables(loaded) == _tables(reference)
