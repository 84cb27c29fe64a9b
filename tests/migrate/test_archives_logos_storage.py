"""Issue 12, Logos Storage round trip on loopback: the migration (local Spark) archives a
community with ``backend = "logos-storage"``, uploads each archive and the index to the node,
signs the index CID as the archive link; a member fetching by that CID gets every channel
message of every window once; a rerun uploads nothing new.

The node is :mod:`tests.logos_storage_fake` (real sockets, logos-storage-nim's REST subset).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.logos_storage_fake import parses_as_cid, running_fake
from tests.migrate.test_pipeline import output_under
from waku_legacy.archive.logos_storage import LogosStorageClient, fetch_by_cid
from waku_legacy.archive.magnet import verify_magnet_message
from waku_legacy.cli import main
from waku_legacy.identity.topics import chat_topic
from waku_legacy.mailserver_compat.storage.dump import DumpWriter
from waku_legacy.mailserver_compat.wire.envelope import Envelope
from waku_legacy.migrate.config import parse_config
from waku_legacy.migrate.pipeline import run_migration
from waku_legacy.migrate.sample import SampleSpec, generate_envelopes, make_communities

pytestmark = [pytest.mark.spark]

DAY = 86_400
SPEC = SampleSpec(communities=1, channels=2, members=3, days=22, messages_per_channel_day=1.5,
                  public_per_day=0.3, start=1_640_995_200, seed=5)  # fmt: skip
NOW = SPEC.start + 25 * DAY


def test_migration_uploads_to_logos_storage_and_a_member_fetches_by_cid(
    spark, tmp_path: Path
) -> None:
    (community,) = make_communities(SPEC)
    envelopes = list(generate_envelopes(SPEC, [community]))
    dump = tmp_path / "legacy.dump"
    with DumpWriter(dump) as writer:
        for envelope in envelopes:
            writer.append(envelope)
    channel_topics = {chat_topic(community.id.channel_chat_id(c)) for c in community.channels}
    expected = {
        Envelope.decode(raw).hash() for raw in envelopes
        if Envelope.decode(raw).topic in channel_topics
    }  # fmt: skip
    assert len(expected) > 20
    key_file = tmp_path / "community.key"
    key_file.write_text(community.secret.hex())
    out = tmp_path / "out"

    with running_fake() as node:
        config = parse_config(
            {
                "spark": {"master": "local[2]"},
                "source": [{"kind": "envelope-dump", "name": "dump", "path": str(dump)}],
                "community": [
                    {
                        "id": str(community.id),
                        "channels": list(community.channels),
                        "shard": community.shard,
                        "key_file": str(key_file),
                        "backend": "logos-storage",
                    }
                ],
                "logos_storage": {"url": node.url},
                "pipeline": {"now": NOW},
                "output": output_under(out),
            },
            base_dir=tmp_path,
        )
        report = run_migration(config, spark=spark)
        (result,) = report.communities
        assert result["backend"] == "logos-storage" and result["magnet_uri"] is None
        windows = result["archives_added"]
        assert windows >= 3
        assert node.uploads == windows + 1  # each archive alone, then the index
        cid = result["archive_link"]
        assert parses_as_cid(cid) and result["logos_storage"]["index_cid"] == cid
        assert not list((out / "torrents").glob("*.torrent"))  # one kind of link only

        # the archive-link message the migration wrote carries the CID, signed
        raw = (out / "torrents" / f"{community.id}.magnet-message.pb").read_bytes()
        link = verify_magnet_message(raw, community.id, backend="logos-storage")
        assert link.magnet_uri == cid

        # a member, by that CID: every channel message of every window, once
        fetched = fetch_by_cid(LogosStorageClient(node.url), cid)
        assert len(fetched.archives) == windows
        pairs = [(m.hash, m.topic) for _id, m in fetched.messages]
        assert len(pairs) == len(set(pairs))  # none twice under one topic
        assert sorted(h for h, t in pairs if t in channel_topics) == sorted(expected)
        # other copies only on the community's -memberUpdate topic (archive_topics)
        universal = chat_topic(community.id.universal_chat_id)
        assert {t for _h, t in pairs} - channel_topics <= {universal}

        # the CLI's member view agrees
        jsonl = tmp_path / "member.jsonl"
        assert main([
            "fetch", "--community", str(community.id), "--cid", cid,
            "--logos-storage-url", node.url, "--output", str(jsonl),
        ]) == 0  # fmt: skip
        assert len(jsonl.read_text().splitlines()) == len(pairs)

        # a rerun uploads nothing new and publishes the same CID
        uploads = node.uploads
        again = run_migration(config, spark=spark)
        (second,) = again.communities
        assert node.uploads == uploads
        assert second["archives_added"] == 0 and second["archive_link"] == cid
        state = json.loads(
            (out / "archives" / f".{community.id}.logos-storage.json").read_text()
        )
        assert state["index_cid"] == cid and len(state["archives"]) == windows

        # issue 22: the node lost every block (block TTL): a rerun asks it for every CID the
        # link depends on and uploads them again (it used to trust the state file: 0 requests)
        node.lose_everything()
        requests = node.requests
        third = run_migration(config, spark=spark)
        (result3,) = third.communities
        assert result3["logos_storage"]["missing"] == windows + 1
        assert node.uploads == uploads + windows + 1 and node.requests > requests
        assert result3["archive_link"] == cid
        again_fetched = fetch_by_cid(LogosStorageClient(node.url), cid)
        assert len(again_fetched.messages) == len(pairs)
