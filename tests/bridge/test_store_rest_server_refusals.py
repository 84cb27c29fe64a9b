"""Hostile REST input answered with a 4xx and a reason, never a 500 (issue 10, low items):
over 100 ``hashes``, a NUL (or any control character) in a topic on either backend, a
bearer token that is not UTF-8."""

from __future__ import annotations

import asyncio
import logging

import pytest

from tests.bridge.support import ADMIN_TOKEN, PUBSUB, bridge_config, make_rows
from tests.helpers import fresh_database
from waku_legacy.bridge.service import BridgeService
from waku_legacy.store import open_store

pytestmark = pytest.mark.network

BAD_TOPICS = [
    {"contentTopics": "/app/1/na\x00me/proto"},
    {"contentTopics": "/app/1/name/proto,/app/1/x\x01y/proto"},
    {"pubsubTopic": "/waku/2/named\x00topic/proto"},
    {"pubsubTopic": PUBSUB + "\x00"},
]


async def _raw(port: int, head: bytes) -> tuple[int, bytes]:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(head + b"Host: x\r\nConnection: close\r\n\r\n")
    data = await reader.read()
    writer.close()
    status = int(data.split(b" ", 2)[1])
    return status, data.split(b"\r\n\r\n", 1)[1]


async def _get(port: int, path: str, params: dict[str, str]) -> tuple[int, bytes]:
    from urllib.parse import urlencode

    return await _raw(port, f"GET {path}?{urlencode(params)} HTTP/1.1\r\n".encode())


async def _answers(url: str, tmp_path) -> list[tuple[int, bytes]]:
    service = BridgeService(bridge_config(tmp_path, url))
    await service.start()
    try:
        out = []
        for params in BAD_TOPICS:
            for path in ("/store/v3/messages", "/store/v1/messages"):
                out.append(await _get(service.rest_port, path, params))
        return out
    finally:
        await service.stop()


@pytest.fixture
async def service(tmp_path):
    path = tmp_path / "store.sqlite3"
    with open_store(f"sqlite:///{path}") as store:
        store.insert_messages(make_rows(50))
    service = BridgeService(bridge_config(tmp_path, f"sqlite:///{path}"))
    await service.start()
    yield service
    await service.stop()


async def test_over_100_hashes_is_400_with_a_reason_and_no_error_log(service, caplog):
    hashes = ",".join("0x" + bytes([i]).hex() * 32 for i in range(101))
    with caplog.at_level(logging.INFO, logger="waku_legacy"):
        status, body = await _get(service.rest_port, "/store/v3/messages", {"hashes": hashes})
    assert status == 400 and b"101 hashes in one query; at most 100" in body
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]
    hashes = ",".join("0x" + bytes([i]).hex() * 32 for i in range(100))
    status, _ = await _get(service.rest_port, "/store/v3/messages", {"hashes": hashes})
    assert status == 200


async def test_a_bearer_token_that_is_not_utf8_is_401(service):
    for token in (b"\xff\xfe\xfd", ADMIN_TOKEN.encode() + b"\xc3"):
        status, body = await _raw(
            service.rest_port,
            b"GET /admin/v1/communities HTTP/1.1\r\nAuthorization: Bearer " + token + b"\r\n",
        )
        assert status == 401 and b"not valid UTF-8" in body
    status, _ = await _raw(
        service.rest_port,
        b"GET /admin/v1/communities HTTP/1.1\r\nAuthorization: Bearer "
        + ADMIN_TOKEN.encode()
        + b"\r\n",
    )
    assert status == 200


async def test_control_characters_in_topics_are_400_on_sqlite(tmp_path):
    url = f"sqlite:///{tmp_path}/s.sqlite3"
    with open_store(url) as store:
        store.insert_messages(make_rows(20))
    answers = await _answers(url, tmp_path)
    assert all(status == 400 for status, _ in answers), answers
    assert all(b"control character" in body for _, body in answers), answers


@pytest.mark.postgres
async def test_control_characters_in_topics_are_400_on_postgresql_too(postgres_dsn, tmp_path):
    with fresh_database(postgres_dsn, "nul_") as url:
        with open_store(url) as store:
            store.insert_messages(make_rows(20))
        sqlite_url = f"sqlite:///{tmp_path}/s.sqlite3"
        with open_store(sqlite_url) as store:
            store.insert_messages(make_rows(20))
        pg = await _answers(url, tmp_path / "pg")
        lite = await _answers(sqlite_url, tmp_path / "lite")
        assert pg == lite  # the same status and reason for every input on both backends
        assert all(status == 400 for status, _ in pg)
        # The stores themselves refuse the same way (for callers other than the REST API).
        from waku_legacy.store import InvalidQuery, StoreQuery

        for store_url in (url, sqlite_url):
            with open_store(store_url) as store:
                with pytest.raises(InvalidQuery, match="NUL"):
                    store.query(StoreQuery(content_topics=["/app/1/na\x00me/proto"]))
                with pytest.raises(InvalidQuery, match="NUL"):
                    store.query(StoreQuery(pubsub_topic=PUBSUB + "\x00"))
                with pytest.raises(InvalidQuery, match="UTF-8"):
                    store.query(StoreQuery(content_topics=["/app/1/\udcff/proto"]))
