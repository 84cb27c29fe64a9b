"""What members will see (issue 23): hand-built archived messages whose fate is derived here
from status-go's rules, not from the preview's output.

Every message is built the way a Status client sends it, from status-go's field numbers
(``chat_message.proto``, ``application_metadata_message.proto``, ``communities.proto``,
``encryption/protocol_message.proto``) with the hand wire encoder of ``tests/pb_wire.py``,
signatures by coincurve and keccak-256 by pycryptodome: a ``ChatMessage`` signed by its
author in an ``ApplicationMetadataMessage``, in a ``ProtocolMessage``, archived as status-go
archives it (decrypted payload, ``sig`` = the payload signer's 65-byte key, seconds).

The community: channels A and B (in the description) and D (deleted: not in it); alice is a
member of both channels, dave a viewer in A, bob banned, carol gone; the owner posts too.
"""

from __future__ import annotations

import uuid

import coincurve
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.helpers import reference_keccak256
from tests.pb_wire import field_bytes, field_varint
from waku_legacy.archive.magnet import build_archive_link_message
from waku_legacy.archive.message import ArchiveMessage
from waku_legacy.identity.descriptions import read_signed_description
from waku_legacy.identity.topics import CommunityId
from waku_legacy.members.preview import (
    REASONS,
    ArchivedEntry,
    Generation,
    LinkCandidate,
    judge_link,
    preview_community,
    preview_generation,
)

WEEK = 7 * 86_400
T0 = 1_700_000_000  # seconds
PUBSUB = "/waku/2/rs/16/64"


def key(n: int) -> coincurve.PrivateKey:
    return coincurve.PrivateKey(reference_keccak256(b"members-preview-%d" % n))


OWNER, ALICE, BOB, CAROL, DAVE = (key(i) for i in range(5))
COMMUNITY = CommunityId(OWNER.public_key.format(compressed=True))
CID = str(COMMUNITY)
A, B, D = (str(uuid.UUID(int=i + 1, version=4)) for i in range(3))


def hexkey(k: coincurve.PrivateKey) -> str:
    return "0x" + k.public_key.format(compressed=False).hex()


def topic(chat_id: str) -> bytes:
    return reference_keccak256(chat_id.encode())[:4]


MEMBER_UPDATE = topic(f"{CID}-memberUpdate")


def signed(body: bytes, kind: int, signer: coincurve.PrivateKey) -> bytes:
    """``ApplicationMetadataMessage{signature = 1, payload = 2, type = 3}``."""
    signature = signer.sign_recoverable(reference_keccak256(body), hasher=None)
    return field_bytes(1, signature) + field_bytes(2, body) + field_varint(3, kind)


def protocol_message(application: bytes) -> bytes:
    """``ProtocolMessage{installation_id = 2, public_message = 102}``."""
    return field_bytes(2, "installation-1") + field_bytes(102, application)


def chat_message(chat_id: str, clock_ms: int, text: str = "gm") -> bytes:
    """``ChatMessage{clock 1, timestamp 2, text 3, chat_id 6, message_type 7 = COMMUNITY_CHAT
    (5), content_type 8 = TEXT_PLAIN (1)}``."""
    return (
        field_varint(1, clock_ms) + field_varint(2, clock_ms) + field_bytes(3, text)
        + field_bytes(6, chat_id) + field_varint(7, 5) + field_varint(8, 1)
    )  # fmt: skip


def archived(author: coincurve.PrivateKey, channel: str, on: bytes, sent: int,
             *, clock_ms: int | None = None, text: str = "gm") -> ArchiveMessage:  # fmt: skip
    body = chat_message(CID + channel, sent * 1000 if clock_ms is None else clock_ms, text)
    payload = protocol_message(signed(body, 1, author))
    return ArchiveMessage(
        timestamp=sent, hash=reference_keccak256(payload + on), topic=on, payload=payload,
        sig=author.public_key.format(compressed=False),
    )  # fmt: skip


def member(channel_role: int = 0) -> bytes:
    """``CommunityMember{roles = 1, channel_role = 4}``."""
    return field_varint(4, channel_role) if channel_role else b""


def map_entry(number: int, name: str, value: bytes) -> bytes:
    return field_bytes(number, field_bytes(1, name) + field_bytes(2, value))


def description(archive_clock: int = 0) -> bytes:
    """``CommunityDescription{clock 1, members 2, chats 6 {members 1, identity 3, position 5},
    archive_magnetlink_clock 9, banned_members 19}``, signed by the community key."""
    chat_a = map_entry(1, hexkey(ALICE), member()) + map_entry(1, hexkey(DAVE), member(1))
    chat_b = map_entry(1, hexkey(ALICE), member())
    body = (
        field_varint(1, 42)
        + map_entry(2, hexkey(ALICE), member()) + map_entry(2, hexkey(DAVE), member())
        + map_entry(6, A, chat_a + field_varint(5, 0))
        + map_entry(6, B, chat_b + field_varint(5, 1))
        + (field_varint(9, archive_clock) if archive_clock else b"")
        + map_entry(19, hexkey(BOB), b"")
    )  # fmt: skip
    return signed(body, 25, OWNER)


DESCRIPTION = read_signed_description(description(), COMMUNITY)


def link(clock: int, chat: str = "universal") -> LinkCandidate:
    message = build_archive_link_message(
        OWNER, "magnet:?xt=urn:btih:" + "ab" * 20, clock, pubsub_topic=PUBSUB, chat=chat
    )
    return LinkCandidate(message.content_topic, message.payload, message.version, "test")


# (message, week, expected 2024 fate, expected current fate), each derived from the rules
def cases() -> list[tuple[ArchiveMessage, int, str, str]]:
    alice_a = archived(ALICE, A, topic(CID + A), T0 + 10)
    relabelled = ArchiveMessage(
        timestamp=alice_a.timestamp, hash=reference_keccak256(alice_a.hash + MEMBER_UPDATE),
        topic=MEMBER_UPDATE, payload=alice_a.payload, sig=alice_a.sig,
    )  # fmt: skip
    unsigned = archived(ALICE, B, MEMBER_UPDATE, T0 + 80)
    return [
        # a channel topic: 2024 has a filter per channel, current none
        (alice_a, T0, "imported", "no_filter"),
        # the same message relabelled ("both"): 2024 saw its id, current imports this one
        (relabelled, T0, "duplicate", "imported"),
        # carol left: not in members (CanView)
        (archived(CAROL, A, MEMBER_UPDATE, T0 + 20), T0, "departed", "departed"),
        # bob is in banned_members (isBanned, checked before membership)
        (archived(BOB, B, MEMBER_UPDATE, T0 + 30), T0, "banned", "banned"),
        # channel D is gone: 2024 dropped its filter with the chat; current has none anyway
        (archived(ALICE, D, topic(CID + D), T0 + 40), T0, "deleted_channel", "no_filter"),
        # ... relabelled, it is routed by chat_id to a chat that does not exist
        (archived(ALICE, D, MEMBER_UPDATE, T0 + 50), T0, "deleted_channel", "deleted_channel"),
        # clock 121 s past the envelope's second (maxWhisperFutureDriftMs = 120000)
        (
            archived(ALICE, A, MEMBER_UPDATE, T0 + 60, clock_ms=(T0 + 60) * 1000 + 121_000),
            T0,
            "clock_skew",
            "clock_skew",
        ),
        # 120 s exactly is still fine
        (
            archived(ALICE, B, MEMBER_UPDATE, T0 + 70, clock_ms=(T0 + 70) * 1000 + 120_000),
            T0 + WEEK,
            "imported",
            "imported",
        ),
        # no transport signature: HandleTransportLayer cannot UnmarshalPubkey
        (
            ArchiveMessage(
                timestamp=unsigned.timestamp,
                hash=unsigned.hash,
                topic=MEMBER_UPDATE,
                payload=unsigned.payload,
            ),
            T0 + WEEK,
            "undecodable",
            "undecodable",
        ),
        # bytes that are no ApplicationMetadataMessage with a signature
        (
            ArchiveMessage(
                timestamp=T0 + 90,
                hash=b"\x01" * 32,
                topic=MEMBER_UPDATE,
                payload=b"\xff\xff\xff",
                sig=ALICE.public_key.format(compressed=False),
            ),
            T0 + WEEK,
            "undecodable",
            "undecodable",
        ),
        # a topic no generation has a filter for
        (archived(ALICE, A, topic("status"), T0 + 100), T0 + WEEK, "no_filter", "no_filter"),
        # dave may view channel A only (CHANNEL_ROLE_VIEWER): CanPost is false
        (archived(DAVE, A, MEMBER_UPDATE, T0 + 110), T0 + WEEK, "other", "other"),
        # the control node always may post, member list or not
        (archived(OWNER, B, MEMBER_UPDATE, T0 + 120), T0 + WEEK, "imported", "imported"),
    ]


def test_each_message_meets_the_fate_status_go_gives_it() -> None:
    for message, week, *expected in cases():
        for generation, want in zip(Generation, expected, strict=True):
            result = preview_generation(
                [ArchivedEntry(week, message)], COMMUNITY, DESCRIPTION, [link(T0 * 1000)],
                generation,
            )  # fmt: skip
            outcome = "imported" if result.imported else next(iter(result.skipped))
            if want == "duplicate":  # alone it is the first copy: imported
                want = "imported"
            assert outcome == want, (generation, message.topic.hex(), result.details)


def test_counts_per_generation_and_week() -> None:
    table = cases()
    entries = [ArchivedEntry(week, m) for m, week, _, _ in table]
    document = preview_community(entries, COMMUNITY, DESCRIPTION, [link(T0 * 1000)])
    assert document["version"] == 2 and document["community"] == CID
    # the first two rows are one message's two copies ("both"): imported by either client
    # through one of them; every other row is a message of its own
    messages = [(table[0][1], "imported", "imported"), *((w, a, b) for _, w, a, b in table[2:])]
    assert document["archived_messages"] == len(messages)
    assert document["copies_archived"] == len(table)
    for column, generation in ((1, "2024"), (2, "current")):
        want = [row[column] for row in messages]
        got = document["generations"][generation]
        assert got["link_acted_on"] is True
        assert got["imported"] == want.count("imported")
        assert got["skipped"] == {reason: want.count(reason) for reason in REASONS}
        copies = [row[column + 1] for row in table]
        assert got["copies_imported"] == copies.count("imported")
        assert got["copies_skipped"] == {reason: copies.count(reason) for reason in REASONS}
        weeks = {w["start"]: w for w in got["weeks"]}
        for start in (T0, T0 + WEEK):
            rows = [row[column] for row in messages if row[0] == start]
            assert weeks[start]["imported"] == rows.count("imported")
            assert sum(weeks[start][r] for r in REASONS) == len(rows) - rows.count("imported")
    lost = {a["author"]: a["messages"] for a in document["generations"]["current"]["lost_authors"]}
    # carol departed, bob banned, dave a viewer (no-filter messages are not opened: no author)
    assert lost[hexkey(CAROL)] == 1 and lost[hexkey(BOB)] == 1 and lost[hexkey(DAVE)] == 1
    assert hexkey(OWNER) not in lost


def test_a_duplicate_of_a_refused_message_is_a_duplicate() -> None:
    """messageExists records the id before CanPost refuses it: the second copy of carol's
    message is skipped as a duplicate, not counted as a second departed one; the same
    message archived twice is one message (departed), its copies counted apart."""
    message = archived(CAROL, A, MEMBER_UPDATE, T0)
    result = preview_generation(
        [ArchivedEntry(T0, message), ArchivedEntry(T0, message)], COMMUNITY, DESCRIPTION, [],
        Generation.CURRENT,
    )  # fmt: skip
    assert dict(result.skipped) == {"departed": 1}
    assert dict(result.copies) == {"departed": 1, "duplicate": 1}
    assert result.lost_authors == {hexkey(CAROL): 1}


def test_the_link_per_generation() -> None:
    for generation in Generation:
        verdict = judge_link([link(T0 * 1000)], COMMUNITY, DESCRIPTION, generation)
        assert verdict.acted_on and verdict.clock == T0 * 1000 and verdict.chat == "universal"
        assert verdict.layering == "protocol-message"  # as status-go's SendPublic wraps it
        assert not judge_link([], COMMUNITY, DESCRIPTION, generation).acted_on
    # -magnetlinks only: 2024 clients have its filter, current ones do not
    only = [link(T0 * 1000, "magnetlinks")]
    assert judge_link(only, COMMUNITY, DESCRIPTION, Generation.Y2024).acted_on
    refused = judge_link(only, COMMUNITY, DESCRIPTION, Generation.CURRENT)
    assert not refused.acted_on and "no filter" in refused.reason
    # the newest of several wins
    verdict = judge_link([link(5), link(9), link(7)], COMMUNITY, DESCRIPTION, Generation.CURRENT)
    assert verdict.clock == 9


def test_a_link_below_the_description_clock_is_dropped() -> None:
    """Every description raises the member's stored link clock to its field 9; a link below
    it fails ``clock >= lastClock``; an equal one is taken."""
    raised = read_signed_description(description(archive_clock=T0 * 1000 + 1), COMMUNITY)
    assert raised.archive_clock == T0 * 1000 + 1
    for generation in Generation:
        stale = judge_link([link(T0 * 1000)], COMMUNITY, raised, generation)
        assert not stale.acted_on and "below" in stale.reason
        assert judge_link([link(T0 * 1000 + 1)], COMMUNITY, raised, generation).acted_on


def test_the_description_reader_sees_members_bans_and_channel_roles() -> None:
    assert set(DESCRIPTION.members) == {hexkey(ALICE), hexkey(DAVE)}
    assert DESCRIPTION.banned == {hexkey(BOB)}
    by_uuid = {c.uuid: c for c in DESCRIPTION.channels}
    assert set(by_uuid) == {A, B}
    assert by_uuid[A].members[hexkey(DAVE)].channel_role == 1
    assert by_uuid[A].members[hexkey(ALICE)].channel_role == 0


@pytest.mark.parametrize("generation", list(Generation))
def test_members_receive_nothing_without_a_link(generation: Generation) -> None:
    entries = [ArchivedEntry(T0, archived(ALICE, A, MEMBER_UPDATE, T0))]
    got = preview_generation(entries, COMMUNITY, DESCRIPTION, [], generation).to_json()
    assert got["imported"] == 1 and got["members_receive"] == 0 and not got["link_acted_on"]


def test_warnings_say_when_the_answer_is_hollow() -> None:
    entries = [ArchivedEntry(T0, archived(ALICE, A, MEMBER_UPDATE, T0))]
    assert preview_community(entries, COMMUNITY, DESCRIPTION, [link(T0 * 1000)])["warnings"] == []
    bare = read_signed_description(
        signed(field_varint(1, 43) + map_entry(6, A, field_varint(5, 0)), 25, OWNER), COMMUNITY
    )
    warnings = preview_community(entries, COMMUNITY, bare, [])["warnings"]
    assert len(warnings) == 2 and "lists no members" in warnings[0]
    assert "no archive-link message" in warnings[1]


@settings(max_examples=300, deadline=None)
@given(
    topic=st.sampled_from([MEMBER_UPDATE, topic(CID + A), topic(CID + D), b"\x00\x00\x00\x00"]),
    payload=st.one_of(
        st.binary(max_size=300),
        st.builds(lambda body: protocol_message(signed(body, 1, ALICE)), st.binary(max_size=200)),
    ),
    sig=st.one_of(st.just(ALICE.public_key.format(compressed=False)), st.binary(max_size=70)),
    timestamp=st.integers(0, 1 << 40),
)
def test_any_archived_bytes_get_a_fate_and_never_an_exception(
    topic: bytes, payload: bytes, sig: bytes, timestamp: int
) -> None:
    """Archives nobody vouches for: whatever a message holds, it gets one of the fates."""
    message = ArchiveMessage(timestamp=timestamp, hash=b"\x00" * 32, topic=topic,
                             payload=payload, sig=sig)  # fmt: skip
    for generation in Generation:
        result = preview_generation(
            [ArchivedEntry(0, message)], COMMUNITY, DESCRIPTION, [
                LinkCandidate(MEMBER_UPDATE.hex(), payload, 1, "fuzz"),
                LinkCandidate(link(5).content_topic, payload, 1, "fuzz"),
            ], generation,
        )  # fmt: skip
        assert result.imported + sum(result.skipped.values()) == 1
        assert set(result.skipped) <= set(REASONS)
        assert not result.link.acted_on
