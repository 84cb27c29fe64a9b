"""A waku/1 peer over an asyncio RLPx session: status exchange, typed events, sends.

Any waku/1 packet that does not decode, or a status that does not come first, ends the
session with a SUBPROTOCOL_ERROR Disconnect and a log line naming what was wrong.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import Counter
from collections.abc import Sequence

import coincurve

from waku_legacy.mailserver_compat.rlpx.asyncio_transport import (
    HANDSHAKE_TIMEOUT,
    PING_INTERVAL,
    READ_TIMEOUT,
    PeerDisconnected,
    RlpxPeer,
    dial,
)
from waku_legacy.mailserver_compat.rlpx.enode import Enode
from waku_legacy.mailserver_compat.rlpx.errors import ConnectionStateError
from waku_legacy.mailserver_compat.rlpx.reasons import DisconnectReason
from waku_legacy.mailserver_compat.wire.complete import RequestComplete
from waku_legacy.mailserver_compat.wire.waku_protocol import (
    WAKU_CAPABILITY,
    WAKU_NAME,
    PacketCode,
    StatusOptions,
    WakuEvent,
    WakuPeerState,
    WakuProtocolError,
    encode_envelope_list,
)

__all__ = ["WakuPeer", "connect"]

log = logging.getLogger("waku_legacy.waku")

# status-go's default MaxMessageSize is 1 MiB for clients; mailservers bundle under it.
DEFAULT_MAX_MESSAGE_SIZE = 1 << 20


class WakuPeer:
    def __init__(self, rlpx: RlpxPeer, status: StatusOptions) -> None:
        self.rlpx = rlpx
        self.our_status = status
        self.state = WakuPeerState()
        # what a server shows of its peers (the bridge's status page): since when, how much
        self.connected_at = time.time()
        self.counts: Counter[str] = Counter()

    @property
    def name(self) -> str:
        return self.rlpx.name

    @property
    def remote_public_key(self) -> bytes:
        key = self.rlpx.remote_public_key
        if key is None:  # a WakuPeer is made after the handshake, which learns the key
            raise ConnectionStateError(
                "remote_public_key",
                self.rlpx.connection.state.value,
                "no remote key: the handshake has not completed",
            )
        return key

    async def handshake(self, timeout: float = HANDSHAKE_TIMEOUT) -> StatusOptions:
        """Send our status, read theirs (which must be the first waku packet)."""
        await self.send(PacketCode.STATUS, self.our_status.encode())
        try:
            async with asyncio.timeout(timeout):
                while not self.state.status_received:
                    await self.recv()
        except TimeoutError:
            await self.rlpx.disconnect(DisconnectReason.READ_TIMEOUT, "no waku status")
            raise PeerDisconnected(
                DisconnectReason.READ_TIMEOUT, "no waku status", remote=False
            ) from None
        return self.our_status

    async def recv(self) -> WakuEvent:
        """The next waku event (ignored packet codes are skipped)."""
        while True:
            message = await self.rlpx.recv()
            if message.capability != WAKU_NAME:
                continue
            try:
                events = self.state.receive(message.code, message.payload)
            except WakuProtocolError as exc:
                log.warning("waku peer %s: disconnecting: %s", self.name, exc)
                await self.rlpx.disconnect(DisconnectReason.SUBPROTOCOL_ERROR, str(exc))
                raise self.rlpx.ended or PeerDisconnected(
                    DisconnectReason.SUBPROTOCOL_ERROR, str(exc), remote=False
                ) from exc
            if events:
                return events[0]

    async def send(self, code: int, payload: bytes) -> None:
        await self.rlpx.send(WAKU_NAME, int(code), payload)

    async def send_envelopes(self, encoded_envelopes: Sequence[bytes]) -> None:
        """Packet 1 (messages): live envelopes, already RLP-encoded."""
        await self.send(PacketCode.MESSAGES, encode_envelope_list(encoded_envelopes))

    async def send_p2p_messages(self, encoded_envelopes: Sequence[bytes]) -> None:
        """Packet 127: one bundle of a mailserver response."""
        await self.send(PacketCode.P2P_MESSAGE, encode_envelope_list(encoded_envelopes))

    async def send_p2p_request(self, payload: bytes) -> None:
        """Packet 126: a request payload (plain form, or an encoded request envelope)."""
        await self.send(PacketCode.P2P_REQUEST, payload)

    async def send_request_complete(self, complete: RequestComplete) -> None:
        await self.send(PacketCode.P2P_REQUEST_COMPLETE, complete.encode_packet())

    async def disconnect(
        self, reason: DisconnectReason = DisconnectReason.REQUESTED, detail: str = ""
    ) -> None:
        await self.rlpx.disconnect(reason, detail)


async def connect(
    enode: Enode,
    private_key: coincurve.PrivateKey,
    *,
    status: StatusOptions | None = None,
    handshake_timeout: float = HANDSHAKE_TIMEOUT,
    max_message_size: int = DEFAULT_MAX_MESSAGE_SIZE,
    ping_interval: float = PING_INTERVAL,
    read_timeout: float = READ_TIMEOUT,
    local_host: str | None = None,
) -> WakuPeer:
    """Dial ``enode`` (from ``local_host`` when given) and complete RLPx and the waku/1
    status exchange."""
    rlpx = await dial(
        enode.host,
        enode.port,
        enode.public_key,
        private_key,
        [WAKU_CAPABILITY],
        handshake_timeout=handshake_timeout,
        max_message_size=max_message_size,
        ping_interval=ping_interval,
        read_timeout=read_timeout,
        local_host=local_host,
    )
    peer = WakuPeer(rlpx, status or StatusOptions(pow_requirement=0.0, light_node=True))
    try:
        await peer.handshake(handshake_timeout)
    except BaseException:
        await rlpx.disconnect(DisconnectReason.SUBPROTOCOL_ERROR, "waku handshake failed")
        raise
    return peer
