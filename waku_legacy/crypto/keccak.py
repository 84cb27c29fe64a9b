"""Keccak-256 (the pre-standard SHA-3 that Ethereum and Waku v1 use)."""

from __future__ import annotations

from Crypto.Hash import keccak as _pycryptodome_keccak
from Crypto.Hash.keccak import _raw_keccak_lib  # type: ignore[attr-defined]  # private, not in the stubs
from eth_hash.auto import keccak as _keccak

__all__ = ["KeccakState", "keccak256"]


def keccak256(data: bytes) -> bytes:
    """Keccak-256 digest of ``data``."""
    return _keccak(data)


class KeccakState:
    """A running Keccak-256 state that can be read (``digest``) and then updated again.

    RLPx's frame MACs need exactly that; pycryptodome's own object refuses updates after
    a digest unless asked. eth-hash's preimage object allows it but keeps every byte ever
    absorbed (to support ``copy``), which made each RLPx session hold all the frames it
    ever sent and received; this state keeps only the 200-byte sponge.
    """

    __slots__ = ("_state",)

    def __init__(self, data: bytes = b"") -> None:
        self._state = _pycryptodome_keccak.new(
            data=bytes(data), digest_bits=256, update_after_digest=True
        )

    def update(self, data: bytes) -> None:
        self._state.update(data)

    def digest(self) -> bytes:
        return self._state.digest()

    def copy(self) -> KeccakState:
        clone = KeccakState()
        source, target = self._state, clone._state
        # Keccak_Hash has no copy(); its private fields do it (pycryptodome's stubs omit them).
        sponges = source._state, target._state  # type: ignore[attr-defined]  # private, see above
        if _raw_keccak_lib.keccak_copy(sponges[0].get(), sponges[1].get()):
            raise RuntimeError("keccak_copy failed")
        target._digest_done = source._digest_done  # type: ignore[attr-defined]  # private
        return clone
