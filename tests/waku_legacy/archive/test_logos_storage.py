"""Issue 12: Logos Storage as a second archive back end (upload, CID link, member fetch).

The node is :mod:`tests.logos_storage_fake` on loopback (real sockets, the REST subset of
logos-storage-nim's ``/api/storage/v1``); no node binary is installable here.
"""

from __future__ import annotations

import hashlib
import json
import random
import urllib.error
import urllib.request
import uuid
from pathlib import Path

import pytest

from tests.logos_storage_fake import cid_of, parses_as_cid, running_fake
from waku_legacy.archive import WEEK_SECONDS, ArchiveMessage, build_community_archives
from waku_legacy.archive.build import finish_interrupted_build
from waku_legacy.archive.errors import MagnetMessageError
from waku_legacy.archive.layout import CommunityLayout
from waku_legacy.archive.logos_storage import (
    LogosStorageClient,
    LogosStorageError,
    decode_logos_index,
    fetch_by_cid,
    state_path,
)
from waku_legacy.archive.magnet import build_archive_link_message, verify_magnet_message
from waku_legacy.cli import main
from waku_legacy.community_config import parse_community, parse_logos_storage
from waku_legacy.crypto.keccak import keccak256
from waku_legacy.crypto.secp256k1 import private_key_from_bytes
from waku_legacy.errors import ConfigError, DecodeError
from waku_legacy.identity.topics import CommunityId
from waku_legacy.proto import status_archive_pb2, waku_message_pb2

KEY = private_key_from_bytes(bytes.fromhex("5a" * 32))
COMMUNITY = CommunityId(KEY.public_key.format(compressed=True))
TOPICS = [b"\x01\x02\x03\x04"]
T0 = 1_700_000_000
W = WEEK_SECONDS
TOPIC = "/waku/2/rs/16/200"


def make_messages(count: int, start: int, seed: int) -> list[ArchiveMessage]:
    rng = random.Random(seed)
    return [
        ArchiveMessage(
            timestamp=start + i * 3600 * 7,  # ~4 weeks for 100 messages
            hash=hashlib.sha256(f"{seed}-{i}".encode()).digest(),
            topic=TOPICS[0],
            payload=rng.randbytes(300),
            sig=b"\x04" + rng.randbytes(64),
        )
        for i in range(count)
    ]


# -- the fake speaks what the real node speaks -------------------------------------------


def _http(method: str, url: str, body: bytes | None = None) -> tuple[int, bytes]:
    request = urllib.request.Request(url, data=body, method=method)
    try:
        with urllib.request.urlopen(request, timeout=10) as answer:
            return answer.status, answer.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


def test_fake_node_refuses_what_the_real_one_refuses() -> None:
    with running_fake() as node:
        api = node.url + "/api/storage/v1"
        status, cid = _http("POST", api + "/data", b"hello archive")
        assert status == 200 and cid.decode() == cid_of(b"hello archive")
        assert parses_as_cid(cid.decode()) and cid.startswith(b"z")
        # content addressed: the same bytes, the same CID
        assert _http("POST", api + "/data", b"hello archive")[1] == cid
        assert _http("GET", api + f"/data/{cid.decode()}/network/stream") == (200, b"hello archive")
        assert _http("POST", api + "/data", b"")[0] == 500  # nothing to store
        unknown = cid_of(b"never uploaded")
        assert _http("GET", api + f"/data/{unknown}/network/stream")[0] == 404
        assert _http("GET", api + "/data/not-a-cid/network/stream")[0] == 400
        assert _http("PUT", api + "/data", b"x")[0] == 405
        assert _http("POST", api + f"/data/{cid.decode()}/network/stream", b"x")[0] == 405
        client = LogosStorageClient(node.url)
        with pytest.raises(LogosStorageError, match="0 bytes"):
            client.upload(b"")
        with pytest.raises(LogosStorageError, match="404"):
            client.download(unknown)
        with pytest.raises(DecodeError, match="not a CID"):
            client.download("../../etc/passwd")


def test_index_keys_are_keccak_of_the_marshalled_metadata_as_status_go_computes() -> None:
    """status-go: crypto.Keccak256Hash(proto.Marshal(LogosStorageWakuMessageArchiveIndexMetadata{
    Metadata: archive.Metadata, Cid: cid})).String(); checked with the generated protobuf."""
    from waku_legacy.archive.logos_storage import encode_logos_index, logos_index_entry

    cid = cid_of(b"an archive")
    entry = logos_index_entry(T0, T0 + W, tuple(TOPICS), cid)
    meta = status_archive_pb2.LogosStorageWakuMessageArchiveIndexMetadata(cid=cid)
    meta.metadata.MergeFrom(
        status_archive_pb2.WakuMessageArchiveMetadata(to=T0 + W, contentTopic=TOPICS)
    )
    setattr(meta.metadata, "from", T0)
    assert entry.metadata_bytes == meta.SerializeToString()
    assert entry.archive_id == "0x" + keccak256(meta.SerializeToString()).hex()
    index = status_archive_pb2.LogosStorageWakuMessageArchiveIndex()
    index.ParseFromString(encode_logos_index([entry]))
    assert index.archives[entry.archive_id].cid == cid
    assert decode_logos_index(encode_logos_index([entry])) == [entry]


# -- build, upload, publish the CID, fetch as a member ----------------------------------


def test_build_uploads_publishes_cid_and_member_fetch_gets_every_message_once(
    tmp_path: Path,
) -> None:
    archive_dir, torrent_dir = tmp_path / "archives", tmp_path / "torrents"
    first = make_messages(100, T0, 1)  # ~4 weeks
    with running_fake() as node:
        client = LogosStorageClient(node.url)

        def build(messages: list[ArchiveMessage], now: int, clock: int):  # type: ignore[no-untyped-def]
            return build_community_archives(
                archive_dir, torrent_dir, COMMUNITY, TOPICS, messages, now=now,
                community_key=KEY, pubsub_topic=TOPIC, clock_ms=clock, logos_storage=client,
            )  # fmt: skip

        now = T0 + 6 * W
        report = build(first, now, 1_000)
        windows = report.archives_added
        assert windows >= 4 and report.backend == "logos-storage"
        assert node.uploads == windows + 1  # every archive alone, then the index
        assert report.magnet_uri is None and report.info_hash is None  # no torrent at all
        assert not (torrent_dir / f"{COMMUNITY}.torrent").exists()
        cid = report.archive_link
        assert cid is not None and parses_as_cid(cid)

        # each upload is the bare WakuMessageArchive: no data file padding
        index = decode_logos_index(node.blobs[cid])
        assert len(index) == windows
        for entry in index:
            blob = node.blobs[entry.cid]
            assert len(blob) % 102400 != 0 and not blob.endswith(b"\0" * 64)
            status_archive_pb2.WakuMessageArchive().ParseFromString(blob)

        # the archive-link message carries the bare CID, on -memberUpdate first
        raw = (torrent_dir / f"{COMMUNITY}.magnet-message.pb").read_bytes()
        link = verify_magnet_message(raw, COMMUNITY, backend="logos-storage")
        assert link.magnet_uri == cid and link.clock == 1_000 and link.info_hash == ""
        message = waku_message_pb2.WakuMessage.FromString(raw)
        assert message.content_topic == COMMUNITY.universal_content_topic
        body = json.loads((torrent_dir / f"{COMMUNITY}.magnet-message.json").read_text())
        assert [m["chat"] for m in body["messages"]] == ["universal", "magnetlinks"]
        # a member on the torrent back end cannot read a CID as its link (status-go: it fails)
        with pytest.raises((MagnetMessageError, DecodeError)):
            verify_magnet_message(raw, COMMUNITY)

        fetched = fetch_by_cid(client, cid)
        hashes = [m.hash for _id, m in fetched.messages]
        assert sorted(hashes) == sorted(m.hash for m in first)  # every message, once
        assert len(set(hashes)) == len(hashes)

        # a rerun with nothing new uploads nothing, publishes the same CID
        uploads = node.uploads
        again = build(first, now, 2_000)
        assert node.uploads == uploads and again.archive_link == cid
        # a restart's reconcile neither builds a torrent nor rewrites the link message
        finish = finish_interrupted_build(
            archive_dir, torrent_dir, COMMUNITY, community_key=KEY, pubsub_topic=TOPIC,
            clock_ms=3_000, backend="logos-storage",
        )  # fmt: skip
        assert not finish.changed and not (torrent_dir / f"{COMMUNITY}.torrent").exists()

        # a later week: only its archive and the new index are uploaded
        later = make_messages(20, T0 + 7 * W, 2)
        grown = build(first + later, T0 + 10 * W, 4_000)
        assert node.uploads == uploads + grown.archives_added + 1
        state = json.loads(state_path(CommunityLayout.of(archive_dir, COMMUNITY)).read_text())
        assert state["index_cid"] == grown.archive_link != cid
        assert len(state["archives"]) == windows + grown.archives_added
        refetched = fetch_by_cid(client, grown.archive_link)
        assert sorted(m.hash for _i, m in refetched.messages) == sorted(
            m.hash for m in first + later
        )

        # waku-legacy fetch --cid: the member's view as JSONL
        out = tmp_path / "member.jsonl"
        code = main([
            "fetch", "--community", str(COMMUNITY), "--cid", grown.archive_link,
            "--logos-storage-url", node.url, "--output", str(out), "--json",
        ])  # fmt: skip
        assert code == 0
        rows = [json.loads(line) for line in out.read_text().splitlines()]
        assert len(rows) == len(first) + len(later)


def test_cid_links_only_for_the_logos_storage_back_end() -> None:
    cid = cid_of(b"index")
    with pytest.raises(DecodeError):  # the torrent back end signs magnet links only
        build_archive_link_message(KEY, cid, 5, pubsub_topic=TOPIC)
    with pytest.raises(ConfigError, match="not a magnet link"):
        build_archive_link_message(
            KEY, "magnet:?xt=urn:btih:" + "ab" * 20, 5, pubsub_topic=TOPIC,
            backend="logos-storage",
        )  # fmt: skip
    message = build_archive_link_message(KEY, cid, 5, pubsub_topic=TOPIC, backend="logos-storage")
    assert verify_magnet_message(message, COMMUNITY, backend="logos-storage").magnet_uri == cid


# -- config: one back end per community ---------------------------------------------------


def _community(**extra: object) -> dict:
    return {"id": str(COMMUNITY), "channels": [str(uuid.UUID(int=3))], "shard": 200, **extra}


def test_config_backend_per_community_and_both_refused(tmp_path: Path) -> None:
    assert parse_community(_community(), 1, tmp_path).backend == "torrent"
    chosen = parse_community(_community(backend="logos-storage"), 1, tmp_path)
    assert chosen.backend == "logos-storage"
    for both in (["torrent", "logos-storage"], "both"):
        with pytest.raises(ConfigError) as caught:
            parse_community(_community(backend=both), 1, tmp_path)
        text = str(caught.value)
        assert "both archive back ends" in text and "cancels its download and fails" in text
    with pytest.raises(ConfigError, match="backend"):
        parse_community(_community(backend="ipfs"), 1, tmp_path)
    with pytest.raises(ConfigError, match=r"no \[logos_storage\] table"):
        parse_logos_storage({}, (chosen,), "<t>")
    url = parse_logos_storage(
        {"logos_storage": {"url": "http://127.0.0.1:8080/"}}, (chosen,), "<t>"
    )
    assert url == "http://127.0.0.1:8080"
    with pytest.raises(ConfigError, match="url"):
        parse_logos_storage({"logos_storage": {"url": "ftp://x"}}, (), "<t>")
    with pytest.raises(ConfigError, match="token"):
        parse_logos_storage(
            {"logos_storage": {"url": "http://x:1", "token": "t"}}, (), "<t>"
        )


def test_bridge_config_reads_backend_and_node_url(tmp_path: Path) -> None:
    from waku_legacy.bridge.config import parse_config

    base = {
        "store": {"url": f"sqlite:///{tmp_path}/s.db"},
        "archive": {"archive_dir": "a", "torrent_dir": "t"},
        "community": [_community(backend="logos-storage")],
    }
    with pytest.raises(ConfigError, match="logos_storage"):
        parse_config(base, base_dir=tmp_path)
    config = parse_config(
        {**base, "logos_storage": {"url": "http://127.0.0.1:8080"}}, base_dir=tmp_path
    )
    assert config.logos_storage_url == "http://127.0.0.1:8080"
    assert config.communities[0].backend == "logos-storage"


# -- the bridge: a logos-storage community's run uploads and publishes the CID -----------


@pytest.mark.network
def _logos_bridge(tmp_path: Path, node_url: str, relay_url: str, republish: str, count: int):  # type: ignore[no-untyped-def]
    """A bridge config archiving ``count`` channel messages (in its SQLite store, 9 days
    before t0) of one community with backend "logos-storage": (config, rows, t0)."""
    from tests.bridge.support import bridge_config
    from tests.helpers import stored_channel_message
    from waku_legacy.store import open_store

    channel = str(uuid.UUID(int=3))
    (tmp_path / "c.key").write_text(KEY.secret.hex())
    url = f"sqlite:///{tmp_path}/store.sqlite3"
    t0 = 1_750_000_000
    rows = [
        stored_channel_message(
            COMMUNITY, channel, TOPIC, expiry=t0 - 9 * 86_400 + i, text=b"m%d" % i
        )
        for i in range(count)
    ]
    with open_store(url) as store:
        store.insert_messages(rows)
    config = bridge_config(
        tmp_path, url, relay={"url": relay_url},
        archive={"archive_dir": str(tmp_path / "a"), "torrent_dir": str(tmp_path / "t"),
                 "seed_listen": "127.0.0.1:0", "trackers": False,
                 "republish_interval": republish},
        community=[_community(key_file="c.key", backend="logos-storage",
                              archive_link_chats="universal")],
        logos_storage={"url": node_url},
    )  # fmt: skip
    return config, rows, t0


async def test_bridge_run_uploads_and_publishes_the_index_cid(tmp_path: Path) -> None:
    import asyncio
    import base64
    import time

    from tests.bridge.support import FakeNwaku
    from tests.waku_legacy.archive.test_magnet import independent_open
    from waku_legacy.bridge.clock import ManualClock
    from waku_legacy.bridge.service import BridgeService
    from waku_legacy.identity.topics import chat_topic

    chat = COMMUNITY.channel_chat_id(str(uuid.UUID(int=3)))
    nwaku = await FakeNwaku().start()
    with running_fake() as node:
        config, rows, t0 = _logos_bridge(tmp_path, node.url, nwaku.url, "1d", 5)
        try:
            service = BridgeService(config, clock=ManualClock(t0))
            await service.start()
            archiver = service.archive.archivers[str(COMMUNITY)]
            deadline = time.monotonic() + 20
            while not (archiver.last_run and archiver.last_run.published):
                assert time.monotonic() < deadline, archiver.last_run
                await asyncio.sleep(0.01)
            await service.stop()
        finally:
            await nwaku.stop()
        run = archiver.last_run.build
        assert run["backend"] == "logos-storage" and run["magnet_uri"] is None
        cid = run["archive_link"]
        assert node.uploads == run["archives_added"] + 1
        assert not list((tmp_path / "t").glob("*.torrent"))
        ((pubsub, body),) = list(nwaku.published)  # one chat: "universal"
        assert pubsub == TOPIC
        raw = waku_message_pb2.WakuMessage(
            payload=base64.b64decode(body["payload"]), content_topic=body["contentTopic"],
            version=body["version"], timestamp=body["timestamp"],
        ).SerializeToString()  # fmt: skip
        opened = independent_open(raw, COMMUNITY.universal_chat_id)
        assert opened["archive_link"] == cid and opened["type"] == 43
        fetched = fetch_by_cid(LogosStorageClient(node.url), cid)
        on_channel = [m for _id, m in fetched.messages if m.topic == chat_topic(chat)]
        assert len(on_channel) == len(rows)  # (plus -memberUpdate copies: archive_topics)


def test_decode_magnet_message_reads_a_cid_link(tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    cid = cid_of(b"an index")
    message = build_archive_link_message(KEY, cid, 7, pubsub_topic=TOPIC, backend="logos-storage")
    path = tmp_path / "link.pb"
    path.write_bytes(message.SerializeToString())
    assert main(["decode", "magnet-message", str(path), "--community", str(COMMUNITY)]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["backend"] == "logos-storage" and out["accepted_by_members"] is True
    assert out["archive_link"]["archive_link"] == cid


def test_a_damaged_state_file_is_a_typed_error(tmp_path: Path) -> None:
    """The CID state is the tool's own file, but a damaged one (truncated, deep, not an
    object) is ArchiveCorrupted naming it, never a traceback."""

    from waku_legacy.archive.errors import ArchiveCorrupted
    from waku_legacy.archive.logos_storage import _read_state

    state = tmp_path / ".state.json"
    for damage in ("{\"archives\": {", "[" * 100_000 + "]" * 100_000, "[]", '{"archives": 1}'):
        state.write_text(damage)
        with pytest.raises(ArchiveCorrupted, match="Logos Storage state"):
            _read_state(state)


# -- issue 22: the node is asked, not the state file; transient failures are retried -------


def _build_with(client: LogosStorageClient, tmp_path: Path, messages: list[ArchiveMessage]):  # type: ignore[no-untyped-def]
    return build_community_archives(
        tmp_path / "archives", tmp_path / "torrents", COMMUNITY, TOPICS, messages,
        now=T0 + 6 * W, community_key=KEY, pubsub_topic=TOPIC, clock_ms=1_000,
        logos_storage=client, archive_topics="channel",
    )  # fmt: skip


def test_a_rerun_asks_the_node_and_uploads_again_what_it_lost(tmp_path: Path) -> None:
    messages = make_messages(100, T0, 1)
    with running_fake() as node:
        client = LogosStorageClient(node.url)
        first = _build_with(client, tmp_path, messages)
        cid, windows = first.archive_link, first.archives_added
        uploads = node.uploads
        # the node holds everything: every CID the link depends on is asked for, none sent
        again = _build_with(client, tmp_path, messages)
        assert again.logos_storage is not None
        assert (again.logos_storage["checked"], again.logos_storage["missing"]) == (
            windows + 1, 0
        )
        assert node.uploads == uploads and node.exists_checks == windows + 1
        # the node lost every block (block TTL): the rerun uploads all of it again
        node.lose_everything()
        third = _build_with(client, tmp_path, messages)
        assert third.logos_storage is not None
        assert third.logos_storage["missing"] == windows + 1
        assert node.uploads == uploads + windows + 1
        assert third.archive_link == cid  # content addressed: the same link
        fetched = fetch_by_cid(LogosStorageClient(node.url), cid)
        assert sorted(m.hash for _id, m in fetched.messages) == sorted(m.hash for m in messages)


def test_transient_node_failures_are_retried_with_bounded_backoff(tmp_path: Path, caplog) -> None:  # type: ignore[no-untyped-def]
    messages = make_messages(100, T0, 1)
    with running_fake() as node:
        slept: list[float] = []
        client = LogosStorageClient(node.url, sleep=slept.append)
        node.drop_next, node.fail_next = 1, 2  # a dropped connection, then two 500s
        with caplog.at_level("WARNING", logger="waku_legacy.archive.logos_storage"):
            report = _build_with(client, tmp_path, messages)
        assert report.logos_storage is not None and report.logos_storage["retries"] == 3
        assert slept == [0.5, 1.0, 2.0] and client.retries == 3
        assert sum("retrying" in r.getMessage() for r in caplog.records) == 3
        assert node.blobs[report.archive_link]  # the index is on the node
        # a node that keeps failing: 4 attempts, then one clear error
        node.lose_everything()
        node.fail_next = 4
        with pytest.raises(LogosStorageError, match=r"answered 500.*after 4 attempts"):
            _build_with(client, tmp_path, messages)
        assert slept[3:] == [0.5, 1.0, 2.0]


async def test_bridge_reuploads_and_republishes_once_the_node_recovers(tmp_path: Path) -> None:
    import asyncio
    import time

    from tests.bridge.support import FakeNwaku
    from waku_legacy.bridge.archiver import LOGOS_STORAGE_RETRY
    from waku_legacy.bridge.clock import ManualClock
    from waku_legacy.bridge.service import BridgeService

    nwaku = await FakeNwaku().start()

    async def until(condition, what: str) -> None:  # type: ignore[no-untyped-def]
        deadline = time.monotonic() + 30
        while not condition():
            assert time.monotonic() < deadline, what
            await asyncio.sleep(0.01)

    with running_fake() as node:
        config, rows, t0 = _logos_bridge(tmp_path, node.url, nwaku.url, "6h", 5)
        clock = ManualClock(t0)
        service = BridgeService(config, clock=clock)
        try:
            await service.start()
            archiver = service.archive.archivers[str(COMMUNITY)]
            await until(lambda: archiver.last_run and archiver.last_run.published, "first run")
            await until(lambda: len(nwaku.published) >= 1, "first link")
            cid = archiver.magnet_uri()
            published = len(nwaku.published)
            # the node loses every block and answers 500 to everything for a while
            node.lose_everything()
            node.fail_next = 10**6
            clock.advance(6 * 3600)  # the republish is due: it fails (after its retries)
            await until(lambda: archiver.next_publish > clock.time(), "failed republish")
            assert len(nwaku.published) == published
            assert archiver.next_publish <= clock.time() + LOGOS_STORAGE_RETRY
            # the node recovers, empty: within one retry everything is uploaded again and
            # the link goes out
            node.fail_next = 0
            clock.advance(LOGOS_STORAGE_RETRY)
            await until(lambda: len(nwaku.published) > published, "republish after recovery")
            assert cid in node.blobs and node.uploads == 2 * len(node.blobs)  # all, twice
            check = archiver.report()["logosStorageCheck"]
            assert check["missing"] == check["checked"] == len(node.blobs)
            fetched = fetch_by_cid(LogosStorageClient(node.url), cid)
            assert len({m.hash for _id, m in fetched.messages}) >= len(rows)
        finally:
            await service.stop()
            await nwaku.stop()


async def test_admin_trigger_publishes_a_link_never_published(tmp_path: Path) -> None:
    """``POST /admin/v1/archive`` with nothing new to archive still publishes a link that
    never went out (the relay refused it at the first run)."""
    import asyncio
    import time

    import aiohttp

    from tests.bridge.support import ADMIN_TOKEN, FakeNwaku
    from waku_legacy.bridge.clock import ManualClock
    from waku_legacy.bridge.service import BridgeService

    nwaku = await FakeNwaku().start()
    nwaku.fail_relay = 10**6  # the relay refuses every publish at first
    with running_fake() as node:
        config, _rows, t0 = _logos_bridge(tmp_path, node.url, nwaku.url, "6h", 1)
        service = BridgeService(config, clock=ManualClock(t0))
        try:
            await service.start()
            archiver = service.archive.archivers[str(COMMUNITY)]
            deadline = time.monotonic() + 30
            while not (archiver.last_run and archiver.last_run.build
                       and archiver.next_publish > t0 and not archiver.lock.locked()):
                assert time.monotonic() < deadline  # the first run's publish has failed
                await asyncio.sleep(0.01)
            assert not archiver.last_run.published and not nwaku.published
            nwaku.fail_relay = 0
            headers = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
            base = f"http://127.0.0.1:{service.rest_port}"
            async with aiohttp.ClientSession() as http, http.post(
                base + "/admin/v1/archive", headers=headers
            ) as response:
                assert response.status == 200, await response.text()
            assert archiver.last_run.build["archives_added"] == 0
            assert archiver.last_run.published
            assert len(nwaku.published) == 1  # one chat: "universal"
            assert archiver.last_published["magnet_uri"] == archiver.magnet_uri()
        finally:
            await service.stop()
            await nwaku.stop()
