"""Envelope dump files: round trips, torn tails, damage, resumable appends, splits."""

from __future__ import annotations

import struct
import zlib
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from waku_legacy.mailserver_compat.storage.dump import (
    HEADER,
    MAX_RECORD_SIZE,
    DumpCorrupt,
    DumpWriter,
    iter_dump_records,
    plan_dump_splits,
    read_dump,
)


def _write(path: Path, bodies: list[bytes]) -> None:
    with DumpWriter(path) as writer:
        for body in bodies:
            writer.append(body)


def test_layout_matches_the_documented_format(tmp_path: Path) -> None:
    path = tmp_path / "a.dump"
    _write(path, [b"\xc5abcde"])
    raw = path.read_bytes()
    # Derived by hand from the module docstring: magic, version, length, crc(length||body).
    length = struct.pack(">I", 6)
    crc = struct.pack(">I", zlib.crc32(length + b"\xc5abcde"))
    assert raw == b"WKLDUMP\x01" + length + crc + b"\xc5abcde"


@settings(max_examples=40, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.binary(max_size=300), max_size=30))
def test_round_trip(tmp_path: Path, bodies: list[bytes]) -> None:
    path = tmp_path / "rt.dump"
    path.unlink(missing_ok=True)
    _write(path, bodies)
    assert list(read_dump(path)) == bodies


def test_every_truncation_point_is_a_clean_torn_tail(tmp_path: Path) -> None:
    bodies = [bytes([i]) * (10 + i) for i in range(5)]
    path = tmp_path / "full.dump"
    _write(path, bodies)
    raw = path.read_bytes()
    ends = [len(HEADER)]
    for body in bodies:
        ends.append(ends[-1] + 8 + len(body))
    cut = tmp_path / "cut.dump"
    for size in range(len(HEADER), len(raw) + 1):
        cut.write_bytes(raw[:size])
        whole = sum(1 for end in ends[1:] if end <= size)
        assert list(read_dump(cut)) == bodies[:whole], size


def test_writer_cuts_a_torn_tail_and_appends_cleanly(tmp_path: Path) -> None:
    path = tmp_path / "resume.dump"
    _write(path, [b"one", b"two"])
    raw = path.read_bytes()
    path.write_bytes(raw + struct.pack(">I", 50) + b"\x00\x01")  # crash mid-record
    _write(path, [b"three"])
    assert list(read_dump(path)) == [b"one", b"two", b"three"]


def test_writer_recreates_a_half_written_header(tmp_path: Path) -> None:
    path = tmp_path / "h.dump"
    path.write_bytes(b"WKL")
    _write(path, [b"x"])
    assert list(read_dump(path)) == [b"x"]


def test_mid_file_damage_is_reported_and_skipped(tmp_path: Path) -> None:
    path = tmp_path / "bad.dump"
    bodies = [b"A" * 20, b"B" * 20, b"C" * 20]
    _write(path, bodies)
    raw = bytearray(path.read_bytes())
    second = len(HEADER) + 8 + 20
    raw[second + 8 + 3] ^= 0xFF  # flip a byte inside the second body
    path.write_bytes(bytes(raw))
    with pytest.raises(DumpCorrupt, match="CRC"):
        list(read_dump(path))
    records = list(iter_dump_records(path))
    assert [r.data for r in records if r.error is None] == [b"A" * 20, b"C" * 20]
    damaged = [r for r in records if r.error is not None]
    assert len(damaged) == 1 and damaged[0].offset == second
    with pytest.raises(DumpCorrupt):
        DumpWriter(path)


def test_bad_magic_and_oversized_length(tmp_path: Path) -> None:
    path = tmp_path / "m.dump"
    path.write_bytes(b"NOTADUMP" + b"\x00" * 10)
    with pytest.raises(DumpCorrupt, match="magic"):
        list(read_dump(path))
    path.write_bytes(HEADER + struct.pack(">II", MAX_RECORD_SIZE + 1, 0) + b"\x00" * 64)
    records = list(iter_dump_records(path))
    assert len(records) == 1 and "limit" in (records[0].error or "")


def test_splits_cover_every_record_once(tmp_path: Path) -> None:
    path = tmp_path / "s.dump"
    bodies = [i.to_bytes(2, "big") * (i % 7 + 1) for i in range(200)]
    _write(path, bodies)
    for parts in (1, 2, 3, 7, 500):
        splits = plan_dump_splits(path, parts)
        assert len(splits) <= parts
        got = [r.data for a, b in splits for r in iter_dump_records(path, start=a, stop=b)]
        assert got == bodies
