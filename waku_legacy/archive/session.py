"""libtorrent session settings shared by the seeder and the fetcher.

Discovery that reaches beyond the given peers (DHT, local service discovery, UPnP, NAT-PMP)
is off unless asked for; trackers (status-go's announce list) can be switched off, as the
tests on loopback do. libtorrent is imported lazily so that the CLI starts fast.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from waku_legacy.archive.errors import ArchiveConfigError

if TYPE_CHECKING:
    import libtorrent as lt

__all__ = ["SessionConfig", "make_session", "parse_peer"]


@dataclass(frozen=True, slots=True)
class SessionConfig:
    listen: str = "0.0.0.0:0"  # "host:port" (port 0: any free port)
    dht: bool = False
    lsd: bool = False
    upnp: bool = False
    natpmp: bool = False
    trackers: bool = True  # announce to the torrent's trackers
    # uTP (as anacrolix/torrent in status-go also speaks); its LEDBAT congestion control
    # holds loopback/LAN transfers to a fraction of TCP's rate, so tests and benchmarks turn
    # it off
    utp: bool = True
    user_agent: str = "waku-legacy"

    def settings(self) -> lt.settings_pack:
        import libtorrent as lt

        parse_peer(self.listen, what="listen address")
        return {
            "listen_interfaces": self.listen,
            "enable_dht": self.dht,
            "enable_lsd": self.lsd,
            "enable_upnp": self.upnp,
            "enable_natpmp": self.natpmp,
            "user_agent": self.user_agent,
            "tick_interval": 100,
            "enable_outgoing_utp": self.utp,
            "enable_incoming_utp": self.utp,
            # Several peers may share one address (sessions on loopback, peers behind one NAT).
            "allow_multiple_connections_per_ip": True,
            "alert_mask": (
                lt.alert.category_t.error_notification
                | lt.alert.category_t.status_notification
                | lt.alert.category_t.storage_notification
                | lt.alert.category_t.piece_progress_notification
            ),
        }


def make_session(config: SessionConfig) -> lt.session:
    import libtorrent as lt

    try:
        return lt.session(config.settings())
    except RuntimeError as exc:
        raise ArchiveConfigError(
            f"cannot start a BitTorrent session on {config.listen}: {exc}"
        ) from exc


def parse_peer(text: str, *, what: str = "peer address") -> tuple[str, int]:
    """``host:port`` or ``[v6]:port`` to (host, port)."""
    if not isinstance(text, str) or ":" not in text:
        raise ArchiveConfigError(f"{what} {text!r} is not host:port")
    host, _, port_text = text.rpartition(":")
    host = host.strip("[]")
    try:
        port = int(port_text)
    except ValueError:
        raise ArchiveConfigError(f"{what} {text!r} has no numeric port") from None
    if not host or not 0 <= port <= 65535:
        raise ArchiveConfigError(f"{what} {text!r} is not host:port")
    return host, port
