"""Message identities against the spec vectors and hand-derived values."""

from __future__ import annotations

import hashlib

from waku_legacy.identity.message_hash import (
    deterministic_hash,
    envelope_hash,
    message_hash,
    muid,
    store_v2_digest,
)
from waku_legacy.proto.waku_message_pb2 import WakuMessage


def test_spec_vectors(vectors) -> None:
    data = vectors("waku-message-hash.json")
    assert len(data["cases"]) >= 4
    for case in data["cases"]:
        got = deterministic_hash(
            case["pubsub_topic"],
            bytes.fromhex(case["payload"]),
            case["content_topic"],
            bytes.fromhex(case["meta"]),
            case["timestamp"],
        )
        assert got.hex() == case["expected"]


def test_protobuf_message_hash_matches_vector(vectors) -> None:
    case = vectors("waku-message-hash.json")["cases"][0]
    msg = WakuMessage(
        payload=bytes.fromhex(case["payload"]),
        content_topic=case["content_topic"],
        meta=bytes.fromhex(case["meta"]),
        timestamp=case["timestamp"],
        version=1,  # version is not part of the hash
    )
    assert message_hash(case["pubsub_topic"], msg).hex() == case["expected"]


def test_unset_timestamp_still_appends_eight_zero_bytes() -> None:
    # nwaku/go-waku behaviour (js-waku omits them): derived by hand from the rule.
    expected = hashlib.sha256(b"/p" + b"\x01" + b"/c" + b"" + bytes(8)).digest()
    assert deterministic_hash("/p", b"\x01", "/c") == expected
    assert message_hash("/p", WakuMessage(payload=b"\x01", content_topic="/c")) == expected


def test_envelope_hash_is_keccak256() -> None:
    # keccak256("") and keccak256("abc"): well-known constants.
    assert envelope_hash(b"").hex() == (
        "c5d2460186f7233c927e7db2dcc703c0e500b653ca82273b7bfad8045d85a470"
    )
    assert envelope_hash(b"abc").hex() == (
        "4e03657aea45a94fc7d47ba826c8d667c0d1e6e33a64a036ec44f58fa12d6c45"
    )


def test_store_v2_digest_and_muid() -> None:
    assert store_v2_digest("/c", b"xy") == hashlib.sha256(b"/cxy").digest()
    m = muid("/net", "/c", b"mm", b"pp")
    assert m == hashlib.sha256(b"/net/cmmpp").digest() + b"mm"
