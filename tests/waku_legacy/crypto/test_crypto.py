"""Crypto primitives: ECIES against the EIP-8 vectors, signatures, AES-GCM."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from waku_legacy.crypto import ecies
from waku_legacy.crypto.keccak import KeccakState, keccak256
from waku_legacy.crypto.secp256k1 import (
    compress_public_key,
    ecdh_raw_x,
    private_key_from_bytes,
    public_key_of,
    recover_public_key,
    sign_recoverable,
    sign_rfc6979,
    uncompressed_public_key,
    verify_rfc6979,
)
from waku_legacy.crypto.symmetric import aes_gcm_decrypt, aes_gcm_encrypt
from waku_legacy.errors import CryptoError, SignatureError

KEY_A = private_key_from_bytes(bytes.fromhex("01" * 32))
KEY_B = private_key_from_bytes(bytes.fromhex("02" * 32))


@pytest.mark.parametrize("name", ["auth2_eip8_v4", "auth3_eip8_v56_extra"])
def test_ecies_decrypts_eip8_auth_vectors(vectors, name: str) -> None:
    # EIP-8 packets: 2-byte size prefix, then ECIES with the prefix as shared MAC data.
    # The HMAC only verifies if KDF, ECDH (raw x) and MAC input are all exactly right.
    data = vectors("rlpx-eip8.json")
    packet = bytes.fromhex(data[name])
    size = int.from_bytes(packet[:2], "big")
    assert len(packet) == 2 + size
    key_b = private_key_from_bytes(bytes.fromhex(data["static_key_b"]))
    plain = ecies.decrypt(key_b, packet[2:], shared_mac_data=packet[:2])
    assert plain[0] >= 0xC0  # an RLP list, per EIP-8


def test_ecies_decrypts_pre_eip8_auth_vector(vectors) -> None:
    data = vectors("rlpx-eip8.json")
    key_b = private_key_from_bytes(bytes.fromhex(data["static_key_b"]))
    plain = ecies.decrypt(key_b, bytes.fromhex(data["auth1_v4_format"]))
    assert len(plain) == 194  # sig 65 || keccak(eph pub) 32 || pub 64 || nonce 32 || 0x00


@settings(max_examples=25, deadline=None)
@given(st.binary(max_size=300), st.binary(max_size=8))
def test_ecies_round_trip(plaintext: bytes, mac_data: bytes) -> None:
    sealed = ecies.encrypt(public_key_of(KEY_B), plaintext, mac_data)
    assert len(sealed) == len(plaintext) + ecies.OVERHEAD
    assert ecies.decrypt(KEY_B, sealed, mac_data) == plaintext


def test_ecies_rejects_wrong_key_tamper_and_short_input() -> None:
    sealed = ecies.encrypt(public_key_of(KEY_B), b"hello")
    with pytest.raises(CryptoError, match="authentication failed"):
        ecies.decrypt(KEY_A, sealed)
    tampered = sealed[:-40] + bytes([sealed[-40] ^ 1]) + sealed[-39:]
    with pytest.raises(CryptoError, match="authentication failed"):
        ecies.decrypt(KEY_B, tampered)
    with pytest.raises(CryptoError, match="too short"):
        ecies.decrypt(KEY_B, sealed[:50])
    with pytest.raises(CryptoError, match="public key"):
        ecies.decrypt(KEY_B, b"\x04" + b"\x00" * 200)


def test_ecdh_is_symmetric_raw_x() -> None:
    shared = ecdh_raw_x(KEY_A, public_key_of(KEY_B))
    assert shared == ecdh_raw_x(KEY_B, public_key_of(KEY_A))
    assert len(shared) == 32
    # Private keys 1 and 2: the shared point is 2*G, whose x is a well-known constant.
    one = private_key_from_bytes((1).to_bytes(32, "big"))
    two = private_key_from_bytes((2).to_bytes(32, "big"))
    two_g_x = "c6047f9441ed7d6d3045406e95c07cd85c778e4b8cef3ca7abac09b95c709ee5"
    assert ecdh_raw_x(one, public_key_of(two)).hex() == two_g_x


def test_recoverable_signature_round_trip() -> None:
    digest = keccak256(b"payload")
    sig = sign_recoverable(digest, KEY_A)
    assert len(sig) == 65 and sig[64] in (0, 1)
    assert recover_public_key(digest, sig) == public_key_of(KEY_A)
    # Ethereum's 27/28 convention is accepted on input.
    assert recover_public_key(digest, sig[:64] + bytes([sig[64] + 27])) == public_key_of(KEY_A)
    assert verify_rfc6979(digest, sign_rfc6979(digest, KEY_A), public_key_of(KEY_A))
    assert not verify_rfc6979(digest, sign_rfc6979(digest, KEY_B), public_key_of(KEY_A))


def test_bad_signatures_raise_typed_errors() -> None:
    digest = keccak256(b"x")
    with pytest.raises(SignatureError, match="65 bytes"):
        recover_public_key(digest, b"\x00" * 64)
    with pytest.raises(SignatureError, match="recovery id"):
        recover_public_key(digest, b"\x01" * 64 + b"\x07")
    with pytest.raises(SignatureError):
        recover_public_key(digest, b"\x00" * 64 + b"\x00")
    with pytest.raises(SignatureError, match="32-byte digest"):
        sign_recoverable(b"short", KEY_A)


def test_key_validation() -> None:
    with pytest.raises(CryptoError, match="32 bytes"):
        private_key_from_bytes(b"\x01" * 31)
    with pytest.raises(CryptoError, match="out of range"):
        private_key_from_bytes(b"\x00" * 32)
    with pytest.raises(CryptoError, match="public key"):
        uncompressed_public_key(b"\x05" * 33)
    pub = public_key_of(KEY_A)
    assert uncompressed_public_key(compress_public_key(pub)) == pub
    assert uncompressed_public_key(pub[1:]) == pub


@settings(max_examples=25, deadline=None)
@given(st.binary(max_size=600))
def test_aes_gcm_round_trip(plaintext: bytes) -> None:
    key = bytes(range(32))
    sealed = aes_gcm_encrypt(key, plaintext)
    assert len(sealed) == len(plaintext) + 28
    assert aes_gcm_decrypt(key, sealed) == plaintext


def test_aes_gcm_layout_and_errors() -> None:
    from Crypto.Cipher import AES

    key, nonce = bytes(32), bytes(range(12))
    sealed = aes_gcm_encrypt(key, b"abc", nonce=nonce)
    # Independent layout check: ciphertext || tag || nonce.
    body, tag = AES.new(key, AES.MODE_GCM, nonce=nonce).encrypt_and_digest(b"abc")
    assert sealed == body + tag + nonce
    with pytest.raises(CryptoError, match="authentication failed"):
        aes_gcm_decrypt(bytes([1]) * 32, sealed)
    with pytest.raises(CryptoError, match="too short"):
        aes_gcm_decrypt(key, b"\x00" * 27)
    with pytest.raises(CryptoError, match="32 bytes"):
        aes_gcm_encrypt(b"short", b"")


def test_keccak256_known_digests_and_eth_hash() -> None:
    # Keccak-256 of "" and "abc" (the Keccak team's reference values, not SHA3-256's)
    assert keccak256(b"").hex() == (
        "c5d2460186f7233c927e7db2dcc703c0e500b653ca82273b7bfad8045d85a470"
    )
    assert keccak256(b"abc").hex() == (
        "4e03657aea45a94fc7d47ba826c8d667c0d1e6e33a64a036ec44f58fa12d6c45"
    )
    # every length around the 136-byte rate, and bytearray, as eth-hash computes them
    from eth_hash.auto import keccak as eth_keccak

    for size in [*range(0, 290), 1000, 100_000]:
        data = bytes((size * 7 + i) % 251 for i in range(size))
        assert keccak256(data) == eth_keccak(data)
        assert keccak256(bytearray(data)) == eth_keccak(data)


@pytest.mark.parametrize("value", ["text", memoryview(b"ab"), 3, None])
def test_keccak256_refuses_what_eth_hash_refuses(value: object) -> None:
    with pytest.raises(TypeError, match="bytes"):
        keccak256(value)  # type: ignore[arg-type]


def test_keccak256_from_threads() -> None:
    import threading

    from eth_hash.auto import keccak as eth_keccak

    wrong: list[int] = []

    def work(seed: int) -> None:
        for i in range(500):
            data = bytes([seed, i % 256]) * (i % 150)
            if keccak256(data) != eth_keccak(data):
                wrong.append(i)

    threads = [threading.Thread(target=work, args=(n,)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert wrong == []


def test_keccak_state_updates_after_digest() -> None:
    state = KeccakState(b"ab")
    assert state.digest() == keccak256(b"ab")
    state.update(b"c")
    assert state.digest() == keccak256(b"abc")
    clone = state.copy()
    clone.update(b"d")
    assert state.digest() == keccak256(b"abc")
    assert clone.digest() == keccak256(b"abcd")
