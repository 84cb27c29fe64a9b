"""The status-go mailserver DB key (40 bytes) and page cursor (its first 36 bytes).

``DB key = timestamp (uint32 big-endian) || envelope hash (32) || topic (4)`` where the
timestamp is the envelope's sent time, ``expiry - ttl`` (status-go ``NewDBKey(env.Expiry -
env.TTL, env.Topic, env.Hash())``). LevelDB stores envelopes under it, so iteration is in
sent-time order; PostgreSQL keeps it in the ``id`` column.

A cursor is ``DB key[:36]`` (timestamp and hash, no topic). Requests carry either no cursor
or exactly 36 bytes; status-go silently ignores a cursor of any other length, this module
rejects it with :class:`CursorError` so that a client bug is not mistaken for "page 1".
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from waku_legacy.errors import DecodeError
from waku_legacy.identity.topics import V1_TOPIC_SIZE

if TYPE_CHECKING:
    from waku_legacy.mailserver_compat.wire.envelope import Envelope

__all__ = [
    "CURSOR_SIZE",
    "DB_KEY_SIZE",
    "HASH_SIZE",
    "TIMESTAMP_SIZE",
    "CursorError",
    "DBKey",
    "check_cursor",
    "db_key_bound",
    "db_key_bytes",
    "db_key_for",
    "parse_cursor",
]

TIMESTAMP_SIZE = 4
HASH_SIZE = 32
CURSOR_SIZE = TIMESTAMP_SIZE + HASH_SIZE
DB_KEY_SIZE = CURSOR_SIZE + V1_TOPIC_SIZE
_U32 = (1 << 32) - 1


class CursorError(DecodeError):
    """A DB key or cursor of the wrong size or content."""


@dataclass(frozen=True, slots=True)
class DBKey:
    """A decoded 40-byte mailserver DB key."""

    timestamp: int
    envelope_hash: bytes
    topic: bytes

    def __post_init__(self) -> None:
        if not isinstance(self.timestamp, int) or not 0 <= self.timestamp <= _U32:
            raise CursorError("DB key", f"timestamp {self.timestamp!r} is not a uint32")
        if not isinstance(self.envelope_hash, bytes) or len(self.envelope_hash) != HASH_SIZE:
            raise CursorError("DB key", f"envelope hash must be {HASH_SIZE} bytes")
        if not isinstance(self.topic, bytes) or len(self.topic) != V1_TOPIC_SIZE:
            raise CursorError("DB key", f"topic must be {V1_TOPIC_SIZE} bytes")

    def encode(self) -> bytes:
        return db_key_bytes(self.timestamp, self.envelope_hash, self.topic)

    @classmethod
    def decode(cls, raw: bytes) -> DBKey:
        if not isinstance(raw, bytes | bytearray | memoryview):
            raise CursorError("DB key", f"expected bytes, got {type(raw).__name__}")
        if len(raw) != DB_KEY_SIZE:
            raise CursorError("DB key", f"must be {DB_KEY_SIZE} bytes, got {len(raw)}")
        raw = bytes(raw)
        return cls(
            timestamp=int.from_bytes(raw[:TIMESTAMP_SIZE], "big"),
            envelope_hash=raw[TIMESTAMP_SIZE:CURSOR_SIZE],
            topic=raw[CURSOR_SIZE:],
        )

    @property
    def cursor(self) -> bytes:
        """The 36-byte page cursor: timestamp and envelope hash."""
        return self.encode()[:CURSOR_SIZE]


def parse_cursor(raw: bytes) -> tuple[int, bytes] | None:
    """``(timestamp, envelope hash)`` of a 36-byte cursor; ``None`` for the empty cursor."""
    if not isinstance(raw, bytes | bytearray | memoryview):
        raise CursorError("cursor", f"expected bytes, got {type(raw).__name__}")
    if len(raw) == 0:
        return None
    if len(raw) != CURSOR_SIZE:
        raise CursorError("cursor", f"must be empty or {CURSOR_SIZE} bytes, got {len(raw)}")
    raw = bytes(raw)
    return int.from_bytes(raw[:TIMESTAMP_SIZE], "big"), raw[TIMESTAMP_SIZE:]


def check_cursor(raw: bytes, what: str = "cursor") -> bytes:
    """Return ``raw`` if it is a valid (empty or 36-byte) cursor, else raise CursorError."""
    if len(raw) not in (0, CURSOR_SIZE):
        raise CursorError(what, f"must be empty or {CURSOR_SIZE} bytes, got {len(raw)}")
    return bytes(raw)


def db_key_bound(timestamp: int) -> bytes:
    """A 40-byte key sorting before every key of ``timestamp`` (zero hash and topic).

    status-go ranges a query ``[lower, upper]`` as ``bound(lower) <= key < bound(upper+1)``.
    """
    if not 0 <= timestamp <= _U32 + 1:
        raise CursorError("DB key", f"timestamp {timestamp} is out of range")
    if timestamp == _U32 + 1:
        # upper = 2**32-1: status-go's uint32 upper+1 wraps to 0 (an empty range); the
        # range meant is "everything", so the bound sorts after every real key.
        return b"\xff" * DB_KEY_SIZE
    return timestamp.to_bytes(TIMESTAMP_SIZE, "big") + bytes(DB_KEY_SIZE - TIMESTAMP_SIZE)


def db_key_bytes(sent_time: int, envelope_hash: bytes, topic: bytes) -> bytes:
    """The 40-byte DB key of parts known to be of their sizes (a decoded envelope's uint32
    sent time and 4-byte topic, its 32-byte keccak): ``DBKey(...).encode()`` without the
    checks, for the migration's every envelope."""
    return sent_time.to_bytes(TIMESTAMP_SIZE, "big") + envelope_hash + topic


def db_key_for(envelope: Envelope) -> DBKey:
    """The key status-go stores ``envelope`` under (sent time, hash, topic)."""
    return DBKey(timestamp=envelope.sent_time, envelope_hash=envelope.hash(), topic=envelope.topic)
