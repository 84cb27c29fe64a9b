"""The readable step's decoding in the decrypting tasks (migrate/readable.py), without Spark:
the per-record functions over hand-built Status messages (tests/waku_legacy/history's), then
the driver's fold of their files, checked against ``index_from_store`` reading the same rows
back from a store (SQLite and the real PostgreSQL): the same history tables, row for row."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa

from tests.waku_legacy.history import status_messages as sm
from tests.waku_legacy.history.indexing import history_dsn
from tests.waku_legacy.history.test_sources import (
    CHANNEL_KEY,
    CHANNEL_TOPIC,
    COMMUNITY,
    PUBSUB,
    _description,
    _row,
)
from waku_legacy.community_config import CommunityConfig
from waku_legacy.history.events import (
    EVENT_TYPES,
    WakuFacts,
    event_from_values,
    event_values,
    whisper_timestamp_of,
)
from waku_legacy.history.index import HistoryIndex
from waku_legacy.history.sources import decode_row, index_from_store, stored_row
from waku_legacy.identity.topics import (
    chat_topic,
    symmetric_key_for_chat,
    v1_topic_to_content_topic,
)
from waku_legacy.migrate.archives import channel_archive_rows
from waku_legacy.migrate.dedup import COPY_SCHEMA, PART_COLUMN, part_file
from waku_legacy.migrate.readable import ReadableEvents, dump_pair, load_pair, readable_rows
from waku_legacy.migrate.records import MESSAGE_SCHEMA
from waku_legacy.migrate.work_files import write_parquet_file
from waku_legacy.store import open_store
from waku_legacy.store.types import StoredMessage

__all__ = ["history_dsn"]  # the fixture

KEYS = {CHANNEL_TOPIC: CHANNEL_KEY}


def _message_rows(rows: list[tuple[StoredMessage, str]]) -> pa.Table:
    """MESSAGE rows of the community's channel for (stored message, location)."""
    columns: dict[str, list[Any]] = {f.name: [] for f in MESSAGE_SCHEMA}
    for message, location in rows:
        values = {**message._asdict(), "community": str(COMMUNITY), "channel": sm.CHANNEL,
                  "week": "2022-W01", "source": "mailserver", "location": location}  # fmt: skip
        for name, column in columns.items():
            column.append(values.get(name))
    return pa.Table.from_pydict(columns, schema=MESSAGE_SCHEMA)


def _messages() -> list[StoredMessage]:
    """A chat message, one deleted by an admin, an edit, a name, a reaction, a pin, one
    encrypted with another key (undecryptable) and a segmented one (three pieces)."""
    from tests.waku_legacy.history.test_segments import split

    t0 = sm.T0 * 1000
    hello = sm.application(sm.ALICE, 1, sm.chat("hello @" + sm.CAROL.hex))
    spam = sm.application(sm.BOB, 1, sm.chat("spam", clock=t0 + 1, timestamp=t0 + 1))
    hello_id, spam_id = sm.expected_id(sm.ALICE, hello), sm.expected_id(sm.BOB, spam)
    apps = [
        hello, spam,
        sm.application(sm.ALICE, 29, sm.edit(hello_id, "hello, edited")),
        sm.application(sm.CAROL, 31, sm.delete(spam_id)),
        sm.application(sm.CAROL, 24, sm.identity("Carol Admin")),
        sm.application(sm.BOB, 22, sm.reaction(hello_id, 1)),
        sm.application(sm.CAROL, 28, sm.pin(hello_id)),
    ]  # fmt: skip
    rows = [_row(i + 1, CHANNEL_TOPIC, sm.wrapped(a), CHANNEL_KEY, sm.T0 + i)
            for i, a in enumerate(apps)]  # fmt: skip
    rows.append(_row(20, CHANNEL_TOPIC, sm.wrapped(hello), b"\x01" * 32, sm.T0 + 3))
    long = sm.application(sm.ALICE, 1, sm.chat("a long message, " * 40, clock=t0 + 9))
    pieces = split(sm.wrapped(long), 300)
    rows += [_row(30 + i, CHANNEL_TOPIC, p, CHANNEL_KEY, sm.T0 + 9) for i, p in enumerate(pieces)]
    return rows


def test_a_row_decodes_as_the_store_path_decodes_it() -> None:
    """From the archive row's payload and ``sig`` (no second payload signer recovery), the
    same (event, segment bytes) as decrypting the stored message again."""
    messages = _messages()
    rows = _message_rows([(m, f"row-{i}") for i, m in enumerate(messages)])
    got = readable_rows(rows, channel_archive_rows(rows, KEYS), KEYS)
    assert got.column("location").to_pylist() == [f"row-{i}" for i in range(len(messages))]
    pairs = [load_pair(e) for e in got.column("event").to_pylist()]
    expected = [decode_row(stored_row(m, CHANNEL_KEY), str(COMMUNITY)) for m in messages]
    assert [p[0] for p in pairs] == [e[0] for e in expected]
    assert [p[1] for p in pairs] == [e[1] for e in expected]
    assert sum(p[0].reason == "undecryptable" for p in pairs if hasattr(p[0], "reason")) == 1


def _history_tables(index: HistoryIndex) -> dict[str, list[Any]]:
    if index.db.postgres:
        sql = "SELECT table_name FROM information_schema.tables WHERE table_name LIKE 'history%%'"
    else:
        sql = "SELECT name FROM sqlite_master WHERE type = 'table' AND name LIKE 'history%'"
    names = sorted(r[0] for r in index.db.execute(sql))
    return {n: sorted(index.db.execute(f"SELECT * FROM {n}"), key=repr) for n in names}


def _drop_history_tables(index: HistoryIndex) -> None:
    with index.db.transaction():
        for name in _history_tables(index):
            if index.db.postgres or not name.startswith("history_fts_"):  # FTS5's own
                index.db.stream(f"DROP TABLE IF EXISTS {name}")


def test_the_tasks_files_fold_as_the_store_read_back(history_dsn: str, tmp_path: Path) -> None:
    """Rows spread over two step-1 files out of order, a duplicate copy in each (one the
    dedup drops, one with the same message hash as its kept copy): the driver's fold of the
    decoded files gives the tables and counts ``index_from_store`` gives from the store."""
    messages = _messages()
    copy_of = messages[0]
    first = [(m, f"a-{i}") for i, m in enumerate(messages) if i % 2 == 0][::-1]
    second = [(m, f"b-{i}") for i, m in enumerate(messages) if i % 2 == 1]
    first.append((copy_of, "a-copy"))  # dropped by the dedup
    second.append((copy_of, "b-same-hash"))  # kept by the dedup, one row in the store
    readable_dir, duplicates_dir = tmp_path / "readable", tmp_path / "duplicates"
    readable_dir.mkdir()
    duplicates_dir.mkdir()
    for part, rows in enumerate((first, second)):
        table = _message_rows(rows)
        decoded = readable_rows(table, channel_archive_rows(table, KEYS), KEYS)
        write_parquet_file(part_file(readable_dir, part), decoded)
    copies = {c: [None] for c in COPY_SCHEMA.names}
    copies.update(source=["mailserver"], location=["a-copy"], **{PART_COLUMN: [0]})
    write_parquet_file(part_file(duplicates_dir, 0), pa.table(copies, schema=COPY_SCHEMA))

    community_chat = COMMUNITY.chat_id
    chat_key = symmetric_key_for_chat(community_chat)
    description_topic = v1_topic_to_content_topic(chat_topic(community_chat))
    description = _row(99, description_topic, _description(), chat_key, sm.T0 - 10)
    with open_store(history_dsn) as store:
        store.insert_messages([description, *messages])
    config = CommunityConfig(id=COMMUNITY, channels=(sm.CHANNEL,), shard=128)
    windows = {str(COMMUNITY): [(sm.T0 - 100, sm.T0 + 5)]}
    with HistoryIndex.open(history_dsn, create=True) as index:
        expected_counts = index_from_store(history_dsn, [config], index, windows=windows)
        expected = _history_tables(index)
        _drop_history_tables(index)
    asked: list[tuple[str, str]] = []
    events = ReadableEvents(readable_dir, duplicates_dir)

    def predecoded(community: str, topic: str, windows: Any) -> Any:
        asked.append((community, topic))
        return events(community, topic, windows)

    with HistoryIndex.open(history_dsn, create=True) as index:
        counts = index_from_store(history_dsn, [config], index, windows=windows,
                                  predecoded=predecoded)  # fmt: skip
        got = _history_tables(index)
    assert asked == [(str(COMMUNITY), CHANNEL_TOPIC)]
    assert counts.to_json() == expected_counts.to_json()
    # hello, spam (kept, shown deleted) and the joined long one
    assert expected_counts.messages == 3 and expected_counts.undecodable == {
        "undecryptable": 1, "segment": 2
    }  # fmt: skip
    assert expected["history_messages"] and got == expected
    assert events(str(COMMUNITY), "/waku/1/0x00000000/rfc26") is None  # not in the files
    assert PUBSUB  # (the rows' pubsub topic: part of each message's provenance)


def _every_field_set(cls: type, facts: WakuFacts | None) -> Any:
    """An event of type ``cls`` with each field set to a value of its type, none the
    default (so a field added later is covered too)."""
    import dataclasses

    values: dict[str, Any] = {}
    for number, f in enumerate(dataclasses.fields(cls), start=1):
        kind = str(f.type)
        if f.name == "facts":
            values[f.name] = facts
        elif kind == "bool":
            values[f.name] = True
        elif kind == "int":
            values[f.name] = 2**62 + number  # beyond 32 bits
        elif kind == "bytes":
            values[f.name] = bytes([number]) * 3 + b"\x00\xff"
        else:
            assert kind == "str", f"{cls.__name__}.{f.name}: {kind}: give it a value here"
            values[f.name] = f"{f.name} ✓ \x1f\n{number}"
    return cls(**values)


def test_every_event_type_round_trips_through_the_event_column() -> None:
    """dump_pair/load_pair (marshal of event_values): every event type, every field set,
    with and without facts and segment bytes, is read back equal and of the same types;
    given windows, the event's archive window is the one holding its envelope time, as
    stored_row sets it (None when none does), and nothing else changes."""
    import dataclasses

    facts = WakuFacts("0x" + "ab" * 32, CHANNEL_TOPIC, PUBSUB, sm.T0, "0x04" + "cd" * 64,
                      (sm.T0 - 7, sm.T0 + 7), "store")  # fmt: skip
    assert len(EVENT_TYPES) == 7
    for cls in EVENT_TYPES:
        for given_facts in (facts, None):
            event = _every_field_set(cls, given_facts)
            for data in (None, b"segment \x00 bytes"):
                back, back_data = load_pair(dump_pair((event, data)))
                assert (back, back_data) == (event, data)
                assert type(back) is cls
                for f in dataclasses.fields(cls):
                    assert type(getattr(back, f.name)) is type(getattr(event, f.name)), f.name
                assert event_from_values(event_values(event)) == event
                assert whisper_timestamp_of(event_values(event)) == (
                    None if given_facts is None else sm.T0
                )
            in_window, _ = load_pair(dump_pair((event, None)), [(sm.T0 - 1, sm.T0 + 1)])
            outside, _ = load_pair(dump_pair((event, None)), [(sm.T0 + 1, sm.T0 + 9)])
            if given_facts is None:
                assert in_window == outside == event
            else:
                assert in_window == dataclasses.replace(
                    event, facts=dataclasses.replace(facts, archive_window=(sm.T0 - 1, sm.T0 + 1))
                )
                assert outside == dataclasses.replace(
                    event, facts=dataclasses.replace(facts, archive_window=None)
                )
