"""One call for a community's archive run: plan, encode, append, torrent, magnet message.

:func:`build_community_archives` is what ``waku-legacy archive build`` and the migration run
for one community. It is deterministic for a given (messages, now, flavour) and previous store:
input order does not matter, reruns after a crash finish with the same bytes.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import coincurve

from waku_legacy.archive.encode import EncodedArchive, Flavour
from waku_legacy.archive.layout import CommunityLayout, FaultHook, no_fault, write_atomic
from waku_legacy.archive.magnet import build_magnet_message, relay_publish_body, relay_publish_path
from waku_legacy.archive.message import ArchiveMessage
from waku_legacy.archive.partition import MAX_ARCHIVE_BYTES, WEEK_SECONDS, plan_archives
from waku_legacy.archive.store import (
    append_archives,
    recorded_last_end,
    repair_store,
    write_last_end,
)
from waku_legacy.archive.torrent import ANNOUNCE_LIST, TorrentInfo, build_torrent
from waku_legacy.errors import ConfigError
from waku_legacy.identity.shards import DEFAULT_NON_PROTECTED_PUBSUB_TOPIC
from waku_legacy.identity.topics import CommunityId
from waku_legacy.proto import status_archive_pb2

__all__ = ["BuildReport", "build_community_archives"]

Progress = Callable[[str, int, int], None]


@dataclass(slots=True)
class BuildReport:
    community: str
    flavour: str
    now: int
    start: int | None  # where this run's windows started
    last_end: int | None  # the recorded end after this run
    windows: int = 0
    archives_added: int = 0
    archive_ids: list[str] = field(default_factory=list)
    messages_archived: int = 0
    late_messages: int = 0  # fall into windows archived before: counted, not archived
    future_messages: int = 0  # at or after now: left for a later run
    duplicate_messages: int = 0
    oversize_messages: int = 0  # over 30,000,000 bytes alone: dropped (status-go does too)
    skipped_archives: int = 0
    repaired_bytes: int = 0  # torn tail removed from data (an interrupted earlier run)
    total_archives: int = 0
    data_length: int = 0
    info_hash: str | None = None
    magnet_uri: str | None = None
    torrent_path: str | None = None
    magnet_message_paths: list[str] = field(default_factory=list)
    seconds: float = 0.0

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def build_community_archives(
    archive_dir: str | os.PathLike[str],
    torrent_dir: str | os.PathLike[str],
    community: CommunityId | str,
    content_topics: Sequence[bytes],
    messages: Iterable[ArchiveMessage | status_archive_pb2.WakuMessage],
    *,
    now: int,
    flavour: Flavour | str = Flavour.STATUS_GO,
    community_key: coincurve.PrivateKey | None = None,
    pubsub_topic: str = DEFAULT_NON_PROTECTED_PUBSUB_TOPIC,
    clock_ms: int | None = None,
    last_end: int | None = None,
    partition: int = WEEK_SECONDS,
    max_archive_bytes: int = MAX_ARCHIVE_BYTES,
    announce_list: Sequence[str] = ANNOUNCE_LIST,
    fault: FaultHook = no_fault,
    fsync: bool = True,
    progress: Progress | None = None,
) -> BuildReport:
    """Archive ``messages`` of one community up to ``now`` (seconds) and refresh its torrent.

    ``last_end`` overrides the recorded end of the previous run (default: the state file, or
    the newest ``to`` in the index). With ``community_key`` the signed magnet-link message is
    written next to the torrent: ``0x<id>.magnet-message.pb`` (protobuf WakuMessage) and
    ``.json`` (``{"path": <nwaku relay path>, "pubsubTopic", "body"}``).
    """
    started = time.monotonic()
    flavour = Flavour.parse(flavour)
    layout = CommunityLayout.of(archive_dir, community, torrent_dir)
    if community_key is not None:
        if community_key.public_key.format(compressed=True) != layout.community.public_key:
            raise ConfigError(f"the community key given is not the key of {layout.community}")
    topics = tuple(bytes(t) for t in content_topics)
    report_progress = progress or (lambda stage, done, total: None)

    layout.root.mkdir(parents=True, exist_ok=True)
    status = repair_store(layout, flavour, fault=fault, fsync=fsync)
    previous_end = last_end if last_end is not None else recorded_last_end(layout, status.index)

    plan = plan_archives(
        messages, last_end=previous_end, now=now, partition=partition,
        max_archive_bytes=max_archive_bytes,
    )  # fmt: skip
    report = BuildReport(
        community=layout.name,
        flavour=str(flavour),
        now=now,
        start=plan.start,
        last_end=plan.new_last_end,
        windows=plan.windows,
        late_messages=plan.late,
        future_messages=plan.future,
        duplicate_messages=plan.duplicates,
        oversize_messages=plan.oversize,
        repaired_bytes=status.torn_tail,
    )
    encoded = []
    for number, planned in enumerate(plan.archives):
        report_progress("encode", number, len(plan.archives))
        encoded.append(
            EncodedArchive.build(
                planned.window_from, planned.window_to, topics, planned.messages, flavour=flavour
            )
        )
    report_progress("encode", len(plan.archives), len(plan.archives))

    result = append_archives(layout.archive_dir, layout.community, encoded, flavour=flavour,
                             fault=fault, fsync=fsync)  # fmt: skip
    report.archives_added = len(result.added)
    report.archive_ids = result.archive_ids
    report.skipped_archives = result.skipped
    # append_archives skips the first ``skipped`` archives (window order) as already stored
    kept = sorted(encoded, key=lambda e: e.window_from)[result.skipped :]
    report.messages_archived = sum(e.message_count for e in kept)
    report.total_archives = len(result.index.entries)
    report.data_length = result.data_length
    if plan.new_last_end is not None:
        write_last_end(layout, plan.new_last_end, fault=fault, fsync=fsync)

    if result.index.entries:
        report_progress("torrent", 0, 1)
        torrent: TorrentInfo = build_torrent(
            layout.archive_dir, torrent_dir, layout.community, flavour=flavour,
            announce_list=announce_list, fault=fault, fsync=fsync,
        )  # fmt: skip
        report_progress("torrent", 1, 1)
        report.info_hash = torrent.info_hash
        report.magnet_uri = torrent.magnet_uri
        report.torrent_path = str(torrent.path)
        if community_key is not None:
            clock = clock_ms if clock_ms is not None else int(time.time() * 1000)
            message = build_magnet_message(
                community_key, torrent.magnet_uri, clock, pubsub_topic=pubsub_topic
            )
            write_atomic(layout.magnet_message_pb, message.SerializeToString(), fault=fault,
                         step="magnet-pb", fsync=fsync)  # fmt: skip
            body = {
                "pubsubTopic": pubsub_topic,
                "path": relay_publish_path(pubsub_topic),
                "body": relay_publish_body(message),
            }
            write_atomic(
                layout.magnet_message_json,
                (json.dumps(body, indent=2, sort_keys=True) + "\n").encode(),
                fault=fault, step="magnet-json", fsync=fsync,
            )  # fmt: skip
            report.magnet_message_paths = [
                str(layout.magnet_message_pb),
                str(layout.magnet_message_json),
            ]
    report.seconds = time.monotonic() - started
    return report
