"""Archive encoding: ``WakuMessageArchive`` bytes, piece padding, index metadata and keys.

status-go flavour (default; what Status Desktop imports):

- ``WakuMessageArchive{metadata{from, to, contentTopic...}, messages...}`` with ``version``
  left at 0 (status-go never sets it), messages in (timestamp, hash) order.
- In ``data`` each archive is followed by zero bytes up to a multiple of the piece length
  (102400): ``size = raw + piece - raw % piece`` when ``raw > piece`` (so an exact multiple
  above one piece still gets a whole zero piece), otherwise ``size = piece``.
- Index entry ``WakuMessageArchiveIndexMetadata{metadata, offset, size, padding}``; its key is
  ``"0x" + hex(keccak256(serialized metadata entry))``.

Seed-spec flavour (61/STATUS-Community-History-Archives): the zero padding is the archive's own
``bytes padding = 4`` field, re-encoded until the archive is a multiple of the piece length;
the index entry has ``num_pieces`` instead of ``size``/``padding``.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from waku_legacy.archive.errors import ArchiveCorrupted, ArchiveDecodeError
from waku_legacy.archive.message import AnyArchiveMessage, ArchiveMessage, as_archive_message
from waku_legacy.crypto.keccak import keccak256
from waku_legacy.errors import ConfigError, LimitExceeded
from waku_legacy.proto import seed_archive_pb2, status_archive_pb2
from waku_legacy.proto.codec import ProtobufDecodeError, parse_message
from waku_legacy.proto.wire import (
    SMALL_VARINTS,
    WIRE_LEN,
    WIRE_VARINT,
    encode_varint,
    iter_fields,
    varint_field,
    varint_size,
)

__all__ = [
    "MAX_ARCHIVE_DECODE_BYTES",
    "MAX_INDEX_BYTES",
    "PIECE_LENGTH",
    "DecodedArchive",
    "EncodedArchive",
    "Flavour",
    "IndexEntry",
    "archive_id",
    "decode_archive",
    "decode_index",
    "encode_archive",
    "encode_archive_message",
    "encode_index",
    "encode_metadata",
    "index_entry_for",
    "padding_for",
    "seed_padding_length",
]

PIECE_LENGTH = 100 * 1024
# Decoding limits: status-go caps payload+sig at 30 MB per archive; hashes, topics, padding and
# framing add a little. Indexes hold ~100 bytes per archive.
MAX_ARCHIVE_DECODE_BYTES = 256 * 1024 * 1024
MAX_INDEX_BYTES = 64 * 1024 * 1024


class Flavour(enum.StrEnum):
    STATUS_GO = "status-go"
    SEED_SPEC = "seed-spec"

    @classmethod
    def parse(cls, value: str | Flavour) -> Flavour:
        try:
            return cls(value)
        except ValueError:
            raise ConfigError(
                f"archive flavour must be 'status-go' or 'seed-spec', got {value!r}"
            ) from None


def padding_for(raw_size: int, piece_length: int = PIECE_LENGTH) -> int:
    """Zero bytes status-go writes after an encoded archive of ``raw_size`` bytes."""
    if raw_size > piece_length:
        return piece_length - raw_size % piece_length  # a whole piece when already a multiple
    return piece_length - raw_size


def seed_padding_length(base_size: int, piece_length: int = PIECE_LENGTH) -> int:
    """Length of the seed-spec ``padding`` field that makes the archive a piece multiple.

    ``base_size`` is the archive encoded without padding. Returns 0 when it already is a
    multiple (the field is then absent). Otherwise the field adds ``1 + varint(L) + L`` bytes,
    and a proto3 bytes field cannot be present and empty, so ``L >= 1``.
    """
    if base_size % piece_length == 0 and base_size > 0:
        return 0
    target = base_size + 3  # tag, one length byte, one padding byte at least
    target += -target % piece_length
    while True:
        room = target - base_size - 1  # bytes for varint(L) + L
        for width in range(1, 11):
            length = room - width
            if length >= 1 and varint_size(length) == width:
                return length
        target += piece_length  # no L fits exactly (a varint-width boundary): next piece


# ---------------------------------------------------------------------------------------------
# Writing


def encode_archive_message(
    message: ArchiveMessage, *, flavour: Flavour = Flavour.STATUS_GO
) -> bytes:
    """Serialized archive ``WakuMessage`` (identical to the generated class's output): the
    body that :func:`_write_messages` frames as an archive's field 3."""
    framed = bytearray()
    _write_messages(framed, [message], flavour is Flavour.STATUS_GO)
    (field,) = iter_fields(bytes(framed), "archive message", ArchiveDecodeError)
    assert isinstance(field.value, bytes)
    return field.value


def encode_metadata(window_from: int, window_to: int, content_topics: Sequence[bytes]) -> bytes:
    """Serialized ``WakuMessageArchiveMetadata`` (version 0, as status-go leaves it)."""
    out = varint_field(2, window_from) + varint_field(3, window_to)
    for topic in content_topics:
        # repeated bytes: every element is written, empty ones too
        out += b"\x22" + encode_varint(len(topic)) + bytes(topic)
    return out


def _sort_key(message: ArchiveMessage) -> tuple[int, bytes]:
    return (message.timestamp, message.hash)


def _write_messages(out: bytearray, ordered: Sequence[ArchiveMessage], with_third: bool) -> None:
    """Append ``messages`` (field 3) to ``out``, in place with each body's length computed up
    front (no per-message temporaries). The fields are written one by one on purpose: a loop
    over (tag, value) pairs makes this, the encoder's hot loop, about 30% slower."""
    small = SMALL_VARINTS
    big = encode_varint
    for m in ordered:
        sig, topic, payload, pad, digest = m.sig, m.topic, m.payload, m.padding, m.hash
        ts = m.timestamp
        third = m.third_party_id.encode("utf-8") if with_third and m.third_party_id else b""
        size = 0
        for field_value in (sig, topic, payload, pad, digest, third):
            n = len(field_value)
            if n:
                size += 1 + (1 if n < 128 else 2 if n < 16384 else varint_size(n)) + n
        ts_bytes = (small[ts] if ts < 16384 else big(ts)) if ts else b""
        if ts:
            size += 1 + len(ts_bytes)
        out += b"\x1a"
        out += small[size] if size < 16384 else big(size)
        if sig:
            out += b"\x0a"
            n = len(sig)
            out += small[n] if n < 16384 else big(n)
            out += sig
        if ts:
            out += b"\x10"
            out += ts_bytes
        if topic:
            out += b"\x1a"
            n = len(topic)
            out += small[n] if n < 16384 else big(n)
            out += topic
        if payload:
            out += b"\x22"
            n = len(payload)
            out += small[n] if n < 16384 else big(n)
            out += payload
        if pad:
            out += b"\x2a"
            n = len(pad)
            out += small[n] if n < 16384 else big(n)
            out += pad
        if digest:
            out += b"\x32"
            n = len(digest)
            out += small[n] if n < 16384 else big(n)
            out += digest
        if third:
            out += b"\x3a"
            n = len(third)
            out += small[n] if n < 16384 else big(n)
            out += third


def encode_archive(
    window_from: int,
    window_to: int,
    content_topics: Sequence[bytes],
    messages: Iterable[AnyArchiveMessage],
    *,
    flavour: Flavour | str = Flavour.STATUS_GO,
    piece_length: int = PIECE_LENGTH,
) -> bytes:
    """Encode one ``WakuMessageArchive`` (pure and deterministic; safe on Spark executors).

    Messages are put in (timestamp, hash) order whatever order they come in. For the
    status-go flavour the result is the raw archive (the zero padding after it belongs to the
    ``data`` file, see :func:`padding_for`); for the seed-spec flavour it already includes the
    padding field and is a multiple of ``piece_length``.
    """
    flavour = Flavour.parse(flavour)
    if window_to < window_from:
        raise ConfigError(f"archive window ends ({window_to}) before it starts ({window_from})")
    ordered = sorted(map(as_archive_message, messages), key=_sort_key)
    metadata = encode_metadata(window_from, window_to, content_topics)
    out = bytearray(b"\x12")
    out += encode_varint(len(metadata))
    out += metadata
    _write_messages(out, ordered, flavour is Flavour.STATUS_GO)
    if flavour is Flavour.SEED_SPEC:
        length = seed_padding_length(len(out), piece_length)
        if length:
            out += b"\x22" + encode_varint(length) + bytes(length)
        assert len(out) % piece_length == 0
    return bytes(out)


@dataclass(frozen=True, slots=True)
class EncodedArchive:
    """An encoded archive with the window it covers, ready for :func:`append_archives`."""

    window_from: int
    window_to: int
    content_topics: tuple[bytes, ...]
    data: bytes  # encode_archive() output
    message_count: int = 0
    flavour: Flavour = Flavour.STATUS_GO

    @classmethod
    def build(
        cls,
        window_from: int,
        window_to: int,
        content_topics: Sequence[bytes],
        messages: Sequence[AnyArchiveMessage],
        *,
        flavour: Flavour | str = Flavour.STATUS_GO,
    ) -> EncodedArchive:
        flavour = Flavour.parse(flavour)
        data = encode_archive(window_from, window_to, content_topics, messages, flavour=flavour)
        return cls(
            window_from, window_to, tuple(bytes(t) for t in content_topics), data,
            len(messages), flavour,
        )  # fmt: skip


# ---------------------------------------------------------------------------------------------
# Index


@dataclass(frozen=True, slots=True)
class IndexEntry:
    """One archive as the index describes it; ``size`` includes the padding after it."""

    archive_id: str  # "0x" + keccak256(metadata_bytes) hex
    window_from: int
    window_to: int
    content_topics: tuple[bytes, ...]
    offset: int
    size: int
    padding: int  # status-go: zero bytes after the archive; seed-spec: 0 (inside the archive)
    metadata_bytes: bytes  # the serialized WakuMessageArchiveIndexMetadata that was hashed

    @property
    def archive_length(self) -> int:
        """Bytes to read at ``offset`` to get the archive (``size - padding``)."""
        return self.size - self.padding

    def pieces(self, piece_length: int = PIECE_LENGTH) -> range:
        """Torrent pieces holding this archive (status-go: offset/piece .. +size/piece)."""
        first = self.offset // piece_length
        return range(first, first + self.size // piece_length)


def archive_id(metadata_bytes: bytes) -> str:
    return "0x" + keccak256(metadata_bytes).hex()


def _index_metadata_bytes(
    flavour: Flavour,
    window_from: int,
    window_to: int,
    content_topics: Sequence[bytes],
    offset: int,
    size: int,
    padding: int,
    piece_length: int,
) -> bytes:
    metadata = encode_metadata(window_from, window_to, content_topics)
    out = b"\x12" + encode_varint(len(metadata)) + metadata + varint_field(3, offset)
    if flavour is Flavour.STATUS_GO:
        return out + varint_field(4, size) + varint_field(5, padding)
    return out + varint_field(4, size // piece_length)  # num_pieces


def index_entry_for(
    encoded: EncodedArchive, offset: int, *, piece_length: int = PIECE_LENGTH
) -> IndexEntry:
    """The index entry of ``encoded`` placed at ``offset`` in ``data``."""
    raw = len(encoded.data)
    if encoded.flavour is Flavour.STATUS_GO:
        padding = padding_for(raw, piece_length)
    else:
        if raw % piece_length:
            raise ArchiveDecodeError(
                "seed-spec archive", f"{raw} bytes is not a multiple of the piece length"
            )
        padding = 0
    size = raw + padding
    metadata_bytes = _index_metadata_bytes(
        encoded.flavour, encoded.window_from, encoded.window_to, encoded.content_topics,
        offset, size, padding, piece_length,
    )  # fmt: skip
    return IndexEntry(
        archive_id(metadata_bytes), encoded.window_from, encoded.window_to,
        encoded.content_topics, offset, size, padding, metadata_bytes,
    )  # fmt: skip


def encode_archive_map(entries: Iterable[tuple[str, bytes]]) -> bytes:
    """Field 1 ``map<string, message>`` of an archive index, entries sorted by key (status-go
    marshals Go maps deterministically, keys in order), each value already serialized."""
    out = bytearray()
    for key_text, value in sorted(entries):
        key = key_text.encode("ascii")
        body = (
            b"\x0a" + encode_varint(len(key)) + key
            + b"\x12" + encode_varint(len(value)) + value
        )  # fmt: skip
        out += b"\x0a" + encode_varint(len(body)) + body
    return bytes(out)


def encode_index(entries: Iterable[IndexEntry]) -> bytes:
    """Serialized ``WakuMessageArchiveIndex``; map entries sorted by key (deterministic)."""
    return encode_archive_map((e.archive_id, e.metadata_bytes) for e in entries)


def _parse_metadata(data: bytes, what: str) -> tuple[int, int, tuple[bytes, ...]]:
    window_from = window_to = 0
    topics: list[bytes] = []
    for f in iter_fields(data, what, ArchiveDecodeError):
        if f.number == 2 and f.wire_type == WIRE_VARINT:
            window_from = int(f.value)
        elif f.number == 3 and f.wire_type == WIRE_VARINT:
            window_to = int(f.value)
        elif f.number == 4 and f.wire_type == WIRE_LEN:
            assert isinstance(f.value, bytes)
            topics.append(f.value)
    return window_from, window_to, tuple(topics)


def _parse_index_metadata(key: str, data: bytes, flavour: Flavour, piece_length: int) -> IndexEntry:
    what = f"index entry {key}"
    window: tuple[int, int, tuple[bytes, ...]] | None = None
    offset = size = padding = num_pieces = 0
    for f in iter_fields(data, what, ArchiveDecodeError):
        if f.number == 2 and f.wire_type == WIRE_LEN:
            assert isinstance(f.value, bytes)
            window = _parse_metadata(f.value, what + " metadata")
        elif f.number == 3 and f.wire_type == WIRE_VARINT:
            offset = int(f.value)
        elif f.number == 4 and f.wire_type == WIRE_VARINT:
            size = num_pieces = int(f.value)
        elif f.number == 5 and f.wire_type == WIRE_VARINT:
            padding = int(f.value)
    if window is None:
        raise ArchiveDecodeError(what, "has no archive metadata (from/to/topics)")
    if flavour is Flavour.SEED_SPEC:
        size, padding = num_pieces * piece_length, 0
    if size == 0:
        raise ArchiveDecodeError(what, "records an archive of size 0")
    if padding >= size:
        raise ArchiveDecodeError(what, f"padding {padding} is not below size {size}")
    return IndexEntry(key, window[0], window[1], window[2], offset, size, padding, data)


def decode_index(
    data: bytes,
    *,
    flavour: Flavour | str = Flavour.STATUS_GO,
    verify_keys: bool = True,
    piece_length: int = PIECE_LENGTH,
) -> dict[str, IndexEntry]:
    """Parse an ``index`` file; with ``verify_keys`` every key must be the keccak256 of the
    exact metadata bytes it maps to (ArchiveCorrupted otherwise)."""
    flavour = Flavour.parse(flavour)
    if len(data) > MAX_INDEX_BYTES:
        raise LimitExceeded("archive index", f"{len(data)} bytes is over {MAX_INDEX_BYTES}")
    entries: dict[str, IndexEntry] = {}
    for f in iter_fields(data, "archive index", ArchiveDecodeError):
        if f.number != 1 or f.wire_type != WIRE_LEN:
            continue  # unknown field: ignored, as protobuf readers do
        assert isinstance(f.value, bytes)
        key_bytes = b""
        value = b""
        for g in iter_fields(f.value, "archive index map entry", ArchiveDecodeError):
            if g.number == 1 and g.wire_type == WIRE_LEN:
                assert isinstance(g.value, bytes)
                key_bytes = g.value
            elif g.number == 2 and g.wire_type == WIRE_LEN:
                assert isinstance(g.value, bytes)
                value = g.value
        try:
            key = key_bytes.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ArchiveDecodeError("archive index", "a key is not UTF-8", offset=f.start) from exc
        entry = _parse_index_metadata(key, value, flavour, piece_length)
        if verify_keys and archive_id(value) != key.lower():
            raise ArchiveCorrupted(
                "archive index",
                f"key {key} is not keccak256 of its metadata ({archive_id(value)})",
                offset=f.start,
            )
        entries[key] = entry  # a repeated key replaces the earlier one (protobuf map rule)
    return entries


# ---------------------------------------------------------------------------------------------
# Reading archives


@dataclass(frozen=True, slots=True)
class DecodedArchive:
    window_from: int
    window_to: int
    content_topics: tuple[bytes, ...]
    messages: list[ArchiveMessage]


def decode_archive(
    data: bytes, *, flavour: Flavour | str = Flavour.STATUS_GO, what: str = "archive"
) -> DecodedArchive:
    """Parse the ``size - padding`` bytes of one archive."""
    flavour = Flavour.parse(flavour)
    if len(data) > MAX_ARCHIVE_DECODE_BYTES:
        raise LimitExceeded(what, f"{len(data)} bytes is over {MAX_ARCHIVE_DECODE_BYTES}")
    archive: status_archive_pb2.WakuMessageArchive | seed_archive_pb2.WakuMessageArchive
    try:
        if flavour is Flavour.STATUS_GO:
            archive = parse_message(status_archive_pb2.WakuMessageArchive, data, what,
                                    max_size=MAX_ARCHIVE_DECODE_BYTES)  # fmt: skip
        else:
            archive = parse_message(seed_archive_pb2.WakuMessageArchive, data, what,
                                    max_size=MAX_ARCHIVE_DECODE_BYTES)  # fmt: skip
    except ProtobufDecodeError as exc:
        raise ArchiveDecodeError(what, exc.reason) from exc
    if not archive.HasField("metadata"):
        raise ArchiveDecodeError(what, "has no metadata (from/to/content topics)")
    meta = archive.metadata
    return DecodedArchive(
        getattr(meta, "from"),
        meta.to,
        tuple(meta.contentTopic),
        [ArchiveMessage.from_proto(m) for m in archive.messages],
    )


def check_contiguous(entries: Mapping[str, IndexEntry], piece_length: int = PIECE_LENGTH) -> int:
    """Check that archives tile ``data`` from offset 0 without gaps; returns the data length."""
    expected = 0
    for entry in sorted(entries.values(), key=lambda e: e.offset):
        if entry.offset != expected:
            raise ArchiveCorrupted(
                "archive index",
                f"archive {entry.archive_id} starts at {entry.offset}, expected {expected}"
                " (archives must follow each other)",
            )
        if entry.size % piece_length:
            raise ArchiveCorrupted(
                "archive index",
                f"archive {entry.archive_id} size {entry.size} is not a piece multiple",
            )
        expected += entry.size
    return expected
