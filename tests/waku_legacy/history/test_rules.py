"""Who may edit or delete, who moderates, whom a text mentions: status-go's rules by hand."""

from __future__ import annotations

from tests.waku_legacy.history.status_messages import ALICE, BOB, CAROL, CHAT_ID
from waku_legacy.history.alias import compressed_key
from waku_legacy.history.events import ChatMessageEvent, DeleteEvent, EditEvent
from waku_legacy.history.rules import (
    MENTION_RE,
    delete_applies,
    edit_applies,
    edit_supersedes,
    mentioned_keys,
    moderators_of,
)
from waku_legacy.identity.descriptions import DescribedMember, SignedDescription

ORIGINAL = ChatMessageEvent(
    id="0x" + "01" * 32, author=ALICE.hex, chat_id=CHAT_ID, channel_id="", clock=1000,
    timestamp_ms=1000, content_type=1, text="hello", legacy_id="0x" + "02" * 32,
)  # fmt: skip


def _edit(author: str, target: str = ORIGINAL.id, clock: int = 2000, id: str = "0xe1") -> EditEvent:
    return EditEvent(id, author, target, CHAT_ID, clock, "edited")


def _delete(author: str, target: str = ORIGINAL.id) -> DeleteEvent:
    return DeleteEvent("0xd1", author, target, CHAT_ID, 3000)


def _description(members: dict[str, tuple[int, ...]]) -> SignedDescription:
    return SignedDescription(
        clock=1, name="c", channels=(), archive_clock=0,
        members={k: DescribedMember(roles) for k, roles in members.items()},
    )  # fmt: skip


def test_only_the_author_edits() -> None:
    assert edit_applies(_edit(ALICE.hex), ORIGINAL)
    assert not edit_applies(_edit(BOB.hex), ORIGINAL)  # "invalid edit, not the right author"
    assert not edit_applies(_edit(ALICE.hex, target="0x" + "03" * 32), ORIGINAL)
    assert edit_applies(_edit(ALICE.hex, target=ORIGINAL.legacy_id), ORIGINAL)


def test_the_newest_edit_wins_whatever_the_order() -> None:
    older, newer = _edit(ALICE.hex, clock=2000), _edit(ALICE.hex, clock=2500, id="0xe0")
    assert edit_supersedes(older, None)
    assert edit_supersedes(newer, older)
    assert not edit_supersedes(older, newer)
    tie_low, tie_high = _edit(ALICE.hex, id="0xe1"), _edit(ALICE.hex, id="0xe2")
    assert edit_supersedes(tie_high, tie_low) and not edit_supersedes(tie_low, tie_high)


def test_deletes_by_author_moderator_and_someone_else() -> None:
    moderators = frozenset({CAROL.hex})
    assert delete_applies(_delete(ALICE.hex), ORIGINAL, moderators)
    assert delete_applies(_delete(CAROL.hex), ORIGINAL, moderators)
    assert not delete_applies(_delete(BOB.hex), ORIGINAL, moderators)
    assert not delete_applies(_delete(CAROL.hex), ORIGINAL, frozenset())  # v1-era rule
    assert not delete_applies(_delete(ALICE.hex, target="0x" + "03" * 32), ORIGINAL, moderators)


def test_moderators_are_owner_admin_and_token_master() -> None:
    # CommunityMember.Roles: OWNER 1, ADMIN 4, TOKEN_MASTER 5; 2 and 3 are reserved now
    keys = {f"0x04{n:0128x}": roles for n, roles in enumerate(
        [(1,), (4,), (5,), (0,), (), (2,), (3,), (0, 4)]
    )}  # fmt: skip
    names = list(keys)
    assert moderators_of(_description(keys)) == frozenset([names[0], names[1], names[2], names[7]])


def test_mentions() -> None:
    alice, bob = ALICE.hex, BOB.hex
    text = f"hi @{alice} and @{bob}, again @{alice}! @{alice}x @{bob.upper()[2:]} @0x00001"
    # the third @alice is followed by "!" (a terminating char); "x" and upper-case hex are not
    assert mentioned_keys(text) == [alice, bob]
    assert mentioned_keys(f"@{bob}") == [bob]  # at the end of the text
    assert mentioned_keys(f"@{bob}.") == [bob]
    assert mentioned_keys(f"@{bob}a") == []  # 131 hex digits: no mention
    assert mentioned_keys(f"@{bob[:-1]} ") == []  # 129
    assert mentioned_keys("@0x04" + "f" * 128 + " ") == []  # no curve point: no author
    assert mentioned_keys(f"say @{compressed_key(alice)} hi") == [alice]
    assert mentioned_keys("@zQ3shudJrBctPznsRLvbsCtvZFTdi3b34uzYDuqE9Wq9m9T1 x") == []
    match = MENTION_RE.search(f"x@{alice} ")
    assert match is not None and match.group(1) == alice
