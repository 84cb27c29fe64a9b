"""The core rate-limit pieces the v1 mailserver and the bridge's HTTP side share."""

from __future__ import annotations

import pytest

from waku_legacy.limits import LogThrottle, RateLimiter, address_key, allow_all


def test_token_bucket_burst_refill_and_wait() -> None:
    limiter = RateLimiter(rate=2.0, burst=3)
    assert [limiter.allow("a", 0.0) for _ in range(4)] == [True, True, True, False]
    # Empty: one token comes back after 1 / rate seconds.
    assert limiter.wait("a", 0.0) == pytest.approx(0.5)
    assert limiter.wait("a", 0.25) == pytest.approx(0.25)
    assert limiter.allow("a", 0.5)
    assert not limiter.allow("a", 0.5)
    # Other keys have their own bucket; a long pause refills no more than the burst.
    assert limiter.allow("b", 0.5)
    assert limiter.tokens("a", 100.0) == 3.0


def test_interval_form_and_disabled_limiter() -> None:
    limiter = RateLimiter(1.0)  # status-go's one request per second
    assert limiter.allow("p", 10.0) and not limiter.allow("p", 10.5) and limiter.allow("p", 11.0)
    off = RateLimiter(0.0)
    assert not off.enabled
    assert all(off.allow("p", 0.0) for _ in range(1000))
    assert off.wait("p", 0.0) == 0.0


def test_bucket_table_is_bounded_and_forgets_least_recent_first() -> None:
    limiter = RateLimiter(rate=1.0, burst=1, max_keys=2)
    assert limiter.allow("a", 0.0) and limiter.allow("b", 0.0) and limiter.allow("c", 0.0)
    assert len(limiter._buckets) == 2
    # "a" was forgotten (starts full again); "c" was not.
    assert limiter.allow("a", 0.0)
    assert not limiter.allow("c", 0.0)


def test_allow_all_spends_only_when_every_bucket_has_tokens() -> None:
    peer = RateLimiter(rate=1.0, burst=5)
    address = RateLimiter(rate=1.0, burst=1)
    assert allow_all([(peer, "k"), (address, "ip")], 0.0) == -1
    assert allow_all([(peer, "k"), (address, "ip")], 0.0) == 1
    # The refused call spent nothing from the peer's bucket.
    assert peer.tokens("k", 0.0) == 4.0


def test_address_key_groups_ipv6_by_64_and_unmaps_ipv4() -> None:
    assert address_key("2001:db8::1") == address_key("2001:db8::ffff:1") == "2001:db8::/64"
    assert address_key("2001:db8:0:1::1") != address_key("2001:db8::1")
    assert address_key("::ffff:192.0.2.7") == "192.0.2.7"
    assert address_key("fe80::1%eth0") == "fe80::/64"
    assert address_key("unix-socket") == "unix-socket"


def test_log_throttle_one_line_per_key_per_interval_with_bounded_memory() -> None:
    throttle = LogThrottle(10.0, size=3)
    assert [throttle.should_log("x", t) for t in (0.0, 1.0, 9.9, 10.0)] == [
        True, False, False, True,
    ]  # fmt: skip
    assert throttle.should_log("y", 1.0)
    for key in ("p", "q", "r"):
        throttle.should_log(key, 2.0)
    assert len(throttle._last) == 3


def test_continuations_are_one_use_per_client_query_and_expire() -> None:
    from waku_legacy.limits import Continuations

    tickets = Continuations(size=2, ttl=10.0)
    tickets.issue(("peer", b"c1"), 0.0, "query A")
    assert not tickets.redeem(("peer", b"c1"), 1.0, "query B")  # another query: fresh
    assert not tickets.redeem(("other", b"c1"), 1.0, "query A")  # another client: fresh
    assert tickets.redeem(("peer", b"c1"), 1.0, "query A")  # the mismatches used nothing
    assert not tickets.redeem(("peer", b"c1"), 1.0, "query A")  # one use
    tickets.issue(("peer", b"c2"), 0.0)
    assert not tickets.redeem(("peer", b"c2"), 10.5)  # expired
    for i in range(5):
        tickets.issue(("peer", i), 0.0)
    assert len(tickets) == 2 and tickets.redeem(("peer", 4), 0.0)
    assert not tickets.redeem(("peer", 0), 0.0)  # oldest forgotten first
