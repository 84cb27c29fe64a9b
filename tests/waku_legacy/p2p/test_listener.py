"""The libp2p listener (waku_legacy.p2p) over real loopback sockets, without the store:
transports and muxers, identify, 66/WAKU2-METADATA checked against protobuf's own encoder,
the key file, and hostile peers (garbage after the Noise handshake, oversize frames, idle
and surplus streams, a request flood, half-open connections); after each the listener
still answers."""

from __future__ import annotations

import os
import stat
import time
from collections.abc import Callable, Iterator

import pytest
import trio
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
from libp2p.custom_types import TProtocol
from libp2p.host.exceptions import StreamFailure
from libp2p.identity.identify.pb.identify_pb2 import Identify
from libp2p.network.stream.exceptions import StreamError
from libp2p.peer.id import ID
from libp2p.transport.tcp.tcp import TCP
from libp2p.transport.upgrader import TransportUpgrader
from multiaddr import Multiaddr

from tests.p2p_pylibp2p.client import P2PClient, request_once
from tests.p2p_pylibp2p.host import HostLimits, muxer_options, security_options
from tests.p2p_pylibp2p.streams import encode_varint, read_frame
from waku_legacy.errors import ConfigError, DecodeError, LimitExceeded
from waku_legacy.p2p.codec.metadata import (
    METADATA_CODEC,
    Metadata,
    decode_metadata,
    encode_metadata,
)
from waku_legacy.p2p.errors import P2PError
from waku_legacy.p2p.keys import ephemeral_key_pair, load_key_pair, peer_id_of
from waku_legacy.p2p.limits import ListenerLimits
from waku_legacy.p2p.transport.native import NativeListener

pytestmark = pytest.mark.network

ECHO = "/test/echo/1.0.0"
SLOW = "/test/slow/1.0.0"


def _refuse(request: bytes, reason: str) -> bytes:
    return b"refused:" + reason.encode()


def _slow(request: bytes, origin: object) -> bytes:
    time.sleep(1.5)
    return b"slow:" + request


def listening(
    limits: ListenerLimits | None = None, listener_class: type[NativeListener] = NativeListener
) -> NativeListener:
    listener = listener_class(
        ephemeral_key_pair(),
        ["/ip4/127.0.0.1/tcp/0", "/ip4/127.0.0.1/tcp/0/ws"],
        {ECHO: (lambda body, origin: b"echo:" + body, _refuse), SLOW: (_slow, None)},
        cluster_id=16,
        shards=[128, 32],
        limits=limits or ListenerLimits(),
    )
    listener.start_blocking()
    return listener


@pytest.fixture
def make_listener(
    listener_class: type[NativeListener],
) -> Iterator[Callable[..., NativeListener]]:
    started: list[NativeListener] = []

    def make(limits: ListenerLimits | None = None) -> NativeListener:
        listener = listening(limits, listener_class)
        started.append(listener)
        return listener

    yield make
    for listener in started:
        assert listener.stop_blocking(), "the listener did not stop within stop_timeout"


def tcp_addr(listener: NativeListener) -> str:
    return next(a for a in listener.multiaddrs if "/ws/" not in a)


def ws_addr(listener: NativeListener) -> str:
    return next(a for a in listener.multiaddrs if "/ws/" in a)


def still_answers(listener: NativeListener) -> None:
    assert request_once(tcp_addr(listener), ECHO, b"ok?") == b"echo:ok?"


# -- 66/WAKU2-METADATA against protobuf's own encoder ------------------------------------------


def _reference_class(name: str, fields: list[tuple[str, int, bool]]) -> type:
    """A WakuMetadataResponse built from a descriptor: cluster_id = 1 and the given
    ``(name, number, packed)`` repeated uint32 fields, so protobuf itself encodes and
    decodes the reference bytes."""
    file = descriptor_pb2.FileDescriptorProto(
        name=f"ref_{name}.proto", package=f"ref_{name}", syntax="proto3"
    )
    msg = file.message_type.add(name="WakuMetadataResponse")
    msg.field.add(name="cluster_id", number=1, type=13, label=1, proto3_optional=True,
                  oneof_index=0)  # fmt: skip
    for field_name, number, packed in fields:
        msg.field.add(name=field_name, number=number, type=13, label=3)
        msg.field[-1].options.packed = packed
    msg.oneof_decl.add(name="_cluster_id")
    pool = descriptor_pool.DescriptorPool()
    pool.Add(file)
    return message_factory.GetMessageClass(
        pool.FindMessageTypeByName(f"ref_{name}.WakuMetadataResponse")
    )


# The spec's schema (waku-proto), js-waku's reading of it (protons writes field 2 unpacked),
# and go-waku's current one (pb/waku_metadata.pb.go at 84a4b1be: shards = 3 packed,
# shards_deprecated = 2 unpacked).
SPEC = _reference_class("spec", [("shards", 2, True)])
GO_WAKU = _reference_class("go", [("shards_deprecated", 2, False), ("shards", 3, True)])


def _protons_shards(data: bytes) -> list[int]:
    """What js-waku's generated decoder (protons) makes of field 2: one varint per field-2
    tag whatever its wire type; other fields skipped by wire type."""

    def varint(at: int) -> tuple[int, int]:
        value = shift = 0
        while True:
            byte = data[at]
            at += 1
            value |= (byte & 0x7F) << shift
            shift += 7
            if not byte & 0x80:
                return value, at

    shards, at = [], 0
    while at < len(data):
        tag, at = varint(at)
        if tag >> 3 == 2:
            value, at = varint(at)
            shards.append(value)
        elif tag & 7 == 0:
            _, at = varint(at)
        elif tag & 7 == 2:
            length, at = varint(at)
            at += length
        else:
            raise AssertionError(f"wire type {tag & 7}")
    return shards


def test_metadata_codec_reads_as_every_client_reads_it() -> None:
    for cluster, shards in ((16, (32, 128, 1023)), (0, ()), (None, (5,)), (16, ())):
        ours = encode_metadata(Metadata(cluster, shards))
        go = GO_WAKU(shards=list(shards), shards_deprecated=list(shards))
        spec = SPEC(shards=list(shards))
        for ref in (go, spec):
            if cluster is not None:
                ref.cluster_id = cluster
        assert ours == go.SerializeToString()  # byte for byte what go-waku writes
        assert list(GO_WAKU.FromString(ours).shards) == list(shards)  # go-waku: field 3
        assert _protons_shards(ours) == list(shards)  # js-waku: field 2 unpacked
        assert list(SPEC.FromString(ours).shards) == list(shards)  # the spec's schema
        assert decode_metadata(ours) == Metadata(cluster, shards)
        # the spec's packed field 2 (older nwaku) reads too
        assert decode_metadata(spec.SerializeToString()) == Metadata(cluster, shards)
    # a packed field 2 is what js-waku misreads: the packed length comes out as a shard
    assert _protons_shards(SPEC(cluster_id=16, shards=[32, 128]).SerializeToString()) == [3]
    # js-waku's own request bytes (protons: cluster 16, no shards) and unknown fields
    assert decode_metadata(b"\x08\x10") == Metadata(16, ())
    mixed = b"\x08\x10" + b"\x10\x80\x01" + b"\x10\x20" + b"\x22\x02hi" + b"\x2dabcd"
    assert decode_metadata(mixed) == Metadata(16, (128, 32))
    for bad in (b"\x08", b"\x12\x05\x01", b"\x08\xff\xff\xff\xff\x1f", b"\x0b"):
        with pytest.raises(DecodeError):
            decode_metadata(bad)
    with pytest.raises(LimitExceeded):
        decode_metadata(b"\x12\x80\x10" + b"\x01" * 2048)


# -- the key file -------------------------------------------------------------------------------


def test_key_file_created_0600_and_reused(tmp_path) -> None:
    path = tmp_path / "libp2p.key"
    pair, created = load_key_pair(path)
    assert created and stat.S_IMODE(os.stat(path).st_mode) == 0o600
    again, created_again = load_key_pair(path)
    assert not created_again and peer_id_of(again) == peer_id_of(pair)
    assert peer_id_of(pair).startswith("16Uiu2")  # secp256k1, as nwaku's peer ids
    # the peer id is the libp2p one of the public key (identity multihash of its protobuf)
    assert ID.from_base58(peer_id_of(pair)).extract_public_key().serialize() == pair.public_key
    for content in (b"not a key\n", b"00" * 32 + b"\n", b"zz" * 32):
        path.write_bytes(content)
        with pytest.raises(ConfigError, match="key"):
            load_key_pair(path)
    with pytest.raises(ConfigError):
        load_key_pair(tmp_path / "missing.key", create=False)


# -- transports, muxers, identify ----------------------------------------------------------------


@pytest.mark.parametrize("muxer", ["yamux", "mplex"])
@pytest.mark.parametrize("transport", ["tcp", "ws"])
def test_request_metadata_identify(make_listener, transport: str, muxer: str) -> None:
    listener = make_listener()
    address = tcp_addr(listener) if transport == "tcp" else ws_addr(listener)
    assert address.endswith("/p2p/" + listener.peer_id)

    async def main() -> tuple[bytes, bytes, Identify]:
        async with P2PClient.dial(address, muxers=(muxer,)) as client:
            echo = await client.request(ECHO, b"hello")
            meta = await client.request(METADATA_CODEC, encode_metadata(Metadata(16, ())))
            stream = await client.host.new_stream(client.peer, [TProtocol("/ipfs/id/1.0.0")])
            identify = Identify()
            identify.ParseFromString(await read_frame(stream, 65536))
            return echo, meta, identify

    echo, meta, identify = trio.run(main)
    assert echo == b"echo:hello"
    assert decode_metadata(meta) == Metadata(16, (32, 128))
    assert {ECHO, SLOW, METADATA_CODEC, "/ipfs/id/1.0.0", "/ipfs/ping/1.0.0"} <= set(
        identify.protocols
    )
    assert identify.public_key == listener.pair.public_key
    assert listener.stats()["metadata_answered"] == 1


def test_bad_listen_address_is_a_typed_error(listener_class: type[NativeListener]) -> None:
    with pytest.raises(ConfigError):
        listener_class(ephemeral_key_pair(), ["not a multiaddr"], {}, cluster_id=16, shards=[])
    taken = listening(None, listener_class)
    try:
        port = tcp_addr(taken).split("/tcp/")[1].split("/")[0]
        second = listener_class(
            ephemeral_key_pair(), [f"/ip4/127.0.0.1/tcp/{port}"], {}, cluster_id=16, shards=[]
        )
        with pytest.raises(P2PError):
            second.start_blocking(timeout=10)
    finally:
        taken.stop_blocking()


# -- hostile peers --------------------------------------------------------------------------------


async def _secure_conn(address: str):  # -> ISecureConn
    """A raw TCP connection through multistream-select and the Noise handshake, nothing
    more: the bytes after it are ours to choose."""
    target = Multiaddr(address)
    peer = ID.from_base58(target.value_for_protocol("p2p"))
    raw = await TCP().dial(target.decapsulate(Multiaddr(f"/p2p/{peer}")))
    pair = ephemeral_key_pair()
    upgrader = TransportUpgrader(security_options(pair), muxer_options())
    return await upgrader.upgrade_security(raw, True, peer)


def test_garbage_after_noise_handshake(make_listener) -> None:
    listener = make_listener(ListenerLimits(host=HostLimits(handshake_timeout=2.0)))

    async def main() -> None:
        for garbage in (os.urandom(4096), b"\x13/multistream/1.0.0\n" + os.urandom(300)):
            conn = await _secure_conn(tcp_addr(listener))
            await conn.write(garbage)
            with trio.move_on_after(5):
                try:
                    while await conn.read(65536):
                        pass
                except Exception:
                    pass  # closed by the listener: what we expect
            await conn.close()
        # garbage inside an agreed muxer: yamux frames of nonsense
        conn = await _secure_conn(tcp_addr(listener))
        upgrader = TransportUpgrader(security_options(ephemeral_key_pair()), muxer_options())
        muxed = await upgrader.muxer_multistream.select_transport(conn)
        assert muxed is not None
        await conn.write(b"\x00\x00\x00\x02" + os.urandom(2000))
        await conn.close()

    trio.run(main)
    still_answers(listener)


def test_oversize_frame_resets_stream(make_listener) -> None:
    listener = make_listener(ListenerLimits(max_request_bytes=1024))

    async def main() -> None:
        async with P2PClient.dial(tcp_addr(listener)) as client:
            stream = await client.host.new_stream(client.peer, [TProtocol(ECHO)])
            await stream.write(encode_varint(10 * 1024 * 1024) + b"x" * 2048)
            with pytest.raises((P2PError, StreamError)), trio.fail_after(5):
                await read_frame(stream, 65536)
            # under the cap is fine, on the same connection
            assert await client.request(ECHO, b"y" * 1000) == b"echo:" + b"y" * 1000

    trio.run(main)
    assert listener.stats()["request_too_large"] == 1
    still_answers(listener)


def test_idle_and_surplus_streams(make_listener) -> None:
    limits = ListenerLimits(read_timeout=1.0, max_streams_per_connection=16)
    listener = make_listener(limits)

    async def main() -> float:
        async with P2PClient.dial(tcp_addr(listener), timeout=30) as client:
            streams, refused = [], 0
            for _ in range(200):  # negotiate the protocol, then send nothing
                try:
                    streams.append(await client.host.new_stream(client.peer, [TProtocol(ECHO)]))
                except StreamFailure:
                    refused += 1  # reset by the listener before the negotiation ended
            started = trio.current_time()
            ended = 0
            with trio.fail_after(15):
                for stream in streams:
                    try:
                        data = await stream.read(10)
                    except Exception:
                        data = b""
                    ended += data == b""
            assert ended == len(streams)
            return trio.current_time() - started

    waited = trio.run(main)
    stats = listener.stats()
    # every stream ended: over the cap reset at once, the others after read_timeout
    # (opening 200 streams takes longer than 1 s, so some slots free up meanwhile)
    assert stats["stream_refused"] + stats["stream_timeout"] == 200
    assert stats["stream_refused"] >= 100 and stats["stream_timeout"] >= 16
    assert waited < 10
    still_answers(listener)


def test_request_rate_refused_in_protocol_terms(make_listener) -> None:
    listener = make_listener(ListenerLimits(requests_per_second=0.01, request_burst=3))

    async def main() -> list[bytes]:
        async with P2PClient.dial(tcp_addr(listener)) as client:
            return [await client.request(ECHO, b"%d" % i) for i in range(6)]

    answers = trio.run(main)
    assert answers[:3] == [b"echo:0", b"echo:1", b"echo:2"]
    assert all(a.startswith(b"refused:") for a in answers[3:])
    assert listener.stats()["request_rate_limited"] == 3


def test_new_peer_ids_share_their_address_budget(make_listener) -> None:
    limits = ListenerLimits(
        requests_per_second=100, address_requests_per_second=0.01, address_request_burst=3
    )
    listener = make_listener(limits)
    answers = [request_once(tcp_addr(listener), ECHO, b"%d" % i) for i in range(5)]
    assert answers[:3] == [b"echo:0", b"echo:1", b"echo:2"]  # five peer ids, one address
    assert all(a.startswith(b"refused:") and b"127.0.0.1" in a for a in answers[3:])


def test_connections_per_address_and_idle_connections(make_listener) -> None:
    limits = ListenerLimits(max_connections_per_address=3, idle_timeout=1.0)
    listener = make_listener(limits)

    async def main() -> None:
        async with trio.open_nursery() as nursery:
            done = trio.Event()

            async def hold() -> None:
                try:
                    async with P2PClient.dial(tcp_addr(listener)) as client:
                        await client.request(ECHO, b"x")
                        await done.wait()
                except Exception:
                    pass  # refused: closed by the listener

            for _ in range(6):
                nursery.start_soon(hold)
            await trio.sleep(3)
            done.set()

    trio.run(main)
    stats = listener.stats()
    assert stats["connection_refused"] >= 3
    assert stats.get("connections_idle_closed", 0) >= 1
    still_answers(listener)


def test_slow_handlers_run_off_the_trio_thread(make_listener) -> None:
    """Handlers run on the worker pool: while three sleep (1.5 s each), the trio side
    still takes a fourth request and a free worker answers it."""
    listener = make_listener(ListenerLimits(workers=4))

    async def main() -> tuple[float, float]:
        async with P2PClient.dial(tcp_addr(listener)) as client:
            async with trio.open_nursery() as nursery:
                for i in range(3):
                    nursery.start_soon(client.request, SLOW, b"%d" % i)
                await trio.sleep(0.3)  # the three are in their handlers now
                started = trio.current_time()
                assert await client.request(ECHO, b"fast") == b"echo:fast"
                fast = trio.current_time() - started
            return fast, trio.current_time() - started

    fast, slow = trio.run(main)
    assert fast < 0.7 < slow


def test_stop_is_bounded_with_connections_open(listener_class: type[NativeListener]) -> None:
    listener = listening(ListenerLimits(stop_timeout=5.0), listener_class)

    async def main() -> None:
        async with P2PClient.dial(tcp_addr(listener)) as client:
            await client.request(ECHO, b"x")
            await client.host.new_stream(client.peer, [TProtocol(ECHO)])  # left idle
            started = time.monotonic()
            assert await trio.to_thread.run_sync(listener.stop_blocking)
            assert time.monotonic() - started < 5.0

    trio.run(main)


def test_announced_addresses_replace_the_listen_addresses(
    listener_class: type[NativeListener],
) -> None:
    announce = ["/dns4/bridge.example.org/tcp/443/wss", "/ip4/203.0.113.7/tcp/60000"]
    listener = listener_class(
        ephemeral_key_pair(), ["/ip4/127.0.0.1/tcp/0"], {ECHO: (lambda b, origin: b, None)},
        cluster_id=16, shards=[128], announce=announce,
    )  # fmt: skip
    listener.start_blocking()
    try:
        assert listener.multiaddrs == [f"{a}/p2p/{listener.peer_id}" for a in announce]
        (bound,) = listener.bound  # still listening where configured (port resolved)
        assert bound.startswith("/ip4/127.0.0.1/tcp/") and not bound.endswith("/tcp/0")

        async def main() -> list[str]:
            async with P2PClient.dial(f"{bound}/p2p/{listener.peer_id}") as client:
                stream = await client.host.new_stream(client.peer, [TProtocol("/ipfs/id/1.0.0")])
                identify = Identify()
                identify.ParseFromString(await read_frame(stream, 65536))
                return [str(Multiaddr(a)) for a in identify.listen_addrs]

        assert sorted(trio.run(main)) == sorted(announce)
    finally:
        listener.stop_blocking()


def test_streams_that_never_name_a_protocol_are_closed(make_listener) -> None:
    """300 muxer streams opened and left silent (no multistream-select): the listener's
    negotiation timeout ends every one, and it answers meanwhile."""
    listener = make_listener(ListenerLimits(host=HostLimits(negotiation_timeout=2.0)))

    async def main() -> int:
        async with P2PClient.dial(tcp_addr(listener)) as client:
            conn = client.host.get_network().get_connections(client.peer)[0]
            silent = [await conn.muxed_conn.open_stream() for _ in range(300)]
            assert await client.request(ECHO, b"meanwhile") == b"echo:meanwhile"
            await trio.sleep(3)
            ended = 0
            for stream in silent:
                try:
                    with trio.fail_after(1):
                        while await stream.read(1024):  # the listener's multistream header
                            pass
                except trio.TooSlowError:
                    raise  # still open: the listener did not end it
                except Exception:
                    pass  # reset by the listener
                ended += 1
            assert await client.request(ECHO, b"after") == b"echo:after"
            return ended

    assert trio.run(main) == 300
