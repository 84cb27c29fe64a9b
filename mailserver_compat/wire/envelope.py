"""The Waku v1 envelope (6/WAKU1) and its RLP codec.

Wire form: the RLP list ``[expiry u32, ttl u32, topic (4 bytes), data, nonce u64]`` with
integers in minimal form. The envelope hash is keccak256 of exactly those bytes; the sent
time is ``expiry - ttl`` (seconds).

Decoding follows status-go (go-ethereum's RLP decoder on the ``Envelope`` struct): exactly
five items — a sixth item is rejected ("input list has too many elements" in Go), not
ignored — integers minimal and within their Go width, the topic exactly 4 bytes. Every
canonical input therefore re-encodes to the same bytes, so :meth:`Envelope.hash` of a
decoded envelope equals keccak256 of the bytes received.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import rlp

from waku_legacy.errors import DecodeError, LimitExceeded
from waku_legacy.identity.message_hash import envelope_hash
from waku_legacy.identity.topics import V1_TOPIC_SIZE
from waku_legacy.limits import MAX_MESSAGE_SIZE
from waku_legacy.mailserver_compat.rlp_fields import (
    RlpItem,
    as_bytes,
    as_list,
    as_uint,
    decode_rlp,
    encode_rlp,
)

__all__ = [
    "DEFAULT_MAX_ENVELOPE_SIZE",
    "ENVELOPE_HEADER_LENGTH",
    "Envelope",
    "EnvelopeError",
    "EnvelopeTooLarge",
    "decode_many",
    "encode_many",
]

# status-go's MaxMessageSize: the largest packet (and so envelope) a node ever accepts.
DEFAULT_MAX_ENVELOPE_SIZE = MAX_MESSAGE_SIZE
# status-go's EnvelopeHeaderLength: the fixed size it adds to len(data) for accounting.
ENVELOPE_HEADER_LENGTH = 20

_U32 = (1 << 32) - 1
_U64 = (1 << 64) - 1


class EnvelopeError(DecodeError):
    """An envelope (or a list of envelopes) that is not a valid Waku v1 envelope."""


class EnvelopeTooLarge(EnvelopeError, LimitExceeded):
    """An envelope or envelope list over the configured size limit."""


def _check_uint(value: object, name: str, maximum: int) -> None:
    if not isinstance(value, int) or isinstance(value, bool):
        raise EnvelopeError("envelope", f"{name} must be an int, got {type(value).__name__}")
    if not 0 <= value <= maximum:
        raise EnvelopeError("envelope", f"{name} {value} is out of range 0..{maximum}")


@dataclass(frozen=True, slots=True)
class Envelope:
    """A Waku v1 envelope. ``data`` is the (usually encrypted) 26/WAKU-PAYLOAD."""

    expiry: int
    ttl: int
    topic: bytes
    data: bytes
    nonce: int

    def __post_init__(self) -> None:
        _check_uint(self.expiry, "expiry", _U32)
        _check_uint(self.ttl, "ttl", _U32)
        _check_uint(self.nonce, "nonce", _U64)
        if not isinstance(self.topic, bytes) or len(self.topic) != V1_TOPIC_SIZE:
            raise EnvelopeError("envelope", f"topic must be {V1_TOPIC_SIZE} bytes")
        if not isinstance(self.data, bytes):
            raise EnvelopeError("envelope", f"data must be bytes, got {type(self.data).__name__}")

    # -- wire form ---------------------------------------------------------------------

    def to_rlp_item(self) -> list[object]:
        return [self.expiry, self.ttl, self.topic, self.data, self.nonce]

    def encode(self) -> bytes:
        """The envelope's RLP bytes (what is hashed, stored and sent)."""
        return encode_rlp([self.expiry, self.ttl, self.topic, self.data, self.nonce])

    def rlp_without_nonce(self) -> bytes:
        """RLP of ``[expiry, ttl, topic, data]``: the PoW preimage before the nonce."""
        return encode_rlp([self.expiry, self.ttl, self.topic, self.data])

    @classmethod
    def from_rlp_item(cls, item: RlpItem, *, what: str = "envelope") -> Envelope:
        """Build an envelope from an already decoded RLP item (e.g. one of a packet's)."""
        # Fast path for well-formed input (the common case when reading stores): the same
        # checks as below, without per-field calls; anything odd takes the slow path, which
        # names the problem.
        if type(item) is list and len(item) == 5:
            expiry, ttl, topic, data, nonce = item
            if (
                type(expiry) is bytes
                and type(ttl) is bytes
                and type(topic) is bytes
                and type(data) is bytes
                and type(nonce) is bytes
                and len(expiry) <= 4
                and len(ttl) <= 4
                and len(nonce) <= 8
                and len(topic) == V1_TOPIC_SIZE
                and expiry[:1] != b"\x00"
                and ttl[:1] != b"\x00"
                and nonce[:1] != b"\x00"
            ):
                envelope = object.__new__(cls)
                # slot descriptors: bypass the frozen __setattr__ and __post_init__ (the
                # checks above are the same ones)
                _SET_EXPIRY(envelope, int.from_bytes(expiry, "big"))
                _SET_TTL(envelope, int.from_bytes(ttl, "big"))
                _SET_TOPIC(envelope, topic)
                _SET_DATA(envelope, data)
                _SET_NONCE(envelope, int.from_bytes(nonce, "big"))
                return envelope
        fields = as_list(item, what, "the envelope", EnvelopeError)
        if len(fields) != 5:
            raise EnvelopeError(
                what,
                f"an envelope is a list of 5 items [expiry, ttl, topic, data, nonce], "
                f"got {len(fields)}",
            )
        return cls(
            expiry=as_uint(fields[0], what, "expiry", EnvelopeError, bits=32),
            ttl=as_uint(fields[1], what, "ttl", EnvelopeError, bits=32),
            topic=as_bytes(fields[2], what, "topic", EnvelopeError, size=V1_TOPIC_SIZE),
            data=as_bytes(fields[3], what, "data", EnvelopeError),
            nonce=as_uint(fields[4], what, "nonce", EnvelopeError, bits=64),
        )

    @classmethod
    def decode(cls, raw: bytes, *, max_size: int = DEFAULT_MAX_ENVELOPE_SIZE) -> Envelope:
        """Decode one envelope's RLP bytes (exactly one item, no trailing bytes)."""
        if type(raw) is bytes and 0 < len(raw) <= max_size:
            try:
                item = rlp.decode(raw, strict=True)
            except Exception:
                pass  # decode again below for a precise error
            else:
                return cls.from_rlp_item(item)
        item = decode_rlp(
            raw, "envelope", EnvelopeError, max_size=max_size, too_large=EnvelopeTooLarge
        )
        return cls.from_rlp_item(item)

    # -- derived values -----------------------------------------------------------------

    def hash(self) -> bytes:
        """keccak256 of the envelope's RLP (status-go's ``Envelope.Hash``)."""
        return envelope_hash(self.encode())

    @property
    def sent_time(self) -> int:
        """Seconds since the epoch when the envelope was sent: ``expiry - ttl``.

        Computed in uint32 arithmetic as status-go does (its DB keys and ``Sent`` field),
        so a malformed envelope with ``ttl > expiry`` wraps around rather than going
        negative; DB keys built from it then sort exactly where status-go put them.
        """
        return (self.expiry - self.ttl) & _U32

    @property
    def size(self) -> int:
        """status-go's accounting size: 20 + len(data)."""
        return ENVELOPE_HEADER_LENGTH + len(self.data)

    def bloom(self) -> bytes:
        """The 64-byte bloom filter of the envelope's topic (status-go's quirk included)."""
        from waku_legacy.mailserver_compat.wire.bloom import topic_to_bloom

        return topic_to_bloom(self.topic)


_SET_EXPIRY, _SET_TTL, _SET_TOPIC, _SET_DATA, _SET_NONCE = (
    Envelope.__dict__[name].__set__ for name in ("expiry", "ttl", "topic", "data", "nonce")
)


def decode_many(
    raw_list_rlp: bytes,
    *,
    max_size: int = DEFAULT_MAX_ENVELOPE_SIZE,
    max_count: int | None = None,
) -> list[Envelope]:
    """Decode a packet payload holding an RLP list of envelopes (packet codes 1 and 127)."""
    what = "envelope list"
    item = decode_rlp(
        raw_list_rlp, what, EnvelopeError, max_size=max_size, too_large=EnvelopeTooLarge
    )
    items = as_list(item, what, "the payload", EnvelopeError)
    if max_count is not None and len(items) > max_count:
        raise EnvelopeTooLarge(what, f"{len(items)} envelopes is over the limit of {max_count}")
    return [
        Envelope.from_rlp_item(entry, what=f"envelope #{index}")
        for index, entry in enumerate(items)
    ]


def encode_many(envelopes: Iterable[Envelope]) -> bytes:
    """RLP list of envelopes, as packets 1 (messages) and 127 (p2p message) carry them."""
    return encode_rlp([envelope.to_rlp_item() for envelope in envelopes])
