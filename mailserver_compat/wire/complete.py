"""The p2p request complete payload (packet 0x7d): how a mailserver ends a request.

status-go sends ONE RLP byte string (``p2p.Send(rw, 125, payload []byte)``) holding:

- success: ``request_id (32) || last_envelope_hash (32) || cursor (0 or 36)``;
- failure: ``b"ERROR=" || request_id (32) || error text``.

:meth:`RequestComplete.encode` returns that raw byte string — the *value* the packet layer
RLP-encodes as the packet payload — and :meth:`RequestComplete.decode` reads it back.
:meth:`encode_packet` / :meth:`decode_packet` include the RLP layer; ``decode_packet`` also
accepts the 8/WAKU-MAIL spec's list form ``[request_id, last_envelope_hash, cursor?]``.

Reading is a little stricter than status-go's client, which takes any 32..100 bytes and
quietly drops a partial hash or cursor: here the success form must be 32, 64 or 100 bytes.
As in status-go, a payload that starts with ``ERROR=`` and is long enough to hold an id is
read as a failure.
"""

from __future__ import annotations

from dataclasses import dataclass

from waku_legacy.errors import DecodeError
from waku_legacy.mailserver_compat.rlp_fields import (
    RlpItem,
    as_bytes,
    decode_rlp,
    describe,
    encode_rlp,
)
from waku_legacy.mailserver_compat.wire.cursor import CURSOR_SIZE

__all__ = [
    "DEFAULT_MAX_COMPLETE_SIZE",
    "ERROR_PREFIX",
    "ZERO_HASH",
    "RequestComplete",
    "RequestCompleteError",
]

ERROR_PREFIX = b"ERROR="
HASH_SIZE = 32
ZERO_HASH = bytes(HASH_SIZE)
DEFAULT_MAX_COMPLETE_SIZE = 1 << 20
_WHAT = "request complete payload"


class RequestCompleteError(DecodeError):
    """A 0x7d payload that is neither a completion nor an error report."""


@dataclass(frozen=True, slots=True)
class RequestComplete:
    """Result of a history request. ``error`` non-empty means the request failed."""

    request_id: bytes
    last_envelope_hash: bytes = ZERO_HASH
    cursor: bytes = b""
    error: str = ""

    def __post_init__(self) -> None:
        if not isinstance(self.request_id, bytes) or len(self.request_id) != HASH_SIZE:
            raise RequestCompleteError(_WHAT, f"request id must be {HASH_SIZE} bytes")
        if (
            not isinstance(self.last_envelope_hash, bytes)
            or len(self.last_envelope_hash) != HASH_SIZE
        ):
            raise RequestCompleteError(_WHAT, f"last envelope hash must be {HASH_SIZE} bytes")
        if not isinstance(self.cursor, bytes) or len(self.cursor) not in (0, CURSOR_SIZE):
            raise RequestCompleteError(_WHAT, f"cursor must be empty or {CURSOR_SIZE} bytes")
        if not isinstance(self.error, str):
            raise RequestCompleteError(_WHAT, "error must be a string")

    @classmethod
    def failure(cls, request_id: bytes, message: str) -> RequestComplete:
        return cls(request_id=request_id, error=message or "unknown error")

    @property
    def failed(self) -> bool:
        return bool(self.error)

    @property
    def has_more(self) -> bool:
        """A non-empty cursor: the request hit its limit and another page exists."""
        return bool(self.cursor)

    def encode(self) -> bytes:
        """The raw payload value (the packet layer RLP-encodes it as a byte string)."""
        if self.error:
            return ERROR_PREFIX + self.request_id + self.error.encode("utf-8")
        return self.request_id + self.last_envelope_hash + self.cursor

    def encode_packet(self) -> bytes:
        """The whole 0x7d packet payload: the raw value as an RLP string."""
        return encode_rlp(self.encode())

    @classmethod
    def decode(cls, raw: bytes) -> RequestComplete:
        """Read the raw payload value (after the packet's RLP string is unwrapped)."""
        if not isinstance(raw, bytes | bytearray | memoryview):
            raise RequestCompleteError(_WHAT, f"expected bytes, got {type(raw).__name__}")
        raw = bytes(raw)
        if raw.startswith(ERROR_PREFIX) and len(raw) >= len(ERROR_PREFIX) + HASH_SIZE:
            start = len(ERROR_PREFIX)
            message = raw[start + HASH_SIZE :].decode("utf-8", errors="replace")
            return cls.failure(raw[start : start + HASH_SIZE], message)
        if len(raw) not in (HASH_SIZE, 2 * HASH_SIZE, 2 * HASH_SIZE + CURSOR_SIZE):
            raise RequestCompleteError(
                _WHAT,
                f"{len(raw)} bytes: expected request id (32) [+ last envelope hash (32) "
                f"[+ cursor ({CURSOR_SIZE})]], i.e. 32, 64 or 100 bytes, or an ERROR= report",
            )
        return cls(
            request_id=raw[:HASH_SIZE],
            last_envelope_hash=raw[HASH_SIZE : 2 * HASH_SIZE] or ZERO_HASH,
            cursor=raw[2 * HASH_SIZE :],
        )

    @classmethod
    def from_rlp_item(cls, item: RlpItem) -> RequestComplete:
        """From the decoded packet payload: status-go's byte string or the spec's list."""
        if isinstance(item, bytes):
            return cls.decode(item)
        if not 2 <= len(item) <= 3:
            raise RequestCompleteError(
                _WHAT,
                f"the list form is [request id, last envelope hash, cursor?], got {describe(item)}",
            )
        cursor = b""
        if len(item) == 3:
            cursor = as_bytes(item[2], _WHAT, "cursor", RequestCompleteError)
            if len(cursor) not in (0, CURSOR_SIZE):
                raise RequestCompleteError(
                    _WHAT, f"cursor must be empty or {CURSOR_SIZE} bytes, got {len(cursor)}"
                )
        return cls(
            request_id=as_bytes(item[0], _WHAT, "request id", RequestCompleteError, size=HASH_SIZE),
            last_envelope_hash=as_bytes(
                item[1], _WHAT, "last envelope hash", RequestCompleteError, size=HASH_SIZE
            ),
            cursor=cursor,
        )

    @classmethod
    def decode_packet(
        cls, payload: bytes, *, max_size: int = DEFAULT_MAX_COMPLETE_SIZE
    ) -> RequestComplete:
        """Decode the whole 0x7d packet payload (RLP string, or the spec's RLP list)."""
        item = decode_rlp(payload, _WHAT, RequestCompleteError, max_size=max_size)
        return cls.from_rlp_item(item)
