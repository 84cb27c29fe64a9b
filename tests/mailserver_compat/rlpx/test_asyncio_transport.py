"""The asyncio adapter over real loopback sockets, enode URLs and node key files."""

from __future__ import annotations

import asyncio
import logging

import pytest

from waku_legacy.crypto.key_file import (
    load_node_key,
    load_or_create_node_key,
    write_node_key,
)
from waku_legacy.crypto.secp256k1 import generate_private_key, public_key_of
from waku_legacy.errors import ConfigError
from waku_legacy.mailserver_compat.rlpx import p2p
from waku_legacy.mailserver_compat.rlpx.asyncio_transport import (
    PeerDisconnected,
    RlpxPeer,
    dial,
    listen,
)
from waku_legacy.mailserver_compat.rlpx.enode import Enode, EnodeError
from waku_legacy.mailserver_compat.rlpx.reasons import DisconnectReason

pytestmark = [pytest.mark.network, pytest.mark.timeout(30)]

ECHO = p2p.ProtocolSpec("echo", 1, 4)
KEY_HEX = "b71c71a67e1177ad4e901695e1b4b9ee17ae16c6668d313eac2f96dbcda3f291"
PUB_HEX = (
    "ca634cae0d49acb401d8a4c6b6fe8c55b70d115bf400769cc1400f3258cd3138"
    "7574077f301b421bc84df7266c44e9e6d569fc56be00812904767bf5ccd1fc7f"
)


def test_enode_parse_and_format() -> None:
    enode = Enode.parse(f"enode://{PUB_HEX}@10.0.0.1:30303?discport=0")
    assert enode.public_key.hex() == PUB_HEX and enode.host == "10.0.0.1"
    assert enode.port == 30303
    assert str(enode) == f"enode://{PUB_HEX}@10.0.0.1:30303"
    v6 = Enode.parse(f"enode://{PUB_HEX}@[::1]:1")
    assert v6.host == "::1" and str(v6) == f"enode://{PUB_HEX}@[::1]:1"
    assert Enode.parse(str(v6)) == v6


@pytest.mark.parametrize(
    "url",
    [
        f"enode://{PUB_HEX[:-2]}@1.2.3.4:1",
        f"enode://{PUB_HEX}@1.2.3.4",
        f"enode://{PUB_HEX}@1.2.3.4:0",
        f"enode://{PUB_HEX}@1.2.3.4:70000",
        f"enode://{'00' * 64}@1.2.3.4:1",  # not a curve point
        f"enr://{PUB_HEX}@1.2.3.4:1",
        f"enode://{PUB_HEX}@[zz::1]:1",
    ],
)
def test_bad_enode_urls(url: str) -> None:
    with pytest.raises(EnodeError):
        Enode.parse(url)


def test_node_key_files(tmp_path) -> None:
    # The EIP-8 vector's key B and its public key (from the EIP's enode of B).
    path = tmp_path / "nodekey"
    path.write_text(KEY_HEX + "\n")
    assert public_key_of(load_node_key(path))[1:].hex() == PUB_HEX
    key, created = load_or_create_node_key(tmp_path / "new")
    assert created and (tmp_path / "new").stat().st_mode & 0o777 == 0o600
    assert load_node_key(tmp_path / "new").secret == key.secret
    assert load_or_create_node_key(tmp_path / "new")[1] is False
    write_node_key(path, key)
    assert path.read_text() == key.secret.hex() + "\n"
    for bad in ("abc", "zz" * 32, "00" * 32, ""):
        path.write_text(bad)
        with pytest.raises(ConfigError, match="node key file"):
            load_node_key(path)
    with pytest.raises(ConfigError, match="does not exist"):
        load_node_key(tmp_path / "missing")


async def _echo_server(**kwargs) -> tuple[asyncio.Server, object, list[RlpxPeer]]:
    key = generate_private_key()
    peers: list[RlpxPeer] = []

    async def handler(peer: RlpxPeer) -> None:
        peers.append(peer)
        while True:
            message = await peer.recv()
            if message.payload == b"\xc1\x00":  # the test's "crash" command
                raise RuntimeError("handler bug")
            await peer.send("echo", message.code, message.payload)

    server = await listen("127.0.0.1", 0, key, [ECHO], handler, **kwargs)
    return server, key, peers


async def test_dial_listen_echo_and_clean_disconnect() -> None:
    server, key, peers = await _echo_server()
    port = server.sockets[0].getsockname()[1]
    try:
        client = await dial("127.0.0.1", port, public_key_of(key), generate_private_key(), [ECHO])
        assert client.remote_public_key == public_key_of(key)[1:]
        for code in range(4):
            await client.send("echo", code, b"\xc2\x01\x02")
            message = await asyncio.wait_for(client.recv(), 5)
            assert (message.code, message.payload) == (code, b"\xc2\x01\x02")
        await client.disconnect(DisconnectReason.QUITTING)
        ended = await asyncio.wait_for(peers[0].wait_closed(), 5)
        assert ended.reason is DisconnectReason.QUITTING and ended.remote
    finally:
        server.close()
        await server.wait_closed()


async def test_pings_keep_an_idle_session_alive_and_silence_times_out(caplog) -> None:
    server, key, peers = await _echo_server(ping_interval=0.05, read_timeout=0.4)
    port = server.sockets[0].getsockname()[1]
    try:
        client = await dial(
            "127.0.0.1",
            port,
            public_key_of(key),
            generate_private_key(),
            [ECHO],
            ping_interval=0.05,
            read_timeout=0.4,
        )
        await asyncio.sleep(1.0)  # > read_timeout, but pings flow both ways
        assert client.ended is None and peers[0].ended is None
        await client.send("echo", 1, b"\xc0")
        assert (await asyncio.wait_for(client.recv(), 5)).payload == b"\xc0"
        # A dialler that goes silent (stops reading, so it neither pings nor answers
        # pings) is dropped by the server's read timeout.
        silent = await dial(
            "127.0.0.1",
            port,
            public_key_of(key),
            generate_private_key(),
            [ECHO],
            ping_interval=0,
            read_timeout=10,
        )
        for task in silent._tasks:
            task.cancel()
        while len(peers) < 2:
            await asyncio.sleep(0.01)
        server_side = peers[1]
        ended = await asyncio.wait_for(server_side.wait_closed(), 5)
        assert ended.reason is DisconnectReason.READ_TIMEOUT and not ended.remote
        assert client.ended is None
        await client.disconnect()
    finally:
        server.close()
        await server.wait_closed()
    assert "disconnecting (read timeout)" in caplog.text


async def test_handler_crash_disconnects_only_that_peer(caplog) -> None:
    server, key, _ = await _echo_server()
    port = server.sockets[0].getsockname()[1]
    try:
        bad = await dial("127.0.0.1", port, public_key_of(key), generate_private_key(), [ECHO])
        good = await dial("127.0.0.1", port, public_key_of(key), generate_private_key(), [ECHO])
        await bad.send("echo", 0, b"\xc1\x00")
        with pytest.raises(PeerDisconnected) as info:
            await asyncio.wait_for(bad.recv(), 5)
        assert info.value.reason is DisconnectReason.SUBPROTOCOL_ERROR and info.value.remote
        await good.send("echo", 2, b"\xc0")
        assert (await asyncio.wait_for(good.recv(), 5)).code == 2
        await good.disconnect()
    finally:
        server.close()
        await server.wait_closed()
    assert "handler failed" in caplog.text


async def test_dialling_the_wrong_key_fails_cleanly(caplog) -> None:
    caplog.set_level(logging.INFO)
    server, _, _ = await _echo_server(handshake_timeout=1.0)
    port = server.sockets[0].getsockname()[1]
    try:
        with pytest.raises(PeerDisconnected):
            await dial(
                "127.0.0.1",
                port,
                public_key_of(generate_private_key()),
                generate_private_key(),
                [ECHO],
                handshake_timeout=1.0,
            )
    finally:
        server.close()
        await server.wait_closed()
    assert "cannot decrypt with this node's key" in caplog.text


async def test_no_shared_capability_is_refused_as_useless_peer() -> None:
    server, key, _ = await _echo_server()
    port = server.sockets[0].getsockname()[1]
    try:
        with pytest.raises(PeerDisconnected) as info:
            await dial(
                "127.0.0.1",
                port,
                public_key_of(key),
                generate_private_key(),
                [p2p.ProtocolSpec("other", 1, 1)],
            )
        assert info.value.reason is DisconnectReason.USELESS_PEER
    finally:
        server.close()
        await server.wait_closed()
