"""Mailserver requests: plain and deprecated envelope forms (both field orders), rules."""

from __future__ import annotations

from dataclasses import replace

import coincurve
import pytest
import rlp
from hypothesis import given, settings
from hypothesis import strategies as st

from waku_legacy.crypto.payload import encode_payload
from waku_legacy.crypto.secp256k1 import public_key_of
from waku_legacy.errors import CryptoError, DecodeError, LimitExceeded
from waku_legacy.identity.topics import mailserver_request_key
from waku_legacy.mailserver_compat.wire.bloom import topic_to_bloom, topics_to_bloom
from waku_legacy.mailserver_compat.wire.envelope import Envelope
from waku_legacy.mailserver_compat.wire.request import (
    FieldOrder,
    MessagesRequest,
    RequestError,
    RequestForm,
    RequestLimitExceeded,
    decode_envelope_request,
    decode_p2p_request,
    decode_plain_request,
    decode_request_payload,
    default_request_key,
    encode_envelope_request,
    encode_plain_request,
    encode_request_payload,
    normalize_request,
)

CLIENT = coincurve.PrivateKey(b"\x33" * 32)
SERVER = coincurve.PrivateKey(b"\x44" * 32)
TOPIC = bytes.fromhex("deadbeef")
ID = b"\x11" * 32


def _request(**changes: object) -> MessagesRequest:
    base = MessagesRequest(
        request_id=ID, lower=1, upper=2, limit=0, cursor=b"", bloom=b"", topics=(TOPIC,)
    )
    return replace(base, **changes)  # type: ignore[arg-type]


requests = st.builds(
    MessagesRequest,
    request_id=st.binary(min_size=32, max_size=32),
    lower=st.integers(0, 2**32 - 1),
    upper=st.integers(0, 2**32 - 1),
    limit=st.integers(0, 2**32 - 1),
    cursor=st.one_of(st.just(b""), st.binary(min_size=36, max_size=36)),
    bloom=st.one_of(st.just(b""), st.binary(min_size=64, max_size=64)),
    topics=st.lists(st.binary(min_size=4, max_size=4), max_size=12).map(tuple),
    batch=st.booleans(),
)

# [id (11 x 32), from 1, to 2, limit 0, cursor "", bloom "", [deadbeef]] by hand:
#   a0 + 32 bytes | 01 | 02 | 80 | 80 | 80 | c5 84 deadbeef  = 44 bytes -> list prefix ec
PLAIN_RLP = bytes.fromhex("eca0" + "11" * 32 + "01028080" + "80" + "c584deadbeef")
# status-go order [lower 1, upper 2, bloom "", [deadbeef], limit 10, cursor "", batch true]
STATUS_GO_PAYLOAD = bytes.fromhex("cc010280c584deadbeef0a8001")
# spec order [lower 1, upper 2, bloom "", limit 10, cursor "", [deadbeef]]
SPEC_PAYLOAD = bytes.fromhex("cb0102800a80c584deadbeef")


# -- plain form -------------------------------------------------------------------------


def test_plain_request_hand_derived() -> None:
    assert encode_plain_request(_request()) == PLAIN_RLP
    decoded = decode_plain_request(PLAIN_RLP)
    assert decoded == _request()
    assert decoded.form is RequestForm.PLAIN and decoded.batch


@given(requests)
def test_plain_round_trip(request: MessagesRequest) -> None:
    assert decode_plain_request(encode_plain_request(request)) == replace(request, batch=True)


def test_plain_request_every_truncation_fails_typed() -> None:
    for cut in range(len(PLAIN_RLP)):
        with pytest.raises(RequestError):
            decode_plain_request(PLAIN_RLP[:cut])


def _plain(fields: list[object]) -> bytes:
    return rlp.encode(fields)


GOOD_FIELDS: list[object] = [ID, 1, 2, 0, b"", b"", [TOPIC]]


@pytest.mark.parametrize(
    ("index", "value", "needle"),
    [
        (0, b"\x11" * 31, "request id must be 32 bytes"),
        (0, [ID], "request id must be an RLP string"),
        (1, 2**32, "from is 5 bytes wide"),
        (2, [1], "to must be an integer"),
        (3, b"\x00\x05", "limit is not a minimal integer"),
        (4, bytes(35), "cursor must be empty or 36 bytes, got 35"),
        (4, bytes(40), "cursor must be empty or 36 bytes, got 40"),
        (5, bytes(63), "bloom must be empty or 64 bytes, got 63"),
        (6, TOPIC, "topics must be an RLP list"),
        (6, [b"abc"], "topic #0 must be 4 bytes"),
        (6, [TOPIC, [TOPIC]], "topic #1 must be an RLP string"),
    ],
)
def test_bad_plain_fields(index: int, value: object, needle: str) -> None:
    fields = list(GOOD_FIELDS)
    fields[index] = value
    with pytest.raises(RequestError, match="malformed mailserver request") as info:
        decode_plain_request(_plain(fields))
    assert needle in str(info.value)


def test_plain_item_count() -> None:
    with pytest.raises(RequestError, match="list of 7 items"):
        decode_plain_request(_plain([*GOOD_FIELDS, b"extra"]))
    with pytest.raises(RequestError, match="must be an RLP list"):
        decode_plain_request(rlp.encode(b"not a list"))


def test_topic_count_and_size_limits_at_decode() -> None:
    raw = encode_plain_request(_request(topics=(TOPIC,) * 1001))
    with pytest.raises(RequestLimitExceeded, match="1001 topics is over the limit of 1000") as info:
        decode_plain_request(raw)
    assert isinstance(info.value, LimitExceeded)
    assert len(decode_plain_request(raw, max_topics=2000).topics) == 1001
    with pytest.raises(RequestLimitExceeded, match="byte limit"):
        decode_plain_request(raw, max_size=100)


# -- deprecated payload, both field orders ----------------------------------------------


def test_status_go_order_hand_derived() -> None:
    request = _request(limit=10)
    assert encode_request_payload(request, FieldOrder.STATUS_GO) == STATUS_GO_PAYLOAD
    decoded = decode_request_payload(STATUS_GO_PAYLOAD, request_id=ID)
    assert decoded == replace(request, form=RequestForm.ENVELOPE_STATUS_GO)


def test_spec_order_hand_derived() -> None:
    request = _request(limit=10, batch=False)
    assert encode_request_payload(request, "spec") == SPEC_PAYLOAD
    decoded = decode_request_payload(SPEC_PAYLOAD, request_id=ID)
    assert decoded == replace(request, form=RequestForm.ENVELOPE_SPEC)


def test_spec_order_short_forms() -> None:
    bloom = topic_to_bloom(TOPIC)
    four = rlp.encode([5, 6, bloom, 7])
    assert (
        encode_request_payload(_request(lower=5, upper=6, bloom=bloom, limit=7, topics=()), "spec")
        == four
    )
    decoded = decode_request_payload(four, request_id=ID)
    assert (decoded.lower, decoded.upper, decoded.bloom, decoded.limit) == (5, 6, bloom, 7)
    assert decoded.cursor == b"" and decoded.topics == ()
    five = rlp.encode([5, 6, bloom, 7, b"c" * 36])
    assert decode_request_payload(five, request_id=ID).cursor == b"c" * 36


@given(requests, st.sampled_from(list(FieldOrder)))
def test_payload_round_trip(request: MessagesRequest, order: FieldOrder) -> None:
    decoded = decode_request_payload(encode_request_payload(request, order), request_id=ID)
    form = (
        RequestForm.ENVELOPE_STATUS_GO
        if order is FieldOrder.STATUS_GO
        else RequestForm.ENVELOPE_SPEC
    )
    batch = request.batch if order is FieldOrder.STATUS_GO else False
    assert decoded == replace(request, request_id=ID, batch=batch, form=form)


@pytest.mark.parametrize(
    ("payload", "needle"),
    [
        (rlp.encode([1, 2, b"", [TOPIC], 10, b""]), "neither status-go's"),
        (rlp.encode([1, 2, b""]), "neither status-go's"),
        (rlp.encode([1, 2, b"", [TOPIC], 10, b"", b"\x02"]), "batch must be a boolean"),
        (rlp.encode([1, 2, b"", 10, b"", TOPIC]), "topics must be an RLP list"),
        (rlp.encode(b"text"), "must be an RLP list"),
        (b"\xff", "not valid RLP"),
    ],
)
def test_bad_payloads(payload: bytes, needle: str) -> None:
    with pytest.raises(RequestError) as info:
        decode_request_payload(payload, request_id=ID)
    assert needle in str(info.value)


# -- deprecated envelope --------------------------------------------------------------


def test_default_key_is_the_status_offline_inbox_key() -> None:
    assert default_request_key() == mailserver_request_key()


@pytest.mark.parametrize("order", ["status-go", "spec"])
def test_envelope_request_symmetric_round_trip(order: str) -> None:
    request = _request(limit=20, cursor=b"\x07" * 36, bloom=topics_to_bloom([TOPIC]))
    envelope = encode_envelope_request(
        request, sign_with=CLIENT, field_order=order, now=1_700_000_000
    )
    assert envelope.expiry == 1_700_000_050 and envelope.ttl == 50 and envelope.topic == bytes(4)
    decoded = decode_envelope_request(envelope)
    assert decoded.request_id == envelope.hash()
    assert decoded.signer == public_key_of(CLIENT)
    assert (decoded.lower, decoded.upper, decoded.limit) == (1, 2, 20)
    assert (decoded.cursor, decoded.bloom, decoded.topics) == (
        request.cursor,
        request.bloom,
        (TOPIC,),
    )
    # and through the packet-level detector, from the envelope's wire bytes
    assert decode_p2p_request(envelope.encode()) == decoded


def test_envelope_request_asymmetric_and_pow() -> None:
    envelope = encode_envelope_request(
        _request(), sign_with=CLIENT, public_key=public_key_of(SERVER), target_pow=0.01, now=100
    )
    from waku_legacy.mailserver_compat.wire.pow import pow_of

    assert pow_of(envelope) >= 0.01
    decoded = decode_envelope_request(envelope, private_key=SERVER, symmetric_key=bytes(32))
    assert decoded.topics == (TOPIC,)
    with pytest.raises(CryptoError):
        decode_envelope_request(envelope)  # default symmetric key cannot open it


@settings(max_examples=20, deadline=None)
@given(requests, st.sampled_from(list(FieldOrder)))
def test_envelope_round_trip_property(request: MessagesRequest, order: FieldOrder) -> None:
    envelope = encode_envelope_request(
        request, sign_with=CLIENT, symmetric_key=b"k" * 32, field_order=order, now=10
    )
    decoded = decode_p2p_request(
        Envelope.decode(envelope.encode()).encode(), symmetric_key=b"k" * 32
    )
    assert (decoded.lower, decoded.upper, decoded.limit) == (
        request.lower,
        request.upper,
        request.limit,
    )
    assert (decoded.cursor, decoded.bloom, decoded.topics) == (
        request.cursor,
        request.bloom,
        request.topics,
    )
    assert decoded.request_id == envelope.hash()


def test_unsigned_envelope_request_is_refused() -> None:
    data = encode_payload(STATUS_GO_PAYLOAD, symmetric_key=default_request_key())
    envelope = Envelope(expiry=10, ttl=5, topic=bytes(4), data=data, nonce=0)
    with pytest.raises(RequestError, match="not signed"):
        decode_envelope_request(envelope)
    assert decode_envelope_request(envelope, require_signature=False).signer is None


def test_hand_built_status_go_envelope_request() -> None:
    data = encode_payload(
        STATUS_GO_PAYLOAD, sign_with=CLIENT, symmetric_key=mailserver_request_key()
    )
    envelope = Envelope(expiry=1000, ttl=50, topic=bytes(4), data=data, nonce=3)
    decoded = decode_p2p_request(envelope.encode())
    assert decoded.form is RequestForm.ENVELOPE_STATUS_GO
    assert decoded.request_id == envelope.hash()
    assert (decoded.lower, decoded.upper, decoded.limit, decoded.topics) == (1, 2, 10, (TOPIC,))


# -- detection of the 0x7e form -------------------------------------------------------


def test_p2p_detects_plain_form() -> None:
    assert decode_p2p_request(PLAIN_RLP) == _request()
    assert decode_p2p_request(rlp.decode(PLAIN_RLP)) == _request()


@pytest.mark.parametrize(
    "payload",
    [rlp.encode([1, 2, 3]), rlp.encode(b"x"), rlp.encode([1, 2, b"abc", b"", 0])],
)
def test_p2p_rejects_other_shapes(payload: bytes) -> None:
    with pytest.raises(RequestError, match="neither a request envelope"):
        decode_p2p_request(payload)


@settings(max_examples=300)
@given(st.binary(max_size=200))
def test_p2p_random_bytes_raise_typed_errors(payload: bytes) -> None:
    try:
        decode_p2p_request(payload)
    except (DecodeError, CryptoError):
        pass


# -- status-go's serving rules --------------------------------------------------------


def test_normalize_defaults() -> None:
    normal = normalize_request(_request(limit=0, upper=0, lower=5), now=1000)
    assert normal.limit == 1000 and normal.upper == 1060


def test_normalize_refusals() -> None:
    with pytest.raises(RequestLimitExceeded, match="limit 1001 is over the maximum of 1000"):
        normalize_request(_request(limit=1001))
    assert normalize_request(_request(limit=1000)).limit == 1000
    with pytest.raises(RequestError, match="inverted"):
        normalize_request(_request(lower=10, upper=9))
    with pytest.raises(RequestError, match="neither a bloom filter nor topics"):
        normalize_request(_request(topics=(), bloom=b""))


def test_topics_beat_bloom() -> None:
    other = bytes.fromhex("01020304")
    request = _request(bloom=topic_to_bloom(other), topics=(TOPIC,))
    assert request.matches_topic(TOPIC) and not request.matches_topic(other)
    assert normalize_request(request).bloom == b""
    bloom_only = _request(bloom=topic_to_bloom(other), topics=())
    assert bloom_only.matches_topic(other) and not bloom_only.matches_topic(TOPIC)
    assert normalize_request(bloom_only).bloom == topic_to_bloom(other)


def test_constructor_checks() -> None:
    with pytest.raises(RequestError):
        _request(request_id=b"short")
    with pytest.raises(RequestError):
        _request(limit=-1)
    with pytest.raises(RequestError):
        _request(topics=(b"abc",))
