"""Hand-built events and a fresh index on SQLite or the real PostgreSQL, for the index,
reader and sources tests."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from pathlib import Path

import coincurve
import pytest

from tests.helpers import fresh_database
from waku_legacy.history.events import ChatMessageEvent, WakuFacts
from waku_legacy.history.index import HistoryIndex
from waku_legacy.identity.topics import CommunityId

COMMUNITY_KEY = coincurve.PrivateKey(b"\x11" * 32)
COMMUNITY = str(CommunityId(COMMUNITY_KEY.public_key.format(compressed=True)))
GENERAL = "11111111-2222-4333-8444-555555555555"
RANDOM = "99999999-8888-4777-8666-555555555555"


def key(n: int) -> str:
    """A member's ``0x04…`` key (private key n, repeated byte)."""
    return "0x" + coincurve.PrivateKey(bytes([n]) * 32).public_key.format(False).hex()


ALICE, BOB, CAROL, ADMIN, MALLORY = key(1), key(2), key(3), key(4), key(5)


def ms(text: str) -> int:
    """Milliseconds of an ISO UTC time."""
    return int(dt.datetime.fromisoformat(text).replace(tzinfo=dt.UTC).timestamp() * 1000)


def chat(
    n: int,
    author: str,
    text: str,
    at: str,
    *,
    channel: str = GENERAL,
    clock: int | None = None,
    **fields: object,
) -> ChatMessageEvent:
    """Message ``0x…n`` (ids are hand-made here: the index takes them as given)."""
    when = ms(at)
    facts = WakuFacts(f"0x{n:064x}", "/waku/1/0x01020304/rfc26", "/waku/2/rs/16/128",
                      when // 1000, author, None, "test")  # fmt: skip
    return ChatMessageEvent(
        id=f"0x{n:064x}", author=author, chat_id=COMMUNITY + channel, channel_id=channel,
        clock=clock if clock is not None else when, timestamp_ms=when,
        content_type=fields.pop("content_type", 1), text=text, facts=facts, **fields,  # type: ignore[arg-type]
    )  # fmt: skip


def mid(n: int) -> str:
    return f"0x{n:064x}"


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def history_dsn(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path}/store.sqlite3"
        return
    with fresh_database(request.getfixturevalue("postgres_dsn"), "hist_") as url:
        yield url


@pytest.fixture
def index(history_dsn: str) -> Iterator[HistoryIndex]:
    with HistoryIndex.open(history_dsn, create=True) as opened:
        yield opened
