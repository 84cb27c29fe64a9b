"""The live path's batch writer loses nothing (issue 10, "Also"): a store that fails N
times is retried with backoff until it takes every row, failures are counted, and
``flush()`` returns only once what was added is in the store (including a batch in flight)."""

from __future__ import annotations

import asyncio

from tests.bridge.support import make_rows
from waku_legacy.bridge.live import BatchWriter
from waku_legacy.bridge.metrics import BridgeMetrics
from waku_legacy.bridge.store_threads import StoreAccess
from waku_legacy.store import StoreError


class FlakyStore(StoreAccess):
    """A real SQLite StoreAccess whose first ``fail`` inserts fail, each write ``delay`` late."""

    def __init__(self, url: str, *, fail: int = 0, delay: float = 0.0) -> None:
        super().__init__(url, readers=1)
        self.fail = fail
        self.delay = delay
        self.attempts = 0

    async def insert(self, rows):  # type: ignore[no-untyped-def]
        self.attempts += 1
        await asyncio.sleep(self.delay)
        if self.fail > 0:
            self.fail -= 1
            raise StoreError("disk I/O error (injected)")
        return await super().insert(rows)


async def _count(store: StoreAccess) -> int:
    return await store.read(lambda s: s.count())


async def test_failed_batches_are_retried_until_stored_and_counted(tmp_path):
    store = FlakyStore(f"sqlite:///{tmp_path}/s.sqlite3", fail=4)
    metrics = BridgeMetrics()
    writer = BatchWriter(store, max_batch=1000, metrics=metrics, retry_delay=0.01)
    writer.start()
    rows = make_rows(2500)
    try:
        for row in rows:
            writer.add(row)
        await asyncio.wait_for(writer.flush(), 10)
        assert await _count(store) == 2500  # nothing accepted was dropped
        assert writer.written == 2500 and writer.backlog == 0
        assert metrics.store_write_failures.value() == 4 == writer.failures
        assert store.attempts == 4 + 3  # three batches, the first tried five times
    finally:
        await writer.close()
        await store.close()


async def test_flush_waits_for_the_batch_in_flight(tmp_path):
    store = FlakyStore(f"sqlite:///{tmp_path}/s.sqlite3", delay=0.3)
    writer = BatchWriter(store)
    writer.start()
    try:
        for row in make_rows(50):
            writer.add(row)
        await asyncio.sleep(0.05)  # the batch has left the queue and is being written
        await writer.flush()
        assert await _count(store) == 50
    finally:
        await writer.close()
        await store.close()


async def test_close_keeps_retrying_until_the_store_recovers(tmp_path):
    store = FlakyStore(f"sqlite:///{tmp_path}/s.sqlite3", fail=3)
    writer = BatchWriter(store)  # the default backoff
    writer.start()
    for row in make_rows(10):
        writer.add(row)
    await asyncio.wait_for(writer.close(), 10)
    assert await _count(store) == 10
    await store.close()


async def test_rows_unwritten_at_shutdown_are_spooled_and_stored_at_the_next_start(tmp_path):
    """The store is still down when the shutdown timeout ends: the rows go to the spool
    (atomically), and the next writer stores them and removes the spool."""
    from waku_legacy.bridge.live import decode_spool

    url = f"sqlite:///{tmp_path}/s.sqlite3"
    spool = tmp_path / "state" / "live-spool.rlp"
    rows = make_rows(120)
    rows[0] = rows[0]._replace(meta=b"", envelope=None, db_key=b"\x01" * 4)
    down = FlakyStore(url, fail=10_000)
    writer = BatchWriter(down, retry_delay=0.01, spool=spool)
    writer.start()
    for row in rows:
        writer.add(row)
    await writer.close(timeout=0.3)
    assert await _count(down) == 0
    await down.close()
    assert decode_spool(spool.read_bytes()) == rows  # every field kept, None and b"" apart
    assert not list(spool.parent.glob(".*.tmp"))

    store = StoreAccess(url, readers=1)
    writer = BatchWriter(store, spool=spool)
    writer.start()
    try:
        assert writer.backlog == 120
        await asyncio.wait_for(writer.flush(), 10)
        assert await _count(store) == 120
        assert not spool.exists()
    finally:
        await writer.close()
        await store.close()


async def test_a_spool_that_does_not_decode_is_kept_aside_not_lost(tmp_path, caplog):
    import logging

    spool = tmp_path / "live-spool.rlp"
    spool.write_bytes(b"\xc3\x01\x02")  # RLP, but not rows
    store = StoreAccess(f"sqlite:///{tmp_path}/s.sqlite3", readers=1)
    writer = BatchWriter(store, spool=spool)
    with caplog.at_level(logging.ERROR, logger="waku_legacy"):
        writer.start()
    try:
        assert writer.backlog == 0
        assert (tmp_path / "live-spool.rlp.bad").read_bytes() == b"\xc3\x01\x02"
        assert not spool.exists()
        assert "live spool does not decode" in caplog.text
    finally:
        await writer.close()
        await store.close()


def test_spool_decoder_refuses_what_is_not_rows():
    import pytest

    from waku_legacy.bridge.live import SpoolError, decode_spool, encode_spool

    good = encode_spool(make_rows(2))
    for bad in (b"", b"\x00", good[:-1], b"\xc1\x80", encode_spool([])[:0] + b"\xc2\xc0\xc0"):
        with pytest.raises(SpoolError):
            decode_spool(bad)
