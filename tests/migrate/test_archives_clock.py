"""Issue 12, clock rules in the migration (``export``): the archive-link message is signed
with a clock above the community's description field 9 and above any earlier archive-link
message in the sources; the report says which clock and why; reruns are byte-identical."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.migrate.test_pipeline import _archive_files
from waku_legacy.archive.magnet import build_archive_link_message, verify_magnet_message
from waku_legacy.cli import main
from waku_legacy.crypto.key_file import write_node_key
from waku_legacy.crypto.payload import encode_payload
from waku_legacy.crypto.secp256k1 import private_key_from_bytes
from waku_legacy.identity.message_hash import message_hash
from waku_legacy.identity.topics import content_topic_of_chat, symmetric_key_for_chat
from waku_legacy.migrate.sample import (
    SampleSpec,
    description_message,
    generate_descriptions,
    generate_envelopes,
    make_communities,
    write_leveldb_mailservers,
)
from waku_legacy.proto import waku_message_pb2
from waku_legacy.store import StoredMessage, open_store

pytestmark = [pytest.mark.spark]

SPEC = SampleSpec(communities=1, channels=2, days=10, messages_per_channel_day=1.0, seed=12)
NOW = SPEC.start + (SPEC.days + 1) * 86_400
FIELD9 = NOW * 1000 + 3_600_000  # the control node's last link: an hour after the run clock
OLD_LINK = "magnet:?xt=urn:btih:" + "ab" * 20 + "&dn=earlier"


@pytest.fixture(scope="module")
def legacy(tmp_path_factory) -> dict:
    out = tmp_path_factory.mktemp("legacy")
    (community,) = make_communities(SPEC)
    mailserver = out / "mailserver-1"
    write_leveldb_mailservers(generate_envelopes(SPEC, [community]), [mailserver], seed=1)
    write_leveldb_mailservers(
        generate_descriptions(SPEC, [community]), [mailserver], keep_probability=1.0
    )
    key_file = out / "community.key"
    write_node_key(key_file, private_key_from_bytes(community.secret))
    return {"community": community, "mailserver": mailserver, "key_file": key_file}


def _stored(message: waku_message_pb2.WakuMessage, pubsub: str) -> StoredMessage:
    return StoredMessage(
        message_hash(pubsub, message), pubsub, message.content_topic, message.payload,
        message.version, message.timestamp, bytes(message.meta) or None,
    )  # fmt: skip


def _v2_store(path: Path, legacy: dict, messages: list) -> Path:
    """A v2 store (a ``store-sqlite`` source) holding ``messages``."""
    pubsub = f"/waku/2/rs/16/{legacy['community'].shard}"
    with open_store(f"sqlite:///{path}") as store:
        store.insert_messages([_stored(m, pubsub) for m in messages])
    return path


def _description(legacy: dict, field9: int) -> waku_message_pb2.WakuMessage:
    community = legacy["community"]
    data = encode_payload(
        description_message(community, community.channels, NOW * 1000 - 5, field9),
        symmetric_key=symmetric_key_for_chat(community.id.chat_id),
        sign_with=private_key_from_bytes(b"\x01" * 32),
    )
    return waku_message_pb2.WakuMessage(
        payload=data, content_topic=content_topic_of_chat(community.id.chat_id), version=1,
        timestamp=(NOW - 60) * 10**9,
    )  # fmt: skip


def migration_data(legacy: dict, store: Path, archive_dir: str, torrent_dir: str) -> dict:
    """The ``migrate`` config of the legacy mailserver's community, its key file given."""
    community = legacy["community"]
    return {
        "spark": {"master": "local[2]"},
        "source": [{"kind": "mailserver-leveldb", "name": "ms", "path": str(legacy["mailserver"])}],
        "community": [{"id": str(community.id), "channels": list(community.channels),
                       "shard": community.shard, "key_file": str(legacy["key_file"])}],
        "pipeline": {"now": NOW},
        "output": {"store": f"sqlite:{store}", "archive_dir": archive_dir,
                   "torrent_dir": torrent_dir, "work_dir": "work", "report": "report.json"},
    }  # fmt: skip


def _export(legacy: dict, out: Path, *extra_sources: Path, as_json: bool = True) -> dict:
    community = legacy["community"]
    args = ["export", "--community", str(community.id), "--shard", str(community.shard),
            "--key-file", str(legacy["key_file"]), "--now", str(NOW), "--out", str(out),
            "--quiet", "--source", f"leveldb:{legacy['mailserver']}"]  # fmt: skip
    if as_json:
        args.append("--json")
    for channel in community.channels:
        args += ["--channel", channel]
    for source in extra_sources:
        args += ["--source", f"sqlite:{source}"]
    assert main(args) == 0
    return json.loads((out / "report.json").read_text())["communities"][0]


def _link_files(result: dict) -> dict[str, bytes]:
    return {p: Path(p).read_bytes() for p in result["magnet_message_paths"]}


def _clock(result: dict, legacy: dict) -> int:
    pb = next(p for p in result["magnet_message_paths"] if p.endswith(".pb"))
    return verify_magnet_message(Path(pb).read_bytes(), legacy["community"].id).clock


def test_export_signs_above_field_9_and_reruns_identically(legacy, tmp_path, capsys) -> None:
    evidence = _v2_store(tmp_path / "v2.sqlite3", legacy, [_description(legacy, FIELD9)])
    out = tmp_path / "export"
    first = _export(legacy, out, evidence)
    assert _clock(first, legacy) == FIELD9 + 1 > NOW * 1000
    report = first["archive_link_clock"]
    assert report["clock"] == FIELD9 + 1 and report["base"] == NOW * 1000
    assert report["reason"] == f"description field 9 = {FIELD9} (+1)"
    assert report["description_field9"] == FIELD9
    assert report["descriptions_read"] >= 3  # the sample's own two, plus ours
    files, links = _archive_files(out), _link_files(first)

    # Rerun, nothing new: the same bytes.
    again = _export(legacy, out, evidence)
    # issue 22: the rerun reads the message files it wrote (the same link: the same clock)
    assert again["archive_link_clock"]["clock"] == report["clock"]
    assert again["archive_link_clock"]["reason"] == (
        f"same link already published with clock {FIELD9 + 1}"
    )
    assert _archive_files(out) == files and _link_files(again) == links

    # Rerun after our message reached the store: it is the same link, so the same clock.
    pb = next(p for p in first["magnet_message_paths"] if p.endswith(".pb"))
    ours = waku_message_pb2.WakuMessage.FromString(Path(pb).read_bytes())
    with_ours = _v2_store(tmp_path / "v2-ours.sqlite3", legacy, [_description(legacy, FIELD9),
                                                                   ours])  # fmt: skip
    third = _export(legacy, out, with_ours)
    assert third["archive_link_clock"]["clock"] == FIELD9 + 1
    assert _link_files(third) == links and _archive_files(out) == files


def test_a_previous_link_in_the_sources_pushes_the_clock_above_it(legacy, tmp_path, capsys) -> None:
    community = legacy["community"]
    previous = FIELD9 + 5_000
    earlier = build_archive_link_message(
        private_key_from_bytes(community.secret), OLD_LINK, previous,
        pubsub_topic=f"/waku/2/rs/16/{community.shard}", chat="magnetlinks",
    )  # fmt: skip
    evidence = _v2_store(tmp_path / "v2.sqlite3", legacy, [_description(legacy, FIELD9), earlier])
    capsys.readouterr()
    result = _export(legacy, tmp_path / "export", evidence, as_json=False)
    assert _clock(result, legacy) == previous + 1
    # the text report says it too
    out = capsys.readouterr().out
    assert f"archive-link clock: {previous + 1} (previous link clock {previous} (+1))" in out
    report = result["archive_link_clock"]
    assert report["reason"] == f"previous link clock {previous} (+1)"
    assert (report["previous_link_clock"], report["previous_link"]) == (previous, OLD_LINK)


def test_migrate_reads_the_output_store_for_earlier_links(spark, legacy, tmp_path) -> None:
    """The v2 store the migration writes may already hold links (an earlier run's, the
    bridge's): the clock goes above them too."""
    from waku_legacy.migrate.config import parse_config
    from waku_legacy.migrate.pipeline import run_migration

    community = legacy["community"]
    previous = FIELD9 + 7_000
    earlier = build_archive_link_message(
        private_key_from_bytes(community.secret), OLD_LINK, previous,
        pubsub_topic=f"/waku/2/rs/16/{community.shard}",
    )  # fmt: skip
    store = _v2_store(tmp_path / "store.sqlite3", legacy, [earlier])
    data = migration_data(legacy, store, "a", "t")
    report = run_migration(parse_config(data, base_dir=tmp_path), spark=spark)
    (result,) = report.communities
    assert result["archive_link_clock"]["clock"] == previous + 1
    assert result["archive_link_clock"]["reason"] == f"previous link clock {previous} (+1)"
    assert _clock(result, legacy) == previous + 1
