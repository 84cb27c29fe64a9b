"""Archive encoding: hand-derived golden bytes, padding, index keys, generated-class equality.

Golden values below are worked out by hand from the protobuf wire format and status-go's
padding rule (manager_archive_file.go), and index keys are computed with pycryptodome's
keccak over hand-serialized bytes, never from the code under test.
"""

from __future__ import annotations

import base64

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.helpers import reference_keccak256
from waku_legacy.archive import (
    PIECE_LENGTH,
    ArchiveCorrupted,
    ArchiveDecodeError,
    ArchiveMessage,
    EncodedArchive,
    Flavour,
    decode_archive,
    decode_index,
    encode_archive,
    encode_index,
    index_entry_for,
    padding_for,
)
from waku_legacy.archive.bencode import bdecode, bencode
from waku_legacy.archive.encode import encode_archive_message, seed_padding_length
from waku_legacy.errors import DecodeError
from waku_legacy.proto import seed_archive_pb2, status_archive_pb2


def keccak_hex(data: bytes) -> str:
    return "0x" + reference_keccak256(data).hex()


# --- padding: status-go `if rawSize > pieceLength { size = raw + piece - raw%piece } else {
# padding = piece - raw }` -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "size", "padding"),
    [
        (1, 102400, 102399),  # 102400 - 1
        (63, 102400, 102337),  # the golden archive below
        (102399, 102400, 1),
        # exactly one piece: not > pieceLength, so the else branch: 102400 - 102400 = 0
        (102400, 102400, 0),
        # 102401 > piece: 102401 + 102400 - (102401 % 102400 = 1) = 204800
        (102401, 204800, 102399),
        # the quirk: 204800 % 102400 = 0, so 204800 + 102400 - 0 = 307200, a whole zero piece
        (204800, 307200, 102400),
        (307200, 409600, 102400),
        # 250000 % 102400 = 45200: 250000 + 102400 - 45200 = 307200
        (250000, 307200, 57200),
    ],
)
def test_status_go_padding_golden(raw: int, size: int, padding: int) -> None:
    assert padding_for(raw) == padding
    assert raw + padding == size


# --- one archive by hand ------------------------------------------------------------------
# from = 1000 -> varint e8 07 (1000 = 7*128 + 104; 104|0x80 = 0xe8); to = 2000 -> d0 0f
# (2000 = 15*128 + 80); topic 01020304.
# metadata = 10 e8 07 | 18 d0 0f | 22 04 01 02 03 04                    (12 bytes)
# message: timestamp 1500 -> dc 0b (11*128 + 92); topic; payload "hi"; hash aa*32
# body = 10 dc 0b | 1a 04 01020304 | 22 02 6869 | 32 20 aa*32           (47 = 0x2f bytes)
# archive = 12 0c <metadata> 1a 2f <body>                               (63 bytes)
TOPIC = bytes.fromhex("01020304")
METADATA = bytes.fromhex("10e80718d00f220401020304")
BODY = bytes.fromhex("10dc0b1a0401020304220268693220") + b"\xaa" * 32
GOLDEN_ARCHIVE = b"\x12\x0c" + METADATA + b"\x1a\x2f" + BODY
GOLDEN_MESSAGE = ArchiveMessage(timestamp=1500, hash=b"\xaa" * 32, topic=TOPIC, payload=b"hi")
# index metadata at offset 0 (omitted: proto3 default), size 102400 -> 80 a0 06
# (102400 = 6*16384 + 32*128 + 0), padding 102337 -> c1 9f 06 (102337 = 6*16384 + 31*128 + 65)
GOLDEN_INDEX_META_0 = b"\x12\x0c" + METADATA + bytes.fromhex("2080a00628c19f06")
# the same archive placed at offset 102400 -> field 3 = 18 80 a0 06
GOLDEN_INDEX_META_1 = (
    b"\x12\x0c" + METADATA + bytes.fromhex("1880a006") + bytes.fromhex("2080a00628c19f06")
)


def test_golden_archive_bytes() -> None:
    assert len(GOLDEN_ARCHIVE) == 63
    assert encode_archive(1000, 2000, [TOPIC], [GOLDEN_MESSAGE]) == GOLDEN_ARCHIVE
    # the generated classes agree
    generated = status_archive_pb2.WakuMessageArchive(
        metadata=status_archive_pb2.WakuMessageArchiveMetadata(
            **{"from": 1000, "to": 2000, "contentTopic": [TOPIC]}
        ),
        messages=[GOLDEN_MESSAGE.to_proto()],
    ).SerializeToString()
    assert generated == GOLDEN_ARCHIVE


def test_golden_index_entries_and_keys() -> None:
    encoded = EncodedArchive.build(1000, 2000, [TOPIC], [GOLDEN_MESSAGE])
    first = index_entry_for(encoded, 0)
    second = index_entry_for(encoded, 102400)
    assert first.metadata_bytes == GOLDEN_INDEX_META_0
    assert second.metadata_bytes == GOLDEN_INDEX_META_1
    assert (first.size, first.padding, first.offset) == (102400, 102337, 0)
    assert first.archive_id == keccak_hex(GOLDEN_INDEX_META_0)
    assert second.archive_id == keccak_hex(GOLDEN_INDEX_META_1)
    assert list(second.pieces()) == [1]
    # index file: map entry 0a <len> [0a 42 <66-char key> 12 16 <22-byte metadata>]
    key = keccak_hex(GOLDEN_INDEX_META_0).encode()
    entry = b"\x0a\x42" + key + b"\x12\x16" + GOLDEN_INDEX_META_0
    assert len(entry) == 0x5C
    assert encode_index([first]) == b"\x0a\x5c" + entry
    generated = status_archive_pb2.WakuMessageArchiveIndex()
    generated.archives[key.decode()].CopyFrom(
        status_archive_pb2.WakuMessageArchiveIndexMetadata.FromString(GOLDEN_INDEX_META_0)
    )
    assert generated.SerializeToString(deterministic=True) == encode_index([first])
    decoded = decode_index(encode_index([second, first]))
    assert set(decoded) == {first.archive_id, second.archive_id}
    assert decoded[second.archive_id].offset == 102400


def test_seed_spec_golden() -> None:
    # base 63 bytes: 63 + 1 (tag) + 3 (varint of L) + L = 102400 -> L = 102333 (3-byte varint)
    assert seed_padding_length(63) == 102333
    # 102270: room in the first piece for varint+L is 102400 - 102270 - 1 = 129; L = 128 needs
    # a 2-byte varint (130), L = 127 a 1-byte one (128): no fit, so the next piece:
    # 102270 + 1 + 3 + L = 204800 -> L = 102526
    assert seed_padding_length(102270) == 102526
    assert seed_padding_length(102400) == 0
    archive = encode_archive(1000, 2000, [TOPIC], [GOLDEN_MESSAGE], flavour="seed-spec")
    assert len(archive) == PIECE_LENGTH
    assert archive[:63] == GOLDEN_ARCHIVE  # same fields, then 22 bd 9f 06 + zeros
    assert archive[63:67] == bytes.fromhex("22bd9f06")  # 102333 = 6*16384 + 31*128 + 61
    parsed = seed_archive_pb2.WakuMessageArchive.FromString(archive)
    assert parsed.padding == bytes(102333)
    entry = index_entry_for(EncodedArchive(1000, 2000, (TOPIC,), archive, 1, Flavour.SEED_SPEC), 0)
    # seed index: metadata, num_pieces = 1 (field 4 = 20 01), no offset (0)
    assert entry.metadata_bytes == b"\x12\x0c" + METADATA + b"\x20\x01"
    assert entry.archive_id == keccak_hex(entry.metadata_bytes)
    assert (entry.size, entry.padding) == (PIECE_LENGTH, 0)
    again = decode_index(encode_index([entry]), flavour="seed-spec")[entry.archive_id]
    assert again.size == PIECE_LENGTH
    assert decode_archive(archive, flavour="seed-spec").messages == [GOLDEN_MESSAGE]


def test_messages_sorted_by_timestamp_then_hash() -> None:
    a = ArchiveMessage(timestamp=5, hash=b"\x02" * 32, topic=TOPIC, payload=b"a")
    b = ArchiveMessage(timestamp=5, hash=b"\x01" * 32, topic=TOPIC, payload=b"b")
    c = ArchiveMessage(timestamp=4, hash=b"\x09" * 32, topic=TOPIC, payload=b"c")
    archive = decode_archive(encode_archive(0, 10, [TOPIC], [a, b, c]))
    assert archive.messages == [c, b, a]


archive_messages = st.builds(
    ArchiveMessage,
    timestamp=st.integers(0, 2**64 - 1),
    hash=st.binary(max_size=40),
    topic=st.binary(max_size=6),
    payload=st.binary(max_size=300),
    sig=st.binary(max_size=70),
    padding=st.binary(max_size=20),
    third_party_id=st.text(max_size=10),
)


@settings(max_examples=150, deadline=None)
@given(
    messages=st.lists(archive_messages, max_size=8),
    window=st.tuples(st.integers(0, 2**40), st.integers(0, 2**40)).map(sorted),
    topics=st.lists(st.binary(max_size=5), max_size=4),
)
def test_hand_rolled_writer_matches_generated_classes(
    messages: list[ArchiveMessage], window: list[int], topics: list[bytes]
) -> None:
    ordered = sorted(messages, key=lambda m: (m.timestamp, m.hash))
    for m in messages:
        assert encode_archive_message(m) == m.to_proto().SerializeToString()
    expected = status_archive_pb2.WakuMessageArchive(
        metadata=status_archive_pb2.WakuMessageArchiveMetadata(
            **{"from": window[0], "to": window[1], "contentTopic": topics}
        ),
        messages=[m.to_proto() for m in ordered],
    ).SerializeToString()
    encoded = encode_archive(window[0], window[1], topics, messages)
    assert encoded == expected
    decoded = decode_archive(encoded)
    assert decoded.messages == ordered
    assert (decoded.window_from, decoded.window_to) == tuple(window)
    seed = encode_archive(window[0], window[1], topics, messages, flavour="seed-spec")
    assert len(seed) % PIECE_LENGTH == 0
    assert seed_archive_pb2.WakuMessageArchive.FromString(seed).metadata.to == window[1]


def test_pb_messages_accepted() -> None:
    as_pb = GOLDEN_MESSAGE.to_proto()
    assert encode_archive(1000, 2000, [TOPIC], [as_pb]) == GOLDEN_ARCHIVE


def test_index_key_mismatch_is_detected() -> None:
    entry = index_entry_for(EncodedArchive.build(1000, 2000, [TOPIC], [GOLDEN_MESSAGE]), 0)
    data = bytearray(encode_index([entry]))
    data[-3] ^= 0x01  # padding 102337 -> 102336: still parses, key no longer matches
    with pytest.raises(ArchiveCorrupted, match="not keccak256 of its metadata"):
        decode_index(bytes(data))
    assert decode_index(bytes(data), verify_keys=False)


@pytest.mark.parametrize(
    "garbage",
    [b"\x0a\xff", b"\x0a\x05\x0a\x03ab", b"\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff", b"\x07"],
)
def test_malformed_index_raises_decode_error(garbage: bytes) -> None:
    with pytest.raises(DecodeError):
        decode_index(garbage)


def test_malformed_archive_raises_decode_error() -> None:
    with pytest.raises(ArchiveDecodeError):
        decode_archive(b"\x1a\xff\xff")
    with pytest.raises(ArchiveDecodeError, match="no metadata"):
        decode_archive(b"")


def test_bencode_round_trip_and_canonical_form() -> None:
    value = {"b": [1, -2, b"x"], "a": {"z": b"", "y": 0}}
    data = bencode(value)
    assert data == b"d1:ad1:yi0e1:z0:e1:bli1ei-2e1:xee"
    assert bdecode(data) == {b"a": {b"y": 0, b"z": b""}, b"b": [1, -2, b"x"]}
    for bad in (b"i01e", b"i-0e", b"d1:bi1e1:ai2ee", b"l", b"5:ab", b"i1ei2e", b"x"):
        with pytest.raises(DecodeError):
            bdecode(bad)


@settings(max_examples=300, deadline=None)
@given(data=st.binary(max_size=200))
def test_decoders_raise_only_typed_errors(data: bytes) -> None:
    from waku_legacy.archive import load_torrent, verify_magnet_message
    from waku_legacy.errors import WakuLegacyError
    from waku_legacy.identity.topics import CommunityId

    community = CommunityId.parse(
        "0x" + "02" + "79be667e" + "f9dcbbac55a06295ce870b07029bfcdb2dce28d959f2815b16f81798"
    )
    for decode in (
        decode_index,
        lambda d: decode_index(d, flavour="seed-spec"),
        decode_archive,
        bdecode,
        load_torrent,
        lambda d: verify_magnet_message(d, community),
    ):
        try:
            decode(data)
        except WakuLegacyError:
            pass


def test_json_of_a_content_field_whose_base64_starts_with_0x_reads_back() -> None:
    """Base64 text can start with "0x" (readers take that for hex): such a field is written
    as hex, so archive build --input reads back what archive inspect wrote."""
    from waku_legacy.archive.message import ArchiveMessage

    payload = base64.b64decode("0xABCDEF")  # base64 "0xABCDEF" would read as hex
    message = ArchiveMessage(
        timestamp=1, hash=b"\x01" * 32, topic=b"abcd", payload=payload,
        padding=base64.b64decode("0XAA"),
    )  # fmt: skip
    assert ArchiveMessage.from_json(message.to_json()) == message


@settings(max_examples=300, deadline=None)
@given(payload=st.binary(max_size=64), padding=st.binary(max_size=16))
def test_archive_message_json_round_trips(payload: bytes, padding: bytes) -> None:
    from waku_legacy.archive.message import ArchiveMessage

    message = ArchiveMessage(
        timestamp=7, hash=b"\x02" * 32, topic=b"wxyz", payload=payload, padding=padding
    )
    assert ArchiveMessage.from_json(message.to_json()) == message
