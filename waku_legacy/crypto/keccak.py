"""Keccak-256 (the pre-standard SHA-3 that Ethereum and Waku v1 use)."""

from __future__ import annotations

from eth_hash.auto import keccak as _keccak

__all__ = ["KeccakState", "keccak256"]


def keccak256(data: bytes) -> bytes:
    """Keccak-256 digest of ``data``."""
    return _keccak(data)


class KeccakState:
    """A running Keccak-256 state that can be read (``digest``) and then updated again.

    RLPx's frame MACs need exactly that; pycryptodome's own object refuses updates after
    a digest, eth-hash's preimage copies the state on digest.
    """

    __slots__ = ("_state",)

    def __init__(self, data: bytes = b"") -> None:
        self._state = _keccak.new(data)

    def update(self, data: bytes) -> None:
        self._state.update(data)

    def digest(self) -> bytes:
        return self._state.digest()

    def copy(self) -> KeccakState:
        clone = KeccakState.__new__(KeccakState)
        clone._state = self._state.copy()
        return clone
