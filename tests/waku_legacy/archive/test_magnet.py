"""The archive-link (magnet-link) message: build, open independently, verify, refuse
forgeries."""

from __future__ import annotations

import base64
import hashlib
import json
from pathlib import Path
from typing import Any

import coincurve
import pytest

from tests.helpers import reference_keccak256
from waku_legacy.archive import (
    ArchiveMessage,
    BuildReport,
    build_community_archives,
    build_magnet_message,
    relay_publish_body,
    relay_publish_path,
    verify_magnet_message,
)
from waku_legacy.archive.errors import ForgedMagnetMessage, MagnetMessageError, StaleMagnetMessage
from waku_legacy.archive.magnet import (
    build_archive_link_messages,
    magnet_message_from_json,
    wrap_application_message,
)
from waku_legacy.crypto.payload import decode_payload, encode_payload
from waku_legacy.crypto.secp256k1 import private_key_from_bytes
from waku_legacy.errors import ConfigError, CryptoError
from waku_legacy.identity.topics import CommunityId
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
    topic = reference_keccak256(chat_id.encode())[:4]
    return f"/waku/1/0x{topic.hex()}/rfc26"


# -- an independent reader, written from status-go's protos (not the project's modules) -------
#
# WakuMessage (waku-proto waku/message/v1): payload = 1, content_topic = 2, version = 3,
#   timestamp = 10 (sint64), meta = 11, ephemeral = 31.
# 26/WAKU-PAYLOAD: AES-256-GCM(key = PBKDF2(chat id)), nonce = last 12 bytes; plaintext =
#   flags | size (flags & 3 bytes, LE) | data | padding | [65-byte r||s||v over keccak of
#   everything before it, when flags & 4].
# ProtocolMessage (protocol/encryption/protocol_message.proto): installation_id = 2,
#   bundles = 3, encrypted_message = 101, public_message = 102.
# ApplicationMetadataMessage: signature = 1, payload = 2, type = 3 (43 = archive link).
# CommunityMessageArchiveLink (protocol/protobuf/communities.proto): clock = 1,
#   archive_link = 2.


def _varint(data: bytes, at: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        byte = data[at]
        at += 1
        value |= (byte & 0x7F) << shift
        shift += 7
        if not byte & 0x80:
            return value, at


def pb_fields(data: bytes) -> dict[int, list[int | bytes]]:
    """field number -> values, for varint (0), 64-bit (1), length-delimited (2), 32-bit (5)."""
    out: dict[int, list[int | bytes]] = {}
    at = 0
    while at < len(data):
        key, at = _varint(data, at)
        number, wire = key >> 3, key & 7
        value: int | bytes
        if wire == 0:
            value, at = _varint(data, at)
        elif wire == 2:
            size, at = _varint(data, at)
            value, at = data[at : at + size], at + size
            assert len(value) == size, "truncated field"
        elif wire in (1, 5):
            width = 8 if wire == 1 else 4
            value, at = int.from_bytes(data[at : at + width], "little"), at + width
        else:
            raise AssertionError(f"unexpected wire type {wire}")
        out.setdefault(number, []).append(value)
    return out


def one(fields: dict[int, list[int | bytes]], number: int) -> int | bytes:
    assert len(fields.get(number, [])) == 1, f"field {number}: {fields.get(number)}"
    return fields[number][0]


def recover(signature: bytes, digest: bytes) -> bytes:
    """Compressed key of a 65-byte r||s||v (v in 0/1) signature over a 32-byte digest."""
    key = coincurve.PublicKey.from_signature_and_message(signature, digest, hasher=None)
    return key.format(compressed=True)


def independent_open(message_bytes: bytes, chat_id: str) -> dict:
    """Everything a current status-go member checks, read from the raw WakuMessage bytes."""
    from Crypto.Cipher import AES

    waku = pb_fields(message_bytes)
    opened: dict = {
        "content_topic": one(waku, 2).decode(),
        "version": one(waku, 3),
        "timestamp_zigzag": one(waku, 10),
        "meta": waku.get(11),
        "ephemeral": waku.get(31),
    }
    data = one(waku, 1)
    nonce, tag, ciphertext = data[-12:], data[-28:-12], data[:-28]
    plain = AES.new(chat_key(chat_id), AES.MODE_GCM, nonce=nonce).decrypt_and_verify(
        ciphertext, tag
    )
    flags = plain[0]
    width = flags & 3
    size = int.from_bytes(plain[1 : 1 + width], "little")
    body = plain[1 + width : 1 + width + size]
    assert flags & 4, "the 26/WAKU-PAYLOAD is not signed (status-go drops it)"
    signature = plain[-65:]
    opened["payload_signer"] = recover(signature, reference_keccak256(plain[:-65]))
    protocol = pb_fields(body)
    assert 102 in protocol, "no ProtocolMessage.public_message (field 102): bare layering"
    opened["installation_id"] = one(protocol, 2).decode()
    application = pb_fields(one(protocol, 102))
    opened["type"] = one(application, 3)
    link_bytes = one(application, 2)
    opened["application_signer"] = recover(one(application, 1), reference_keccak256(link_bytes))
    link = pb_fields(link_bytes)
    opened["clock"] = one(link, 1)
    opened["archive_link"] = one(link, 2).decode()
    return opened


OPERATOR = private_key_from_bytes(bytes.fromhex("44" * 32))


def _messages(count: int = 5, payload: bytes = b"x") -> list[ArchiveMessage]:
    return [
        ArchiveMessage(
            timestamp=1_650_000_000 + i, hash=bytes([i]) * 32, topic=b"abcd", payload=payload
        )
        for i in range(count)
    ]


def _build_signed(tmp_path: Path, messages: list[ArchiveMessage], **options: Any) -> BuildReport:
    """Archives, torrent and the archive-link message signed by KEY (clock CLOCK, on PUBSUB)."""
    return build_community_archives(
        tmp_path / "a", tmp_path / "t", COMMUNITY, [b"abcd"], messages,
        now=1_650_000_100, community_key=KEY, pubsub_topic=PUBSUB, clock_ms=CLOCK,
        **options,
    )  # fmt: skip


def test_published_archive_link_read_by_an_independent_decoder(tmp_path: Path) -> None:
    """Issue 12, must show: what the project publishes has status-go's ProtocolMessage layer,
    the community's signature on the ApplicationMetadataMessage, a payload signature (by the
    operator key), and sits on the -memberUpdate content topic (and, for 2024 clients, on
    -magnetlinks), with meta and ephemeral set as status-go's Post sets them."""
    report = _build_signed(tmp_path, _messages(), payload_signer=OPERATOR)
    pb_path, json_path = map(Path, report.magnet_message_paths)
    document = json.loads(json_path.read_text())
    universal = str(COMMUNITY) + "-memberUpdate"
    magnetlinks = str(COMMUNITY) + "-magnetlinks"
    published = [
        (m["chat"], m["contentTopic"], base64.b64decode(m["body"]["payload"]), m["body"])
        for m in document["messages"]
    ]
    assert [chat for chat, *_ in published] == ["universal", "magnetlinks"]
    for (_chat, topic, payload, body), chat_id in zip(
        published, (universal, magnetlinks), strict=True
    ):
        assert topic == chat_content_topic(chat_id) == body["contentTopic"]
        assert body["meta"] == "" and body["ephemeral"] is False
        assert body["version"] == 1 and body["timestamp"] == CLOCK * 1_000_000
        raw = waku_message_pb2.WakuMessage(
            payload=payload, content_topic=topic, version=1, timestamp=body["timestamp"],
            meta=b"", ephemeral=False,
        ).SerializeToString()  # fmt: skip
        opened = independent_open(raw, chat_id)
        assert opened["content_topic"] == chat_content_topic(chat_id)
        assert opened["type"] == 43
        assert opened["application_signer"] == COMMUNITY.public_key
        assert opened["payload_signer"] == OPERATOR.public_key.format(compressed=True)
        assert (opened["clock"], opened["archive_link"]) == (CLOCK, report.magnet_uri)
        assert opened["installation_id"]

    # the .pb file, byte for byte as written: the -memberUpdate one, meta and ephemeral present
    opened = independent_open(pb_path.read_bytes(), universal)
    assert opened["content_topic"] == chat_content_topic(universal)
    assert opened["version"] == 1 and opened["timestamp_zigzag"] == 2 * CLOCK * 1_000_000
    assert opened["meta"] == [b""] and opened["ephemeral"] == [0]
    assert opened["application_signer"] == COMMUNITY.public_key
    assert opened["payload_signer"] == OPERATOR.public_key.format(compressed=True)
    assert opened["clock"] == CLOCK
    verified = verify_magnet_message(pb_path.read_bytes(), COMMUNITY)
    assert (verified.chat, verified.layering) == ("universal", "protocol-message")
    assert verified.payload_signer == OPERATOR.public_key.format(compressed=True)


def test_chats_setting_and_default_signer() -> None:
    both = build_archive_link_messages(KEY, MAGNET, CLOCK, pubsub_topic=PUBSUB)
    assert [c for c, _ in both] == ["universal", "magnetlinks"]
    only = build_archive_link_messages(KEY, MAGNET, CLOCK, pubsub_topic=PUBSUB, chats="universal")
    assert [(c, m.SerializeToString()) for c, m in only] == [
        (c, m.SerializeToString()) for c, m in both[:1]
    ]
    old = build_archive_link_messages(KEY, MAGNET, CLOCK, pubsub_topic=PUBSUB, chats="magnetlinks")
    assert [c for c, _ in old] == ["magnetlinks"]
    opened = independent_open(old[0][1].SerializeToString(), COMMUNITY.magnetlinks_chat_id)
    # no operator key configured: the community key signs the payload too
    assert opened["payload_signer"] == opened["application_signer"] == COMMUNITY.public_key
    with pytest.raises(ConfigError, match="archive_link_chats"):
        build_archive_link_messages(KEY, MAGNET, CLOCK, pubsub_topic=PUBSUB, chats="all")


def test_both_layerings_are_read() -> None:
    """A bare ApplicationMetadataMessage (what this project published before) is still read,
    as status-go's receivers fall back to it; the reader says which layering it saw."""
    current = verify_magnet_message(
        build_magnet_message(KEY, MAGNET, CLOCK, pubsub_topic=PUBSUB), COMMUNITY
    )
    assert (current.layering, current.chat) == ("protocol-message", "universal")
    legacy = verify_magnet_message(_forge(KEY), COMMUNITY)
    assert (legacy.layering, legacy.chat, legacy.installation_id) == ("bare", "magnetlinks", None)
    assert legacy.clock == CLOCK + 1


def test_unsigned_payload_is_refused() -> None:
    """status-go drops a 26/WAKU-PAYLOAD without a signature (HandleTransportLayer)."""
    chat_id = COMMUNITY.universal_chat_id
    inner = status_archive_pb2.CommunityMessageArchiveLink(
        clock=CLOCK, archive_link=MAGNET
    ).SerializeToString()
    message = waku_message_pb2.WakuMessage(
        payload=encode_payload(
            wrap_application_message(inner, KEY), symmetric_key=chat_key(chat_id)
        ),
        content_topic=chat_content_topic(chat_id),
        version=1,
    )
    with pytest.raises(MagnetMessageError, match="not signed"):
        verify_magnet_message(message, COMMUNITY)


def _forge(signing_key: coincurve.PrivateKey, *, message_type: int = 43) -> bytes:
    """A 2024-style message (bare ApplicationMetadataMessage, ``-magnetlinks``) on the right
    topic with the right encryption, signed by ``signing_key``."""
    chat_id = COMMUNITY.magnetlinks_chat_id
    inner = status_archive_pb2.CommunityMessageArchiveLink(
        clock=CLOCK + 1, archive_link="magnet:?xt=urn:btih:" + "cd" * 20
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
        sign_with=KEY,
        symmetric_key=chat_key(COMMUNITY.magnetlinks_chat_id),
    )
    with pytest.raises(ForgedMagnetMessage):
        verify_magnet_message(message, COMMUNITY)


def test_stale_wrong_type_and_garbage() -> None:
    message = build_magnet_message(KEY, MAGNET, CLOCK, pubsub_topic=PUBSUB)
    assert verify_magnet_message(message, COMMUNITY, last_clock=CLOCK - 1).clock == CLOCK
    # status-go: clock >= last accepted is accepted (equal included), lower is stale
    assert verify_magnet_message(message, COMMUNITY, last_clock=CLOCK).clock == CLOCK
    with pytest.raises(StaleMagnetMessage):
        verify_magnet_message(message, COMMUNITY, last_clock=CLOCK + 1)
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
        "meta": "",  # status-go's Post sets meta (empty) and ephemeral (false) explicitly
        "ephemeral": False,
    }
    assert relay_publish_path(PUBSUB) == "/relay/v1/messages/%2Fwaku%2F2%2Frs%2F16%2F128"
    assert magnet_message_from_json(json.loads(json.dumps(body))) == message


def test_build_writes_verifiable_magnet_message(tmp_path: Path) -> None:
    messages = _messages()
    report = _build_signed(tmp_path, messages)
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


def test_finishing_a_build_rewrites_old_layering_and_other_chats(tmp_path: Path) -> None:
    """Files written before issue 12 (bare layering, -magnetlinks only), or for chats other
    than the configured ones, are rewritten in status-go's layering for the chats asked."""
    from waku_legacy.archive import finish_interrupted_build
    from waku_legacy.archive.layout import CommunityLayout

    report = _build_signed(tmp_path, _messages(3, b"y"), archive_link_chats="magnetlinks")
    layout = CommunityLayout.of(tmp_path / "a", COMMUNITY, tmp_path / "t")
    first = json.loads(layout.magnet_message_json.read_text())
    assert [m["chat"] for m in first["messages"]] == ["magnetlinks"]
    assert verify_magnet_message(layout.magnet_message_pb.read_bytes(), COMMUNITY).chat == (
        "magnetlinks"
    )

    def finish(**kwargs):
        return finish_interrupted_build(
            tmp_path / "a", tmp_path / "t", COMMUNITY, community_key=KEY, pubsub_topic=PUBSUB,
            clock_ms=CLOCK + 5, **kwargs,
        )  # fmt: skip

    assert not finish(archive_link_chats="magnetlinks").changed  # as configured: kept
    fixed = finish()  # default "both"
    assert fixed.magnet_message_rewritten and "not 'both'" in fixed.magnet_message_problem
    document = json.loads(layout.magnet_message_json.read_text())
    assert [m["chat"] for m in document["messages"]] == ["universal", "magnetlinks"]
    assert not finish().changed  # byte-identical rerun: nothing to do

    # a 2024-style .pb (bare ApplicationMetadataMessage) carrying the same link
    chat_id = COMMUNITY.magnetlinks_chat_id
    inner = status_archive_pb2.CommunityMessageArchiveLink(
        clock=CLOCK, archive_link=report.magnet_uri
    ).SerializeToString()
    legacy = waku_message_pb2.WakuMessage(
        payload=encode_payload(
            wrap_application_message(inner, KEY), sign_with=KEY, symmetric_key=chat_key(chat_id)
        ),
        content_topic=chat_content_topic(chat_id),
        version=1,
    )
    layout.magnet_message_pb.write_bytes(legacy.SerializeToString())
    fixed = finish()
    assert fixed.magnet_message_rewritten and "bare layering" in fixed.magnet_message_problem
    opened = independent_open(layout.magnet_message_pb.read_bytes(), COMMUNITY.universal_chat_id)
    assert opened["archive_link"] == report.magnet_uri
