"""Keccak-256 (the pre-standard SHA-3 that Ethereum and Waku v1 use)."""

from __future__ import annotations

import threading
from typing import Any

from Crypto.Hash import keccak as _pycryptodome_keccak
from Crypto.Hash.keccak import _raw_keccak_lib  # type: ignore[attr-defined]  # private, not in the stubs
from Crypto.Util import _raw_api
from eth_hash.auto import keccak as _eth_keccak

__all__ = ["KeccakState", "keccak256"]

# keccak256 calls pycryptodome's C sponge (the backend eth-hash picks here) directly, on one
# state per thread that it resets: eth-hash's call and pycryptodome's Keccak_Hash object (a
# new C state with its destructor, buffers and argument wrappers each time) cost ~4 us a
# hash against ~2 us, and the readable history does three per message. pycryptodome loads
# its C library through cffi when cffi is installed (it is: cryptography and coincurve need
# it); with the ctypes backend instead, eth-hash does the hashing.
_CAPACITY_BYTES = 64  # twice the 32-byte digest: Keccak-256 (rate 136 bytes)
_ROUNDS = 24
_PADDING = 0x01  # the original Keccak padding, not SHA-3's 0x06
_DIRECT = getattr(_raw_api, "backend", None) == "cffi" and hasattr(_raw_keccak_lib, "keccak_reset")
_ffi: Any = getattr(_raw_api, "ffi", None)
_sponge = threading.local()


def _new_sponge() -> tuple[Any, Any]:
    """This thread's (C sponge, 32-byte digest buffer)."""
    pointer = _ffi.new("void **")
    if _raw_keccak_lib.keccak_init(pointer, _CAPACITY_BYTES, _ROUNDS):
        raise RuntimeError("keccak_init failed")
    sponge = _ffi.gc(pointer[0], _raw_keccak_lib.keccak_destroy), _ffi.new("uint8_t[32]")
    _sponge.pair = sponge
    return sponge


def keccak256(data: bytes) -> bytes:
    """Keccak-256 digest of ``data`` (bytes or bytearray; TypeError for anything else, as
    eth-hash)."""
    if not _DIRECT:
        return _eth_keccak(data)
    if type(data) is not bytes:
        if not isinstance(data, bytes | bytearray):
            raise TypeError(
                f"Can only compute the hash of `bytes` or `bytearray` values, not {data!r}"
            )
        data = _ffi.from_buffer(data)
    try:
        state, out = _sponge.pair
    except AttributeError:
        state, out = _new_sponge()
    if (
        _raw_keccak_lib.keccak_reset(state)
        or _raw_keccak_lib.keccak_absorb(state, data, len(data))
        or _raw_keccak_lib.keccak_digest(state, out, 32, _PADDING)
    ):
        raise RuntimeError("keccak failed")
    digest: bytes = _ffi.buffer(out)[:]  # a copy: the buffer is this thread's next digest
    return digest


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
