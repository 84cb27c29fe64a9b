"""The magnet-link message: build, open independently, verify, refuse forgeries."""

from __future__ import annotations

import base64
import hashlib
import json
from pathlib import Path

import coincurve
import pytest
from Crypto.Hash import keccak

from waku_legacy.archive import (
    ArchiveMessage,
    build_community_archives,
    build_magnet_message,
    relay_publish_body,
    relay_publish_path,
    verify_magnet_message,
)
from waku_legacy.archive.errors import ForgedMagnetMessage, MagnetMessageError, StaleMagnetMessage
from waku_legacy.archive.magnet import magnet_message_from_json, wrap_application_message
from waku_legacy.crypto.secp256k1 import private_key_from_bytes
from waku_legacy.errors import CryptoError
from waku_legacy.identity.topics import CommunityId
from waku_legacy.mailserver_compat.payload import decode_payload, encode_payload
from waku_legacy.proto import application_metadata_pb2, status_archive_pb2, waku_message_pb2

KEY = private_key_from_bytes(bytes.fromhex("22" * 32))
OTHER = private_key_from_bytes(bytes.fromhex("33" * 32))
COMMUNITY = CommunityId(KEY.public_key.format(compressed=True))
PUBSUB = "/waku/2/rs/16/128"
MAGNET = "magnet:?xt=urn:btih:" + "ab" * 20 + "&dn=" + str(COMMUNITY)
CLOCK = 1_700_000_000_123


def chat_key(chat_id: str) -> bytes:
    # status-go's public-chat key: PBKDF2-HMAC-SHA256(chat id, empty salt, 65356, 32)
    return hashlib.pbkdf2_hmac("sha256", chat_id.encode(), b"", 65356, 32)


def chat_content_topic(chat_id: str) -> str:
    topic = keccak.new(digest_bits=256, data=chat_id.encode()).digest()[:4]
    return f"/waku/1/0x{topic.hex()}/rfc26"


def test_built_message_opens_independently() -> None:
    message = build_magnet_message(KEY, MAGNET, CLOCK, pubsub_topic=PUBSUB)
    chat_id = str(COMMUNITY) + "-magnetlinks"
    assert message.content_topic == chat_content_topic(chat_id)
    assert message.version == 1
    assert message.timestamp == CLOCK * 1_000_000
    opened = decode_payload(message.payload, symmetric_key=chat_key(chat_id))
    application = application_metadata_pb2.ApplicationMetadataMessage.FromString(opened.payload)
    assert application.type == 43
    digest = keccak.new(digest_bits=256, data=application.payload).digest()
    signer = coincurve.PublicKey.from_signature_and_message(
        application.signature, digest, hasher=None
    )
    assert signer.format(compressed=True) == COMMUNITY.public_key
    link = status_archive_pb2.CommunityMessageArchiveMagnetlink.FromString(application.payload)
    assert (link.clock, link.magnet_uri) == (CLOCK, MAGNET)

    verified = verify_magnet_message(message.SerializeToString(), COMMUNITY)
    assert (verified.clock, verified.magnet_uri, verified.info_hash) == (CLOCK, MAGNET, "ab" * 20)


def _forge(signing_key: coincurve.PrivateKey, *, message_type: int = 43) -> bytes:
    """A message on the right topic with the right encryption, signed by ``signing_key``."""
    chat_id = COMMUNITY.magnetlinks_chat_id
    inner = status_archive_pb2.CommunityMessageArchiveMagnetlink(
        clock=CLOCK + 1, magnet_uri="magnet:?xt=urn:btih:" + "cd" * 20
    ).SerializeToString()
    application = wrap_application_message(inner, signing_key, message_type)
    data = encode_payload(application, sign_with=signing_key, symmetric_key=chat_key(chat_id))
    return waku_message_pb2.WakuMessage(
        payload=data, content_topic=chat_content_topic(chat_id), version=1
    ).SerializeToString()


def test_forged_message_is_refused() -> None:
    with pytest.raises(ForgedMagnetMessage, match="not by the community"):
        verify_magnet_message(_forge(OTHER), COMMUNITY)
    # a message built for another community is not one of ours either
    theirs = build_magnet_message(OTHER, MAGNET, CLOCK, pubsub_topic=PUBSUB)
    with pytest.raises(MagnetMessageError, match="content topic"):
        verify_magnet_message(theirs, COMMUNITY)
    theirs.content_topic = chat_content_topic(COMMUNITY.magnetlinks_chat_id)
    with pytest.raises(CryptoError):
        verify_magnet_message(theirs, COMMUNITY)
    # a broken signature
    message = waku_message_pb2.WakuMessage.FromString(_forge(KEY))
    opened = decode_payload(message.payload, symmetric_key=chat_key(COMMUNITY.magnetlinks_chat_id))
    application = application_metadata_pb2.ApplicationMetadataMessage.FromString(opened.payload)
    application.signature = b"\x00" * 65
    message.payload = encode_payload(
        application.SerializeToString(),
        symmetric_key=chat_key(COMMUNITY.magnetlinks_chat_id),
    )
    with pytest.raises(ForgedMagnetMessage):
        verify_magnet_message(message, COMMUNITY)


def test_stale_wrong_type_and_garbage() -> None:
    message = build_magnet_message(KEY, MAGNET, CLOCK, pubsub_topic=PUBSUB)
    assert verify_magnet_message(message, COMMUNITY, last_clock=CLOCK - 1).clock == CLOCK
    for last in (CLOCK, CLOCK + 1):
        with pytest.raises(StaleMagnetMessage):
            verify_magnet_message(message, COMMUNITY, last_clock=last)
    with pytest.raises(MagnetMessageError, match="type 1"):
        verify_magnet_message(_forge(KEY, message_type=1), COMMUNITY)
    with pytest.raises(MagnetMessageError):
        verify_magnet_message(b"\xff\xff\xff", COMMUNITY)
    version0 = waku_message_pb2.WakuMessage.FromString(message.SerializeToString())
    version0.version = 0
    with pytest.raises(MagnetMessageError, match="version"):
        verify_magnet_message(version0, COMMUNITY)


def test_relay_publish_body_and_path() -> None:
    message = build_magnet_message(KEY, MAGNET, CLOCK, pubsub_topic=PUBSUB)
    body = relay_publish_body(message)
    assert body == {
        "payload": base64.b64encode(message.payload).decode(),
        "contentTopic": message.content_topic,
        "version": 1,
        "timestamp": CLOCK * 1_000_000,
    }
    assert relay_publish_path(PUBSUB) == "/relay/v1/messages/%2Fwaku%2F2%2Frs%2F16%2F128"
    assert magnet_message_from_json(json.loads(json.dumps(body))) == message


def test_build_writes_verifiable_magnet_message(tmp_path: Path) -> None:
    messages = [
        ArchiveMessage(
            timestamp=1_650_000_000 + i, hash=bytes([i]) * 32, topic=b"abcd", payload=b"x"
        )
        for i in range(5)
    ]
    report = build_community_archives(
        tmp_path / "a", tmp_path / "t", COMMUNITY, [b"abcd"], messages,
        now=1_650_000_100, community_key=KEY, pubsub_topic=PUBSUB, clock_ms=CLOCK,
    )  # fmt: skip
    pb_path, json_path = map(Path, report.magnet_message_paths)
    verified = verify_magnet_message(pb_path.read_bytes(), COMMUNITY)
    assert verified.magnet_uri == report.magnet_uri and verified.clock == CLOCK
    document = json.loads(json_path.read_text())
    assert document["path"] == relay_publish_path(PUBSUB)
    again = magnet_message_from_json(document["body"])
    assert verify_magnet_message(again, COMMUNITY).magnet_uri == report.magnet_uri
    with pytest.raises(Exception, match="not the key of"):
        build_community_archives(
            tmp_path / "a", tmp_path / "t", COMMUNITY, [b"abcd"], messages,
            now=1_650_000_100, community_key=OTHER,
        )  # fmt: skip


def test_magnet_message_bytes_are_reproducible() -> None:
    # Reruns must write identical files: same key, link and clock -> same bytes; a new clock
    # -> new bytes (and a new GCM nonce).
    from waku_legacy.archive import build_magnet_message
    from waku_legacy.crypto.secp256k1 import private_key_from_bytes

    key = private_key_from_bytes(bytes(31) + b"\x07")
    link = "magnet:?xt=urn:btih:" + "ab" * 20 + "&dn=x"
    first = build_magnet_message(key, link, 1_000, pubsub_topic="/waku/2/rs/16/128")
    again = build_magnet_message(key, link, 1_000, pubsub_topic="/waku/2/rs/16/128")
    later = build_magnet_message(key, link, 2_000, pubsub_topic="/waku/2/rs/16/128")
    assert first.SerializeToString() == again.SerializeToString()
    assert later.payload[-12:] != first.payload[-12:]
