"""Community history archives on a schedule: build, seed, tell the members.

Per configured community, every ``interval`` (7 days) from the end of the last archive run
-- and at start when that moment has passed while the service was down, or when the
community has no archive yet -- one run:

1. reads the community's channel messages since the last archive end from the v2 store
   (content topics ``/waku/1/0x<channel topic>/rfc26``, any shard), decrypts each with its
   channel's symmetric key (:func:`decode_payload`) and turns it into the status-go archive
   message (:func:`archive_message`; the hash is the keccak256 of the original v1 envelope
   when the store holds one, otherwise the message's deterministic v2 hash); messages that do
   not decrypt are counted and left out;
2. builds the new archives, index and torrent (:func:`build_community_archives`: status-go's
   7-day windows up to now, crash-safe files, deterministic bytes);
3. swaps the seeded torrent (:class:`Seeder`, one libtorrent session for every community);
4. publishes the signed magnet-link message through the nwaku relay REST API.

Independently, the current magnet link is re-signed with a fresh clock and republished every
``republish_interval`` (and once at start), so members who missed it -- or joined after the
store nodes forgot it -- still learn where the archives are.

Modules, one concept each:

- :mod:`.collect` -- a run's input from the v2 store (the channel messages as status-go
  archive messages, the clocks the community already used) and :func:`build_from_store`;
- :mod:`.community` -- one community's archiver: its runs, the link's schedule and
  republishing, its report;
- :mod:`.scheduler` -- every community's runs when due, and the republishing;
- :mod:`.seeder_host` -- the libtorrent seeder on its own thread;
- :mod:`.reach` -- whether the archive link reaches the members, and why not.
"""

from __future__ import annotations

from waku_legacy.bridge.archiver.collect import (
    CLOCK_EVIDENCE_LIMIT,
    CollectStats,
    build_from_store,
    collect_archive_messages,
    node_clock_evidence,
    store_clock_evidence,
)
from waku_legacy.bridge.archiver.community import (
    LOGOS_STORAGE_RETRY,
    RECONCILE_RETRY,
    ArchiveRunReport,
    CommunityArchiver,
)
from waku_legacy.bridge.archiver.reach import LinkReach, link_reach
from waku_legacy.bridge.archiver.scheduler import ArchiveScheduler
from waku_legacy.bridge.archiver.seeder_host import SeederHost

__all__ = [
    "CLOCK_EVIDENCE_LIMIT",
    "LOGOS_STORAGE_RETRY",
    "RECONCILE_RETRY",
    "ArchiveRunReport",
    "ArchiveScheduler",
    "CollectStats",
    "CommunityArchiver",
    "LinkReach",
    "SeederHost",
    "build_from_store",
    "collect_archive_messages",
    "link_reach",
    "node_clock_evidence",
    "store_clock_evidence",
]
