"""Issue 22: the archive-link clock never goes down across tools and reruns.

One community's files, in one folder, go through: the migration (as ``demo`` runs it) ->
the bridge's republish at its (far later) wall clock -> a rerun of that migration -> an
``export`` into the same folder -> ``audit --repair`` of a message a late mailserver reveals.
Every step reads the link message files the one before wrote (next to the torrent); a step
whose own clock is lower keeps the newer message, byte for byte; a new link goes above.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from tests.bridge.support import FakeNwaku, bridge_config
from tests.helpers import wait_until
from tests.migrate.test_archives_clock import NOW, SPEC, legacy, migration_data  # noqa: F401 (fixture)
from waku_legacy.archive.magnet import verify_magnet_message
from waku_legacy.bridge.clock import ManualClock
from waku_legacy.bridge.service import BridgeService
from waku_legacy.cli import main
from waku_legacy.mailserver_compat.storage.dump import DumpWriter
from waku_legacy.migrate.config import parse_config
from waku_legacy.migrate.pipeline import run_migration
from waku_legacy.migrate.sample import generate_envelopes

pytestmark = [pytest.mark.spark, pytest.mark.network, pytest.mark.torrent]

WALL = int(time.time()) + 30 * 86_400  # the bridge's clock: a month ahead of this machine's


def _files(out: Path, cid: str) -> tuple[bytes, bytes]:
    torrents = out / "torrents"
    return (
        (torrents / f"{cid}.magnet-message.pb").read_bytes(),
        (torrents / f"{cid}.magnet-message.json").read_bytes(),
    )


def _clock(out: Path, legacy: dict) -> tuple[int, str]:  # noqa: F811
    cid = legacy["community"].id
    link = verify_magnet_message(_files(out, str(cid))[0], cid)
    return link.clock, link.magnet_uri


def _migrate(spark, legacy: dict, out: Path) -> dict:  # noqa: F811
    data = migration_data(legacy, out / "store.sqlite3", "archives", "torrents")
    (result,) = run_migration(parse_config(data, base_dir=out), spark=spark).communities
    return result


async def _serve(legacy: dict, out: Path) -> dict:  # noqa: F811
    """The bridge on the migration's output at WALL: it re-signs and publishes the link."""
    community = legacy["community"]
    nwaku = await FakeNwaku(store_relayed=False).start()
    config = bridge_config(
        out, f"sqlite:///{out / 'store.sqlite3'}", relay={"url": nwaku.url},
        archive={"archive_dir": str(out / "archives"), "torrent_dir": str(out / "torrents"),
                 "seed_listen": "127.0.0.1:0", "trackers": False, "republish_interval": "1d"},
        community=[{"id": str(community.id), "channels": list(community.channels),
                    "shard": community.shard, "key_file": str(legacy["key_file"])}],
    )  # fmt: skip
    service = BridgeService(config, clock=ManualClock(WALL))
    try:
        await service.start()
        assert service.archive is not None
        archiver = service.archive.archivers[str(community.id)]
        await wait_until(lambda: archiver.last_published, what="the link republished")
        published = dict(archiver.last_published or {})
        await service.stop()
    finally:
        await nwaku.stop()
    assert nwaku.published
    return published


async def test_link_clocks_never_decrease_across_tools_and_reruns(
    spark, legacy, tmp_path, capsys  # noqa: F811
) -> None:
    community = legacy["community"]
    cid = str(community.id)
    out = tmp_path / "demo"
    out.mkdir()
    # 1. the migration (demo): the run clock, or above the sample's description field 9
    _migrate(spark, legacy, out)
    first, link = _clock(out, legacy)
    assert first >= NOW * 1000
    # 2. serve: a republish at the bridge's wall clock, recorded in the message files
    published = await _serve(legacy, out)
    second, same = _clock(out, legacy)
    assert published["clock"] == second == WALL * 1000 > first and same == link
    served = _files(out, cid)
    # 3. the printed migrate rerun: its run clock is below: it keeps the bridge's message
    result = _migrate(spark, legacy, out)
    assert _clock(out, legacy) == (second, link) and _files(out, cid) == served
    reason = result["archive_link_clock"]["reason"]
    assert reason == f"same link already published with clock {second}"
    # 4. export into the same folder (no store given): the files still say it
    args = ["export", "--community", cid, "--shard", str(community.shard), "--key-file",
            str(legacy["key_file"]), "--now", str(NOW), "--out", str(out), "--quiet", "--json",
            "--source", f"leveldb:{legacy['mailserver']}",
            *[a for c in community.channels for a in ("--channel", c)]]  # fmt: skip
    assert main(args) == 0
    capsys.readouterr()
    assert _clock(out, legacy) == (second, link) and _files(out, cid) == served
    # 5. audit --repair of a message a late mailserver reveals: a new link, above the rest
    late = list(generate_envelopes(SPEC, [community], start=SPEC.start + 2 * 86_400, days=1,
                                   seed=9))[:3]  # fmt: skip
    with DumpWriter(tmp_path / "late.dump") as writer:
        for raw in late:
            writer.append(raw)
    args = ["audit", "--community", cid, "--archive-dir", str(out / "archives"),
            "--source", f"leveldb:{legacy['mailserver']}", "--source",
            f"dump:{tmp_path / 'late.dump'}", "--shard", str(community.shard), "--quiet",
            "--json", "--repair", "--key-file", str(legacy["key_file"]),
            "--torrent-dir", str(out / "torrents")]  # fmt: skip
    assert main(args) == 0
    document = json.loads(capsys.readouterr().out)
    assert document["complete"]
    fifth, new_link = _clock(out, legacy)
    assert new_link != link and fifth == second + 1  # the wall clock here is below WALL
