"""Three-word names and zQ3… keys against status-go's own test vectors."""

from __future__ import annotations

import pytest

from waku_legacy.errors import DecodeError
from waku_legacy.history.alias import (
    alias,
    alias_from_seed,
    compressed_key,
    is_alias,
    public_key_of_serialized,
)

# status-go protocol/identity/alias/generate_test.go (c72f491): TestGenerate
SEED_VECTORS = {42: "Hard Tame Brownbutterfly"}
# status-go: key -> name. generate_test.go TestGenerateFromPublicKeyString; the settings
# fixtures of api/backend_test.go and multiaccounts/settings/database_test.go pair the
# account's PublicKey with its generated Name.
KEY_VECTORS = {
    "0x04eedbaafd6adf4a9233a13e7b1c3c14461fffeba2e9054b8d456ce5f6ebeafadcbf3dce3716253fbc391277"
    "fa5a086b60b283daf61fb5b1f26895f456c2f31ae3": "Darkorange Blue Bubblefish",
    "0x04211fe0f69772ecf7eb0b5bfc7678672508a9fb01f2d699096f0d59ef7fe1a0cb1e648a80190db1c0f5f088"
    "872444d846f2956d0bd84069f3f9f69335af852ac0": "Jittery Cornflowerblue Kingbird",
}
# status-go api/multiformat/utils_test.go TestSerializeLegacyKey: key -> serialized key
SERIALIZED_VECTORS = {
    "0x04deaafa03e3a646e54a36ec3f6968c1d3686847d88420f00c0ab6ee517ee1893398fca28aacd2af74f265"
    "4738c21d10bad3d88dc64201ebe0de5cf1e313970d3d": (
        "zQ3shudJrBctPznsRLvbsCtvZFTdi3b34uzYDuqE9Wq9m9T1C"
    ),
}


@pytest.mark.parametrize(("seed", "name"), SEED_VECTORS.items())
def test_seed_vectors(seed: int, name: str) -> None:
    assert alias_from_seed(seed) == name


@pytest.mark.parametrize(("key", "name"), KEY_VECTORS.items())
def test_key_vectors(key: str, name: str) -> None:
    assert alias(key) == name
    assert alias(key.upper().replace("0X", "0x")) == name  # hex case does not matter
    assert is_alias(name)


def test_a_compressed_key_names_the_same_author() -> None:
    key = next(iter(KEY_VECTORS))
    x, y_odd = key[4:68], int(key[-1], 16) & 1
    assert alias(f"0x0{2 + y_odd}{x}") == KEY_VECTORS[key]


@pytest.mark.parametrize(("key", "serialized"), SERIALIZED_VECTORS.items())
def test_serialized_key_vectors(key: str, serialized: str) -> None:
    assert compressed_key(key) == serialized
    assert "0x" + public_key_of_serialized(serialized).hex() == key


def test_word_lists_are_status_gos() -> None:
    # data.go: 1389 adjectives ("Able" … ), 1704 animals ("Aardvark" …)
    from waku_legacy.history.alias import _words

    adjectives, animals = _words()
    assert (len(adjectives), len(animals)) == (1389, 1704)
    assert (adjectives[0], animals[0], animals[1]) == ("Able", "Aardvark", "Aardwolf")
    assert (adjectives[700], animals[1000]) == ("High", "Longhornbeetle")
    assert (adjectives[-1], animals[-1]) == ("Yellowgreen", "Zorilla")


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("darkorange blue bubblefish", True),  # strings.Title: first letters upper-cased
        ("Darkorange  Blue\tBubblefish", True),  # strings.Fields
        ("Darkorange Blue", False),
        ("Blue Bubblefish Darkorange", False),  # an animal is not an adjective
        ("Darkorange Blue Bubblefish Extra", False),
    ],
)
def test_is_alias(name: str, expected: bool) -> None:
    assert is_alias(name) is expected


@pytest.mark.parametrize("bad", ["", "0x", "0x04zz", "0x05" + "00" * 64, "0x04" + "00" * 64])
def test_a_key_that_is_no_key_is_a_typed_error(bad: str) -> None:
    with pytest.raises(DecodeError):
        alias(bad)
    with pytest.raises(DecodeError):
        compressed_key(bad)


@pytest.mark.parametrize(
    "bad", ["zQ3", "zQ3shudJrBctPznsRLvbsCtvZFTdi3b34uzYDuqE9Wq9m9T1", "Q3x", "z0O"]
)
def test_a_serialized_key_that_is_none_is_a_typed_error(bad: str) -> None:
    with pytest.raises(DecodeError):
        public_key_of_serialized(bad)
