"""status-go's partition rules, worked by hand (manager_archive_file.go)."""

from __future__ import annotations

import random

from hypothesis import given, settings
from hypothesis import strategies as st

from waku_legacy.archive import (
    WEEK_SECONDS,
    ArchiveMessage,
    Window,
    plan_archives,
    plan_windows,
    split_by_size,
    window_index,
)

W = WEEK_SECONDS  # 604800
TOPIC = b"\x01\x02\x03\x04"


def msg(ts: int, tag: int, payload: bytes = b"p", sig: bytes = b"") -> ArchiveMessage:
    return ArchiveMessage(
        timestamp=ts, hash=tag.to_bytes(32, "big"), topic=TOPIC, payload=payload, sig=sig
    )


def test_windows_step_seven_days_and_clamp_to_now() -> None:
    assert plan_windows(1000, 1000 + 2 * W + 100) == [
        Window(1000, 1000 + W),
        Window(1000 + W, 1000 + 2 * W),
        Window(1000 + 2 * W, 1000 + 2 * W + 100),
    ]
    assert plan_windows(1000, 1000) == []
    assert plan_windows(1000, 999) == []
    assert plan_windows(0, W) == [Window(0, W)]


def test_window_index_matches_window_list() -> None:
    start, now = 1000, 1000 + 3 * W + 5
    windows = plan_windows(start, now)
    for ts in (1000, 1000 + W - 1, 1000 + W, 1000 + 3 * W, now - 1):
        index = window_index(ts, start, now)
        assert index is not None and windows[index].contains(ts)
    assert window_index(999, start, now) is None
    assert window_index(now, start, now) is None


def test_plan_from_oldest_message() -> None:
    now = 1000 + 2 * W + 100
    messages = [
        msg(1000, 1),  # oldest: windows start here
        msg(1000 + W - 1, 2),  # still window 0 (to is exclusive)
        msg(1000 + 2 * W + 99, 3),  # last (clamped) window
        msg(now, 4),  # == now: not archived yet
        msg(now + 50, 5),
    ]
    plan = plan_archives(messages, last_end=None, now=now)
    assert [(a.window, [m.timestamp for m in a.messages]) for a in plan.archives] == [
        (Window(1000, 1000 + W), [1000, 1000 + W - 1]),
        # window 1 is empty: skipped
        (Window(1000 + 2 * W, now), [1000 + 2 * W + 99]),
    ]
    assert (plan.start, plan.new_last_end, plan.future, plan.late) == (1000, now, 2, 0)
    assert plan.windows == 3


def test_plan_from_last_end_counts_late_messages() -> None:
    last_end = 5000
    now = last_end + W + 10
    messages = [msg(4999, 1), msg(100, 2), msg(5000, 3), msg(5000 + W, 4)]
    plan = plan_archives(messages, last_end=last_end, now=now)
    assert plan.late == 2
    assert [a.window for a in plan.archives] == [
        Window(5000, 5000 + W),
        Window(5000 + W, now),
    ]
    assert plan.new_last_end == now


def test_catch_up_one_archive_per_missed_window() -> None:
    # a control node back after 5 weeks: one archive per week in one run
    last_end = 10_000
    now = last_end + 5 * W
    messages = [msg(last_end + k * W + 7, k) for k in range(5)]
    plan = plan_archives(messages, last_end=last_end, now=now)
    assert [a.window for a in plan.archives] == [
        Window(last_end + k * W, last_end + (k + 1) * W) for k in range(5)
    ]


def test_start_not_before_now_records_start() -> None:
    plan = plan_archives([msg(500, 1)], last_end=900, now=800)
    assert plan.archives == [] and plan.new_last_end == 900 and plan.late == 1


def test_size_split_shares_window() -> None:
    # limit 10 bytes of payload+sig: sizes 4, 4, 4 -> [4,4] then [4]; 11 alone is dropped
    chunks, dropped = split_by_size([4, 4, 11, 4], max_bytes=10)
    assert chunks == [[0, 1], [3]] and dropped == [2]
    # exactly at the limit stays together
    assert split_by_size([5, 5], max_bytes=10) == ([[0, 1]], [])
    # only oversize messages: status-go still appends its (empty) current chunk
    assert split_by_size([11], max_bytes=10) == ([[]], [0])
    assert split_by_size([], max_bytes=10) == ([], [])

    messages = [msg(1000 + i, i, payload=b"x" * 3, sig=b"s") for i in range(3)]  # 4 bytes each
    plan = plan_archives(messages, last_end=None, now=1000 + W, max_archive_bytes=10)
    assert [(a.window, a.part, len(a.messages)) for a in plan.archives] == [
        (Window(1000, 1000 + W), 0, 2),
        (Window(1000, 1000 + W), 1, 1),
    ]


def test_duplicates_kept_once_deterministically() -> None:
    a = msg(1000, 7, payload=b"a")
    b = msg(1000, 7, payload=b"b")
    for order in ([a, b], [b, a]):
        plan = plan_archives(order, last_end=None, now=2000)
        assert plan.duplicates == 1
        assert plan.archives[0].messages == (a,)


@settings(max_examples=60, deadline=None)
@given(
    stamps=st.lists(st.integers(0, 6 * W), min_size=1, max_size=60),
    now_offset=st.integers(0, 7 * W),
    seed=st.integers(0, 1000),
)
def test_plan_is_input_order_independent_and_complete(
    stamps: list[int], now_offset: int, seed: int
) -> None:
    messages = [msg(ts, i) for i, ts in enumerate(stamps)]
    shuffled = messages[:]
    random.Random(seed).shuffle(shuffled)
    now = min(stamps) + now_offset
    one = plan_archives(messages, last_end=None, now=now)
    two = plan_archives(shuffled, last_end=None, now=now)
    assert one.archives == two.archives
    archived = [m for a in one.archives for m in a.messages]
    assert len(archived) + one.future == len(messages)
    for archive in one.archives:
        assert all(archive.window.contains(m.timestamp) for m in archive.messages)
        keys = [(m.timestamp, m.hash) for m in archive.messages]
        assert keys == sorted(keys)
        assert archive.window.end - archive.window.start <= W


def test_no_new_messages_still_advance_the_recorded_end() -> None:
    # status-go walks the (empty) windows from the recorded end to now and records now
    plan = plan_archives([], last_end=5000, now=5000 + 2 * W)
    assert plan.archives == [] and plan.new_last_end == 5000 + 2 * W and plan.windows == 2
    # nothing recorded and no messages: no start, nothing to record
    assert plan_archives([], last_end=None, now=5000).new_last_end is None
