"""status-go's message ids, checked against Keccak-256 computed here with pycryptodome."""

from __future__ import annotations

import pytest
from Crypto.Hash import keccak

from tests.waku_legacy.history.status_messages import ALICE, application, chat
from waku_legacy.errors import CryptoError
from waku_legacy.history.ids import (
    legacy_message_id,
    message_id,
    message_id_aliases,
    normalize_id,
)


def _keccak(data: bytes) -> str:
    return "0x" + keccak.new(data=data, digest_bits=256).hexdigest()


def test_keccak_reference_is_keccak() -> None:
    # Keccak-256 of the empty string (not SHA3-256's a7ffc6f8…)
    assert _keccak(b"") == "0xc5d2460186f7233c927e7db2dcc703c0e500b653ca82273b7bfad8045d85a470"


def test_message_id_hashes_the_65_byte_key_then_the_application_bytes() -> None:
    # status-go protocol/v1/message_test.go TestMessageID: Keccak256(FromECDSAPub(key) || data)
    assert message_id(ALICE.public, b"test") == _keccak(ALICE.public + b"test")
    app = application(ALICE, 1, chat("hi"))
    assert message_id(ALICE.public, app) == _keccak(ALICE.public + app)


def test_a_compressed_or_bare_key_gives_the_same_id() -> None:
    compressed = ALICE.key.public_key.format(compressed=True)
    expected = _keccak(ALICE.public + b"test")
    assert message_id(compressed, b"test") == expected
    assert message_id(ALICE.public[1:], b"test") == expected


def test_legacy_id_hashes_the_compressed_key() -> None:
    compressed = ALICE.key.public_key.format(compressed=True)
    assert legacy_message_id(ALICE.public, b"test") == _keccak(compressed + b"test")
    assert message_id_aliases(ALICE.public, b"test") == (
        _keccak(ALICE.public + b"test"), _keccak(compressed + b"test"),
    )  # fmt: skip


def test_a_key_that_is_no_key_is_a_typed_error() -> None:
    with pytest.raises(CryptoError):
        message_id(b"\x04" + b"\x00" * 64, b"test")


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        ("0x" + "ab" * 32, "0x" + "ab" * 32),
        ("0X" + "AB" * 32, "0x" + "ab" * 32),
        ("AB" * 32, "0x" + "ab" * 32),
        ("  0x" + "ab" * 32 + "\n", "0x" + "ab" * 32),
        ("0x1234", "0x1234"),  # no id: matches nothing, kept as given
        ("0x" + "zz" * 32, "0x" + "zz" * 32),
    ],
)
def test_normalize_id(given: str, expected: str) -> None:
    assert normalize_id(given) == expected
