"""The migration end to end on local Spark, from every kind of source, checked against a
plain single-process computation of the same result:

- store contents and per-source counts equal what a straightforward Python loop derives;
- archives are byte-identical to the archive module's one-call build over all messages;
- a rerun gives identical archives and store; a new week appends only new archives and a
  late message is counted (and stored);
- a crash at the store write or in the middle of archiving, then a rerun, gives exactly the
  uninterrupted result.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import sqlite3
import struct
import uuid
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg
import pytest

from tests.conftest import database_of, dsn_for_database
from tests.helpers import fresh_database
from tests.waku_legacy.store.test_rest_client import NwakuRestServer, v2_messages
from waku_legacy.archive.build import build_community_archives
from waku_legacy.crypto.payload import decode_payload
from waku_legacy.errors import WakuLegacyError
from waku_legacy.faults import CrashAt, SimulatedCrash
from waku_legacy.identity.message_hash import message_hash
from waku_legacy.identity.topics import chat_topic, symmetric_key_for_chat
from waku_legacy.mailserver_compat.storage.dump import DumpWriter
from waku_legacy.mailserver_compat.storage.leveldb import LevelDBEnvelopeStore
from waku_legacy.mailserver_compat.storage.postgres import PostgresEnvelopeStore
from waku_legacy.mailserver_compat.wire.convert import archive_message
from waku_legacy.mailserver_compat.wire.envelope import Envelope
from waku_legacy.migrate.config import parse_config
from waku_legacy.migrate.pipeline import run_migration
from waku_legacy.migrate.sample import (
    SampleSpec,
    generate_envelopes,
    make_communities,
    write_leveldb_mailservers,
)
from waku_legacy.proto import waku_message_pb2
from waku_legacy.store import StoredMessage, open_store

pytestmark = [pytest.mark.spark, pytest.mark.postgres, pytest.mark.network]

DAY = 86_400
SPEC = SampleSpec(communities=2, channels=2, members=4, days=35, messages_per_channel_day=1.2,
                  public_per_day=0.6, start=1_640_995_200, seed=11)  # fmt: skip
NOW = SPEC.start + 38 * DAY
BRIDGE_TOPIC = "/waku/2/default-waku/proto"
DEFAULT_TOPIC = "/waku/2/rs/16/32"


@dataclass
class Dataset:
    root: Path
    envelopes: list[bytes]
    communities: list[Any]
    sources: list[dict[str, Any]]
    v2_only: list[StoredMessage]
    bridged: list[bytes]  # envelopes whose bridged v2 copy the REST node also holds
    rest: NwakuRestServer
    records: dict[str, list[tuple[str, bytes]]]  # source -> [(kind, envelope or hash)]


def _pg_database(base_dsn: str) -> str:
    name = "msmig_" + uuid.uuid4().hex[:10]
    with psycopg.connect(base_dsn, autocommit=True) as admin:
        admin.execute(f"CREATE DATABASE {name}")
    return dsn_for_database(base_dsn, name)


def _bridged_copy(envelope: bytes) -> StoredMessage:
    env = Envelope.decode(envelope)
    wm = waku_message_pb2.WakuMessage(
        payload=env.data,
        content_topic=f"/waku/1/0x{env.topic.hex()}/rfc26",
        version=1,
        timestamp=(env.expiry - env.ttl) * 10**9,
    )
    return StoredMessage(message_hash(BRIDGE_TOPIC, wm), BRIDGE_TOPIC, wm.content_topic,
                         bytes(wm.payload), 1, wm.timestamp, None)  # fmt: skip


@pytest.fixture(scope="module")
def dataset(tmp_path_factory, postgres_dsn) -> Any:
    root = tmp_path_factory.mktemp("legacy")
    communities = make_communities(SPEC)
    envelopes = list(generate_envelopes(SPEC, communities))
    records: dict[str, list[tuple[str, bytes]]] = {}

    ms = [root / "ms1", root / "ms2"]
    write_leveldb_mailservers(iter(envelopes), ms, seed=3)
    for name, path in zip(("ms1", "ms2"), ms, strict=True):
        with LevelDBEnvelopeStore(path) as db:
            records[name] = [("v1", v) for _, v in db.iter_range()]
    with LevelDBEnvelopeStore(ms[1]) as db:  # a damaged value in a legacy database
        db.put(struct.pack(">I", SPEC.start + 5) + b"\x00" * 36, b"\xc3garbage")
    records["ms2"].append(("bad", b""))

    pg_dsn = _pg_database(postgres_dsn)
    with PostgresEnvelopeStore(pg_dsn, create_schema=True) as db:
        for envelope in envelopes[::4]:
            db.save_envelope(envelope)
    records["pg"] = [("v1", e) for e in envelopes[::4]]

    dump = root / "pulled.dump"
    with DumpWriter(dump) as writer:
        for envelope in envelopes[1::5]:
            writer.append(envelope)
    raw = bytearray(dump.read_bytes())
    raw[8 + 8 + 5] ^= 0xFF  # damage the first record's body
    dump.write_bytes(bytes(raw) + b"\x00\x00\x01")  # and leave a torn tail
    records["dump"] = [("bad", b"")] + [("v1", e) for e in envelopes[1::5][1:]]

    bridged = envelopes[::6]
    v2_only = v2_messages(12, pubsub="/waku/2/rs/16/64", start=(SPEC.start + 3 * DAY) * 10**9)
    rest = NwakuRestServer([_bridged_copy(e) for e in bridged] + v2_only[:8])
    rest.__enter__()
    records["rest"] = [("v2", _bridged_copy(e).message_hash) for e in bridged] + [
        ("v2", m.message_hash) for m in v2_only[:8]
    ]
    nwaku_sqlite = root / "nwaku.sqlite3"
    with open_store(str(nwaku_sqlite)) as store:
        store.insert_messages(v2_only[4:])
    records["sqlite"] = [("v2", m.message_hash) for m in v2_only[4:]]

    sources = [
        {"kind": "mailserver-leveldb", "name": "ms1", "path": str(ms[0])},
        {"kind": "mailserver-leveldb", "name": "ms2", "path": str(ms[1])},
        {"kind": "mailserver-postgres", "name": "pg", "dsn": pg_dsn},
        {"kind": "envelope-dump", "name": "dump", "path": str(dump)},
        {"kind": "store-rest", "name": "rest", "url": rest.url, "page_size": 7},
        {"kind": "store-sqlite", "name": "sqlite", "path": str(nwaku_sqlite)},
    ]
    yield Dataset(root, envelopes, communities, sources, v2_only, bridged, rest, records)
    rest.__exit__()
    with psycopg.connect(postgres_dsn, autocommit=True) as admin:
        admin.execute(f"DROP DATABASE IF EXISTS {database_of(pg_dsn)} WITH (FORCE)")


def _config(ds: Dataset, out: Path, *, sources=None, now: int = NOW, store=None) -> Any:
    data = {
        "spark": {"master": "local[2]"},
        "source": sources or ds.sources,
        "community": [
            {"id": str(c.id), "channels": list(c.channels), "shard": c.shard}
            for c in ds.communities
        ],
        "pipeline": {"now": now},
        "output": {**output_under(out), **({"store": store} if store else {})},
    }
    return parse_config(data, base_dir=out)


def output_under(out: Path) -> dict[str, str]:
    """The ``[output]`` table of a run that writes everything below ``out`` (SQLite store)."""
    return {
        "store": f"sqlite:///{out}/store.sqlite3",
        "archive_dir": str(out / "archives"),
        "torrent_dir": str(out / "torrents"),
        "work_dir": str(out / "work"),
    }


def _run(spark, ds: Dataset, out: Path, **kwargs) -> Any:
    overrides = {k: kwargs.pop(k) for k in ("sources", "now") if k in kwargs}
    return run_migration(_config(ds, out, **overrides), spark=spark, **kwargs)


def _store_rows(out: Path) -> tuple[list[tuple], list[tuple]]:
    with sqlite3.connect(out / "store.sqlite3") as db:
        messages = db.execute("SELECT * FROM Message ORDER BY messageHash").fetchall()
        envelopes = db.execute("SELECT * FROM v1_envelopes ORDER BY messageHash").fetchall()
    return messages, envelopes


def _archive_files(out: Path) -> dict[str, bytes]:
    files = {}
    for path in sorted((out / "archives").rglob("*")) + sorted(
        (out / "torrents").glob("*.torrent")
    ):
        if path.is_file() and not path.name.endswith(".tmp"):
            files[str(path.relative_to(out))] = path.read_bytes()
    return files


def _expected_store(ds: Dataset) -> set[tuple]:
    routes = {}
    for c in ds.communities:
        for channel in c.channels:
            routes[chat_topic(c.id.channel_chat_id(channel))] = f"/waku/2/rs/16/{c.shard}"
    rows = set()
    for raw in ds.envelopes:
        env = Envelope.decode(raw)
        ct = f"/waku/1/0x{env.topic.hex()}/rfc26"
        ts = (env.expiry - env.ttl) * 10**9
        pubsub = routes.get(env.topic, DEFAULT_TOPIC)
        h = hashlib.sha256(
            pubsub.encode() + env.data + ct.encode() + struct.pack(">q", ts)
        ).digest()
        rows.add((h, pubsub.encode(), ct.encode(), env.data, 1, ts, None))
    for m in ds.v2_only:
        rows.add((m.message_hash, m.pubsub_topic.encode(), m.content_topic.encode(), m.payload, 0,
                  m.timestamp, None))  # fmt: skip
    return rows


def _reference_archives(ds: Dataset, out: Path, envelopes: list[bytes], now: int) -> None:
    """The archive module's one-call build over every channel message (no Spark)."""
    for c in ds.communities:
        chats = [c.id.channel_chat_id(ch) for ch in c.channels]
        keys = {chat_topic(chat): symmetric_key_for_chat(chat) for chat in chats}
        messages = []
        for raw in envelopes:
            env = Envelope.decode(raw)
            if env.topic in keys:
                decoded = decode_payload(env.data, symmetric_key=keys[env.topic])
                messages.append(
                    archive_message(
                        message_hash=env.hash(),
                        topic=env.topic,
                        timestamp=env.expiry - env.ttl,
                        decoded=decoded,
                    )
                )
        build_community_archives(out / "archives", out / "torrents", c.id, sorted(keys), messages,
                                 now=now, clock_ms=now * 1000,
                                 archive_topics="both")  # the [[community]] default  # fmt: skip


@pytest.fixture(scope="module")
def baseline(spark, dataset, tmp_path_factory) -> tuple[Path, Any]:
    out = tmp_path_factory.mktemp("baseline")
    from waku_legacy.migrate.progress import SparkProgress

    # its progress lines as a non-terminal run writes them (test_progress_of_every_step)
    with (out / "progress.jsonl").open("w") as stream:
        report = _run(spark, dataset, out, progress=SparkProgress(stream=stream, interval=1))
    return out, report


def test_progress_of_every_step(baseline) -> None:
    """Issue 24: every step that runs Spark jobs reports them, the quarantine too (it said
    nothing while it wrote a mailserver's junk), and each Spark step after the first counts
    its records against the decoded rows it reads."""
    out, report = baseline
    lines = [json.loads(line) for line in (out / "progress.jsonl").read_text().splitlines()
             if line.startswith("{")]  # fmt: skip
    steps = {line["step"] for line in lines}
    assert {"read, decode, deduplicate", "quarantine", "store"} <= steps, steps
    quarantine = [line for line in lines if line["step"] == "quarantine"]
    assert quarantine[-1]["finished"] and quarantine[-1]["done"] == quarantine[-1]["total"] > 0
    assert quarantine[-1]["records_total"] == report.totals["records"]
    assert 0 < quarantine[-1]["records"] <= report.totals["records"]


def test_end_to_end_matches_a_plain_python_run(baseline, dataset, tmp_path) -> None:
    out, report = baseline
    messages, envelopes = _store_rows(out)
    assert set(messages) == _expected_store(dataset)
    assert {e[1] for e in envelopes} == set(dataset.envelopes)
    # Per source: records, duplicates (first v1 source wins, v1 before v2), quarantined.
    owner: dict[bytes, str] = {}
    for name in ("ms1", "ms2", "pg", "dump"):
        for kind, value in dataset.records[name]:
            if kind == "v1":
                owner.setdefault(value, name)
    bridged_hashes = {_bridged_copy(e).message_hash for e in dataset.bridged}
    for name in ("rest", "sqlite"):
        for _, value in dataset.records[name]:
            if value not in bridged_hashes:
                owner.setdefault(value, name)
    by_source = {s.name: s for s in report.sources}
    for name, recs in dataset.records.items():
        s = by_source[name]
        bad = sum(1 for k, _ in recs if k == "bad")
        kept = Counter(owner.values())[name]
        assert (s.records, s.quarantined, s.messages, s.duplicates) == (
            len(recs),
            bad,
            kept,
            len(recs) - bad - kept,
        ), name
    assert report.totals["quarantined"] == 2 and report.quarantine["count"] == 2
    assert list(Path(report.quarantine["path"]).glob("part-*.json"))
    # Archives: byte-identical to the archive module's own one-call build.
    reference = tmp_path / "reference"
    _reference_archives(dataset, reference, dataset.envelopes, NOW)
    assert _archive_files(out) == _archive_files(reference)
    community_ids = {str(c.id) for c in dataset.communities}
    assert {c["community"] for c in report.communities} == community_ids
    for c in report.communities:
        assert c["undecryptable"] == 0 and c["late"] == 0 and c["archives_added"] >= 5
        assert c["magnet_uri"].startswith("magnet:?xt=urn:btih:")
    shards = {m["pubsub_topic"] for m in report.mapping}
    assert {"/waku/2/rs/16/128", "/waku/2/rs/16/129", DEFAULT_TOPIC, "/waku/2/rs/16/64"} == shards


def _postgres_store_rows(url: str) -> tuple[list[tuple], list[tuple]]:
    """The PostgreSQL store's rows as the SQLite store holds them (hex back to bytes, topics
    as UTF-8 bytes), in hash order."""
    with psycopg.connect(url) as conn:
        messages = conn.execute(
            "SELECT messageHash, pubsubTopic, contentTopic, payload, version, timestamp, meta "
            "FROM messages ORDER BY messageHash"
        ).fetchall()
        envelopes = conn.execute(
            "SELECT messageHash, envelope, dbKey FROM v1_envelopes ORDER BY messageHash"
        ).fetchall()

    def unhex(value: str | None) -> bytes | None:
        return None if value is None else bytes.fromhex(value)

    return (
        [(unhex(h), p.encode(), c.encode(), unhex(payload) or b"", v, t, unhex(meta))
         for h, p, c, payload, v, t, meta in messages],
        [(unhex(h), bytes(e), None if k is None else bytes(k)) for h, e, k in envelopes],
    )  # fmt: skip


def test_the_readable_step_indexes_every_channel_message(baseline, dataset) -> None:
    """Step 6: every community channel message is in the store's readable tables, once; the
    expected set is read from the envelopes here (decrypted, the ChatMessage parsed)."""
    from waku_legacy.history.index import HistoryIndex
    from waku_legacy.proto import application_metadata_pb2, chat_message_pb2

    out, report = baseline
    expected = set()
    for c in dataset.communities:
        channels = {chat_topic(c.id.channel_chat_id(ch)): ch for ch in c.channels}
        for raw in dataset.envelopes:
            env = Envelope.decode(raw)
            if env.topic not in channels:
                continue
            key = symmetric_key_for_chat(c.id.channel_chat_id(channels[env.topic]))
            app = application_metadata_pb2.ApplicationMetadataMessage.FromString(
                decode_payload(env.data, symmetric_key=key).payload
            )
            chat = chat_message_pb2.ChatMessage.FromString(app.payload)
            expected.add((str(c.id), channels[env.topic], chat.timestamp, chat.text))
    with HistoryIndex.open(f"sqlite:///{out}/store.sqlite3") as index:
        reader = index.reader()
        shown = [m for c in dataset.communities for m in reader.iter_messages(str(c.id))]
    got = [(m.community_id, m.channel_id, m.timestamp_ms, m.text) for m in shown]
    assert expected and sorted(got) == sorted(expected)
    # each names the archive window holding it (the migration archived every one)
    windows = [m.provenance.archive_window if m.provenance else None for m in shown]
    assert all(w is not None and w[0] <= m.provenance.whisper_timestamp < w[1]  # type: ignore[union-attr]
               for w, m in zip(windows, shown, strict=True))  # fmt: skip
    assert report.store["readable"]["messages"] == len(expected)


_HISTORY_TABLES = ("history_messages", "history_edits", "history_deletes", "history_reactions",
                   "history_pins", "history_authors", "history_communities", "history_channels",
                   "history_days", "history_banned", "history_images")  # fmt: skip


def _history_rows(path: Path) -> dict[str, list[tuple]]:
    """Every history table of the SQLite database at ``path``, sorted rows (the FTS table's
    text with its rowid)."""
    with sqlite3.connect(path) as db:
        tables = {t: sorted(db.execute(f"SELECT * FROM {t}").fetchall(), key=repr)
                  for t in _HISTORY_TABLES}  # fmt: skip
        tables["history_fts"] = sorted(db.execute("SELECT rowid, text FROM history_fts"))
    return tables


def test_the_readable_step_builds_what_index_from_store_builds(baseline, dataset, tmp_path) -> None:
    """The readable step folds the events the decrypting Spark tasks decoded (the duplicate
    copies of the overlapping sources left out): its tables are, row for row, those
    ``index_from_store`` builds reading the same store back, and its counts the same."""
    from waku_legacy.history.index import HistoryIndex
    from waku_legacy.history.sources import archive_windows, index_from_store

    out, report = baseline
    assert report.store["readable_from"] == "decrypting tasks"
    assert report.totals["duplicates"] > 0  # the copies the tasks' files still held
    store = tmp_path / "store.sqlite3"
    shutil.copy(out / "store.sqlite3", store)
    with sqlite3.connect(store) as db:
        for table in (*_HISTORY_TABLES, "history_fts"):
            db.execute(f"DROP TABLE {table}")
    communities = _config(dataset, out).communities
    windows = {str(c.id): archive_windows(out / "archives", c.id, "status-go")
               for c in communities}  # fmt: skip
    url = f"sqlite:///{store}"
    with HistoryIndex.open(url, create=True) as index:
        counts = index_from_store(url, communities, index, windows=windows)
    assert counts.to_json() == report.store["readable"]
    expected, got = _history_rows(store), _history_rows(out / "store.sqlite3")
    assert expected["history_messages"] and got == expected


def test_a_postgresql_store_holds_the_sqlite_stores_rows(
    spark, baseline, dataset, postgres_dsn, tmp_path
) -> None:
    """The PostgreSQL store, written by a Spark task per step-1 file (each leaving out the
    duplicate copies in its file: this dataset's sources overlap), holds exactly the rows
    the SQLite store got, and the archives, whose rows step 1 decrypted in this run (no
    driver writer to run beside), are the SQLite run's bytes; a rerun adds nothing."""
    out, report = baseline
    with fresh_database(postgres_dsn, "waku_legacy_migrate_store_") as url:
        config = _config(dataset, tmp_path, store=url)
        first = run_migration(config, spark=spark)
        assert first.store["inserted"] == report.store["inserted"] == first.store["total"]
        messages, envelopes = _store_rows(out)
        assert _postgres_store_rows(url) == (sorted(messages), sorted(envelopes))
        assert _archive_files(tmp_path) == _archive_files(out)
        assert [c["archivable"] for c in first.communities] == [
            c["archivable"] for c in report.communities
        ]
        # the readable step from the events step 1's tasks decoded: what the SQLite run shows
        assert first.store["readable_from"] == "decrypting tasks"
        assert first.store["readable"] == report.store["readable"]
        assert _shown(url, dataset) == _shown(f"sqlite:///{out}/store.sqlite3", dataset)
        again = run_migration(config, spark=spark)
        assert again.store["inserted"] == 0 and again.store["total"] == first.store["total"]
        assert _archive_files(tmp_path) == _archive_files(out)
        assert again.totals["archives_added"] == 0


def _shown(url: str, dataset: Dataset) -> list[Any]:
    """Every message the readable tables at ``url`` show, in the reader's order."""
    from waku_legacy.history.index import HistoryIndex

    with HistoryIndex.open(url) as index:
        reader = index.reader()
        return [m for c in dataset.communities for m in reader.iter_messages(str(c.id))]


def test_rerun_gives_identical_archives_and_store(spark, baseline, dataset, tmp_path) -> None:
    out, first = baseline
    copy = tmp_path / "again"
    shutil.copytree(out, copy)
    before_files, before_store = _archive_files(copy), _store_rows(copy)
    report = _run(spark, dataset, copy)
    assert _archive_files(copy) == before_files
    assert _store_rows(copy) == before_store
    assert report.store["inserted"] == 0
    assert all(c["archives_added"] == 0 and c["late"] == 0 for c in report.communities)
    assert sum(c["already_archived"] for c in report.communities) == sum(
        c["archivable"] for c in first.communities
    )


def test_a_new_week_appends_only_new_archives(spark, baseline, dataset, tmp_path) -> None:
    out, _ = baseline
    copy = tmp_path / "later"
    shutil.copytree(out, copy)
    before = _archive_files(copy)
    new = list(generate_envelopes(SPEC, dataset.communities, start=NOW + DAY, days=7, seed=5))
    # one envelope that a late mailserver only now reveals, inside an archived window
    late = list(generate_envelopes(SPEC, dataset.communities, start=SPEC.start + 10 * DAY,
                                   days=1, seed=9))[:1]  # fmt: skip
    ms3 = tmp_path / "ms3"
    write_leveldb_mailservers(iter(new + late), [ms3], keep_probability=1.0)
    sources = [*dataset.sources, {"kind": "mailserver-leveldb", "name": "ms3", "path": str(ms3)}]
    later_now = NOW + 9 * DAY
    report = _run(spark, dataset, copy, sources=sources, now=later_now)
    after = _archive_files(copy)
    for c in dataset.communities:
        data = f"archives/{c.id}/data"
        assert after[data][: len(before[data])] == before[data]  # earlier bytes never change
    added = sum(c["archives_added"] for c in report.communities)
    assert 1 <= added <= 4 and report.totals["late"] == 1
    late_rows = [w for w in report.weeks if w.late]
    assert len(late_rows) == 1 and late_rows[0].source == "ms3"
    messages, _ = _store_rows(copy)
    assert len(messages) == len(_expected_store(dataset)) + len(new) + 1
    reference = tmp_path / "reference"
    _reference_archives(dataset, reference, dataset.envelopes, NOW)
    _reference_archives(dataset, reference, dataset.envelopes + new + late, later_now)
    assert after == _archive_files(reference)


@pytest.mark.parametrize(
    ("step", "batch"),
    [
        ("store:batch:*", 40),
        ("archive:*:data:append:0:partial", 20_000),
        ("archive:*:index:rename", 20_000),
    ],
)
def test_crash_then_rerun_gives_the_uninterrupted_result(
    spark, baseline, dataset, tmp_path, step, batch
) -> None:
    out, _ = baseline
    target = tmp_path / "crashed"
    crash = CrashAt(step, occurrence=3)  # the store's 3rd batch, the 3rd window
    with pytest.raises(SimulatedCrash):
        _run(spark, dataset, target, fault=crash, store_batch_size=batch)
    assert crash.fired
    if step.startswith("store"):
        partial, _ = _store_rows(target)
        assert 0 < len(partial) < len(_store_rows(out)[0])
    report = _run(spark, dataset, target)
    assert _store_rows(target) == _store_rows(out)
    assert _archive_files(target) == _archive_files(out)
    assert report.totals["late"] == 0


def test_a_failing_source_is_one_clear_error(spark, dataset, tmp_path) -> None:
    from waku_legacy.migrate.pipeline import MigrationError

    dead = {"kind": "store-rest", "name": "dead", "url": "http://127.0.0.1:1", "retries": 0}
    with pytest.raises(MigrationError, match=r"reading and decoding the sources failed: .*conn"):
        _run(spark, dataset, tmp_path / "dead", sources=[dead])
    missing = {"kind": "mailserver-leveldb", "name": "gone", "path": str(tmp_path / "nope")}
    with pytest.raises(WakuLegacyError, match="cannot open LevelDB"):
        _run(spark, dataset, tmp_path / "gone", sources=[missing])


def test_the_bridge_writes_the_migrations_bytes_from_its_output_store(
    baseline, dataset, tmp_path
) -> None:
    """Issue 22: the bridge, archiving the migration's output store into empty folders, writes
    byte for byte the migration's archives, index and torrent (one function decides the
    metadata topic order, the message order and the windows), even with its config listing
    the channels in another order than their sorted topics."""
    from waku_legacy.bridge.archiver import build_from_store
    from waku_legacy.bridge.config import ArchiveConfig
    from waku_legacy.community_config import CommunityConfig

    out, _ = baseline
    bridge = tmp_path / "bridge"
    config = ArchiveConfig(str(bridge / "archives"), str(bridge / "torrents"))
    with open_store(f"sqlite:///{out}/store.sqlite3") as store:
        for c in dataset.communities:
            topic_of = {u: chat_topic(c.id.channel_chat_id(u)) for u in c.channels}
            channels = tuple(sorted(c.channels, key=topic_of.__getitem__, reverse=True))
            community = CommunityConfig(c.id, channels, c.shard)
            assert list(community.channel_topics()) != sorted(community.channel_topics())
            report, stats = build_from_store(
                store, community, config, now=NOW, clock_ms=NOW * 1000, key=None
            )
            assert report.archives_added >= 5 and stats.undecryptable == 0
            assert stats.from_envelopes == stats.read  # v1-era: the envelope hash, as migrated
    migrated, bridged = _archive_files(out), _archive_files(bridge)
    assert set(bridged) == set(migrated)
    for name, data in migrated.items():
        assert bridged[name] == data, name
