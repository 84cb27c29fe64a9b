"""Mailserver history requests (8/WAKU-MAIL, packet 0x7e), in every form status-go reads.

Two wire forms share packet code 126; status-go tries the first and falls back to the
second (``handleP2PRequestCode``):

1. Deprecated: the packet holds an :class:`Envelope` whose data is a signed 26/WAKU-PAYLOAD,
   encrypted with the mailserver's symmetric key (PBKDF2 of ``status-offline-inbox`` by
   default) or to its public key. The payload's RLP is either status-go's struct
   ``[lower, upper, bloom, topics, limit, cursor, batch]`` (exactly 7 items, as Go's RLP
   decoder demands) or the 8/WAKU-MAIL spec's ``[lower, upper, bloom, limit]``, optionally
   followed by ``cursor`` and then ``[topics]``. The request id is the envelope hash and the
   payload must be signed (status-go's ``checkMsgSignature``).
2. Plain: ``[id (32), from, to, limit, cursor, bloom, [topics]]`` (status-go's
   ``MessagesRequest``); the mailserver serves it in batch mode.

Decoding checks structure and the limits that make a request safe to hold: integers are
minimal uint32s, the id is 32 bytes, the cursor empty or 36 bytes, the bloom empty or 64
bytes, each topic 4 bytes (status-go would pad or cut them), at most ``max_topics`` topics
(8/WAKU-MAIL allows 1000). :func:`normalize_request` then applies status-go's serving rules
(``SetDefaults`` + ``Validate``): limit 0 means 1000, a limit above 1000 is refused, upper 0
means now + 60 s, upper < lower is refused, bloom or topics is required, and when topics
are given the bloom is ignored (cleared in the normalised request).
"""

from __future__ import annotations

import enum
import functools
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, replace

import coincurve

from waku_legacy.crypto.payload import decode_payload, encode_payload
from waku_legacy.errors import DecodeError, LimitExceeded
from waku_legacy.identity.topics import V1_TOPIC_SIZE, mailserver_request_key
from waku_legacy.mailserver_compat.rlp_fields import (
    RlpItem,
    as_bool,
    as_bytes,
    as_list,
    as_uint,
    decode_rlp,
    describe,
    encode_rlp,
)
from waku_legacy.mailserver_compat.wire.bloom import BLOOM_SIZE, bloom_matches, topic_to_bloom
from waku_legacy.mailserver_compat.wire.cursor import CURSOR_SIZE
from waku_legacy.mailserver_compat.wire.envelope import (
    DEFAULT_MAX_ENVELOPE_SIZE,
    Envelope,
    EnvelopeError,
)
from waku_legacy.mailserver_compat.wire.pow import DEFAULT_MAX_ITERATIONS, seal

__all__ = [
    "DEFAULT_LIMIT",
    "DEFAULT_MAX_REQUEST_SIZE",
    "DEFAULT_REQUEST_TTL",
    "MAX_LIMIT",
    "MAX_REQUEST_TOPICS",
    "REQUEST_ID_SIZE",
    "UPPER_DEFAULT_MARGIN",
    "FieldOrder",
    "MessagesRequest",
    "RequestError",
    "RequestForm",
    "RequestLimitExceeded",
    "decode_envelope_request",
    "decode_p2p_request",
    "decode_plain_request",
    "decode_request_payload",
    "default_request_key",
    "encode_envelope_request",
    "encode_plain_request",
    "encode_request_payload",
    "normalize_request",
]

REQUEST_ID_SIZE = 32
MAX_LIMIT = 1000  # status-go maxMessagesRequestPayloadLimit
DEFAULT_LIMIT = 1000  # status-go maxQueryLimit, used when a request says 0
UPPER_DEFAULT_MARGIN = 60  # status-go whisperTTLSafeThreshold, seconds
MAX_REQUEST_TOPICS = 1000  # 8/WAKU-MAIL: topics = "[" *1000topic "]"
DEFAULT_MAX_REQUEST_SIZE = DEFAULT_MAX_ENVELOPE_SIZE
DEFAULT_REQUEST_TTL = 50  # status-go DefaultTTL, what its clients seal requests with
_U32 = (1 << 32) - 1
_WHAT = "mailserver request"


class RequestError(DecodeError):
    """A mailserver request that does not decode or breaks status-go's rules."""


class RequestLimitExceeded(RequestError, LimitExceeded):
    """A request over a count or size limit (topics, limit, bytes)."""


class FieldOrder(enum.StrEnum):
    """Field order of the deprecated (encrypted-envelope) request payload."""

    STATUS_GO = "status-go"  # [lower, upper, bloom, topics, limit, cursor, batch]
    SPEC = "spec"  # [lower, upper, bloom, limit, cursor, [topics]]


class RequestForm(enum.StrEnum):
    """Which wire form a request arrived in."""

    PLAIN = "plain"
    ENVELOPE_STATUS_GO = "envelope-status-go"
    ENVELOPE_SPEC = "envelope-spec"


def _check_u32(value: object, name: str) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value <= _U32:
        raise RequestError(_WHAT, f"{name} {value!r} is not a uint32")


@dataclass(frozen=True)
class MessagesRequest:
    """A history request. Times are seconds; ``cursor`` is empty or 36 bytes.

    For the deprecated envelope form ``request_id`` is the request envelope's hash and
    ``signer`` the 65-byte key that signed it.
    """

    request_id: bytes
    lower: int
    upper: int
    limit: int
    cursor: bytes
    bloom: bytes
    topics: tuple[bytes, ...]
    batch: bool = True
    signer: bytes | None = None
    form: RequestForm = RequestForm.PLAIN

    def __post_init__(self) -> None:
        if not isinstance(self.request_id, bytes) or len(self.request_id) != REQUEST_ID_SIZE:
            raise RequestError(_WHAT, f"request id must be {REQUEST_ID_SIZE} bytes")
        for name in ("lower", "upper", "limit"):
            _check_u32(getattr(self, name), name)
        if not isinstance(self.cursor, bytes) or len(self.cursor) not in (0, CURSOR_SIZE):
            raise RequestError(_WHAT, f"cursor must be empty or {CURSOR_SIZE} bytes")
        if not isinstance(self.bloom, bytes) or len(self.bloom) not in (0, BLOOM_SIZE):
            raise RequestError(_WHAT, f"bloom must be empty or {BLOOM_SIZE} bytes")
        topics = tuple(self.topics)
        for topic in topics:
            if not isinstance(topic, bytes) or len(topic) != V1_TOPIC_SIZE:
                raise RequestError(_WHAT, f"every topic must be {V1_TOPIC_SIZE} bytes")
        object.__setattr__(self, "topics", topics)

    def matches_topic(self, topic: bytes) -> bool:
        """Would status-go serve an envelope of ``topic``? Topics beat the bloom."""
        if self.topics:
            return topic in self.topics
        if self.bloom:
            return bloom_matches(self.bloom, topic_to_bloom(topic))
        return False


def normalize_request(request: MessagesRequest, *, now: int | None = None) -> MessagesRequest:
    """Apply status-go's defaults and validation before serving a request.

    ``RequestLimitExceeded`` for a limit above 1000, ``RequestError`` for an inverted range
    or a request with neither bloom nor topics.
    """
    limit = request.limit or DEFAULT_LIMIT
    if limit > MAX_LIMIT:
        raise RequestLimitExceeded(_WHAT, f"limit {limit} is over the maximum of {MAX_LIMIT}")
    upper = request.upper
    if upper == 0:
        current = int(time.time()) if now is None else now
        upper = min(current + UPPER_DEFAULT_MARGIN, _U32)
    if upper < request.lower:
        raise RequestError(_WHAT, f"query range is inverted: lower {request.lower} > upper {upper}")
    if not request.bloom and not request.topics:
        raise RequestError(_WHAT, "neither a bloom filter nor topics given")
    bloom = b"" if request.topics else request.bloom
    return replace(request, limit=limit, upper=upper, bloom=bloom)


# -- shared field reads ----------------------------------------------------------------


def _topics(item: RlpItem, max_topics: int) -> tuple[bytes, ...]:
    entries = as_list(item, _WHAT, "topics", RequestError)
    if len(entries) > max_topics:
        raise RequestLimitExceeded(
            _WHAT, f"{len(entries)} topics is over the limit of {max_topics}"
        )
    return tuple(
        as_bytes(entry, _WHAT, f"topic #{index}", RequestError, size=V1_TOPIC_SIZE)
        for index, entry in enumerate(entries)
    )


def _cursor(item: RlpItem) -> bytes:
    cursor = as_bytes(item, _WHAT, "cursor", RequestError)
    if len(cursor) not in (0, CURSOR_SIZE):
        raise RequestError(_WHAT, f"cursor must be empty or {CURSOR_SIZE} bytes, got {len(cursor)}")
    return cursor


def _bloom(item: RlpItem) -> bytes:
    bloom = as_bytes(item, _WHAT, "bloom", RequestError)
    if len(bloom) not in (0, BLOOM_SIZE):
        raise RequestError(_WHAT, f"bloom must be empty or {BLOOM_SIZE} bytes, got {len(bloom)}")
    return bloom


def _u32(item: RlpItem, name: str) -> int:
    return as_uint(item, _WHAT, name, RequestError, bits=32)


def _as_item(raw: bytes | RlpItem, max_size: int) -> RlpItem:
    if isinstance(raw, list):
        return raw
    return decode_rlp(raw, _WHAT, RequestError, max_size=max_size, too_large=RequestLimitExceeded)


# -- plain form ----------------------------------------------------------------------


def encode_plain_request(request: MessagesRequest) -> bytes:
    """``[id, from, to, limit, cursor, bloom, [topics]]`` (the 0x7e packet payload)."""
    return encode_rlp(
        [
            request.request_id,
            request.lower,
            request.upper,
            request.limit,
            request.cursor,
            request.bloom,
            list(request.topics),
        ]
    )


def decode_plain_request(
    raw: bytes | RlpItem,
    *,
    max_size: int = DEFAULT_MAX_REQUEST_SIZE,
    max_topics: int = MAX_REQUEST_TOPICS,
) -> MessagesRequest:
    """Decode the plain form from the packet payload bytes (or its decoded RLP item)."""
    fields = as_list(_as_item(raw, max_size), _WHAT, "the plain request", RequestError)
    if len(fields) != 7:
        raise RequestError(
            _WHAT,
            "a plain request is a list of 7 items [id, from, to, limit, cursor, bloom, "
            f"topics], got {len(fields)}",
        )
    return MessagesRequest(
        request_id=as_bytes(fields[0], _WHAT, "request id", RequestError, size=REQUEST_ID_SIZE),
        lower=_u32(fields[1], "from"),
        upper=_u32(fields[2], "to"),
        limit=_u32(fields[3], "limit"),
        cursor=_cursor(fields[4]),
        bloom=_bloom(fields[5]),
        topics=_topics(fields[6], max_topics),
        batch=True,
        form=RequestForm.PLAIN,
    )


# -- deprecated envelope form ----------------------------------------------------------


def encode_request_payload(
    request: MessagesRequest, field_order: FieldOrder | str = FieldOrder.STATUS_GO
) -> bytes:
    """The RLP plaintext payload of a deprecated request, in either field order."""
    order = FieldOrder(field_order)
    if order is FieldOrder.STATUS_GO:
        return encode_rlp(
            [
                request.lower,
                request.upper,
                request.bloom,
                list(request.topics),
                request.limit,
                request.cursor,
                b"\x01" if request.batch else b"",
            ]
        )
    fields: list[object] = [request.lower, request.upper, request.bloom, request.limit]
    if request.cursor or request.topics:
        fields.append(request.cursor)
    if request.topics:
        fields.append(list(request.topics))
    return encode_rlp(fields)


def decode_request_payload(
    raw: bytes,
    *,
    request_id: bytes,
    signer: bytes | None = None,
    max_topics: int = MAX_REQUEST_TOPICS,
) -> MessagesRequest:
    """Decode a deprecated request's RLP plaintext, detecting the field order."""
    item = decode_rlp(
        raw, _WHAT, RequestError, max_size=DEFAULT_MAX_REQUEST_SIZE, too_large=RequestLimitExceeded
    )
    fields = as_list(item, _WHAT, "the request payload", RequestError)
    if len(fields) == 7 and isinstance(fields[3], list):
        return MessagesRequest(
            request_id=request_id,
            lower=_u32(fields[0], "lower"),
            upper=_u32(fields[1], "upper"),
            bloom=_bloom(fields[2]),
            topics=_topics(fields[3], max_topics),
            limit=_u32(fields[4], "limit"),
            cursor=_cursor(fields[5]),
            batch=as_bool(fields[6], _WHAT, "batch", RequestError),
            signer=signer,
            form=RequestForm.ENVELOPE_STATUS_GO,
        )
    if 4 <= len(fields) <= 6 and isinstance(fields[3], bytes):
        return MessagesRequest(
            request_id=request_id,
            lower=_u32(fields[0], "lower"),
            upper=_u32(fields[1], "upper"),
            bloom=_bloom(fields[2]),
            limit=_u32(fields[3], "limit"),
            cursor=_cursor(fields[4]) if len(fields) >= 5 else b"",
            topics=_topics(fields[5], max_topics) if len(fields) == 6 else (),
            batch=False,
            signer=signer,
            form=RequestForm.ENVELOPE_SPEC,
        )
    shape = ", ".join(describe(field) for field in fields[:8])
    raise RequestError(
        _WHAT,
        "payload is neither status-go's [lower, upper, bloom, [topics], limit, cursor, batch] "
        f"nor the spec's [lower, upper, bloom, limit, cursor?, [topics]?]; got [{shape}]",
    )


@functools.cache
def default_request_key() -> bytes:
    """The default request key (PBKDF2 of ``status-offline-inbox``), derived once."""
    return mailserver_request_key()


def encode_envelope_request(
    request: MessagesRequest,
    *,
    sign_with: coincurve.PrivateKey,
    symmetric_key: bytes | None = None,
    public_key: bytes | None = None,
    field_order: FieldOrder | str = FieldOrder.STATUS_GO,
    ttl: int = DEFAULT_REQUEST_TTL,
    topic: bytes = bytes(V1_TOPIC_SIZE),
    now: int | None = None,
    target_pow: float = 0.0,
    padding: bytes | None = None,
    random_source: Callable[[int], bytes] = os.urandom,
    max_iterations: int = DEFAULT_MAX_ITERATIONS,
) -> Envelope:
    """A deprecated request envelope, as status-go clients build it.

    ``request.request_id`` is not sent: the id of such a request is the returned envelope's
    hash. Without keys the default request key is used (status-go's default password).
    Expiry is ``now + ttl``; the envelope is sealed to ``target_pow``.
    """
    if symmetric_key is not None and public_key is not None:
        raise TypeError("give symmetric_key or public_key, not both")
    if symmetric_key is None and public_key is None:
        symmetric_key = default_request_key()
    data = encode_payload(
        encode_request_payload(request, field_order),
        sign_with=sign_with,
        symmetric_key=symmetric_key,
        public_key=public_key,
        padding=padding,
        random_source=random_source,
    )
    current = int(time.time()) if now is None else now
    return seal(current + ttl, ttl, topic, data, target_pow, max_iterations=max_iterations)


def decode_envelope_request(
    envelope: Envelope,
    *,
    symmetric_key: bytes | None = None,
    private_key: coincurve.PrivateKey | None = None,
    require_signature: bool = True,
    max_topics: int = MAX_REQUEST_TOPICS,
) -> MessagesRequest:
    """Open a deprecated request envelope and decode its payload (either field order).

    Without keys the default request key is tried. ``CryptoError`` when no key opens it,
    ``PayloadError`` for a malformed plaintext, ``RequestError`` for an unsigned request or
    a payload that is not a request.
    """
    if symmetric_key is None and private_key is None:
        symmetric_key = default_request_key()
    opened = decode_payload(envelope.data, symmetric_key=symmetric_key, private_key=private_key)
    if require_signature and opened.signer is None:
        raise RequestError(_WHAT, "the request envelope's payload is not signed")
    return decode_request_payload(
        opened.payload,
        request_id=envelope.hash(),
        signer=opened.signer,
        max_topics=max_topics,
    )


def decode_p2p_request(
    payload: bytes | RlpItem,
    *,
    symmetric_key: bytes | None = None,
    private_key: coincurve.PrivateKey | None = None,
    require_signature: bool = True,
    max_size: int = DEFAULT_MAX_REQUEST_SIZE,
    max_topics: int = MAX_REQUEST_TOPICS,
) -> MessagesRequest:
    """Decode a 0x7e packet payload in whichever form it holds (envelope tried first)."""
    item = _as_item(payload, max_size)
    if isinstance(item, list) and len(item) == 5:
        try:
            envelope = Envelope.from_rlp_item(item, what="request envelope")
        except EnvelopeError as exc:
            envelope_problem = exc.reason
        else:
            return decode_envelope_request(
                envelope,
                symmetric_key=symmetric_key,
                private_key=private_key,
                require_signature=require_signature,
                max_topics=max_topics,
            )
    else:
        envelope_problem = f"not a 5-item envelope ({describe(item)})"
    if isinstance(item, list) and len(item) == 7:
        return decode_plain_request(item, max_topics=max_topics)
    raise RequestError(
        _WHAT,
        f"0x7e payload is neither a request envelope ({envelope_problem}) nor a plain "
        f"7-item request ({describe(item)})",
    )
