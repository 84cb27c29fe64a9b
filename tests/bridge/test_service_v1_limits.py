"""Issue 10 item 2 through the bridge: its v1 listener applies the v1 live rules and the
per-peer/per-address live limits configured in ``[v1.limits]`` before anything reaches
the store (and so the archives); a trusted mailserver's 0x7f history keeps its own path;
refusals show on ``/metrics``."""

from __future__ import annotations

import time

import aiohttp
import pytest

from tests.bridge.support import FakeNwaku, bridge_config
from tests.helpers import wait_until
from waku_legacy.bridge.clock import ManualClock
from waku_legacy.bridge.service import BridgeService
from waku_legacy.crypto.secp256k1 import generate_private_key
from waku_legacy.errors import ConfigError
from waku_legacy.mailserver_compat.waku_peer import connect
from waku_legacy.mailserver_compat.wire.envelope import Envelope
from waku_legacy.mailserver_compat.wire.pow import seal
from waku_legacy.mailserver_compat.wire.waku_protocol import StatusOptions
from waku_legacy.store import V1EnvelopeQuery

pytestmark = pytest.mark.network
TOPIC = bytes.fromhex("0badcafe")
DAY = 86_400


def _stored_envelopes(service) -> int:
    rows = service.store.stores.query_v1_envelopes(
        V1EnvelopeQuery(bytes(40), b"\xff" * 40, topics=(), cursor=None, limit=100_000)
    )
    return len(rows)


async def _settled(service, handled: int, stored: int) -> None:
    """Wait until the listener has judged ``handled`` envelopes in all (accepted or refused)
    and the store holds ``stored``: counters and rows, not a pause, say the work is done."""
    stats = service.mailserver.stats
    await wait_until(lambda: stats["live_accepted"] + stats["live_rejected"] >= handled,
                     what=f"{handled} envelopes judged")  # fmt: skip
    await service.live.writer.flush()
    await wait_until(lambda: _stored_envelopes(service) >= stored, what=f"{stored} stored")
    assert stats["live_accepted"] + stats["live_rejected"] == handled


async def test_bridge_v1_listener_stores_only_envelopes_that_pass_rules_and_limits(tmp_path):
    nwaku = await FakeNwaku().start()
    trusted = generate_private_key()
    config = bridge_config(
        tmp_path, f"sqlite:///{tmp_path}/store.sqlite3",
        v1={"listen": "127.0.0.1:0", "node_key_file": str(tmp_path / "nodekey"),
            "min_pow": 0.001, "trusted_peers": [trusted.public_key.format(False)[1:].hex()],
            "limits": {"live_burst": 20, "live_rate": 0.01, "address_live_burst": 1000}},
        relay={"url": nwaku.url, "retries": 1},
    )  # fmt: skip
    assert config.v1 is not None and config.v1.limits.live_burst == 20
    service = BridgeService(config, clock=ManualClock(time.time()))
    await service.start()
    status = StatusOptions(pow_requirement=0.0, light_node=False)
    try:
        now = int(time.time())
        spammer = await connect(service.mailserver.enode, generate_private_key(), status=status)
        # ttl 0 used to give infinite PoW: all refused, none stored.
        free = [Envelope(now + 5, 0, TOPIC, b"spam %d" % i * 100, 0).encode() for i in range(10)]
        await spammer.send_envelopes(free)
        await _settled(service, handled=10, stored=0)
        assert _stored_envelopes(service) == 0
        # A flood of valid envelopes: the peer's burst is stored, the rest refused.
        valid = [seal(now + 30, 30, TOPIC, b"flood %d" % i, 0.001).encode() for i in range(60)]
        for start in range(0, 60, 20):
            await spammer.send_envelopes(valid[start : start + 20])
        await _settled(service, handled=70, stored=_expected_after_flood())
        assert _stored_envelopes(service) == _expected_after_flood()
        await spammer.disconnect()
        # A trusted mailserver's history (expired envelopes, over any live rate) is stored.
        mailserver = await connect(service.mailserver.enode, trusted, status=status)
        old = [seal(now - 7 * DAY + i, 30, TOPIC, b"old %d" % i, 0).encode() for i in range(40)]
        await mailserver.send_p2p_messages(old)
        await _settled(service, handled=110, stored=_expected_after_flood() + 40)
        stored = _stored_envelopes(service)
        await mailserver.disconnect()
        async with aiohttp.ClientSession() as session:
            async with session.get(f"http://127.0.0.1:{service.rest_port}/metrics") as response:
                metrics = await response.text()
    finally:
        await service.stop()
        await nwaku.stop()
    assert stored == _expected_after_flood() + 40
    assert 'event="refused_live_zero_ttl"} 10' in metrics
    assert 'event="refused_live_peer_rate_limit"}' in metrics


def _expected_after_flood() -> int:
    # The spammer's burst is 20 tokens; the 10 ttl-0 envelopes spent 10 of them (rate
    # checks come first, so refused envelopes cost tokens too): 10 valid ones are stored.
    return 10


def test_bridge_config_limits_errors_name_the_key(tmp_path) -> None:
    with pytest.raises(ConfigError, match=r"limits.*'max_peers'"):
        bridge_config(
            tmp_path, f"sqlite:///{tmp_path}/store.sqlite3",
            v1={"listen": "127.0.0.1:0", "limits": {"max_peers": -1}},
        )  # fmt: skip
