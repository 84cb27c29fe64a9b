"""``waku-legacy members preview`` (issue 23) over real files: a sample community's signed v1
chat messages archived with the project's builder (``archive_topics = "both"``, link message
files next to the torrent), its descriptions in an envelope dump (the sample's, without
members, and a newer one written here by hand that keeps all but two of the authors, bans one
of those two), then the command as an operator runs it, from the folder and by torrent.

Expected figures come from the authors of the envelopes (each message's ApplicationMetadata
signer, recovered here with coincurve and pycryptodome's keccak) and status-go's rules: with
"both" every message is archived twice, on its channel topic and on ``-memberUpdate``; a 2024
client imports a member's channel copy and skips the second as a duplicate id; a current one
has no filter for the channel copy and imports the relabelled one; a departed or banned
author's first copy is refused (``departed``/``banned``), the second is no_filter (current)
or a duplicate id (2024). Counted by message (issue 34), each message has its best copy's
fate: every member's message imported, the departed and banned authors' refused, by either
generation; those copy counts are the copies'.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import coincurve
import pytest

from tests.helpers import reference_keccak256
from tests.pb_wire import field_bytes, field_varint, fields
from waku_legacy.archive.build import build_community_archives
from waku_legacy.cli import main
from waku_legacy.crypto.payload import decode_payload, encode_payload
from waku_legacy.identity.topics import chat_topic, symmetric_key_for_chat
from waku_legacy.mailserver_compat.storage.dump import DumpWriter
from waku_legacy.mailserver_compat.wire.convert import archive_message
from waku_legacy.mailserver_compat.wire.envelope import Envelope
from waku_legacy.mailserver_compat.wire.pow import seal
from waku_legacy.migrate.sample import (
    SampleSpec,
    generate_descriptions,
    generate_envelopes,
    make_communities,
)

SPEC = SampleSpec(communities=1, channels=2, members=5, days=20, messages_per_channel_day=2.0)
COMMUNITY = make_communities(SPEC)[0]
CID = str(COMMUNITY.id)
OWNER = coincurve.PrivateKey(COMMUNITY.secret)
WEEK = 7 * 86_400
LINK_CLOCK = 1_900_000_000_000


def _first(data: bytes, number: int) -> bytes:
    return next(v for n, v in fields(data) if n == number)


def _author(application: bytes) -> str:
    body, signature = _first(application, 2), _first(application, 1)
    key = coincurve.PublicKey.from_signature_and_message(
        signature, reference_keccak256(body), hasher=None
    )
    return "0x" + key.format(compressed=False).hex()


def _entry(name: str, value: bytes) -> bytes:
    return field_bytes(1, name) + field_bytes(2, value)


def _description(members: list[str], banned: str) -> bytes:
    """A signed ``CommunityDescription`` (communities.proto field numbers) with ``members`` in
    the community and in both channels, ``banned`` in ``banned_members``; clock above the
    sample's own descriptions."""
    chat = b"".join(field_bytes(1, _entry(m, b"")) for m in members)
    body = (
        field_varint(1, 1_800_000_000_000)
        + b"".join(field_bytes(2, _entry(m, b"")) for m in members)
        + b"".join(field_bytes(6, _entry(c, chat + field_varint(5, i)))
                   for i, c in enumerate(COMMUNITY.channels))
        + field_bytes(19, _entry(banned, b""))
    )  # fmt: skip
    signature = OWNER.sign_recoverable(reference_keccak256(body), hasher=None)
    return field_bytes(1, signature) + field_bytes(2, body) + field_varint(3, 25)


def _messages_and_topics() -> tuple[list, list[bytes]]:
    """The sample's channel messages as archived (decrypted, seconds), and the channel topics."""
    channels = {chat_topic(COMMUNITY.id.channel_chat_id(c)): c for c in COMMUNITY.channels}
    messages = []
    for raw in generate_envelopes(SPEC, [COMMUNITY]):
        envelope = Envelope.decode(raw)
        if envelope.topic not in channels:
            continue  # the sample's public chats
        chat = COMMUNITY.id.channel_chat_id(channels[envelope.topic])
        decoded = decode_payload(envelope.data, symmetric_key=symmetric_key_for_chat(chat))
        messages.append(archive_message(
            message_hash=reference_keccak256(raw), topic=envelope.topic,
            timestamp=envelope.expiry - envelope.ttl, decoded=decoded,
        ))  # fmt: skip
    return messages, sorted(channels)


@pytest.fixture(scope="module")
def published(tmp_path_factory: pytest.TempPathFactory) -> dict:
    tmp = tmp_path_factory.mktemp("members")
    messages, topics = _messages_and_topics()
    raws = list(generate_envelopes(SPEC, [COMMUNITY]))
    authors = Counter(_author(bytes(m.payload)) for m in messages)
    ordered = sorted(authors)
    gone, banned, kept = ordered[0], ordered[1], ordered[2:]
    description = encode_payload(
        _description(kept, banned), sign_with=OWNER,
        symmetric_key=symmetric_key_for_chat(COMMUNITY.id.chat_id),
    )  # fmt: skip
    sent = SPEC.start + SPEC.days * 86_400
    newest = seal(sent + 10, 10, chat_topic(COMMUNITY.id.chat_id), description, 0.002)
    dump = tmp / "sources.dump"
    with DumpWriter(dump) as writer:
        for raw in [*raws, *generate_descriptions(SPEC, [COMMUNITY]), newest.encode()]:
            writer.append(raw)
    report = build_community_archives(
        tmp / "archives", tmp / "torrents", CID, topics, messages,
        now=SPEC.start + 4 * WEEK, community_key=OWNER, clock_ms=LINK_CLOCK, fsync=False,
        archive_topics="both",
    )  # fmt: skip
    return {"tmp": tmp, "dump": dump, "authors": authors, "gone": gone, "banned": banned,
            "report": report, "total": len(messages), "description": description,
            "sent": sent + 10}  # fmt: skip


def _expected(p: dict) -> dict[str, dict[str, int]]:
    """By message: the same for both generations (each imports one copy of a member's)."""
    gone, banned = p["authors"][p["gone"]], p["authors"][p["banned"]]
    members = p["total"] - gone - banned
    refused = {"departed": gone, "banned": banned}
    return {"2024": {"imported": members, **refused}, "current": {"imported": members, **refused}}


def _expected_copies(p: dict) -> dict[str, dict[str, int]]:
    """By copy: the second copy of each message is a duplicate id (2024) or unheard."""
    messages = _expected(p)
    return {
        "2024": {**messages["2024"], "duplicate": p["total"]},
        "current": {**messages["current"], "no_filter": p["total"]},
    }


def _check(document: dict, p: dict) -> None:
    assert document["version"] == 2 and document["community"] == CID
    assert document["warnings"] == []
    assert document["archived_messages"] == p["total"]
    assert document["copies_archived"] == 2 * p["total"]
    assert document["archive_topics"] == "both"
    copies = _expected_copies(p)
    for generation, want in _expected(p).items():
        got = document["generations"][generation]
        assert got["link_acted_on"] is True, got["link"]
        assert got["link"]["clock"] == LINK_CLOCK
        assert got["imported"] == want["imported"]
        skipped = {reason: n for reason, n in got["skipped"].items() if n}
        assert skipped == {k: v for k, v in want.items() if k != "imported"}
        assert got["copies_imported"] == copies[generation]["imported"]
        skipped = {reason: n for reason, n in got["copies_skipped"].items() if n}
        assert skipped == {k: v for k, v in copies[generation].items() if k != "imported"}
        lost = {a["author"]: a["messages"] for a in got["lost_authors"]}
        assert lost == {p["gone"]: p["authors"][p["gone"]], p["banned"]: p["authors"][p["banned"]]}
        weeks = got["weeks"]
        assert len(weeks) == 3 and [w["start"] for w in weeks] == sorted(w["start"] for w in weeks)
        assert sum(w["imported"] for w in weeks) == want["imported"]


def test_preview_of_an_archive_folder(published: dict, capsys: pytest.CaptureFixture[str]) -> None:
    p = published
    argv = ["members", "preview", "--community", CID, "--archive-dir", str(p["tmp"] / "archives"),
            "--source", f"dump:{p['dump']}", "--quiet"]  # fmt: skip
    html = p["tmp"] / "preview.html"
    assert main([*argv, "--json", "--html", str(html)]) == 0
    document = json.loads(capsys.readouterr().out)
    _check(document, p)
    assert document["links_found"] == 2  # the JSON file holds both chats' messages
    page = html.read_text()
    assert "<svg" in page and "http://" not in page.replace("http://www.w3.org/2000/svg", "")
    assert p["gone"] in page and "not acted on" not in page
    assert main(argv) == 0  # the table
    table = capsys.readouterr().out
    assert "2024 client: link acted on" in table and "current client: link acted on" in table
    gone = p["authors"][p["gone"]]
    assert f"  {'departed':<16}{gone:>10}{gone:>10}" in table
    assert (
        f"({p['total']} archived messages in {2 * p['total']} copies, archive topics both" in table
    )


def test_without_a_description_it_says_where_to_find_one(
    published: dict, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["members", "preview", "--community", CID, "--archive-dir",
            str(published["tmp"] / "archives"), "--quiet"]  # fmt: skip
    assert main(argv) == 2
    assert "needs --source or --store" in capsys.readouterr().err
    # a source without the community's chat: the one-line error says how to supply one
    empty = published["tmp"] / "no-description.dump"
    with DumpWriter(empty) as writer:
        writer.append(next(iter(generate_envelopes(SPEC, [COMMUNITY]))))
    assert main([*argv, "--source", f"dump:{empty}"]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1, err
    assert f"no CommunityDescription signed by {CID} in --source dump:{empty}" in err
    assert "give a --store that holds it, e.g. a v2 store node's REST URL" in err


@pytest.mark.network
def test_the_description_from_a_store_nodes_rest_url(
    published: dict, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--store http://…``: a v2 store node's REST API, as that error suggests."""
    from tests.waku_legacy.store.test_rest_client import NwakuRestServer
    from waku_legacy.identity.message_hash import message_hash
    from waku_legacy.identity.topics import content_topic_of_chat
    from waku_legacy.proto import waku_message_pb2
    from waku_legacy.store import StoredMessage

    p, pubsub = published, "/waku/2/rs/16/128"
    message = waku_message_pb2.WakuMessage(
        payload=p["description"], content_topic=content_topic_of_chat(COMMUNITY.id.chat_id),
        version=1, timestamp=p["sent"] * 10**9,
    )  # fmt: skip
    stored = StoredMessage(message_hash(pubsub, message), pubsub, message.content_topic,
                           p["description"], 1, message.timestamp, None)  # fmt: skip
    with NwakuRestServer([stored]) as node:
        argv = ["members", "preview", "--community", CID, "--archive-dir",
                str(p["tmp"] / "archives"), "--store", node.url, "--quiet", "--json"]  # fmt: skip
        assert main(argv) == 0
    _check(json.loads(capsys.readouterr().out), p)


@pytest.mark.torrent
@pytest.mark.timeout(90)
def test_preview_by_torrent_as_a_member_fetches(
    published: dict, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from waku_legacy.archive import Seeder, SessionConfig

    p = published
    loopback = SessionConfig(listen="127.0.0.1:0", trackers=False, utp=False)
    with Seeder(p["tmp"] / "archives", loopback) as seeder:
        seeder.refresh(p["tmp"] / "torrents")
        argv = [
            "members", "preview", "--community", CID, "--torrent", p["report"].torrent_path,
            "--peer", f"127.0.0.1:{seeder.listen_port}", "--listen", "127.0.0.1:0",
            "--no-trackers", "--no-utp", "--metadata-timeout", "10", "--timeout", "20",
            "--save-dir", str(tmp_path / "fetched"), "--source", f"dump:{p['dump']}",
            "--quiet", "--json",
        ]  # fmt: skip
        assert main(argv) == 0
    document = json.loads(capsys.readouterr().out)
    _check(document, p)
    assert document["archives"]["origin"].startswith(p["report"].torrent_path)


def test_preview_by_logos_storage_cid(
    published: dict, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The same history on the Logos Storage back end: the index and archives fetched by CID
    from a node speaking its REST API (the fake, on loopback), as a member's client does."""
    from tests.logos_storage_fake import running_fake
    from waku_legacy.archive.logos_storage import LogosStorageClient

    p = published
    messages, topics = _messages_and_topics()
    with running_fake() as node:
        report = build_community_archives(
            tmp_path / "archives", tmp_path / "torrents", CID, topics, messages,
            now=SPEC.start + 4 * WEEK, community_key=OWNER, clock_ms=LINK_CLOCK, fsync=False,
            archive_topics="both", logos_storage=LogosStorageClient(node.url),
        )  # fmt: skip
        link_file = tmp_path / "torrents" / f"{CID}.magnet-message.json"
        argv = ["members", "preview", "--community", CID, "--cid", report.archive_link,
                "--logos-url", node.url, "--source", f"dump:{p['dump']}",
                "--link-message", str(link_file), "--quiet", "--json"]  # fmt: skip
        assert main(argv) == 0
        document = json.loads(capsys.readouterr().out)
        # given the torrent's link message instead: it names other archives than the CID's
        other = str(p["tmp"] / "torrents" / f"{CID}.magnet-message.json")
        assert main([*argv[:-4], "--link-message", other, "--quiet", "--json"]) == 0
        mismatch = json.loads(capsys.readouterr().out)
    _check(document, p)
    assert document["archives"]["origin"] == f"Logos Storage index {report.archive_link}"
    assert document["generations"]["current"]["link"]["link"] == report.archive_link
    assert len(mismatch["warnings"]) == 2
    assert all(f"not the archives previewed ({report.archive_link})" in w
               for w in mismatch["warnings"])  # fmt: skip


def test_bad_invocations_are_one_line_errors(
    published: dict, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    base = ["members", "preview", "--community", CID, "--source", f"dump:{published['dump']}"]
    cases = [
        ([], "exactly one of --archive-dir, --torrent, --magnet or --cid"),
        (["--archive-dir", str(tmp_path), "--cid", "zQm"], "exactly one of"),
        (["--archive-dir", str(tmp_path)], f"no {CID}/index there"),
        (["--cid", "zQm"], "--cid and --logos-url go together"),
    ]
    for extra, message in cases:
        assert main([*base, *extra, "--quiet"]) == 2
        err = capsys.readouterr().err
        assert message in err and len(err.strip().splitlines()) == 1, err
