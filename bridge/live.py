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
from collections.abc import Iterable
from pathlib import Path

import rlp

from waku_legacy.bridge.clock import Clock
from waku_legacy.bridge.logs import fields
from waku_legacy.bridge.metrics import BridgeMetrics
from waku_legacy.bridge.relay import ProtectedTopicError, RelayPublisher
from waku_legacy.bridge.store_threads import StoreAccess
from waku_legacy.bridge.tasks import finish_or_cancel
from waku_legacy.crypto.keccak import keccak256
from waku_legacy.durable import fsync_dir, write_atomic
from waku_legacy.errors import DecodeError, WakuLegacyError
from waku_legacy.identity.message_hash import message_hash
from waku_legacy.identity.topic_mapping import TopicMapping
from waku_legacy.identity.topics import is_v1_content_topic
from waku_legacy.mailserver_compat.rlp_fields import encode_rlp
from waku_legacy.mailserver_compat.rlpx.asyncio_transport import PeerDisconnected
from waku_legacy.mailserver_compat.server.mailserver import MailServer, SeenSet
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
    and is retried with exponential backoff (``retry_delay`` doubling up to
    ``max_retry_delay``) until the store takes it; every failed attempt is counted in
    ``waku_legacy_store_write_failures_total`` and logged. Rows are inserted idempotently,
    so a retry after a write that did land stores nothing twice. :meth:`flush` returns when
    every row added before it is in the store (not merely handed to a writer).

    With a ``spool`` path, rows the store has still not taken when :meth:`close` runs out of
    time are written there (temporary file, fsync, rename) and put back in the queue by
    the next :meth:`start`; the file is removed once they are in the store. A spool that
    does not decode is kept aside as ``<spool>.bad`` with an error log, never deleted."""

    def __init__(
        self,
        store: StoreAccess,
        *,
        max_batch: int = 1000,
        metrics: BridgeMetrics | None = None,
        retry_delay: float = 0.1,
        max_retry_delay: float = 30.0,
        spool: Path | None = None,
    ) -> None:
        self.store = store
        self.spool = spool
        self._spooled = 0  # rows read back from the spool: it goes once they are written
        self.max_batch = max_batch
        self.metrics = metrics
        self.retry_delay = retry_delay
        self.max_retry_delay = max_retry_delay
        self._pending: list[StoredMessage] = []
        self._wakeup = asyncio.Event()
        self._closing = False
        self._task: asyncio.Task[None] | None = None
        self._added = 0  # rows ever added
        self._done = 0  # rows ever written (in order)
        self._progress = asyncio.Condition()
        self.written = 0  # rows new to the store
        self.failures = 0

    def start(self) -> None:
        if self.spool is not None:
            for row in self._read_spool(self.spool):
                self.add(row)
            self._spooled = self._added
        self._task = asyncio.create_task(self._run(), name="live-batch-writer")

    @staticmethod
    def _read_spool(spool: Path) -> list[StoredMessage]:
        try:
            data = spool.read_bytes()
        except FileNotFoundError:
            return []
        try:
            rows = decode_spool(data)
        except WakuLegacyError as exc:
            bad = spool.with_name(spool.name + ".bad")
            os.replace(spool, bad)
            log.error("live spool does not decode; kept aside", extra=fields(
                path=str(bad), error=str(exc)))  # fmt: skip
            return []
        log.warning("live spool: storing rows kept at the last shutdown", extra=fields(
            path=str(spool), rows=len(rows)))  # fmt: skip
        return rows

    def _spool_written(self) -> None:
        """Every row read back from the spool is in the store: the spool can go."""
        assert self.spool is not None
        self._spooled = 0
        with contextlib.suppress(FileNotFoundError):
            self.spool.unlink()
            fsync_dir(self.spool.parent)

    def add(self, row: StoredMessage) -> None:
        self._pending.append(row)
        self._added += 1
        self._wakeup.set()

    @property
    def backlog(self) -> int:
        """Rows accepted and not yet in the store (queued or being written)."""
        return self._added - self._done

    async def _run(self) -> None:
        delay = self.retry_delay
        while True:
            if not self._pending:
                if self._closing:
                    return
                self._wakeup.clear()
                await self._wakeup.wait()
                continue
            batch = self._pending[: self.max_batch]
            try:
                self.written += await self.store.insert(batch)
            except Exception as exc:
                self.failures += 1
                if self.metrics is not None:
                    self.metrics.store_write_failures.inc()
                log.error(
                    "storing bridged messages failed; retrying",
                    exc_info=not isinstance(exc, WakuLegacyError),
                    extra=fields(rows=len(batch), retry_in=round(delay, 3), error=str(exc)),
                )
                await asyncio.sleep(delay)
                delay = min(delay * 2, self.max_retry_delay)
                continue
            delay = self.retry_delay
            del self._pending[: len(batch)]
            async with self._progress:
                self._done += len(batch)
                self._progress.notify_all()
            if self._spooled and self._done >= self._spooled:
                self._spool_written()

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
                self.spool.parent.mkdir(parents=True, exist_ok=True)
                write_atomic(self.spool, encode_spool(self._pending), step="live-spool")
                log.warning("live spool: unwritten rows kept for the next start", extra=fields(
                    path=str(self.spool), rows=len(self._pending)))  # fmt: skip
        self._task = None


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


def decode_spool(data: bytes) -> list[StoredMessage]:
    """The rows of :func:`encode_spool`; :class:`SpoolError` when the bytes are not that."""
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
        seen_capacity: int = 100_000,
        live_window: float = 300.0,
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
        self.writer.add(
            StoredMessage(
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
        )
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
