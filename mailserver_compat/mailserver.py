"""The Waku v1 mailserver: answers history requests (0x7e) from a pluggable store and takes
live envelopes (0x01) from its peers.

Request handling follows status-go's ``mailserver.go``:

1. decode the request in either form (:func:`~waku_legacy.mailserver_compat.request.
   decode_p2p_request`: an envelope encrypted with the request key or to this node's key,
   or the plain ``[id, from, to, limit, cursor, bloom, topics]``); an envelope request must
   carry enough PoW when ``min_request_pow`` is set;
2. apply the serving rules (:func:`~waku_legacy.mailserver_compat.request.normalize_request`:
   limit 0 -> 1000, > 1000 refused, upper 0 -> now + 60, bloom or topics required, topics
   override the bloom);
3. rate limit: one request per peer per ``rate_limit`` seconds (trusted peers exempt);
4. read one page from the store, send it in 0x7f packets each holding as many envelopes as
   fit ``max_message_size`` (one envelope per packet for non-batch requests), then 0x7d
   with the request id, the last envelope's hash and the next page's cursor.

Any failure in 1-3 is answered with a 0x7d ``ERROR=`` report naming the problem; a payload
so broken that no request id can be read from it ends the session (SUBPROTOCOL_ERROR).
Either way the failure is logged and the server keeps serving its other peers.

Live envelopes (0x01) are checked as status-go's ``validateAndAdd`` does (not from the
future beyond 10 s, not expired, not over the size limit, PoW at least the requirement
this node advertises), de-duplicated through a bounded seen set, and handed to the sink.
0x7f packets are only taken from trusted peers (status-go ignores them from others).
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field

import coincurve
import rlp

from waku_legacy.crypto.keccak import keccak256
from waku_legacy.crypto.secp256k1 import public_key_of
from waku_legacy.errors import CryptoError, DecodeError
from waku_legacy.mailserver_compat.complete import ZERO_HASH, RequestComplete
from waku_legacy.mailserver_compat.cursor import CURSOR_SIZE
from waku_legacy.mailserver_compat.enode import Enode
from waku_legacy.mailserver_compat.envelope import Envelope
from waku_legacy.mailserver_compat.envelope_store import EnvelopeStore, StorePage
from waku_legacy.mailserver_compat.pow import pow_of
from waku_legacy.mailserver_compat.request import (
    MessagesRequest,
    RequestForm,
    decode_p2p_request,
    default_request_key,
    normalize_request,
)
from waku_legacy.mailserver_compat.rlpx.asyncio_transport import (
    PeerDisconnected,
    RlpxPeer,
    listen,
)
from waku_legacy.mailserver_compat.rlpx.reasons import DisconnectReason
from waku_legacy.mailserver_compat.waku_peer import DEFAULT_MAX_MESSAGE_SIZE, WakuPeer
from waku_legacy.mailserver_compat.waku_protocol import (
    WAKU_CAPABILITY,
    EnvelopeRejection,
    EnvelopesReceived,
    MessagesResponse,
    P2PMessagesReceived,
    P2PRequestReceived,
    PacketCode,
    StatusOptions,
    encode_batch_ack,
    encode_envelope_list,
)

__all__ = [
    "LiveSink",
    "MailServer",
    "MailServerConfig",
    "MailServerCore",
    "PreparedRequest",
    "RateLimiter",
    "RequestRejected",
    "SeenSet",
    "bundle_envelopes",
]

log = logging.getLogger("waku_legacy.mailserver")

SYNC_ALLOWANCE = 10  # status-go DefaultSyncAllowance, seconds
_LIST_HEADER_MAX = 9  # an RLP list header is at most 9 bytes


@dataclass(frozen=True)
class MailServerConfig:
    """How the mailserver decodes, limits and answers.

    ``symmetric_key``: the request key (None: PBKDF2 of status-go's default password
    ``status-offline-inbox``); ``decrypt_with_node_key``: also open requests encrypted to
    this node's key; ``rate_limit``: seconds between two requests of one peer (0 = off);
    ``trusted_peers``: 64-byte public keys exempt from the rate limit whose 0x7f envelopes
    are accepted; ``min_pow``: advertised and enforced for live envelopes.
    """

    symmetric_key: bytes | None = None
    decrypt_with_node_key: bool = True
    rate_limit: float = 1.0
    max_message_size: int = DEFAULT_MAX_MESSAGE_SIZE
    min_request_pow: float = 0.0
    min_pow: float = 0.001
    trusted_peers: frozenset[bytes] = frozenset()
    confirmations: bool = False
    seen_capacity: int = 100_000
    client_id: str = "waku-legacy-mailserver/v0.1.0"


class RequestRejected(Exception):
    """A request answered with an error report (``request_id`` known) or a disconnect."""

    def __init__(self, request_id: bytes | None, message: str) -> None:
        super().__init__(message)
        self.request_id = request_id
        self.message = message


class RateLimiter:
    """One request per peer per ``interval`` seconds (status-go's ``rateLimiter``)."""

    def __init__(self, interval: float, *, max_peers: int = 100_000) -> None:
        self.interval = interval
        self._last: OrderedDict[bytes, float] = OrderedDict()
        self._max_peers = max_peers

    def allow(self, peer: bytes, now: float) -> bool:
        if self.interval <= 0:
            return True
        last = self._last.get(peer)
        if last is not None and now - last < self.interval:
            return False
        self._last[peer] = now
        self._last.move_to_end(peer)
        while len(self._last) > self._max_peers:
            self._last.popitem(last=False)
        return True


class SeenSet:
    """A bounded set of envelope hashes (oldest forgotten first)."""

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self._hashes: OrderedDict[bytes, None] = OrderedDict()

    def add(self, digest: bytes) -> bool:
        """``True`` if ``digest`` is new (and now remembered)."""
        if digest in self._hashes:
            return False
        self._hashes[digest] = None
        if len(self._hashes) > self.capacity:
            self._hashes.popitem(last=False)
        return True

    def __contains__(self, digest: object) -> bool:
        return digest in self._hashes

    def __len__(self) -> int:
        return len(self._hashes)


def bundle_envelopes(envelopes: Sequence[bytes], max_message_size: int) -> list[list[bytes]]:
    """Split encoded envelopes into packets whose RLP list fits ``max_message_size``.

    An envelope too big for any packet still goes alone in one (status-go does the same;
    the receiving peer decides what to do with it).
    """
    budget = max_message_size - _LIST_HEADER_MAX
    bundles: list[list[bytes]] = []
    current: list[bytes] = []
    size = 0
    for raw in envelopes:
        if current and size + len(raw) > budget:
            bundles.append(current)
            current, size = [], 0
        current.append(raw)
        size += len(raw)
    if current:
        bundles.append(current)
    return bundles


def _request_id_of(payload: bytes) -> bytes | None:
    """The id an error report can name: the envelope hash of an envelope request, or the
    id field of a plain request; ``None`` when the payload shows neither."""
    try:
        item = rlp.decode(payload, strict=True)
    except Exception:
        return None
    if isinstance(item, list) and len(item) == 5:
        return keccak256(payload)
    if isinstance(item, list) and len(item) == 7 and isinstance(item[0], bytes):
        return item[0] if len(item[0]) == 32 else None
    return None


@dataclass(frozen=True, slots=True)
class PreparedRequest:
    request: MessagesRequest
    received_at: float


@dataclass
class MailServerCore:
    """The sans-IO part: request decoding, validation, rate limiting, paging, live checks."""

    store: EnvelopeStore
    node_key: coincurve.PrivateKey
    config: MailServerConfig = field(default_factory=MailServerConfig)
    clock: Callable[[], float] = time.time

    def __post_init__(self) -> None:
        self.symmetric_key = self.config.symmetric_key or default_request_key()
        self.rate_limiter = RateLimiter(self.config.rate_limit)
        self.seen = SeenSet(self.config.seen_capacity)

    def is_trusted(self, peer: bytes) -> bool:
        return peer in self.config.trusted_peers

    def status(self) -> StatusOptions:
        """What this node advertises: its PoW requirement, a full bloom (it archives
        everything), no light mode, its confirmation setting."""
        return StatusOptions(
            pow_requirement=self.config.min_pow,
            bloom=b"\xff" * 64,
            light_node=False,
            confirmations=self.config.confirmations,
        )

    # -- requests ----------------------------------------------------------------------

    def prepare(self, peer: bytes, payload: bytes) -> PreparedRequest:
        """Decode, validate and rate-limit one 0x7e payload; raises :class:`RequestRejected`."""
        now = self.clock()
        try:
            request = decode_p2p_request(
                payload,
                symmetric_key=self.symmetric_key,
                private_key=self.node_key if self.config.decrypt_with_node_key else None,
                max_size=self.config.max_message_size,
            )
        except CryptoError as exc:
            raise RequestRejected(
                _request_id_of(payload), f"failed to decrypt p2p request: {exc}"
            ) from exc
        except DecodeError as exc:
            raise RequestRejected(_request_id_of(payload), f"invalid request: {exc}") from exc
        if request.form is not RequestForm.PLAIN and self.config.min_request_pow > 0:
            envelope_pow = pow_of(Envelope.decode(payload))
            if envelope_pow < self.config.min_request_pow:
                raise RequestRejected(
                    request.request_id,
                    f"PoW too low: {envelope_pow:.6g} < {self.config.min_request_pow}",
                )
        try:
            request = normalize_request(request, now=int(now))
        except DecodeError as exc:
            raise RequestRejected(request.request_id, f"request is invalid: {exc.reason}") from exc
        if not self.is_trusted(peer) and not self.rate_limiter.allow(peer, now):
            raise RequestRejected(request.request_id, "rate limit exceeded")
        return PreparedRequest(request, now)

    def query(self, prepared: PreparedRequest) -> StorePage:
        request = prepared.request
        return self.store.query(
            request.lower,
            request.upper,
            topics=request.topics,
            bloom=request.bloom or None,
            limit=request.limit,
            cursor=request.cursor,
        )

    def response(
        self, prepared: PreparedRequest, page: StorePage
    ) -> tuple[list[list[bytes]], RequestComplete]:
        """The 0x7f bundles and the 0x7d completion for one page."""
        envelopes = [raw for _, raw in page.envelopes]
        if prepared.request.batch:
            bundles = bundle_envelopes(envelopes, self.config.max_message_size)
        else:
            bundles = [[raw] for raw in envelopes]
        last_hash = page.envelopes[-1][0][4:CURSOR_SIZE] if page.envelopes else ZERO_HASH
        complete = RequestComplete(
            request_id=prepared.request.request_id,
            last_envelope_hash=last_hash,
            cursor=page.next_cursor,
        )
        return bundles, complete

    # -- live envelopes ----------------------------------------------------------------

    def check_live(self, raw: bytes, envelope: Envelope, now: int) -> str | None:
        """Why a live envelope is not accepted (``None``: accept)."""
        sent = envelope.sent_time
        if sent > now + SYNC_ALLOWANCE:
            return "envelope created in the future"
        if envelope.expiry < now:
            return "expired envelope"
        if len(raw) > self.config.max_message_size:
            return "huge messages are not allowed"
        if self.config.min_pow > 0 and pow_of(envelope) < self.config.min_pow:
            return "envelope with low PoW received"
        return None


LiveSink = Callable[[bytes, Envelope, bytes], Awaitable[None] | None]


class MailServer:
    """The asyncio mailserver node: listens for RLPx peers speaking waku/1."""

    def __init__(
        self,
        store: EnvelopeStore,
        node_key: coincurve.PrivateKey,
        config: MailServerConfig | None = None,
        *,
        sink: LiveSink | None = None,
        handshake_timeout: float = 5.0,
        ping_interval: float = 15.0,
        read_timeout: float = 30.0,
    ) -> None:
        self.core = MailServerCore(store, node_key, config or MailServerConfig())
        self.config = self.core.config
        self.node_key = node_key
        self.sink = sink
        self.handshake_timeout = handshake_timeout
        self.ping_interval = ping_interval
        self.read_timeout = read_timeout
        self._server: asyncio.Server | None = None
        self.host = ""
        self.port = 0
        self.peers: set[WakuPeer] = set()
        self.stats: dict[str, int] = {
            "requests": 0,
            "request_errors": 0,
            "envelopes_sent": 0,
            "live_accepted": 0,
            "live_rejected": 0,
            "peers_dropped": 0,
        }

    @property
    def enode(self) -> Enode:
        host = self.host
        if host in ("", "0.0.0.0"):
            host = "127.0.0.1"
        elif host == "::":
            host = "::1"
        return Enode(public_key_of(self.node_key)[1:], host, self.port)

    async def start(self, host: str = "127.0.0.1", port: int = 0) -> Enode:
        self._server = await listen(
            host,
            port,
            self.node_key,
            [WAKU_CAPABILITY],
            self._serve_peer,
            listen_port=port,
            handshake_timeout=self.handshake_timeout,
            max_message_size=self.config.max_message_size,
            ping_interval=self.ping_interval,
            read_timeout=self.read_timeout,
        )
        sockname = self._server.sockets[0].getsockname()
        self.host, self.port = host, sockname[1]
        log.info("mailserver listening on %s", self.enode)
        return self.enode

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
            for peer in list(self.peers):
                await peer.disconnect(DisconnectReason.QUITTING, "server shutting down")
            await self._server.wait_closed()
            self._server = None

    async def __aenter__(self) -> MailServer:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def _serve_peer(self, rlpx: RlpxPeer) -> None:
        peer = WakuPeer(rlpx, self.core.status())
        self.peers.add(peer)
        try:
            await peer.handshake(self.handshake_timeout)
            log.debug("mailserver: peer %s ready", peer.name)
            while True:
                event = await peer.recv()
                if isinstance(event, P2PRequestReceived):
                    await self._handle_request(peer, event.payload)
                elif isinstance(event, EnvelopesReceived):
                    await self._handle_live(peer, event)
                elif isinstance(event, P2PMessagesReceived):
                    await self._handle_p2p_messages(peer, event)
        except PeerDisconnected as exc:
            if not exc.remote and exc.reason is not DisconnectReason.REQUESTED:
                self.stats["peers_dropped"] += 1
        finally:
            self.peers.discard(peer)

    async def _handle_request(self, peer: WakuPeer, payload: bytes) -> None:
        self.stats["requests"] += 1
        try:
            prepared = self.core.prepare(peer.remote_public_key, payload)
        except RequestRejected as exc:
            self.stats["request_errors"] += 1
            if exc.request_id is None:
                log.warning("mailserver: peer %s: unreadable request: %s", peer.name, exc)
                await peer.disconnect(DisconnectReason.SUBPROTOCOL_ERROR, exc.message)
                raise peer.rlpx.ended or PeerDisconnected(
                    DisconnectReason.SUBPROTOCOL_ERROR, exc.message, remote=False
                ) from exc
            log.warning(
                "mailserver: peer %s: request %s refused: %s",
                peer.name,
                exc.request_id.hex()[:16],
                exc.message,
            )
            await peer.send_request_complete(RequestComplete.failure(exc.request_id, exc.message))
            return
        request = prepared.request
        try:
            page = await asyncio.to_thread(self.core.query, prepared)
        except Exception as exc:  # a store failure is this request's error, not the server's
            self.stats["request_errors"] += 1
            log.exception("mailserver: store query failed for peer %s", peer.name)
            await peer.send_request_complete(
                RequestComplete.failure(request.request_id, f"store query failed: {exc}")
            )
            return
        bundles, complete = self.core.response(prepared, page)
        for bundle in bundles:
            await peer.send(PacketCode.P2P_MESSAGE, encode_envelope_list(bundle))
        await peer.send_request_complete(complete)
        self.stats["envelopes_sent"] += len(page.envelopes)
        log.info(
            "mailserver: peer %s: request %s (%s, %d..%d, limit %d): %d envelopes in %d "
            "packets, next cursor %s",
            peer.name,
            request.request_id.hex()[:16],
            request.form.value,
            request.lower,
            request.upper,
            request.limit,
            len(page.envelopes),
            len(bundles),
            page.next_cursor.hex() or "none",
        )

    async def _deliver(self, raw: bytes, envelope: Envelope, peer: WakuPeer) -> None:
        if self.sink is None:
            return
        result = self.sink(raw, envelope, peer.remote_public_key)
        if inspect.isawaitable(result):
            await result

    async def _handle_live(self, peer: WakuPeer, event: EnvelopesReceived) -> None:
        now = int(self.core.clock())
        rejections: list[EnvelopeRejection] = []
        for raw in event.envelopes:
            try:
                envelope = Envelope.decode(raw, max_size=self.config.max_message_size)
            except DecodeError as exc:
                log.warning("mailserver: peer %s sent a bad envelope: %s", peer.name, exc)
                await peer.disconnect(DisconnectReason.SUBPROTOCOL_ERROR, str(exc))
                raise peer.rlpx.ended or PeerDisconnected(
                    DisconnectReason.SUBPROTOCOL_ERROR, str(exc), remote=False
                ) from exc
            digest = keccak256(raw)
            if digest in self.core.seen:
                continue
            problem = self.core.check_live(raw, envelope, now)
            if problem is not None:
                self.stats["live_rejected"] += 1
                rejections.append(EnvelopeRejection(digest, 1, problem))
                log.debug("mailserver: peer %s: envelope dropped: %s", peer.name, problem)
                continue
            self.core.seen.add(digest)
            self.stats["live_accepted"] += 1
            await self._deliver(raw, envelope, peer)
        if self.config.confirmations:
            await peer.send(
                PacketCode.MESSAGE_RESPONSE,
                MessagesResponse(event.batch_hash, tuple(rejections)).encode(),
            )
            await peer.send(PacketCode.BATCH_ACKNOWLEDGED, encode_batch_ack(event.batch_hash))

    async def _handle_p2p_messages(self, peer: WakuPeer, event: P2PMessagesReceived) -> None:
        if not self.core.is_trusted(peer.remote_public_key):
            log.debug("mailserver: ignoring p2p messages from untrusted peer %s", peer.name)
            return
        for raw in event.envelopes:
            try:
                envelope = Envelope.decode(raw, max_size=self.config.max_message_size)
            except DecodeError as exc:
                log.warning("mailserver: trusted peer %s sent a bad envelope: %s", peer.name, exc)
                continue
            if self.core.seen.add(keccak256(raw)):
                self.stats["live_accepted"] += 1
                await self._deliver(raw, envelope, peer)
