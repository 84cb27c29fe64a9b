"""Shard rules: static topics, the 57 allocation, 1:1 partitions, autosharding, DoS meta.

Golden values come from nwaku's test suite, the shared signing vector, or are worked out
by hand / with hashlib and pycryptodome inline (never from the module under test).
"""

from __future__ import annotations

import hashlib
import struct

import coincurve
import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.helpers import reference_topic_hex
from waku_legacy.errors import CryptoError, DecodeError, InvalidTopic
from waku_legacy.identity.shards import (
    DEFAULT_NON_PROTECTED_PUBSUB_TOPIC,
    DEFAULT_NON_PROTECTED_SHARD,
    DEFAULT_WAKU_PUBSUB_TOPIC,
    GLOBAL_PUBSUB_TOPIC,
    GLOBAL_SHARD,
    MAX_COMMUNITY_DESCRIPTION_SIZE,
    STATUS_CLUSTER_ID,
    CommunityDescriptionError,
    InvalidMessageField,
    NamespacedContentTopic,
    PartitionScheme,
    ShardCategory,
    StaticShard,
    autoshard,
    autoshard_pubsub_topic,
    community_pubsub_topic,
    community_shard_from_description,
    contact_partition,
    one_to_one_pubsub_topic,
    one_to_one_shard,
    parse_pubsub_topic,
    partitioned_chat_id,
    partitioned_content_topic,
    protected_message_hash,
    shard_category,
    sign_protected_message,
    sign_waku_message,
    static_pubsub_topic,
    verify_protected_message,
    verify_waku_message,
)
from waku_legacy.proto.codec import ProtobufDecodeError, ProtobufTooLarge
from waku_legacy.proto.community_description_pb2 import CommunityDescription
from waku_legacy.proto.waku_message_pb2 import WakuMessage

# SEC 2 generator G (private key 1) and 2G (private key 2): X coordinates as published.
G_X = 0x79BE667EF9DCBBAC55A06295CE870B07029BFCDB2DCE28D959F2815B16F81798
G_COMPRESSED = bytes.fromhex("02" + f"{G_X:064x}")
TWO_G_X = 0xC6047F9441ED7D6D3045406E95C07CD85C778E4B8CEF3CA7ABAC09B95C709EE5
SECP256K1_N = 0xFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFEBAAEDCE6AF48A03BBFD25E8CD0364141


# --- static sharding -------------------------------------------------------------------


def test_status_go_default_topics() -> None:
    assert STATUS_CLUSTER_ID == 16
    assert DEFAULT_NON_PROTECTED_SHARD == 64 and GLOBAL_SHARD == 32
    assert DEFAULT_NON_PROTECTED_PUBSUB_TOPIC == "/waku/2/rs/16/64"
    assert GLOBAL_PUBSUB_TOPIC == "/waku/2/rs/16/32"
    assert DEFAULT_WAKU_PUBSUB_TOPIC == "/waku/2/default-waku/proto"


@pytest.mark.parametrize(
    ("cluster", "shard", "topic"),
    [
        (16, 18, "/waku/2/rs/16/18"),
        (0, 0, "/waku/2/rs/0/0"),
        (65535, 1023, "/waku/2/rs/65535/1023"),
    ],
)
def test_static_pubsub_topic(cluster: int, shard: int, topic: str) -> None:
    assert static_pubsub_topic(cluster, shard) == topic
    assert parse_pubsub_topic(topic) == StaticShard(cluster, shard)
    assert str(StaticShard(cluster, shard)) == topic


@pytest.mark.parametrize(
    ("cluster", "shard"), [(-1, 0), (65536, 0), (16, -1), (16, 1024), (True, 1), (16, 1.0)]
)
def test_static_pubsub_topic_ranges(cluster: object, shard: object) -> None:
    with pytest.raises(InvalidTopic):
        static_pubsub_topic(cluster, shard)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "bad",
    [
        "/waku/2/rs/16/064",  # leading zero: a different gossipsub topic
        "/waku/2/rs/016/64",
        "/waku/2/rs/16/+64",
        "/waku/2/rs/16/-1",
        "/waku/2/rs/16/1024",
        "/waku/2/rs/65536/0",
        "/waku/2/rs/16/",
        "/waku/2/rs//64",
        "/waku/2/rs/16/64/",
        "/waku/2/rs/16/64\n",
        " /waku/2/rs/16/64",
        "/waku/2/rs/16/６４",  # fullwidth digits are digits to \d, not to us
        "/waku/2/rs/16",
        "/waku/2/default-waku/proto",
        "",
        "/waku/2/rs/16/" + "1" * 5000,
    ],
)
def test_parse_pubsub_topic_rejects(bad: str) -> None:
    with pytest.raises(InvalidTopic, match="pubsub topic"):
        parse_pubsub_topic(bad)


def test_parse_pubsub_topic_wrong_type() -> None:
    with pytest.raises(InvalidTopic, match="expected a string"):
        parse_pubsub_topic(b"/waku/2/rs/16/64")  # type: ignore[arg-type]


@given(st.integers(0, 65535), st.integers(0, 1023))
def test_pubsub_topic_round_trip(cluster: int, shard: int) -> None:
    topic = static_pubsub_topic(cluster, shard)
    assert topic == f"/waku/2/rs/{cluster}/{shard}"
    assert parse_pubsub_topic(topic) == StaticShard(cluster, shard)


@given(st.text(max_size=40))
def test_parse_pubsub_topic_never_leaks_library_errors(text: str) -> None:
    try:
        parsed = parse_pubsub_topic(text)
    except InvalidTopic:
        return
    assert parsed.pubsub_topic == text  # only canonical text parses


# --- allocation --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("shard", "category"),
    [
        (0, ShardCategory.RESERVED),
        (15, ShardCategory.RESERVED),
        (16, ShardCategory.LARGE_COMMUNITY),
        (32, ShardCategory.LARGE_COMMUNITY),
        (64, ShardCategory.LARGE_COMMUNITY),
        (127, ShardCategory.LARGE_COMMUNITY),
        (128, ShardCategory.COMMUNITY),
        (767, ShardCategory.COMMUNITY),
        (768, ShardCategory.ONE_TO_ONE),
        (895, ShardCategory.ONE_TO_ONE),
        (896, ShardCategory.MEDIA_AND_CONTROL),
        (1023, ShardCategory.MEDIA_AND_CONTROL),
    ],
)
def test_shard_category_boundaries(shard: int, category: ShardCategory) -> None:
    assert shard_category(shard) is category
    assert shard in category


def test_shard_categories_tile_the_cluster() -> None:
    covered = sorted(s for c in ShardCategory for s in range(c.first, c.last + 1))
    assert covered == list(range(1024))


@pytest.mark.parametrize("bad", [-1, 1024, "5", None])
def test_shard_category_rejects(bad: object) -> None:
    with pytest.raises(InvalidTopic):
        shard_category(bad)  # type: ignore[arg-type]


def test_community_pubsub_topic() -> None:
    assert community_pubsub_topic(16) == "/waku/2/rs/16/16"
    assert community_pubsub_topic(767) == "/waku/2/rs/16/767"
    for outside in (0, 15, 768, 896, 1023):
        with pytest.raises(InvalidTopic, match="not to communities"):
            community_pubsub_topic(outside)
    assert community_pubsub_topic(896, allow_any=True) == "/waku/2/rs/16/896"
    with pytest.raises(InvalidTopic):
        community_pubsub_topic(1024, allow_any=True)


def test_community_shard_from_hand_built_bytes() -> None:
    # field 1 (clock) varint 7: 08 07; field 15 varint 128: tag (15 << 3 | 0) = 0x78, 80 01.
    assert community_shard_from_description(bytes.fromhex("0807788001")) == 128
    assert community_shard_from_description(bytes.fromhex("781e")) == 30
    assert community_shard_from_description(b"") is None  # 0 / unset
    assert community_shard_from_description(CommunityDescription(relay_shard_index=16)) == 16
    assert community_shard_from_description(CommunityDescription(clock=3)) is None


def test_status_go_token_permissions_in_field_15_is_not_a_shard() -> None:
    # Deployed status-go has `map<string, CommunityTokenPermission> token_permissions = 15`:
    # a length-delimited field 15 (tag 0x7a) must not be read as a shard index.
    entry = bytes.fromhex("0a0170") + bytes.fromhex("12020a00")  # key "p", value {}
    raw = bytes.fromhex("0805") + b"\x7a" + bytes([len(entry)]) + entry
    assert community_shard_from_description(raw) is None


@pytest.mark.parametrize(
    "bad",
    [
        bytes.fromhex("78"),  # tag without value
        bytes.fromhex("7880"),  # truncated varint
        bytes.fromhex("3205"),  # field 6 (chats) claims 5 bytes, has none
        bytes.fromhex("ff"),
    ],
)
def test_community_description_malformed(bad: bytes) -> None:
    with pytest.raises(ProtobufDecodeError, match="community description"):
        community_shard_from_description(bad)


def test_community_description_shard_out_of_range_and_limits() -> None:
    with pytest.raises(CommunityDescriptionError, match="relay_shard_index 5000"):
        community_shard_from_description(bytes.fromhex("788827"))  # varint 5000 = 0x08 | 0x80, 0x27
    with pytest.raises(ProtobufTooLarge):
        community_shard_from_description(b"\x00" * (MAX_COMMUNITY_DESCRIPTION_SIZE + 1))
    with pytest.raises(CommunityDescriptionError, match="expected bytes"):
        community_shard_from_description("0807")  # type: ignore[arg-type]


@given(st.binary(max_size=64))
def test_community_description_random_bytes(data: bytes) -> None:
    try:
        shard = community_shard_from_description(data)
    except DecodeError:
        return
    assert shard is None or 1 <= shard <= 1023


# --- 1:1 partitions ------------------------------------------------------------------------


def test_contact_partition_of_generator_point() -> None:
    # X mod 8192 is the low 13 bits: G's X ends in 0x1798 = 6040.
    assert contact_partition(G_COMPRESSED, PartitionScheme.SPEC_57) == 6040
    assert contact_partition(G_COMPRESSED) == G_X % 5000
    assert PartitionScheme.STATUS_GO.partitions == 5000
    uncompressed = coincurve.PublicKey(G_COMPRESSED).format(compressed=False)
    for form in (uncompressed, uncompressed[1:], "0x" + uncompressed.hex(), uncompressed.hex()):
        assert contact_partition(form) == G_X % 5000


def test_partitioned_topic_status_go_format() -> None:
    # status-go: PartitionedTopic = "contact-discovery-" + decimal; ToTopic = keccak[:4].
    partition = G_X % 5000
    assert partitioned_chat_id(G_COMPRESSED) == f"contact-discovery-{partition}"
    expected = f"/waku/1/0x{reference_topic_hex(f'contact-discovery-{partition}')}/rfc26"
    assert partitioned_content_topic(G_COMPRESSED) == expected
    spec = partitioned_content_topic(G_COMPRESSED, PartitionScheme.SPEC_57)
    assert spec == f"/waku/1/0x{reference_topic_hex('contact-discovery-6040')}/rfc26"


def test_one_to_one_shard_by_hand() -> None:
    # G's X ends in 0x98: low 7 bits 0b0011000 = 24 -> 768 + 24.
    assert one_to_one_shard(G_COMPRESSED) == 792
    assert one_to_one_pubsub_topic(G_COMPRESSED) == "/waku/2/rs/16/792"
    # 2G's X ends in 0xe5: low 7 bits 0b1100101 = 101 -> 869.
    two_g = coincurve.PrivateKey.from_int(2).public_key.format(compressed=True)
    assert int.from_bytes(two_g[1:], "big") == TWO_G_X
    assert one_to_one_shard(two_g) == 869
    assert shard_category(869) is ShardCategory.ONE_TO_ONE


@pytest.mark.parametrize(
    "bad", [b"", b"\x02" + b"\x00" * 32, b"\x05" + b"\x01" * 32, "0xzz", "02" * 10, 123]
)
def test_partition_rejects_bad_keys(bad: object) -> None:
    with pytest.raises(CryptoError):
        contact_partition(bad)  # type: ignore[arg-type]


# --- autosharding ------------------------------------------------------------------------

# nwaku tests/waku_core/topics/test_sharding.nim, cluster 1, 8 generation-0 shards.
NWAKU_GEN0_VECTORS = [
    ("/toychat/2/huilong/proto", 3),
    ("/0/toychat/2/huilong/proto", 3),
    ("/toychat2/2/huilong/proto", 6),
    ("/0/toychat2/2/huilong/proto", 6),
    ("/toychat/2/huilong/proto2", 3),
    ("/0/toychat/2/huilong/proto2", 3),
    ("/0/toychat/4/huilong/proto2", 7),
]


@pytest.mark.parametrize(("topic", "shard"), NWAKU_GEN0_VECTORS)
def test_autoshard_nwaku_vectors(topic: str, shard: int) -> None:
    assert autoshard(topic, 8) == shard
    assert autoshard_pubsub_topic(topic, 1, 8) == f"/waku/2/rs/1/{shard}"


def test_autoshard_uses_last_eight_bytes_mod_count() -> None:
    # The spec text reads as the whole hash; implementations take bytes 24..31. For a
    # non-power-of-two count the two disagree, so check against a direct computation.
    digest = hashlib.sha256(b"toychat2").digest()
    last8 = int.from_bytes(digest[24:], "big")
    whole = int.from_bytes(digest, "big")
    for count in (1, 3, 5, 7, 1000, 1024):
        assert autoshard("/toychat/2/huilong/proto", count) == last8 % count
    assert any(last8 % c != whole % c for c in (3, 5, 7, 1000))


def test_autoshard_generation_above_zero_is_refused() -> None:
    with pytest.raises(InvalidTopic, match="generation 1"):
        autoshard("/1/toychat/2/huilong/proto", 8)


@pytest.mark.parametrize(
    "bad",
    [
        "invalid",
        "toychat/2/huilong/proto",
        "/toychat/2/huilong",
        "/toychat//huilong/proto",
        "/toychat/2/huilong/",
        "//toychat/2/huilong/proto",
        "/x/toychat/2/huilong/proto",
        "/-1/toychat/2/huilong/proto",
        "/a/b/c/d/e/f",
        "/toy\ud800chat/2/huilong/proto",
        "",
    ],
)
def test_content_topic_parse_rejects(bad: str) -> None:
    with pytest.raises(InvalidTopic, match="content topic"):
        autoshard(bad, 8)


@pytest.mark.parametrize("count", [0, -1, 1025, 8.0, True])
def test_autoshard_count_checked(count: object) -> None:
    with pytest.raises(InvalidTopic, match="shard count"):
        autoshard("/toychat/2/huilong/proto", count)  # type: ignore[arg-type]


_part = st.text(
    alphabet=st.characters(blacklist_characters="/", blacklist_categories=("Cs",)),
    min_size=1,
    max_size=12,
)


@given(_part, _part, _part, _part, st.none() | st.integers(0, 10**6))
def test_content_topic_round_trip(
    app: str, version: str, name: str, encoding: str, generation: int | None
) -> None:
    topic = NamespacedContentTopic(app, version, name, encoding, generation)
    assert NamespacedContentTopic.parse(str(topic)) == topic


def test_v1_content_topics_autoshard_like_any_other() -> None:
    digest = hashlib.sha256(b"waku1").digest()
    assert autoshard("/waku/1/0x1a2b3c4d/rfc26", 8) == int.from_bytes(digest[24:], "big") % 8


# --- 57 DoS protection -------------------------------------------------------------------


def _signing_case(vectors) -> dict:
    v = vectors("status-shard-signing.json")
    return {
        "pubsub_topic": v["pubsub_topic"],
        "payload": bytes.fromhex(v["payload"]),
        "content_topic": v["content_topic"],
        "timestamp": v["timestamp"],
        "ephemeral": v["ephemeral"],
    }


def test_protected_message_vector(vectors) -> None:
    v = vectors("status-shard-signing.json")
    case = _signing_case(vectors)
    assert protected_message_hash(**case).hex() == v["app_message_hash"]
    key = bytes.fromhex(v["private_key_topic"])
    signature = sign_protected_message(key, **case)
    assert signature.hex() == v["meta_signature"]
    assert sign_protected_message(coincurve.PrivateKey(key), **case) == signature
    public = bytes.fromhex(v["public_key_topic"])
    assert verify_protected_message(public, signature, **case)


def test_protected_message_vector_on_waku_message(vectors) -> None:
    v = vectors("status-shard-signing.json")
    case = _signing_case(vectors)
    message = WakuMessage(
        payload=case["payload"],
        content_topic=case["content_topic"],
        timestamp=case["timestamp"],
        ephemeral=True,
        version=0,
    )
    key = bytes.fromhex(v["private_key_topic"])
    assert sign_waku_message(key, case["pubsub_topic"], message).hex() == v["meta_signature"]
    assert message.meta.hex() == v["meta_signature"]
    public = bytes.fromhex(v["public_key_topic"])
    assert verify_waku_message(public, case["pubsub_topic"], message)
    message.ephemeral = False
    assert not verify_waku_message(public, case["pubsub_topic"], message)


def test_protected_hash_layout_by_hand() -> None:
    # timestamp 1 little-endian is 01 00 00 00 00 00 00 00, -1 is ff * 8; ephemeral one byte.
    prefix = b"/waku/2/rs/16/64" + b"\xaa" + b"/a/1/b/c"
    assert protected_message_hash("/waku/2/rs/16/64", b"\xaa", "/a/1/b/c", 1) == (
        hashlib.sha256(prefix + bytes.fromhex("0100000000000000") + b"\x00").digest()
    )
    assert protected_message_hash("/waku/2/rs/16/64", b"\xaa", "/a/1/b/c", -1, True) == (
        hashlib.sha256(prefix + b"\xff" * 8 + b"\x01").digest()
    )
    assert protected_message_hash("/waku/2/rs/16/64", b"\xaa", "/a/1/b/c", 0x0102) == (
        hashlib.sha256(prefix + struct.pack("<q", 0x0102) + b"\x00").digest()
    )


def test_protected_verify_rejects_tampering_and_bad_meta(vectors) -> None:
    v = vectors("status-shard-signing.json")
    case = _signing_case(vectors)
    public = bytes.fromhex(v["public_key_topic"])
    signature = bytes.fromhex(v["meta_signature"])
    for change in (
        {"payload": case["payload"] + b"\x00"},
        {"content_topic": "content-topic2"},
        {"pubsub_topic": "/waku/2/rs/16/64"},
        {"timestamp": case["timestamp"] + 1},
        {"ephemeral": False},
    ):
        assert not verify_protected_message(public, signature, **{**case, **change})
    assert not verify_protected_message(public, signature[:63], **case)
    assert not verify_protected_message(public, signature + b"\x00", **case)
    assert not verify_protected_message(public, b"", **case)
    # The high-s twin of a valid signature is refused, as go-ethereum's VerifySignature does.
    r, s = signature[:32], int.from_bytes(signature[32:], "big")
    high_s = r + (SECP256K1_N - s).to_bytes(32, "big")
    assert not verify_protected_message(public, high_s, **case)
    other = coincurve.PrivateKey.from_int(2).public_key.format(compressed=False)
    assert not verify_protected_message(other, signature, **case)


def test_protected_message_bad_inputs() -> None:
    with pytest.raises(InvalidMessageField, match="int64"):
        protected_message_hash("t", b"", "c", 1 << 63)
    with pytest.raises(InvalidMessageField, match="timestamp"):
        protected_message_hash("t", b"", "c", "1")  # type: ignore[arg-type]
    with pytest.raises(InvalidTopic, match="UTF-8"):
        protected_message_hash("/waku/2/rs/16/\udc80", b"", "c")
    with pytest.raises(CryptoError):
        sign_protected_message(b"\x00" * 32, "t", b"", "c")
    with pytest.raises(CryptoError):
        sign_protected_message(b"\x01" * 31, "t", b"", "c")
    with pytest.raises(CryptoError):
        verify_protected_message(b"\x04" + b"\x00" * 64, b"\x01" * 64, "t", b"", "c")


@given(st.binary(max_size=200), st.integers(-(1 << 63), (1 << 63) - 1), st.booleans())
def test_protected_sign_verify_round_trip(payload: bytes, timestamp: int, ephemeral: bool) -> None:
    key = coincurve.PrivateKey.from_int(0xC0FFEE)
    public = key.public_key.format(compressed=True)
    signature = sign_protected_message(
        key, "/waku/2/rs/16/128", payload, "/a/1/b/c", timestamp, ephemeral
    )
    assert len(signature) == 64
    assert verify_protected_message(
        public, signature, "/waku/2/rs/16/128", payload, "/a/1/b/c", timestamp, ephemeral
    )
    assert not verify_protected_message(
        public, signature, "/waku/2/rs/16/128", payload, "/a/1/b/c", timestamp, not ephemeral
    )


@given(st.text(max_size=60), st.integers(1, 1024))
def test_autoshard_any_text_is_a_shard_or_a_typed_error(text: str, count: int) -> None:
    try:
        shard = autoshard(text, count)
    except InvalidTopic:
        return
    assert 0 <= shard < count
