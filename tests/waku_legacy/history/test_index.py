"""The readable tables folded at write time (SQLite and PostgreSQL): modifiers in any order,
status-go's edit and delete rules, duplicates, reruns. Expected values are derived by hand
from the events each test builds."""

from __future__ import annotations

import contextlib
import datetime as dt
from typing import Any

import pytest

from tests.conftest import REPO_ROOT
from tests.helpers import fresh_database
from tests.waku_legacy.history.indexing import (
    ADMIN,
    ALICE,
    BOB,
    CAROL,
    COMMUNITY,
    GENERAL,
    chat,
    history_dsn,
    index,
    mid,
    ms,
)  # fmt: skip
from waku_legacy.history.events import (
    DeleteEvent,
    EditEvent,
    IdentityEvent,
    PinEvent,
    ReactionEvent,
    Undecodable,
)
from waku_legacy.history.index import HistoryIndex, HistoryIndexError, message_rid
from waku_legacy.identity.descriptions import DescribedChannel, DescribedMember, SignedDescription

__all__ = ["history_dsn", "index"]  # fixtures


def _edit(n: int, author: str, target: int, clock: int, text: str) -> EditEvent:
    return EditEvent(mid(n), author, mid(target), COMMUNITY + GENERAL, clock, text)


def _delete(n: int, author: str, target: int, clock: int) -> DeleteEvent:
    return DeleteEvent(mid(n), author, mid(target), COMMUNITY + GENERAL, clock)


def _react(n: int, author: str, target: int, clock: int, emoji: str, retracted: bool = False):
    return ReactionEvent(mid(n), author, mid(target), COMMUNITY + GENERAL, clock, emoji, retracted)


def _description(
    clock: int, *, admins=(), banned=(), roles: dict[str, tuple[int, ...]] | None = None,
    pin_all: bool = False,
) -> SignedDescription:
    """``admins`` with ROLE_ADMIN (4), ``roles``: other members with theirs."""
    members = {a: DescribedMember((4,)) for a in admins}
    members.update({key: DescribedMember(r) for key, r in (roles or {}).items()})
    return SignedDescription(
        clock=clock, name="Demo", channels=(DescribedChannel(GENERAL, "general", 0),),
        archive_clock=0, members=members, banned=frozenset(banned), pin_all_members=pin_all,
    )  # fmt: skip


def test_modifiers_before_their_target_apply_when_it_arrives(index: HistoryIndex) -> None:
    base = ms("2024-03-01T10:00:00")
    counts = index.add_events(
        COMMUNITY,
        [
            _edit(101, ALICE, 1, base + 10, "first edit"),
            _edit(102, ALICE, 1, base + 20, "second edit"),  # newest clock wins
            _react(103, BOB, 1, base + 5, "❤️"),
            _react(104, CAROL, 1, base + 6, "❤️"),
            _react(105, CAROL, 1, base + 7, "👍"),
            _react(106, CAROL, 1, base + 8, "👍", retracted=True),  # retracts 105
            PinEvent(mid(107), BOB, mid(1), COMMUNITY + GENERAL, base + 30, True),
        ],
    )
    assert (counts.messages, counts.edits, counts.reactions, counts.pins) == (0, 2, 4, 1)
    index.add_events(COMMUNITY, [chat(1, ALICE, "original", "2024-03-01T10:00:00")])
    got = index.reader().message(COMMUNITY, mid(1))
    assert got is not None
    assert got.text == "second edit" and got.edited and got.edited_at_ms == base + 20
    assert [(r.emoji, r.count, r.authors) for r in got.reactions] == [("❤️", 2, (BOB, CAROL))]
    assert got.pinned and got.pinned_by == BOB


def test_modifiers_after_their_target_give_the_same_row(index: HistoryIndex) -> None:
    base = ms("2024-03-01T10:00:00")
    index.add_events(COMMUNITY, [chat(1, ALICE, "original", "2024-03-01T10:00:00")])
    index.add_events(COMMUNITY, [_edit(102, ALICE, 1, base + 20, "second edit")])
    index.add_events(COMMUNITY, [_edit(101, ALICE, 1, base + 10, "first edit")])  # older: kept out
    index.add_events(COMMUNITY, [_react(105, CAROL, 1, base + 7, "👍")])
    index.add_events(COMMUNITY, [_react(106, CAROL, 1, base + 8, "👍", retracted=True)])
    index.add_events(
        COMMUNITY, [_react(107, CAROL, 1, base + 6, "👍")]
    )  # older than the retraction
    index.add_events(
        COMMUNITY, [PinEvent(mid(108), BOB, mid(1), COMMUNITY + GENERAL, base + 30, True)]
    )
    index.add_events(
        COMMUNITY, [PinEvent(mid(109), BOB, mid(1), COMMUNITY + GENERAL, base + 40, False)]
    )
    got = index.reader().message(COMMUNITY, mid(1))
    assert got is not None
    assert got.text == "second edit" and got.edited_at_ms == base + 20
    assert got.reactions == () and not got.pinned
    hits = index.reader().search(COMMUNITY, "second")
    assert [h.message.id for h in hits] == [mid(1)]
    assert index.reader().search(COMMUNITY, "original") == []  # the edited-away text


def test_an_edit_by_someone_else_is_ignored(index: HistoryIndex) -> None:
    index.add_events(
        COMMUNITY,
        [
            chat(1, ALICE, "mine", "2024-03-01T10:00:00"),
            _edit(101, BOB, 1, ms("2024-03-01T11:00:00"), "hijacked"),
        ],
    )
    got = index.reader().message(COMMUNITY, mid(1))
    assert got is not None and got.text == "mine" and not got.edited


@pytest.mark.parametrize(
    ("deleter", "admins", "deleted"),
    [(ALICE, (), True), (ADMIN, (ADMIN,), True), (BOB, (ADMIN,), False), (ADMIN, (), False)],
    ids=["author", "moderator", "other", "admin-not-in-description"],
)
def test_delete_by_author_moderator_or_other(
    index: HistoryIndex, deleter: str, admins: tuple[str, ...], deleted: bool
) -> None:
    index.add_events(COMMUNITY, [chat(1, ALICE, "hello", "2024-03-01T10:00:00")])
    index.set_description(_description(5, admins=admins), COMMUNITY)
    index.add_events(COMMUNITY, [_delete(101, deleter, 1, ms("2024-03-01T12:00:00"))])
    reader = index.reader()
    assert (reader.message(COMMUNITY, mid(1)) is None) is deleted
    assert len(reader.day(COMMUNITY, GENERAL, dt.date(2024, 3, 1))) == (0 if deleted else 1)
    assert reader.community(COMMUNITY).channels[0].messages == (0 if deleted else 1)  # type: ignore[union-attr]
    assert (reader.search(COMMUNITY, "hello") == []) is deleted


def test_a_delete_before_its_target_and_a_moderator_named_later(index: HistoryIndex) -> None:
    index.add_events(COMMUNITY, [_delete(101, ADMIN, 1, ms("2024-03-01T12:00:00"))])
    index.add_events(COMMUNITY, [chat(1, ALICE, "hello", "2024-03-01T10:00:00")])
    assert index.reader().message(COMMUNITY, mid(1)) is not None  # no description yet
    index.set_description(_description(5, admins=(ADMIN,)), COMMUNITY)
    assert index.reader().message(COMMUNITY, mid(1)) is None
    index.set_description(_description(4), COMMUNITY)  # older: ignored
    assert index.reader().message(COMMUNITY, mid(1)) is None
    index.set_description(_description(6), COMMUNITY)  # no longer a moderator
    assert index.reader().message(COMMUNITY, mid(1)) is not None


def _pin(n: int, author: str, target: int, clock: int, pinned: bool = True) -> PinEvent:
    return PinEvent(mid(n), author, mid(target), COMMUNITY + GENERAL, clock, pinned)


# status-go c72f491, Community.CanPost(..., PIN_MESSAGE): a pin counts when its signer has
# ROLE_OWNER (1), ROLE_ADMIN (4) or ROLE_TOKEN_MASTER (5) (IsPrivilegedMember), or when the
# description opens pinning to all members
@pytest.mark.parametrize(
    ("roles", "pin_all", "pinned"),
    [((4,), False, True), ((), False, False), ((), True, True), ((1,), False, True),
     ((5,), False, True)],
    ids=["admin", "member", "member-open-to-all", "owner", "token-master"],
)  # fmt: skip
def test_a_pin_counts_from_an_admin_or_anyone_when_open_to_all(
    index: HistoryIndex, roles: tuple[int, ...], pin_all: bool, pinned: bool
) -> None:
    index.set_description(_description(5, roles={BOB: roles}, pin_all=pin_all), COMMUNITY)
    index.add_events(COMMUNITY, [chat(1, ALICE, "hello", "2024-03-01T10:00:00")])
    index.add_events(COMMUNITY, [_pin(101, BOB, 1, ms("2024-03-01T11:00:00"))])
    got = index.reader().message(COMMUNITY, mid(1))
    assert got is not None and got.pinned is pinned
    assert got.pinned_by == (BOB if pinned else "")


def test_a_refused_unpin_does_not_hide_an_admins_pin_and_a_new_rule_folds_again(
    index: HistoryIndex,
) -> None:
    base = ms("2024-03-01T10:00:00")
    # every event before the message and the description: the rule applies at any order
    index.add_events(COMMUNITY, [_pin(101, ADMIN, 1, base + 30), _pin(102, BOB, 1, base + 40,
                                                                   pinned=False)])  # fmt: skip
    index.add_events(COMMUNITY, [chat(1, ALICE, "hello", "2024-03-01T10:00:00")])
    got = index.reader().message(COMMUNITY, mid(1))
    assert got is not None and not got.pinned  # no description: anyone's, Bob's newest
    index.set_description(_description(5, admins=(ADMIN,), roles={BOB: ()}), COMMUNITY)
    got = index.reader().message(COMMUNITY, mid(1))
    assert got is not None and got.pinned and got.pinned_by == ADMIN  # Bob's unpin refused
    index.set_description(_description(6, admins=(ADMIN,), roles={BOB: ()}, pin_all=True),
                          COMMUNITY)  # fmt: skip
    got = index.reader().message(COMMUNITY, mid(1))
    assert got is not None and not got.pinned  # open to all: Bob's newer unpin counts
    index.add_events(COMMUNITY, [_pin(103, CAROL, 1, base + 50)])
    got = index.reader().message(COMMUNITY, mid(1))
    assert got is not None and got.pinned and got.pinned_by == CAROL


def test_pins_kept_one_per_message_before_are_kept_by_author(history_dsn: str) -> None:
    from waku_legacy.history.index import PINS_TABLE

    with HistoryIndex.open(history_dsn, create=True) as index:
        index.add_events(COMMUNITY, [chat(1, ALICE, "hello", "2024-03-01T10:00:00")])
        # the table as made before 2026-11-29: one pin per message, whoever made it
        big = "BIGINT" if index.db.postgres else "INTEGER"
        old = PINS_TABLE.format(big=big).replace("(community, target, author)",
                                                 "(community, target)")  # fmt: skip
        with index.db.transaction():
            index.db.stream("DROP TABLE history_pins")
            index.db.stream(old)
            index.db.stream("INSERT INTO history_pins VALUES (?, ?, ?, 5, 'p', 1)",
                            [COMMUNITY, mid(1), BOB])  # fmt: skip
    with HistoryIndex.open(history_dsn) as index:
        rows = index.db.execute("SELECT community, target, author, clock, id, pinned"
                                " FROM history_pins")  # fmt: skip
        assert [tuple(r) for r in rows] == [(COMMUNITY, mid(1), BOB, 5, "p", 1)]
        index.add_events(COMMUNITY, [_pin(102, CAROL, 1, 6)])  # the new key: a second row
        assert len(index.db.execute("SELECT 1 FROM history_pins")) == 2
        got = index.reader().message(COMMUNITY, mid(1))
        assert got is not None and got.pinned and got.pinned_by == CAROL  # the newer pin


def _dump(index: HistoryIndex) -> list[object]:
    tables = ["history_messages", "history_edits", "history_reactions", "history_days",
              "history_channels", "history_authors"]  # fmt: skip
    out: list[object] = []
    for table in tables:
        rows = index.db.execute(f"SELECT * FROM {table}")
        out.append(sorted(tuple(str(v) for v in row) for row in rows))
    return out


def test_duplicates_keep_one_row_and_a_rerun_changes_nothing(index: HistoryIndex) -> None:
    events = [
        chat(1, ALICE, "hello", "2024-03-01T10:00:00"),
        chat(1, ALICE, "hello", "2024-03-01T10:00:00"),  # the -memberUpdate copy
        chat(2, BOB, "hi", "2024-03-01T10:01:00"),
        _edit(101, ALICE, 1, ms("2024-03-01T10:05:00"), "hello!"),
        _react(102, BOB, 1, ms("2024-03-01T10:06:00"), "😂"),
        IdentityEvent(ALICE, 5, "Alice"),
        Undecodable("protobuf", "bad"),
    ]
    counts = index.add_events(COMMUNITY, events)
    assert (counts.messages, counts.duplicates, counts.identities) == (2, 1, 1)
    assert counts.undecodable == {"protobuf": 1}
    before = _dump(index)
    again = index.add_events(COMMUNITY, events)
    assert (again.messages, again.duplicates) == (0, 3)
    assert _dump(index) == before
    got = index.reader().message(COMMUNITY, mid(1))
    assert (
        got is not None and got.author.display_name == "Alice" and got.author.shown_name == "Alice"
    )
    assert index.reader().community(COMMUNITY).messages == 2  # type: ignore[union-attr]


def test_newest_identity_names_the_author(index: HistoryIndex) -> None:
    index.add_events(
        COMMUNITY,
        [
            IdentityEvent(ALICE, 10, "New"),
            IdentityEvent(ALICE, 5, "Old"),
            chat(1, ALICE, "x", "2024-03-01T10:00:00"),
            chat(2, BOB, "y", "2024-03-01T10:00:01"),
        ],
    )
    index.add_events(COMMUNITY, [IdentityEvent(ALICE, 7, "Older than New")])
    reader = index.reader()
    alice, bob = reader.message(COMMUNITY, mid(1)), reader.message(COMMUNITY, mid(2))
    assert alice is not None and alice.author.shown_name == "New"
    assert (
        bob is not None
        and bob.author.display_name == ""
        and bob.author.shown_name == bob.author.alias
    )
    assert bob.author.compressed.startswith("zQ3")


def test_same_millisecond_messages_get_distinct_rids(index: HistoryIndex) -> None:
    # ids chosen so both ask for the same slot: the second moves to the next free one
    first = chat(0x1_00000005, ALICE, "a", "2024-03-01T10:00:00")
    second = chat(0x2_00000005 + 0, BOB, "b", "2024-03-01T10:00:00")
    assert message_rid(first.timestamp_ms, first.id) == message_rid(second.timestamp_ms, second.id)
    assert index.add_events(COMMUNITY, [first, second]).messages == 2
    assert [m.text for m in index.reader().day(COMMUNITY, GENERAL, dt.date(2024, 3, 1))] == [
        "a",
        "b",
    ]


def test_a_missing_sqlite_file_is_created_only_when_asked(tmp_path) -> None:
    with pytest.raises(HistoryIndexError, match="does not exist"):
        HistoryIndex.open(str(tmp_path / "none.sqlite"))
    with HistoryIndex.open(str(tmp_path / "new.sqlite"), create=True) as created:
        assert created.reader().communities() == []


@pytest.mark.parametrize("delete_first", [False, True])
def test_deleting_one_image_of_an_album_deletes_the_album(
    index: HistoryIndex, delete_first: bool
) -> None:
    album = [chat(n, ALICE, "", f"2024-03-01T10:00:0{n}", content_type=7, album_id="a1")
             for n in (1, 2, 3)]  # fmt: skip
    other = chat(4, ALICE, "", "2024-03-01T10:00:04", content_type=7, album_id="a2")
    delete = _delete(101, ALICE, 2, ms("2024-03-01T11:00:00"))
    if delete_first:
        index.add_events(COMMUNITY, [delete, album[0]])
        index.add_events(COMMUNITY, [album[1], album[2], other])
    else:
        index.add_events(COMMUNITY, [album[0], album[1], other])
        index.add_events(COMMUNITY, [delete])
        index.add_events(COMMUNITY, [album[2]])  # arrives after the delete of its album
    reader = index.reader()
    assert [m.id for m in reader.day(COMMUNITY, GENERAL, dt.date(2024, 3, 1))] == [mid(4)]
    assert reader.community(COMMUNITY).messages == 1  # type: ignore[union-attr]


def test_an_edit_may_change_the_content_type(index: HistoryIndex) -> None:
    base = ms("2024-03-01T10:00:00")
    index.add_events(COMMUNITY, [
        chat(1, ALICE, "plain", "2024-03-01T10:00:00"),  # TEXT_PLAIN (1)
        EditEvent(mid(101), ALICE, mid(1), COMMUNITY + GENERAL, base + 10, "🙂", content_type=4),
    ])  # fmt: skip
    got = index.reader().message(COMMUNITY, mid(1))
    assert got is not None and (got.text, got.content_type) == ("🙂", 4)
    # a newer edit with content type 0 keeps the original's
    index.add_events(COMMUNITY, [
        EditEvent(mid(102), ALICE, mid(1), COMMUNITY + GENERAL, base + 20, "plain again"),
    ])  # fmt: skip
    got = index.reader().message(COMMUNITY, mid(1))
    assert got is not None and (got.text, got.content_type) == ("plain again", 1)


def test_a_bulk_load_builds_the_read_indexes_at_the_end(index: HistoryIndex) -> None:
    from waku_legacy.history.index import POSTGRES_READ_INDEXES, READ_INDEXES

    with index.bulk_load():
        index.add_events(COMMUNITY, [chat(1, ALICE, "hello bulk", "2024-03-01T10:00:00")])
    if index.db.postgres:
        names = {n for (n,) in index.db.execute("SELECT indexname FROM pg_indexes")}
        assert {*READ_INDEXES, *POSTGRES_READ_INDEXES} <= names
    else:
        names = {n for (n,) in index.db.execute("SELECT name FROM sqlite_master")}
        assert set(READ_INDEXES) <= names
    reader = index.reader()
    assert [m.id for m in reader.day(COMMUNITY, GENERAL, dt.date(2024, 3, 1))] == [mid(1)]
    assert [h.message.id for h in reader.search(COMMUNITY, "bulk")] == [mid(1)]
    with index.bulk_load():  # not empty now: nothing dropped
        index.add_events(COMMUNITY, [chat(2, BOB, "second", "2024-03-01T11:00:00")])
    assert [h.message.id for h in index.reader().search(COMMUNITY, "second")] == [mid(2)]


def _modified_history() -> list[list[Any]]:
    """Batches of events whose searchable text the modifiers change: an edit before its
    target and one after, a delete by the author and one after, a message edited then
    deleted, a delete by someone else (not applied), and a mention."""
    return [
        [_edit(101, ALICE, 1, ms("2024-03-01T10:00:10"), "zebra edited early")],
        [
            chat(1, ALICE, "aardvark original", "2024-03-01T10:00:00"),
            chat(2, BOB, "badger kept", "2024-03-01T10:01:00"),
            chat(3, CAROL, "cobra deleted", "2024-03-01T10:02:00"),
            chat(4, ALICE, "dingo edited then deleted", "2024-03-01T10:03:00"),
            chat(5, BOB, "eagle mentions @" + CAROL, "2024-03-01T10:04:00"),
            _delete(102, CAROL, 3, ms("2024-03-01T10:02:30")),
            _delete(103, BOB, 1, ms("2024-03-01T10:05:00")),  # not the author: not applied
        ],
        [
            _edit(104, BOB, 2, ms("2024-03-01T10:06:00"), "yak edited late"),
            _edit(105, ALICE, 4, ms("2024-03-01T10:06:00"), "xerus edit"),
            _delete(106, ALICE, 4, ms("2024-03-01T10:07:00")),
        ],
    ]


_WORDS = ("aardvark", "zebra", "badger", "yak", "cobra", "dingo", "xerus", "eagle", "edited")


def _searched(index: HistoryIndex) -> dict[str, list[str]]:
    reader = index.reader()
    return {w: sorted(h.message.id for h in reader.search(COMMUNITY, w)) for w in _WORDS}


def test_a_bulk_load_makes_the_search_index_the_writes_one_by_one_make(
    history_dsn: str, index: HistoryIndex, request: pytest.FixtureRequest, tmp_path: Any
) -> None:
    """In a bulk load into empty tables (SQLite) history_fts is made once at the end, from
    the rows: every search finds what the same events added outside a bulk load find
    (edits and deletes folded, before and after their targets), and the FTS5 index holds
    exactly the text of the messages shown."""
    for batch in _modified_history():
        index.add_events(COMMUNITY, batch)
    expected = _searched(index)
    assert expected == {
        "aardvark": [], "zebra": [mid(1)], "badger": [], "yak": [mid(2)], "cobra": [],
        "dingo": [], "xerus": [], "eagle": [mid(5)], "edited": [mid(1), mid(2)],
    }  # fmt: skip
    with contextlib.ExitStack() as stack:
        bulk = _second_index(stack, history_dsn, request, tmp_path)
        with bulk.bulk_load():
            for batch in _modified_history():
                bulk.add_events(COMMUNITY, batch)
            if not bulk.db.postgres:  # made at the end: nothing yet
                assert bulk.db.execute("SELECT count(*) FROM history_fts_docsize") == [(0,)]
        assert _searched(bulk) == expected
        if not bulk.db.postgres:
            docs = bulk.db.execute("SELECT id FROM history_fts_docsize")
            shown = bulk.db.execute("SELECT rid FROM history_messages WHERE deleted = 0")
            assert sorted(docs) == sorted(shown) and len(shown) == 3
            assert bulk.db.execute("SELECT * FROM history_pending") == []


def _second_index(
    stack: contextlib.ExitStack, history_dsn: str, request: pytest.FixtureRequest, tmp_path: Any
) -> HistoryIndex:
    """A fresh, empty index on the same back end as ``history_dsn`` (closed with ``stack``)."""
    if history_dsn.startswith("postgresql"):
        other = stack.enter_context(
            fresh_database(request.getfixturevalue("postgres_dsn"), "hist_bulk_")
        )
    else:
        other = f"sqlite:///{tmp_path}/bulk.sqlite3"
    return stack.enter_context(HistoryIndex.open(other, create=True))


def _table_rows(index: HistoryIndex) -> dict[str, list[Any]]:
    tables = ("history_messages", "history_edits", "history_deletes", "history_reactions",
              "history_pins", "history_authors", "history_channels", "history_days")  # fmt: skip
    columns = "rid, text, deleted, edited_clock" if index.db.postgres else "*"
    return {
        t: sorted(index.db.execute(f"SELECT {columns if t == 'history_messages' else '*'}"
                                   f" FROM {t}"), key=repr)
        for t in tables
    }  # fmt: skip


def test_a_bulk_loads_transactions_of_several_batches_fold_as_one_batch_each(
    history_dsn: str, index: HistoryIndex, monkeypatch: pytest.MonkeyPatch, tmp_path: Any,
    request: pytest.FixtureRequest,
) -> None:  # fmt: skip
    """In a bulk load into empty SQLite tables a transaction holds BULK_BATCHES batches of
    BATCH events (each batch's own transaction joins it): the tables are those of the same
    batches each in its own transaction, and a failure rolls the whole transaction back."""
    from waku_legacy.history import index as module

    monkeypatch.setattr(module, "BATCH", 2)
    monkeypatch.setattr(module, "BULK_BATCHES", 3)
    events = [e for batch in _modified_history() for e in batch]
    index.add_events(COMMUNITY, events)
    expected = _table_rows(index)
    with contextlib.ExitStack() as stack:
        bulk = _second_index(stack, history_dsn, request, tmp_path)
        commits: list[str] = []
        real = bulk.db.conn

        class Counting:  # counts the commits (SQLite: COMMIT statements)
            def execute(self, sql: str, *args: Any) -> Any:
                if sql == "COMMIT":
                    commits.append(sql)
                return real.execute(sql, *args)

            def __getattr__(self, name: str) -> Any:
                return getattr(real, name)

        if not bulk.db.postgres:
            bulk.db.conn = Counting()
        with bulk.bulk_load():
            bulk.add_events(COMMUNITY, events)
        assert _table_rows(bulk) == expected
        if not bulk.db.postgres:  # 11 events: 6 batches, 2 transactions (+ the load's
            assert len(events) == 11 and len(commits) == 2 + 2  # start and end)
            bulk.db.conn = real

            def failing() -> Any:  # a batch, then the source fails inside the next
                yield from events[:3]
                raise RuntimeError("the source failed")

            with HistoryIndex.open(f"sqlite:///{tmp_path}/failed.sqlite3", create=True) as failed:
                with pytest.raises(RuntimeError), failed.bulk_load():
                    failed.add_events(COMMUNITY, failing())
                assert failed.db.execute("SELECT count(*) FROM history_edits") == [(0,)]
                assert failed.db.execute("SELECT count(*) FROM history_messages") == [(0,)]


def test_a_bulk_load_stopped_short_gets_its_search_index_on_the_next_open(tmp_path: Any) -> None:
    """A process that dies inside a bulk load leaves history_pending saying history_fts is
    still to make: the next open makes it from the rows (SQLite's: PostgreSQL's tsv column
    is written with each row)."""
    import subprocess
    import sys

    history_dsn = f"sqlite:///{tmp_path}/store.sqlite3"
    # a process of its own that dies inside the load (os._exit: no cleanup runs)
    dies = (
        "import os, sys\n"
        "from tests.waku_legacy.history.test_index import ALICE, COMMUNITY, chat\n"
        "from waku_legacy.history.index import HistoryIndex\n"
        "first = HistoryIndex.open(sys.argv[1], create=True)\n"
        "with first.bulk_load():\n"
        "    first.add_events(COMMUNITY, [chat(1, ALICE, 'walrus survives',"
        " '2024-03-01T10:00:00')])\n"
        "    pending = first.db.execute('SELECT work FROM history_pending')\n"
        "    os._exit(0 if pending == [('fts',)] else 3)\n"
    )
    died = subprocess.run([sys.executable, "-c", dies, history_dsn], cwd=REPO_ROOT,
                          capture_output=True, text=True, timeout=120)  # fmt: skip
    assert died.returncode == 0, died.stderr[-3000:]
    with HistoryIndex.open(history_dsn) as again:
        assert [h.message.id for h in again.reader().search(COMMUNITY, "walrus")] == [mid(1)]
        assert again.db.execute("SELECT * FROM history_pending") == []


def test_a_bulk_load_checkpoints_the_wal_beside_the_writer(tmp_path: Any) -> None:
    """SQLite: inside a bulk load the writer's commits leave the WAL alone (autocheckpoint
    0) and a thread of its own copies it into the database file; the setting comes back
    after, and the rows are those of a load without it."""
    import time
    from pathlib import Path

    path = Path(tmp_path) / "store.sqlite3"
    with HistoryIndex.open(f"sqlite:///{path}", create=True) as index:
        before = path.stat().st_size
        with index.bulk_load():
            assert index.db.execute("PRAGMA wal_autocheckpoint") == [(0,)]
            index.add_events(COMMUNITY, [
                chat(i, ALICE, f"row {i} " + "x" * 2000, "2024-03-01T10:00:00")
                for i in range(1, 200)
            ])  # fmt: skip
            deadline = time.monotonic() + 10
            while path.stat().st_size <= before and time.monotonic() < deadline:
                time.sleep(0.05)
            assert path.stat().st_size > before  # copied by the checkpoints' thread
        assert index.db.execute("PRAGMA wal_autocheckpoint") == [(1000,)]
        assert index.db.execute("SELECT count(*) FROM history_messages") == [(199,)]
        assert [h.message.id for h in index.reader().search(COMMUNITY, "row 7")][:1] == [mid(7)]


def test_a_failed_checkpoint_surfaces_at_the_bulk_loads_end(tmp_path: Any) -> None:
    """The checkpoints' thread cannot open the database: the bulk load's end says so (the
    rows are committed all the same: the WAL holds them)."""
    with HistoryIndex.open(f"sqlite:///{tmp_path}/store.sqlite3", create=True) as index:
        index.db.where = f"{tmp_path}/no such folder/store.sqlite3"
        with pytest.raises(HistoryIndexError, match="checkpointing"), index.bulk_load():
            index.add_events(COMMUNITY, [chat(1, ALICE, "kept", "2024-03-01T10:00:00")])
        assert index.db.execute("SELECT count(*) FROM history_messages") == [(1,)]
