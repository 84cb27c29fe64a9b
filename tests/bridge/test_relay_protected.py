"""Protected shards (57/STATUS-Simple-Scaling): the bridge's relay publishing signs ``meta``
with the configured shard key, and refuses a protected topic it has no key for. The message
is published to a local server speaking nwaku's relay REST API and checked there with the
rule and key of the shared vector (/work/shared/vectors/status-shard-signing.json), written
out here independently of the project's code."""

from __future__ import annotations

import base64
import hashlib
import json
from pathlib import Path

import aiohttp
import coincurve
import pytest

from tests.bridge.support import FakeNwaku
from waku_legacy.bridge.config import ConfigError, parse_config
from waku_legacy.bridge.metrics import BridgeMetrics
from waku_legacy.bridge.relay import ProtectedTopicError, RelayPublisher
from waku_legacy.proto import waku_message_pb2

pytestmark = pytest.mark.network

VECTOR_FILE = Path("/work/shared/vectors/status-shard-signing.json")
# The vector's values, kept here so the test runs where the shared file is absent.
VECTOR = {
    "private_key_topic": "5526a8990317c9b7b58d07843d270f9cd1d9aaee129294c1c478abf7261dd9e6",
    "public_key_topic": "049c5fac802da41e07e6cdf51c3b9a6351ad5e65921527f2df5b7d59fd9b56ab02bab7"
    "36cdcfc37f25095e78127500da371947217a8cd5186ab890ea866211c3f6",
    "pubsub_topic": "pubsub-topic",
    "content_topic": "content-topic",
    "payload": "1a12e077d0e89f9cac11fbbb6a676c86120b5ad3e248b1f180e98f15ee43d2dfcf62f00c92737b2"
    "ff6f59b3aba02773314b991c41dc19adb0ad8c17c8e26757b",
    "timestamp": 1683208172339052800,
    "ephemeral": True,
    "meta_signature": "127fa211b2514f0e974a055392946dc1a14052182a6abefb8a6cd7c51da1bf2e40595d28"
    "ef1a9488797c297eed3aac45430005fb3a7f037bdd9fc4bd99f59e63",
}
PROTECTED = "/waku/2/rs/16/128"
OPEN = "/waku/2/rs/16/32"


def rule_digest(pubsub: str, payload: bytes, content: str, ts: int, ephemeral: bool) -> bytes:
    """57's rule, as the vector's note states it."""
    return hashlib.sha256(
        pubsub.encode() + payload + content.encode() + ts.to_bytes(8, "little", signed=True)
        + (b"\x01" if ephemeral else b"\x00")
    ).digest()  # fmt: skip


def verifies(public_key_hex: str, meta: bytes, digest: bytes) -> bool:
    if len(meta) != 64:
        return False
    der = coincurve.ecdsa.cdata_to_der(coincurve.ecdsa.deserialize_compact(meta))
    return coincurve.PublicKey(bytes.fromhex(public_key_hex)).verify(der, digest, hasher=None)


def test_the_shared_vector_holds_for_the_rule_written_here(tmp_path):
    if VECTOR_FILE.exists():
        shared = json.loads(VECTOR_FILE.read_text())
        assert {k: shared[k] for k in VECTOR} == VECTOR
    v = VECTOR
    digest = rule_digest(
        v["pubsub_topic"], bytes.fromhex(v["payload"]), v["content_topic"], v["timestamp"],
        v["ephemeral"],
    )  # fmt: skip
    assert verifies(v["public_key_topic"], bytes.fromhex(v["meta_signature"]), digest)
    # and the project's publisher makes exactly the vector's signature (RFC 6979)
    publisher = _publisher(_config(tmp_path, "http://x", _key_file()), None)
    message = waku_message_pb2.WakuMessage(
        payload=bytes.fromhex(v["payload"]), content_topic=v["content_topic"],
        timestamp=v["timestamp"], ephemeral=True,
    )  # fmt: skip
    publisher.shard_keys[v["pubsub_topic"]] = publisher.shard_keys[PROTECTED]
    signed = publisher.prepare(v["pubsub_topic"], message)
    assert signed.meta.hex() == v["meta_signature"]
    assert not message.HasField("meta")  # the caller's message is not changed


def _key_file() -> dict[str, str]:
    return {"pubsub_topic": PROTECTED, "key_file": "shard.key"}


def _config(tmp_path: Path, url: str, *shards: dict[str, str]):
    (tmp_path / "shard.key").write_text(VECTOR["private_key_topic"] + "\n")
    relay = {"url": url, "retries": 0, "protected_shard": list(shards)}
    return parse_config(
        {"store": {"url": f"sqlite:///{tmp_path}/s.sqlite3"}, "relay": relay}, base_dir=tmp_path
    ).relay


def _publisher(config, session) -> RelayPublisher:
    return RelayPublisher(config, BridgeMetrics(), session, backoff=0.01)


async def test_a_message_on_a_protected_shard_is_published_signed(tmp_path):
    nwaku = await FakeNwaku(store_relayed=False).start()
    config = _config(tmp_path, nwaku.url, _key_file())
    try:
        async with aiohttp.ClientSession() as session:
            publisher = _publisher(config, session)
            for ephemeral in (False, True):
                message = waku_message_pb2.WakuMessage(
                    payload=b"hello protected shard", content_topic="/waku/1/0x01020304/rfc26",
                    version=1, timestamp=1_750_000_000_123_456_789, ephemeral=ephemeral,
                )  # fmt: skip
                await publisher.publish(PROTECTED, message)
            await publisher.publish(OPEN, message)  # not protected: sent as it is
            assert publisher.metrics.relay_publish.value("ok") == 3
    finally:
        await nwaku.stop()
    assert [topic for topic, _ in nwaku.published] == [PROTECTED, PROTECTED, OPEN]
    for topic, body in nwaku.published[:2]:
        meta = base64.b64decode(body["meta"])
        digest = rule_digest(
            topic, base64.b64decode(body["payload"]), body["contentTopic"], body["timestamp"],
            body.get("ephemeral", False),
        )  # fmt: skip
        assert verifies(VECTOR["public_key_topic"], meta, digest), body
        # the signature covers the topic: it does not verify for another shard
        other = rule_digest(
            OPEN, base64.b64decode(body["payload"]), body["contentTopic"], body["timestamp"],
            body.get("ephemeral", False),
        )  # fmt: skip
        assert not verifies(VECTOR["public_key_topic"], meta, other)
    assert "meta" not in nwaku.published[2][1]


async def test_a_protected_topic_without_a_key_is_refused_and_not_sent(tmp_path):
    nwaku = await FakeNwaku(store_relayed=False).start()
    config = _config(
        tmp_path, nwaku.url, {"pubsub_topic": PROTECTED, "public_key": VECTOR["public_key_topic"]}
    )
    message = waku_message_pb2.WakuMessage(payload=b"x", content_topic="/a/1/b/proto", timestamp=5)
    try:
        async with aiohttp.ClientSession() as session:
            publisher = _publisher(config, session)
            with pytest.raises(ProtectedTopicError, match="protected shard and no key_file"):
                await publisher.publish(PROTECTED, message)
            publisher.start()  # the queue: refused, counted, and it keeps going
            publisher.submit(PROTECTED, message)
            publisher.submit(OPEN, message)
            await publisher.drained()
            await publisher.close()
            assert publisher.metrics.relay_publish.value("refused") == 2
            assert publisher.metrics.relay_publish.value("ok") == 1
    finally:
        await nwaku.stop()
    assert [topic for topic, _ in nwaku.published] == [OPEN]


@pytest.mark.parametrize(
    "shard, error",
    [
        ({"pubsub_topic": PROTECTED}, "give key_file"),
        ({"pubsub_topic": "shard-128", "key_file": "shard.key"}, "pubsub_topic"),
        ({"pubsub_topic": PROTECTED, "key_file": "missing.key"}, "key_file"),
        ({"pubsub_topic": PROTECTED, "public_key": "0x04zz"}, "a secp256k1 public key"),
        ({"pubsub_topic": PROTECTED, "key_file": "shard.key", "public_key": "02" + "11" * 32},
         "a secp256k1 public key"),
        ({"pubsub_topic": PROTECTED, "key_file": "shard.key",
          "public_key": "0x" + coincurve.PrivateKey(b"\x01" * 32).public_key.format().hex()},
         "not of the configured public_key"),
        ({"pubsub_topic": PROTECTED, "key_file": "shard.key", "keyfile": "x"}, "unknown key"),
    ],
)  # fmt: skip
def test_protected_shard_config_errors_say_what_is_wrong(tmp_path, shard, error):
    with pytest.raises(ConfigError, match=error) as info:
        _config(tmp_path, "http://127.0.0.1:1", shard)
    assert "[[relay.protected_shard]]" in str(info.value)


def test_a_protected_topic_listed_twice_is_a_config_error(tmp_path):
    with pytest.raises(ConfigError, match="more than once"):
        _config(tmp_path, "http://127.0.0.1:1", _key_file(), _key_file())
