"""Issue 10 (v1 side): paging is never refused, floods are; live envelopes pass the v1 rules
and per-peer/per-address rates before they reach the store; connection caps; bounded work
per request. Everything over real RLPx sockets on loopback (127.0.0.x addresses stand for
distinct hosts)."""

from __future__ import annotations

import asyncio
import logging
import os
import random
import time
from typing import ClassVar

import pytest

from waku_legacy.crypto.keccak import keccak256
from waku_legacy.crypto.secp256k1 import generate_private_key, public_key_of
from waku_legacy.mailserver_compat.client.mailserver_client import (
    HistoryQuery,
    MailServerClient,
    RequestMode,
)
from waku_legacy.mailserver_compat.rlpx.connection import Connection, State
from waku_legacy.mailserver_compat.server.asyncio_server import MailServer
from waku_legacy.mailserver_compat.server.core import MailServerConfig
from waku_legacy.mailserver_compat.storage.envelope_store import (
    EnvelopeQuery,
    MemoryEnvelopeStore,
)
from waku_legacy.mailserver_compat.waku_peer import connect
from waku_legacy.mailserver_compat.wire.bloom import topics_to_bloom
from waku_legacy.mailserver_compat.wire.envelope import Envelope
from waku_legacy.mailserver_compat.wire.pow import pow_of, seal
from waku_legacy.mailserver_compat.wire.request import MessagesRequest, encode_plain_request
from waku_legacy.mailserver_compat.wire.waku_protocol import (
    WAKU_CAPABILITY,
    RequestCompleteReceived,
)

pytestmark = [pytest.mark.network, pytest.mark.timeout(120)]

T0 = 1_650_000_000
CHANNEL = bytes.fromhex("a1b2c3d4")
OTHER = bytes.fromhex("0f0e0d0c")


def _channel_history(count: int, *, other: int = 0, seed: int = 11) -> list[bytes]:
    rng = random.Random(seed)
    out = []
    for i in range(count + other):
        topic = CHANNEL if i < count else OTHER
        sent = T0 + rng.randrange(0, 5000)
        data = rng.randbytes(rng.randrange(30, 300))
        out.append(Envelope(sent + 30, 30, topic, data, i).encode())
    return out


async def _server(store, config: MailServerConfig | None = None, **kwargs) -> MailServer:
    server = MailServer(store, generate_private_key(), config, read_timeout=5.0, **kwargs)
    await server.start("127.0.0.1", 0)
    return server


async def _page_through(
    server: MailServer, query: HistoryQuery, *, local_host: str | None = None
) -> tuple[list[bytes], int]:
    """Follow cursors with no pause, as status-go's client does; any refusal fails."""
    got: list[bytes] = []
    cursor, pages = b"", 0
    client = (
        MailServerClient(server.enode, local_host=local_host)
        if local_host
        else (MailServerClient(server.enode))
    )
    async with client:
        while True:
            envelopes, complete = await client.request_page(query, cursor)
            assert not complete.failed, f"page {pages + 1} refused: {complete.error}"
            got.extend(envelopes)
            pages += 1
            cursor = complete.cursor
            if not cursor:
                return got, pages


# -- item 0: paging with the default configuration -----------------------------------------


@pytest.mark.parametrize(
    "mode", [RequestMode.PLAIN, RequestMode.ENVELOPE, RequestMode.ENVELOPE_SPEC]
)
async def test_default_config_pages_a_whole_channel_without_pauses(mode: str) -> None:
    history = _channel_history(300, other=100)
    server = await _server(MemoryEnvelopeStore(history))  # the default configuration
    try:
        query = HistoryQuery(T0, T0 + 6000, topics=(CHANNEL,), limit=7, mode=mode)
        # Two independent clients at once, each paging the channel at 7 a page.
        (first, pages), (second, _) = await asyncio.gather(
            _page_through(server, query), _page_through(server, query)
        )
    finally:
        await server.close()
    expected = sorted(
        (raw for raw in history if Envelope.decode(raw).topic == CHANNEL),
        key=lambda raw: (Envelope.decode(raw).sent_time, keccak256(raw)),
    )
    assert pages > 40
    for got in (first, second):
        assert len(got) == len(set(got)) == len(expected)  # every envelope exactly once
        assert got == expected


async def test_a_flood_of_fresh_requests_is_still_refused() -> None:
    from waku_legacy.mailserver_compat.server.limits import V1Limits

    history = _channel_history(50)
    server = await _server(MemoryEnvelopeStore(history))
    burst = V1Limits().request_burst
    try:
        peer = await connect(server.enode, generate_private_key())
        answered = refused = 0
        forged_cursor = os.urandom(36)  # never handed out: a fresh request, not a page
        for i in range(burst + 15):
            request = MessagesRequest(
                request_id=os.urandom(32), lower=T0, upper=T0 + 6000, limit=5,
                cursor=forged_cursor if i % 2 else b"", bloom=b"", topics=(CHANNEL,),
            )  # fmt: skip
            await peer.send_p2p_request(encode_plain_request(request))
            while True:
                event = await asyncio.wait_for(peer.recv(), 5)
                if isinstance(event, RequestCompleteReceived):
                    break
            if event.complete.failed:
                assert event.complete.error == "rate limit exceeded"
                refused += 1
            else:
                answered += 1
        await peer.disconnect()
    finally:
        await server.close()
    assert answered == burst and refused == 15
    assert server.refusals[("request", "peer_rate_limit")] == 15


async def test_new_node_keys_from_one_address_share_its_request_budget() -> None:
    from waku_legacy.mailserver_compat.server.limits import V1Limits

    limits = V1Limits(address_request_burst=4, address_request_rate=0.01)
    server = await _server(
        MemoryEnvelopeStore(_channel_history(20)), MailServerConfig(limits=limits)
    )
    query = HistoryQuery(T0, T0 + 6000, topics=(CHANNEL,), limit=1000)
    outcomes = []
    try:
        for _ in range(7):  # a fresh node key per request, all from 127.0.0.1
            async with MailServerClient(server.enode) as client:
                _, complete = await client.request_page(query, b"")
                outcomes.append(complete.error)
        # Another address has its own budget.
        async with MailServerClient(server.enode, local_host="127.0.0.2") as client:
            _, complete = await client.request_page(query, b"")
    finally:
        await server.close()
    assert outcomes == [""] * 4 + ["rate limit exceeded"] * 3
    assert not complete.failed
    assert server.refusals[("request", "address_rate_limit")] == 3


# -- item 5: bounded work per request -------------------------------------------------------


async def test_bloom_only_request_scans_a_bounded_number_of_rows() -> None:
    from waku_legacy.mailserver_compat.server.limits import V1Limits

    # 6000 rows of one topic, 40 of another spread among them.
    history = _channel_history(6000, other=40)

    class CountingStore(MemoryEnvelopeStore):
        scanned: ClassVar[list[int]] = []

        def scan(self, start, stop):
            count = 0
            for row in super().scan(start, stop):
                count += 1
                yield row
            CountingStore.scanned.append(count)

    store = CountingStore(history)
    server = await _server(store, MailServerConfig(limits=V1Limits(scan_limit=500)))
    try:
        query = HistoryQuery(T0, T0 + 6000, bloom=topics_to_bloom([OTHER]), limit=1000)
        got, pages = await _page_through(server, query)
    finally:
        await server.close()
    wanted = sorted(
        (raw for raw in history if Envelope.decode(raw).topic == OTHER),
        key=lambda raw: (Envelope.decode(raw).sent_time, keccak256(raw)),
    )
    assert got == wanted  # the partial pages add up to the whole answer, each once
    assert pages >= len(history) // 500
    # Each request examined at most the scan limit (+1 for the generator's look-ahead).
    assert max(CountingStore.scanned) <= 501


def _db_key(raw: bytes) -> bytes:
    envelope = Envelope.decode(raw)
    return envelope.sent_time.to_bytes(4, "big") + keccak256(raw) + envelope.topic


def _page_store(source, bloom: bytes, max_scan: int) -> tuple[list[bytes], int]:
    cursor, got, requests = b"", [], 0
    while True:
        page = source.query(
            EnvelopeQuery(T0, T0 + 6000, bloom=bloom, limit=1000, cursor=cursor, max_scan=max_scan)
        )
        requests += 1
        got += [raw for _, raw in page.envelopes]
        if page.partial:
            assert len(page.next_cursor) == 36
        cursor = page.next_cursor
        if not cursor:
            return got, requests


def _backends(tmp_path, history, postgres_dsn):
    from waku_legacy.mailserver_compat.storage.envelope_store import (
        V2StoreSource,
        open_envelope_store,
    )
    from waku_legacy.mailserver_compat.storage.postgres import PostgresEnvelopeStore
    from waku_legacy.store import StoredMessage, open_store

    yield MemoryEnvelopeStore(history)
    store = open_store(f"sqlite:///{tmp_path / 'store.sqlite3'}")
    store.insert_messages(
        StoredMessage(
            message_hash=keccak256(b"v2" + raw),
            pubsub_topic="/waku/2/rs/16/32",
            content_topic="/waku/1/0x" + Envelope.decode(raw).topic.hex() + "/rfc26",
            payload=Envelope.decode(raw).data,
            version=1,
            timestamp=Envelope.decode(raw).sent_time * 10**9,
            envelope=raw,
            db_key=_db_key(raw),
        )
        for raw in history
    )
    yield V2StoreSource(store, batch=64)
    with PostgresEnvelopeStore(postgres_dsn, create_schema=True) as db:
        from waku_legacy.mailserver_compat.wire.bloom import topic_to_bloom

        db._conn.execute("DELETE FROM envelopes")
        db._conn.commit()
        db.insert_rows(
            (_db_key(r), r, _db_key(r)[36:], topic_to_bloom(_db_key(r)[36:])) for r in history
        )
    yield open_envelope_store("mailserver+" + postgres_dsn)


@pytest.mark.postgres
def test_store_backends_answer_partial_pages_at_the_scan_limit(tmp_path, postgres_dsn) -> None:
    history = _channel_history(900, other=9)
    bloom = topics_to_bloom([OTHER])
    wanted = sorted(r for r in history if Envelope.decode(r).topic == OTHER)
    for source in _backends(tmp_path, history, postgres_dsn):
        try:
            query = EnvelopeQuery(T0, T0 + 6000, bloom=bloom, limit=1000, max_scan=100)
            first = source.query(query)
            assert first.partial and len(first.next_cursor) == 36, type(source).__name__
            got, requests = _page_store(source, bloom, 100)
            assert sorted(got) == wanted and len(got) == len(set(got)), type(source).__name__
            assert requests >= 9
            # Without a bound (or a bound over the table) it is one page, as before.
            whole = source.query(EnvelopeQuery(T0, T0 + 6000, bloom=bloom, limit=1000))
            assert sorted(raw for _, raw in whole.envelopes) == wanted and not whole.partial
        finally:
            close = getattr(source, "close", None)
            if close is not None:
                close()


# -- item 2: live envelopes -----------------------------------------------------------------


async def test_live_envelopes_must_pass_the_v1_rules_before_the_sink(caplog) -> None:
    caplog.set_level(logging.INFO)
    stored = MemoryEnvelopeStore()
    hooked: list[tuple[str, str]] = []

    def sink(raw, envelope, peer_key) -> None:
        stored.add(raw)

    server = await _server(
        MemoryEnvelopeStore(),
        MailServerConfig(min_pow=0.002, max_message_size=8192),
        sink=sink,
        on_refusal=lambda kind, code: hooked.append((kind, code)),
    )
    now = int(time.time())
    good = seal(now + 20, 20, CHANNEL, b"hello" * 20, 0.002).encode()
    # ttl 0: infinite PoW under Go's float division, for free.
    zero_ttl = Envelope(now + 5, 0, CHANNEL, b"spam" * 1000, 1).encode()
    far_future = seal(now + 3600 + 20, 20, CHANNEL, b"later", 0.002).encode()
    wrapped = Envelope(5, 10, CHANNEL, b"wrap", 3).encode()  # expiry < ttl: sent wraps
    expired = seal(now - 30, 20, CHANNEL, b"old", 0.002).encode()
    weak = next(
        e.encode()
        for e in (Envelope(now + 20, 20, CHANNEL, b"w" * 300, n) for n in range(1000))
        if pow_of(e) < 0.002
    )
    # Sent 8 s ahead: status-go recomputes its PoW over ttl + 9 s, below the requirement.
    ahead = next(
        e.encode()
        for e in (Envelope(now + 8 + 10, 10, CHANNEL, b"a" * 200, n) for n in range(1 << 16))
        if 0.002 <= pow_of(e) and pow_of(e, extra_ttl=9) < 0.002
    )
    try:
        peer = await connect(server.enode, generate_private_key())
        for raw in (good, zero_ttl, far_future, wrapped, expired, weak, ahead):
            await peer.send_envelopes([raw])
        for _ in range(100):
            if server.stats["live_accepted"] + server.stats["live_rejected"] >= 7:
                break
            await asyncio.sleep(0.02)
        await peer.disconnect()
    finally:
        await server.close()
    assert stored._keys and list(stored._values.values()) == [good]
    codes = sorted(code for kind, code in hooked if kind == "live")
    assert codes == sorted(["zero_ttl", "in_future", "in_future", "expired", "low_pow", "low_pow"])
    assert server.stats["refused_live_zero_ttl"] == 1
    assert "live refused" in caplog.text and "envelope with zero TTL" in caplog.text


async def test_a_flood_of_refusals_is_counted_whole_and_logged_sparingly(caplog) -> None:
    """Under a flood every refusal is counted, but one peer's refusals of one kind and
    reason give one log line per 10 s, not one per envelope (a flood must not fill disks)."""
    caplog.set_level(logging.INFO)
    server = await _server(MemoryEnvelopeStore(), MailServerConfig(), sink=lambda *a: None)
    now = int(time.time())
    spam = [Envelope(now + 5, 0, CHANNEL, b"spam %d" % i, 1).encode() for i in range(150)]
    try:
        peer = await connect(server.enode, generate_private_key())
        await peer.send_envelopes(spam)
        for _ in range(200):
            if server.stats.get("refused_live_zero_ttl", 0) >= 150:
                break
            await asyncio.sleep(0.02)
        await peer.disconnect()
    finally:
        await server.close()
    assert server.stats["refused_live_zero_ttl"] == 150
    assert server.refusals[("live", "zero_ttl")] == 150
    lines = [r for r in caplog.records if "live refused" in r.getMessage()]
    assert len(lines) == 1


async def test_live_floods_are_limited_per_peer_and_per_address() -> None:
    from waku_legacy.mailserver_compat.server.limits import V1Limits

    stored = MemoryEnvelopeStore()
    limits = V1Limits(live_burst=30, live_rate=0.01, address_live_burst=45,
                      address_live_rate=0.01)  # fmt: skip
    server = await _server(
        MemoryEnvelopeStore(),
        MailServerConfig(min_pow=0.0, limits=limits),
        sink=lambda raw, envelope, key: stored.add(raw),
    )
    now = int(time.time())

    def spam(n: int, tag: bytes) -> list[bytes]:
        return [Envelope(now + 20, 20, CHANNEL, tag + i.to_bytes(4, "big") * 100, 0).encode()
                for i in range(n)]  # fmt: skip

    async def flood(envelopes: list[bytes], local_host: str | None = None) -> None:
        peer = await connect(server.enode, generate_private_key(), local_host=local_host)
        for start in range(0, len(envelopes), 50):
            await peer.send_envelopes(envelopes[start : start + 50])
        before = -1
        while before != server.stats["live_accepted"] + server.stats["live_rejected"]:
            before = server.stats["live_accepted"] + server.stats["live_rejected"]
            await asyncio.sleep(0.1)
        await peer.disconnect()

    try:
        await flood(spam(200, b"a"))  # one peer: its burst
        assert len(stored) == 30
        await flood(spam(200, b"b"))  # a new key from the same address: what is left there
        assert len(stored) == 45
        await flood(spam(10, b"c"), local_host="127.0.0.3")  # another address: served
        assert len(stored) == 55
    finally:
        await server.close()
    assert server.refusals[("live", "peer_rate_limit")] == 170
    assert server.refusals[("live", "address_rate_limit")] == 185


# -- item 5: connection caps ----------------------------------------------------------------


async def _read_or_closed(reader: asyncio.StreamReader, timeout: float) -> bytes:
    """Bytes read, or b"" when the server closed (or reset) the connection."""
    try:
        return await asyncio.wait_for(reader.read(65536), timeout)
    except ConnectionResetError:
        return b""


async def _handshake(server: MailServer, local_host: str = "127.0.0.1"):
    reader, writer = await asyncio.open_connection(
        server.host, server.port, local_addr=(local_host, 0)
    )
    connection = Connection(
        generate_private_key(), [WAKU_CAPABILITY], remote_public_key=public_key_of(server.node_key)
    )
    writer.write(connection.initiate())
    while connection.state is not State.ESTABLISHED:
        data = await _read_or_closed(reader, 5)
        if not data:
            writer.close()
            return None
        connection.receive_data(data)
        writer.write(connection.data_to_send())
    return writer


async def test_connection_caps_per_address_and_in_total_close_before_the_handshake() -> None:
    from waku_legacy.mailserver_compat.server.limits import V1Limits

    limits = V1Limits(max_peers=5, max_peers_per_address=3, max_pending_handshakes=2,
                      handshake_timeout=1.0)  # fmt: skip
    server = await _server(MemoryEnvelopeStore(), MailServerConfig(limits=limits))
    writers = []
    try:
        for _ in range(3):
            writers.append(await _handshake(server))
        assert all(writers)
        assert await _handshake(server) is None  # a 4th from 127.0.0.1: closed at once
        writers.append(await _handshake(server, "127.0.0.2"))
        writers.append(await _handshake(server, "127.0.0.3"))
        assert all(writers)
        assert await _handshake(server, "127.0.0.4") is None  # 5 peers: full
        assert server.refusals[("connection", "too_many_from_address")] == 1
        assert server.refusals[("connection", "too_many_peers")] == 1
        for writer in writers:
            writer.close()
        await asyncio.sleep(0.3)
        # Stalled handshakes: two are held (until the handshake timeout), a third refused.
        stalled = [await asyncio.open_connection(server.host, server.port, local_addr=(h, 0))
                   for h in ("127.0.0.5", "127.0.0.6", "127.0.0.7")]  # fmt: skip
        reader = stalled[2][0]
        assert await _read_or_closed(reader, 2) == b""
        assert server.refusals[("connection", "too_many_handshakes")] == 1
        started = time.monotonic()
        assert await _read_or_closed(stalled[0][0], 5) == b""  # timed out
        assert time.monotonic() - started < 2.5
        await asyncio.sleep(0.2)
        ok = await _handshake(server, "127.0.0.8")  # slots are free again
        assert ok is not None
        ok.close()
        for _, writer in stalled:
            writer.close()
    finally:
        await server.close()


def test_validate_live_envelope_size_rule_is_status_go_size() -> None:
    from waku_legacy.mailserver_compat.server.core import validate_live_envelope

    now = int(time.time())
    for length, code in ((1000 - 20, None), (1000 - 19, "oversized")):
        envelope = Envelope(now + 20, 20, CHANNEL, b"x" * length, 0)
        refusal = validate_live_envelope(
            envelope.encode(), envelope, now=now, min_pow=0, max_message_size=1000
        )
        assert (refusal and refusal.code) == code


async def test_stalled_handshakes_and_reconnect_loops_from_one_address_are_capped() -> None:
    from waku_legacy.mailserver_compat.server.limits import V1Limits

    limits = V1Limits(max_pending_handshakes_per_address=2, address_connect_rate=0.01,
                      address_connect_burst=5, handshake_timeout=3.0)  # fmt: skip
    server = await _server(MemoryEnvelopeStore(), MailServerConfig(limits=limits))
    try:
        stalled = [await asyncio.open_connection(server.host, server.port, local_addr=(h, 0))
                   for h in ("127.0.0.9", "127.0.0.9", "127.0.0.9")]  # fmt: skip
        assert await _read_or_closed(stalled[2][0], 2) == b""  # the third: closed at once
        assert server.refusals[("connection", "too_many_handshakes_from_address")] == 1
        # Others still get in while those two stall.
        writer = await _handshake(server, "127.0.0.10")
        assert writer is not None
        writer.close()
        for _ in range(4):  # 4 more connections from .10 (5 in all): the burst
            writer = await _handshake(server, "127.0.0.10")
            assert writer is not None
            writer.close()
        assert await _handshake(server, "127.0.0.10") is None  # reconnecting in a loop
        assert server.refusals[("connection", "connecting_too_often")] == 1
        for _, w in stalled:
            w.close()
    finally:
        await server.close()


# -- configuration ----------------------------------------------------------------------------


def test_limits_from_config_and_cli_with_errors_naming_the_key() -> None:
    from waku_legacy.errors import ConfigError
    from waku_legacy.limits import address_key
    from waku_legacy.mailserver_compat.server.limits import V1Limits

    limits = V1Limits.from_mapping({"max_peers": 50, "live_rate": 2.5, "scan_limit": 100})
    assert (limits.max_peers, limits.live_rate, limits.scan_limit) == (50, 2.5, 100)
    with pytest.raises(ConfigError, match="'max_peers' must be an integer"):
        V1Limits.from_mapping({"max_peers": 0})
    with pytest.raises(ConfigError, match="unknown key"):
        V1Limits.from_mapping({"max_peer": 3})
    assert address_key("2001:db8::1") == address_key("2001:db8::ffff") == "2001:db8::/64"
    assert address_key("::ffff:10.0.0.1") == "10.0.0.1"


def test_v1_serve_limit_options_are_checked(tmp_path, capsys) -> None:
    from waku_legacy.cli import main

    args = ["v1", "serve", "--store", "memory:", "--listen", "127.0.0.1:0",
            "--node-key-file", str(tmp_path / "nodekey")]  # fmt: skip
    assert main([*args, "--max-peers-per-address", "0"]) == 2
    assert "--max-peers-per-address must be at least 1" in capsys.readouterr().err


def test_an_rlpx_session_does_not_keep_the_frames_it_sent_or_received() -> None:
    # The frame MACs' keccak states used to keep every byte they absorbed (eth-hash's
    # preimage object), so a long session held all its traffic: 82 MiB after the load run.
    import gc
    import tracemalloc

    server_key = generate_private_key()
    client = Connection(generate_private_key(), [WAKU_CAPABILITY],
                        remote_public_key=public_key_of(server_key))  # fmt: skip
    server = Connection(server_key, [WAKU_CAPABILITY])
    server.receive_data(client.initiate())
    client.receive_data(server.data_to_send())
    server.receive_data(client.data_to_send())
    assert client.state is State.ESTABLISHED and server.state is State.ESTABLISHED
    payload = os.urandom(16 * 1024)
    tracemalloc.start()
    gc.collect()
    before = tracemalloc.get_traced_memory()[0]
    for _ in range(1000):  # 16 MB each way
        server.receive_data(client.send_message("waku", 1, payload))
        client.receive_data(server.send_message("waku", 1, payload))
    gc.collect()
    retained = tracemalloc.get_traced_memory()[0] - before
    tracemalloc.stop()
    assert retained < 1_000_000, f"{retained} bytes retained after 32 MB of frames"


async def test_a_peer_sending_faster_than_it_is_served_is_slowed_not_buffered() -> None:
    # The handler is stuck (a sink that never returns); the peer keeps sending. The server
    # stops reading the socket once a few messages wait (TCP backpressure) instead of
    # queueing everything the peer sends.
    from waku_legacy.mailserver_compat.rlpx.asyncio_transport import MAX_QUEUED_MESSAGES

    release = asyncio.Event()

    async def stuck_sink(raw, envelope, peer_key) -> None:
        await release.wait()

    server = await _server(MemoryEnvelopeStore(), MailServerConfig(min_pow=0.0), sink=stuck_sink)
    now = int(time.time())
    try:
        peer = await connect(server.enode, generate_private_key())

        async def flood() -> int:
            sent = 0
            for _ in range(2000):
                data = os.urandom(8000)  # 8 KB envelopes (incompressible), 16 MB in all
                await peer.send_envelopes([Envelope(now + 20, 20, CHANNEL, data, 0).encode()])
                sent += 1
            return sent

        task = asyncio.create_task(flood())
        await asyncio.sleep(2.0)
        (served,) = server.peers
        queued = served.rlpx._messages.qsize()
        # At most the cap plus what one 64 KiB socket read held.
        assert queued <= MAX_QUEUED_MESSAGES + 9, queued
        assert not task.done()  # the sender is held by TCP, not absorbed by the server
        task.cancel()
        release.set()
        peer.rlpx._writer.transport.abort()
    finally:
        release.set()
        await server.close()
