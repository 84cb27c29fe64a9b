"""The readable step's decoding, done by the Spark tasks that decrypt the community channels.

Those tasks (step 1 with a PostgreSQL store, :func:`~.archive_jobs.decrypt_channel_files`
beside the driver's SQLite writer) already hold each channel message decrypted, with its
payload signer recovered (the archive row's ``sig``): :func:`readable_rows` decodes it at the
Status application layer there (:func:`waku_legacy.history.sources.decode_row`: only the
ApplicationMetadataMessage signer is left to recover) and writes the event beside the archive
rows, in a file of :data:`READABLE_DIR` named as the channel file it comes from, as plain
values (:func:`~waku_legacy.history.events.event_values`) in ``marshal``'s format: 1 us to
write and 3 us to read back as the event, where pickling the dataclasses took 6 us and
unpickling them 6 us more, and setting the archive window on them 5 us (1M-message bench,
100k events). The driver then only folds them into the ``history_*`` tables
(:class:`ReadableEvents`, given to :func:`~waku_legacy.history.sources.index_from_store`
as ``predecoded``): the duplicate copies left out as the archives leave them out, each
channel's events in the store's (timestamp, hash) order, one per message hash, with the
archive window holding each, as ``index_from_store`` would read them back from the store.
"""

from __future__ import annotations

import marshal
from collections.abc import Iterator, Sequence
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from waku_legacy.history.events import (
    Event,
    WakuFacts,
    event_from_values,
    event_values,
    whisper_timestamp_of,
)
from waku_legacy.history.sources import window_of

__all__ = [
    "READABLE_DIR",
    "READABLE_SCHEMA",
    "ReadableEvents",
    "dump_pair",
    "load_pair",
    "readable_rows",
]

#: where the decrypting tasks write the decoded events (one file per channel file)
READABLE_DIR = "readable"
READABLE_SCHEMA = pa.schema(
    [
        ("source", pa.string()),  # with location: the record (the dedup's copies)
        ("location", pa.string()),
        ("community", pa.string()),
        ("content_topic", pa.string()),
        ("timestamp", pa.int64()),  # nanoseconds, as stored
        ("message_hash", pa.binary()),  # as stored
        ("event", pa.binary()),  # dump_pair's (event, segment bytes or None)
    ]
)
#: what :func:`readable_rows` reads of a MESSAGE row
MESSAGE_COLUMNS = ("message_hash", "pubsub_topic", "content_topic", "timestamp", "version",
                   "payload", "community")  # fmt: skip
#: what it reads of the CHANNEL_ARCHIVE row made of it
ARCHIVE_COLUMNS = ("ok", "sig", "payload")
_NANOS = 1_000_000_000
_SORT = [(c, "ascending") for c in ("community", "content_topic", "timestamp", "message_hash")]


def dump_pair(pair: tuple[Event, bytes | None]) -> bytes:
    """An (event, segment bytes or None) pair as the ``event`` column holds it."""
    event, data = pair
    return marshal.dumps((event_values(event), data))


def load_pair(blob: bytes, windows: Sequence[tuple[int, int]] = ()) -> tuple[Event, bytes | None]:
    """:func:`dump_pair`'s pair back; with ``windows`` (sorted [from, to) seconds), the
    event's archive window the one of them holding its envelope time (None: none does), as
    :func:`~waku_legacy.history.sources.stored_row` sets it."""
    values, data = marshal.loads(blob)
    seconds = whisper_timestamp_of(values) if windows else None
    if seconds is not None:
        return event_from_values(values, window_of(windows, seconds)), data
    return event_from_values(values), data


def readable_rows(messages: pa.Table, archived: pa.Table, keys: dict[str, bytes]) -> pa.Table:
    """Community channels' MESSAGE rows and the CHANNEL_ARCHIVE rows made of them (row for
    row, :func:`~.archives.channel_archive_rows` with ``keys``, every channel's symmetric
    key by content topic) -> READABLE_SCHEMA rows: each stored message's (event, segment
    bytes) from its decrypted archive fields (``payload``; ``sig``: the payload signer's
    65-byte key; ``ok``: it decrypted), what :func:`~waku_legacy.history.sources.stored_row`
    and ``decode_row`` make of it. One that did not decrypt is decrypted again as the store
    path does (rare: for the same reason in the same words)."""
    from waku_legacy.history.sources import WakuRow, decode_row, stored_row
    from waku_legacy.store.types import StoredMessage

    inputs = [messages.column(c).to_pylist() for c in MESSAGE_COLUMNS]
    inputs += [archived.column(c).to_pylist() for c in ARCHIVE_COLUMNS]
    events = []
    for row in zip(*inputs, strict=True):
        message_hash, pubsub, topic, timestamp, version, payload, community, ok, sig, data = row
        if ok:
            facts = WakuFacts(
                "0x" + message_hash.hex(), topic, pubsub, timestamp // _NANOS,
                "0x" + sig.hex() if sig else "", None, "store",
            )  # fmt: skip
            pair = decode_row(WakuRow(bytes(data or b""), facts), community)
        else:
            message = StoredMessage(message_hash, pubsub, topic, payload, version, timestamp)
            pair = decode_row(stored_row(message, keys[topic]), community)
        events.append(dump_pair(pair))
    return pa.Table.from_arrays(
        [
            messages.column("source").cast(pa.string()),
            messages.column("location").cast(pa.string()),
            messages.column("community").cast(pa.string()),
            messages.column("content_topic").cast(pa.string()),
            messages.column("timestamp").cast(pa.int64()),
            messages.column("message_hash").cast(pa.binary()),
            pa.array(events, pa.binary()),
        ],
        schema=READABLE_SCHEMA,
    )


class ReadableEvents:
    """The decoded events of a run's READABLE_DIR files, the duplicate copies left out,
    sorted per channel; called with (community id, content topic, the community's archive
    windows) it gives that channel's (event, segment bytes) pairs in the store's order, one
    per message hash, each event's archive window the one holding it (None for a channel
    none of the files holds: the caller reads it from the store)."""

    def __init__(self, readable_dir: Path, duplicates_dir: Path) -> None:
        from waku_legacy.migrate.archive_jobs import kept_channel_batches
        from waku_legacy.migrate.dedup import part_files

        columns = [f.name for f in READABLE_SCHEMA if f.name not in ("source", "location")]
        schema = pa.schema([READABLE_SCHEMA.field(c) for c in columns])
        tables = [
            pa.Table.from_batches(list(kept_channel_batches(path, duplicates_dir, columns)), schema)
            for path in part_files(readable_dir)
        ]
        table = pa.concat_tables(tables) if tables else schema.empty_table()
        self._table = table.take(pc.sort_indices(table, _SORT)) if table.num_rows else table
        self._spans: dict[tuple[str, str], tuple[int, int]] = {}
        if not self._table.num_rows:
            return
        # sorted by channel: each channel's rows are one run of (community, content topic)
        channel = pc.binary_join_element_wise(
            self._table.column("community"), self._table.column("content_topic"), "\x1f"
        ).combine_chunks()
        ends = np.flatnonzero(pc.not_equal(channel[1:], channel[:-1]).to_numpy(False)) + 1
        starts = [0, *ends.tolist()]
        for start, end in zip(starts, [*starts[1:], self._table.num_rows], strict=True):
            community, content_topic = channel[start].as_py().split("\x1f")
            self._spans[community, content_topic] = (start, end)

    def __call__(
        self, community: str, content_topic: str, windows: Sequence[tuple[int, int]] = ()
    ) -> Iterator[tuple[Event, bytes | None]] | None:
        span = self._spans.get((community, content_topic))
        if span is None:
            return None
        return self._pairs(*span, windows)

    def _pairs(
        self, start: int, end: int, windows: Sequence[tuple[int, int]]
    ) -> Iterator[tuple[Event, bytes | None]]:
        rows = self._table.slice(start, end - start)
        previous = None
        hashes = rows.column("message_hash").to_pylist()
        for message_hash, blob in zip(hashes, rows.column("event").to_pylist(), strict=True):
            if message_hash != previous:  # the store keeps one row per hash
                previous = message_hash
                yield load_pair(blob, windows)
