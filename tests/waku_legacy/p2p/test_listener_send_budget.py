"""The native listener against a dialler written apart from the project (issue 37): Noise
XX on the ``noiseprotocol`` package, multistream-select, yamux and the HTTP upgrade by hand
(tests/p2p_attacks.py ``RawLibp2p``), from 127.0.0.2 over real loopback sockets, an honest
client from 127.0.0.1 beside it. The five failures the issue found, each a test here:

1. a peer that reads TCP but never grants yamux window, echoing megabytes on ping;
2. ... asking for answers larger than the window on many streams;
3. a ``/ws`` upgrade whose Host header holds bytes 0x80-0xFF (wsproto's UnicodeError);
4. a Noise identity key on a curve ``cryptography`` does not know (UnsupportedAlgorithm);
5. failed store queries, one WARNING line each with the peer's request id;

and RSA identity keys with an unusual exponent or modulus size (refused, counted), while an
RSA-2048 key with e = 65537 (what go-libp2p generates) still completes its handshake."""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import trio

from tests.p2p_attacks import (
    PING,
    RawLibp2p,
    connect_from,
    ecdsa_key_on_unknown_curve,
    frame_of,
    libp2p_public_key,
    ms_line,
    pb_bytes,
    rsa_key,
    rss_bytes,
    tcp_target,
    varint,
    websocket_upgrade,
)
from tests.p2p_pylibp2p.client import P2PClient
from tests.waku_legacy.p2p.test_listener_hostile import ECHO, MB, address_of, honest_queries
from waku_legacy.bridge.logs import fields
from waku_legacy.p2p.keys import ephemeral_key_pair
from waku_legacy.p2p.limits import HostLimits, ListenerLimits
from waku_legacy.p2p.transport.native import NativeListener

pytestmark = pytest.mark.network

BIG = "/test/big/1.0.0"
ANSWER_BYTES = 2 * MB


@pytest.fixture
def make_native() -> Iterator[Callable[..., NativeListener]]:
    started: list[NativeListener] = []

    def make(
        limits: ListenerLimits | None = None,
        listen: tuple[str, ...] = ("/ip4/127.0.0.1/tcp/0",),
        protocols: dict | None = None,
    ) -> NativeListener:
        listener = NativeListener(
            ephemeral_key_pair(),
            list(listen),
            protocols
            or {
                ECHO: (lambda body, origin: b"echo:" + body, None),
                BIG: (lambda body, origin: b"x" * ANSWER_BYTES, None),
            },
            cluster_id=16,
            shards=[32],
            limits=limits or ListenerLimits(),
            extra=fields,  # as the bridge logs: its JSON lines carry the fields
        )
        listener.start_blocking()
        started.append(listener)
        return listener

    yield make
    for listener in started:
        assert listener.stop_blocking()


def attacker(listener: NativeListener) -> RawLibp2p:
    peer = RawLibp2p(tcp_target(address_of(listener)))
    peer.noise()
    peer.yamux()
    return peer


def test_ping_echoes_only_what_the_peers_window_takes(make_native) -> None:
    listener = make_native()
    honest_queries(listener, 2)
    before = rss_bytes()
    peer = attacker(listener)
    sid = peer.open_stream(PING)
    offered = 16 * MB
    chunk = b"p" * 65536
    deadline = time.monotonic() + 20
    try:
        # within the window the server grants (it reads ping bytes at once): never a
        # protocol error of ours; it is the echo the peer never makes room for
        while peer.sent[sid] < offered and sid not in peer.rst and time.monotonic() < deadline:
            if peer.closed:
                break
            room = min(peer.credit(sid), len(chunk))
            if room > 0:
                peer.send(sid, chunk[:room])
            else:
                time.sleep(0.005)
        reset = peer.wait(lambda: sid in peer.rst, 3.0)
        grown = rss_bytes() - before
        latencies = honest_queries(listener, 3)
    finally:
        peer.close()
    stats = listener.stats()
    print(f"ping: sent {peer.sent[sid] / MB:.2f} MB, echoed {peer.data.get(sid, 0)} B, "
          f"RSS +{grown / MB:.1f} MB, {stats}")  # fmt: skip
    assert reset, "the ping stream was not reset: its echoes wait without bound"
    # what came back fits in the window we never granted more of (the multistream answer
    # and echoes within 256 KiB)
    assert peer.data.get(sid, 0) <= 256 * 1024
    assert peer.sent[sid] < 2 * MB  # the stream ended soon after the window
    assert stats["send_budget_exceeded"] == 1
    assert grown < 8 * MB
    assert max(latencies) < 10.0


def test_answers_a_peer_never_makes_room_for_are_bounded_and_expire(make_native) -> None:
    """Twelve 2 MiB answers asked for on one connection whose peer never sends a window
    update: the first waits (an answer is in memory anyway), the others wait while what waits
    stays within the send budget (4 MiB) and are refused past it; a stream is reset once its
    window stayed shut for write_timeout."""
    limits = ListenerLimits(
        host=HostLimits(max_buffered_bytes=4 * MB), write_timeout=2.0, idle_timeout=20.0
    )
    listener = make_native(limits)
    honest_queries(listener, 2)
    before = rss_bytes()
    peer = attacker(listener)
    peak = queued = 0
    try:
        streams = [peer.open_stream(BIG, frame_of(b"page")) for _ in range(12)]
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline and not set(streams) <= peer.rst:
            peak = max(peak, rss_bytes() - before)
            waiting = [getattr(c.conn, "queued", 0) for c in list(listener._live) if c.conn]
            queued = max(queued, sum(waiting))
            time.sleep(0.02)
        latencies = honest_queries(listener, 3)
    finally:
        peer.close()
    stats = listener.stats()
    print(f"pages: reset {sorted(peer.rst)}, data {peer.data}, RSS peak +{peak / MB:.1f} MB, "
          f"queued at most {queued / MB:.2f} MB, {stats}")  # fmt: skip
    assert set(streams) <= peer.rst, "answers wait without bound for a window never granted"
    # refused while another waited, or reset after write_timeout: each answer once
    assert stats["send_budget_exceeded"] + stats["send_timeout"] == 12
    assert stats["send_timeout"] >= 1
    # each stream got at most its 256 KiB window; what waited stayed within the budget
    assert all(peer.data.get(sid, 0) <= 256 * 1024 for sid in streams)
    assert 0 < queued <= 4 * MB
    assert peak < 40 * MB  # 12 answers waiting: 48 MB and more
    assert max(latencies) < 10.0


@pytest.mark.parametrize("muxer", ["yamux", "mplex"])
def test_an_honest_client_paging_large_answers_at_full_speed_is_answered(
    make_native, muxer: str
) -> None:
    """The send budget never refuses a client that takes its answers: 2 MiB answers, one
    after the other, over one connection (a budget of 1 MiB, below each answer); mplex's
    paced sending keeps up (it sends more each time the socket drains)."""
    limits = ListenerLimits(host=HostLimits(max_buffered_bytes=1 * MB), write_timeout=2.0)
    listener = make_native(limits)

    async def main() -> list[int]:
        async with P2PClient.dial(address_of(listener), muxers=(muxer,)) as client:
            return [len(await client.request(BIG, b"page")) for _ in range(8)]

    assert trio.run(main) == [ANSWER_BYTES] * 8
    stats = listener.stats()
    assert stats["requests_answered"] == 8
    assert "send_budget_exceeded" not in stats and "send_timeout" not in stats


def _lines(out, logger: str = "waku_legacy") -> list[dict]:
    return [
        line
        for line in map(json.loads, out.getvalue().splitlines())
        if line["logger"].startswith(logger)
    ]


def test_non_ascii_websocket_headers_are_a_counted_refusal_logged_once(
    make_native, json_logs
) -> None:
    listener = make_native(listen=("/ip4/127.0.0.1/tcp/0/ws",))
    ws = next(a for a in listener.multiaddrs if "/ws/" in a)
    cycles = 30
    for n in range(cycles):
        with connect_from("127.0.0.2", tcp_target(ws)) as sock:
            sock.sendall(websocket_upgrade(b"\xff\xfe.example" if n % 2 else b"b\xe9cher.de"))
            sock.settimeout(5)
            while sock.recv(4096):  # until the server closes it
                pass
    time.sleep(0.3)
    honest_queries(listener, 2, ws)
    stats = listener.stats()
    ours = _lines(json_logs)
    print(f"/ws non-ASCII Host: {stats}, {ours}")
    assert stats["connection_error"] == cycles
    assert "internal_errors" not in stats
    assert not [line for line in ours if line["level"] == "error"], ours
    assert len(ours) == 1 and ours[0]["msg"] == "libp2p connection error", ours
    assert ours[0]["peer"] == "127.0.0.2"  # whom to block
    assert ours[0]["error_type"] == "WebSocketError"


def handshake_with(listener: NativeListener, key: bytes, signature: bytes = b"\x01" * 64) -> bool:
    """A Noise handshake whose message 3 carries ``key`` (and ``signature``): whether the
    server closed the connection after it."""
    peer = RawLibp2p(tcp_target(address_of(listener)), identity=(key, None))
    try:
        peer.noise(signature=signature)
        return peer.closed_by_server(5.0)
    finally:
        peer.close()


def test_an_identity_key_cryptography_does_not_know_is_a_counted_refusal(
    make_native, json_logs
) -> None:
    listener = make_native()
    cycles = 30
    closed = [handshake_with(listener, ecdsa_key_on_unknown_curve()) for _ in range(cycles)]
    honest_queries(listener, 2)
    stats = listener.stats()
    ours = _lines(json_logs)
    print(f"unknown curve: {stats}, {ours}")
    assert all(closed)
    assert stats["unsupported_key"] == cycles
    assert "internal_errors" not in stats
    assert not [line for line in ours if line["level"] == "error"], ours
    assert len(ours) == 1 and ours[0]["msg"] == "libp2p unsupported key", ours
    assert ours[0]["peer"] == "127.0.0.2"


def test_rsa_identity_keys_out_of_libp2ps_bounds_are_refused_before_any_check(
    make_native,
) -> None:
    """RSA-3072 with a 3071-bit public exponent (11x a secp256k1 handshake's CPU before),
    e = 2^31 + 1, RSA-1024 and RSA-8200: refused as unsupported keys; an RSA-2048 key
    with e = 65537, signed for real, completes the handshake."""
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import padding, rsa

    listener = make_native()
    refused = {
        "e of 3071 bits": rsa_key(3072, (1 << 3070) + 1),
        "e = 2^31 + 1": rsa_key(2048, 2**31 + 1),
        "1024 bits": rsa_key(1024, 65537),
        "8200 bits": rsa_key(8200, 65537),
    }
    started = time.process_time()
    closed = {name: handshake_with(listener, key) for name, key in refused.items()}
    assert all(closed.values()), closed
    assert listener.stats()["unsupported_key"] == len(refused)

    private = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    der = private.public_key().public_bytes(
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    )

    def sign(message: bytes) -> bytes:
        return private.sign(message, padding.PKCS1v15(), hashes.SHA256())

    peer = RawLibp2p(tcp_target(address_of(listener)), identity=(libp2p_public_key(0, der), sign))
    try:
        peer.noise()
        peer.yamux()
        sid = peer.open_stream(ECHO, frame_of(b"rsa"))
        assert peer.wait(lambda: sid in peer.fin, 5.0), (peer.data, peer.rst, peer.closed)
    finally:
        peer.close()
    stats = listener.stats()
    print(f"RSA: {stats}, {time.process_time() - started:.2f} CPU-s")
    assert stats["unsupported_key"] == len(refused)
    assert stats["requests_answered"] == 1


def _store_request(request_id: str, cursor: bytes) -> bytes:
    """A store v3 StoreQueryRequest (13/WAKU2-STORE): request_id = 1, include_data = 2,
    pubsub_topic = 10, content_topics = 11, pagination_cursor = 51."""
    return (
        pb_bytes(1, request_id.encode())
        + bytes((0x10, 1))
        + pb_bytes(10, b"/waku/2/rs/16/32")
        + pb_bytes(11, b"/app/1/chat/proto")
        + pb_bytes(51, cursor)
    )


def test_failed_store_queries_are_logged_once_without_the_peers_fields(
    make_native, json_logs, tmp_path: Path
) -> None:
    from waku_legacy.bridge.p2p import store_protocols
    from waku_legacy.bridge.store_threads import ThreadLocalStore
    from waku_legacy.p2p.store_client import decode_response
    from waku_legacy.store.protocol import STORE_V3_CODEC

    stores = ThreadLocalStore(f"sqlite:///{tmp_path / 'store.db'}")
    listener = make_native(protocols=store_protocols(stores, None))
    count = 30

    async def main() -> list[int]:
        statuses = []
        async with P2PClient.dial(address_of(listener)) as client:
            for n in range(count):
                body = _store_request(f"ATTACKER-{n}-\u202e", bytes(32))  # all-zero cursor
                answer = decode_response(await client.request(STORE_V3_CODEC, body))
                statuses.append(answer.status_code)
        return statuses

    try:
        statuses = trio.run(main)
    finally:
        stores.close()
    lines = _lines(json_logs)
    print(f"failed store queries: {set(statuses)}, {lines}")
    assert len(statuses) == count and 200 not in statuses  # each refused, each answered
    failed = [line for line in lines if line["msg"] == "libp2p store query failed"]
    assert len(failed) == 1, failed
    assert "ATTACKER" not in json_logs.getvalue()
    assert failed[0]["level"] == "warning"


def test_failed_store_queries_are_logged_once_per_kind_and_source_address(
    make_native, json_logs, tmp_path: Path
) -> None:
    """127.0.0.1 and 127.0.0.2 each send six queries with an all-zero cursor and six that
    do not decode, each on a new connection (a new peer id each time): one line per kind
    and address (four), each naming the address and a peer id, none the peer's fields."""
    from tests.p2p_attacks import raw_query
    from waku_legacy.bridge.p2p import store_protocols
    from waku_legacy.bridge.store_threads import ThreadLocalStore
    from waku_legacy.p2p.store_client import decode_response
    from waku_legacy.store.protocol import STORE_V3_CODEC

    stores = ThreadLocalStore(f"sqlite:///{tmp_path / 'store.db'}")
    listener = make_native(protocols=store_protocols(stores, None))
    target = tcp_target(address_of(listener))
    statuses = []
    try:
        for source in ("127.0.0.1", "127.0.0.2"):
            for n in range(6):
                zero_cursor = _store_request(f"ATTACKER-{n}", bytes(32))
                undecodable = b"\x0a\xff\xff\xff\xff\x0f" + b"ATTACKER"  # a length past the end
                for body in (zero_cursor, undecodable):
                    answer = raw_query(target, STORE_V3_CODEC, body, source=source)
                    statuses.append(decode_response(answer).status_code)
    finally:
        stores.close()
    failed = [line for line in _lines(json_logs) if line["msg"] == "libp2p store query failed"]
    print(f"failed store queries: {sorted(set(statuses))}, {failed}")
    assert len(statuses) == 24 and 200 not in statuses
    by_address_and_kind = {(line["peer"], line["error_type"], line["status"]) for line in failed}
    assert len(failed) == 4 == len(by_address_and_kind), failed
    assert {line["peer"] for line in failed} == {"127.0.0.1", "127.0.0.2"}
    assert all(line["peer_id"].startswith("16Uiu2") for line in failed)  # secp256k1 ids
    assert len({line["error_type"] for line in failed}) == 2
    assert "ATTACKER" not in json_logs.getvalue()


def test_handshakes_per_address_are_rate_limited_and_new_addresses_keep_a_share() -> None:
    """The gate, sans-IO: one address opening connections faster than its rate is refused
    (the rest of its budget intact), and once addresses holding connections fill all but
    the reserved share, only addresses holding none get the rest."""
    from waku_legacy.p2p.codec.gate import GateLimits, InboundGate

    gate = InboundGate(
        GateLimits(
            max_connections=20, max_connections_per_address=8, max_handshakes=20,
            max_handshakes_per_address=8, address_handshake_rate=2.0,
            address_handshake_burst=4.0, reserved_share=0.25,
        )
    )  # fmt: skip
    assert [gate.admit("10.0.0.1", now=0.0) for _ in range(4)] == [None] * 4
    assert "new connections/s" in (gate.admit("10.0.0.1", now=0.0) or "")
    assert gate.admit("10.0.0.1", now=0.5) is None  # 2/s: one more after 0.5 s
    for _ in range(4):
        gate.handshake_done("10.0.0.1")
    # 10.0.0.2 and .3 fill 15 of 20 (the last 5 kept for addresses holding none)
    for address, count in (("10.0.0.2", 5), ("10.0.0.3", 5)):
        for k in range(count):
            assert gate.admit(address, now=10.0 + k) is None
            gate.handshake_done(address)
    assert gate.open == 15
    assert "kept for addresses holding none" in (gate.admit("10.0.0.2", now=99.0) or "")
    assert gate.admit("10.0.0.9", now=99.0) is None  # a new address still gets in


def _mplex_message(number: int, flag: int, body: bytes) -> bytes:
    """An mplex message (libp2p specs mplex/README.md): varint ``id << 3 | flag``, varint
    length, body; NewStream 0, MessageInitiator 2."""
    return varint(number << 3 | flag) + frame_of(body)


def test_mplex_answers_a_peer_never_reads_stay_within_the_send_budget(make_native) -> None:
    """mplex has no window: what the peer does not read waits in the socket's buffer. A
    peer that reads nothing after the handshake and asks for twelve 2 MiB answers: while
    bytes wait there, answers past the budget (4 MiB) reset their streams."""
    limits = ListenerLimits(host=HostLimits(max_buffered_bytes=4 * MB), write_timeout=5.0)
    listener = make_native(limits)
    peer = RawLibp2p(tcp_target(address_of(listener)))
    peer.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 64 * 1024)
    peak = 0
    try:
        peer.noise()
        peer.write(ms_line("/multistream/1.0.0") + ms_line("/mplex/6.7.0"))
        request = ms_line("/multistream/1.0.0") + ms_line(BIG) + frame_of(b"page")
        peer.write(  # in one Noise message: the server reads all twelve at once
            b"".join(
                _mplex_message(n, 0, str(n).encode()) + _mplex_message(n, 2, request)
                for n in range(12)
            )
        )
        deadline = time.monotonic() + 4
        while time.monotonic() < deadline:
            buffers = [c.transport.get_write_buffer_size() for c in list(listener._live)
                       if c.transport is not None]  # fmt: skip
            peak = max([peak, *buffers])
            time.sleep(0.02)
        stats = listener.stats()
        latencies = honest_queries(listener, 2)
    finally:
        peer.close()
    print(f"mplex, nothing read: socket buffer at most {peak / MB:.2f} MB, {stats}")
    # twelve 2 MiB answers, a 4 MiB budget: a few wait (the kernel's buffers take some of
    # them first), the rest are refused
    assert stats["send_budget_exceeded"] >= 8, stats
    assert peak <= 4 * MB + ANSWER_BYTES
    assert max(latencies) < 10.0


def test_a_connection_asking_for_more_while_over_the_send_budget_ends_with_go_away(
    make_native,
) -> None:
    """A peer that opens twelve streams, each asking for a 2 MiB page, and never sends a
    WINDOW_UPDATE, against a 1 MiB budget: the first answer is queued whole (1.75 MiB past
    its window, over the budget); the next one to be refused finds the connection still
    over the budget once its stream is reset, so the connection ends with GO_AWAY
    (internal error, 2), long before write_timeout (20 s) would reset the first stream."""
    limits = ListenerLimits(
        host=HostLimits(max_buffered_bytes=1 * MB), write_timeout=20.0, idle_timeout=30.0
    )
    listener = make_native(limits)
    peer = attacker(listener)
    try:
        streams = [peer.open_stream(BIG, frame_of(b"page")) for _ in range(12)]
        ended = peer.wait(lambda: peer.go_away is not None and peer.closed, 5.0)
        # our FIN follows the GO_AWAY; the socket is gone at the latest a second later
        released = peer.wait(
            lambda: not [c for c in list(listener._live) if c.address == "127.0.0.2"], 3.0
        )
        latencies = honest_queries(listener, 2)
    finally:
        peer.close()
    stats = listener.stats()
    print(f"12 pages, no window: GO_AWAY {peer.go_away}, closed {peer.closed}, {stats}")
    assert ended, f"the connection stays open with its answers queued: {stats}"
    assert peer.go_away == 2  # yamux spec: internal error
    assert released
    assert stats["send_budget_closed"] == 1
    assert stats["send_budget_exceeded"] >= 1
    assert all(peer.data.get(sid, 0) <= 256 * 1024 for sid in streams)
    assert max(latencies) < 10.0
