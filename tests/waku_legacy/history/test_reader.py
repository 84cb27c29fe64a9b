"""The HistoryReader over the index (SQLite and PostgreSQL): UTC days, the view policy,
search with hostile syntax, iter_messages' filters. Expected values by hand from the events."""

from __future__ import annotations

import datetime as dt

import pytest

from tests.waku_legacy.history.indexing import (
    ALICE,
    BOB,
    CAROL,
    COMMUNITY,
    GENERAL,
    MALLORY,
    RANDOM,
    chat,
    history_dsn,
    index,
    mid,
    ms,
)  # fmt: skip
from waku_legacy.history.index import HistoryIndex
from waku_legacy.history.model import ViewPolicy
from waku_legacy.identity.descriptions import DescribedChannel, SignedDescription

__all__ = ["history_dsn", "index"]  # fixtures

D1, D2, D3 = dt.date(2024, 3, 1), dt.date(2024, 3, 2), dt.date(2024, 3, 3)


@pytest.fixture
def filled(index: HistoryIndex) -> HistoryIndex:
    index.add_events(COMMUNITY, [
        chat(1, ALICE, "good morning everyone", "2024-03-01T00:00:00"),  # first ms of D1
        chat(2, BOB, "café au lait", "2024-03-01T23:59:59.999"),  # last ms of D1
        chat(3, CAROL, "morning on day two", "2024-03-02T00:00:00"),
        chat(4, MALLORY, "buy morning coins", "2024-03-02T12:00:00"),  # banned below
        chat(5, ALICE, 'quote " star * NEAR OR - colon: morning', "2024-03-03T08:00:00"),
        chat(6, BOB, "random talk", "2024-03-01T09:00:00", channel=RANDOM),
        chat(7, ALICE, "same time, lower clock", "2024-03-03T08:00:00", clock=1),
    ])  # fmt: skip
    index.set_description(SignedDescription(
        clock=3, name="Demo", archive_clock=0, banned=frozenset({MALLORY}),
        channels=(DescribedChannel(GENERAL, "general", 0), DescribedChannel(RANDOM, "random", 1)),
    ), COMMUNITY)  # fmt: skip
    index.set_archive_link(COMMUNITY, "magnet:?xt=urn:btih:" + "ab" * 20, 1_709_600_000)
    return index


def _ids(messages) -> list[str]:
    return [m.id for m in messages]


def test_days_and_day_pages_cut_at_utc_midnight(filled: HistoryIndex) -> None:
    reader = filled.reader()
    assert reader.days(COMMUNITY, GENERAL) == [D1, D2, D3]
    assert _ids(reader.day(COMMUNITY, GENERAL, D1)) == [mid(1), mid(2)]
    assert _ids(reader.day(COMMUNITY, GENERAL, D2)) == [mid(3)]  # Mallory's hidden
    assert _ids(reader.day(COMMUNITY, GENERAL, D3)) == [mid(7), mid(5)]  # same ms: clock order
    assert reader.day(COMMUNITY, GENERAL, dt.date(2024, 3, 4)) == []
    assert all(m.day == D1 for m in reader.day(COMMUNITY, GENERAL, D1))


def test_the_community_summary(filled: HistoryIndex) -> None:
    summary = filled.reader().community(COMMUNITY)
    assert summary is not None
    assert (summary.name, summary.messages, summary.last_archived_s) == ("Demo", 6, 1_709_600_000)
    assert summary.archive_link.startswith("magnet:")
    general, random = summary.channels
    assert (general.name, general.messages) == ("general", 5)
    assert (general.first_ms, general.last_ms) == (
        ms("2024-03-01T00:00:00"),
        ms("2024-03-03T08:00:00"),
    )
    assert (random.name, random.messages, random.deleted) == ("random", 1, False)
    assert [c.id for c in filled.reader().communities()] == [COMMUNITY]


def test_banned_authors_are_hidden_unless_the_policy_shows_them(filled: HistoryIndex) -> None:
    shown = filled.reader(ViewPolicy(hide_banned=False))
    assert _ids(shown.day(COMMUNITY, GENERAL, D2)) == [mid(3), mid(4)]
    assert shown.community(COMMUNITY).messages == 7  # type: ignore[union-attr]
    assert filled.reader().message(COMMUNITY, mid(4)) is None
    assert _ids(h.message for h in filled.reader().search(COMMUNITY, "coins")) == []


def test_takedowns_hide_ids_and_authors(filled: HistoryIndex) -> None:
    reader = filled.reader(ViewPolicy(takedown_ids=frozenset({mid(2)}),
                                      takedown_authors=frozenset({CAROL})))  # fmt: skip
    assert _ids(reader.day(COMMUNITY, GENERAL, D1)) == [mid(1)]
    assert reader.days(COMMUNITY, GENERAL) == [D1, D3]  # D2 held only Carol's and Mallory's
    assert reader.message(COMMUNITY, mid(3)) is None
    summary = reader.community(COMMUNITY)
    assert summary is not None and summary.channels[0].messages == 3  # 1, 5, 7
    assert _ids(h.message for h in reader.search(COMMUNITY, "morning")) == [mid(5), mid(1)]
    assert list(reader.iter_messages(COMMUNITY, author=CAROL)) == []


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("morning", [5, 3, 1]),  # newest first; Mallory's 4 hidden
        ("MORNING day", [3]),  # every word, any case
        ('"morning', [5, 3, 1]),
        ("morn*", []),  # no prefix syntax: the word "morn"
        ("morning NEAR coins", []),  # NEAR is a word here, no message has it
        ("near", [5]),
        ("or", [5]),
        ("-morning", [5, 3, 1]),
        ("colon:", [5]),
        ("text:morning", []),  # no column filter: "text" is a word
        ("cafe", [2]),  # diacritics removed (SQLite) / PostgreSQL's 'simple' keeps them
        ("", []),
        ('" OR "" AND ) ( *', [5]),  # "or" and "and" as words: only 5 has "or"… and not "and"
    ],
)
def test_search_takes_words_never_syntax(
    filled: HistoryIndex, query: str, expected: list[int]
) -> None:
    got = [h.message.id for h in filled.reader().search(COMMUNITY, query)]
    if query == "cafe" and filled.db.postgres:
        expected = []  # to_tsvector('simple') keeps "café"
    if query.startswith('" OR'):
        expected = []  # "and" is in no message
    assert got == [mid(n) for n in expected]


def test_search_pages_and_snippets(filled: HistoryIndex) -> None:
    reader = filled.reader()
    assert _ids(h.message for h in reader.search(COMMUNITY, "morning", limit=2)) == [mid(5), mid(3)]
    assert _ids(h.message for h in reader.search(COMMUNITY, "morning", limit=2, offset=2)) == [
        mid(1)
    ]
    (hit,) = reader.search(COMMUNITY, "everyone")
    assert hit.snippet == "good morning everyone"
    assert reader.search("0x02" + "00" * 32, "morning") == []  # another community


def test_iter_messages_filters(filled: HistoryIndex) -> None:
    reader = filled.reader()
    assert _ids(reader.iter_messages(COMMUNITY)) == [mid(n) for n in (1, 2, 3, 7, 5, 6)]
    assert _ids(reader.iter_messages(COMMUNITY, RANDOM)) == [mid(6)]
    assert _ids(reader.iter_messages(COMMUNITY, author=ALICE)) == [mid(1), mid(7), mid(5)]
    # after inclusive, before exclusive
    after, before = ms("2024-03-01T23:59:59.999"), ms("2024-03-03T08:00:00")
    got = reader.iter_messages(COMMUNITY, GENERAL, after_ms=after, before_ms=before)
    assert _ids(got) == [mid(2), mid(3)]


def test_iter_messages_streams_past_a_batch(index: HistoryIndex) -> None:
    from waku_legacy.history import reader as reader_module

    base = ms("2024-03-01T00:00:00")
    events = [
        chat(100 + n, ALICE, f"m{n}", "2024-03-01T00:00:00", clock=base + n) for n in range(2500)
    ]
    index.add_events(COMMUNITY, events)
    got = [m.text for m in index.reader().iter_messages(COMMUNITY, GENERAL)]
    assert got == [f"m{n}" for n in range(2500)]
    assert reader_module.ITER_BATCH < 2500


def test_images_are_served_only_as_sniffed_types(index: HistoryIndex) -> None:
    png = b"\x89PNG\r\n\x1a\n" + b"\x00" * 20
    index.add_events(COMMUNITY, [
        chat(1, ALICE, "", "2024-03-01T10:00:00", content_type=7, image_type="png", image=png),
        chat(2, ALICE, "", "2024-03-01T10:00:01", content_type=7),  # refused by decode: no type
    ])  # fmt: skip
    reader = index.reader()
    assert reader.image(COMMUNITY, mid(1)) == ("png", png)
    assert reader.image(COMMUNITY, mid(2)) is None
    message = reader.message(COMMUNITY, mid(1))
    assert message is not None and (message.image_type, message.image_size) == ("png", len(png))


def test_a_takedown_list_longer_than_sqlites_parameter_limit(filled: HistoryIndex) -> None:
    many = frozenset(f"0x{n:064x}" for n in range(100, 40_100)) | {mid(2)}
    reader = filled.reader(ViewPolicy(takedown_ids=many, takedown_authors=frozenset({CAROL})))
    assert _ids(reader.day(COMMUNITY, GENERAL, D1)) == [mid(1)]
    assert reader.community(COMMUNITY).channels[0].messages == 3  # type: ignore[union-attr]
