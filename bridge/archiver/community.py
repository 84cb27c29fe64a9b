"""One community's archiving (:class:`CommunityArchiver`): its runs (build, seed, publish),
the link's schedule and republishing, its report."""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

import coincurve

from waku_legacy.archive import (
    BuildReport,
    CommunityLayout,
    finish_interrupted_build,
    load_torrent,
    read_index,
)
from waku_legacy.archive.build import link_signer, write_magnet_message, written_link_evidence
from waku_legacy.archive.clock import (
    ClockChoice,
    ClockEvidence,
    choose_link_clock,
)
from waku_legacy.archive.data_files import recorded_last_end
from waku_legacy.archive.fence import fenced
from waku_legacy.archive.logos_storage import (
    publish_archives,
    recorded_index_cid,
)
from waku_legacy.archive.magnet import build_archive_link_messages
from waku_legacy.bridge.archiver.collect import (
    CollectStats,
    build_from_store,
    node_clock_evidence,
    store_clock_evidence,
)
from waku_legacy.bridge.archiver.reach import LinkReach, link_reach
from waku_legacy.bridge.archiver.seeder_host import SeederHost
from waku_legacy.bridge.clock import Clock
from waku_legacy.bridge.config import ArchiveConfig, CommunityConfig, HistoryConfig
from waku_legacy.bridge.logs import fields
from waku_legacy.bridge.metrics import BridgeMetrics
from waku_legacy.bridge.relay import RelayError, RelayPublisher
from waku_legacy.bridge.store_threads import StoreAccess
from waku_legacy.community_config import load_operator_key
from waku_legacy.config.keys import default_of
from waku_legacy.errors import WakuLegacyError
from waku_legacy.faults import FaultHook, no_fault
from waku_legacy.store import MessageStore
from waku_legacy.store.role import LinkPublication

if TYPE_CHECKING:
    from waku_legacy.bridge.leader import Role
    from waku_legacy.members.published import Published

__all__ = ["DAY", "LOGOS_STORAGE_RETRY", "RECONCILE_RETRY", "ArchiveRunReport", "CommunityArchiver"]

log = logging.getLogger("waku_legacy.bridge.archive")

DAY = 86_400
RECONCILE_RETRY = 300.0  # seconds between attempts to finish an interrupted build
# seconds before a republish is tried again after the Logos Storage node failed it: its
# recovery is noticed within this, not at the next republish_interval
LOGOS_STORAGE_RETRY = 60.0


@dataclass(slots=True)
class ArchiveRunReport:
    """One archiving run of one community (build, collect, seed, publish) and how it ended."""

    community: str
    started: float
    reason: str
    build: dict[str, Any] | None = None
    collected: dict[str, int] = field(default_factory=dict)
    seeded: bool = False
    published: bool = False
    error: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "community": self.community, "started": self.started, "reason": self.reason,
            "build": self.build, "collected": self.collected, "seeded": self.seeded,
            "published": self.published, "error": self.error,
        }  # fmt: skip


class CommunityArchiver:
    def __init__(
        self,
        community: CommunityConfig,
        config: ArchiveConfig,
        *,
        store: StoreAccess,
        seeder: SeederHost | None,
        relay: RelayPublisher | None,
        metrics: BridgeMetrics,
        clock: Clock,
        key: coincurve.PrivateKey | None,
        logos_storage: Any = None,  # LogosStorageClient: backend "logos-storage" (issue 12)
        store_nodes: tuple[str, ...] = (),
        store_node_timeout: float = default_of(HistoryConfig, "timeout"),
        role: Role | None = None,
    ) -> None:
        self.community = community
        # the archiving role (bridge.leader): its fencing check before every write, and the
        # link schedule kept in the store (None: unfenced, the schedule in memory only)
        self.role = role
        # the link schedule as last recorded in the store (by this or an earlier holder)
        self.publication: LinkPublication | None = None
        self.logos_storage = logos_storage
        # [history] nodes, asked for the clocks the community already used before publishing
        self.store_nodes = store_nodes
        self.store_node_timeout = store_node_timeout
        self.config = config
        self.store = store
        self.seeder = seeder
        self.relay = relay
        self.metrics = metrics
        self.clock = clock
        self.key = key
        # signs the archive-link message's 26/WAKU-PAYLOAD (None: the community key does)
        self.operator_key = load_operator_key(community) if key is not None else None
        self.name = str(community.id)
        self.layout = CommunityLayout.of(config.archive_dir, community.id, config.torrent_dir)
        self.lock = asyncio.Lock()
        self.last_run: ArchiveRunReport | None = None
        self.last_published: dict[str, Any] | None = None
        self.last_clock: ClockChoice | None = None  # the last archive-link clock and why
        # what members' clients import from the archives, after the last run (issue 23)
        self.members_preview: dict[str, Any] | None = None
        self.last_logos_check: dict[str, Any] | None = None  # LogosStoragePublish.to_json()
        # (due, link, clock, messages): the second chat's copy of the last link published,
        # sent config.second_link_delay after the first (archive_link_chats = "both");
        # messages None: signed again when due (the schedule read from the store)
        self.pending_link: tuple[float, str, int, list[Any] | None] | None = None
        # The magnet link goes out at start, then every republish_interval after the last
        # successful publication (a run's or a republish's); a failure retries sooner.
        self.next_publish = clock.time()
        # Why the archives cannot be served as they are (an interrupted build that could not
        # be finished, files the torrent does not match, a failed run); None when healthy.
        self.degraded: str | None = None
        self.retry_at = clock.time()

    # -- state ------------------------------------------------------------------------------

    def fault(self) -> FaultHook:
        """The archive writers' hook: the role's fencing check before each file change."""
        role = self.role
        if role is None:
            return no_fault

        def check() -> None:
            try:
                role.check()
            except WakuLegacyError as exc:  # FencingTokenLost: the run stops, said here
                log.warning(
                    "archive write refused", extra=fields(community=self.name, error=str(exc))
                )
                raise

        return fenced(check)

    async def load_schedule(self) -> None:
        """Continue the link schedule the store holds (an earlier holder's, or this
        instance's before a restart): no re-send before it is due, the second chat's copy at
        its original due time, and no clock below the one last published."""
        if self.role is None:
            return
        try:
            publication = await asyncio.to_thread(self.role.publication, self.name)
        except (WakuLegacyError, OSError) as exc:
            log.warning(
                "link schedule not read: the link goes out now",
                extra=fields(community=self.name, error=str(exc)),
            )
            return
        if publication is None:
            return
        self.publication = publication
        if publication.published_at is not None:
            self.last_published = publication.to_json()
        self.next_publish = publication.next_publish
        if self.magnet_uri() not in (None, publication.link):
            self.next_publish = self.clock.time()  # archives built since: members must learn
        elif publication.second_due is not None:
            self.pending_link = (publication.second_due, publication.link, publication.clock, None)

    async def _record(self, publication: LinkPublication) -> bool:
        """The schedule into the store, fenced; False (logged) when this instance no longer
        holds the role or the store did not take it: nothing is sent then."""
        if self.role is not None:
            try:
                await asyncio.to_thread(self.role.record, publication)
            except (WakuLegacyError, OSError) as exc:
                log.warning(
                    "link schedule not written: nothing sent",
                    extra=fields(community=self.name, error=str(exc)),
                )
                return False
        self.publication = publication
        return True

    def index(self) -> Any:
        return read_index(self.config.archive_dir, self.community.id, flavour=self.config.flavour)

    def last_end(self) -> int | None:
        return recorded_last_end(self.layout, self.index())

    def next_due(self) -> float:
        last_end = self.last_end()
        if last_end is None:
            # No archive yet: try daily until the community has messages to archive.
            if self.last_run is None:
                return self.clock.time()
            return self.last_run.started + min(self.config.interval, DAY)
        return last_end + self.config.interval

    def magnet_uri(self) -> str | None:
        """The current archive link: the magnet link, or the Logos Storage index CID."""
        try:
            if self.logos_storage is not None:
                return recorded_index_cid(self.layout)
            return load_torrent(self.layout.torrent).magnet_uri
        except (OSError, WakuLegacyError):
            return None

    def reach(self) -> LinkReach:
        return link_reach(
            has_key=self.key is not None, has_relay=self.relay is not None,
            seeding=self.seeder is not None, backend=self.community.backend,
            backend_down=self.degraded,
        )  # fmt: skip

    def _degrade(self, reason: str) -> None:
        self.degraded = reason
        self.retry_at = self.clock.time() + RECONCILE_RETRY
        log.error("archives degraded", extra=fields(community=self.name, error=reason))

    async def link_clock(self, archive_link: str | None) -> ClockChoice:
        """The clock to sign ``archive_link`` with: the wall clock (ms), raised above every
        clock the community already used (description field 9, earlier archive-link
        messages) in the v2 store and on the [history] store nodes. A node that does not
        answer is logged and counted in the evidence's ``rejected``, never fatal."""
        evidence = await self.store.read(store_clock_evidence, self.community)
        # the link message files last written (by a run, a republish, the migration, a repair)
        evidence = evidence.merge(await asyncio.to_thread(written_link_evidence, self.layout))
        recorded = self.publication  # what the store says was signed last (any holder)
        if recorded is not None:
            evidence = evidence.merge(
                ClockEvidence(link_clock=recorded.clock, link=recorded.link, links=1)
            )
        for node in self.store_nodes:
            try:
                found = await asyncio.to_thread(
                    node_clock_evidence, node, self.community, timeout=self.store_node_timeout
                )
            except (WakuLegacyError, OSError, ValueError) as exc:
                log.warning(
                    "store node not asked for archive-link clocks",
                    extra=fields(community=self.name, node=node, error=str(exc)),
                )
                found = ClockEvidence(rejected={f"store node {node}: unreachable": 1})
            evidence = evidence.merge(found)
        choice = choose_link_clock(
            evidence, base=int(self.clock.time() * 1000), base_reason="wall clock",
            archive_link=archive_link, minimum=self.community.min_link_clock,
        )  # fmt: skip
        self.last_clock = choice
        return choice

    async def reconcile(self) -> bool:
        """Finish an interrupted build: data, index, torrent and magnet-link message agree
        afterwards (the torrent is rebuilt from the files when it does not describe them).
        False (and ``degraded`` set) when that is not possible."""
        loop = asyncio.get_running_loop()

        def clock_for(link: str) -> int:
            # Called from the build's thread, and only when a message must be rewritten:
            # the evidence (store, store nodes) is not gathered at every start.
            return asyncio.run_coroutine_threadsafe(self.link_clock(link), loop).result().clock

        async with self.lock:
            try:
                report = await asyncio.to_thread(
                    finish_interrupted_build, self.config.archive_dir, self.config.torrent_dir,
                    self.community.id, flavour=self.config.flavour, community_key=self.key,
                    pubsub_topic=self.community.pubsub_topic,
                    link_clock=clock_for,
                    archive_link_chats=self.community.archive_link_chats,
                    payload_signer=self.operator_key,
                    backend=self.community.backend,
                    fault=self.fault(),
                )  # fmt: skip
            except (WakuLegacyError, OSError) as exc:
                self._degrade(f"cannot finish the interrupted archive build: {exc}")
                return False
        if report.torrent_rebuilt:
            self.next_publish = self.clock.time()  # members must learn the new link
        if report.changed:
            log.warning(
                "finished an interrupted archive build",
                extra=fields(**report.to_json()),  # names the community
            )
        self.degraded = None
        return True

    async def seed_current(self) -> bool:
        """Reconcile, then seed the community's torrent (when there is one)."""
        if not await self.reconcile():
            return False
        if self.seeder is None or not self.layout.torrent.exists():
            return True
        try:
            await self.seeder.seed(str(self.layout.torrent))
        except (WakuLegacyError, OSError) as exc:
            self._degrade(f"cannot seed {self.layout.torrent}: {exc}")
            return False
        return True

    # -- one run ----------------------------------------------------------------------------

    def _build(
        self, store: MessageStore, now: int, clock_ms: int
    ) -> tuple[BuildReport, CollectStats]:
        return build_from_store(
            store, self.community, self.config, now=now, clock_ms=clock_ms, key=self.key,
            operator_key=self.operator_key, logos_storage=self.logos_storage,
            fault=self.fault(),
        )  # fmt: skip

    async def run(self, reason: str = "schedule") -> ArchiveRunReport:
        async with self.lock:
            now = int(self.clock.time())
            run = ArchiveRunReport(self.name, self.clock.time(), reason)
            self.last_run = run
            started = time.monotonic()
            try:
                # the message files' clock, and what goes out right after the build
                choice = await self.link_clock(None)
                report, stats = await self.store.read(self._build, now, choice.clock)
                run.build = report.to_json()
                run.collected = {
                    "read": stats.read, "archived": stats.archived_input,
                    "undecryptable": stats.undecryptable, "from_envelopes": stats.from_envelopes,
                }  # fmt: skip
                self.metrics.archives_built.inc(report.archives_added, self.name)
                self.metrics.archive_messages.inc(report.messages_archived, self.name)
                if report.torrent_path and self.seeder is not None:
                    await self.seeder.seed(report.torrent_path)
                    run.seeded = True
                self.degraded = None
                link = report.archive_link  # magnet link or CID
                if link and (report.archives_added or self._unpublished(link)):
                    # new archives, or a link never published (or changed: an admin run
                    # after the Logos Storage node lost blocks) goes out now
                    run.published = await self.publish(link, choice)
                self.members_preview = await self._preview_members()
                self.metrics.archive_runs.inc(1, self.name, "ok")
                self.metrics.archive_last_success.set(self.clock.time(), self.name)
                log.info(
                    "archive run done",
                    extra=fields(
                        community=self.name, reason=reason, archives=report.archives_added,
                        messages=report.messages_archived, magnet=report.magnet_uri,
                        seconds=round(time.monotonic() - started, 3), **run.collected,
                    ),
                )  # fmt: skip
            except Exception as exc:
                run.error = str(exc) if isinstance(exc, WakuLegacyError) else type(exc).__name__
                self.metrics.archive_runs.inc(1, self.name, "error")
                self._degrade(f"archive run failed: {run.error}")
                log.error("archive run failed", exc_info=True, extra=fields(community=self.name))
            self.metrics.archive_duration.observe(time.monotonic() - started, self.name)
            return run

    def _members_preview(self, published: Published) -> dict[str, Any]:
        """A member's client of each generation on the archives as they are now, with the
        newest signed description and link messages in the store and the link message files
        (:mod:`waku_legacy.members`)."""
        from waku_legacy.identity.descriptions import newest_description
        from waku_legacy.members.preview import preview_community, status_summary
        from waku_legacy.members.published import folder_entries, read_link_file

        if self.layout.magnet_message_json.is_file():
            published.links += read_link_file(self.layout.magnet_message_json)
        description = newest_description(published.descriptions)
        if description is None:
            return {"error": "no CommunityDescription signed by the community key in the store"}
        entries = folder_entries(self.config.archive_dir, self.community.id, self.config.flavour)
        document = preview_community(entries, self.community.id, description, published.links)
        return {"at": self.clock.time(), **status_summary(document)}

    async def _preview_members(self) -> dict[str, Any]:
        from waku_legacy.members.published import read_store_published

        try:
            published = await self.store.read(read_store_published, self.community.id, "store")
            # decoding every archive is the long part: off the store's reader threads
            return await asyncio.to_thread(self._members_preview, published)
        except (WakuLegacyError, OSError, ValueError) as exc:  # never fails the run
            log.warning("members preview failed", extra=fields(community=self.name, error=str(exc)))
            return {"error": str(exc)}

    async def publish(
        self, magnet_uri: str | None = None, choice: ClockChoice | None = None
    ) -> bool:
        """Sign (fresh clock, or ``choice``: the one a run just wrote the files with) and
        publish the magnet-link message; False when not possible."""
        magnet_uri = magnet_uri or self.magnet_uri()
        if magnet_uri is None or self.key is None or self.relay is None:
            self.next_publish = self.clock.time() + self.config.republish_interval
            return False
        if self.logos_storage is not None and choice is None:
            # the republish loop: the node must still hold what the link names
            checked = await self._check_logos_storage()
            if checked is None:
                return False
            magnet_uri = checked
        if choice is None:
            try:
                choice = await self.link_clock(magnet_uri)
            except WakuLegacyError as exc:  # e.g. a link message file that does not read
                self.next_publish = self.clock.time() + min(self.config.republish_interval, 600)
                log.error(
                    "magnet link not published: its clock cannot be chosen",
                    extra=fields(community=self.name, error=str(exc)),
                )
                return False
        clock_ms = choice.clock
        # issue 12: on <id>-memberUpdate (current clients) and/or <id>-magnetlinks (2024
        # clients), as the community's archive_link_chats asks; one clock for both
        messages = await asyncio.to_thread(
            build_archive_link_messages,
            self.key,
            magnet_uri,
            clock_ms,
            pubsub_topic=self.community.pubsub_topic,
            chats=self.community.archive_link_chats,
            payload_signer=self.operator_key,
            backend=self.community.backend,
        )
        try:
            # the message files record the newest clock for every later tool and rerun
            await asyncio.to_thread(self._write_link_files, magnet_uri, clock_ms)
        except (WakuLegacyError, OSError) as exc:
            self.next_publish = self.clock.time() + min(self.config.republish_interval, 600)
            log.warning(
                "magnet link not published: its message files cannot be written",
                extra=fields(community=self.name, error=str(exc)),
            )
            return False
        first, later = messages[:1], [m for _chat, m in messages[1:]]
        retry = self.clock.time() + min(self.config.republish_interval, 600)
        # The schedule goes into the store before anything is sent, fenced: a holder that
        # lost the role stops here. Until the send is confirmed it says "retry soon".
        signed = LinkPublication(self.name, magnet_uri, clock_ms, choice.reason, published_at=None,
                             next_publish=retry, second_due=None)  # fmt: skip
        if not await self._record(signed):
            self.next_publish = retry
            return False
        try:
            for _chat, message in first:
                await self.relay.publish(self.community.pubsub_topic, message)
        except RelayError as exc:
            self.next_publish = retry
            self.metrics.magnet_published.inc(1, self.name, "error")
            log.warning(
                "magnet link not published", extra=fields(community=self.name, error=str(exc))
            )
            return False
        self.metrics.magnet_published.inc(1, self.name, "ok")
        now = self.clock.time()
        self.next_publish = now + self.config.republish_interval
        # a newer link (or clock) replaces a copy not sent yet
        second_due = now + self.config.second_link_delay if later else None
        self.pending_link = (second_due, magnet_uri, clock_ms, later) if second_due else None
        sent = replace(signed, published_at=now, next_publish=self.next_publish,
                       second_due=second_due)  # fmt: skip
        await self._record(sent)  # not written: the store still says "retry soon"
        self.last_published = sent.to_json()
        log.info(
            "magnet link published",
            extra=fields(
                community=self.name, magnet=magnet_uri, clock=clock_ms, clock_reason=choice.reason
            ),
        )
        return True

    async def publish_pending(self) -> bool:
        """Send the second chat's copy of the last link once it is due; False when nothing
        was sent (not due, nothing pending, or the relay failed: retried in 60 s)."""
        pending = self.pending_link
        if pending is None or pending[0] > self.clock.time() or self.relay is None:
            return False
        _due, link, clock_ms, messages = pending
        if messages is None:  # due from a schedule read from the store: the same message
            if self.key is None:
                return False
            signed = await asyncio.to_thread(
                build_archive_link_messages, self.key, link, clock_ms,
                pubsub_topic=self.community.pubsub_topic,
                chats=self.community.archive_link_chats, payload_signer=self.operator_key,
                backend=self.community.backend,
            )  # fmt: skip
            messages = [m for _chat, m in signed[1:]]
        recorded = self.publication
        if recorded is not None and (recorded.link, recorded.clock) == (link, clock_ms):
            # sent at most once: the store says so before it goes, fenced
            if not await self._record(replace(recorded, second_due=None)):
                return False
        else:
            recorded = None
        try:
            for message in messages:
                await self.relay.publish(self.community.pubsub_topic, message)
        except RelayError as exc:
            self.pending_link = (self.clock.time() + 60.0, link, clock_ms, messages)
            if recorded is not None:
                await self._record(replace(recorded, second_due=self.pending_link[0]))
            log.warning(
                "second copy of the magnet link not published",
                extra=fields(community=self.name, error=str(exc)),
            )
            return False
        self.pending_link = None
        log.info(
            "magnet link published on the second chat",
            extra=fields(community=self.name, magnet=link, clock=clock_ms),
        )
        return True

    def _unpublished(self, link: str) -> bool:
        return self.last_published is None or self.last_published.get("magnet_uri") != link

    async def _check_logos_storage(self) -> str | None:
        """Ask the node for every CID the link depends on and upload what it lost
        (:func:`publish_archives`); the index CID to publish, or None (logged, retried in
        LOGOS_STORAGE_RETRY) when the node cannot be reached."""
        try:
            async with self.lock:
                result = await asyncio.to_thread(
                    publish_archives, self.config.archive_dir, self.community.id,
                    self.logos_storage, flavour=self.config.flavour, fault=self.fault(),
                )  # fmt: skip
        except (WakuLegacyError, OSError) as exc:
            self.next_publish = self.clock.time() + min(
                self.config.republish_interval, LOGOS_STORAGE_RETRY
            )
            self.metrics.magnet_published.inc(1, self.name, "error")
            log.warning(
                "archive link not published: the Logos Storage node failed",
                extra=fields(community=self.name, error=str(exc)),
            )
            return None
        self.last_logos_check = result.to_json()
        if result.changed:
            log.warning(
                "Logos Storage node lacked archives: uploaded again",
                extra=fields(community=self.name, missing=result.missing,
                             uploaded=result.uploaded_archives, index=result.index_cid),
            )  # fmt: skip
        return result.index_cid

    def _write_link_files(self, archive_link: str, clock_ms: int) -> None:
        signer = link_signer(self.layout, self.key, self.community.pubsub_topic,
                             self.community.archive_link_chats, self.operator_key)  # fmt: skip
        if signer is None:
            return
        self.layout.magnet_message_pb.parent.mkdir(parents=True, exist_ok=True)
        write_magnet_message(self.layout, signer, archive_link, clock_ms, fault=self.fault(),
                             fsync=True, backend=self.community.backend)  # fmt: skip

    def report(self) -> dict[str, Any]:
        try:
            index = self.index()
            archives = [_entry_json(e) for e in sorted(index.entries, key=lambda e: e.offset)]
            index_error = None
        except WakuLegacyError as exc:
            archives, index_error = [], str(exc)
        seeding = {s.name: s for s in (self.seeder.stats() if self.seeder else [])}
        seed = seeding.get(self.name)
        return {
            "id": self.name,
            "name": self.community.name,
            "pubsubTopic": self.community.pubsub_topic,
            "channels": list(self.community.channels),
            "archives": archives,
            "indexError": index_error,
            "lastEnd": self.last_end() if index_error is None else None,
            "nextRun": self.next_due() if index_error is None else None,
            "magnetUri": self.magnet_uri(),
            "lastPublished": self.last_published,
            "archiveLinkClock": None if self.last_clock is None else self.last_clock.to_json(),
            "linkReach": self.reach().to_json(),
            "logosStorageCheck": self.last_logos_check,
            "secondLinkDue": None if self.pending_link is None else self.pending_link[0],
            "degraded": self.degraded,
            "seeding": None if seed is None else {
                "infoHash": seed.info_hash, "state": seed.state, "peers": seed.peers,
                "uploaded": seed.uploaded,
            },
            "lastRun": None if self.last_run is None else self.last_run.to_json(),
            "membersPreview": self.members_preview,
        }  # fmt: skip


def _entry_json(entry: Any) -> dict[str, Any]:
    return {
        "id": entry.archive_id,
        "from": entry.window_from,
        "to": entry.window_to,
        "offset": entry.offset,
        "size": entry.size,
        "padding": entry.padding,
    }
