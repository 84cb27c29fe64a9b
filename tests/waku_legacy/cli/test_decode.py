"""``waku-legacy decode``: JSON for good bytes, exit 2 with a clear message for bad ones."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import coincurve
import pytest
import rlp

from waku_legacy.cli import main
from waku_legacy.crypto.payload import encode_payload
from waku_legacy.crypto.secp256k1 import public_key_of
from waku_legacy.identity.message_hash import message_hash
from waku_legacy.identity.topics import CommunityId
from waku_legacy.mailserver_compat.wire.envelope import Envelope, encode_many
from waku_legacy.proto import status_archive_pb2, store_v3_pb2, waku_message_pb2

KEY = b"k" * 32
SIGNER = coincurve.PrivateKey(b"\x66" * 32)
COMMUNITY_KEY = coincurve.PrivateKey(b"\x77" * 32)
COMMUNITY = CommunityId(COMMUNITY_KEY.public_key.format(compressed=True))
MAGNET = "magnet:?xt=urn:btih:" + "ab" * 20 + "&dn=x"


def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, Any, str]:
    code = main(argv)
    out, err = capsys.readouterr()
    return code, (json.loads(out) if code == 0 else None), err


def write(tmp_path: Path, data: bytes, name: str = "input.bin") -> str:
    path = tmp_path / name
    path.write_bytes(data)
    return str(path)


def test_envelope(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = encode_payload(b"hello", sign_with=SIGNER, symmetric_key=KEY)
    envelope = Envelope(expiry=1000, ttl=50, topic=bytes.fromhex("1a2b3c4d"), data=data, nonce=3)
    code, out, _ = run(
        ["decode", "envelope", write(tmp_path, envelope.encode()), "--symmetric-key", KEY.hex()],
        capsys,
    )
    assert code == 0
    assert out["kind"] == "envelope" and out["sent_time"] == 950 and out["nonce"] == 3
    assert out["hash"] == "0x" + envelope.hash().hex()
    assert out["content_topic"] == "/waku/1/0x1a2b3c4d/rfc26"
    assert out["decoded"]["payload"] == "0x" + b"hello".hex()
    assert out["decoded"]["signer"] == "0x" + public_key_of(SIGNER).hex()


def test_envelope_list_hex_and_stdin(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    one = Envelope(expiry=1, ttl=1, topic=b"abcd", data=b"", nonce=0)
    text = "0x" + encode_many([one, one]).hex() + "\n"
    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(text.encode())))
    code, out, _ = run(["decode", "envelope", "-", "--hex", "--password", "chat"], capsys)
    assert code == 0 and out["count"] == 2
    assert (
        out["envelopes"][0]["decoded"] is None
        and "cannot decrypt" in out["envelopes"][0]["decode_error"]
    )


@pytest.mark.parametrize(
    ("data", "needle"),
    [
        (rlp.encode([1, 2, b"abc", b"", 0]), "malformed envelope: topic must be 4 bytes"),
        (b"\xcf\x84", "malformed envelope: not valid RLP"),
        (b"", "malformed envelope: no bytes"),
        (rlp.encode([[1, 2, b"abcd", b"", 0], [1]]), "malformed envelope #1"),
    ],
)
def test_bad_envelope_exits_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], data: bytes, needle: str
) -> None:
    code, _, err = run(["decode", "envelope", write(tmp_path, data)], capsys)
    assert code == 2 and needle in err


def test_store_response(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    message = waku_message_pb2.WakuMessage(payload=b"p", content_topic="/a/1/b/proto", timestamp=7)
    pubsub = "/waku/2/rs/16/32"
    response = store_v3_pb2.StoreQueryResponse(request_id="r1", status_code=200, status_desc="OK")
    response.messages.add(
        message_hash=message_hash(pubsub, message), message=message, pubsub_topic=pubsub
    )
    response.messages.add(message_hash=b"\x01" * 32, message=message, pubsub_topic=pubsub)
    code, out, _ = run(
        ["decode", "store-response", write(tmp_path, response.SerializeToString())], capsys
    )
    assert code == 0 and out["status_code"] == 200 and out["count"] == 2
    assert out["messages"][0]["hash_matches"] is True
    assert out["messages"][1]["hash_matches"] is False
    assert out["messages"][0]["message"]["timestamp"] == 7


def test_store_response_rejects_other_bytes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = run(["decode", "store-response", write(tmp_path, b"\x08\x01\x10\x02")], capsys)
    assert code == 2 and "malformed store response: unknown field" in err
    assert (
        run(["decode", "store-response", write(tmp_path, b"\x08\x01"), "--lenient"], capsys)[0] == 0
    )


def test_archive_index_and_archive(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    archive = status_archive_pb2.WakuMessageArchive(version=1)
    archive.metadata.version = 1
    setattr(archive.metadata, "from", 100)
    archive.metadata.to = 200
    archive.metadata.contentTopic.append(b"abcd")
    archive.messages.add(
        sig=public_key_of(SIGNER), timestamp=150, topic=b"abcd", payload=b"x", hash=b"h" * 32
    )
    raw = archive.SerializeToString()
    code, out, _ = run(["decode", "archive", write(tmp_path, raw)], capsys)
    assert code == 0 and out["metadata"]["from"] == 100 and out["count"] == 1
    assert (
        out["messages"][0]["signer_compressed"]
        == "0x" + SIGNER.public_key.format(compressed=True).hex()
    )

    code, _, err = run(["decode", "archive", write(tmp_path, raw + bytes(20))], capsys)
    assert code == 2 and "ends with 20 zero bytes" in err

    index = status_archive_pb2.WakuMessageArchiveIndex()
    entry = index.archives["0x" + "cd" * 32]
    entry.metadata.CopyFrom(archive.metadata)
    entry.offset, entry.size, entry.padding = 0, 102400, 102400 - len(raw)
    code, out, _ = run(
        ["decode", "archive-index", write(tmp_path, index.SerializeToString())], capsys
    )
    assert code == 0 and out["count"] == 1
    assert out["archives"]["0x" + "cd" * 32]["size"] == 102400


def _magnet_message() -> waku_message_pb2.WakuMessage:
    from waku_legacy.archive.magnet import build_magnet_message

    return build_magnet_message(
        COMMUNITY_KEY, MAGNET, 1_700_000_000_000, pubsub_topic="/waku/2/rs/16/64"
    )


def test_magnet_message(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write(tmp_path, _magnet_message().SerializeToString())
    code, out, _ = run(["decode", "magnet-message", path, "--community", str(COMMUNITY)], capsys)
    assert code == 0 and out["content_topic_matches"] is True
    assert out["application_message"]["type"] == 43
    assert out["application_message"]["type_name"] == "COMMUNITY_MESSAGE_ARCHIVE_LINK"
    assert out["application_message"]["signed_by_community"] is True
    assert out["archive_link"] == {"clock": 1_700_000_000_000, "archive_link": MAGNET}
    assert out["magnetlink"] == {"clock": 1_700_000_000_000, "magnet_uri": MAGNET}
    assert out["accepted_by_members"] is True and out["info_hash"] == "ab" * 20
    # status-go's layering, on the universal chat, payload signed
    assert out["chat"] == "universal" and out["layering"] == "protocol-message"
    assert out["protocol_message"]["installation_id"]
    assert out["waku_payload_signed"] is True

    code, out, _ = run(["decode", "magnet-message", path], capsys)
    assert code == 0 and "--community" in out["note"]


def test_magnet_message_bare_layering(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 12: a 2024-style message (the ApplicationMetadataMessage directly in the payload,
    on -magnetlinks) is read too, and the output says which layering it saw."""
    from waku_legacy.archive.magnet import wrap_application_message
    from waku_legacy.crypto.payload import encode_payload
    from waku_legacy.identity.topics import content_topic_of_chat, symmetric_key_for_chat
    from waku_legacy.proto import status_archive_pb2

    chat_id = COMMUNITY.magnetlinks_chat_id
    inner = status_archive_pb2.CommunityMessageArchiveLink(clock=5, archive_link=MAGNET)
    message = waku_message_pb2.WakuMessage(
        payload=encode_payload(
            wrap_application_message(inner.SerializeToString(), COMMUNITY_KEY),
            sign_with=COMMUNITY_KEY,
            symmetric_key=symmetric_key_for_chat(chat_id),
        ),
        content_topic=content_topic_of_chat(chat_id),
        version=1,
    )
    path = write(tmp_path, message.SerializeToString())
    code, out, _ = run(["decode", "magnet-message", path, "--community", str(COMMUNITY)], capsys)
    assert code == 0 and out["chat"] == "magnetlinks" and out["layering"] == "bare"
    assert "protocol_message" not in out and out["accepted_by_members"] is True
    magnetlinks = build_magnet_message_on(chat="magnetlinks")
    path = write(tmp_path, magnetlinks.SerializeToString())
    code, out, _ = run(["decode", "magnet-message", path, "--community", str(COMMUNITY)], capsys)
    assert code == 0 and out["chat"] == "magnetlinks" and out["layering"] == "protocol-message"


def build_magnet_message_on(chat: str) -> waku_message_pb2.WakuMessage:
    from waku_legacy.archive.magnet import build_archive_link_message

    return build_archive_link_message(
        COMMUNITY_KEY, MAGNET, 1_700_000_000_000, pubsub_topic="/waku/2/rs/16/64", chat=chat
    )


def test_magnet_message_for_another_community(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    other = CommunityId(coincurve.PrivateKey(b"\x78" * 32).public_key.format(compressed=True))
    path = write(tmp_path, _magnet_message().SerializeToString())
    code, _, err = run(["decode", "magnet-message", path, "--community", str(other)], capsys)
    assert code == 2 and "26/WAKU-PAYLOAD layer" in err and "cannot decrypt" in err


def test_input_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(["decode", "archive", str(tmp_path / "missing.bin")], capsys)
    assert code == 2 and "cannot read" in err
    code, _, err = run(["decode", "archive", write(tmp_path, b"zz"), "--hex"], capsys)
    assert code == 2 and "is not hex" in err
    code, _, err = run(
        ["decode", "archive", write(tmp_path, bytes(100)), "--max-size", "10"], capsys
    )
    assert code == 2 and "more than 10 bytes" in err
    code, _, err = run(["decode", "magnet-message", write(tmp_path, b"\x0a\x05ab")], capsys)
    assert code == 2 and "malformed magnet-link message" in err


def _nested_rlp(depth: int) -> bytes:
    data = b""
    for _ in range(depth):
        n = len(data)
        if n < 56:
            data = bytes([0xC0 + n]) + data
        else:
            size = n.to_bytes((n.bit_length() + 7) // 8, "big")
            data = bytes([0xF7 + len(size)]) + size + data
    return data


@pytest.mark.parametrize(
    "kind, data",
    [
        ("envelope", _nested_rlp(3000)),
        ("archive", b"\x0b" * 100_000),  # protobuf start-group tags nested 100,000 deep
        ("archive-index", b"\x0a\xff\xff\x03" * 10 + b"\x0b" * 10_000),
        ("store-response", b"\x0b" * 100_000),
        ("magnet-message", b"\x0b" * 100_000),
    ],
)
def test_deeply_nested_input_exits_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], kind: str, data: bytes
) -> None:
    """Issue 10: input nested far deeper than any real one is one line and exit 2, in the
    strict and the lenient parser."""
    for extra in ([], ["--lenient"]) if kind != "envelope" else ([],):
        code, _, err = run(["decode", kind, write(tmp_path, data), *extra], capsys)
        assert code == 2, err
        assert err.startswith("waku-legacy decode: error: ") and err.count("\n") == 1, err


def test_magnet_message_reads_the_tools_own_json_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 24: `decode magnet-message X.magnet-message.json` reads the file `archive
    build`/`migrate` write next to the torrent (it failed as "not a WakuMessage")."""
    from waku_legacy.archive.build import LinkSigner, write_magnet_message
    from waku_legacy.archive.layout import CommunityLayout
    from waku_legacy.archive.magnet import BOTH
    from waku_legacy.faults import no_fault

    topic = "/waku/2/rs/16/128"
    layout = CommunityLayout.of(tmp_path / "a", COMMUNITY, tmp_path / "t")
    layout.magnet_message_json.parent.mkdir(parents=True)
    signer = LinkSigner(COMMUNITY_KEY, topic, BOTH, None)
    write_magnet_message(layout, signer, MAGNET, 1_700_000_000_000, fault=no_fault, fsync=False)
    argv = ["decode", "magnet-message", str(layout.magnet_message_json)]
    code, out, err = run([*argv, "--community", str(COMMUNITY)], capsys)
    assert code == 0, err
    assert out["pubsub_topic"] == topic
    assert out["archive_link"]["archive_link"] == MAGNET
    assert out["accepted_by_members"] is True
    not_ours = write(tmp_path, b'{"x": 1}', "x.json")
    code, out, err = run(["decode", "magnet-message", not_ours], capsys)
    assert code == 2 and "magnet-message.json" in err and err.count("\n") == 1


def _dump(tmp_path: Path, envelopes: list[Envelope]) -> str:
    from waku_legacy.mailserver_compat.storage.dump import DumpWriter

    path = tmp_path / "v1-pull.dump"
    with DumpWriter(path) as writer:
        for envelope in envelopes:
            writer.append(envelope.encode())
    return str(path)


def test_decode_dump_reads_v1_pull_dumps(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 24: `decode dump FILE` lists a `v1 pull --out` dump's envelopes; `decode
    envelope` of a dump says to use it (it failed with "… superfluous bytes")."""
    data = encode_payload(b"hello", sign_with=SIGNER, symmetric_key=KEY)
    envelopes = [
        Envelope(expiry=1000 + i, ttl=50, topic=bytes.fromhex("1a2b3c4d"), data=data, nonce=i)
        for i in range(3)
    ]
    path = _dump(tmp_path, envelopes)
    code, out, err = run(["decode", "dump", path, "--symmetric-key", KEY.hex()], capsys)
    assert code == 0, err
    assert out["kind"] == "envelope dump" and out["count"] == 3 and out["damaged"] == []
    assert [e["hash"] for e in out["envelopes"]] == ["0x" + e.hash().hex() for e in envelopes]
    assert out["envelopes"][2]["decoded"]["payload"] == "0x" + b"hello".hex()
    code, _, err = run(["decode", "envelope", path], capsys)
    assert code == 2 and f"decode dump {path}" in err and err.count("\n") == 1


def test_decode_into_a_closed_pipe_ends_quietly(tmp_path: Path) -> None:
    """Issue 24: `decode … | head` ends without "error: Broken pipe" (any command: the CLI
    handles BrokenPipeError in one place)."""
    import subprocess
    import sys

    envelopes = [
        Envelope(expiry=1000 + i, ttl=50, topic=b"abcd", data=b"x" * 200, nonce=i)
        for i in range(2000)
    ]
    path = _dump(tmp_path, envelopes)
    command = f"{sys.executable} -m waku_legacy.cli decode dump {path} | head -c 100 >/dev/null"
    done = subprocess.run(["bash", "-c", f"set -o pipefail; {command}"], capture_output=True)
    assert done.stderr == b"", done.stderr.decode()
    assert done.returncode == 141
