"""waku/1 capability codecs: status options (hand-derived bytes), peer state, packets."""

from __future__ import annotations

import math

import pytest
import rlp
from hypothesis import given, settings
from hypothesis import strategies as st

from waku_legacy.crypto.keccak import keccak256
from waku_legacy.mailserver_compat.wire.bloom import FULL_BLOOM, topic_to_bloom
from waku_legacy.mailserver_compat.wire.complete import RequestComplete
from waku_legacy.mailserver_compat.wire.waku_protocol import (
    WAKU_CAPABILITY,
    BatchAcknowledged,
    EnvelopeRejection,
    EnvelopesReceived,
    MessageResponseReceived,
    MessagesResponse,
    P2PMessagesReceived,
    P2PRequestReceived,
    PacketCode,
    RateLimits,
    RequestCompleteReceived,
    StatusOptions,
    StatusReceived,
    WakuLimitExceeded,
    WakuPeerState,
    WakuProtocolError,
    encode_batch_ack,
    encode_envelope_list,
    split_rlp_list,
)


def test_capability_and_packet_codes() -> None:
    assert (WAKU_CAPABILITY.name, WAKU_CAPABILITY.version, WAKU_CAPABILITY.length) == (
        "waku",
        1,
        128,
    )
    assert [int(c) for c in PacketCode] == [0, 1, 11, 12, 22, 125, 126, 127]


# Expected bytes below are derived by hand from the RLP rules (list prefix 0xc0 + length,
# string prefix 0x80 + length, integer 0 = 0x80) and IEEE 754 (2.05 = 0x4000666666666666).
@pytest.mark.parametrize(
    ("options", "expected"),
    [
        (StatusOptions(pow_requirement=2.05), "cbca80884000666666666666"),
        (StatusOptions(light_node=True), "c3c20201"),
        (StatusOptions(confirmations=False), "c3c20380"),
        (StatusOptions(packet_rate_limits=RateLimits(10, 5, 1)), "c6c504c30a0501"),
        (
            StatusOptions(topic_interest=(b"\x01\x00\x00\x00", b"\x02\x00\x00\x00")),
            "cdcc05ca84010000008402000000",
        ),
        (StatusOptions(), "c0"),
    ],
)
def test_status_encoding_matches_hand_derivation(options: StatusOptions, expected: str) -> None:
    assert options.encode().hex() == expected
    assert StatusOptions.decode(bytes.fromhex(expected)) == options


def test_status_keys_are_emitted_in_key_order_with_bloom_and_bytes_limits() -> None:
    options = StatusOptions(
        pow_requirement=0.2,
        bloom=topic_to_bloom(b"\xaa\xbb\xcc\xdd"),
        light_node=False,
        confirmations=True,
        packet_rate_limits=RateLimits(1, 2, 3),
        topic_interest=(b"abcd",),
        bytes_rate_limits=RateLimits(4, 5, 6),
    )
    items = rlp.decode(options.encode())
    assert [int.from_bytes(item[0], "big") for item in items] == [0, 1, 2, 3, 4, 5, 6]
    assert StatusOptions.decode(options.encode()) == options


def test_unknown_option_keys_are_ignored() -> None:
    # status-go TestForwardCompatibility: [[0, pow], [99, 10]] decodes to just the PoW.
    payload = rlp.encode([[0, 0x4000666666666666], [99, 10]])
    assert StatusOptions.decode(payload) == StatusOptions(pow_requirement=2.05)


@pytest.mark.parametrize(
    ("payload", "message"),
    [
        (rlp.encode([[2, b"\x02"]]), "boolean"),
        (rlp.encode([[0, 0x7FF8000000000000]]), "invalid PoW"),  # NaN
        (rlp.encode([[0, 0xBFF0000000000000]]), "invalid PoW"),  # -1.0
        (rlp.encode([[1, b"\x00" * 10]]), "64 bytes"),
        (rlp.encode([[5, [b"abc"]]]), "4 bytes"),
        (rlp.encode([[0, b"\x00\x01"]]), "leading zero"),
        (rlp.encode([[0]]), "no value"),
        (rlp.encode(b"not a list"), "list"),
        (b"\xf8", "RLP"),
    ],
)
def test_bad_status_payloads_are_typed_errors(payload: bytes, message: str) -> None:
    with pytest.raises(WakuProtocolError, match=message):
        StatusOptions.decode(payload)


def test_topic_interest_limit() -> None:
    StatusOptions.decode(rlp.encode([[5, [b"abcd"] * 10_000]]))
    with pytest.raises(WakuLimitExceeded, match="over 10000"):
        StatusOptions.decode(rlp.encode([[5, [b"abcd"] * 10_001]]))


@settings(max_examples=50, deadline=None)
@given(
    pow_requirement=st.none() | st.floats(min_value=0, allow_nan=False, allow_infinity=False),
    bloom=st.none() | st.binary(min_size=64, max_size=64),
    light=st.none() | st.booleans(),
    topics=st.none() | st.lists(st.binary(min_size=4, max_size=4), max_size=20).map(tuple),
)
def test_status_round_trip(pow_requirement, bloom, light, topics) -> None:
    options = StatusOptions(
        pow_requirement=pow_requirement, bloom=bloom, light_node=light, topic_interest=topics
    )
    assert StatusOptions.decode(options.encode()) == options


def test_peer_state_status_first_then_defaults() -> None:
    state = WakuPeerState()
    with pytest.raises(WakuProtocolError, match="before status"):
        state.receive(PacketCode.MESSAGES, rlp.encode([]))
    [event] = state.receive(PacketCode.STATUS, rlp.encode([]))
    assert event == StatusReceived(StatusOptions(), update=False)
    # status-go WithDefaults for a peer that says nothing.
    assert state.pow_requirement == 0.001 and state.bloom == FULL_BLOOM
    assert state.wants(b"\x00\x00\x00\x00")
    with pytest.raises(WakuProtocolError, match="second status"):
        state.receive(PacketCode.STATUS, rlp.encode([]))


def test_topic_interest_beats_bloom_and_updates_apply() -> None:
    state = WakuPeerState()
    topic_a, topic_b = b"aaaa", b"bbbb"
    status = StatusOptions(bloom=topic_to_bloom(topic_a), topic_interest=(topic_b,))
    state.receive(PacketCode.STATUS, status.encode())
    assert state.wants(topic_b) and not state.wants(topic_a)
    update = StatusOptions(pow_requirement=0.5, bloom=topic_to_bloom(topic_a))
    [event] = state.receive(PacketCode.STATUS_UPDATE, update.encode())
    assert isinstance(event, StatusReceived) and event.update
    assert state.pow_requirement == 0.5
    assert state.wants(topic_a) and state.topic_interest is None
    state.receive(PacketCode.STATUS_UPDATE, StatusOptions(topic_interest=()).encode())
    assert not state.wants(topic_a)  # empty interest: wants nothing (status-go)


def test_packets_after_status_become_events() -> None:
    state = WakuPeerState()
    state.receive(PacketCode.STATUS, StatusOptions().encode())
    envelope = rlp.encode([1, 2, b"abcd", b"data", 3])
    messages = encode_envelope_list([envelope, envelope])
    assert state.receive(PacketCode.MESSAGES, messages) == [
        EnvelopesReceived((envelope, envelope), keccak256(messages))
    ]
    assert state.receive(PacketCode.P2P_MESSAGE, messages) == [
        P2PMessagesReceived((envelope, envelope))
    ]
    assert state.receive(PacketCode.P2P_REQUEST, b"\xc0") == [P2PRequestReceived(b"\xc0")]
    complete = RequestComplete(b"\x01" * 32, b"\x02" * 32, b"\x03" * 36)
    assert state.receive(PacketCode.P2P_REQUEST_COMPLETE, complete.encode_packet()) == [
        RequestCompleteReceived(complete)
    ]
    assert state.receive(PacketCode.BATCH_ACKNOWLEDGED, encode_batch_ack(b"\x05" * 32)) == [
        BatchAcknowledged(b"\x05" * 32)
    ]
    response = MessagesResponse(b"\x06" * 32, (EnvelopeRejection(b"\x07" * 32, 1, "low PoW"),))
    assert state.receive(PacketCode.MESSAGE_RESPONSE, response.encode()) == [
        MessageResponseReceived(response)
    ]
    assert state.receive(PacketCode.MESSAGE_RESPONSE, rlp.encode([2, b""])) == []
    assert state.receive(99, b"anything") == []  # unknown codes ignored, as status-go does
    with pytest.raises(WakuProtocolError):
        state.receive(PacketCode.P2P_REQUEST_COMPLETE, rlp.encode(b"short"))


def test_message_response_wire_form() -> None:
    # [1, [hash, [[hash, code, description]]]] (status-go MultiVersionResponse v1).
    response = MessagesResponse(b"\x01" * 32, (EnvelopeRejection(b"\x02" * 32, 1, "x"),))
    assert rlp.decode(response.encode()) == [
        b"\x01",
        [b"\x01" * 32, [[b"\x02" * 32, b"\x01", b"x"]]],
    ]


@settings(max_examples=60, deadline=None)
@given(st.lists(st.binary(max_size=300), max_size=40))
def test_envelope_list_matches_rlp_library_and_splits_back(payloads: list[bytes]) -> None:
    items = [rlp.encode([len(p), 1, b"abcd", p, 7]) for p in payloads]
    encoded = encode_envelope_list(items)
    assert encoded == rlp.encode([rlp.decode(item) for item in items])
    assert split_rlp_list(encoded, "test") == items


@pytest.mark.parametrize(
    "payload",
    [b"", b"\x80", b"\xc3\x01\x02", b"\xc2\x01\x02\x03", b"\xc2\xb8\x05", b"\xf9\xff"],
)
def test_split_rejects_malformed_lists(payload: bytes) -> None:
    with pytest.raises(WakuProtocolError):
        split_rlp_list(payload, "test")


def test_split_enforces_item_limit() -> None:
    with pytest.raises(WakuLimitExceeded):
        split_rlp_list(rlp.encode([b"a"] * 11), "test", max_items=10)


def test_float_bits_are_ieee754() -> None:
    from waku_legacy.mailserver_compat.wire.waku_protocol import bits_to_float, float_to_bits

    assert float_to_bits(1.0) == 0x3FF0000000000000
    assert bits_to_float(0x3FF8000000000000) == 1.5
    assert math.isnan(bits_to_float(0x7FF8000000000000))
