"""The sans-IO RLPx connection: handshake to established, Hello and capability offsets,
snappy after Hello, ping/pong, disconnect reasons, and every kind of bad input."""

from __future__ import annotations

import pytest
import rlp
import snappy

from waku_legacy.crypto.secp256k1 import generate_private_key, public_key_of
from waku_legacy.mailserver_compat.rlpx import p2p
from waku_legacy.mailserver_compat.rlpx.connection import (
    Connection,
    State,
    decode_code,
    encode_code,
)
from waku_legacy.mailserver_compat.rlpx.errors import ConnectionStateError, RlpxDecodeError
from waku_legacy.mailserver_compat.rlpx.events import (
    ConnectionFailed,
    DisconnectReceived,
    HandshakeComplete,
    HelloReceived,
    MessageReceived,
    PingReceived,
    PongReceived,
)
from waku_legacy.mailserver_compat.rlpx.frame import FrameCodec
from waku_legacy.mailserver_compat.rlpx.handshake import Initiator
from waku_legacy.mailserver_compat.rlpx.reasons import DisconnectReason

WAKU = p2p.ProtocolSpec("waku", 1, 128)


def _pair(
    client_protocols=(WAKU,), server_protocols=(WAKU,), **server_kwargs
) -> tuple[Connection, Connection, list, list]:
    key_c, key_s = generate_private_key(), generate_private_key()
    client = Connection(key_c, client_protocols, remote_public_key=public_key_of(key_s))
    server = Connection(key_s, server_protocols, **server_kwargs)
    server_events = server.receive_data(client.initiate())
    client_events = client.receive_data(server.data_to_send())
    server_events += server.receive_data(client.data_to_send())
    return client, server, client_events, server_events


def test_handshake_hello_and_offsets() -> None:
    client, server, client_events, server_events = _pair()
    assert [type(e) for e in client_events] == [HandshakeComplete, HelloReceived]
    assert [type(e) for e in server_events] == [HandshakeComplete, HelloReceived]
    assert client.state is State.ESTABLISHED and server.state is State.ESTABLISHED
    assert client.remote_public_key == public_key_of(server.private_key)[1:]
    assert server.remote_public_key == public_key_of(client.private_key)[1:]
    hello = client_events[1]
    assert isinstance(hello, HelloReceived)
    assert hello.hello.version == 5 and hello.hello.capabilities == (p2p.Capability("waku", 1),)
    assert hello.shared_capabilities == (p2p.SharedCapability("waku", 1, 0x10, 128),)
    assert client.snappy and server.snappy


def test_capability_message_round_trip_uses_offset_and_snappy() -> None:
    client, server, _, _ = _pair()
    payload = rlp.encode([b"x" * 300])
    wire = client.send_message("waku", 0x7E, payload)
    events = server.receive_data(wire)
    assert events == [MessageReceived("waku", 1, 0x7E, payload)]
    # Check the wire form independently: decrypt with a second reader of the same keys
    # is not possible, so check the code arithmetic and snappy on the server's view.
    assert encode_code(0x10 + 0x7E) == b"\x81\x8e"
    assert decode_code(b"\x81\x8e rest") == (0x8E, 2)
    assert decode_code(b"\x80") == (0, 1)
    for bad in (b"\x81\x05", b"\x82\x00\x90", b"\x82\x01"):
        with pytest.raises(RlpxDecodeError):
            decode_code(bad)


def test_negotiation_orders_by_name_and_picks_highest_version() -> None:
    ours = [
        p2p.ProtocolSpec("waku", 0, 128),
        p2p.ProtocolSpec("waku", 1, 128),
        p2p.ProtocolSpec("shh", 6, 128),
    ]
    theirs = [
        p2p.Capability("waku", 1),
        p2p.Capability("waku", 0),
        p2p.Capability("shh", 6),
        p2p.Capability("eth", 66),
    ]
    assert p2p.negotiate(ours, theirs) == [
        p2p.SharedCapability("shh", 6, 0x10, 128),
        p2p.SharedCapability("waku", 1, 0x90, 128),
    ]


def test_ping_is_answered_with_pong() -> None:
    client, server, _, _ = _pair()
    assert server.receive_data(client.send_ping()) == [PingReceived()]
    assert client.receive_data(server.data_to_send()) == [PongReceived()]


def test_disconnect_reason_reaches_the_peer() -> None:
    client, server, _, _ = _pair()
    wire = client.send_disconnect(DisconnectReason.TOO_MANY_PEERS)
    assert client.closed and client.close_reason is DisconnectReason.TOO_MANY_PEERS
    assert server.receive_data(wire) == [DisconnectReceived(DisconnectReason.TOO_MANY_PEERS, 4)]
    assert server.closed
    with pytest.raises(ConnectionStateError):
        server.send_message("waku", 1, b"\xc0")


@pytest.mark.parametrize(
    ("payload", "reason", "code"),
    [
        (rlp.encode([8]), DisconnectReason.QUITTING, 8),
        (rlp.encode(3), DisconnectReason.USELESS_PEER, 3),  # bare reason, tolerated
        (rlp.encode([]), DisconnectReason.REQUESTED, 0),
        (rlp.encode([0x42]), DisconnectReason.UNKNOWN, 0x42),
    ],
)
def test_disconnect_payload_forms(payload: bytes, reason: DisconnectReason, code: int) -> None:
    assert p2p.decode_disconnect(payload) == (reason, code)


class _RawClient:
    """A dialler that completes the handshake but then writes frames of our choosing."""

    def __init__(self, server: Connection) -> None:
        self.key = generate_private_key()
        self.initiator = Initiator(self.key, public_key_of(server.private_key))
        server.receive_data(self.initiator.auth_packet)
        result = self.initiator.read_ack(server.data_to_send())
        assert result is not None
        self.frames = FrameCodec(result[0])

    def frame(self, code: int, payload: bytes) -> bytes:
        return self.frames.encode(encode_code(code) + payload)

    def hello(self, node_key=None) -> bytes:
        node_id = public_key_of(node_key or self.key)[1:]
        hello = p2p.Hello(5, "raw", (p2p.Capability("waku", 1),), 0, node_id)
        return self.frame(p2p.HELLO, hello.encode())


def _failure(events: list) -> ConnectionFailed:
    failures = [e for e in events if isinstance(e, ConnectionFailed)]
    assert len(failures) == 1, events
    return failures[0]


def _disconnect_seen_by(peer: Connection, wire: bytes) -> DisconnectReason:
    events = peer.receive_data(wire)
    assert isinstance(events[-1], DisconnectReceived), events
    return events[-1].reason


def test_garbage_before_handshake_fails_without_a_reply() -> None:
    server = Connection(generate_private_key(), [WAKU])
    failure = _failure(server.receive_data(b"GET / HTTP/1.1\r\nHost: example\r\n\r\n"))
    assert failure.reason is DisconnectReason.PROTOCOL_ERROR
    assert "over the 2048-byte limit" in failure.error
    assert server.closed and server.data_to_send() == b""
    assert server.receive_data(b"more") == []  # closed: ignored


def test_garbage_after_handshake_gets_a_protocol_error_disconnect() -> None:
    key_c, key_s = generate_private_key(), generate_private_key()
    client = Connection(key_c, [WAKU], remote_public_key=public_key_of(key_s))
    server = Connection(key_s, [WAKU])
    server.receive_data(client.initiate())
    client.receive_data(server.data_to_send())  # client has the server's Hello: snappy on
    failure = _failure(server.receive_data(b"\x00" * 64))  # garbage instead of its Hello
    assert "MAC mismatch" in failure.error
    # The server never saw a Hello so its Disconnect is uncompressed; still read.
    assert _disconnect_seen_by(client, server.data_to_send()) is DisconnectReason.PROTOCOL_ERROR


def test_bad_mac_mid_session() -> None:
    client, server, _, _ = _pair()
    wire = bytearray(client.send_message("waku", 1, rlp.encode([])))
    wire[-1] ^= 0xFF
    failure = _failure(server.receive_data(bytes(wire)))
    assert failure.reason is DisconnectReason.PROTOCOL_ERROR and "body" in failure.error
    assert _disconnect_seen_by(client, server.data_to_send()) is DisconnectReason.PROTOCOL_ERROR


def test_oversized_frame_is_refused_from_its_header() -> None:
    client, server, _, _ = _pair(max_message_size=4096)
    wire = client.send_message("waku", 1, rlp.encode([bytes(64_000)]) + bytes(range(256)) * 200)
    failure = _failure(server.receive_data(wire[:32]))
    assert "over the" in failure.error
    assert _disconnect_seen_by(client, server.data_to_send()) is DisconnectReason.PROTOCOL_ERROR


def test_snappy_bomb_is_refused() -> None:
    client, server, _, _ = _pair(max_message_size=1 << 20)
    # Forge a frame whose snappy body declares 16 MiB: bypass the sender's compression.
    client.snappy = False
    bomb = snappy.compress(bytes(16 << 20))
    wire = client.send_message("waku", 1, bomb)
    failure = _failure(server.receive_data(wire))
    assert "declares 16777216 bytes decompressed" in failure.error
    assert _disconnect_seen_by(client, server.data_to_send()) is DisconnectReason.PROTOCOL_ERROR


def test_truncated_frames_wait_and_never_emit_partial_messages() -> None:
    client, server, _, _ = _pair()
    wire = client.send_message("waku", 1, b"\xc3\x01\x02\x03")
    for cut in range(len(wire) - 1):
        assert server.receive_data(wire[cut : cut + 1]) == []
    assert server.receive_data(wire[-1:]) == [MessageReceived("waku", 1, 1, b"\xc3\x01\x02\x03")]


def test_message_before_hello_is_a_protocol_error() -> None:
    server = Connection(generate_private_key(), [WAKU])
    raw = _RawClient(server)
    failure = _failure(server.receive_data(raw.frame(0x10, b"\xc0")))
    assert "before Hello" in failure.error
    assert server.data_to_send()  # the Disconnect frame


def test_no_shared_capability_is_useless_peer() -> None:
    _, _, client_events, server_events = _pair(client_protocols=(p2p.ProtocolSpec("shh", 6, 128),))
    assert _failure(server_events).reason is DisconnectReason.USELESS_PEER
    assert _failure(client_events).reason is DisconnectReason.USELESS_PEER


def test_hello_with_another_identity_is_unexpected_identity() -> None:
    server = Connection(generate_private_key(), [WAKU])
    raw = _RawClient(server)
    failure = _failure(server.receive_data(raw.hello(node_key=generate_private_key())))
    assert failure.reason is DisconnectReason.UNEXPECTED_IDENTITY


def test_a_correct_raw_hello_is_accepted() -> None:
    server = Connection(generate_private_key(), [WAKU])
    raw = _RawClient(server)
    events = server.receive_data(raw.hello())
    assert isinstance(events[0], HelloReceived) and server.state is State.ESTABLISHED


def test_unknown_capability_code_is_a_protocol_error() -> None:
    client, server, _, _ = _pair()
    wire = client._frame(0x10 + 128, b"\xc0", "test")
    assert "out of range" in _failure(server.receive_data(wire)).error


def test_pre_eip8_dialer_is_served() -> None:
    key_c, key_s = generate_private_key(), generate_private_key()
    initiator = Initiator(key_c, public_key_of(key_s), eip8=False)
    client = Connection(key_c, [WAKU], initiator=initiator)
    server = Connection(key_s, [WAKU])
    server.receive_data(client.initiate())
    client.receive_data(server.data_to_send())
    events = server.receive_data(client.data_to_send())
    assert server.state is State.ESTABLISHED and isinstance(events[-1], HelloReceived)


# -- local misuse: a typed error naming the call and the state (wsproto's LocalProtocolError)


def _misuse(call, event: str, state: str, reason: str) -> ConnectionStateError:
    with pytest.raises(ConnectionStateError) as caught:
        call()
    error = caught.value
    assert (error.event, error.state, error.reason) == (event, state, reason)
    assert str(error) == f"{event} in state {state}: {reason}"
    return error


def test_initiate_on_the_recipient_side_is_a_state_error() -> None:
    server = Connection(generate_private_key(), (WAKU,))
    reason = "only the dialling side sends an auth packet"
    _misuse(server.initiate, "initiate", "await-auth", reason)
    assert server.state is State.AWAIT_AUTH and server.data_to_send() == b""


def test_sending_before_the_handshake_is_a_state_error() -> None:
    key_s = generate_private_key()
    client = Connection(generate_private_key(), (WAKU,), remote_public_key=public_key_of(key_s))
    _misuse(
        lambda: client.send_message("waku", 1, b"\xc0"),
        "send_message", "await-ack", "a waku message needs an established session",
    )  # fmt: skip
    _misuse(
        client.send_ping, "send_ping", "await-ack",
        "no session keys: the handshake has not completed",
    )  # fmt: skip
    assert client.state is State.AWAIT_ACK  # the misuse changed nothing
    assert client.send_disconnect() == b""  # no keys: nothing to frame, and no error


def test_sending_what_was_not_negotiated_is_a_state_error() -> None:
    client, _, _, _ = _pair()
    _misuse(
        lambda: client.send_message("waku", 128, b"\xc0"),
        "send_message", "established", "waku has no message code 128",
    )  # fmt: skip
    _misuse(
        lambda: client.send_message("eth", 0, b"\xc0"),
        "send_message", "established", "capability 'eth' was not negotiated with the peer",
    )  # fmt: skip
    assert client.state is State.ESTABLISHED and client.data_to_send() == b""


def test_sending_after_close_is_a_state_error() -> None:
    client, _, _, _ = _pair()
    client.send_disconnect()
    _misuse(client.send_ping, "send_ping", "closed", "the connection is closed")
    _misuse(
        lambda: client.send_message("waku", 1, b"\xc0"),
        "send_message", "closed", "a waku message needs an established session",
    )  # fmt: skip


def test_a_state_forced_past_the_handshake_is_a_state_error_not_a_peer_failure() -> None:
    server = Connection(generate_private_key(), (WAKU,))
    server.state = State.ESTABLISHED  # a caller that skips the handshake
    _misuse(
        lambda: server.receive_data(b"\x00" * 32),
        "receive_data", "established", "no session keys: the handshake has not completed",
    )  # fmt: skip
    # the caller's mistake is not blamed on the peer: no Disconnect, no close
    assert server.data_to_send() == b"" and server.close_reason is None
