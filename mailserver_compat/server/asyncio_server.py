"""The Waku v1 mailserver node on asyncio: listens for RLPx peers speaking waku/1, reads
their packets, asks :class:`~.core.MailServerCore` what to answer, and writes the answers.

Connections: at most ``limits.max_peers`` (handshakes included), ``limits.
max_peers_per_address`` per address, ``limits.max_pending_handshakes`` handshakes at once
(``..._per_address`` from one address) and ``limits.address_connect_rate`` new connections
a second per address; a connection over a cap is closed before any handshake work.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import time
from collections import Counter
from collections.abc import Awaitable, Callable

import coincurve

from waku_legacy.crypto.keccak import keccak256
from waku_legacy.crypto.secp256k1 import public_key_of
from waku_legacy.errors import DecodeError
from waku_legacy.limits import LogThrottle
from waku_legacy.mailserver_compat.rlpx.asyncio_transport import (
    ConnectionLimits,
    PeerDisconnected,
    RlpxPeer,
    listen,
)
from waku_legacy.mailserver_compat.rlpx.enode import Enode
from waku_legacy.mailserver_compat.rlpx.reasons import DisconnectReason
from waku_legacy.mailserver_compat.server.core import (
    STORE_UNAVAILABLE,
    LiveRefusal,
    MailServerConfig,
    MailServerCore,
    RequestRejected,
)
from waku_legacy.mailserver_compat.storage.envelope_store import (
    EnvelopeStore,
)
from waku_legacy.mailserver_compat.waku_peer import WakuPeer
from waku_legacy.mailserver_compat.wire.complete import RequestComplete
from waku_legacy.mailserver_compat.wire.envelope import Envelope
from waku_legacy.mailserver_compat.wire.waku_protocol import (
    WAKU_CAPABILITY,
    EnvelopeRejection,
    EnvelopesReceived,
    MessagesResponse,
    P2PMessagesReceived,
    P2PRequestReceived,
    PacketCode,
    encode_batch_ack,
    encode_envelope_list,
)
from waku_legacy.store import StoreUnavailable

__all__ = ["LiveSink", "MailServer", "RefusalHook"]

log = logging.getLogger("waku_legacy.mailserver")


LiveSink = Callable[[bytes, Envelope, bytes], Awaitable[None] | None]
RefusalHook = Callable[[str, str], None]  # (kind: live/request/connection, reason code)


class MailServer:
    """The asyncio mailserver node: listens for RLPx peers speaking waku/1."""

    def __init__(
        self,
        store: EnvelopeStore,
        node_key: coincurve.PrivateKey,
        config: MailServerConfig | None = None,
        *,
        sink: LiveSink | None = None,
        handshake_timeout: float | None = None,
        ping_interval: float = 15.0,
        read_timeout: float = 30.0,
        on_refusal: RefusalHook | None = None,
    ) -> None:
        self.core = MailServerCore(store, node_key, config or MailServerConfig())
        self.config = self.core.config
        self.node_key = node_key
        self.sink = sink
        self.on_refusal = on_refusal
        self.refusals: Counter[tuple[str, str]] = Counter()
        # Every refusal is counted; a flood gets one log line per kind, reason and peer
        # every 10 s, not one per envelope.
        self.refusal_log = LogThrottle(10.0)
        self.handshake_timeout = (
            self.config.limits.handshake_timeout if handshake_timeout is None else handshake_timeout
        )
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

    def _refuse(self, kind: str, code: str, who: str, detail: str) -> None:
        """Count, log and report one refusal (a live envelope, a request, a connection)."""
        self.refusals[(kind, code)] += 1
        name = f"refused_{kind}_{code}"
        self.stats[name] = self.stats.get(name, 0) + 1
        if self.refusal_log.should_log((kind, code, who), time.monotonic()):
            log.info("mailserver: %s refused from %s (%s): %s", kind, who, code, detail)
        if self.on_refusal is not None:
            try:
                self.on_refusal(kind, code)
            except Exception:  # a metrics hook must not break serving
                log.exception("mailserver: refusal hook failed")

    def _connection_refused(self, address: str, code: str) -> None:
        self._refuse("connection", code, address, "closed before the handshake")

    @property
    def enode(self) -> Enode:
        host = self.host
        if host in ("", "0.0.0.0"):
            host = "127.0.0.1"
        elif host == "::":
            host = "::1"
        return Enode(public_key_of(self.node_key)[1:], host, self.port)

    @property
    def listening(self) -> bool:
        """Started and not closed."""
        return self._server is not None

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
            limits=ConnectionLimits(
                max_peers=self.config.limits.max_peers,
                max_per_address=self.config.limits.max_peers_per_address,
                max_pending=self.config.limits.max_pending_handshakes,
                max_pending_per_address=self.config.limits.max_pending_handshakes_per_address,
                connect_rate=self.config.limits.address_connect_rate,
                connect_burst=self.config.limits.address_connect_burst,
            ),
            on_refused=self._connection_refused,
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
        peer.counts["requests"] += 1
        try:
            prepared = self.core.prepare(peer.remote_public_key, payload, peer.rlpx.host)
        except RequestRejected as exc:
            self.stats["request_errors"] += 1
            self._refuse("request", exc.code, peer.name, exc.message)
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
        except StoreUnavailable as exc:  # an outage (logged once by the store's owner)
            self.stats["request_errors"] += 1
            log.warning("mailserver: peer %s: store unreachable: %s", peer.name, exc)
            await peer.send_request_complete(
                RequestComplete.failure(request.request_id, STORE_UNAVAILABLE)
            )
            return
        except Exception as exc:  # a store failure is this request's error, not the server's
            self.stats["request_errors"] += 1
            log.exception("mailserver: store query failed for peer %s", peer.name)
            await peer.send_request_complete(
                RequestComplete.failure(request.request_id, f"store query failed: {exc}")
            )
            return
        bundles, complete = self.core.response(prepared, page, peer.remote_public_key)
        for bundle in bundles:
            await peer.send(PacketCode.P2P_MESSAGE, encode_envelope_list(bundle))
        await peer.send_request_complete(complete)
        self.stats["envelopes_sent"] += len(page.envelopes)
        peer.counts["envelopes_sent"] += len(page.envelopes)
        log.info(
            "mailserver: peer %s: request %s (%s, %d..%d, limit %d): %d envelopes in %d "
            "packets%s, next cursor %s",
            peer.name,
            request.request_id.hex()[:16],
            request.form.value,
            request.lower,
            request.upper,
            request.limit,
            len(page.envelopes),
            len(bundles),
            " (scan limit reached)" if page.partial else "",
            page.next_cursor.hex() or "none",
        )

    async def _deliver(self, raw: bytes, envelope: Envelope, peer: WakuPeer) -> None:
        if self.sink is None:
            return
        result = self.sink(raw, envelope, peer.remote_public_key)
        if inspect.isawaitable(result):
            await result

    async def _handle_live(self, peer: WakuPeer, event: EnvelopesReceived) -> None:
        clock = self.core.clock()
        now = int(clock)
        key = peer.remote_public_key
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
            limited = self.core.admit_live(key, peer.rlpx.host, clock)
            refusal = (
                LiveRefusal(limited, "rate limit exceeded")
                if limited is not None
                else self.core.live_refusal(raw, envelope, now)
            )
            if refusal is not None:
                self.stats["live_rejected"] += 1
                peer.counts["live_rejected"] += 1
                rejections.append(EnvelopeRejection(digest, 1, refusal.description))
                self._refuse(
                    "live", refusal.code, peer.name,
                    f"envelope {digest.hex()[:16]}: {refusal.description}",
                )  # fmt: skip
                continue
            self.core.seen.add(digest)
            self.stats["live_accepted"] += 1
            peer.counts["live_accepted"] += 1
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
                peer.counts["live_accepted"] += 1
                await self._deliver(raw, envelope, peer)
