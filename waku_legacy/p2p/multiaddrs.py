"""Multiaddrs in the listener's config: parsing with a config error that names the key, and
the check that a TCP port is not another process's."""

from __future__ import annotations

import socket
from collections.abc import Sequence

import multiaddr

from waku_legacy.errors import ConfigError

__all__ = ["ensure_ports_free", "parse_multiaddr"]


def parse_multiaddr(text: str, *, what: str = "multiaddr") -> multiaddr.Multiaddr:
    try:
        return multiaddr.Multiaddr(text)
    except Exception as exc:  # multiaddr raises several unrelated types
        raise ConfigError(f"{what} {text!r} does not parse: {exc}") from None


def ensure_ports_free(listen: Sequence[multiaddr.Multiaddr]) -> None:
    """Refuse a TCP port another socket already listens on.

    The listener binds its TCP-only ports with SO_REUSEPORT (the REST worker processes
    share the primary's on purpose), so a second process (another bridge, with another key)
    would share the port silently and the kernel would split the connections between them.
    A plain bind without SO_REUSEPORT fails while any socket holds the port, so trying one
    first turns that into an error naming the address. Port 0 is always free."""
    for address in listen:
        names = {p.name for p in address.protocols()}
        family = socket.AF_INET6 if "ip6" in names else socket.AF_INET
        host = address.value_for_protocol("ip6" if "ip6" in names else "ip4")
        port = int(address.value_for_protocol("tcp"))
        if port == 0:
            continue
        with socket.socket(family, socket.SOCK_STREAM) as probe:
            try:
                probe.bind((host, port))
            except OSError as exc:
                raise ConfigError(
                    f"[libp2p] listen {address}: {exc.strerror or exc} (another process "
                    "listens there)"
                ) from None
