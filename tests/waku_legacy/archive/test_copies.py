"""Messages, not copies (issue 34): the counting rule every report uses, on hand-made hashes
(the relabelled hash by pycryptodome's keccak, as the README states it)."""

from __future__ import annotations

from tests.helpers import reference_keccak256
from waku_legacy.archive.copies import best_copies, describe_modes, message_keys, tally
from waku_legacy.identity.topics import CommunityId

COMMUNITY = CommunityId(bytes.fromhex("02" + "ab" * 32))
UNIVERSAL = reference_keccak256(f"{COMMUNITY}-memberUpdate".encode())[:4]
CHANNEL = b"\x01\x02\x03\x04"


def _h(n: int) -> bytes:
    return bytes([n]) * 32


def test_a_relabelled_copy_belongs_to_its_channel_copys_message() -> None:
    first, second, alone = _h(1), _h(2), _h(3)
    twin = reference_keccak256(first + UNIVERSAL)
    orphan = reference_keccak256(second + UNIVERSAL)  # its channel copy is not given
    copies = [(first, CHANNEL), (twin, UNIVERSAL), (orphan, UNIVERSAL), (alone, UNIVERSAL)]
    keys = message_keys(copies, COMMUNITY)
    assert keys == {first: first, twin: first, orphan: orphan, alone: alone}
    # what the sources know wins: the orphan's message is second
    assert message_keys(copies, COMMUNITY, {orphan: second})[orphan] == second


def test_a_message_has_its_best_copys_fate_and_copies_count_apart() -> None:
    order = ("imported", "duplicate", "no_filter")
    fates = [(_h(1), "no_filter"), (_h(1), "imported"), (_h(2), "duplicate"),
             (_h(2), "no_filter"), (_h(3), "no_filter")]  # fmt: skip
    counted = tally(fates, order)
    assert counted.messages == {"imported": 1, "duplicate": 1, "no_filter": 1}
    assert counted.copies == {"no_filter": 3, "imported": 1, "duplicate": 1}
    best = best_copies([(_h(1), ("a", "no_filter")), (_h(1), ("b", "imported")),
                        (_h(1), ("c", "imported"))], order, lambda c: c[1])  # fmt: skip
    assert best == {_h(1): ("b", "imported")}  # the earliest among equals


def test_the_mode_found() -> None:
    assert describe_modes(["both", "both"]) == "both"
    assert describe_modes(["channel", "both", None]) == "mixed"
    assert describe_modes([None]) == "unknown"
