"""How status-go names an author who has no ENS or display name: three words and a ``zQ3…`` key.

Three-word name (status-go ``protocol/identity/alias`` at ``c72f491``: ``generate.go``,
``flfsr.go``, ``data.go``, ``generate_test.go``; unchanged since ``ed5a5c154``, 2019-11-21,
and ``50ec6f97e`` "feat: display name" for its use): the seed is the public key's X
coordinate truncated to its least significant 64 bits (``uint64(publicKey.X.Int64())``); a
64-bit linear-feedback shift register with polynomial ``0xB8`` (taps at bits 3, 4, 5, 7: the
new low bit is the XOR of those bits of the state, the state shifts left by one) is stepped
three times; the three states, modulo the list lengths, pick an adjective, an adjective and
an animal, joined by spaces ("Darkorange Blue Bubblefish"). The word lists are status-go's,
in its order, in ``alias_words.txt`` (1389 adjectives, 1704 animals).

Compressed key (status-go ``SerializePublicKey``, ``services/utils``): multibase base58btc
(``z``) of the multicodec ``secp256k1-pub`` prefix (varint ``0xe7`` = ``e7 01``) and the
33-byte compressed key; it starts ``zQ3``.
"""

from __future__ import annotations

import functools
from importlib import resources

from waku_legacy.crypto.secp256k1 import compress_public_key, uncompressed_public_key
from waku_legacy.errors import CryptoError, DecodeError

__all__ = [
    "alias",
    "alias_from_seed",
    "compressed_key",
    "is_alias",
    "public_key_bytes",
    "public_key_of_serialized",
]

POLY = 0xB8
_MASK = (1 << 64) - 1
_TAPS = tuple(i for i in range(64) if POLY >> i & 1)
_SECP256K1_PUB_PREFIX = b"\xe7\x01"  # multicodec secp256k1-pub as a varint


@functools.cache
def _words() -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(adjectives, animals) from the package data file."""
    text = resources.files(__package__).joinpath("alias_words.txt").read_text("utf-8")
    lists: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        if line.startswith("[") and line.endswith("]"):
            current = lists.setdefault(line[1:-1], [])
        elif current is not None:
            current.append(line)
    return tuple(lists["adjectives"]), tuple(lists["animals"])


def _lfsr_next(state: int) -> int:
    bit = 0
    for tap in _TAPS:
        bit ^= state >> tap
    return ((state << 1) | (bit & 1)) & _MASK


def alias_from_seed(seed: int) -> str:
    """status-go's ``generate(seed)`` (its test vector: 42 -> "Hard Tame Brownbutterfly")."""
    adjectives, animals = _words()
    first = _lfsr_next(seed & _MASK)
    second = _lfsr_next(first)
    third = _lfsr_next(second)
    return (
        f"{adjectives[first % len(adjectives)]} {adjectives[second % len(adjectives)]} "
        f"{animals[third % len(animals)]}"
    )


def public_key_bytes(public_key_hex: str) -> bytes:
    """The 65-byte key of ``"0x04…"`` (or a 33-byte compressed ``"0x02…"``/``"0x03…"``);
    :class:`~waku_legacy.errors.DecodeError` when it is no secp256k1 public key."""
    text = public_key_hex.strip()
    if text[:2].lower() == "0x":
        text = text[2:]
    try:
        return uncompressed_public_key(bytes.fromhex(text))
    except (ValueError, CryptoError) as exc:
        raise DecodeError("public key", f"{public_key_hex[:80]!r} is no secp256k1 key") from exc


@functools.lru_cache(maxsize=65536)
def alias(public_key_hex: str) -> str:
    """The three-word name status-go shows for ``"0x04…"`` (``GenerateFromPublicKeyString``)."""
    x = public_key_bytes(public_key_hex)[1:33]
    return alias_from_seed(int.from_bytes(x[-8:], "big"))


@functools.lru_cache(maxsize=65536)
def compressed_key(public_key_hex: str) -> str:
    """status-go's serialized key ``"zQ3…"`` for ``"0x04…"``."""
    import base58

    compressed = compress_public_key(public_key_bytes(public_key_hex))
    return "z" + base58.b58encode(_SECP256K1_PUB_PREFIX + compressed).decode("ascii")


def public_key_of_serialized(text: str) -> bytes:
    """The 65-byte key of a ``"zQ3…"`` serialized key; :class:`~waku_legacy.errors.DecodeError`
    when it is none."""
    import base58

    try:
        raw = base58.b58decode(text[1:]) if text.startswith("z") else b""
        if not raw.startswith(_SECP256K1_PUB_PREFIX) or len(raw) != 2 + 33:
            raise ValueError("not e7 01 and a 33-byte key")
        return uncompressed_public_key(raw[2:])
    except (ValueError, CryptoError) as exc:
        raise DecodeError("serialized key", f"{text[:60]!r} is no zQ3… key: {exc}") from None


def is_alias(name: str) -> bool:
    """status-go's ``alias.IsAlias`` (``ops.go``): three space-separated words, each (first
    letter upper-cased, as ``strings.Title`` does) an adjective, an adjective, an animal.
    status-go refuses such a display name (``ValidateDisplayName``)."""
    adjectives, animals = _words_sets()
    parts = name.split()
    if len(parts) != 3:
        return False
    first, second, third = (p[:1].upper() + p[1:] for p in parts)
    return first in adjectives and second in adjectives and third in animals


@functools.cache
def _words_sets() -> tuple[frozenset[str], frozenset[str]]:
    adjectives, animals = _words()
    return frozenset(adjectives), frozenset(animals)
