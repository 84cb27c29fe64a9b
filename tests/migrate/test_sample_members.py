"""The sample's realistic descriptions (the demo's): the members listed are exactly the keys
that sign the generated messages, the first an admin, the last banned (in ``ban_list`` and
``banned_members``, in no members map); without ``members`` the descriptions are as before."""

from __future__ import annotations

from waku_legacy.crypto.payload import decode_payload
from waku_legacy.errors import WakuLegacyError
from waku_legacy.identity.topics import symmetric_key_for_chat
from waku_legacy.mailserver_compat.wire.envelope import Envelope
from waku_legacy.migrate.sample import (
    SampleSpec,
    generate_descriptions,
    generate_envelopes,
    make_communities,
    sample_members,
)
from waku_legacy.proto import application_metadata_pb2, community_description_pb2

SPEC = SampleSpec(communities=1, channels=2, members=4, days=10, public_per_day=0.0)


def _descriptions(**options: bool) -> list[community_description_pb2.CommunityDescription]:
    (community,) = make_communities(SPEC)
    key = symmetric_key_for_chat(community.id.chat_id)
    found = []
    for raw in generate_descriptions(SPEC, [community], **options):
        data = decode_payload(Envelope.decode(raw).data, symmetric_key=key).payload
        app = application_metadata_pb2.ApplicationMetadataMessage.FromString(data)
        found.append(community_description_pb2.CommunityDescription.FromString(app.payload))
    return found


def test_the_listed_members_are_the_authors_and_one_is_banned():
    members = sample_members(SPEC)
    (community,) = make_communities(SPEC)
    keys = {c: symmetric_key_for_chat(community.id.channel_chat_id(c)) for c in community.channels}
    signers = set()
    for raw in generate_envelopes(SPEC, [community]):
        envelope = Envelope.decode(raw)
        for key in keys.values():
            try:
                signer = decode_payload(envelope.data, symmetric_key=key).signer
            except WakuLegacyError:
                continue  # another channel's key
            signers.add("0x" + signer.hex())
    assert signers == set(members) and len(members) == 4
    first, newest = _descriptions(members=True)
    assert not first.members and not first.ban_list  # at creation: no one yet
    admin = community_description_pb2.CommunityMember.ROLE_ADMIN
    assert set(newest.members) == set(members[:-1])
    assert list(newest.members[members[0]].roles) == [admin]
    assert list(newest.ban_list) == [members[-1]] and set(newest.banned_members) == {members[-1]}
    for chat in newest.chats.values():
        assert set(chat.members) == set(members[:-1]) and chat.identity.description
    assert newest.identity.display_name == "Status Builders" and newest.identity.description


def test_without_members_the_descriptions_are_as_before():
    _, newest = _descriptions()
    assert not newest.members and not newest.ban_list and not newest.identity.description
