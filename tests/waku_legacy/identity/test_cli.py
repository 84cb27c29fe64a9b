"""``waku-legacy hash`` and ``waku-legacy topics``: JSON on stdout, exit 2 on bad input.

Expected hashes come from the 14/WAKU2-MESSAGE vectors; expected topics are computed here
with pycryptodome's keccak directly.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import reference_topic_hex
from waku_legacy.cli import main

# The secp256k1 generator, compressed: a valid community key.
COMMUNITY = "0x0279be667ef9dcbbac55a06295ce870b07029bfcdb2dce28d959f2815b16f81798"
CHANNEL = "6e2c5b3a-1c0b-4f5a-9f0e-2a7b3c4d5e6f"
CHANNEL_2 = "00000000-0000-4000-8000-000000000001"
CONSOLE_SCRIPT = Path(sys.executable).with_name("waku-legacy")


def run_json(capsys: pytest.CaptureFixture[str], argv: list[str]) -> dict:
    assert main(argv) == 0
    return json.loads(capsys.readouterr().out)


def run_error(capsys: pytest.CaptureFixture[str], argv: list[str]) -> str:
    assert main(argv) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    return captured.err


# --- hash ------------------------------------------------------------------------------


def _hash_argv(case: dict[str, Any]) -> list[str]:
    """The ``hash`` command line for one waku-message-hash.json case."""
    argv = [
        "hash",
        "--pubsub-topic",
        case["pubsub_topic"],
        "--content-topic",
        case["content_topic"],
        "--payload",
        case["payload"],
        "--timestamp",
        str(case["timestamp"]),
    ]
    if case["meta"]:
        argv += ["--meta", "0x" + case["meta"]]
    return argv


def test_hash_matches_every_vector(capsys: pytest.CaptureFixture[str], vectors) -> None:
    for case in vectors("waku-message-hash.json")["cases"]:
        out = run_json(capsys, _hash_argv(case))
        assert out["hash"] == "0x" + case["expected"]
        assert out["payload"] == "0x" + case["payload"]
        assert out["meta"] == "0x" + case["meta"]
        assert out["timestamp"] == case["timestamp"]
        assert out["pubsub_topic"] == case["pubsub_topic"]
        assert out["content_topic"] == case["content_topic"]


def test_hash_absent_meta_equals_empty_meta(capsys: pytest.CaptureFixture[str]) -> None:
    base = ["hash", "--pubsub-topic", "p", "--content-topic", "c", "--timestamp", "0"]
    without = run_json(capsys, [*base, "--payload", "0X0A0b"])
    with_empty = run_json(capsys, [*base, "--payload", "0a0b", "--meta", "0x"])
    assert without["hash"] == with_empty["hash"]
    assert without["payload"] == "0x0a0b"


@pytest.mark.parametrize(
    ("option", "value", "message"),
    [
        ("--payload", "0x0g", "--payload"),
        ("--payload", "abc", "--payload"),  # odd number of digits
        ("--payload", "0x 01", "--payload"),
        ("--meta", "zz", "--meta"),
        ("--meta", "00" * 65, "64-byte"),
        ("--timestamp", "1.5", "--timestamp"),
        ("--timestamp", "9223372036854775808", "64-bit"),
        ("--timestamp", "", "--timestamp"),
        ("--pubsub-topic", "/waku/2/\udcff", "UTF-8"),  # argv bytes that are not UTF-8
    ],
)
def test_hash_bad_input_exits_2(
    capsys: pytest.CaptureFixture[str], option: str, value: str, message: str
) -> None:
    argv = {
        "--pubsub-topic": "p",
        "--content-topic": "c",
        "--payload": "00",
        "--timestamp": "1",
    }
    argv[option] = value
    flat = ["hash"] + [item for pair in argv.items() for item in pair]
    assert message in run_error(capsys, flat)


def test_hash_missing_option_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["hash", "--pubsub-topic", "p", "--content-topic", "c", "--payload", "00"])
    assert exited.value.code == 2
    assert "--timestamp" in capsys.readouterr().err


# --- topics ----------------------------------------------------------------------------


def test_topics_hand_derived(capsys: pytest.CaptureFixture[str]) -> None:
    out = run_json(
        capsys, ["topics", "--community", COMMUNITY, "--channel", CHANNEL, "--channel", CHANNEL_2]
    )
    assert out["community_id"] == COMMUNITY
    assert out["community"] == {
        "chat_id": COMMUNITY,
        "v1_topic": "0x" + reference_topic_hex(COMMUNITY),
        "content_topic": f"/waku/1/0x{reference_topic_hex(COMMUNITY)}/rfc26",
    }
    assert [c["uuid"] for c in out["channels"]] == [CHANNEL, CHANNEL_2]
    for entry, uuid in zip(out["channels"], [CHANNEL, CHANNEL_2], strict=True):
        chat_id = COMMUNITY + uuid
        assert entry["chat_id"] == chat_id
        assert entry["v1_topic"] == "0x" + reference_topic_hex(chat_id)
        assert entry["content_topic"] == f"/waku/1/0x{reference_topic_hex(chat_id)}/rfc26"
    magnet = COMMUNITY + "-magnetlinks"
    assert out["magnetlinks"] == {
        "chat_id": magnet,
        "v1_topic": "0x" + reference_topic_hex(magnet),
        "content_topic": f"/waku/1/0x{reference_topic_hex(magnet)}/rfc26",
    }
    # Issue 24: no --shard is no guess (it was shard 64, where no community lives): no
    # pubsub topic, and a warning that says what to give.
    assert out["pubsub_topic"] is None and out["shard"] is None


def test_topics_pinned_values(capsys: pytest.CaptureFixture[str]) -> None:
    # Worked out once with pycryptodome's keccak outside the project and pinned here, so a
    # change of hash function or of the chat id strings shows even if reference_topic_hex
    # changed too.
    out = run_json(capsys, ["topics", "--community", COMMUNITY, "--channel", CHANNEL])
    assert out["community"]["content_topic"] == "/waku/1/0x97e4158c/rfc26"
    assert out["magnetlinks"]["content_topic"] == "/waku/1/0xfd367d00/rfc26"
    assert out["channels"][0]["content_topic"] == "/waku/1/0xc6954192/rfc26"


def test_topics_normalises_case(capsys: pytest.CaptureFixture[str]) -> None:
    out = run_json(
        capsys,
        [
            "topics",
            "--community",
            COMMUNITY.upper().replace("0X", "0x"),
            "--channel",
            CHANNEL.upper(),
        ],
    )
    assert out["community_id"] == COMMUNITY
    assert out["channels"][0]["chat_id"] == COMMUNITY + CHANNEL


def test_topics_with_shard(capsys: pytest.CaptureFixture[str]) -> None:
    out = run_json(capsys, ["topics", "--community", COMMUNITY, "--shard", "128"])
    assert out["pubsub_topic"] == "/waku/2/rs/16/128"
    assert out["shard"] == {
        "cluster": 16,
        "index": 128,
        "category": "community",
        "source": "--shard",
    }
    out = run_json(
        capsys, ["topics", "--community", COMMUNITY, "--shard", "897", "--allow-any-shard"]
    )
    assert out["pubsub_topic"] == "/waku/2/rs/16/897"
    assert out["shard"]["category"] == "media_and_control"


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--community", COMMUNITY[:-2]], "66 hex"),
        (["--community", "0x04" + COMMUNITY[4:]], "compressed"),
        (["--community", "0x02" + "00" * 32], "not a point"),
        (["--community", COMMUNITY, "--channel", "not-a-uuid"], "UUID"),
        (["--community", COMMUNITY, "--channel", CHANNEL.replace("-", "")], "canonical"),
        (["--community", COMMUNITY, "--shard", "900"], "not to communities"),
        (["--community", COMMUNITY, "--shard", "1024", "--allow-any-shard"], "1024"),
        (["--community", COMMUNITY, "--shard", "x"], "--shard"),
    ],
)
def test_topics_bad_input_exits_2(
    capsys: pytest.CaptureFixture[str], argv: list[str], message: str
) -> None:
    assert message in run_error(capsys, ["topics", *argv])


# --- the installed console script ------------------------------------------------------


def test_console_script_runs(vectors) -> None:
    case = vectors("waku-message-hash.json")["cases"][2]
    result = subprocess.run(
        [str(CONSOLE_SCRIPT), *_hash_argv(case)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["hash"] == "0x" + case["expected"]
    bad = subprocess.run(
        [str(CONSOLE_SCRIPT), "topics", "--community", "0x12"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert bad.returncode == 2
    assert "waku-legacy topics: error:" in bad.stderr and bad.stdout == ""
