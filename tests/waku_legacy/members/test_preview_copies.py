"""The member preview counts messages, not copies (issue 34), in each archive-topics mode.

A hand-built community (``test_preview``'s: alice a member of channels A and B) posts
``SENT`` chat messages; ``LEFT_OUT`` of them never reach the archives (missing) and
``RESENT`` are sent again in a second envelope (the same application message, so the same
message id, under another Waku hash: a real duplicate). The archives are written here copy by
copy in each mode (docs/compat/archive-topics.md; the relabelled hash by pycryptodome's keccak).
The expected fates follow from status-go's rules as ``test_preview`` states them: a 2024
client has every channel's filter and ``-memberUpdate``'s, a current one ``-memberUpdate``'s
only; an id seen before is a duplicate. A message's fate is its best copy's.
"""

from __future__ import annotations

import pytest

from tests.helpers import reference_keccak256
from tests.waku_legacy.members.test_preview import (
    ALICE,
    COMMUNITY,
    DESCRIPTION,
    MEMBER_UPDATE,
    T0,
    WEEK,
    A,
    B,
    archived,
    link,
    topic,
)
from waku_legacy.archive.message import ArchiveMessage
from waku_legacy.members.preview import REASONS, ArchivedEntry, preview_community

CID = str(COMMUNITY)
SENT, LEFT_OUT, RESENT = 30, 5, 3


def _sent() -> list[ArchiveMessage]:
    """alice's messages on their channel topics, A and B in turn, over two weeks."""
    return [
        archived(ALICE, channel, topic(CID + channel), T0 + i * (2 * WEEK // SENT), text=f"m{i}")
        for i in range(SENT)
        for channel in [(A, B)[i % 2]]
    ]


def _resend(message: ArchiveMessage) -> ArchiveMessage:
    """The same message in another envelope: another hash, the same payload and id."""
    return ArchiveMessage(
        message.timestamp + 1, reference_keccak256(message.hash + b"resent"), message.topic,
        message.payload, message.sig,
    )  # fmt: skip


def _copies(message: ArchiveMessage, mode: str) -> list[ArchiveMessage]:
    def on_member_update(digest: bytes) -> ArchiveMessage:
        return ArchiveMessage(
            message.timestamp, digest, MEMBER_UPDATE, message.payload, message.sig
        )

    return {
        "channel": [message],
        "universal": [on_member_update(message.hash)],
        "both": [message, on_member_update(reference_keccak256(message.hash + MEMBER_UPDATE))],
    }[mode]


@pytest.mark.parametrize("mode", ["channel", "universal", "both"])
def test_fates_are_counted_per_message_in_each_mode(mode: str) -> None:
    sent = _sent()
    archived_originals = sent[LEFT_OUT:]  # the first LEFT_OUT are missing
    resent = [_resend(m) for m in archived_originals[:RESENT]]
    messages = archived_originals + resent
    copies = sorted((c for m in messages for c in _copies(m, mode)),
                    key=lambda c: (c.timestamp, c.hash))  # fmt: skip
    entries = [ArchivedEntry(T0 + (c.timestamp - T0) // WEEK * WEEK, c) for c in copies]
    doc = preview_community(entries, COMMUNITY, DESCRIPTION, [link(T0 * 1000)])

    kept, dup = len(archived_originals), len(resent)
    per_message = len(_copies(sent[0], mode))
    assert doc["version"] == 2 and doc["archive_topics"] == mode
    assert (doc["archived_messages"], doc["copies_archived"]) == (
        kept + dup,
        per_message * (kept + dup),
    )
    # by message: a 2024 client imports every first-sent message in every mode; a current
    # one has no channel filter, so in "channel" it hears nothing
    want = {
        "2024": {"imported": kept, "duplicate": dup},
        "current": {"no_filter": kept + dup} if mode == "channel"
        else {"imported": kept, "duplicate": dup},
    }  # fmt: skip
    # by copy: in "both" the 2024 client imports the first copy it reads of each message and
    # sees the other's id again; the current client hears only the -memberUpdate copies
    want_copies = {
        "channel": {"2024": {"imported": kept, "duplicate": dup},
                    "current": {"no_filter": kept + dup}},
        "universal": {"2024": {"imported": kept, "duplicate": dup},
                      "current": {"imported": kept, "duplicate": dup}},
        "both": {"2024": {"imported": kept, "duplicate": kept + 2 * dup},
                 "current": {"imported": kept, "duplicate": dup, "no_filter": kept + dup}},
    }[mode]  # fmt: skip
    for generation, counts in want.items():
        view = doc["generations"][generation]
        assert view["imported"] == counts.get("imported", 0)
        assert view["skipped"] == {r: counts.get(r, 0) for r in REASONS}
        copy_counts = want_copies[generation]
        assert view["copies_imported"] == copy_counts.get("imported", 0)
        assert view["copies_skipped"] == {r: copy_counts.get(r, 0) for r in REASONS}
        # the weeks add up to the messages
        weeks = view["weeks"]
        assert sum(w["imported"] + sum(w[r] for r in REASONS) for w in weeks) == kept + dup
        # duplicates lose nothing, and an unheard copy names no author
        assert view["lost_authors"] == []
