"""Topic and chat identity rules, hand-derived."""

from __future__ import annotations

import hashlib

import pytest

from waku_legacy.errors import InvalidCommunityId, InvalidTopic
from waku_legacy.identity.topics import (
    CommunityId,
    chat_topic,
    content_topic_of_chat,
    mailserver_request_key,
    symmetric_key_for_chat,
    v1_topic_from_content_topic,
    v1_topic_to_content_topic,
)

# The secp256k1 generator point G, compressed: a valid community key.
G_COMPRESSED = "0279be667ef9dcbbac55a06295ce870b07029bfcdb2dce28d959f2815b16f81798"


def test_v1_topic_content_topic_round_trip() -> None:
    assert v1_topic_to_content_topic(bytes([0x1A, 0x2B, 0x3C, 0x4D])) == "/waku/1/0x1a2b3c4d/rfc26"
    assert v1_topic_from_content_topic("/waku/1/0x1a2b3c4d/rfc26") == bytes.fromhex("1a2b3c4d")


@pytest.mark.parametrize(
    "bad",
    [
        "/waku/1/0x1A2B3C4D/rfc26",  # uppercase is not the canonical form
        "/waku/1/0x1a2b3c/rfc26",
        "/waku/1/1a2b3c4d/rfc26",
        "/waku/2/0x1a2b3c4d/rfc26",
        "/waku/1/0x1a2b3c4d/proto",
        "",
    ],
)
def test_bad_v1_content_topics(bad: str) -> None:
    with pytest.raises(InvalidTopic, match="v1 content topic"):
        v1_topic_from_content_topic(bad)


def test_v1_topic_must_be_four_bytes() -> None:
    with pytest.raises(InvalidTopic):
        v1_topic_to_content_topic(b"\x01\x02\x03")


def test_chat_topic_is_first_four_keccak_bytes() -> None:
    # keccak256("") = c5d24601..., keccak256("abc") = 4e03657a...
    assert chat_topic("") == bytes.fromhex("c5d24601")
    assert chat_topic("abc") == bytes.fromhex("4e03657a")
    assert content_topic_of_chat("abc") == "/waku/1/0x4e03657a/rfc26"


def test_symmetric_keys_use_65356_iterations() -> None:
    assert symmetric_key_for_chat("status") == hashlib.pbkdf2_hmac(
        "sha256", b"status", b"", 65356, 32
    )
    assert mailserver_request_key() == hashlib.pbkdf2_hmac(
        "sha256", b"status-offline-inbox", b"", 65356, 32
    )


def test_community_ids_and_chat_ids() -> None:
    community = CommunityId.parse("0x" + G_COMPRESSED.upper())
    assert str(community) == "0x" + G_COMPRESSED
    channel = "aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee"
    assert community.channel_chat_id(channel) == "0x" + G_COMPRESSED + channel
    assert community.magnetlinks_chat_id == "0x" + G_COMPRESSED + "-magnetlinks"
    assert community.uncompressed[:1] == b"\x04" and len(community.uncompressed) == 65


@pytest.mark.parametrize(
    "bad",
    [
        G_COMPRESSED,  # no 0x
        "0x" + G_COMPRESSED[:-2],  # 32 bytes
        "0x04" + G_COMPRESSED[2:],  # uncompressed prefix
        "0x02" + "ff" * 32,  # x >= p: not on the curve
        "0x" + "zz" * 33,
    ],
)
def test_bad_community_ids(bad: str) -> None:
    with pytest.raises(InvalidCommunityId):
        CommunityId.parse(bad)


def test_bad_channel_uuid() -> None:
    community = CommunityId.parse("0x" + G_COMPRESSED)
    with pytest.raises(InvalidTopic, match="channel uuid"):
        community.channel_chat_id("general")


def test_channel_of_takes_canonical_channel_chat_ids_and_remembers_only_those() -> None:
    """status-go names a community channel's chat ``<community id><uuid>``: the uuid in its
    canonical 36-character form (any case); anything else, or another community's id, is no
    channel. Ids of another length are refused before the memo, so a stranger's long ids
    never fill it."""
    import coincurve

    from waku_legacy.identity import topics

    community = CommunityId(coincurve.PrivateKey(b"\x07" * 32).public_key.format())
    other = CommunityId(coincurve.PrivateKey(b"\x08" * 32).public_key.format())
    channel = "8f3a1c2e-4b5d-4e6f-8a9b-0c1d2e3f4a5b"
    assert community.channel_of(f"{community}{channel}") == channel
    assert community.channel_of(f"{str(community).upper()}{channel.upper()}") == channel
    assert community.channel_of(f"{other}{channel}") is None
    assert community.channel_of(f"{community}{channel.replace('-', '')}") is None
    assert community.channel_of(f"{community}{{{channel}}}") is None
    assert community.channel_of(f"{community}{channel[:-1]}g") is None
    before = topics._channel_of.cache_info().currsize
    for n in range(50):
        assert community.channel_of(f"{community}{channel}" + "x" * (n + 1)) is None
    assert topics._channel_of.cache_info().currsize == before
