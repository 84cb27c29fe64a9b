"""``waku-legacy v1 serve`` (a real subprocess) and ``waku-legacy v1 pull`` (in-process)."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys

import pytest
import rlp

from tests.conftest import REPO_ROOT
from waku_legacy.cli import main
from waku_legacy.crypto.keccak import keccak256
from waku_legacy.crypto.key_file import load_node_key
from waku_legacy.crypto.secp256k1 import public_key_of
from waku_legacy.mailserver_compat.storage.dump import DumpWriter, read_dump
from waku_legacy.mailserver_compat.wire.envelope import Envelope

pytestmark = [pytest.mark.network, pytest.mark.timeout(60)]

T0 = 1_650_000_000
TOPICS = [bytes([0xC0, 1, 2, i]) for i in range(3)]


def _key(raw: bytes) -> bytes:
    expiry, ttl, topic, _, _ = rlp.decode(raw)
    sent = int.from_bytes(expiry, "big") - int.from_bytes(ttl, "big")
    return sent.to_bytes(4, "big") + keccak256(raw) + topic


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("v1cli")
    rng = random.Random(5)
    history = []
    for i in range(900):
        sent = T0 + rng.randrange(0, 5000)
        history.append(Envelope(sent + 60, 60, TOPICS[i % 3], rng.randbytes(80), i).encode())
    with DumpWriter(tmp / "history.dump") as writer:
        for raw in history:
            writer.append(raw)
    key_file = tmp / "nodekey"
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "waku_legacy.cli",
            "v1",
            "serve",
            "--store",
            f"dump:{tmp / 'history.dump'}",
            "--listen",
            "127.0.0.1:0",
            "--node-key-file",
            str(key_file),
            "--rate-limit",
            "0",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    enode = proc.stdout.readline().strip()
    try:
        yield tmp, history, enode, key_file
    finally:
        proc.send_signal(signal.SIGTERM)
        _, stderr = proc.communicate(timeout=20)
        assert proc.returncode == 0, stderr
        assert "mailserver listening on enode://" in stderr


def test_serve_prints_the_enode_of_the_key_file(served) -> None:
    _, _, enode, key_file = served
    assert enode.startswith("enode://") and enode.endswith("@127.0.0.1:" + enode.rsplit(":")[-1])
    assert public_key_of(load_node_key(key_file))[1:].hex() in enode


def test_pull_writes_a_dump_and_a_rerun_resumes(served, tmp_path, capsys) -> None:
    _, history, enode, _ = served
    out = tmp_path / "pulled.dump"
    args = [
        "v1",
        "pull",
        "--enode",
        enode,
        "--topics",
        f"0x{TOPICS[0].hex()},{TOPICS[2].hex()}",
        "--from",
        str(T0 + 500),
        "--to",
        "2022-04-15T06:26:40Z",  # T0 + 4000
        "--out",
        str(out),
        "--limit",
        "100",
        "--json",
    ]
    assert main(args) == 0
    summary = json.loads(capsys.readouterr().out)
    expected = sorted(
        (
            raw
            for raw in history
            if T0 + 500 <= int.from_bytes(_key(raw)[:4], "big") <= T0 + 4000
            and _key(raw)[36:] in (TOPICS[0], TOPICS[2])
        ),
        key=_key,
    )
    assert list(read_dump(out)) == expected
    assert summary["envelopes"] == len(expected) and summary["pages"] >= 4
    assert summary["resumed"] is False
    state_file = tmp_path / "pulled.dump.pull-state.json"
    state = json.loads(state_file.read_text())
    assert state["done"] is True

    # A finished pull is not repeated.
    assert main(args) == 0
    assert json.loads(capsys.readouterr().out)["resumed"] is True
    assert list(read_dump(out)) == expected

    # An interrupted pull (first page written, its cursor checkpointed) resumes from there.
    partial = tmp_path / "partial.dump"
    with DumpWriter(partial) as writer:
        for raw in expected[:100]:
            writer.append(raw)
    (tmp_path / "partial.dump.pull-state.json").write_text(
        json.dumps(
            {"query": state["query"], "cursor": _key(expected[99])[:36].hex(), "done": False}
        )
    )
    args[args.index(str(out))] = str(partial)
    assert main(args) == 0
    resumed = json.loads(capsys.readouterr().out)
    assert resumed["resumed"] is True and resumed["envelopes"] == len(expected) - 100
    assert list(read_dump(partial)) == expected


def test_pull_in_envelope_mode_with_bloom(served, tmp_path, capsys) -> None:
    from waku_legacy.mailserver_compat.wire.bloom import topics_to_bloom

    _, history, enode, _ = served
    out = tmp_path / "bloom.dump"
    bloom = topics_to_bloom([TOPICS[1]])
    code = main(
        [
            "v1",
            "pull",
            "--enode",
            enode,
            "--bloom",
            bloom.hex(),
            "--from",
            str(T0),
            "--to",
            str(T0 + 6000),
            "--out",
            str(out),
            "--mode",
            "envelope",
        ]
    )
    assert code == 0
    table = capsys.readouterr().out
    got = list(read_dump(out))
    assert got == sorted((r for r in history if _key(r)[36:] == TOPICS[1]), key=_key)
    assert f"envelopes          {len(got)}" in table


def _enode_of_nobody(port: int) -> str:
    """An enode URL on a local port no mailserver listens on."""
    return (
        "enode://ca634cae0d49acb401d8a4c6b6fe8c55b70d115bf400769cc1400f3258cd3138"
        f"7574077f301b421bc84df7266c44e9e6d569fc56be00812904767bf5ccd1fc7f@127.0.0.1:{port}"
    )


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--topics", "0xzz"], "--topics"),
        (["--topics", "0x0102"], "4-byte"),
        (["--bloom", "00"], "64 bytes"),
        ([], "give --topics or --bloom"),
    ],
)
def test_pull_option_errors(tmp_path, capsys, extra, message) -> None:
    enode = _enode_of_nobody(1)
    args = ["v1", "pull", "--enode", enode, "--from", "0", "--to", "10"]
    code = main([*args, "--out", str(tmp_path / "x.dump"), *extra])
    assert code == 2
    assert message in capsys.readouterr().err


def test_pull_from_a_closed_port_fails_with_a_message(tmp_path, capsys) -> None:
    enode = _enode_of_nobody(9)
    code = main(
        [
            "v1",
            "pull",
            "--enode",
            enode,
            "--topics",
            "01020304",
            "--from",
            "0",
            "--to",
            "10",
            "--out",
            str(tmp_path / "x.dump"),
            "--retries",
            "1",
            "--timeout",
            "2",
        ]
    )
    assert code == 2
    assert "failed 2 times in a row" in capsys.readouterr().err


def test_serve_options_left_out_are_the_server_configs_defaults() -> None:
    """``v1 serve``'s options re-type no default: what is left out is MailServerConfig's
    (and V1Limits') own; what is given reaches the config."""
    from waku_legacy.cli import build_parser
    from waku_legacy.mailserver_compat.cli import server_config
    from waku_legacy.mailserver_compat.server.core import MailServerConfig

    parser = build_parser()
    base = ["v1", "serve", "--store", "dump:x", "--node-key-file", "k"]
    plain = server_config(parser.parse_args(base))
    assert plain == MailServerConfig(symmetric_key=plain.symmetric_key)
    options = ["--rate-limit", "2.5", "--min-pow", "0.5", "--max-message-size", "4096",
               "--min-request-pow", "0.25", "--trusted", "0x" + "ab" * 64]  # fmt: skip
    given = server_config(parser.parse_args([*base, *options]))
    assert (given.rate_limit, given.min_pow, given.max_message_size, given.min_request_pow) == (
        2.5, 0.5, 4096, 0.25,
    )  # fmt: skip
    assert given.trusted_peers == frozenset({bytes.fromhex("ab" * 64)})
