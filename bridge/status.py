"""What the status page shows: one :class:`StatusReport` gathered from the running
service's parts, written as JSON (``GET /debug/v1/status``) and as HTML (``GET /``,
:mod:`waku_legacy.bridge.status_page`), so both answers hold the same values.

Per community: its ids, channels, the newest archive windows (their messages counted by
decoding the archive once; an archive's bytes never change, so the count is cached), the
archive link and the clock it was last published with, seeding, the last run. Then the v1
side (peers, refusals by the limits) and the history pulls.

Nothing secret goes in: no admin token, no key, a PostgreSQL store's password redacted and
user:password@ dropped from node URLs. Community names come from the config and peer data
from the network: the HTML page escapes every value.
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit, urlunsplit

from waku_legacy.archive import read_archive
from waku_legacy.archive.encode import IndexEntry
from waku_legacy.bridge.config import CommunityConfig
from waku_legacy.errors import WakuLegacyError
from waku_legacy.store import is_postgres_url
from waku_legacy.store.dsn import redact_dsn

if TYPE_CHECKING:
    from waku_legacy.bridge.archiver import ArchiveRunReport, CommunityArchiver, LinkReach
    from waku_legacy.bridge.history import HistoryPuller, PullReport
    from waku_legacy.mailserver_compat.server.asyncio_server import MailServer
    from waku_legacy.mailserver_compat.waku_peer import WakuPeer

__all__ = [
    "ArchiveRun",
    "ArchiveWindow",
    "CommunityStatus",
    "HistoryStatus",
    "PeerStatus",
    "ProtocolHealth",
    "Publication",
    "PullStatus",
    "Refusal",
    "Seeding",
    "ServiceStatus",
    "StatusReport",
    "V1Status",
    "WindowCounts",
    "community_status",
    "history_status",
    "protocol_health",
    "public_store_url",
    "public_url",
    "v1_status",
]

LATEST_WINDOWS = 8  # archives shown per community, newest first (the index lists them all)


@dataclass(frozen=True, slots=True)
class ProtocolHealth:
    name: str
    status: str  # nwaku's HealthStatus name, as /health answers
    desc: str | None = None


@dataclass(frozen=True, slots=True)
class ServiceStatus:
    version: str
    state: str  # the service's own state (Initializing, Ready, ...)
    health: str  # nodeHealth as /health answers it
    protocols: tuple[ProtocolHealth, ...]
    started: float | None  # unix seconds (the service's clock)
    now: float
    uptime: float | None  # seconds
    listeners: tuple[str, ...]  # the REST URL, the enode URL
    seed_port: int | None
    store: str  # its URL, a password redacted
    # live rows accepted and not yet in the store (an outage: they wait in the spool file)
    store_backlog: int = 0


@dataclass(frozen=True, slots=True)
class ArchiveWindow:
    archive_id: str
    start: int  # unix seconds
    end: int
    messages: int | None  # one per original hash (issue 34); None: the archive could not be read
    size: int  # bytes in the data file, padding included
    copies: int | None = None  # archived copies: two per channel message in "both"
    archive_topics: str | None = None  # the mode the archive was written in


@dataclass(frozen=True, slots=True)
class Publication:
    link: str
    clock: int  # the archive-link message's Lamport clock (ms)
    clock_reason: str
    at: float | None  # unix seconds


@dataclass(frozen=True, slots=True)
class Seeding:
    state: str
    peers: int
    uploaded: int  # payload bytes this session
    info_hash: str


@dataclass(frozen=True, slots=True)
class ArchiveRun:
    started: float
    reason: str  # start, schedule, admin
    outcome: str  # ok, error
    error: str | None
    archives_added: int | None
    messages_archived: int | None
    seeded: bool
    published: bool


@dataclass(frozen=True, slots=True)
class CommunityStatus:
    id: str
    name: str | None
    shard: int
    pubsub_topic: str
    channels: tuple[str, ...]
    backend: str
    archives: int  # every archive in the index
    windows: tuple[ArchiveWindow, ...]  # the newest LATEST_WINDOWS, newest first
    index_error: str | None
    link: str | None  # the current magnet link or Logos Storage index CID
    published: Publication | None  # the last archive-link message this process sent
    seeding: Seeding | None
    last_run: ArchiveRun | None
    next_run: float | None
    degraded: str | None
    link_reach: LinkReach | None  # None: archiving not started yet
    # what members' clients import, after the last archive run (waku_legacy.members)
    members_preview: Mapping[str, Any] | None = None


@dataclass(frozen=True, slots=True)
class PeerStatus:
    enode_id: str  # the peer's 64-byte public key, hex
    address: str
    since: float  # unix seconds
    ready: bool  # its waku status arrived
    requests: int
    envelopes_sent: int
    live_accepted: int
    live_rejected: int


@dataclass(frozen=True, slots=True)
class Refusal:
    kind: str  # connection, request, live
    reason: str
    count: int


@dataclass(frozen=True, slots=True)
class V1Status:
    enode: str | None
    peers: tuple[PeerStatus, ...]
    refusals: tuple[Refusal, ...]
    totals: Mapping[str, int]  # the mailserver's counters since start


@dataclass(frozen=True, slots=True)
class PullStatus:
    node: str
    pubsub_topic: str
    start: float  # unix seconds: the window pulled
    end: float
    pages: int
    messages: int
    new: int
    bad_hashes: int
    malformed: int
    error: str | None


@dataclass(frozen=True, slots=True)
class HistoryStatus:
    nodes: tuple[str, ...]
    interval: float  # seconds between pulls
    pulls: tuple[PullStatus, ...]  # the last finished round, per node and topic


@dataclass(frozen=True, slots=True)
class StatusReport:
    service: ServiceStatus
    communities: tuple[CommunityStatus, ...]
    v1: V1Status | None  # None: no [v1]
    history: HistoryStatus | None  # None: no [history]

    def to_json(self) -> dict[str, Any]:
        """camelCase keys, as the bridge's other JSON answers."""
        document = _json_value(self)
        assert isinstance(document, dict)
        return document


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part.title() for part in rest)


def _json_value(value: Any) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {
            _camel(f.name): _json_value(getattr(value, f.name)) for f in dataclasses.fields(value)
        }
    if isinstance(value, Mapping):
        return {str(k): _json_value(v) for k, v in value.items()}
    if isinstance(value, tuple | list):
        return [_json_value(v) for v in value]
    return value


# -- gathering --------------------------------------------------------------------------------


def public_url(url: str) -> str:
    """``url`` without ``user:password@``."""
    parts = urlsplit(url)
    if "@" not in parts.netloc:
        return url
    return urlunsplit(parts._replace(netloc=parts.netloc.rpartition("@")[2]))


def public_store_url(url: str) -> str:
    """A store URL to show: a PostgreSQL DSN with its password redacted, a SQLite one as is."""
    return redact_dsn(url) if is_postgres_url(url) else url


def protocol_health(entries: Iterable[Mapping[str, str]]) -> tuple[ProtocolHealth, ...]:
    """/health's ``protocolsHealth`` entries (``{name: STATUS, "desc"?: reason}``)."""
    out = []
    for entry in entries:
        desc = entry.get("desc")
        for name, status in entry.items():
            if name != "desc":
                out.append(ProtocolHealth(name, status, desc))
    return tuple(out)


class WindowCounts:
    """Messages and copies per archive, decoded once: an archive's bytes never change (its id
    hashes its window and topics; offset and size place it), so a count stays valid. Only the
    archives asked for last are kept; one that could not be read is tried again."""

    def __init__(self) -> None:
        self._counts: dict[tuple[str, str, int, int], _Counted] = {}
        self._lock = threading.Lock()  # two page loads decode an archive once

    def windows(
        self, archiver: CommunityArchiver, entries: Iterable[IndexEntry]
    ) -> tuple[ArchiveWindow, ...]:
        with self._lock:
            kept: dict[tuple[str, str, int, int], _Counted] = {}
            out = []
            for entry in entries:
                key = (archiver.name, entry.archive_id, entry.offset, entry.size)
                count = self._counts.get(key)
                if count is None:
                    count = _count(archiver, entry)
                if count is not None:
                    kept[key] = count
                messages, copies, mode = count if count is not None else (None, None, None)
                out.append(
                    ArchiveWindow(
                        entry.archive_id, entry.window_from, entry.window_to, messages,
                        entry.size, copies, mode,
                    )
                )  # fmt: skip
            others = {k: v for k, v in self._counts.items() if k[0] != archiver.name}
            self._counts = others | kept
            return tuple(out)


_Counted = tuple[int, int, str]  # messages, copies, archive-topics mode


def _count(archiver: CommunityArchiver, entry: IndexEntry) -> _Counted | None:
    """The archive's messages (one per original hash), copies and mode
    (:mod:`waku_legacy.archive.copies`)."""
    from waku_legacy.archive.copies import describe_modes, message_keys
    from waku_legacy.archive.topics import archive_topics_of

    config = archiver.config
    community = archiver.community.id
    try:
        decoded = read_archive(config.archive_dir, community, entry, flavour=config.flavour)
    except (WakuLegacyError, OSError):
        return None
    copies = [(bytes(m.hash), bytes(m.topic)) for m in decoded.messages]
    messages = len(set(message_keys(copies, community).values()))
    mode = archive_topics_of(entry.content_topics, community, (t for _, t in copies))
    return messages, len(copies), describe_modes([mode])


def community_status(
    community: CommunityConfig, archiver: CommunityArchiver | None, counts: WindowCounts
) -> CommunityStatus:
    """One community's state (reads its index and link files: call it off the event loop)."""
    base = CommunityStatus(
        id=str(community.id), name=community.name, shard=community.shard,
        pubsub_topic=community.pubsub_topic, channels=tuple(community.channels),
        backend=community.backend, archives=0, windows=(), index_error=None, link=None,
        published=None, seeding=None, last_run=None, next_run=None, degraded=None,
        link_reach=None,
    )  # fmt: skip
    if archiver is None:  # archiving not started yet
        return base
    try:
        entries = sorted(archiver.index().entries, key=lambda e: (e.window_from, e.offset))
        index_error = None
    except WakuLegacyError as exc:
        entries, index_error = [], str(exc)
    newest = entries[::-1][:LATEST_WINDOWS]
    return dataclasses.replace(
        base, archives=len(entries), windows=counts.windows(archiver, newest),
        index_error=index_error, link=archiver.magnet_uri(),
        published=_publication(archiver.last_published), seeding=_seeding(archiver),
        last_run=_run(archiver.last_run),
        next_run=archiver.next_due() if index_error is None else None,
        degraded=archiver.degraded, members_preview=archiver.members_preview,
        link_reach=archiver.reach(),
    )  # fmt: skip


def _publication(published: Mapping[str, Any] | None) -> Publication | None:
    if published is None:
        return None
    return Publication(
        link=str(published["magnet_uri"]), clock=int(published["clock"]),
        clock_reason=str(published["clock_reason"]), at=published.get("at"),
    )  # fmt: skip


def _seeding(archiver: CommunityArchiver) -> Seeding | None:
    stats = archiver.seeder.stats() if archiver.seeder is not None else []
    for seed in stats:
        if seed.name == archiver.name:
            return Seeding(seed.state, seed.peers, seed.uploaded, seed.info_hash)
    return None


def _run(run: ArchiveRunReport | None) -> ArchiveRun | None:
    if run is None:
        return None
    build = run.build or {}
    return ArchiveRun(
        started=run.started, reason=run.reason, outcome="error" if run.error else "ok",
        error=run.error, archives_added=build.get("archives_added"),
        messages_archived=build.get("messages_archived"), seeded=run.seeded,
        published=run.published,
    )  # fmt: skip


def _peer(peer: WakuPeer) -> PeerStatus:
    key = peer.rlpx.remote_public_key
    counts = peer.counts
    return PeerStatus(
        enode_id=key.hex() if key else "", address=peer.rlpx.address, since=peer.connected_at,
        ready=peer.state.status_received, requests=counts["requests"],
        envelopes_sent=counts["envelopes_sent"], live_accepted=counts["live_accepted"],
        live_rejected=counts["live_rejected"],
    )  # fmt: skip


def v1_status(mailserver: MailServer) -> V1Status:
    listening = mailserver._server is not None
    peers = sorted((_peer(p) for p in mailserver.peers), key=lambda p: (p.since, p.enode_id))
    refusals = sorted(mailserver.refusals.items(), key=lambda item: (-item[1], item[0]))
    return V1Status(
        enode=str(mailserver.enode) if listening else None,
        peers=tuple(peers),
        refusals=tuple(Refusal(kind, reason, count) for (kind, reason), count in refusals),
        totals=dict(mailserver.stats),
    )


def _pull(report: PullReport) -> PullStatus:
    ns = 1_000_000_000
    return PullStatus(
        node=public_url(report.node), pubsub_topic=report.pubsub_topic,
        start=report.start / ns, end=report.end / ns, pages=report.pages,
        messages=report.messages, new=report.new, bad_hashes=report.bad_hashes,
        malformed=report.malformed,
        error=None if report.error is None else report.error.replace(
            report.node, public_url(report.node)
        ),
    )  # fmt: skip


def history_status(puller: HistoryPuller) -> HistoryStatus:
    return HistoryStatus(
        nodes=tuple(public_url(node) for node in puller.config.nodes),
        interval=puller.config.interval,
        pulls=tuple(_pull(report) for report in puller.last_reports),
    )
