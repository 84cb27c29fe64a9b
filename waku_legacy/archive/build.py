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

from waku_legacy.archive import defaults
from waku_legacy.archive.canonical import canonical_archives
from waku_legacy.archive.clock import ClockEvidence, choose_link_clock, read_evidence
from waku_legacy.archive.data_files import (
    append_archives,
    recorded_last_end,
    repair_archive_data,
    write_last_end,
)
from waku_legacy.archive.encode import EncodedArchive, Flavour
from waku_legacy.archive.errors import ArchiveCorrupted
from waku_legacy.archive.layout import CommunityLayout
from waku_legacy.archive.logos_storage import (
    LOGOS_STORAGE,
    TORRENT,
    LogosStorageClient,
    publish_archives,
)
from waku_legacy.archive.magnet import (
    BOTH,
    build_archive_link_messages,
    relay_publish_body,
    relay_publish_path,
    verify_magnet_message,
)
from waku_legacy.archive.magnet import (
    archive_link_chats as link_chats_of,
)
from waku_legacy.archive.message import AnyArchiveMessage, ArchiveMessage
from waku_legacy.archive.partition import (
    MAX_ARCHIVE_BYTES,
    WEEK_SECONDS,
    ArchivePlan,
)
from waku_legacy.archive.torrent import (
    ANNOUNCE_LIST,
    TorrentInfo,
    build_torrent,
    describe_mismatch,
    load_torrent,
)
from waku_legacy.durable import write_atomic
from waku_legacy.errors import ConfigError, CryptoError, DecodeError
from waku_legacy.faults import FaultHook, no_fault
from waku_legacy.identity.shards import DEFAULT_NON_PROTECTED_PUBSUB_TOPIC
from waku_legacy.identity.topics import CommunityId
from waku_legacy.proto import status_archive_pb2, waku_message_pb2
from waku_legacy.proto.status_layers import PROTOCOL_MESSAGE

__all__ = [
    "BuildReport",
    "FinishReport",
    "LinkSigner",
    "build_community_archives",
    "finish_interrupted_build",
    "link_signer",
    "write_magnet_message",
    "written_link_evidence",
]

Progress = Callable[[str, int, int], None]
_Message = AnyArchiveMessage


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
    backend: str = "torrent"  # or "logos-storage"
    archive_link: str | None = None  # what the archive-link message carries (magnet or CID)
    logos_storage: dict[str, Any] | None = None  # LogosStoragePublish.to_json()

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
    archive_link_chats: str = defaults.ARCHIVE_LINK_CHATS,
    payload_signer: coincurve.PrivateKey | None = None,
    logos_storage: LogosStorageClient | None = None,
    archive_topics: str = "channel",  # the tools pass their setting (archive.defaults)
) -> BuildReport:
    """Archive ``messages`` of one community up to ``now`` (seconds) and refresh its torrent.

    With ``logos_storage`` (the community's back end is ``"logos-storage"``) no torrent is
    built: the new archives and the index are uploaded to that node
    (:func:`~waku_legacy.archive.logos_storage.publish_archives`) and the archive-link
    message carries the index CID instead of a magnet link.

    ``last_end`` overrides the recorded end of the previous run (default: the state file, or
    the newest ``to`` in the index). With ``community_key`` the signed magnet-link message is
    written next to the torrent: ``0x<id>.magnet-message.pb`` (protobuf WakuMessage) and
    ``.json`` (``{"path": <nwaku relay path>, "pubsubTopic", "body", "chat", "messages"}``):
    one message per chat ``archive_link_chats`` names (``"both"``: ``<id>-memberUpdate`` and
    ``<id>-magnetlinks``), the 26/WAKU-PAYLOAD signed by ``payload_signer`` (default: the
    community key); see :func:`write_magnet_message`. ``archive_topics`` (``"channel"``,
    ``"universal"``, ``"both"``) relabels the messages on ``content_topics`` (the channels)
    with the community's ``-memberUpdate`` topic (:mod:`waku_legacy.archive.topics`); this
    library default relabels nothing, and every tool passes its setting, whose one default
    is :data:`waku_legacy.archive.defaults.ARCHIVE_TOPICS`.
    """
    started = time.monotonic()
    flavour = Flavour.parse(flavour)
    layout = CommunityLayout.of(archive_dir, community, torrent_dir)
    signer = link_signer(layout, community_key, pubsub_topic, archive_link_chats, payload_signer)
    topics = tuple(bytes(t) for t in content_topics)
    report_progress = progress or _no_progress
    # 1. repair what an interrupted run left; the windows start where the last run ended
    layout.check_directories()
    layout.root.mkdir(parents=True, exist_ok=True)
    status = repair_archive_data(layout, flavour, fault=fault, fsync=fsync)
    previous_end = last_end if last_end is not None else recorded_last_end(layout, status.index)
    # 2. the archives' bytes (canonical: the migration and the repair write the same), then
    # append them to data and index and record the new end
    archives = canonical_archives(
        messages, topics, layout.community, archive_topics, last_end=previous_end, now=now,
        flavour=flavour, partition=partition, max_archive_bytes=max_archive_bytes,
        progress=lambda done, total: report_progress("encode", done, total),
    )  # fmt: skip
    plan, encoded = archives.plan, archives.encoded
    report = _planned_report(layout, flavour, now, plan, status.torn_tail)
    _append(layout, encoded, report, flavour, fault=fault, fsync=fsync)
    if plan.new_last_end is not None:
        write_last_end(layout, plan.new_last_end, fault=fault, fsync=fsync)
    # 3. publish: upload to Logos Storage or refresh the torrent; sign the new archive link
    if report.total_archives and logos_storage is not None:
        _publish_to_logos_storage(
            layout, logos_storage, report, signer, clock_ms, flavour=flavour, fault=fault,
            fsync=fsync, progress=report_progress,
        )  # fmt: skip
    elif report.total_archives:
        _publish_torrent(
            layout, torrent_dir, report, signer, clock_ms, flavour=flavour,
            announce_list=announce_list, fault=fault, fsync=fsync, progress=report_progress,
        )  # fmt: skip
    report.seconds = time.monotonic() - started
    return report


def _no_progress(stage: str, done: int, total: int) -> None:
    pass


def _clock_or_now(clock_ms: int | None) -> int:
    """The archive-link clock given, else the wall clock (milliseconds)."""
    return clock_ms if clock_ms is not None else int(time.time() * 1000)


@dataclass(frozen=True, slots=True)
class LinkSigner:
    """Who signs the archive-link message, where it is to be published and on which chats."""

    community_key: coincurve.PrivateKey
    pubsub_topic: str
    chats: str
    payload_signer: coincurve.PrivateKey | None


def link_signer(
    layout: CommunityLayout,
    community_key: coincurve.PrivateKey | None,
    pubsub_topic: str,
    chats: str,
    payload_signer: coincurve.PrivateKey | None,
) -> LinkSigner | None:
    """None without a community key; ConfigError when the key is not the community's."""
    if community_key is None:
        return None
    if community_key.public_key.format(compressed=True) != layout.community.public_key:
        raise ConfigError(f"the community key given is not the key of {layout.community}")
    return LinkSigner(community_key, pubsub_topic, chats, payload_signer)


def _planned_report(
    layout: CommunityLayout,
    flavour: Flavour,
    now: int,
    plan: ArchivePlan[_Message],
    repaired_bytes: int,
) -> BuildReport:
    return BuildReport(
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
        repaired_bytes=repaired_bytes,
    )


def _append(
    layout: CommunityLayout,
    encoded: Sequence[EncodedArchive],
    report: BuildReport,
    flavour: Flavour,
    *,
    fault: FaultHook,
    fsync: bool,
) -> None:
    """Append the archives not stored yet; counts what was added and kept into ``report``."""
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


def _publish_to_logos_storage(
    layout: CommunityLayout,
    client: LogosStorageClient,
    report: BuildReport,
    signer: LinkSigner | None,
    clock_ms: int | None,
    *,
    flavour: Flavour,
    fault: FaultHook,
    fsync: bool,
    progress: Progress,
) -> None:
    """Upload what the node lacks; the archive link is the index CID."""
    progress("logos-storage", 0, 1)
    published = publish_archives(layout.archive_dir, layout.community, client,
                                 flavour=flavour, fault=fault, fsync=fsync)  # fmt: skip
    progress("logos-storage", 1, 1)
    report.backend = LOGOS_STORAGE
    report.logos_storage = published.to_json()
    report.archive_link = published.index_cid
    if signer is not None and published.index_cid is not None:
        clock = _clock_or_now(clock_ms)
        layout.magnet_message_pb.parent.mkdir(parents=True, exist_ok=True)
        report.magnet_message_paths = write_magnet_message(
            layout, signer, published.index_cid, clock, fault=fault, fsync=fsync,
            backend=LOGOS_STORAGE,
        )  # fmt: skip


def _publish_torrent(
    layout: CommunityLayout,
    torrent_dir: str | os.PathLike[str],
    report: BuildReport,
    signer: LinkSigner | None,
    clock_ms: int | None,
    *,
    flavour: Flavour,
    announce_list: Sequence[str],
    fault: FaultHook,
    fsync: bool,
    progress: Progress,
) -> None:
    """Rebuild the torrent over data and index; the archive link is its magnet link."""
    progress("torrent", 0, 1)
    torrent: TorrentInfo = build_torrent(
        layout.archive_dir, torrent_dir, layout.community, flavour=flavour,
        announce_list=announce_list, fault=fault, fsync=fsync,
    )  # fmt: skip
    progress("torrent", 1, 1)
    report.info_hash = torrent.info_hash
    report.magnet_uri = report.archive_link = torrent.magnet_uri
    report.torrent_path = str(torrent.path)
    if signer is not None:
        report.magnet_message_paths = write_magnet_message(
            layout, signer, torrent.magnet_uri, _clock_or_now(clock_ms), fault=fault, fsync=fsync
        )


def write_magnet_message(
    layout: CommunityLayout,
    signer: LinkSigner,
    magnet_uri: str,
    clock_ms: int,
    *,
    fault: FaultHook,
    fsync: bool,
    backend: str = TORRENT,
) -> list[str]:
    """``0x<id>.magnet-message.pb`` and ``.json`` next to the torrent (both atomic).

    The ``.pb`` holds the first chat's message (``-memberUpdate`` unless only
    ``"magnetlinks"`` is asked for); the ``.json`` holds every chat's relay publish body under
    ``"messages"`` (``{"chat", "contentTopic", "body"}``), and the first one again as
    ``"body"``/``"chat"`` for readers of the single-message form.
    """
    pubsub_topic = signer.pubsub_topic
    messages = build_archive_link_messages(
        signer.community_key, magnet_uri, clock_ms, pubsub_topic=pubsub_topic,
        chats=signer.chats, payload_signer=signer.payload_signer, backend=backend,
    )  # fmt: skip
    first_chat, message = messages[0]
    write_atomic(layout.magnet_message_pb, message.SerializeToString(), fault=fault,
                 step="magnet-pb", fsync=fsync)  # fmt: skip
    body = {
        "pubsubTopic": pubsub_topic,
        "path": relay_publish_path(pubsub_topic),
        "chat": first_chat,
        "body": relay_publish_body(message),
        "messages": [
            {"chat": chat, "contentTopic": m.content_topic, "body": relay_publish_body(m)}
            for chat, m in messages
        ],
    }
    write_atomic(
        layout.magnet_message_json,
        (json.dumps(body, indent=2, sort_keys=True) + "\n").encode(),
        fault=fault, step="magnet-json", fsync=fsync,
    )  # fmt: skip
    return [str(layout.magnet_message_pb), str(layout.magnet_message_json)]


def written_link_evidence(layout: CommunityLayout) -> ClockEvidence:
    """The archive-link messages last written next to the torrent (``.pb`` and every chat's
    body in ``.json``), whichever tool wrote them (migrate, export, the bridge, a repair),
    as clock evidence: a new link is signed above them, the same link not below them.
    Raises ArchiveCorrupted for a file that exists but does not read: a clock not read
    could sign below it, an operator must look."""
    from google.protobuf.message import DecodeError as ProtobufDecodeError

    from waku_legacy.archive.magnet import magnet_message_from_json

    messages = []
    try:
        data = layout.magnet_message_pb.read_bytes()
    except FileNotFoundError:
        data = None
    try:
        if data is not None:
            messages.append(waku_message_pb2.WakuMessage.FromString(data))
        try:
            body = json.loads(layout.magnet_message_json.read_bytes())
        except FileNotFoundError:
            body = {}
        bodies = [m.get("body") for m in body.get("messages", []) if isinstance(m, dict)]
        if body and not bodies:
            bodies = [body["body"]]  # the single-message form of older runs
        messages += [magnet_message_from_json(b) for b in bodies]
    except (ProtobufDecodeError, ValueError, KeyError, TypeError, AttributeError,
            DecodeError) as exc:  # fmt: skip
        raise ArchiveCorrupted(
            "archive-link message",
            f"{layout.magnet_message_pb} or {layout.magnet_message_json} does not read "
            f"({exc}); its clock must be known before another link is signed (restore or "
            "remove the files)",
        ) from exc
    return read_evidence(messages, layout.community)


@dataclass(slots=True)
class FinishReport:
    """What :func:`finish_interrupted_build` found and did (all False/None: it was consistent)."""

    community: str
    repaired_bytes: int = 0  # torn tail truncated from data
    removed_tmp_index: bool = False
    torrent_problem: str | None = None  # why the torrent was rebuilt
    torrent_rebuilt: bool = False
    magnet_message_problem: str | None = None  # why the magnet-link message was rewritten
    magnet_message_rewritten: bool = False
    info_hash: str | None = None
    magnet_uri: str | None = None
    torrent_path: str | None = None

    @property
    def changed(self) -> bool:
        return bool(
            self.repaired_bytes or self.removed_tmp_index or self.torrent_rebuilt
            or self.magnet_message_rewritten
        )  # fmt: skip

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def _magnet_message_problem(
    layout: CommunityLayout, magnet_uri: str, chats: str = BOTH
) -> str | None:
    """None when both magnet-link message files carry ``magnet_uri`` (signed, decodable),
    in status-go's layering, for exactly the chats ``chats`` names."""
    from waku_legacy.archive.magnet import magnet_message_from_json

    try:
        from_pb = verify_magnet_message(layout.magnet_message_pb.read_bytes(), layout.community)
        body = json.loads(layout.magnet_message_json.read_bytes())
        from_json = verify_magnet_message(magnet_message_from_json(body["body"]), layout.community)
    except FileNotFoundError as exc:
        return f"{exc.filename} does not exist"
    except (OSError, ValueError, KeyError, TypeError, DecodeError, CryptoError) as exc:
        return f"unreadable ({exc})"
    pairs = ((layout.magnet_message_pb, from_pb), (layout.magnet_message_json, from_json))
    for path, link in pairs:
        if link.magnet_uri != magnet_uri:
            return f"{path} carries {link.magnet_uri}, not the torrent's {magnet_uri}"
        if link.layering != PROTOCOL_MESSAGE:
            return f"{path} is in the {link.layering} layering, not status-go's ProtocolMessage"
    written = [m.get("chat") for m in body.get("messages", []) if isinstance(m, dict)]
    if written != list(link_chats_of(chats)):
        return f"{layout.magnet_message_json} is for the chats {written}, not {chats!r}"
    return None


def finish_interrupted_build(
    archive_dir: str | os.PathLike[str],
    torrent_dir: str | os.PathLike[str],
    community: CommunityId | str,
    *,
    flavour: Flavour | str = Flavour.STATUS_GO,
    community_key: coincurve.PrivateKey | None = None,
    pubsub_topic: str = DEFAULT_NON_PROTECTED_PUBSUB_TOPIC,
    clock_ms: int | None = None,
    announce_list: Sequence[str] = ANNOUNCE_LIST,
    fault: FaultHook = no_fault,
    fsync: bool = True,
    archive_link_chats: str = defaults.ARCHIVE_LINK_CHATS,
    payload_signer: coincurve.PrivateKey | None = None,
    backend: str = TORRENT,
    link_clock: Callable[[str], int] | None = None,
) -> FinishReport:
    """Make ``data``, ``index``, the .torrent and the magnet-link message agree again.

    A build killed between its steps can leave a torn ``data`` tail, a new index beside an
    old (or no) torrent, or a magnet-link message naming an older torrent. The index is the
    record of what is archived; the torrent and the message are derived from data + index, so
    they are rebuilt when they disagree (compared piece by piece, not by date). Archives are
    never added or removed here. Raises ArchiveCorrupted when it cannot be finished (data
    shorter than the index accounts for, an unreadable index, a torrent without archives).

    A rewritten message is signed with ``link_clock(link)`` when given (called only then:
    finding the clock can ask store nodes), else ``clock_ms``, else the wall clock.
    """
    flavour = Flavour.parse(flavour)
    layout = CommunityLayout.of(archive_dir, community, torrent_dir)
    report = FinishReport(layout.name)
    signer = link_signer(layout, community_key, pubsub_topic, archive_link_chats, payload_signer)
    if not layout.root.exists() and not layout.torrent.exists():
        return report  # nothing built yet
    # 1. repair data and index (what the torrent and the link message are derived from)
    status = repair_archive_data(layout, flavour, fault=fault, fsync=fsync)
    report.repaired_bytes = status.torn_tail
    report.removed_tmp_index = status.stale_tmp_index
    if backend == LOGOS_STORAGE:
        # no torrent and no magnet link for this community: what was not uploaded yet is
        # uploaded by the next build (the state file records every CID)
        return report
    if not status.index.entries:
        if layout.torrent.exists():
            raise ArchiveCorrupted(
                "archive store",
                f"{layout.torrent} exists but {layout.index} holds no archives: the torrent "
                "cannot be rebuilt (restore the archive folder, or remove the torrent)",
            )
        return report
    # 2. the torrent, rebuilt when it does not describe data and index
    magnet_uri = _finish_torrent(layout, torrent_dir, report, flavour=flavour,
                                 announce_list=announce_list, fault=fault, fsync=fsync)  # fmt: skip
    # 3. the archive-link message, rewritten when it does not carry that torrent's link
    if signer is not None:
        problem = _magnet_message_problem(layout, magnet_uri, signer.chats)
        if problem is not None:
            report.magnet_message_problem = problem
            clock = link_clock(magnet_uri) if link_clock is not None else _clock_or_now(clock_ms)
            try:  # never below a link written before (another tool's, a rerun's)
                written = written_link_evidence(layout)
            except ArchiveCorrupted:
                written = ClockEvidence()  # the file is what is being replaced
            clock = choose_link_clock(written, base=clock, base_reason="clock",
                                      archive_link=magnet_uri).clock  # fmt: skip
            write_magnet_message(layout, signer, magnet_uri, clock, fault=fault, fsync=fsync)
            report.magnet_message_rewritten = True
    return report


def _torrent_problem(layout: CommunityLayout) -> str | None:
    """Why the community's torrent does not describe its data and index (None: it does)."""
    if not layout.torrent.exists():
        return f"{layout.torrent} does not exist"
    try:
        return describe_mismatch(layout, load_torrent(layout.torrent))
    except DecodeError as exc:
        return f"it does not load ({exc})"


def _finish_torrent(
    layout: CommunityLayout,
    torrent_dir: str | os.PathLike[str],
    report: FinishReport,
    *,
    flavour: Flavour,
    announce_list: Sequence[str],
    fault: FaultHook,
    fsync: bool,
) -> str:
    """Rebuild the torrent if it disagrees with data and index; returns its magnet link."""
    problem = _torrent_problem(layout)
    if problem is not None:
        report.torrent_problem = problem
        torrent = build_torrent(
            layout.archive_dir, torrent_dir, layout.community, flavour=flavour,
            announce_list=announce_list, fault=fault, fsync=fsync,
        )  # fmt: skip
        report.torrent_rebuilt = True
        magnet_uri = torrent.magnet_uri
    else:
        magnet_uri = load_torrent(layout.torrent).magnet_uri
    report.info_hash = load_torrent(layout.torrent).info_hash
    report.magnet_uri = magnet_uri
    report.torrent_path = str(layout.torrent)
    return magnet_uri
