"""Helpers several test files share (one copy, so they cannot drift apart)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

from Crypto.Hash import keccak as pycryptodome_keccak

__all__ = ["reference_keccak256", "reference_topic_hex", "wait_until"]


def reference_keccak256(data: bytes) -> bytes:
    """Keccak-256 by pycryptodome: an implementation independent of the package's own
    (eth-hash), to derive expected values from."""
    return pycryptodome_keccak.new(data=data, digest_bits=256).digest()


def reference_topic_hex(chat_id: str) -> str:
    """A chat's Waku v1 topic, keccak256(chat id)[:4], as 8 hex digits (reference keccak)."""
    return reference_keccak256(chat_id.encode()).hex()[:8]


async def wait_until(condition: Callable[[], object], *, what: str, timeout: float = 20.0) -> None:
    """Poll ``condition`` until it is true; AssertionError naming ``what`` after ``timeout``
    seconds (the longest any caller waited before these copies became one)."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.01)
