"""Pull history out of a Waku v1 mailserver (status-go or ours) over RLPx.

:class:`MailServerClient` dials the mailserver by enode, sends a history request for a time
range and topics (or a bloom) in either wire form, collects the 0x7f envelopes until the
0x7d completion, writes them to an envelope writer (the dump the migration reads), and
follows the cursor until the server reports no next page.

A page is committed only once its completion arrived: its envelopes are appended, the
writer flushed, then ``checkpoint(cursor)`` called. A dropped connection (or a silent
server) therefore loses nothing and duplicates nothing: the client reconnects with backoff
and re-sends the request from the last committed cursor. "rate limit exceeded" replies are
waited out and retried, and later requests are paced by the same wait.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

import coincurve

from waku_legacy.crypto.keccak import keccak256
from waku_legacy.crypto.secp256k1 import generate_private_key
from waku_legacy.errors import DecodeError, WakuLegacyError
from waku_legacy.mailserver_compat.rlpx.asyncio_transport import PeerDisconnected
from waku_legacy.mailserver_compat.rlpx.enode import Enode
from waku_legacy.mailserver_compat.waku_peer import WakuPeer, connect
from waku_legacy.mailserver_compat.wire.complete import RequestComplete
from waku_legacy.mailserver_compat.wire.envelope import DEFAULT_MAX_ENVELOPE_SIZE, Envelope
from waku_legacy.mailserver_compat.wire.request import (
    FieldOrder,
    MessagesRequest,
    encode_envelope_request,
    encode_plain_request,
)
from waku_legacy.mailserver_compat.wire.waku_protocol import (
    P2PMessagesReceived,
    RequestCompleteReceived,
    StatusOptions,
)

__all__ = [
    "EnvelopeWriter",
    "HistoryQuery",
    "MailServerClient",
    "MailServerRequestError",
    "PullResult",
    "RequestMode",
]

log = logging.getLogger("waku_legacy.mailserver_client")


class EnvelopeWriter(Protocol):
    """Where pulled envelopes go (``storage.dump.DumpWriter`` is one)."""

    def append(self, envelope_rlp: bytes) -> None: ...

    def flush(self) -> None: ...


class MailServerRequestError(WakuLegacyError):
    """The mailserver answered a request with an error report, or kept failing."""


class RequestMode:
    PLAIN = "plain"  # [id, from, to, limit, cursor, bloom, topics]
    ENVELOPE = "envelope"  # signed, encrypted request envelope (status-go field order)
    ENVELOPE_SPEC = "envelope-spec"  # same, 8/WAKU-MAIL field order (non-batch replies)


@dataclass(frozen=True)
class HistoryQuery:
    lower: int
    upper: int
    topics: tuple[bytes, ...] = ()
    bloom: bytes = b""
    limit: int = 1000
    mode: str = RequestMode.PLAIN
    symmetric_key: bytes | None = None  # envelope modes: None = status-go's default key
    encrypt_to_server: bool = False  # envelope modes: ECIES to the server's node key


@dataclass
class PullResult:
    envelopes: int = 0
    pages: int = 0
    requests: int = 0
    reconnects: int = 0
    invalid_envelopes: int = 0
    cursor: bytes = b""
    last_envelope_hash: bytes = b""
    cursors: list[bytes] = field(default_factory=list)


class MailServerClient:
    def __init__(
        self,
        enode: Enode,
        node_key: coincurve.PrivateKey | None = None,
        *,
        request_timeout: float = 30.0,
        max_retries: int = 5,
        retry_delay: float = 0.5,
        rate_limit_wait: float = 1.0,
        handshake_timeout: float = 5.0,
        # status-go bundles under its own MaxMessageSize (1 MiB by default, at most 10 MiB):
        # accept the largest it may be configured with.
        max_message_size: int = DEFAULT_MAX_ENVELOPE_SIZE,
        local_host: str | None = None,
    ) -> None:
        self.enode = enode
        self.node_key = node_key or generate_private_key()
        self.request_timeout = request_timeout
        self.max_retries = max_retries
        self.retry_delay = retry_delay
        self.rate_limit_wait = rate_limit_wait
        self.handshake_timeout = handshake_timeout
        self.max_message_size = max_message_size
        self.local_host = local_host
        self._peer: WakuPeer | None = None
        self._pace = 0.0  # seconds between requests, learnt from rate-limit replies

    async def _connected(self) -> WakuPeer:
        if self._peer is None or self._peer.rlpx.ended is not None:
            # A puller wants no live traffic: empty topic interest (status-go then sends none).
            status = StatusOptions(pow_requirement=0.0, light_node=True, topic_interest=())
            self._peer = await connect(
                self.enode,
                self.node_key,
                status=status,
                handshake_timeout=self.handshake_timeout,
                max_message_size=self.max_message_size,
                local_host=self.local_host,
            )
        return self._peer

    async def close(self) -> None:
        if self._peer is not None:
            await self._peer.disconnect()
            self._peer = None

    async def __aenter__(self) -> MailServerClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    def _request_payload(
        self, peer: WakuPeer, query: HistoryQuery, cursor: bytes
    ) -> tuple[bytes, bytes]:
        """``(request id, 0x7e payload)``."""
        request = MessagesRequest(
            request_id=os.urandom(32),
            lower=query.lower,
            upper=query.upper,
            limit=query.limit,
            cursor=cursor,
            bloom=b"" if query.topics else query.bloom,
            topics=query.topics,
            batch=query.mode != RequestMode.ENVELOPE_SPEC,
        )
        if query.mode == RequestMode.PLAIN:
            return request.request_id, encode_plain_request(request)
        envelope = encode_envelope_request(
            request,
            sign_with=self.node_key,
            symmetric_key=None if query.encrypt_to_server else query.symmetric_key,
            public_key=b"\x04" + peer.remote_public_key if query.encrypt_to_server else None,
            field_order=FieldOrder.SPEC
            if query.mode == RequestMode.ENVELOPE_SPEC
            else FieldOrder.STATUS_GO,
            target_pow=peer.state.pow_requirement,
        )
        return envelope.hash(), envelope.encode()

    async def request_page(
        self, query: HistoryQuery, cursor: bytes
    ) -> tuple[list[bytes], RequestComplete]:
        """One request/response round: the envelopes received and the completion."""
        peer = await self._connected()
        request_id, payload = self._request_payload(peer, query, cursor)
        await peer.send_p2p_request(payload)
        envelopes: list[bytes] = []
        async with asyncio.timeout(self.request_timeout):
            while True:
                event = await peer.recv()
                if isinstance(event, P2PMessagesReceived):
                    envelopes.extend(event.envelopes)
                elif isinstance(event, RequestCompleteReceived):
                    if event.complete.request_id == request_id:
                        return envelopes, event.complete
                    log.debug("mailserver client: completion for another request ignored")

    async def pull(
        self,
        query: HistoryQuery,
        writer: EnvelopeWriter,
        *,
        cursor: bytes = b"",
        checkpoint: Callable[[bytes], None] | None = None,
        on_page: Callable[[PullResult], None] | None = None,
    ) -> PullResult:
        """Follow the cursor from ``cursor`` to the end, writing every envelope once."""
        result = PullResult(cursor=cursor)
        failures = 0
        previous_page: set[bytes] = set()
        while True:
            if self._pace:
                await asyncio.sleep(self._pace)
            result.requests += 1
            try:
                envelopes, complete = await self.request_page(query, result.cursor)
            except (PeerDisconnected, OSError, TimeoutError) as exc:
                failures += 1
                if failures > self.max_retries:
                    raise MailServerRequestError(
                        f"mailserver {self.enode} failed {failures} times in a row; "
                        f"last error: {exc!r}; resume from cursor {result.cursor.hex() or 'start'}"
                    ) from exc
                log.warning(
                    "mailserver client: %s; reconnecting (attempt %d) to resume from cursor %s",
                    exc or type(exc).__name__,
                    failures,
                    result.cursor.hex() or "start",
                )
                await self._drop()
                result.reconnects += 1
                await asyncio.sleep(self.retry_delay * failures)
                continue
            if complete.failed:
                if "rate limit" in complete.error and failures < self.max_retries:
                    # Pace every later request too, rather than hitting the limit each page.
                    failures += 1
                    self._pace = max(self._pace, self.rate_limit_wait)
                    continue
                raise MailServerRequestError(f"mailserver refused the request: {complete.error}")
            failures = 0
            page_hashes = self._commit(envelopes, writer, previous_page, result)
            previous_page = page_hashes
            result.pages += 1
            result.cursor = complete.cursor
            result.cursors.append(complete.cursor)
            if envelopes:
                result.last_envelope_hash = complete.last_envelope_hash
            if checkpoint is not None:
                checkpoint(complete.cursor)
            if on_page is not None:
                on_page(result)
            if not complete.cursor:
                return result

    def _commit(
        self,
        envelopes: Sequence[bytes],
        writer: EnvelopeWriter,
        previous_page: set[bytes],
        result: PullResult,
    ) -> set[bytes]:
        hashes: set[bytes] = set()
        for raw in envelopes:
            try:
                Envelope.decode(raw, max_size=self.max_message_size)
            except DecodeError as exc:
                result.invalid_envelopes += 1
                log.warning("mailserver client: skipping an invalid envelope: %s", exc)
                continue
            # The decode is strict (canonical RLP only), so this is the envelope hash
            # without re-encoding.
            digest = keccak256(raw)
            if digest in hashes or digest in previous_page:
                continue  # a server repeating itself; the dump keeps one copy
            hashes.add(digest)
            writer.append(raw)
            result.envelopes += 1
        writer.flush()
        return hashes

    async def _drop(self) -> None:
        if self._peer is not None:
            try:
                await self._peer.disconnect()
            except Exception:
                pass
            self._peer = None
