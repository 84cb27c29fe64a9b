"""Status payloads split over several Waku messages, joined again (pure, bounded).

Since status-go ``6bb806caa`` (2023-11-09, "introduce messages segmentation";
``protocol/common/message_segmentation.go`` at ``c72f491``) a sender splits a transport payload
larger than 3/4 of the transport's maximum message size into ``SegmentMessage``s
``{entire_message_hash = keccak256(payload), index, segments_count, payload}``, one Waku message
each, before the encryption layer; since ``9e5462eb9`` (2024-04-04) it adds Reed-Solomon parity
segments (``segments_count`` 0, ``parity_segment_index``/``parity_segments_count``). A receiver
(``handleSegmentationLayerV2``, called by ``handleMessage`` in ``message_sender.go`` right after
the transport layer) parses every payload as a ``SegmentMessage``; one that is valid
(``segments_count >= 2 || parity_segments_count > 0``) is stored under (hash, payload signer)
until all ``segments_count`` data segments are there, then the payloads are concatenated in index
order, the keccak checked, and the whole goes on to the encryption layer.

Here: :func:`read_segment` says whether data is a segment, :class:`SegmentJoiner` collects them
and returns the whole payload for :func:`~.decode.decode_application`. Only complete sets of data
segments are joined: a set missing a data segment stays unjoined even when parity segments could
restore it (Reed-Solomon reconstruction, klauspost/reedsolomon's matrix, is not reproduced).
A bare ``ApplicationMetadataMessage`` whose ``type`` is 2 or more also parses as a valid
segment (its ``type`` lands in ``segments_count``, its signature in the hash), so status-go would
hold such a message as an incomplete segment; here a segment's hash must be 32 bytes, and the
readable history decodes a message normally first, asking whether it is a segment only when it
is not otherwise a Status message.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, field

from waku_legacy.crypto.keccak import keccak256
from waku_legacy.errors import DecodeError

__all__ = ["MAX_SEGMENTS", "Segment", "SegmentJoiner", "read_segment"]

MAX_SEGMENTS = 1024  # per message: far above what status-go's 30 MB archive limit would need


@dataclass(frozen=True, slots=True)
class Segment:
    entire_hash: bytes  # keccak256 of the whole payload
    index: int
    count: int  # data segments of the whole (0 in a parity segment)
    payload: bytes
    parity_index: int = 0
    parity_count: int = 0

    @property
    def is_parity(self) -> bool:
        return self.count == 0 and self.parity_count > 0


def read_segment(data: bytes, *, max_size: int) -> Segment | None:
    """The segment ``data`` is, or None when status-go would not take it for one (it does not
    parse as a ``SegmentMessage``, or is not valid: ``IsValid``), or when it is not a segment
    status-go could have written (a hash that is not 32 bytes, an index past the count, more
    than :data:`MAX_SEGMENTS`)."""
    from waku_legacy.proto import segment_message_pb2
    from waku_legacy.proto.codec import ProtobufDecodeError, parse_message

    try:
        message = parse_message(
            segment_message_pb2.SegmentMessage, data, "SegmentMessage", max_size=max_size
        )
    except ProtobufDecodeError:
        return None
    segment = Segment(
        bytes(message.entire_message_hash), int(message.index), int(message.segments_count),
        bytes(message.payload), int(message.parity_segment_index),
        int(message.parity_segments_count),
    )  # fmt: skip
    if not (segment.count >= 2 or segment.parity_count > 0):  # IsValid
        return None
    if len(segment.entire_hash) != 32 or not segment.payload:
        return None
    if segment.count > MAX_SEGMENTS or segment.parity_count > MAX_SEGMENTS:
        return None
    if not segment.is_parity and segment.index >= segment.count:
        return None
    if segment.is_parity and segment.parity_index >= segment.parity_count:
        return None
    return segment


@dataclass
class _PendingSegments:
    count: int
    data: dict[int, bytes] = field(default_factory=dict)
    size: int = 0


class SegmentJoiner:
    """Segments waiting for their siblings, keyed by (whole hash, payload signer) as status-go
    keys them (``GetMessageSegments(hash, SigPubKey)``). Bounded: at most ``max_pending``
    unfinished messages and ``max_bytes`` of held payload; the oldest unfinished message is
    forgotten first (:attr:`dropped` counts them)."""

    def __init__(self, *, max_pending: int = 1024, max_bytes: int = 64 * 1024 * 1024) -> None:
        self._pending: OrderedDict[tuple[bytes, str], _PendingSegments] = OrderedDict()
        self._done: OrderedDict[tuple[bytes, str], None] = OrderedDict()
        self._max_pending = max_pending
        self._max_bytes = max_bytes
        self._bytes = 0
        self.dropped = 0

    def add(self, segment: Segment, signer: str) -> bytes | None:
        """The whole payload once this segment completes its data segments, else None (also
        for a segment of a message already joined: ``ErrMessageSegmentsAlreadyCompleted``).
        :class:`~waku_legacy.errors.DecodeError` when the joined bytes do not hash to the
        segments' hash (``ErrMessageSegmentsHashMismatch``); the set is forgotten."""
        key = (segment.entire_hash, signer.lower())
        if key in self._done or segment.is_parity:
            return None  # parity is of no use without reconstruction
        pending = self._pending.get(key)
        if pending is None:
            pending = self._pending[key] = _PendingSegments(segment.count)
        elif pending.count != segment.count:
            return None  # a segment that disagrees on the count belongs to no set we can join
        if segment.index not in pending.data:
            pending.data[segment.index] = segment.payload
            pending.size += len(segment.payload)
            self._bytes += len(segment.payload)
        if len(pending.data) < pending.count:
            self._trim(key)
            return None
        del self._pending[key]
        self._bytes -= pending.size
        whole = b"".join(pending.data[i] for i in range(pending.count))
        if keccak256(whole) != segment.entire_hash:
            raise DecodeError(
                "segmented message",
                f"{pending.count} segments of 0x{segment.entire_hash.hex()} joined to bytes "
                "with another keccak256",
            )
        self._done[key] = None
        while len(self._done) > 4 * self._max_pending:
            self._done.popitem(last=False)
        return whole

    @property
    def pending(self) -> int:
        return len(self._pending)

    def _trim(self, keep: tuple[bytes, str]) -> None:
        while (len(self._pending) > self._max_pending or self._bytes > self._max_bytes) and (
            len(self._pending) > 1 or keep not in self._pending
        ):
            key, oldest = next(iter(self._pending.items()))
            if key == keep:
                self._pending.move_to_end(key)
                continue
            del self._pending[key]
            self._bytes -= oldest.size
            self.dropped += 1
