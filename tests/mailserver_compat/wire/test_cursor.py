"""Mailserver DB key (40 bytes) and cursor (36 bytes): hand-derived and round trips."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.helpers import reference_keccak256
from waku_legacy.errors import DecodeError
from waku_legacy.mailserver_compat.wire.cursor import (
    CURSOR_SIZE,
    DB_KEY_SIZE,
    CursorError,
    DBKey,
    db_key_bound,
    db_key_for,
    parse_cursor,
)
from waku_legacy.mailserver_compat.wire.envelope import Envelope

keys = st.builds(
    DBKey,
    timestamp=st.integers(0, 2**32 - 1),
    envelope_hash=st.binary(min_size=32, max_size=32),
    topic=st.binary(min_size=4, max_size=4),
)


def test_sizes() -> None:
    assert (DB_KEY_SIZE, CURSOR_SIZE) == (40, 36)


def test_db_key_of_an_envelope_hand_derived() -> None:
    env = Envelope(
        expiry=0x01020304, ttl=50, topic=bytes.fromhex("deadbeef"), data=b"\x01\x02", nonce=0
    )
    envelope_rlp = bytes.fromhex("cf84010203043284deadbeef82010280")
    digest = reference_keccak256(envelope_rlp)
    # timestamp = expiry - ttl = 0x01020304 - 0x32 = 0x010202d2, big-endian
    expected = bytes.fromhex("010202d2") + digest + bytes.fromhex("deadbeef")
    key = db_key_for(env)
    assert key.encode() == expected
    assert key.cursor == expected[:36]
    assert DBKey.decode(expected) == key
    assert parse_cursor(key.cursor) == (0x010202D2, digest)


@given(keys)
def test_db_key_round_trip(key: DBKey) -> None:
    raw = key.encode()
    assert len(raw) == DB_KEY_SIZE
    assert DBKey.decode(raw) == key
    assert parse_cursor(key.cursor) == (key.timestamp, key.envelope_hash)


@given(keys, keys)
def test_keys_sort_by_time_first(a: DBKey, b: DBKey) -> None:
    if a.timestamp < b.timestamp:
        assert a.encode() < b.encode()
        assert db_key_bound(a.timestamp) <= a.encode() < db_key_bound(a.timestamp + 1)


def test_bounds() -> None:
    assert db_key_bound(1) == b"\x00\x00\x00\x01" + bytes(36)
    assert db_key_bound(2**32) == b"\xff" * 40
    with pytest.raises(CursorError):
        db_key_bound(-1)


def test_empty_cursor_is_none() -> None:
    assert parse_cursor(b"") is None


@pytest.mark.parametrize("size", [1, 35, 37, 40, 100])
def test_bad_cursor_lengths(size: int) -> None:
    with pytest.raises(
        CursorError, match=f"malformed cursor: must be empty or 36 bytes, got {size}"
    ):
        parse_cursor(bytes(size))


@pytest.mark.parametrize("size", [0, 36, 39, 41])
def test_bad_db_key_lengths(size: int) -> None:
    with pytest.raises(CursorError, match=f"must be 40 bytes, got {size}"):
        DBKey.decode(bytes(size))


def test_wrong_types() -> None:
    with pytest.raises(CursorError, match="expected bytes"):
        parse_cursor("00" * 36)  # type: ignore[arg-type]
    with pytest.raises(CursorError, match="expected bytes"):
        DBKey.decode([0] * 40)  # type: ignore[arg-type]
    with pytest.raises(CursorError):
        DBKey(timestamp=2**32, envelope_hash=bytes(32), topic=bytes(4))


@given(st.binary(max_size=80))
def test_random_bytes(raw: bytes) -> None:
    for decoder in (parse_cursor, DBKey.decode):
        try:
            decoder(raw)
        except DecodeError:
            pass
