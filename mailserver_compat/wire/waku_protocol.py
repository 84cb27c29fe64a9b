"""The waku/1 devp2p capability (6/WAKU1 as status-go runs it), sans-IO.

Packet codes (128 codes, offset 0x10 on the wire): 0 status, 1 messages, 11 batch ack,
12 message response, 22 status update, 125 p2p request complete, 126 p2p request,
127 p2p message.

The status payload (also the status update's) is a list of ``[key, value]`` options:
0 PoW requirement (float64 bits as u64), 1 bloom (64 bytes), 2 light node (bool),
3 confirmations (bool), 4 packet rate limits ``[ip, peer, topic]``, 5 topic interest (list
of 4-byte topics, at most 10000), 6 bytes rate limits. Unknown keys are ignored; when a
peer gives topic interest its bloom is ignored (status-go ``setOptions``). Missing options
in the handshake status take status-go's ``WithDefaults``: PoW 0.001, full-node bloom.

:class:`WakuPeerState` is the per-peer protocol state: feed it each capability message
(``receive(code, payload)``), get typed events back; it enforces "status first" and keeps
what the peer advertised (PoW, bloom or topic interest) for :meth:`WakuPeerState.wants`.
"""

from __future__ import annotations

import enum
import math
import struct
from collections.abc import Sequence
from dataclasses import dataclass, field

from waku_legacy.crypto.keccak import keccak256
from waku_legacy.errors import DecodeError, LimitExceeded
from waku_legacy.identity.topics import V1_TOPIC_SIZE
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
from waku_legacy.mailserver_compat.rlpx.p2p import ProtocolSpec
from waku_legacy.mailserver_compat.wire.bloom import (
    BLOOM_SIZE,
    FULL_BLOOM,
    bloom_matches,
    is_full_bloom,
    topic_to_bloom,
)
from waku_legacy.mailserver_compat.wire.complete import RequestComplete
from waku_legacy.mailserver_compat.wire.envelope import DEFAULT_MAX_ENVELOPE_SIZE

__all__ = [
    "DEFAULT_POW_REQUIREMENT",
    "MAX_TOPIC_INTEREST",
    "WAKU_CAPABILITY",
    "WAKU_NAME",
    "WAKU_VERSION",
    "BatchAcknowledged",
    "EnvelopeRejection",
    "EnvelopesReceived",
    "MessageResponseReceived",
    "MessagesResponse",
    "P2PMessagesReceived",
    "P2PRequestReceived",
    "PacketCode",
    "RateLimits",
    "RequestCompleteReceived",
    "StatusKey",
    "StatusOptions",
    "StatusReceived",
    "WakuEvent",
    "WakuLimitExceeded",
    "WakuPeerState",
    "WakuProtocolError",
    "bits_to_float",
    "encode_batch_ack",
    "encode_envelope_list",
    "float_to_bits",
    "split_rlp_list",
]

WAKU_NAME = "waku"
WAKU_VERSION = 1
WAKU_CAPABILITY = ProtocolSpec(WAKU_NAME, WAKU_VERSION, 128)
MAX_TOPIC_INTEREST = 10_000
DEFAULT_POW_REQUIREMENT = 0.001  # status-go defaultMinPoW, assumed when a peer gives none
_U64 = (1 << 64) - 1
_DOUBLE = struct.Struct(">d")
_QWORD = struct.Struct(">Q")


class WakuProtocolError(DecodeError):
    """A waku/1 packet that does not decode or is not allowed here."""


class WakuLimitExceeded(WakuProtocolError, LimitExceeded):
    """A waku/1 packet over a count or size limit."""


class PacketCode(enum.IntEnum):
    STATUS = 0
    MESSAGES = 1
    BATCH_ACKNOWLEDGED = 11
    MESSAGE_RESPONSE = 12
    STATUS_UPDATE = 22
    P2P_REQUEST_COMPLETE = 125
    P2P_REQUEST = 126
    P2P_MESSAGE = 127


class StatusKey(enum.IntEnum):
    POW_REQUIREMENT = 0
    BLOOM = 1
    LIGHT_NODE = 2
    CONFIRMATIONS = 3
    PACKET_RATE_LIMITS = 4
    TOPIC_INTEREST = 5
    BYTES_RATE_LIMITS = 6


@dataclass(frozen=True, slots=True)
class RateLimits:
    ip: int = 0
    peer: int = 0
    topic: int = 0


def float_to_bits(value: float) -> int:
    bits: int = _QWORD.unpack(_DOUBLE.pack(value))[0]
    return bits


def bits_to_float(bits: int) -> float:
    value: float = _DOUBLE.unpack(_QWORD.pack(bits))[0]
    return value


# -- RLP list helpers -----------------------------------------------------------------------


def _length_prefix(length: int, offset: int) -> bytes:
    if length < 56:
        return bytes([offset + length])
    raw = length.to_bytes((length.bit_length() + 7) // 8, "big")
    return bytes([offset + 55 + len(raw)]) + raw


def encode_envelope_list(encoded_envelopes: Sequence[bytes]) -> bytes:
    """RLP list of already-encoded envelopes (packets 1 and 127), without re-encoding."""
    body = b"".join(encoded_envelopes)
    return _length_prefix(len(body), 0xC0) + body


def _item_end(data: bytes, pos: int, end: int, what: str) -> int:
    """End offset of the RLP item starting at ``pos`` (header checks only)."""
    first = data[pos]
    if first < 0x80:
        return pos + 1
    if first < 0xB8:
        size, start = first - 0x80, pos + 1
    elif first < 0xC0:
        n = first - 0xB7
        size, start = int.from_bytes(data[pos + 1 : pos + 1 + n], "big"), pos + 1 + n
    elif first < 0xF8:
        size, start = first - 0xC0, pos + 1
    else:
        n = first - 0xF7
        size, start = int.from_bytes(data[pos + 1 : pos + 1 + n], "big"), pos + 1 + n
    if start + size > end:
        raise WakuProtocolError(what, f"item at byte {pos} runs past the end", offset=pos)
    return start + size


def split_rlp_list(payload: bytes, what: str, *, max_items: int | None = None) -> list[bytes]:
    """The encoded items of an RLP list, each as its own bytes (no content decoding).

    Used for envelope lists so that each envelope is kept exactly as received and only
    decoded (strictly) where needed.
    """
    if not payload or payload[0] < 0xC0:
        raise WakuProtocolError(what, "expected an RLP list")
    end = _item_end(payload, 0, len(payload), what)
    if end != len(payload):
        raise WakuProtocolError(what, f"{len(payload) - end} trailing bytes after the list")
    first = payload[0]
    pos = 1 if first < 0xF8 else 1 + (first - 0xF7)
    items: list[bytes] = []
    while pos < end:
        item_end = _item_end(payload, pos, end, what)
        items.append(payload[pos:item_end])
        pos = item_end
        if max_items is not None and len(items) > max_items:
            raise WakuLimitExceeded(what, f"more than {max_items} items")
    return items


# -- status options -------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class StatusOptions:
    """Options of a status (handshake) or status update packet; ``None`` = not given."""

    pow_requirement: float | None = None
    bloom: bytes | None = None
    light_node: bool | None = None
    confirmations: bool | None = None
    packet_rate_limits: RateLimits | None = None
    topic_interest: tuple[bytes, ...] | None = None
    bytes_rate_limits: RateLimits | None = None

    def encode(self) -> bytes:
        """status-go's EncodeRLP: ``[[key, value], ...]`` for the options given, by key."""
        options: list[tuple[StatusKey, object]] = []
        if self.pow_requirement is not None:
            options.append((StatusKey.POW_REQUIREMENT, float_to_bits(self.pow_requirement)))
        if self.bloom is not None:
            options.append((StatusKey.BLOOM, self.bloom))
        if self.light_node is not None:
            options.append((StatusKey.LIGHT_NODE, self.light_node))
        if self.confirmations is not None:
            options.append((StatusKey.CONFIRMATIONS, self.confirmations))
        if self.packet_rate_limits is not None:
            limits = self.packet_rate_limits
            options.append((StatusKey.PACKET_RATE_LIMITS, [limits.ip, limits.peer, limits.topic]))
        if self.topic_interest is not None:
            options.append((StatusKey.TOPIC_INTEREST, list(self.topic_interest)))
        if self.bytes_rate_limits is not None:
            limits = self.bytes_rate_limits
            options.append((StatusKey.BYTES_RATE_LIMITS, [limits.ip, limits.peer, limits.topic]))
        return encode_rlp([[int(key), value] for key, value in options])

    @classmethod
    def decode(cls, payload: bytes, *, what: str = "waku status") -> StatusOptions:
        item = decode_rlp(payload, what, WakuProtocolError, max_size=DEFAULT_MAX_ENVELOPE_SIZE)
        values: dict[StatusKey, object] = {}
        for index, entry in enumerate(as_list(item, what, "the options", WakuProtocolError)):
            pair = as_list(entry, what, f"option #{index}", WakuProtocolError)
            if len(pair) < 2:
                raise WakuProtocolError(what, f"option #{index} has no value ({describe(pair)})")
            key = as_uint(pair[0], what, f"option #{index} key", WakuProtocolError, bits=64)
            try:
                status_key = StatusKey(key)
            except ValueError:
                continue  # a newer peer's option: ignored for forward compatibility
            values[status_key] = _decode_option(status_key, pair[1], what)
        options = cls(**{_FIELD_OF[key]: value for key, value in values.items()})  # type: ignore[arg-type]
        options.validate(what)
        return options

    def validate(self, what: str = "waku status") -> None:
        pow_value = self.pow_requirement
        if pow_value is not None and (not math.isfinite(pow_value) or pow_value < 0):
            raise WakuProtocolError(what, f"invalid PoW requirement {pow_value!r}")
        if self.bloom is not None and len(self.bloom) not in (0, BLOOM_SIZE):
            raise WakuProtocolError(what, f"bloom filter must be 64 bytes, got {len(self.bloom)}")
        if self.topic_interest is not None and len(self.topic_interest) > MAX_TOPIC_INTEREST:
            raise WakuLimitExceeded(
                what, f"{len(self.topic_interest)} topics of interest, over {MAX_TOPIC_INTEREST}"
            )


_FIELD_OF = {
    StatusKey.POW_REQUIREMENT: "pow_requirement",
    StatusKey.BLOOM: "bloom",
    StatusKey.LIGHT_NODE: "light_node",
    StatusKey.CONFIRMATIONS: "confirmations",
    StatusKey.PACKET_RATE_LIMITS: "packet_rate_limits",
    StatusKey.TOPIC_INTEREST: "topic_interest",
    StatusKey.BYTES_RATE_LIMITS: "bytes_rate_limits",
}


def _rate_limits(value: RlpItem, what: str, name: str) -> RateLimits:
    fields = as_list(value, what, name, WakuProtocolError, size=3)
    ip, peer, topic = (
        as_uint(f, what, f"{name}[{i}]", WakuProtocolError, bits=64) for i, f in enumerate(fields)
    )
    return RateLimits(ip, peer, topic)


def _decode_option(key: StatusKey, value: RlpItem, what: str) -> object:
    name = _FIELD_OF[key]
    if key is StatusKey.POW_REQUIREMENT:
        return bits_to_float(as_uint(value, what, name, WakuProtocolError, bits=64))
    if key is StatusKey.BLOOM:
        return as_bytes(value, what, name, WakuProtocolError)
    if key in (StatusKey.LIGHT_NODE, StatusKey.CONFIRMATIONS):
        return as_bool(value, what, name, WakuProtocolError)
    if key is StatusKey.TOPIC_INTEREST:
        topics = as_list(value, what, name, WakuProtocolError)
        if len(topics) > MAX_TOPIC_INTEREST:
            raise WakuLimitExceeded(
                what, f"{len(topics)} topics of interest, over {MAX_TOPIC_INTEREST}"
            )
        return tuple(
            as_bytes(t, what, f"topic of interest #{i}", WakuProtocolError, size=V1_TOPIC_SIZE)
            for i, t in enumerate(topics)
        )
    return _rate_limits(value, what, name)


# -- message response (code 12) -------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class EnvelopeRejection:
    envelope_hash: bytes
    code: int
    description: str


@dataclass(frozen=True, slots=True)
class MessagesResponse:
    """status-go MultiVersionResponse version 1: ``[1, [batch hash, [[hash, code, text]]]]``."""

    batch_hash: bytes
    errors: tuple[EnvelopeRejection, ...] = ()

    def encode(self) -> bytes:
        errors = [[e.envelope_hash, e.code, e.description.encode()] for e in self.errors]
        return encode_rlp([1, [self.batch_hash, errors]])

    @classmethod
    def decode(cls, payload: bytes) -> MessagesResponse | None:
        """``None`` for a version this node does not know (status-go ignores those)."""
        what = "waku message response"
        item = decode_rlp(payload, what, WakuProtocolError, max_size=DEFAULT_MAX_ENVELOPE_SIZE)
        fields = as_list(item, what, "the response", WakuProtocolError, size=2)
        if as_uint(fields[0], what, "version", WakuProtocolError, bits=64) != 1:
            return None
        body = as_list(fields[1], what, "response", WakuProtocolError, size=2)
        errors = []
        for index, entry in enumerate(as_list(body[1], what, "errors", WakuProtocolError)):
            parts = as_list(entry, what, f"error #{index}", WakuProtocolError, size=3)
            errors.append(
                EnvelopeRejection(
                    as_bytes(parts[0], what, "envelope hash", WakuProtocolError, size=32),
                    as_uint(parts[1], what, "error code", WakuProtocolError, bits=64),
                    as_bytes(parts[2], what, "description", WakuProtocolError).decode(
                        "utf-8", "replace"
                    ),
                )
            )
        return cls(as_bytes(body[0], what, "hash", WakuProtocolError, size=32), tuple(errors))


# -- events ---------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class StatusReceived:
    options: StatusOptions
    update: bool  # False for the handshake status, True for a status update


@dataclass(frozen=True, slots=True)
class EnvelopesReceived:
    """Packet 1: envelopes exactly as received, and keccak256 of the packet payload (the
    batch hash confirmations refer to)."""

    envelopes: tuple[bytes, ...]
    batch_hash: bytes


@dataclass(frozen=True, slots=True)
class P2PMessagesReceived:
    """Packet 127 (mailserver responses): envelopes exactly as received."""

    envelopes: tuple[bytes, ...]


@dataclass(frozen=True, slots=True)
class P2PRequestReceived:
    """Packet 126: the raw request payload (decoded by the mailserver, which has the keys)."""

    payload: bytes


@dataclass(frozen=True, slots=True)
class RequestCompleteReceived:
    complete: RequestComplete


@dataclass(frozen=True, slots=True)
class BatchAcknowledged:
    batch_hash: bytes


@dataclass(frozen=True, slots=True)
class MessageResponseReceived:
    response: MessagesResponse


WakuEvent = (
    StatusReceived
    | EnvelopesReceived
    | P2PMessagesReceived
    | P2PRequestReceived
    | RequestCompleteReceived
    | BatchAcknowledged
    | MessageResponseReceived
)


# -- per-peer state -------------------------------------------------------------------------


@dataclass(slots=True)
class WakuPeerState:
    """What one peer advertised, and the decoding of its packets (status must come first).

    ``max_envelopes`` bounds envelopes per packet (a 1 MiB packet holds at most ~20000
    minimal envelopes anyway).
    """

    max_envelopes: int = 100_000
    # The two states: False = handshake, only the peer's Status may come (anything else is a
    # WakuProtocolError); True = session, every packet but a second Status.
    status_received: bool = False
    # What the peer advertised (Status, then Status updates); status-go's defaults until then.
    pow_requirement: float = 0.0  # minimum PoW of envelopes it wants sent to it
    bloom: bytes = FULL_BLOOM  # topics it wants, when it sent no topic interest
    topic_interest: frozenset[bytes] | None = None  # exact topics it wants (beats bloom)
    light_node: bool = False  # it does not forward envelopes
    confirmations: bool = False  # it wants batch acknowledgements
    packet_rate_limits: RateLimits = field(default_factory=RateLimits)  # its packets/s limits
    bytes_rate_limits: RateLimits = field(default_factory=RateLimits)  # its bytes/s limits

    def apply(self, options: StatusOptions, *, handshake: bool) -> None:
        if handshake:
            # status-go WithDefaults: what a peer that says nothing is assumed to want.
            if options.pow_requirement is None:
                self.pow_requirement = DEFAULT_POW_REQUIREMENT
            if options.bloom is None and options.topic_interest is None:
                self.bloom = FULL_BLOOM
        if options.pow_requirement is not None:
            self.pow_requirement = options.pow_requirement
        if options.topic_interest is not None:
            self.topic_interest = frozenset(options.topic_interest)
        elif options.bloom is not None:
            self.bloom = options.bloom or FULL_BLOOM
            self.topic_interest = None
        if options.light_node is not None:
            self.light_node = options.light_node
        if options.confirmations is not None:
            self.confirmations = options.confirmations
        if options.packet_rate_limits is not None:
            self.packet_rate_limits = options.packet_rate_limits
        if options.bytes_rate_limits is not None:
            self.bytes_rate_limits = options.bytes_rate_limits

    def wants(self, topic: bytes) -> bool:
        """Would this peer accept an envelope on ``topic``? Topic interest beats bloom."""
        if self.topic_interest is not None:
            return topic in self.topic_interest
        return is_full_bloom(self.bloom) or bloom_matches(self.bloom, topic_to_bloom(topic))

    def receive(self, code: int, payload: bytes) -> list[WakuEvent]:
        """Decode one waku/1 packet from this peer. Raises :class:`WakuProtocolError`."""
        if not self.status_received:
            if code != PacketCode.STATUS:
                raise WakuProtocolError("waku handshake", f"packet {code} before status")
            options = StatusOptions.decode(payload)
            self.apply(options, handshake=True)
            self.status_received = True
            return [StatusReceived(options, update=False)]
        if code == PacketCode.STATUS:
            raise WakuProtocolError("waku session", "second status packet")
        if code == PacketCode.STATUS_UPDATE:
            options = StatusOptions.decode(payload, what="waku status update")
            self.apply(options, handshake=False)
            return [StatusReceived(options, update=True)]
        if code == PacketCode.MESSAGES:
            items = split_rlp_list(payload, "waku messages", max_items=self.max_envelopes)
            return [EnvelopesReceived(tuple(items), keccak256(payload))]
        if code == PacketCode.P2P_MESSAGE:
            items = split_rlp_list(payload, "waku p2p message", max_items=self.max_envelopes)
            return [P2PMessagesReceived(tuple(items))]
        if code == PacketCode.P2P_REQUEST:
            return [P2PRequestReceived(payload)]
        if code == PacketCode.P2P_REQUEST_COMPLETE:
            try:
                return [RequestCompleteReceived(RequestComplete.decode_packet(payload))]
            except DecodeError as exc:
                raise WakuProtocolError("waku request complete", exc.reason) from exc
        if code == PacketCode.BATCH_ACKNOWLEDGED:
            item = decode_rlp(payload, "waku batch ack", WakuProtocolError, max_size=64)
            batch = as_bytes(item, "waku batch ack", "hash", WakuProtocolError, size=32)
            return [BatchAcknowledged(batch)]
        if code == PacketCode.MESSAGE_RESPONSE:
            response = MessagesResponse.decode(payload)
            return [MessageResponseReceived(response)] if response is not None else []
        return []  # codes a newer waku may define: ignored, as status-go does


def encode_batch_ack(batch_hash: bytes) -> bytes:
    return encode_rlp(batch_hash)
