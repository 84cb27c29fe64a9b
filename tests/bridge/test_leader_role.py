"""The archiving role's fencing token and link schedule in the store (waku_legacy.store.role),
on SQLite and PostgreSQL, and the bounds of the intervals that drive database traffic."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import fresh_database
from waku_legacy.errors import ConfigError
from waku_legacy.store.role import FencingTokenLost, LinkPublication, RoleStore


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def connect(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Any]:
    """Makes RoleStores on new connections to one fresh database of either backend."""
    if request.param == "sqlite":
        path = tmp_path / "store.sqlite3"

        def sqlite() -> RoleStore:
            conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
            return RoleStore(conn, postgres=False)

        yield sqlite
        return
    import psycopg

    dsn_server = request.getfixturevalue("postgres_dsn")
    with fresh_database(dsn_server, "role_") as dsn:
        opened: list[Any] = []

        def postgres() -> RoleStore:
            conn = psycopg.connect(dsn, autocommit=True)
            opened.append(conn)
            return RoleStore(conn, postgres=True)

        yield postgres
        for conn in opened:
            conn.close()


def _publication(**changes: Any) -> LinkPublication:
    values: dict[str, Any] = {
        "community": "0x02aa", "link": "magnet:?xt=urn:btih:" + "ab" * 20, "clock": 1_700_000,
        "clock_reason": "wall clock = 1700000", "published_at": 100.0, "next_publish": 400.0,
        "second_due": 130.0,
    }  # fmt: skip
    values.update(changes)
    return LinkPublication(**values)


def test_the_token_only_grows_and_a_stale_one_writes_nothing(connect: Any) -> None:
    first, second = connect(), connect()
    first.create()
    second.create()  # twice: nothing changes
    token_a, handed_a = first.take("a", 1.0)
    assert (token_a, handed_a) == (1, True)  # nobody held it before
    first.record(token_a, _publication())
    token_b, handed_b = second.take("b", 2.0)
    assert (token_b, handed_b) == (2, False)  # "a" never handed it back
    with pytest.raises(FencingTokenLost, match="fencing token 1 is stale"):
        first.check(token_a)
    with pytest.raises(FencingTokenLost):
        first.record(token_a, _publication(clock=5, second_due=None))
    assert second.publication("0x02aa") == _publication()  # untouched by the stale writer
    second.check(token_b)
    second.record(token_b, _publication(second_due=None, published_at=None))
    assert first.publication("0x02aa") == _publication(second_due=None, published_at=None)
    assert first.publication("0x02bb") is None
    # handed back in order: the next taker need not wait
    first.release(token_a)  # a stale token releases nothing
    assert connect().take("c", 3.0) == (3, False)
    third = connect()
    third.release(3)
    assert third.take("d", 4.0) == (4, True)


@pytest.mark.postgres
def test_a_record_and_a_takeover_are_ordered_on_postgresql(postgres_dsn: str) -> None:
    """The token row is locked FOR SHARE by a record until it commits: a taker's increment
    waits for it, so no record with the old token can land after the new token exists."""
    import threading

    import psycopg

    with fresh_database(postgres_dsn, "role_") as dsn:
        with psycopg.connect(dsn, autocommit=True) as a, psycopg.connect(dsn, autocommit=True) as b:
            old, new = RoleStore(a, postgres=True), RoleStore(b, postgres=True)
            old.create()
            token, _ = old.take("old", 1.0)
            with a.transaction():  # a record in progress, holding the row
                a.execute("SELECT token FROM bridge_role WHERE name = 'archiving' FOR SHARE")
                taken: list[int] = []
                thread = threading.Thread(target=lambda: taken.append(new.take("new", 2.0)[0]))
                thread.start()
                thread.join(1.0)
                assert thread.is_alive() and taken == []  # waits for the record to commit
            thread.join(10)
            assert taken == [token + 1]


def _config(store: dict[str, Any], **tables: Any) -> Any:
    from waku_legacy.bridge.config import parse_config

    return parse_config({"store": store, **tables})


@pytest.mark.parametrize(
    ("tables", "key", "words"),
    [
        ({"store": {"leader_interval": "500ms"}}, "leader_interval", "from 1s to 5m"),
        ({"store": {"leader_interval": "10m"}}, "leader_interval", "from 1s to 5m"),
        ({"history": {"nodes": ["http://127.0.0.1:1"], "interval": "30s"}}, "interval",
         "of at least 1m"),
        ({"archive": {"archive_dir": "a", "torrent_dir": "t", "republish_interval": "10s",
                      "second_link_delay": "5s"}}, "republish_interval", "of at least 1m"),
        ({"archive": {"archive_dir": "a", "torrent_dir": "t", "interval": "10m"}}, "interval",
         "of at least 1h"),
    ],
)  # fmt: skip
def test_intervals_that_drive_database_traffic_are_bounded(
    tables: dict[str, Any], key: str, words: str
) -> None:
    store = {"url": "sqlite:///s.sqlite3", **tables.pop("store", {})}
    with pytest.raises(ConfigError, match=f"key '{key}' must be a duration {words} \\("):
        _config(store, **tables)


def test_the_bounds_themselves_are_accepted() -> None:
    store = {"url": "sqlite:///s.sqlite3"}
    assert _config({**store, "leader_interval": "1s"}).store.leader_interval == 1.0
    assert _config({**store, "leader_interval": "5m"}).store.leader_interval == 300.0
    archive = {"archive_dir": "a", "torrent_dir": "t", "republish_interval": "1m",
               "second_link_delay": "30s", "interval": "1h"}  # fmt: skip
    config = _config(store, archive=archive)
    assert config.archive.republish_interval == 60.0 and config.archive.interval == 3600.0


def test_serve_check_refuses_a_sub_second_leader_interval_with_the_reason(
    tmp_path: Path,
) -> None:
    config = tmp_path / "bridge.toml"
    config.write_text(
        '[server]\nlisten = "127.0.0.1:0"\n[store]\nurl = "sqlite:///store.sqlite3"\n'
        'create = true\nleader_interval = "250ms"\n'
    )
    done = subprocess.run(
        [sys.executable, "-m", "waku_legacy.cli", "serve", "--check", "--config", str(config)],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode != 0
    assert "key 'leader_interval' must be a duration from 1s to 5m" in done.stderr
    assert "the holder checks its lock 4 times an interval" in done.stderr  # the reason
    assert "'250ms'" in done.stderr


@pytest.mark.postgres
async def test_a_terminated_holder_fails_its_next_check_and_stops_before_the_next_acts(
    postgres_dsn: str,
) -> None:
    """Issue 38 (1): right after pg_terminate_backend the old holder's next fencing check
    fails (its heartbeat is up to 2 s away); the new holder's token is higher and it acts
    only one interval after taking the lock, after the old one stopped; a holder stopped in
    order (SIGTERM's path) hands the role back and its successor acts at once."""
    import asyncio
    import time

    import psycopg

    from waku_legacy.bridge.leader import LeaderLock

    interval = 8.0
    events: list[str] = []

    def lock(name: str) -> LeaderLock:
        async def acquired() -> None:
            events.append(f"{name} acts")

        async def lost() -> None:
            events.append(f"{name} stops")

        return LeaderLock(dsn, interval=interval, on_acquired=acquired, on_lost=lost)

    async def until(condition: Any, what: str, timeout: float = 15.0) -> None:
        deadline = time.monotonic() + timeout
        while not condition():
            assert time.monotonic() < deadline, f"timed out waiting for {what}"
            await asyncio.sleep(0.02)

    with fresh_database(postgres_dsn, "role_") as dsn:
        old = lock("old")
        tasks = [asyncio.create_task(old.run())]
        try:
            await until(lambda: old.held, "the first holder")
            assert old.token == 1
            await asyncio.to_thread(old.check)  # holds: a round trip on its live session
            with psycopg.connect(dsn, autocommit=True) as admin:
                admin.execute(
                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE "
                    "application_name = 'waku-legacy bridge leader' "
                    "AND datname = current_database()"
                )
            with pytest.raises(FencingTokenLost, match="fencing token 1 not confirmed"):
                await asyncio.to_thread(old.check)
            new = lock("new")
            tasks.append(asyncio.create_task(new.run()))
            await until(lambda: new.token is not None, "the lock taken")
            taken = time.monotonic()
            assert new.token == 2 and not new.held  # not yet: waits out the old holder
            await until(lambda: new.held, "the new holder to act")
            assert time.monotonic() - taken >= interval - 0.1
            assert events == ["old acts", "old stops", "new acts"]
            # SIGTERM's path: cancelled, it stops its singletons, then hands the role back
            tasks[1].cancel()
            await asyncio.gather(tasks[1], return_exceptions=True)
            last = lock("last")
            tasks.append(asyncio.create_task(last.run()))
            await until(lambda: last.token is not None, "the lock taken again")
            taken = time.monotonic()
            await until(lambda: last.held, "the next holder to act")
            assert last.token == 3 and time.monotonic() - taken < 1.0  # no wait
            assert events[3:] == ["new stops", "last acts"]
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
