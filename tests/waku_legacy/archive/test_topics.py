"""Archive topics (issue 12): v1-era channel messages relabelled with ``<id>-memberUpdate``.

Current Status clients (since status-go PR #5993) import an archived message only when its
4-byte topic is one they have a filter for (``<id>``, ``<id>-memberUpdate``, the community key
topics), never a channel's ``keccak256(<id><uuid>)[:4]``. The archives are read back here with
an independent protobuf reader written from status-go's ``communities.proto``,
``application_metadata.proto`` and ``chat_message.proto`` field numbers (not the project's
decoders), and keccak-256 from pycryptodome.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import coincurve
import pytest

from tests.helpers import reference_keccak256
from waku_legacy.archive import build_community_archives
from waku_legacy.archive.topics import ArchiveTopics, apply_archive_topics
from waku_legacy.community_config import parse_community
from waku_legacy.crypto.payload import decode_payload
from waku_legacy.errors import ConfigError
from waku_legacy.identity.topics import chat_topic, symmetric_key_for_chat
from waku_legacy.mailserver_compat.wire.convert import archive_message
from waku_legacy.mailserver_compat.wire.envelope import Envelope
from waku_legacy.migrate.sample import SampleSpec, generate_envelopes, make_communities

SPEC = SampleSpec(communities=2, channels=3, members=4, days=24, messages_per_channel_day=1.5)
NOW = SPEC.start + SPEC.days * 86_400 + 3600


# -- an independent protobuf reader ------------------------------------------------------------


def _varint(data: bytes, pos: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        byte = data[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, pos
        shift += 7


def fields(data: bytes) -> list[tuple[int, int | bytes]]:
    """(field number, value) pairs of a protobuf message: varints as int, LEN as bytes."""
    out: list[tuple[int, int | bytes]] = []
    pos = 0
    while pos < len(data):
        key, pos = _varint(data, pos)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, pos = _varint(data, pos)
            out.append((number, value))
        elif wire == 2:
            length, pos = _varint(data, pos)
            out.append((number, data[pos : pos + length]))
            pos += length
        else:
            raise AssertionError(f"unexpected wire type {wire}")
    assert pos == len(data)
    return out


def first(data: bytes, number: int, default: int | bytes = b"") -> int | bytes:
    return next((v for n, v in fields(data) if n == number), default)


def read_archives(root: Path) -> list[dict]:
    """Every archive of ``root``/index (``WakuMessageArchiveIndex{map<string,
    WakuMessageArchiveIndexMetadata{metadata = 2, offset = 3, size = 4, padding = 5}>
    archives = 1}``) read from ``root``/data (``WakuMessageArchive{metadata = 2{from = 2,
    to = 3, repeated bytes contentTopic = 4}, repeated WakuMessage messages = 3{sig = 1,
    timestamp = 2, topic = 3, payload = 4, padding = 5, hash = 6}}``)."""
    data = (root / "data").read_bytes()
    archives = []
    for _, entry in fields((root / "index").read_bytes()):
        assert isinstance(entry, bytes)
        key, meta = first(entry, 1), first(entry, 2)
        assert isinstance(meta, bytes) and isinstance(key, bytes)
        assert key.decode() == "0x" + reference_keccak256(meta).hex()
        offset, size, padding = (first(meta, n, 0) for n in (3, 4, 5))
        assert isinstance(offset, int) and isinstance(size, int) and isinstance(padding, int)
        raw = data[offset : offset + size - padding]
        metadata = first(raw, 2)
        assert isinstance(metadata, bytes)
        topics = [v for n, v in fields(metadata) if n == 4]
        assert topics == [v for n, v in fields(first(meta, 2)) if n == 4]  # type: ignore[arg-type]
        messages = []
        for number, body in fields(raw):
            if number != 3:
                continue
            assert isinstance(body, bytes)
            m = dict.fromkeys(("sig", "topic", "payload", "padding", "hash"), b"")
            m["timestamp"] = 0
            names = {1: "sig", 2: "timestamp", 3: "topic", 4: "payload", 5: "padding", 6: "hash"}
            for n, v in fields(body):
                m[names[n]] = v
            messages.append(m)
        archives.append({"from": first(metadata, 2, 0), "to": first(metadata, 3, 0),
                         "topics": topics, "messages": messages})  # fmt: skip
    return archives


def chat_id_of(payload: bytes) -> str:
    """``ApplicationMetadataMessage{signature = 1, payload = 2, type = 3}`` (CHAT_MESSAGE = 1)
    holding ``ChatMessage{..., chat_id = 6, message_type = 7}`` (COMMUNITY_CHAT = 5)."""
    assert first(payload, 3, 0) == 1
    chat = first(payload, 2)
    assert isinstance(chat, bytes)
    assert first(chat, 7, 0) == 5
    chat_id = first(chat, 6)
    assert isinstance(chat_id, bytes)
    return chat_id.decode()


def app_signer(payload: bytes) -> bytes:
    """Uncompressed key that signed the ApplicationMetadataMessage (keccak256 of field 2)."""
    signature, body = first(payload, 1), first(payload, 2)
    assert isinstance(signature, bytes) and isinstance(body, bytes)
    digest = reference_keccak256(body)
    key = coincurve.PublicKey.from_signature_and_message(signature, digest, hasher=None)
    return key.format(compressed=False)


# -- the sample --------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def sample() -> tuple[list, dict]:
    """(communities, {community id: [(envelope hash, channel uuid, archive message)]})."""
    communities = make_communities(SPEC)
    channels = {}
    for c in communities:
        for uuid in c.channels:
            chat = c.id.channel_chat_id(uuid)
            channels[chat_topic(chat)] = (c, uuid, symmetric_key_for_chat(chat))
    per_community: dict[str, list] = {str(c.id): [] for c in communities}
    for raw in generate_envelopes(SPEC, communities):
        env = Envelope.decode(raw)
        if env.topic not in channels:
            continue  # public chats
        c, uuid, key = channels[env.topic]
        message = archive_message(
            message_hash=reference_keccak256(raw), topic=env.topic, timestamp=env.expiry - env.ttl,
            decoded=decode_payload(env.data, symmetric_key=key),
        )  # fmt: skip
        per_community[str(c.id)].append((reference_keccak256(raw), uuid, message))
    assert all(len(v) > 50 for v in per_community.values())
    return communities, per_community


def build(tmp: Path, community, messages, mode: str | None) -> Path:  # type: ignore[no-untyped-def]
    topics = [chat_topic(community.id.channel_chat_id(u)) for u in community.channels]
    extra = {} if mode is None else {"archive_topics": mode}
    build_community_archives(tmp / "archives", tmp / "torrents", community.id, topics,
                             [m for _, _, m in messages], now=NOW, fsync=False,
                             **extra)  # fmt: skip
    return tmp / "archives" / str(community.id)


def _files(root: Path) -> tuple[bytes, bytes]:
    return (root / "data").read_bytes(), (root / "index").read_bytes()


@pytest.mark.parametrize("mode", ["universal", "both"])
def test_every_v1_channel_message_is_under_member_update(sample, tmp_path, mode) -> None:
    communities, per_community = sample
    for community in communities:
        cid = str(community.id)
        universal = reference_keccak256(f"{cid}-memberUpdate".encode())[:4]
        channel_topics = {
            reference_keccak256(f"{cid}{u}".encode())[:4]: u for u in community.channels
        }
        expected = per_community[cid]
        archives = read_archives(build(tmp_path / mode, community, expected, mode))
        assert archives
        for archive in archives:
            if mode == "universal":
                assert archive["topics"] == [universal]
            else:
                # the channel topics sorted, as every writer lists them (issue 22)
                assert archive["topics"] == [*sorted(channel_topics), universal]
        found = [m for a in archives for m in a["messages"]]
        on_universal = {}
        for m in found:
            if m["topic"] == universal:
                assert m["payload"] not in on_universal
                on_universal[m["payload"]] = m
        counts = Counter(m["topic"] for m in found)
        assert counts[universal] == len(expected)
        if mode == "universal":
            assert set(counts) == {universal}
        else:
            assert sum(counts[t] for t in channel_topics) == len(expected)
            assert len({m["hash"] for m in found}) == len(found)  # no hash twice
        for envelope_hash, uuid, original in expected:
            copy = on_universal[original.payload]
            assert copy["sig"] == original.sig and len(copy["sig"]) == 65
            assert copy["timestamp"] == original.timestamp  # seconds: expiry - ttl
            assert copy["padding"] == original.padding
            assert copy["hash"] == (
                envelope_hash if mode == "universal"
                else reference_keccak256(envelope_hash + universal)
            )  # fmt: skip
            chat_id = chat_id_of(copy["payload"])
            assert chat_id == f"{cid}{uuid}"  # a current client files it under its channel
            assert reference_keccak256(chat_id.encode())[:4] == original.topic
            assert channel_topics[original.topic] == uuid
            assert app_signer(copy["payload"]) == copy["sig"]  # CanPost checks this author


def test_both_keeps_the_channel_copies_of_channel_mode(sample, tmp_path) -> None:
    communities, per_community = sample
    community = communities[0]
    messages = per_community[str(community.id)]
    channel = read_archives(build(tmp_path / "channel", community, messages, "channel"))
    both = read_archives(build(tmp_path / "both", community, messages, "both"))
    universal = reference_keccak256(f"{community.id}-memberUpdate".encode())[:4]

    def key(m: dict) -> tuple:
        return (m["hash"], m["topic"], m["payload"], m["sig"], m["timestamp"], m["padding"])

    in_channel = {key(m) for a in channel for m in a["messages"]}
    in_both = {key(m) for a in both for m in a["messages"] if m["topic"] != universal}
    assert in_channel == in_both and len(in_channel) == len(messages)


def test_channel_is_todays_archive_and_reruns_are_byte_identical(sample, tmp_path) -> None:
    communities, per_community = sample
    community = communities[1]
    messages = per_community[str(community.id)]
    default = _files(build(tmp_path / "default", community, messages, None))
    universal = reference_keccak256(f"{community.id}-memberUpdate".encode())[:4]
    today = read_archives(tmp_path / "default" / "archives" / str(community.id))
    assert universal not in {m["topic"] for a in today for m in a["messages"]}
    assert all(universal not in a["topics"] for a in today)
    assert _files(build(tmp_path / "channel", community, messages, "channel")) == default
    for mode in ("channel", "universal", "both"):
        first_run = _files(build(tmp_path / f"{mode}-1", community, messages, mode))
        again = _files(build(tmp_path / f"{mode}-2", community, list(reversed(messages)), mode))
        assert first_run == again, mode
        # a rerun over the same store adds nothing and changes no byte
        build(tmp_path / f"{mode}-1", community, messages, mode)
        assert _files(tmp_path / f"{mode}-1" / "archives" / str(community.id)) == first_run
    assert _files(tmp_path / "universal-1" / "archives" / str(community.id)) != default


def test_messages_not_on_a_channel_topic_pass_unchanged(sample) -> None:
    communities, per_community = sample
    community = communities[0]
    _, _, message = per_community[str(community.id)][0]
    out, topics = apply_archive_topics([message], [b"\x00\x00\x00\x01"], community.id, "both")
    assert out == [message] and topics[-1] == chat_topic(community.id.universal_chat_id)


def test_an_unknown_setting_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match=r"'channel'.*'universal'.*'both'.*'Universal'"):
        ArchiveTopics.parse("Universal")


def test_community_config_reads_archive_topics(sample) -> None:
    communities, _ = sample
    c = communities[0]
    raw = {"id": str(c.id), "channels": list(c.channels), "shard": c.shard}
    assert parse_community(dict(raw), 1, Path(".")).archive_topics == "both"
    for mode in ("channel", "universal", "both"):
        assert parse_community({**raw, "archive_topics": mode}, 1, Path(".")).archive_topics == mode
    with pytest.raises(ConfigError, match=r"key 'archive_topics' must be \"channel\".*got a strin"):
        parse_community({**raw, "archive_topics": "memberUpdate"}, 1, Path("."))
    with pytest.raises(ConfigError, match=r"key 'archive_topics' must be a string"):
        parse_community({**raw, "archive_topics": ["both"]}, 1, Path("."))
