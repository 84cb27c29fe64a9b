"""status-go PostgreSQL mailserver storage against a real server (the postgres_dsn fixture)."""

from __future__ import annotations

import hashlib
import struct

import pytest

from tests.helpers import fresh_database
from waku_legacy.mailserver_compat.storage.postgres import (
    PostgresEnvelopeStore,
    PostgresSourceError,
    bloom_bits,
)

pytestmark = pytest.mark.postgres


def _key(ts: int, n: int, topic: bytes) -> bytes:
    return struct.pack(">I", ts) + hashlib.sha256(n.to_bytes(4, "big")).digest() + topic


def _bloom(bit: int) -> bytes:
    b = bytearray(64)
    b[bit // 8] = 0x80 >> (bit % 8)
    return bytes(b)


@pytest.fixture()
def legacy_dsn(postgres_dsn: str):
    """A fresh database per test, so tests never see each other's envelopes."""
    with fresh_database(postgres_dsn, "ms_") as dsn:
        yield dsn


def test_bloom_bits_match_status_go_bit_string() -> None:
    # toBitString prints each byte as %08b, byte 0 first.
    bits = bloom_bits(bytes([0x80, 0x01]) + b"\x00" * 62)
    assert bits[:16] == "1000000000000001" and len(bits) == 512 and set(bits[16:]) == {"0"}


def test_insert_is_idempotent_and_query_pages_newest_first(legacy_dsn: str) -> None:
    topic_a, topic_b = b"\xaa\xaa\xaa\xaa", b"\xbb\xbb\xbb\xbb"
    rows = [
        (
            _key(100 + i, i, topic_a if i % 2 else topic_b),
            b"d%d" % i,
            topic_a if i % 2 else topic_b,
            _bloom(3) if i % 2 else _bloom(9),
        )
        for i in range(30)
    ]
    with PostgresEnvelopeStore(legacy_dsn, create_schema=True) as db:
        db.insert_rows(rows)
        db.insert_rows(rows[:5])  # ON CONFLICT DO NOTHING
        assert db.count() == 30
        lower, upper = struct.pack(">I", 100) + b"\x00" * 36, struct.pack(">I", 200) + b"\x00" * 36
        seen, cursor = [], None
        while True:
            page = db.query(lower, upper, cursor=cursor, topics=[topic_a], limit=4)
            if not page:
                break
            seen.extend(page)
            cursor = page[-1][0][:36]
        want = sorted((r[0], r[1]) for r in rows if r[2] == topic_a)[::-1]
        assert seen == want
        # Bloom filter: rows whose bloom is a subset of the request bloom.
        got = db.query(lower, upper, bloom=_bloom(9), limit=100)
        assert {d for _, d in got} == {r[1] for r in rows if r[2] == topic_b}
        assert db.get(rows[0][0]) == rows[0][1]
        assert db.get(b"\x00" * 40) is None


def test_bulk_load_and_parallel_split_reads(legacy_dsn: str) -> None:
    topic = b"\x01\x02\x03\x04"
    rows = [(_key(1000 + i // 10, i, topic), b"x%d" % i, topic, _bloom(1)) for i in range(500)]
    with PostgresEnvelopeStore(legacy_dsn, create_schema=True) as db:
        assert db.bulk_load(rows) == 500
        assert db.bulk_load(rows[:100]) == 100
        assert db.count() == 500
        db._conn.execute("ANALYZE envelopes")
        db._conn.commit()
        splits = db.plan_splits(4, sample_rows=50)
    assert 1 < len(splits) <= 4
    got = []
    for start, stop in splits:
        with PostgresEnvelopeStore(legacy_dsn) as part:
            got.extend(part.iter_id_range(start, stop, batch_size=64))
    assert got == sorted((r[0], r[1]) for r in rows)


def test_unreachable_server_is_a_clear_error() -> None:
    with pytest.raises(PostgresSourceError, match="cannot connect"):
        PostgresEnvelopeStore("postgresql://nobody:secret@127.0.0.1:1/none", connect_timeout=2)
