"""Issue 10: one test per crash class bench/fuzz_decoders.py found. A decoder given hostile
bytes or text raises the project's typed error (WakuLegacyError), never anything else."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from types import ModuleType

import pytest

from waku_legacy.errors import ConfigError, WakuLegacyError

COMMUNITY = "0x02" + "79be667ef9dcbbac55a06295ce870b07029bfcdb2dce28d959f2815b16f81798"


@pytest.mark.parametrize("body", [b"", b"\x81", b"\x82\x01", b"\x88\x01\x02\x03"])
def test_rlpx_message_code_of_a_short_frame(body: bytes) -> None:
    """decode_code read frame[1] before checking the frame had it (IndexError)."""
    from waku_legacy.mailserver_compat.rlpx.connection import decode_code
    from waku_legacy.mailserver_compat.rlpx.errors import RlpxDecodeError

    with pytest.raises(RlpxDecodeError, match="RLPx message code"):
        decode_code(body)


def test_rlpx_message_code_still_decodes() -> None:
    from waku_legacy.mailserver_compat.rlpx.connection import decode_code, encode_code
    from waku_legacy.mailserver_compat.rlpx.errors import RlpxDecodeError

    for code in (0, 1, 0x10, 0x7F, 0x80, 0x1234):
        assert decode_code(encode_code(code) + b"payload") == (code, len(encode_code(code)))
    with pytest.raises(RlpxDecodeError):
        decode_code(b"\x81\x05")  # non-canonical: 5 is one byte on its own


@pytest.mark.parametrize(
    "body",
    [
        {"payload": "", "contentTopic": "/x/1/y/proto", "version": 1e400},
        {"payload": "", "contentTopic": "/x/1/y/proto", "timestamp": -1e400},
        {"payload": "", "contentTopic": ["a"]},
        {"payload": "", "contentTopic": None},
    ],
)
def test_magnet_message_json_with_infinite_numbers(body: dict) -> None:
    """int(inf) raised OverflowError out of magnet_message_from_json."""
    from waku_legacy.archive.errors import MagnetMessageError
    from waku_legacy.archive.magnet import magnet_message_from_json

    # what json.loads gives for 1e400
    text = json.dumps(body).replace("Infinity", "1e400")
    with pytest.raises(MagnetMessageError):
        magnet_message_from_json(json.loads(text))


def test_store_rest_page_nested_too_deeply() -> None:
    """parse_page let json's RecursionError out (the bridge's history pull and the
    migration's store-rest source read pages through it)."""
    from waku_legacy.store.rest_client import StoreRestError, parse_page

    for body in (b"[" * 100_000, b'{"messages": ' * 50_000 + b"[]" + b"}" * 50_000):
        with pytest.raises(StoreRestError, match="not JSON"):
            parse_page(body, 3)


def _config(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "c.toml"
    path.write_text(text)
    return path


@pytest.mark.parametrize("loader", ["migrate", "bridge"])
def test_toml_integer_too_long_to_convert(tmp_path: Path, loader: str) -> None:
    """tomllib raises ValueError (not TOMLDecodeError) for an integer over 4300 digits."""
    load = _loader(loader)
    with pytest.raises(ConfigError, match="not a usable TOML value"):
        load(_config(tmp_path, "x = " + "9" * 5000 + "\n"))


@pytest.mark.parametrize(
    "loader, text, key",
    [
        ("bridge", '[store]\nurl = "a\\u0000b.db"\n', "url"),
        ("bridge", '[store]\nurl = "sqlite:a\\u0000b"\n', "url"),
        ("migrate", '[[source]]\nkind = "envelope-dump"\npath = "d"\n[output]\n'
                    'store = "sqlite:x\\u0000y"\narchive_dir = "a"\ntorrent_dir = "t"\n', "store"),
        ("migrate", '[[source]]\nkind = "envelope-dump"\npath = "d"\n[output]\nstore = ""\n'
                    'archive_dir = "a\\u0000"\ntorrent_dir = "t"\n', "archive_dir"),
        ("migrate", '[[source]]\nkind = "store-rest"\nurl = "http://a"\n'
                    'content_topics = ["\\u0000"]\n[output]\nstore = ""\narchive_dir = "a"\n'
                    'torrent_dir = "t"\n', "content"),
    ],
)  # fmt: skip
def test_toml_strings_with_nul(tmp_path: Path, loader: str, text: str, key: str) -> None:
    """A NUL in a path or store URL made Path.resolve raise ValueError("embedded null
    byte"); config strings with NUL are refused naming the key."""
    with pytest.raises(ConfigError, match=f"key '{key}"):
        _loader(loader)(_config(tmp_path, text))


def _loader(name: str):
    if name == "migrate":
        from waku_legacy.migrate.config import load_config
    else:
        from waku_legacy.bridge.config import load_config
    return load_config


def _fuzz_script() -> ModuleType:
    import importlib.util

    from tests.conftest import REPO_ROOT

    spec = importlib.util.spec_from_file_location(
        "fuzz_decoders", REPO_ROOT / "bench" / "fuzz_decoders.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["fuzz_decoders"] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def test_fuzz_script_smoke(tmp_path: Path) -> None:
    """The fuzz script runs every decoder (a few inputs each) with no crash."""
    module = _fuzz_script()
    results = module.run(list(module.TARGETS), 300, 7, 1, 3, False)
    assert set(results) == set(module.TARGETS)
    for stats in results.values():
        assert stats.inputs == 300 and stats.crashes == 0, (stats.name, stats.crash_kinds)
        assert stats.typed + stats.accepted == 300
    assert issubclass(ConfigError, WakuLegacyError)


@pytest.mark.parametrize("target", ["toml-migrate", "toml-bridge"])
def test_fuzz_config_seeds_are_valid_configs(target: str) -> None:
    """The fuzzer starts from the config tests' examples (tests/config_examples.py); each
    seed must load, or mutations would only explore the first error."""
    fuzz_target = _fuzz_script().TARGETS[target]()
    for mode, data in fuzz_target.seeds():
        fuzz_target.run(mode, data)


def test_archive_json_line_with_lone_surrogate() -> None:
    """JSON allows "\\ud800"; a thirdPartyId holding one was accepted and then crashed the
    archive encoder (UnicodeEncodeError). It is refused where it is read."""
    from waku_legacy.archive.errors import ArchiveDecodeError
    from waku_legacy.archive.message import ArchiveMessage

    line = json.dumps({"timestamp": 1, "hash": "0x01", "topic": "0x01020304", "payload": "",
                       "thirdPartyId": "x\ud800"})  # fmt: skip
    assert "\\ud800" in line
    with pytest.raises(ArchiveDecodeError, match="thirdPartyId"):
        ArchiveMessage.from_json_line(line, line=4)


@pytest.mark.parametrize("field", ["contentTopic", "pubsubTopic"])
def test_rest_store_entry_with_lone_surrogate(field: str) -> None:
    """A store node answering a topic with "\\udc80" (valid JSON, not UTF-8) crashed the
    history pull with UnicodeEncodeError (building the protobuf, hashing the message)."""
    from waku_legacy.store.rest_json import RestJsonError, parse_key_value

    entry = {
        "messageHash": "0x" + "ab" * 32,
        "pubsubTopic": "/waku/2/rs/16/32",
        "message": {"payload": "", "contentTopic": "/app/1/chat/proto", "timestamp": 1},
    }
    if field == "contentTopic":
        entry["message"]["contentTopic"] = "/app/1/\udc80/proto"  # type: ignore[index]
    else:
        entry["pubsubTopic"] = "/waku/2/\ud800"
    raw = json.loads(json.dumps(entry))  # through JSON text, as the page arrives
    with pytest.raises(RestJsonError, match=f"'{field}' is not valid Unicode"):
        parse_key_value(raw).stored()


@pytest.mark.parametrize("loader", ["migrate", "bridge"])
def test_toml_path_of_unknown_user(tmp_path: Path, loader: str) -> None:
    """"~nosuchuser/x" made Path.expanduser raise RuntimeError out of the config reader."""
    text = {
        "migrate": '[[source]]\nkind = "envelope-dump"\npath = "~nosuchuser-fuzz/d"\n'
                   '[output]\nstore = ""\narchive_dir = "a"\ntorrent_dir = "t"\n',
        "bridge": '[store]\nurl = "a.db"\n[history]\nnodes = ["http://a"]\n'
                  'state_dir = "~nosuchuser-fuzz/s"\n',
    }[loader]  # fmt: skip
    with pytest.raises(ConfigError, match="no such user"):
        _loader(loader)(_config(tmp_path, text))
