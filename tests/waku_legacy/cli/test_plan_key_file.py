"""``plan --key-file [COMMUNITY=]PATH`` (issue 24): the community's private key is checked
before any source is read (64 hex digits, and its public key is the community id named with
it) and written as ``key_file`` in both files, so what members lack no longer lists the key;
a wrong key is one line, exit 2, and nothing is written."""

from __future__ import annotations

import json
from pathlib import Path

import base58
import pytest

from waku_legacy.cli import main
from waku_legacy.migrate.sample import (
    SampleCommunity,
    SampleSpec,
    generate_descriptions,
    make_communities,
    write_leveldb_mailservers,
)

SPEC = SampleSpec(communities=2, channels=1, members=2, days=3, messages_per_channel_day=1.0)


@pytest.fixture(scope="module")
def sample(tmp_path_factory) -> tuple[list[SampleCommunity], str, Path]:
    """Two communities' signed descriptions in one LevelDB mailserver, and their key files
    (a third file holds the second key with its 0x prefix and a newline, as hex editors and
    `echo` leave it)."""
    out = tmp_path_factory.mktemp("plan-keys")
    communities = make_communities(SPEC)
    write_leveldb_mailservers(
        generate_descriptions(SPEC, communities), [out / "ms"], keep_probability=1.0
    )
    for i, community in enumerate(communities):
        (out / f"c{i}.key").write_text(community.secret.hex())
    return communities, f"leveldb:{out / 'ms'}", out


def _argv(source: str, out: Path, *extra: str) -> list[str]:
    return ["plan", "--source", source, "--out", str(out), "--quiet", "--json", *extra]


def test_key_files_go_into_both_files_and_leave_the_missing_list(sample, tmp_path, capsys):
    from waku_legacy.bridge.config import load_config as load_bridge_config
    from waku_legacy.community_config import load_community_key
    from waku_legacy.migrate.config import load_config

    communities, source, keys = sample
    first, second = (str(c.id) for c in communities)
    inside = tmp_path / "plan" / "keys"
    inside.mkdir(parents=True)
    (inside / "second.key").write_text(communities[1].secret.hex() + "\n")
    zq3 = "z" + base58.b58encode(b"\xe7\x01" + communities[1].id.public_key).decode()
    argv = _argv(source, tmp_path / "plan", "--key-file", f"{first}={keys / 'c0.key'}",
                 "--key-file", f"{zq3}={inside / 'second.key'}")  # fmt: skip
    assert main(argv) == 0
    report = json.loads(capsys.readouterr().out)
    written = {c["community"]: c["key_file"] for c in report["communities"]}
    # absolute, as plan writes the sources' paths
    assert written == {first: str(keys / "c0.key"), second: str(inside / "second.key")}
    reasons = report["missing"]["communities"]
    assert set(reasons) == {first, second}
    assert all([r.split(":")[0] for r in why] == ["no [relay]"] for why in reasons.values())
    assert not any("key_file" in step for step in report["missing"]["steps"])
    for config in (
        load_config(tmp_path / "plan" / "migrate.toml"),
        load_bridge_config(tmp_path / "plan" / "bridge.toml"),
    ):
        loaded = {str(c.id): load_community_key(c) for c in config.communities}
        assert {c: k.secret for c, k in loaded.items() if k} == {
            first: communities[0].secret, second: communities[1].secret
        }  # fmt: skip


def test_a_key_file_alone_names_its_community(sample, tmp_path, capsys):
    communities, source, keys = sample
    assert main(_argv(source, tmp_path / "plan", "--key-file", str(keys / "c1.key"))) == 0
    report = json.loads(capsys.readouterr().out)
    (only,) = report["communities"]
    assert only["community"] == str(communities[1].id)
    assert only["key_file"] == str(keys / "c1.key")


def test_plan_without_a_key_lists_it(sample, tmp_path, capsys):
    communities, source, _keys = sample
    assert main(_argv(source, tmp_path / "plan", "--community", str(communities[0].id))) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["communities"][0]["key_file"] is None
    assert "no community key" in report["missing"]["communities"][str(communities[0].id)][0]
    assert "--key-file" in report["missing"]["steps"][0]


@pytest.mark.parametrize(
    ("content", "says"),
    [
        ("ab" * 31, "must hold 64 hex digits (a 32-byte key), found 62"),
        ("zz" * 32, "holds non-hex characters"),
        (None, "does not exist"),
    ],
)
def test_a_malformed_key_file_is_one_line_exit_2(sample, tmp_path, capsys, content, says):
    communities, source, _keys = sample
    path = tmp_path / "bad.key"
    if content is not None:
        path.write_text(content)
    first = str(communities[0].id)
    assert main(_argv(source, tmp_path / "plan", "--key-file", f"{first}={path}")) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("waku-legacy plan: error: --key-file ")
    assert says in err and "64 hex digits" in err and "public key is the community id" in err
    assert not (tmp_path / "plan").exists()


def test_another_communitys_key_is_one_line_exit_2(sample, tmp_path, capsys):
    communities, source, keys = sample
    first, second = (str(c.id) for c in communities)
    assert main(_argv(source, tmp_path / "plan", "--key-file", f"{first}={keys / 'c1.key'}")) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert f"{keys / 'c1.key'} holds the key of community {second}, not of {first}" in err
    assert not (tmp_path / "plan").exists()


def test_no_community_at_all_is_one_line_exit_2(sample, tmp_path, capsys):
    _communities, source, _keys = sample
    assert main(_argv(source, tmp_path / "plan")) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--community" in err and "0x + 66 hex" in err
