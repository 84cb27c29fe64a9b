"""WakuPeer's local misuse: a typed error naming the call and the RLPx state, not an assert."""

from __future__ import annotations

import asyncio
import socket

import pytest

from waku_legacy.crypto.secp256k1 import generate_private_key
from waku_legacy.mailserver_compat.rlpx.asyncio_transport import RlpxPeer
from waku_legacy.mailserver_compat.rlpx.connection import Connection
from waku_legacy.mailserver_compat.rlpx.errors import ConnectionStateError
from waku_legacy.mailserver_compat.waku_peer import WakuPeer
from waku_legacy.mailserver_compat.wire.waku_protocol import WAKU_CAPABILITY, StatusOptions


async def test_remote_key_before_the_handshake_is_a_state_error() -> None:
    ours, theirs = socket.socketpair()
    reader, writer = await asyncio.open_connection(sock=ours)
    try:
        rlpx = RlpxPeer(Connection(generate_private_key(), (WAKU_CAPABILITY,)), reader, writer)
        peer = WakuPeer(rlpx, StatusOptions())
        with pytest.raises(ConnectionStateError) as caught:
            _ = peer.remote_public_key
        error = caught.value
        assert (error.event, error.state) == ("remote_public_key", "await-auth")
        assert str(error) == (
            "remote_public_key in state await-auth: no remote key: the handshake has not completed"
        )
    finally:
        writer.close()
        theirs.close()
