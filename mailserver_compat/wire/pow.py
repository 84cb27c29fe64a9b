"""Waku v1 proof of work: measuring it and sealing envelopes to a target.

``PoW = 2**leading_zero_bits(keccak256(rlp([expiry, ttl, topic, data]) || nonce_be8))
/ (len(rlp([expiry, ttl, topic, data])) * ttl)`` — status-go's ``CalculatePoW``, including
the float arithmetic order (divide by the length, then by the TTL). A zero TTL would divide
by zero (Go's float64 gives +Inf, which made a ttl-0 envelope pass any PoW requirement for
free): an envelope that lives no time proves no work, so :func:`pow_of` gives it 0.
``extra_ttl`` is status-go's adjustment for an envelope sent slightly in the future: its PoW
is computed over ``ttl + (sent - now + 1)`` seconds.

Sealing searches nonces upwards from 0 and keeps the first whose PoW reaches the target,
as status-go's ``Seal`` does. status-go estimates the needed bits from ``20 + len(data)``
instead of the RLP length; here the target is checked with :func:`pow_of` itself, so a
sealed envelope always passes a receiver's ``PoW() >= target`` check.

The search absorbs the fixed prefix into a Keccak state once and, per nonce, copies that
state and absorbs only the 8 nonce bytes (pycryptodome's C state copy), so a nonce costs
the same whatever the data size. If that low-level interface is unavailable the search
falls back to hashing the whole preimage per nonce.
"""

from __future__ import annotations

import math
import struct

from waku_legacy.crypto.keccak import keccak256
from waku_legacy.errors import WakuLegacyError
from waku_legacy.mailserver_compat.wire.envelope import Envelope

__all__ = [
    "DEFAULT_MAX_ITERATIONS",
    "PowError",
    "leading_zero_bits",
    "pow_of",
    "required_leading_zero_bits",
    "seal",
]

DEFAULT_MAX_ITERATIONS = 1 << 22
_NONCE = struct.Struct(">Q")
_U64 = (1 << 64) - 1


class PowError(WakuLegacyError):
    """The PoW target could not be reached within the allowed number of nonces."""


def leading_zero_bits(digest: bytes) -> int:
    return len(digest) * 8 - int.from_bytes(digest, "big").bit_length()


def _pow_from(zero_bits: int, rlp_length: int, ttl: int) -> float:
    if ttl <= 0 or rlp_length <= 0:
        return 0.0  # no lifetime (or nothing hashed): no proof of work
    value = math.ldexp(1.0, zero_bits)
    value /= float(rlp_length)
    value /= float(ttl)
    return value


def pow_of(envelope: Envelope, *, extra_ttl: int = 0) -> float:
    """The envelope's proof of work as status-go computes it (0 for a zero TTL);
    ``extra_ttl`` seconds are added to the TTL (status-go's ``calculatePoW(diff)``)."""
    prefix = envelope.rlp_without_nonce()
    digest = keccak256(prefix + _NONCE.pack(envelope.nonce))
    if envelope.ttl <= 0:
        return 0.0
    return _pow_from(leading_zero_bits(digest), len(prefix), envelope.ttl + max(0, extra_ttl))


def required_leading_zero_bits(target_pow: float, rlp_length: int, ttl: int) -> int:
    """Fewest leading zero bits whose PoW reaches ``target_pow`` (at least 1, as status-go)."""
    work = target_pow * rlp_length * ttl
    if work <= 0 or not math.isfinite(work):
        return 1 if work <= 0 else 257
    return max(1, math.ceil(math.log2(work)))


class _PrefixedKeccak:
    """keccak256(prefix || suffix) for many suffixes, absorbing the prefix only once."""

    def __init__(self, prefix: bytes) -> None:
        self._prefix = prefix
        self._fast = False
        try:
            # Private pycryptodome names, absent from its stubs (the fast path needs them).
            from Crypto.Hash.keccak import _raw_keccak_lib as lib  # type: ignore[attr-defined]
            from Crypto.Util._raw_api import (  # type: ignore[attr-defined]
                SmartPointer,
                VoidPointer,
                c_size_t,
                c_ubyte,
                c_uint8_ptr,
                create_string_buffer,
                get_raw_buffer,
            )

            def new_state() -> SmartPointer:
                pointer = VoidPointer()
                # capacity 64 bytes = Keccak-256; 24 rounds
                if lib.keccak_init(pointer.address_of(), c_size_t(64), c_ubyte(24)):
                    raise RuntimeError("keccak_init failed")
                return SmartPointer(pointer.get(), lib.keccak_destroy)

            self._base = new_state()
            self._scratch = new_state()
            if lib.keccak_absorb(self._base.get(), c_uint8_ptr(prefix), c_size_t(len(prefix))):
                raise RuntimeError("keccak_absorb failed")
            self._lib = lib
            self._buffer = create_string_buffer(32, None)
            self._get_raw_buffer = get_raw_buffer
            self._size8 = c_size_t(8)
            self._size32 = c_size_t(32)
            self._keccak_padding = c_ubyte(0x01)
            self._fast = True
        except Exception:  # pragma: no cover - only without pycryptodome's raw interface
            self._fast = False

    def digest_with(self, suffix: bytes) -> bytes:
        if not self._fast:
            return keccak256(self._prefix + suffix)
        lib = self._lib
        scratch = self._scratch.get()
        lib.keccak_copy(self._base.get(), scratch)
        lib.keccak_absorb(scratch, suffix, self._size8)
        lib.keccak_digest(scratch, self._buffer, self._size32, self._keccak_padding)
        return self._get_raw_buffer(self._buffer)


def seal(
    expiry: int,
    ttl: int,
    topic: bytes,
    data: bytes,
    target_pow: float,
    *,
    max_iterations: int = DEFAULT_MAX_ITERATIONS,
) -> Envelope:
    """An envelope whose PoW reaches ``target_pow`` (nonce 0 when the target is <= 0).

    Raises :class:`PowError` after ``max_iterations`` nonces without success.
    """
    envelope = Envelope(expiry=expiry, ttl=ttl, topic=topic, data=data, nonce=0)
    if not target_pow > 0:  # also catches NaN
        return envelope
    if ttl <= 0:
        raise PowError(f"PoW target {target_pow} is unreachable with a zero TTL")
    prefix = envelope.rlp_without_nonce()
    bits = required_leading_zero_bits(target_pow, len(prefix), ttl)
    if bits > 256:
        raise PowError(f"PoW target {target_pow} is unreachable (needs {bits} zero bits)")
    hasher = _PrefixedKeccak(prefix)
    pack = _NONCE.pack
    threshold = 1 << (256 - bits)  # a digest below this has at least `bits` zero bits
    for nonce in range(min(max_iterations, _U64 + 1)):
        digest = hasher.digest_with(pack(nonce))
        value = int.from_bytes(digest, "big")
        if value < threshold:
            zero_bits = 256 - value.bit_length()
            if _pow_from(zero_bits, len(prefix), ttl) >= target_pow:
                return Envelope(expiry=expiry, ttl=ttl, topic=topic, data=data, nonce=nonce)
    raise PowError(
        f"PoW target {target_pow} (>= {bits} leading zero bits) not reached "
        f"in {max_iterations} nonces"
    )
