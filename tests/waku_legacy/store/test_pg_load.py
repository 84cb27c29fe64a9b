"""The PostgreSQL store's bulk load (waku_legacy.store.pg_load, the migration's sink): the
same rows and schema as the store's own inserts, idempotent reruns, and a writer killed with
SIGKILL in the middle of a COPY followed by a rerun gives the rows of an uninterrupted run."""

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


def _load(url: str, rows: list[tuple[Any, ...]], batch_size: int) -> tuple[int, int]:
    first_load = prepare_load(url)
    with connect_loader(url) as conn:
        result = load_rows(conn, rows, batch_size=batch_size, first_load=first_load)
    finish_load(url)
    return result


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
    assert _indexes(loaded) == _indexes(reference)  # the schema, indexes included, unchanged
    assert {name for name, _ in _indexes(loaded)} >= set(secondary_indexes())

    # A rerun, and a load into a store that already holds some rows: nothing new, no index
    # dropped (the store was not empty).
    assert _load(loaded, rows, batch_size=300) == (len(rows), 0)
    assert _load(loaded, rows[:10] + make_rows(1_010)[1_000:], batch_size=300) == (20, 10)
    with open_store(reference) as store:
        store.insert_messages(make_rows(1_010)[1_000:])
    assert _tables(loaded) == _tables(reference)
    assert _indexes(loaded) == _indexes(reference)
    with open_store(loaded) as store:
        assert store.count() == 1_010
        assert store.get_envelope(rows[0][0]) == rows[0][7]
        assert store.get_message(rows[3][0]).payload == rows[3][3]


def test_first_load_copies_straight_in_and_stages_a_batch_that_conflicts(two_databases) -> None:
    loaded, reference = two_databases
    rows = make_rows(900)
    with open_store(reference) as store:
        store.insert_messages(rows)
    assert prepare_load(loaded) is True
    with connect_loader(loaded) as one, connect_loader(loaded) as other:
        # Two writers of a first load whose rows overlap (and a batch repeating a row):
        # the conflicting batches are rolled back and staged, nothing is lost or doubled.
        assert load_rows(one, rows[:500], batch_size=200, first_load=True) == (500, 500)
        sent, new = load_rows(
            other, rows[100:200] + rows[450:] + rows[899:], batch_size=200, first_load=True
        )
    finish_load(loaded)
    assert (sent, new) == (551, 400)
    assert _tables(loaded) == _tables(reference)
    assert _indexes(loaded) == _indexes(reference)


def test_first_load_drops_secondary_indexes_until_it_is_finished(postgres_dsn: str) -> None:
    with fresh_database(postgres_dsn, "pgload_idx_") as url:
        assert prepare_load(url) is True
        names = {name for name, _ in _indexes(url)}
        assert not names & set(secondary_indexes())
        with connect_loader(url) as conn:
            load_rows(conn, make_rows(10))
        assert prepare_load(url) is False  # not empty any more: nothing dropped again
        finish_load(url)
        assert {name for name, _ in _indexes(url)} >= set(secondary_indexes())


_CHILD = """
import sys
from tests.waku_legacy.store.test_pg_load import make_rows
from waku_legacy.faults import fault_from_env
from waku_legacy.store.pg_load import connect_loader, finish_load, load_rows, prepare_load
url = sys.argv[1]
first_load = prepare_load(url)
with connect_loader(url) as conn:
    rows = make_rows(2_000)
    load_rows(conn, rows, batch_size=400, fault=fault_from_env(), first_load=first_load)
finish_load(url)
"""


def _child(url: str, fault: str | None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != ENV_VAR}
    if fault:
        env[ENV_VAR] = fault
    return subprocess.run(
        [sys.executable, "-c", _CHILD, url], cwd=ROOT, env=env, capture_output=True,
        text=True, timeout=120,
    )  # fmt: skip


def test_kill_9_mid_copy_then_rerun_gives_the_uninterrupted_rows(two_databases) -> None:
    killed, clean = two_databases
    done = _child(clean, None)
    assert done.returncode == 0, done.stderr
    # SIGKILL half-way through the COPY of the third batch (two batches committed; a first
    # load, so the COPY goes straight into the tables; the rerun stages its batches).
    crashed = _child(killed, "store:copy:2")
    assert crashed.returncode == -signal.SIGKILL, crashed.stderr
    partial = _tables(killed)
    assert len(partial["messages"]) == 800  # batches 0 and 1, nothing of batch 2
    assert len(partial["messages_lookup"]) == 800
    with psycopg.connect(killed) as conn:  # the killed session's staging table is gone
        stale = conn.execute(
            "SELECT count(*) FROM pg_class WHERE relname = 'waku_store_stage'"
        ).fetchone()
    assert stale == (0,)
    rerun = _child(killed, None)
    assert rerun.returncode == 0, rerun.stderr
    assert _tables(killed) == _tables(clean)
    assert len(_tables(killed)["messages"]) == 2_000
    assert _indexes(killed) == _indexes(clean)


def test_kill_9_after_a_commit_then_rerun_gives_the_uninterrupted_rows(two_databases) -> None:
    killed, clean = two_databases
    assert _child(clean, None).returncode == 0
    crashed = _child(killed, "store:batch:0")
    assert crashed.returncode == -signal.SIGKILL
    assert len(_tables(killed)["messages"]) == 400
    assert _child(killed, None).returncode == 0
    assert _tables(killed) == _tables(clean)
    assert _indexes(killed) == _indexes(clean)


@pytest.mark.spark
def test_spark_sink_writes_every_partition_and_reruns_add_nothing(spark, two_databases) -> None:
    from waku_legacy.migrate.sinks import write_postgres_store

    loaded, reference = two_databases
    rows = make_rows(3_000)
    ddl = (
        "message_hash BINARY, pubsub_topic STRING, content_topic STRING, payload BINARY, "
        "version INT, timestamp BIGINT, meta BINARY, envelope BINARY, db_key BINARY"
    )
    frame = spark.createDataFrame(rows, ddl).repartition(4)
    assert frame.rdd.getNumPartitions() == 4
    assert write_postgres_store(frame, loaded) == len(rows)
    with open_store(reference) as store:
        store.insert_messages(rows)
    assert _tables(loaded) == _tables(reference)
    assert _indexes(loaded) == _indexes(reference)
    assert write_postgres_store(frame, loaded) == 0
    assert _tables(loaded) == _tables(reference)
