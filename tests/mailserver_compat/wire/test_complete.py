"""Request complete payload (0x7d): status-go's concatenation, errors, the spec's list."""

from __future__ import annotations

import pytest
import rlp
from hypothesis import given
from hypothesis import strategies as st

from waku_legacy.errors import DecodeError
from waku_legacy.mailserver_compat.wire.complete import (
    ZERO_HASH,
    RequestComplete,
    RequestCompleteError,
)

REQ, LAST, CURSOR = b"\x11" * 32, b"\x22" * 32, b"\x33" * 36


def test_success_hand_derived() -> None:
    done = RequestComplete(request_id=REQ, last_envelope_hash=LAST, cursor=CURSOR)
    assert done.encode() == REQ + LAST + CURSOR
    # 100 bytes -> long string prefix b8 64
    assert done.encode_packet() == b"\xb8\x64" + REQ + LAST + CURSOR
    assert RequestComplete.decode(REQ + LAST + CURSOR) == done
    assert RequestComplete.decode_packet(done.encode_packet()) == done
    assert done.has_more and not done.failed


def test_without_cursor_and_id_only() -> None:
    assert RequestComplete.decode(REQ + LAST) == RequestComplete(REQ, LAST)
    assert RequestComplete.decode(REQ) == RequestComplete(REQ, ZERO_HASH)
    assert not RequestComplete.decode(REQ + LAST).has_more


def test_error_hand_derived() -> None:
    failed = RequestComplete.failure(REQ, "boom")
    assert failed.encode() == b"ERROR=" + REQ + b"boom"
    # 6 + 32 + 4 = 42 bytes -> short string prefix 0x80 + 42 = 0xaa
    assert failed.encode_packet() == b"\xaa" + b"ERROR=" + REQ + b"boom"
    decoded = RequestComplete.decode_packet(failed.encode_packet())
    assert decoded.failed and decoded.error == "boom" and decoded.request_id == REQ


def test_spec_list_form() -> None:
    packet = rlp.encode([REQ, LAST, CURSOR])
    assert RequestComplete.decode_packet(packet) == RequestComplete(REQ, LAST, CURSOR)
    assert RequestComplete.decode_packet(rlp.encode([REQ, LAST])) == RequestComplete(REQ, LAST)


completes = st.builds(
    RequestComplete,
    request_id=st.binary(min_size=32, max_size=32).filter(lambda b: not b.startswith(b"ERROR=")),
    last_envelope_hash=st.binary(min_size=32, max_size=32),
    cursor=st.one_of(st.just(b""), st.binary(min_size=36, max_size=36)),
    error=st.one_of(st.just(""), st.text(min_size=1, max_size=50)),
)


@given(completes)
def test_round_trip(done: RequestComplete) -> None:
    decoded = RequestComplete.decode_packet(done.encode_packet())
    if done.error:
        assert decoded == RequestComplete.failure(done.request_id, done.error)
    else:
        assert decoded == done


@pytest.mark.parametrize(
    ("packet", "needle"),
    [
        (rlp.encode(REQ[:31]), "31 bytes"),
        (rlp.encode(REQ + LAST + CURSOR[:35]), "99 bytes"),
        (rlp.encode(REQ + LAST + CURSOR + b"x"), "101 bytes"),
        (rlp.encode([REQ]), "list form"),
        (rlp.encode([REQ, LAST, CURSOR, b""]), "list form"),
        (rlp.encode([REQ, [LAST]]), "last envelope hash must be an RLP string"),
        (rlp.encode([REQ, LAST, b"x" * 40]), "cursor must be empty or 36 bytes"),
        (rlp.encode([REQ[:5], LAST]), "request id must be 32 bytes"),
        (b"", "empty"),
        (b"\xb8", "not valid RLP"),
    ],
)
def test_bad_payloads(packet: bytes, needle: str) -> None:
    with pytest.raises(RequestCompleteError, match="malformed request complete payload") as info:
        RequestComplete.decode_packet(packet)
    assert needle in str(info.value)


def test_size_limit() -> None:
    with pytest.raises(RequestCompleteError, match="over the 50-byte limit"):
        RequestComplete.decode_packet(rlp.encode(REQ + LAST), max_size=50)


@given(st.binary(max_size=150))
def test_random_bytes(packet: bytes) -> None:
    for decoder in (RequestComplete.decode_packet, RequestComplete.decode):
        try:
            decoder(packet)
        except DecodeError:
            pass
