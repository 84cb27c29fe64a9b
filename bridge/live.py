"""Live bridging between Waku v1 peers and a Waku v2 network.

v1 -> v2: an envelope a v1 peer sends (accepted by the mailserver's live checks) becomes the
v2 message nwaku's bridge would publish (:func:`envelope_to_waku_message`: payload unchanged,
version 1, ``/waku/1/0x<topic>/rfc26``, timestamp ``(expiry - ttl) * 10^9``) on the shard
that :class:`~waku_legacy.identity.topic_mapping.TopicMapping` picks (the migration's mapping
too, so a live envelope and the same envelope migrated get the same v2 hash). It is stored with its
original envelope bytes and DB key (so v1 history requests serve it byte for byte),
published through the nwaku relay REST API when it is live (sent within ``live_window``;
older envelopes, such as a trusted mailserver's 0x7f history, are only stored), and passed
on to the other connected v1 peers that want its topic.

v2 -> v1: messages pulled from v2 store nodes that are new to the store, version 1, on a
``/waku/1/…/rfc26`` topic and younger than ``live_window`` are sealed into fresh envelopes
(:func:`waku_message_to_envelope`: TTL 5 s, PoW 0.002, nwaku's bridge) and offered to the
connected v1 peers whose bloom or topic interest matches and whose PoW requirement the
envelope meets. Such envelopes are NOT stored as v1 envelopes: the store's envelope table
holds original v1 envelopes only (the archive takes message hashes from it).

Loops and repeats: one bounded seen-cache of v2 message hashes covers both directions (a
message this bridge published comes back from the store pull and is not offered again; a
repeat of a v1 envelope is not published twice), and the envelope hash of every envelope this
bridge seals goes into the mailserver's own seen set, so a v1 peer echoing it back is ignored.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import random
from collections.abc import Callable, Iterable
from pathlib import Path

import rlp

from waku_legacy.bridge.clock import Clock
from waku_legacy.bridge.logs import fields
from waku_legacy.bridge.metrics import BridgeMetrics
from waku_legacy.bridge.relay import ProtectedTopicError, RelayPublisher
from waku_legacy.bridge.store_threads import StoreAccess
from waku_legacy.bridge.tasks import finish_or_cancel
from waku_legacy.crypto.keccak import keccak256
from waku_legacy.durable import append_durable, fsync_dir
from waku_legacy.errors import DecodeError, WakuLegacyError
from waku_legacy.identity.message_hash import message_hash
from waku_legacy.identity.topic_mapping import TopicMapping
from waku_legacy.identity.topics import is_v1_content_topic
from waku_legacy.mailserver_compat.rlp_fields import encode_rlp
from waku_legacy.mailserver_compat.rlpx.asyncio_transport import PeerDisconnected
from waku_legacy.mailserver_compat.server.asyncio_server import MailServer
from waku_legacy.mailserver_compat.server.core import SeenSet
from waku_legacy.mailserver_compat.wire.convert import (
    PAYLOAD_VERSION_WAKU1,
    envelope_to_waku_message,
    waku_message_to_envelope,
)
from waku_legacy.mailserver_compat.wire.cursor import db_key_for
from waku_legacy.mailserver_compat.wire.envelope import Envelope
from waku_legacy.mailserver_compat.wire.pow import pow_of
from waku_legacy.proto import waku_message_pb2
from waku_legacy.store import StoredMessage

__all__ = ["BatchWriter", "LiveBridge"]

log = logging.getLogger("waku_legacy.bridge.live")


class BatchWriter:
    """Collects store rows and writes them in batches on the store's writer thread.

    Nothing accepted is dropped: a batch whose write fails stays at the head of the queue
    and is retried with exponential backoff and jitter (``retry_delay`` doubling up to
    ``max_retry_delay``) until the store takes it; every failed attempt is counted in
    ``waku_legacy_store_write_failures_total``; an outage is logged once when it starts,
    every minute while it lasts and once when the store takes the rows again. Rows are
    inserted idempotently (keyed by message hash), so a retry after a write that did land
    stores nothing twice. :meth:`flush` returns when every row added before it is in the
    store (not merely handed to a writer).

    With a ``spool`` path, rows are kept on disk as well while the store does not take
    them: when a write has failed, or has been in flight for ``spool_after`` seconds, the
    rows not yet in the spool are appended to it every ``spool_interval`` seconds (one
    write and fsync per batch of rows), so a kill -9 during an outage loses at most the rows
    of the last ``spool_interval``; :meth:`close` appends what is still unwritten when its
    timeout ends. The spool is removed once every row in it is in the store, and the next
    :meth:`start` puts the rows of a spool left behind back in the queue. A spool whose
    tail does not decode (a torn last append) gives its good rows and is kept aside as
    ``<spool>.bad`` with an error log, never deleted."""

    def __init__(
        self,
        store: StoreAccess,
        *,
        max_batch: int = 1000,
        metrics: BridgeMetrics | None = None,
        retry_delay: float = 0.1,
        max_retry_delay: float = 5.0,
        spool: Path | None = None,
        spool_interval: float = 0.2,
        spool_after: float = 1.0,
    ) -> None:
        self.store = store
        self.spool = spool
        self.spool_interval = spool_interval
        self.spool_after = spool_after
        self.max_batch = max_batch
        self.metrics = metrics
        self.retry_delay = retry_delay
        self.max_retry_delay = max_retry_delay
        self._pending: list[StoredMessage] = []  # rows number _done.._added, in order
        self._wakeup = asyncio.Event()
        self._closing = False
        self._task: asyncio.Task[None] | None = None
        self._spooler: asyncio.Task[None] | None = None
        self._spool_lock = asyncio.Lock()
        self._added = 0  # rows ever added
        self._done = 0  # rows ever written (in order)
        self._spooled_to = 0  # rows _done.._spooled_to are in the spool file
        self._progress = asyncio.Condition()
        self._failing_since: float | None = None  # loop time of the outage's first failure
        self._write_started: float | None = None  # loop time the write in flight began
        self._reported = 0.0
        self.written = 0  # rows new to the store
        self.failures = 0
        self.spooled = 0  # rows ever appended to the spool

    def start(self) -> None:
        if self.spool is not None:
            for row in self._read_spool(self.spool):
                self.add(row)
            if self.spool.exists():
                self._spooled_to = self._added
            self._spooler = asyncio.create_task(self._spool_loop(), name="live-spool")
        self._task = asyncio.create_task(self._run(), name="live-batch-writer")

    @staticmethod
    def _read_spool(spool: Path) -> list[StoredMessage]:
        try:
            data = spool.read_bytes()
        except FileNotFoundError:
            return []
        rows, error = read_spool(data)
        if not rows and error is None:
            _remove_file(spool)  # created, then killed before its first append
        if error is not None:
            bad = spool.with_name(spool.name + ".bad")
            os.replace(spool, bad)
            log.error("live spool does not decode; kept aside", extra=fields(
                path=str(bad), error=str(error), rows_recovered=len(rows)))  # fmt: skip
        if rows:
            log.warning("live spool: storing rows kept by an earlier run", extra=fields(
                path=str(spool), rows=len(rows)))  # fmt: skip
        return rows

    def add(self, row: StoredMessage) -> None:
        self._pending.append(row)
        self._added += 1
        self._wakeup.set()

    @property
    def backlog(self) -> int:
        """Rows accepted and not yet in the store (queued or being written)."""
        return self._added - self._done

    @property
    def failing(self) -> bool:
        """The last write failed (the store has not taken rows since)."""
        return self._failing_since is not None

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        delay = self.retry_delay
        while True:
            if not self._pending:
                if self._closing:
                    return
                self._wakeup.clear()
                await self._wakeup.wait()
                continue
            batch = self._pending[: self.max_batch]
            self._write_started = loop.time()
            try:
                self.written += await self.store.insert(batch)
            except Exception as exc:
                self._write_started = None
                self._write_failed(exc, len(batch), delay, loop.time())
                await self._spool_now()
                # jitter: instances sharing a store do not retry in step
                await self._retry_wait(delay * (1.0 - 0.2 * random.random()))
                delay = min(delay * 2, self.max_retry_delay)
                continue
            self._write_started = None
            delay = self.retry_delay
            if self._failing_since is not None:
                log.warning("the store takes bridged messages again", extra=fields(
                    outage_s=round(loop.time() - self._failing_since, 3),
                    failures=self.failures, backlog=self.backlog - len(batch),
                    spooled=self.spooled))  # fmt: skip
                self._failing_since = None
            del self._pending[: len(batch)]
            async with self._progress:
                self._done += len(batch)
                # the spool goes before the waiters hear of it: a flush() that returns has
                # no spool left behind for rows already stored
                if self._spooled_to and self._done >= self._spooled_to:
                    await self._remove_spool()
                self._progress.notify_all()

    async def _retry_wait(self, delay: float) -> None:
        """Sleep ``delay``, or less: until the store is reachable again when it was down
        (a reader or the health probe reconnected), so the rows go in at once."""
        health = self.store.health
        was_down = health.down
        loop = asyncio.get_running_loop()
        deadline = loop.time() + delay
        while (remaining := deadline - loop.time()) > 0:
            await asyncio.sleep(min(remaining, 0.05))
            if was_down and not health.down:
                return

    def _write_failed(self, exc: Exception, rows: int, delay: float, now: float) -> None:
        self.failures += 1
        if self.metrics is not None:
            self.metrics.store_write_failures.inc()
        first = self._failing_since is None
        if not first and now - self._reported < 60.0:
            return  # one line when the outage starts, then one a minute
        if first:
            self._failing_since = now
        self._reported = now
        log.error(
            "storing bridged messages failed; retrying" if first
            else "storing bridged messages still fails; retrying",
            exc_info=not isinstance(exc, WakuLegacyError),
            extra=fields(rows=rows, backlog=self.backlog, retry_in=round(delay, 3),
                         failures=self.failures, error=str(exc)),
        )  # fmt: skip

    # -- the spool ----------------------------------------------------------------------------

    def _must_spool(self) -> bool:
        if self._failing_since is not None or self._closing:
            return True
        started = self._write_started
        now = asyncio.get_running_loop().time()
        return started is not None and now - started > self.spool_after

    async def _spool_loop(self) -> None:
        while True:
            await asyncio.sleep(self.spool_interval)
            if self._must_spool():
                await self._spool_now()

    async def _spool_now(self) -> None:
        """Append the rows not yet in the spool (nor in the store) to it, durably."""
        if self.spool is None:
            return
        async with self._spool_lock:
            first = max(self._spooled_to, self._done)
            last = self._added
            if last <= first:
                return
            rows = self._pending[first - self._done : last - self._done]
            spool = self.spool
            try:
                await asyncio.to_thread(_append_spool, spool, encode_spool(rows))
            except OSError as exc:
                log.error("live spool: cannot append; the rows stay in memory", extra=fields(
                    path=str(spool), rows=len(rows), error=str(exc)))  # fmt: skip
                return
            self._spooled_to = last
            self.spooled += len(rows)
            if self.metrics is not None:
                self.metrics.live_spooled.inc(len(rows))

    async def _remove_spool(self) -> None:
        """Every row in the spool is in the store: the spool can go."""
        assert self.spool is not None
        async with self._spool_lock:
            if self._done < self._spooled_to:
                return  # rows were appended meanwhile
            self._spooled_to = 0
            spool = self.spool
            await asyncio.to_thread(_remove_file, spool)

    async def flush(self) -> None:
        """Wait until every row added so far is in the store."""
        target = self._added
        async with self._progress:
            await self._progress.wait_for(lambda: self._done >= target)

    async def close(self, timeout: float | None = None) -> None:
        """Write what is pending (retrying while the store fails), then stop; with a
        ``timeout``, give up after it: the rows still unwritten go to the spool (without
        one, they are counted in the log)."""
        self._closing = True
        self._wakeup.set()
        if self._task is None:
            return
        if not await finish_or_cancel(self._task, timeout):
            log.error(
                "the store did not take the bridged messages before shutdown",
                extra=fields(rows=self.backlog, failures=self.failures),
            )
            if self.spool is not None and self._pending:
                await self._spool_now()
                log.warning("live spool: unwritten rows kept for the next start", extra=fields(
                    path=str(self.spool), rows=self.backlog))  # fmt: skip
        self._task = None
        if self._spooler is not None:
            self._spooler.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._spooler
            self._spooler = None


def _append_spool(spool: Path, data: bytes) -> None:
    spool.parent.mkdir(parents=True, exist_ok=True)
    append_durable(spool, data)


def _remove_file(path: Path) -> None:
    with contextlib.suppress(FileNotFoundError):
        path.unlink()
        fsync_dir(path.parent)


class SpoolError(DecodeError):
    """The live spool file does not decode."""


def _optional(value: bytes | None) -> list[bytes]:
    return [] if value is None else [value]


def encode_spool(rows: Iterable[StoredMessage]) -> bytes:
    """RLP of the rows, each ``[hash, pubsub, content, payload, version, timestamp, [meta],
    [envelope], [db_key]]`` (an optional field is an empty or one-item list)."""
    return encode_rlp([
        [
            row.message_hash, row.pubsub_topic.encode(), row.content_topic.encode(),
            row.payload, row.version, row.timestamp,
            _optional(row.meta), _optional(row.envelope), _optional(row.db_key),
        ]
        for row in rows
    ])  # fmt: skip


def read_spool(data: bytes) -> tuple[list[StoredMessage], SpoolError | None]:
    """The rows of a spool: one or more :func:`encode_spool` lists one after the other (one
    per append). Reads up to the first list that does not decode (a torn last append) and
    returns the rows before it with the error (None when everything decoded)."""
    rows: list[StoredMessage] = []
    at = 0
    while at < len(data):
        try:
            _, kind, length, payload_at = rlp.codec.consume_length_prefix(data, at)
            end = payload_at + length
            if kind is not list:
                raise ValueError("a string, not a list")
            if end > len(data):
                raise ValueError(f"a list of {end - at} bytes, {len(data) - at} left")
            rows.extend(_decode_list(data[at:end]))
        except (rlp.exceptions.DecodingError, ValueError, TypeError, SpoolError) as exc:
            error = exc if isinstance(exc, SpoolError) else SpoolError(
                "live spool", f"not a list of stored rows at byte {at} ({exc})")  # fmt: skip
            return rows, error
        at = end
    return rows, None


def decode_spool(data: bytes) -> list[StoredMessage]:
    """Every row of a spool (:func:`read_spool`); :class:`SpoolError` when any part of the
    bytes is not rows, or there are none."""
    if not data:
        raise SpoolError("live spool", "empty")
    rows, error = read_spool(data)
    if error is not None:
        raise error
    return rows


def _decode_list(data: bytes) -> list[StoredMessage]:
    try:
        items = rlp.decode(data)
        rows = []
        for item in items:
            digest, pubsub, content, payload, version, timestamp, meta, envelope, db_key = item
            if len(digest) != 32 or any(len(o) > 1 for o in (meta, envelope, db_key)):
                raise ValueError("field of the wrong size")
            rows.append(StoredMessage(
                digest, pubsub.decode(), content.decode(), payload,
                int.from_bytes(version, "big"), int.from_bytes(timestamp, "big"),
                *(o[0] if o else None for o in (meta, envelope, db_key)),
            ))  # fmt: skip
        return rows
    except (rlp.exceptions.DecodingError, ValueError, TypeError, UnicodeDecodeError) as exc:
        raise SpoolError("live spool", f"not a list of stored rows ({exc})") from exc


class LiveBridge:
    def __init__(
        self,
        *,
        store: StoreAccess,
        router: TopicMapping,
        metrics: BridgeMetrics,
        clock: Clock,
        relay: RelayPublisher | None = None,
        seen_capacity: int,  # [v1] seen_capacity
        live_window: float,  # [v1] live_window
        spool: Path | None = None,
    ) -> None:
        self.store = store
        self.router = router
        self.metrics = metrics
        self.clock = clock
        self.relay = relay
        self.live_window = live_window
        self.seen = SeenSet(seen_capacity)
        self.writer = BatchWriter(store, metrics=metrics, spool=spool)
        self.mailserver: MailServer | None = None
        # called with each v1 envelope's row as it is stored (the history viewer's index)
        self.stored_hooks: list[Callable[[StoredMessage], None]] = []

    def start(self) -> None:
        self.writer.start()

    async def close(self, timeout: float | None = None) -> None:
        await self.writer.close(timeout)

    # -- v1 -> v2 ---------------------------------------------------------------------------

    async def on_v1_envelope(self, raw: bytes, envelope: Envelope, peer_key: bytes) -> None:
        """The mailserver's sink: an accepted live envelope from a v1 peer."""
        message = envelope_to_waku_message(envelope)
        pubsub_topic = self.router.pubsub_for(message.content_topic)
        live = message.timestamp >= int((self.clock.time() - self.live_window) * 1_000_000_000)
        if self.relay is not None and live:
            # On a protected shard the network carries the shard-signed copy (meta), whose
            # hash differs: store that one, or the history pull would later store it twice.
            with contextlib.suppress(ProtectedTopicError):  # submit() refuses and counts it
                message = self.relay.prepare(pubsub_topic, message)
        digest = message_hash(pubsub_topic, message)
        if not self.seen.add(digest):
            self.metrics.envelopes_dropped.inc(1, "repeat")
            return
        row = StoredMessage(
            digest,
            pubsub_topic,
            message.content_topic,
            bytes(envelope.data),
            PAYLOAD_VERSION_WAKU1,
            message.timestamp,
            bytes(message.meta) or None,
            bytes(raw),
            db_key_for(envelope).encode(),
        )
        self.writer.add(row)
        for hook in self.stored_hooks:
            hook(row)
        if self.relay is not None and live:
            self.relay.submit(pubsub_topic, message)
        elif self.relay is not None:
            # History a trusted mailserver hands over (0x7f): stored, not re-published as news
            # (nwaku's relay validators drop messages older than 20 s anyway).
            self.metrics.envelopes_dropped.inc(1, "not_live")
        self.metrics.envelopes_bridged.inc(1, "v1_to_v2")
        await self._offer(bytes(raw), envelope, exclude=peer_key)

    # -- v2 -> v1 ---------------------------------------------------------------------------

    async def on_v2_messages(self, rows: Iterable[StoredMessage]) -> int:
        """Offer new v2 messages to the v1 peers; returns how many were offered."""
        now = self.clock.time()
        oldest = int((now - self.live_window) * 1_000_000_000)
        offered = 0
        for row in rows:
            if row.version != PAYLOAD_VERSION_WAKU1 or not is_v1_content_topic(row.content_topic):
                continue
            if row.timestamp < oldest:
                continue  # history, not live: stored only
            if not self.seen.add(row.message_hash):
                self.metrics.envelopes_dropped.inc(1, "loop")
                continue
            message = waku_message_pb2.WakuMessage(
                payload=row.payload, content_topic=row.content_topic, version=row.version,
                timestamp=row.timestamp,
            )  # fmt: skip
            try:
                envelope = await asyncio.to_thread(waku_message_to_envelope, message, now=int(now))
            except WakuLegacyError as exc:
                self.metrics.envelopes_dropped.inc(1, "unconvertible")
                log.debug("v2 message not bridged", extra=fields(error=str(exc)))
                continue
            raw = envelope.encode()
            if self.mailserver is not None:
                self.mailserver.core.seen.add(keccak256(raw))
            await self._offer(raw, envelope, exclude=None)
            self.metrics.envelopes_bridged.inc(1, "v2_to_v1")
            offered += 1
        return offered

    async def _offer(self, raw: bytes, envelope: Envelope, *, exclude: bytes | None) -> None:
        if self.mailserver is None:
            return
        envelope_pow: float | None = None
        for peer in list(self.mailserver.peers):
            try:
                key = peer.remote_public_key
            except AssertionError:
                continue  # handshake not finished
            if key == exclude or not peer.state.status_received:
                continue
            if not peer.state.wants(envelope.topic):
                continue
            if peer.state.pow_requirement > 0:
                envelope_pow = pow_of(envelope) if envelope_pow is None else envelope_pow
                if envelope_pow < peer.state.pow_requirement:
                    self.metrics.envelopes_dropped.inc(1, "peer_pow")
                    continue
            try:
                await peer.send_envelopes([raw])
            except (PeerDisconnected, ConnectionError, OSError):
                continue
