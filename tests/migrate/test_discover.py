"""Channels found from a community's signed CommunityDescription messages (issue 12:
``export --community 0x…`` without ``--channel``). No Spark: the discovery reads the sources
with the migration's readers on the driver."""

from __future__ import annotations

import pytest

from waku_legacy.crypto.keccak import keccak256
from waku_legacy.crypto.payload import encode_payload
from waku_legacy.crypto.secp256k1 import generate_private_key, sign_recoverable
from waku_legacy.identity.descriptions import newest_description, read_signed_description
from waku_legacy.identity.shards import CommunityDescriptionError
from waku_legacy.identity.topics import chat_topic, symmetric_key_for_chat
from waku_legacy.mailserver_compat.storage.dump import DumpWriter
from waku_legacy.mailserver_compat.wire.pow import seal
from waku_legacy.migrate.config import SourceConfig, SourceKind
from waku_legacy.migrate.discover import discover_channels
from waku_legacy.migrate.sample import (
    SampleSpec,
    description_message,
    generate_descriptions,
    generate_envelopes,
    make_communities,
    write_leveldb_mailservers,
)
from waku_legacy.proto import application_metadata_pb2, community_description_pb2

SPEC = SampleSpec(communities=3, channels=4, members=3, days=10, messages_per_channel_day=1.0)
BOGUS = "00000000-0000-4000-8000-000000000000"


def write_dump(path, envelopes) -> None:
    with DumpWriter(path) as writer:
        for raw in envelopes:
            writer.append(raw)


def _envelope(community, app_message: bytes, sent: int, chat_id: str | None = None) -> bytes:
    chat = chat_id or community.id.chat_id
    data = encode_payload(
        app_message, sign_with=generate_private_key(), symmetric_key=symmetric_key_for_chat(chat)
    )
    return seal(sent + 10, 10, chat_topic(chat), data, 0.0).encode()


def _forged(community, channels, clock: int) -> bytes:
    """A description listing ``channels`` with a high clock, signed by someone else."""
    body = community_description_pb2.CommunityDescription(clock=clock)
    for channel in channels:
        body.chats[channel].position = 0
    payload = body.SerializeToString()
    return application_metadata_pb2.ApplicationMetadataMessage(
        signature=sign_recoverable(keccak256(payload), generate_private_key()),
        payload=payload,
        type=application_metadata_pb2.ApplicationMetadataMessage.COMMUNITY_DESCRIPTION,
    ).SerializeToString()


@pytest.fixture(scope="module")
def sample(tmp_path_factory):
    out = tmp_path_factory.mktemp("sample")
    communities = make_communities(SPEC)
    mailservers = [out / "ms-1", out / "ms-2"]
    write_leveldb_mailservers(generate_envelopes(SPEC, communities), mailservers, seed=3)
    write_leveldb_mailservers(
        generate_descriptions(SPEC, communities), mailservers, keep_probability=1.0
    )
    sources = [
        SourceConfig(SourceKind.MAILSERVER_LEVELDB, f"ms-{i + 1}", i, path=str(m))
        for i, m in enumerate(mailservers)
    ]
    return communities, sources, out


def test_every_channel_of_every_sample_community_is_found(sample) -> None:
    communities, sources, out = sample
    for community in communities:
        seen: list[tuple[str, int]] = []
        found = discover_channels(
            sources, community.id, work_dir=str(out / "work"),
            on_source=lambda name, n, seen=seen: seen.append((name, n)),
        )  # fmt: skip
        assert set(found.channels) == set(community.channels)
        assert len(found.channels) == SPEC.channels
        # Two descriptions per community (creation: first channel only; later: every
        # channel), each held by both mailservers; the newer clock won.
        assert found.descriptions == 4 and seen == [("ms-1", 2), ("ms-2", 2)]
        report = found.to_json()
        assert report["clock"] == max(d.clock for d in _all(community, sources, out))
        assert [c["name"] for c in report["channels"]][:2] == ["general", "dev"]
        assert report["name"] == community.name and report["rejected"] == {}
        assert community.name in found.summary() or str(community.id) in found.summary()


def _all(community, sources, out):
    from waku_legacy.migrate.discover import _source_rows, find_descriptions

    rows = (r for s in sources for r in _source_rows(s, community.id, str(out / "w")))
    return [d for _, d in find_descriptions(rows, community.id) if not isinstance(d, Exception)]


def test_forged_and_foreign_messages_are_left_out(sample, tmp_path) -> None:
    communities, sources, _ = sample
    community, other = communities[0], communities[1]
    t = SPEC.start + 5 * 86_400
    dump = tmp_path / "extra.rlp"
    chat_message = application_metadata_pb2.ApplicationMetadataMessage(
        payload=b"hi", type=application_metadata_pb2.ApplicationMetadataMessage.CHAT_MESSAGE
    ).SerializeToString()
    write_dump(
        dump,
        [
            # A far newer description signed by another key: not the community's.
            _envelope(community, _forged(community, [BOGUS], 10**15), t),
            # The other community's genuine description, replayed on this community's chat.
            _envelope(community, description_message(other, other.channels, 10**15), t + 1),
            # Another message type on the community chat.
            _envelope(community, chat_message, t + 2),
        ],
    )
    found = discover_channels(
        [*sources, SourceConfig(SourceKind.ENVELOPE_DUMP, "extra", 2, path=str(dump))],
        community.id,
        work_dir=str(tmp_path / "work"),
    )
    assert set(found.channels) == set(community.channels)
    assert found.rejected == {"signed by another key": 2, "not a COMMUNITY_DESCRIPTION": 1}
    assert found.descriptions == 4


def test_no_description_found(tmp_path) -> None:
    community = make_communities(SampleSpec(communities=1, seed=99))[0]
    dump = tmp_path / "empty.rlp"
    write_dump(dump, [])
    found = discover_channels(
        [SourceConfig(SourceKind.ENVELOPE_DUMP, "d", 0, path=str(dump))],
        community.id,
        work_dir=str(tmp_path),
    )
    assert found.newest is None and found.channels == ()
    assert "no signed CommunityDescription" in found.summary()


def test_read_signed_description_checks() -> None:
    community, other = make_communities(SampleSpec(communities=2))[:2]
    good = read_signed_description(
        description_message(community, community.channels, 42), community.id
    )
    assert good.clock == 42 and set(good.channel_uuids) == set(community.channels)
    with pytest.raises(CommunityDescriptionError, match="not by the community key"):
        read_signed_description(description_message(other, other.channels, 1), community.id)
    with pytest.raises(CommunityDescriptionError, match="not an ApplicationMetadataMessage"):
        read_signed_description(b"\xff\xff\xff", community.id)
    # The signature covers the payload: a tampered description is not the community's.
    message = application_metadata_pb2.ApplicationMetadataMessage.FromString(
        description_message(community, community.channels, 7)
    )
    message.payload += b"\x08\x09"  # clock = 9 appended
    with pytest.raises(CommunityDescriptionError, match=r"community key|bad signature"):
        read_signed_description(message.SerializeToString(), community.id)
    # A chat key that is not a channel uuid is reported, not used.
    odd = read_signed_description(
        description_message(community, (community.channels[0], "Not-A-UUID"), 7), community.id
    )
    assert odd.channel_uuids == (community.channels[0],) and odd.ignored == ("Not-A-UUID",)
    assert newest_description([odd, good]) is good
    assert newest_description([]) is None


def test_a_description_in_status_gos_protocol_message_layer_is_read() -> None:
    """status-go's SendPublic wraps public messages in ProtocolMessage{public_message = 102};
    a description sent that way is read like a bare one (the layer is built by hand here:
    field 2 installation id, field 102 the ApplicationMetadataMessage)."""
    community = make_communities(SampleSpec(communities=1))[0]
    bare = description_message(community, community.channels, 11)
    installation = b"6f1d2c3b-aaaa-4bbb-8ccc-0123456789ab"

    def length_delimited(field: int, value: bytes) -> bytes:
        tag, out = (field << 3) | 2, b""
        while tag >= 0x80:
            out, tag = out + bytes([(tag & 0x7F) | 0x80]), tag >> 7
        size, length = len(value), b""
        while size >= 0x80:
            length, size = length + bytes([(size & 0x7F) | 0x80]), size >> 7
        return out + bytes([tag]) + length + bytes([size]) + value

    layered = length_delimited(2, installation) + length_delimited(102, bare)
    found = read_signed_description(layered, community.id)
    assert found.clock == 11 and set(found.channel_uuids) == set(community.channels)


def test_pinning_open_to_all_members_is_read_from_admin_settings() -> None:
    """status-go's CommunityDescription field 10 (admin_settings, a CommunityAdminSettings)
    holding field 1 (pin_message_all_members_enabled) = true, appended by hand: tag 0x52
    (10 << 3 | 2), length 2, then tag 0x08 (1 << 3 | 0), value 1. Without it: off."""
    from waku_legacy.crypto.secp256k1 import private_key_from_bytes

    community = make_communities(SampleSpec(communities=1))[0]
    message = application_metadata_pb2.ApplicationMetadataMessage.FromString(
        description_message(community, community.channels, 7)
    )
    plain = read_signed_description(message.SerializeToString(), community.id)
    assert plain.pin_all_members is False
    message.payload += b"\x52\x02\x08\x01"
    message.signature = sign_recoverable(
        keccak256(message.payload), private_key_from_bytes(community.secret)
    )
    found = read_signed_description(message.SerializeToString(), community.id)
    assert found.pin_all_members is True and found.clock == 7
