"""v1 <-> v2 conversions (nwaku bridge) and decrypted payload -> status-go archive message."""

from __future__ import annotations

import coincurve
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from waku_legacy.crypto.payload import DecodedPayload, decode_payload, encode_payload
from waku_legacy.crypto.secp256k1 import public_key_of
from waku_legacy.errors import InvalidTopic, LimitExceeded
from waku_legacy.mailserver_compat.wire.convert import (
    ConversionError,
    archive_message,
    envelope_to_waku_message,
    waku_message_to_envelope,
)
from waku_legacy.mailserver_compat.wire.envelope import Envelope
from waku_legacy.mailserver_compat.wire.pow import pow_of
from waku_legacy.proto import waku_message_pb2


def _varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte, value = value & 0x7F, value >> 7
        out.append(byte | (0x80 if value else 0))
        if not value:
            return bytes(out)


ENV = Envelope(expiry=1000, ttl=50, topic=bytes.fromhex("1a2b3c4d"), data=b"xyz", nonce=9)


def test_envelope_to_v2_hand_derived() -> None:
    message = envelope_to_waku_message(ENV)
    topic = b"/waku/1/0x1a2b3c4d/rfc26"
    # sint64 timestamp (expiry - ttl) * 10**9 = 950e9, zigzag-encoded as 2 * 950e9
    expected = (
        b"\x0a\x03xyz"  # field 1 payload
        + b"\x12" + bytes([len(topic)]) + topic  # field 2 content topic
        + b"\x18\x01"  # field 3 version 1
        + b"\x50" + _varint(2 * 950 * 10**9)  # field 10 (10 << 3 | 0 = 0x50)
    )  # fmt: skip
    assert message.SerializeToString() == expected


def test_v2_to_envelope_is_nwaku_bridge_shape() -> None:
    message = waku_message_pb2.WakuMessage(
        payload=b"data", content_topic="/waku/1/0x01020304/rfc26", version=1, timestamp=5
    )
    envelope = waku_message_to_envelope(message, now=2000, target_pow=0.01)
    assert (envelope.expiry, envelope.ttl, envelope.topic, envelope.data) == (
        2005,
        5,
        b"\x01\x02\x03\x04",
        b"data",
    )
    assert pow_of(envelope) >= 0.01


@settings(max_examples=30, deadline=None)
@given(
    st.builds(
        Envelope,
        expiry=st.integers(100, 2**32 - 1),
        ttl=st.integers(1, 100),
        topic=st.binary(min_size=4, max_size=4),
        data=st.binary(max_size=300),
        nonce=st.integers(0, 2**64 - 1),
    )
)
def test_round_trip_keeps_topic_and_data(envelope: Envelope) -> None:
    message = waku_message_pb2.WakuMessage.FromString(
        envelope_to_waku_message(envelope).SerializeToString()
    )
    assert message.timestamp == (envelope.expiry - envelope.ttl) * 10**9
    back = waku_message_to_envelope(message, now=10, target_pow=0)
    assert (back.topic, back.data) == (envelope.topic, envelope.data)


@pytest.mark.parametrize("version", [None, 0, 2])
def test_only_version_1_is_bridged(version: int | None) -> None:
    message = waku_message_pb2.WakuMessage(payload=b"x", content_topic="/waku/1/0x01020304/rfc26")
    if version is not None:
        message.version = version
    with pytest.raises(ConversionError, match="only version 1"):
        waku_message_to_envelope(message, now=1)


def test_v2_to_v1_refuses_bad_topic_and_size() -> None:
    message = waku_message_pb2.WakuMessage(
        payload=b"x", content_topic="/toychat/2/huilong/proto", version=1
    )
    with pytest.raises(InvalidTopic):
        waku_message_to_envelope(message, now=1)
    big = waku_message_pb2.WakuMessage(
        payload=b"x" * 101, content_topic="/waku/1/0x01020304/rfc26", version=1
    )
    with pytest.raises(LimitExceeded):
        waku_message_to_envelope(big, now=1, max_size=100)


SIGNER = coincurve.PrivateKey(b"\x55" * 32)


def test_archive_message_hand_derived() -> None:
    decoded = DecodedPayload(
        payload=b"hi", padding=b"\x00\x01", signature=b"s" * 65, signer=b"\x04" + b"k" * 64
    )
    message = archive_message(message_hash=b"h" * 32, topic=b"abcd", timestamp=300, decoded=decoded)
    expected = (
        b"\x0a\x41" + b"\x04" + b"k" * 64  # field 1 sig: 65 bytes
        + b"\x10" + _varint(300)  # field 2 timestamp (seconds)
        + b"\x1a\x04abcd"  # field 3 topic
        + b"\x22\x02hi"  # field 4 payload
        + b"\x2a\x02\x00\x01"  # field 5 padding
        + b"\x32\x20" + b"h" * 32  # field 6 hash
    )  # fmt: skip
    assert message.SerializeToString() == expected


def test_archive_message_from_a_real_payload() -> None:
    key = b"q" * 32
    data = encode_payload(b"chat message", sign_with=SIGNER, symmetric_key=key)
    envelope = Envelope(expiry=1000, ttl=10, topic=b"abcd", data=data, nonce=0)
    decoded = decode_payload(envelope.data, symmetric_key=key)
    message = archive_message(
        message_hash=envelope.hash(),
        topic=envelope.topic,
        timestamp=envelope.sent_time,
        decoded=decoded,
    )
    assert message.sig == public_key_of(SIGNER)
    assert message.payload == b"chat message" and message.padding == decoded.padding
    assert message.timestamp == 990 and message.hash == envelope.hash()
    unsigned = archive_message(
        message_hash=envelope.hash(),
        topic=b"abcd",
        timestamp=1,
        decoded=DecodedPayload(payload=b"p", padding=b"", signature=None, signer=None),
    )
    assert unsigned.sig == b""


@pytest.mark.parametrize(
    ("kwargs", "needle"),
    [
        ({"message_hash": b"short"}, "message hash must be 32 bytes"),
        ({"topic": b"abc"}, "topic must be 4 bytes"),
        ({"timestamp": -1}, "not a uint64"),
        ({"timestamp": 1_700_000_000_000}, "looks like ms or ns"),
    ],
)
def test_archive_message_checks(kwargs: dict[str, object], needle: str) -> None:
    fields: dict[str, object] = {
        "message_hash": b"h" * 32,
        "topic": b"abcd",
        "timestamp": 1,
        "decoded": DecodedPayload(payload=b"", padding=b"", signature=None, signer=None),
    }
    fields.update(kwargs)
    with pytest.raises(ConversionError, match=needle):
        archive_message(**fields)  # type: ignore[arg-type]
