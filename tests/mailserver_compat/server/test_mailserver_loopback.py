"""The v1 mailserver and client over real loopback sockets.

Multi-page pulls in every request form with exact cursors; a dropped connection resumed
without loss or duplicates; and every kind of bad input (garbage before and during the
handshake, bad MAC, oversized frame, snappy bomb, truncated frame, invalid request, rate
limit) answered with a Disconnect reason or an error report, logged, while a second client
is still served.
"""

from __future__ import annotations

import asyncio
import logging
import os
import random

import pytest
import rlp
import snappy

from tests.helpers import wait_until
from waku_legacy.crypto.keccak import keccak256
from waku_legacy.crypto.secp256k1 import generate_private_key, public_key_of
from waku_legacy.mailserver_compat.client.mailserver_client import (
    HistoryQuery,
    MailServerClient,
    MailServerRequestError,
    RequestMode,
)
from waku_legacy.mailserver_compat.rlpx import p2p
from waku_legacy.mailserver_compat.rlpx.connection import Connection, State
from waku_legacy.mailserver_compat.rlpx.events import DisconnectReceived
from waku_legacy.mailserver_compat.rlpx.reasons import DisconnectReason
from waku_legacy.mailserver_compat.server.asyncio_server import MailServer
from waku_legacy.mailserver_compat.server.core import MailServerConfig
from waku_legacy.mailserver_compat.server.limits import V1Limits
from waku_legacy.mailserver_compat.storage.envelope_store import MemoryEnvelopeStore
from waku_legacy.mailserver_compat.waku_peer import connect
from waku_legacy.mailserver_compat.wire.bloom import topics_to_bloom
from waku_legacy.mailserver_compat.wire.envelope import Envelope
from waku_legacy.mailserver_compat.wire.pow import seal
from waku_legacy.mailserver_compat.wire.request import (
    MessagesRequest,
    encode_envelope_request,
    encode_plain_request,
)
from waku_legacy.mailserver_compat.wire.waku_protocol import (
    WAKU_CAPABILITY,
    MessageResponseReceived,
    PacketCode,
    RequestCompleteReceived,
    StatusOptions,
)

pytestmark = [pytest.mark.network, pytest.mark.timeout(60)]

T0 = 1_650_000_000
TOPICS = [bytes([0xA0, 0x01, 0x02, i]) for i in range(4)]


def _history(count: int, seed: int = 7) -> list[bytes]:
    rng = random.Random(seed)
    envelopes = []
    for i in range(count):
        sent = T0 + rng.randrange(0, 20_000)
        ttl = rng.choice([10, 50, 300])
        data = rng.randbytes(rng.randrange(20, 400))
        envelopes.append(Envelope(sent + ttl, ttl, TOPICS[i % 4], data, i).encode())
    return envelopes


def _db_key(raw: bytes) -> bytes:
    # Independent of the store code: sent time || keccak(rlp) || topic, per wire-facts §3.
    expiry, ttl, topic, _, _ = rlp.decode(raw)
    sent = int.from_bytes(expiry, "big") - int.from_bytes(ttl, "big")
    return sent.to_bytes(4, "big") + keccak256(raw) + topic


def _expected(history: list[bytes], lower: int, upper: int, topics) -> list[bytes]:
    selected = [
        raw
        for raw in history
        if lower <= int.from_bytes(_db_key(raw)[:4], "big") <= upper and _db_key(raw)[36:] in topics
    ]
    return sorted(selected, key=_db_key)


class ListWriter:
    def __init__(self) -> None:
        self.items: list[bytes] = []
        self.flushes = 0

    def append(self, raw: bytes) -> None:
        self.items.append(raw)

    def flush(self) -> None:
        self.flushes += 1


@pytest.fixture
def history() -> list[bytes]:
    return _history(2400)


async def _start(store, **config) -> MailServer:
    server = MailServer(
        store,
        generate_private_key(),
        MailServerConfig(**{"rate_limit": 0, **config}),
        read_timeout=2.0,
        handshake_timeout=2.0,
    )
    await server.start("127.0.0.1", 0)
    return server


async def _pull(server: MailServer, query: HistoryQuery, **kwargs) -> tuple[list[bytes], object]:
    writer = ListWriter()
    async with MailServerClient(server.enode, **kwargs) as client:
        result = await client.pull(query, writer)
    return writer.items, result


@pytest.mark.parametrize(
    ("mode", "encrypt_to_server"),
    [
        (RequestMode.PLAIN, False),
        (RequestMode.ENVELOPE, False),
        (RequestMode.ENVELOPE, True),
        (RequestMode.ENVELOPE_SPEC, False),
    ],
)
async def test_multi_page_pull_every_envelope_once_with_cursors(
    history, mode: str, encrypt_to_server: bool
) -> None:
    server = await _start(MemoryEnvelopeStore(history), max_message_size=64 * 1024)
    try:
        lower, upper = T0 + 1000, T0 + 15_000
        wanted = (TOPICS[0], TOPICS[2], TOPICS[3])
        query = HistoryQuery(
            lower, upper, topics=wanted, limit=300, mode=mode, encrypt_to_server=encrypt_to_server
        )
        items, result = await _pull(server, query)
    finally:
        await server.close()
    expected = _expected(history, lower, upper, wanted)
    assert len(expected) > 1000  # several pages
    assert items == expected  # exactly once each, in DB-key order
    pages = [expected[i : i + 300] for i in range(0, len(expected), 300)]
    # status-go cursors: the last envelope's DB key minus the topic when a page is full,
    # empty after a short page (and one empty page after an exactly full last page).
    expected_cursors = [_db_key(page[-1])[:36] for page in pages if len(page) == 300]
    expected_cursors.append(b"")
    assert result.cursors == expected_cursors
    assert result.pages == len(expected_cursors)
    assert result.last_envelope_hash == keccak256(expected[-1])
    assert result.reconnects == 0


async def test_bloom_request_serves_matching_topics(history) -> None:
    server = await _start(MemoryEnvelopeStore(history))
    try:
        bloom = topics_to_bloom([TOPICS[1]])
        items, _ = await _pull(server, HistoryQuery(T0, T0 + 30_000, bloom=bloom, limit=1000))
    finally:
        await server.close()
    # Bloom matching may admit other topics whose bits are covered; here none are.
    assert items == _expected(history, T0, T0 + 30_000, (TOPICS[1],))


async def test_dropped_connection_resumes_from_last_cursor(history) -> None:
    class FlakyServer(MailServer):
        requests = 0

        async def _handle_request(self, peer, payload):  # type: ignore[no-untyped-def]
            FlakyServer.requests += 1
            if FlakyServer.requests in (3, 4):
                # Send part of the page, then drop the TCP connection (twice in a row).
                prepared = self.core.prepare(peer.remote_public_key, payload)
                page = self.core.query(prepared)
                bundles, _ = self.core.response(prepared, page)
                await peer.send(
                    PacketCode.P2P_MESSAGE, rlp.encode([rlp.decode(b) for b in bundles[0]])
                )
                peer.rlpx._writer.transport.abort()
                return
            await super()._handle_request(peer, payload)

    server = FlakyServer(
        MemoryEnvelopeStore(history),
        generate_private_key(),
        MailServerConfig(rate_limit=0, max_message_size=16 * 1024),
    )
    await server.start()
    try:
        query = HistoryQuery(T0, T0 + 30_000, topics=tuple(TOPICS), limit=400)
        items, result = await _pull(server, query, retry_delay=0.05)
    finally:
        await server.close()
    assert result.reconnects == 2
    assert items == _expected(history, T0, T0 + 30_000, tuple(TOPICS))
    assert len(set(items)) == len(items) == len(history)


# -- raw RLPx clients for bad input ----------------------------------------------------------


class RawPeer:
    """A real socket with our own Connection, so that tests can write arbitrary bytes."""

    def __init__(self, reader, writer, connection: Connection) -> None:
        self.reader, self.writer, self.connection = reader, writer, connection

    @classmethod
    async def open(cls, server: MailServer, *, handshake: bool = True) -> RawPeer:
        reader, writer = await asyncio.open_connection(server.host, server.port)
        connection = Connection(
            generate_private_key(),
            [WAKU_CAPABILITY],
            remote_public_key=public_key_of(server.node_key),
        )
        peer = cls(reader, writer, connection)
        if handshake:
            writer.write(connection.initiate())
            while connection.state is not State.ESTABLISHED:
                data = await asyncio.wait_for(reader.read(65536), 5)
                assert data, "server closed during handshake"
                connection.receive_data(data)
                writer.write(connection.data_to_send())
        return peer

    async def read_disconnect(self) -> DisconnectReason | None:
        """Read until EOF; the Disconnect reason the server sent, if any."""
        reason = None
        while True:
            data = await asyncio.wait_for(self.reader.read(65536), 10)
            if not data:
                return reason
            for event in self.connection.receive_data(data):
                if isinstance(event, DisconnectReceived):
                    reason = event.reason

    def close(self) -> None:
        self.writer.close()


async def _second_client_succeeds(server: MailServer, history: list[bytes]) -> None:
    items, _ = await _pull(server, HistoryQuery(T0, T0 + 30_000, topics=(TOPICS[2],)))
    assert items == _expected(history, T0, T0 + 30_000, (TOPICS[2],))


@pytest.fixture
async def small_server(history):
    server = await _start(MemoryEnvelopeStore(history), max_message_size=64 * 1024)
    yield server
    await server.close()


async def test_garbage_before_handshake(small_server, history, caplog) -> None:
    caplog.set_level(logging.INFO)
    raw = await RawPeer.open(small_server, handshake=False)
    raw.writer.write(b"GET / HTTP/1.1\r\nHost: mailserver\r\n\r\n")
    assert await raw.read_disconnect() is None  # no keys yet: the socket is just closed
    await _second_client_succeeds(small_server, history)
    assert "over the 2048-byte limit" in caplog.text


async def test_garbage_during_handshake(small_server, history, caplog) -> None:
    raw = await RawPeer.open(small_server, handshake=False)
    raw.writer.write(raw.connection.initiate())
    ack = await asyncio.wait_for(raw.reader.read(65536), 5)
    raw.connection.receive_data(ack)  # we have the keys, but send garbage instead of Hello
    raw.connection.data_to_send()
    raw.writer.write(os.urandom(64))
    assert await raw.read_disconnect() is DisconnectReason.PROTOCOL_ERROR
    await _second_client_succeeds(small_server, history)
    assert "MAC mismatch" in caplog.text


async def test_bad_mac(small_server, history, caplog) -> None:
    raw = await RawPeer.open(small_server)
    frame = bytearray(raw.connection.send_message("waku", 0, StatusOptions().encode()))
    frame[40] ^= 0x80
    raw.writer.write(bytes(frame))
    assert await raw.read_disconnect() is DisconnectReason.PROTOCOL_ERROR
    await _second_client_succeeds(small_server, history)
    assert "RLPx frame body: MAC mismatch" in caplog.text


async def test_oversized_frame(small_server, history, caplog) -> None:
    raw = await RawPeer.open(small_server)
    frame = raw.connection.send_message("waku", 1, os.urandom(300 * 1024))  # limit is 64 KiB
    raw.writer.write(frame[:32])  # the header alone gets it refused
    assert await raw.read_disconnect() is DisconnectReason.PROTOCOL_ERROR
    await _second_client_succeeds(small_server, history)
    assert "over the" in caplog.text and "RLPx frame" in caplog.text


async def test_snappy_bomb(small_server, history, caplog) -> None:
    raw = await RawPeer.open(small_server)
    raw.connection.snappy = False  # write the bomb as the (compressed) payload itself
    bomb = snappy.compress(bytes(1 << 20))  # ~48 KiB on the wire: fits a frame
    assert len(bomb) < 64 * 1024
    raw.writer.write(raw.connection.send_message("waku", 1, bomb))
    assert await raw.read_disconnect() is DisconnectReason.PROTOCOL_ERROR
    await _second_client_succeeds(small_server, history)
    assert "declares 1048576 bytes decompressed" in caplog.text


async def test_truncated_frame_times_out_with_reason(small_server, history, caplog) -> None:
    raw = await RawPeer.open(small_server)
    frame = raw.connection.send_message("waku", 0, StatusOptions().encode())
    raw.writer.write(frame[: len(frame) - 5])  # the server waits for the rest...
    # ...while another client is served, then drops this one after read_timeout (2 s).
    await _second_client_succeeds(small_server, history)
    assert await raw.read_disconnect() is DisconnectReason.READ_TIMEOUT
    assert "no data for 2 s" in caplog.text


async def test_truncated_frame_then_close(small_server, history, caplog) -> None:
    caplog.set_level(logging.INFO)
    raw = await RawPeer.open(small_server)
    frame = raw.connection.send_message("waku", 0, StatusOptions().encode())
    raw.writer.write(frame[:20])
    raw.writer.close()
    await _second_client_succeeds(small_server, history)
    # the server notices the cut when its read fails: waited for, not a fixed pause
    await wait_until(lambda: "peer disconnected: network error" in caplog.text,
                     what="the cut connection logged")  # fmt: skip


async def _waku_peer(server: MailServer, **kwargs):
    return await connect(server.enode, generate_private_key(), **kwargs)


async def _complete(peer) -> object:
    while True:
        event = await asyncio.wait_for(peer.recv(), 5)
        if isinstance(event, RequestCompleteReceived):
            return event.complete


def _plain(request_id: bytes, **fields) -> bytes:
    values = dict(lower=T0, upper=T0 + 30_000, limit=10, cursor=b"", bloom=b"", topics=(TOPICS[0],))
    values.update(fields)
    return encode_plain_request(MessagesRequest(request_id=request_id, **values))


async def test_invalid_request_payloads(small_server, history, caplog) -> None:
    peer = await _waku_peer(small_server)
    try:
        # Over the limit: error report naming it, session kept.
        await peer.send_p2p_request(_plain(b"\x01" * 32, limit=5000))
        complete = await _complete(peer)
        assert complete.request_id == b"\x01" * 32
        assert "limit 5000 is over the maximum of 1000" in complete.error
        # Neither bloom nor topics.
        await peer.send_p2p_request(_plain(b"\x02" * 32, topics=()))
        assert "neither a bloom filter nor topics" in (await _complete(peer)).error
        # A request envelope nobody can open: reported under the envelope's hash.
        envelope = encode_envelope_request(
            MessagesRequest(b"\x00" * 32, T0, T0 + 10, 10, b"", b"", (TOPICS[0],)),
            sign_with=generate_private_key(),
            symmetric_key=b"\x09" * 32,
        )
        await peer.send_p2p_request(envelope.encode())
        complete = await _complete(peer)
        assert complete.request_id == envelope.hash()
        assert "failed to decrypt" in complete.error
        # A 7-item list with a bad field: error under its id.
        bad = rlp.encode([b"\x03" * 32, T0, T0 + 5, 10, b"short", b"", []])
        await peer.send_p2p_request(bad)
        assert "cursor" in (await _complete(peer)).error
        # Still served after all that.
        await peer.send_p2p_request(_plain(b"\x04" * 32))
        assert not (await _complete(peer)).failed
        # Unreadable (no request id at all): the session ends with SUBPROTOCOL_ERROR.
        await peer.send_p2p_request(b"\x83abc")
        with pytest.raises(Exception) as info:
            await _complete(peer)
        assert getattr(info.value, "reason", None) is DisconnectReason.SUBPROTOCOL_ERROR
        assert getattr(info.value, "remote", None) is True
    finally:
        await peer.disconnect()
    await _second_client_succeeds(small_server, history)
    assert "unreadable request" in caplog.text
    assert "refused: request is invalid" in caplog.text


async def test_rate_limit_error_reply_and_trusted_exemption(history, caplog) -> None:
    trusted_key = generate_private_key()
    server = await _start(
        MemoryEnvelopeStore(history),
        rate_limit=60.0,
        trusted_peers=frozenset({public_key_of(trusted_key)[1:]}),
        limits=V1Limits(request_burst=1),
    )
    try:
        peer = await _waku_peer(server)
        await peer.send_p2p_request(_plain(b"\x01" * 32))
        assert not (await _complete(peer)).failed
        await peer.send_p2p_request(_plain(b"\x02" * 32))
        complete = await _complete(peer)
        assert complete.request_id == b"\x02" * 32 and complete.error == "rate limit exceeded"
        await peer.disconnect()
        trusted = await connect(server.enode, trusted_key)
        for i in range(3):
            await trusted.send_p2p_request(_plain(bytes([i + 5]) * 32))
            assert not (await _complete(trusted)).failed
        await trusted.disconnect()
        # Another (untrusted) peer has its own budget.
        await _second_client_succeeds(server, history)
        # The client waits out a rate limit instead of failing.
        writer = ListWriter()
        async with MailServerClient(server.enode, rate_limit_wait=0.05, max_retries=2) as client:
            await client.pull(
                HistoryQuery(T0, T0 + 30_000, topics=(TOPICS[1],), limit=1000), writer
            )
            with pytest.raises(MailServerRequestError, match="rate limit"):
                await client.pull(HistoryQuery(T0, T0 + 30_000, topics=(TOPICS[1],)), writer)
    finally:
        await server.close()
    assert "rate limit exceeded" in caplog.text


async def test_live_envelopes_checked_deduplicated_and_sunk() -> None:
    received: list[bytes] = []

    async def sink(raw, envelope, peer_key) -> None:
        received.append(raw)

    key = generate_private_key()
    server = MailServer(
        MemoryEnvelopeStore(),
        key,
        MailServerConfig(rate_limit=0, min_pow=0.01, confirmations=True),
        sink=sink,
    )
    await server.start()
    try:
        import time

        now = int(time.time())
        good = seal(now + 30, 30, TOPICS[0], b"hello world" * 5, 0.01).encode()
        expired = seal(now - 100, 30, TOPICS[0], b"old", 0.01).encode()
        future = seal(now + 3600, 30, TOPICS[0], b"future", 0.01).encode()
        from waku_legacy.mailserver_compat.wire.pow import pow_of

        weak = next(
            e
            for e in (Envelope(now + 30, 30, TOPICS[0], b"x" * 200, n) for n in range(1000))
            if pow_of(e) < 0.01
        )
        weak_raw = weak.encode()
        peer = await _waku_peer(server)
        assert peer.state.pow_requirement == 0.01  # what the server advertised
        await peer.send_envelopes([good, expired, future, weak_raw, good])
        event = await asyncio.wait_for(peer.recv(), 5)
        assert isinstance(event, MessageResponseReceived)
        problems = {e.envelope_hash: e.description for e in event.response.errors}
        assert problems[keccak256(expired)] == "expired envelope"
        assert problems[keccak256(future)] == "envelope created in the future"
        assert problems[keccak256(weak_raw)] == "envelope with low PoW received"
        await peer.send_envelopes([good])  # duplicate from a later packet: ignored
        await asyncio.wait_for(peer.recv(), 5)
        # 0x7f from an untrusted peer is ignored.
        await peer.send(PacketCode.P2P_MESSAGE, rlp.encode([rlp.decode(good)]))
        await peer.send_p2p_request(_plain(b"\x01" * 32))
        await _complete(peer)
        await peer.disconnect()
    finally:
        await server.close()
    assert received == [good]


async def test_server_keeps_serving_when_a_peer_hangs_up_mid_response(history) -> None:
    server = await _start(MemoryEnvelopeStore(history), max_message_size=8 * 1024)
    try:
        peer = await _waku_peer(server)
        await peer.send_p2p_request(_plain(b"\x01" * 32, limit=1000, topics=tuple(TOPICS)))
        peer.rlpx._writer.transport.abort()
        await asyncio.sleep(0.05)
        await _second_client_succeeds(server, history)
    finally:
        await server.close()


async def test_hello_only_peer_without_status_is_dropped(history, caplog) -> None:
    server = await _start(MemoryEnvelopeStore(history))
    try:
        raw = await RawPeer.open(server)
        # A request before the waku status: subprotocol error.
        raw.writer.write(raw.connection.send_message("waku", PacketCode.P2P_REQUEST, b"\xc0"))
        assert await raw.read_disconnect() is DisconnectReason.SUBPROTOCOL_ERROR
        await _second_client_succeeds(server, history)
    finally:
        await server.close()
    assert "before status" in caplog.text
    assert p2p.P2P_VERSION == 5
