"""RLPx frame codec: go-ethereum's golden frame, round trips, MAC and size checks, snappy."""

from __future__ import annotations

import hashlib

import pytest
import rlp
import snappy
from hypothesis import given, settings
from hypothesis import strategies as st

from waku_legacy.crypto.keccak import KeccakState, keccak256
from waku_legacy.crypto.secp256k1 import generate_private_key, public_key_of
from waku_legacy.mailserver_compat.rlpx import compression
from waku_legacy.mailserver_compat.rlpx import handshake as hs
from waku_legacy.mailserver_compat.rlpx.errors import (
    FrameAuthenticationError,
    MessageTooLarge,
    RlpxDecodeError,
)
from waku_legacy.mailserver_compat.rlpx.frame import FrameCodec


class _ConstantHash:
    """go-ethereum's test fakeHash: absorbs nothing, always sums to 32 x 0x01."""

    def update(self, data: bytes) -> None:
        pass

    def digest(self) -> bytes:
        return b"\x01" * 32


def test_golden_frame_from_go_ethereum_rlpx_test() -> None:
    # p2p/rlpx TestFrameReadWrite: AES = MAC = keccak256(""), constant MAC hashes, message
    # code 8 with payload rlp([1, 2, 3, 4]); the expected bytes are geth's golden value.
    empty = keccak256(b"")
    golden = bytes.fromhex(
        "00828ddae471818bb0bfa6b551d1cb42"
        "01010101010101010101010101010101"
        "ba628a4ba590cb43f7848f41c4382885"
        "01010101010101010101010101010101"
    )
    secrets = hs.Secrets(empty, empty, _ConstantHash(), _ConstantHash(), b"")  # type: ignore[arg-type]
    assert FrameCodec(secrets).encode(b"\x08" + rlp.encode([1, 2, 3, 4])) == golden
    reader = FrameCodec(hs.Secrets(empty, empty, _ConstantHash(), _ConstantHash(), b""))  # type: ignore[arg-type]
    assert reader.feed(golden) == [b"\x08" + rlp.encode([1, 2, 3, 4])]


def _handshake_secrets() -> tuple[hs.Secrets, hs.Secrets]:
    """The session secrets of a fresh handshake: the initiator's, the recipient's."""
    key_a, key_b = generate_private_key(), generate_private_key()
    a = hs.Initiator(key_a, public_key_of(key_b))
    result = hs.Recipient(key_b).read_auth(a.auth_packet)
    assert result is not None
    ack, b_secrets, _ = result
    a_result = a.read_ack(ack)
    assert a_result is not None
    return a_result[0], b_secrets


def _pair() -> tuple[FrameCodec, FrameCodec]:
    a_secrets, b_secrets = _handshake_secrets()
    return FrameCodec(a_secrets), FrameCodec(b_secrets)


def test_frame_bytes_follow_the_spec_step_by_step() -> None:
    """A second, literal derivation of one frame from the spec's formulas."""
    from Crypto.Cipher import AES

    secrets, _ = _handshake_secrets()
    egress = secrets.egress_mac.copy()
    wire = FrameCodec(secrets).encode(b"\x10hello")

    ctr = AES.new(secrets.aes, AES.MODE_CTR, nonce=b"", initial_value=bytes(16))
    ecb = AES.new(secrets.mac, AES.MODE_ECB)
    header_ct = ctr.encrypt(b"\x00\x00\x06\xc2\x80\x80" + bytes(10))
    seed = bytes(x ^ y for x, y in zip(ecb.encrypt(egress.digest()[:16]), header_ct, strict=True))
    egress.update(seed)
    header_mac = egress.digest()[:16]
    body_ct = ctr.encrypt(b"\x10hello" + bytes(10))
    egress.update(body_ct)
    digest = egress.digest()
    egress.update(bytes(x ^ y for x, y in zip(ecb.encrypt(digest[:16]), digest[:16], strict=True)))
    assert wire == header_ct + header_mac + body_ct + egress.digest()[:16]


@settings(max_examples=40, deadline=None)
@given(st.lists(st.binary(min_size=1, max_size=600), min_size=1, max_size=5), st.integers(1, 97))
def test_round_trip_in_arbitrary_chunks(frames: list[bytes], chunk: int) -> None:
    a, b = _pair()
    wire = b"".join(a.encode(f) for f in frames)
    got: list[bytes] = []
    for start in range(0, len(wire), chunk):
        got += b.feed(wire[start : start + chunk])
    assert got == frames
    assert b.buffered == 0


@pytest.mark.parametrize("flip", [0, 20, 35, 47])  # header ct, header mac, body ct, body mac
def test_any_flipped_bit_fails_authentication(flip: int) -> None:
    a, b = _pair()
    wire = bytearray(a.encode(b"\x10" + b"x" * 15))
    wire[flip] ^= 0x01
    with pytest.raises(FrameAuthenticationError, match="MAC mismatch"):
        b.feed(bytes(wire))


def test_truncated_frame_waits_then_completes() -> None:
    a, b = _pair()
    wire = a.encode(b"\x10payload")
    assert b.feed(wire[:31]) == []
    assert b.feed(wire[31:-1]) == []
    assert b.feed(wire[-1:]) == [b"\x10payload"]


def test_oversized_header_is_refused_before_the_body_arrives() -> None:
    a_secrets, b_secrets = _handshake_secrets()
    sender, receiver = FrameCodec(a_secrets), FrameCodec(b_secrets, max_frame_size=1024)
    wire = sender.encode(b"\x10" + bytes(5000))
    with pytest.raises(MessageTooLarge, match="over the 1024 limit"):
        receiver.feed(wire[:32])


def test_snappy_round_trip_and_declared_length() -> None:
    data = b"waku " * 1000
    packed = compression.compress(data)
    assert compression.declared_length(packed) == len(data)
    assert compression.decompress(packed) == data
    assert snappy.uncompress(packed) == data  # the library agrees (interoperability)


def test_snappy_bomb_refused_by_declared_length_before_decompressing() -> None:
    # 17 MiB of zeros packs ~21:1; the varint declares 17 MiB: refused without inflating.
    bomb = snappy.compress(bytes(17 << 20))
    assert len(bomb) < 1 << 20
    with pytest.raises(MessageTooLarge, match="over the 16777215-byte limit"):
        compression.decompress(bomb)
    # A forged header claiming 1 GiB in front of a tiny body is refused the same way.
    forged = bytes([0x80, 0x80, 0x80, 0x80, 0x04]) + b"\x00"
    with pytest.raises(MessageTooLarge, match="declares 1073741824 bytes"):
        compression.decompress(forged)
    with pytest.raises(MessageTooLarge):
        compression.decompress(snappy.compress(bytes(2048)), limit=1024)


def test_snappy_lying_length_and_corruption_are_decode_errors() -> None:
    packed = bytearray(compression.compress(b"abc" * 50))
    packed[0] += 1  # declares one more byte than it produces
    with pytest.raises(RlpxDecodeError):
        compression.decompress(bytes(packed))
    with pytest.raises(RlpxDecodeError, match="varint"):
        compression.decompress(b"\xff\xff\xff\xff\xff\xff")


def test_keccak_state_matches_hashlib_style_incremental_use() -> None:
    # The MAC relies on digest-then-update; check it against a fresh hash of the whole input.
    state = KeccakState(b"abc")
    state.digest()
    state.update(b"def")
    assert state.digest() == keccak256(b"abcdef")
    assert hashlib.sha3_256(b"x").digest() != keccak256(b"x")  # keccak, not SHA3-256
