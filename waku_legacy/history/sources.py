"""Where the readable history comes from: a v2 store's rows or the archives, decoded and indexed.

- The store (:func:`index_from_store`): the ``messages`` rows of each channel's content topic,
  read in pages of :data:`STORE_PAGE` in (timestamp, hash) order. Their payloads are
  version-1 26/WAKU-PAYLOAD encrypted with the channel's symmetric key (``symmetric_key_for_chat``
  of ``<community id><uuid>``), opened with :func:`waku_legacy.crypto.payload.decode_payload`
  as the migration's archive step opens them (``migrate/archives.archive_fields``); what does
  not open is counted as ``undecryptable``, never dropped silently. The channels are the
  community config's, else those of the newest description signed by the community key on its
  chat in the store (also kept by the index: names, bans, moderators).
- The archives (:func:`index_from_archive_entries`): each archived message's ``payload`` is the
  26/WAKU-PAYLOAD data already decrypted and ``sig`` its signer's 65-byte key; the archive's
  window is its index entry's start and the 7-day partition's end.
  :func:`open_archive_entries` obtains them as ``members preview`` does (``--archive-dir``,
  ``--torrent``, ``--magnet [--peer]``, ``--cid --logos-url``): the CLI commands share it.

Both then call :func:`~.decode.decode_application` per message and
:meth:`~.index.HistoryIndex.add_events` in bounded batches.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import multiprocessing
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from waku_legacy.errors import ConfigError, WakuLegacyError
from waku_legacy.history.events import Event, Undecodable, WakuFacts

if TYPE_CHECKING:
    from waku_legacy.community_config import CommunityConfig
    from waku_legacy.history.index import HistoryIndex, IndexCounts
    from waku_legacy.history.segments import SegmentJoiner
    from waku_legacy.identity.topics import CommunityId
    from waku_legacy.members.preview import ArchivedEntry
    from waku_legacy.store.types import MessageStore, StoredMessage

__all__ = [
    "STORE_PAGE",
    "ArchiveEntries",
    "WakuRow",
    "archive_rows",
    "archive_windows",
    "decode_row",
    "decode_rows",
    "index_from_archive_entries",
    "index_from_store",
    "open_archive_entries",
    "store_rows",
    "stored_row",
    "window_of",
]

STORE_PAGE = 1000  # store rows per read
_NANOS = 1_000_000_000
# called with (community id, messages read so far) as a store is read
Progress = Callable[[str, int], None]
#: one channel's events decoded elsewhere (:func:`decode_row`'s pairs, in the store's
#: (timestamp, hash) order), by (community id, content topic, the community's archive
#: windows), each event's archive window the one of them holding it (:func:`window_of`, as
#: :func:`stored_row` sets it; no windows: left as decoded); None: that channel is read from
#: the store
Predecoded = Callable[
    [str, str, Sequence[tuple[int, int]]], Iterable[tuple[Event, bytes | None]] | None
]


@dataclass(frozen=True, slots=True)
class WakuRow:
    """One Waku message's decrypted 26/WAKU-PAYLOAD data and where it came from (its
    ``facts.payload_signer`` is the payload's signer, ``""`` when unsigned)."""

    data: bytes
    facts: WakuFacts


def decode_rows(
    rows: Iterable[WakuRow | Undecodable],
    community_id: str,
    *,
    joiner: SegmentJoiner | None = None,
) -> Iterator[Event]:
    """Each row decoded at the Status application layer (undecodable rows passed on); the
    pieces of a segmented payload (:mod:`.segments`) are ``Undecodable("segment")`` each but
    the one that completes the set, which is the whole payload's event (``joiner``: one kept
    across calls, for rows that come a few at a time)."""
    joiner = joiner or _segment_joiner()
    for event, data in _decoded(rows, community_id):
        yield _joined(event, data, joiner, community_id)


def _segment_joiner() -> SegmentJoiner:
    from waku_legacy.history.segments import SegmentJoiner

    return SegmentJoiner()


def _decoded(
    rows: Iterable[WakuRow | Undecodable], community_id: str
) -> Iterator[tuple[Event, bytes | None]]:
    """Each row's event, with its data when the event says it is a segment."""
    for row in rows:
        yield decode_row(row, community_id)


def decode_row(row: WakuRow | Undecodable, community_id: str) -> tuple[Event, bytes | None]:
    """One row's event, with its data when the event says it is a segment (the pieces are
    joined in order by whoever reads the pairs: :func:`index_from_store`'s ``predecoded``)."""
    from waku_legacy.history.decode import decode_application

    if isinstance(row, Undecodable):
        return row, None
    event = decode_application(row.data, row.facts.payload_signer, row.facts, community_id)
    segment = isinstance(event, Undecodable) and event.reason == "segment"
    return event, (row.data if segment else None)


def _joined(event: Event, data: bytes | None, joiner: SegmentJoiner, community_id: str) -> Event:
    """``event``, or the whole payload's event when ``data`` is the segment completing it."""
    if data is None or event.facts is None:
        return event
    from waku_legacy.history.decode import MAX_APPLICATION_BYTES, decode_application
    from waku_legacy.history.segments import read_segment

    signer = event.facts.payload_signer
    segment = read_segment(data, max_size=MAX_APPLICATION_BYTES)
    try:
        whole = joiner.add(segment, signer) if segment is not None else None
    except WakuLegacyError as exc:  # the joined bytes hash wrong: the set is dropped
        return Undecodable("segment", str(exc)[:160], event.facts)
    if whole is None:
        return event
    return decode_application(whole, signer, event.facts, community_id)


# -- the store -----------------------------------------------------------------------------------


def _stored_pages(
    store: MessageStore, content_topic: str, since_ns: int | None
) -> Iterator[list[StoredMessage]]:
    """The topic's stored messages, oldest first, a page at a time."""
    from waku_legacy.store.types import StoreQuery

    cursor: bytes | None = None
    while True:
        query = StoreQuery(
            content_topics=[content_topic], cursor=cursor, limit=STORE_PAGE, start_time=since_ns
        )
        page = store.query(query)
        yield list(page.messages)
        if page.cursor is None:
            return
        cursor = page.cursor


def _decode_page(
    page: list[StoredMessage], key: bytes, community_id: str, windows: tuple[tuple[int, int], ...]
) -> list[tuple[Event, bytes | None]]:
    """A worker's task: one page decrypted and decoded (segments are joined by the caller:
    a set may span pages)."""
    rows = (stored_row(m, key, windows=windows) for m in page)
    return list(_decoded(rows, community_id))


def _decoded_in_workers(
    pages: Iterable[list[StoredMessage]],
    key: bytes,
    community_id: str,
    windows: tuple[tuple[int, int], ...],
    pool: ProcessPoolExecutor,
    workers: int,
) -> Iterator[Event]:
    """The pages' events in order, decoded in ``pool``, at most two pages per worker in
    flight."""
    import collections
    from concurrent.futures import Future

    joiner = _segment_joiner()
    pending: collections.deque[Future[list[tuple[Event, bytes | None]]]] = collections.deque()
    for page in pages:
        pending.append(pool.submit(_decode_page, page, key, community_id, windows))
        if len(pending) >= 2 * workers:
            for event, data in pending.popleft().result():
                yield _joined(event, data, joiner, community_id)
    while pending:
        for event, data in pending.popleft().result():
            yield _joined(event, data, joiner, community_id)


def store_rows(
    store: MessageStore,
    content_topic: str,
    symmetric_key: bytes,
    *,
    source: str = "store",
    windows: Sequence[tuple[int, int]] = (),
    since_ns: int | None = None,
) -> Iterator[WakuRow | Undecodable]:
    """The topic's stored messages, oldest first, decrypted with the channel's key;
    ``windows``: the community's archive windows ([from, to) seconds, sorted), to say which
    one holds each message (its provenance); ``since_ns``: only those stored with a
    timestamp from then on."""
    for page in _stored_pages(store, content_topic, since_ns):
        for message in page:
            yield stored_row(message, symmetric_key, source=source, windows=windows)


def stored_row(
    message: StoredMessage,
    symmetric_key: bytes,
    *,
    source: str = "store",
    windows: Sequence[tuple[int, int]] = (),
) -> WakuRow | Undecodable:
    """One stored message decrypted with its channel's key (the bridge's live path indexes
    each envelope it stores so); its archive window the one of ``windows`` holding it."""
    from waku_legacy.crypto.payload import decode_payload

    seconds = message.timestamp // _NANOS
    facts = WakuFacts(
        "0x" + message.message_hash.hex(), message.content_topic, message.pubsub_topic,
        seconds, "", window_of(windows, seconds), source,
    )  # fmt: skip
    if message.version != 1:
        return Undecodable("undecryptable", f"payload version {message.version}, not 1", facts)
    try:
        decoded = decode_payload(bytes(message.payload), symmetric_key=symmetric_key)
    except WakuLegacyError as exc:
        return Undecodable("undecryptable", f"{type(exc).__name__}: {exc}"[:160], facts)
    signer = "0x" + decoded.signer.hex() if decoded.signer else ""
    return WakuRow(bytes(decoded.payload), dataclasses.replace(facts, payload_signer=signer))


def window_of(windows: Sequence[tuple[int, int]], seconds: int) -> tuple[int, int] | None:
    """The window of ``windows`` (sorted [from, to) seconds) that holds ``seconds``."""
    import bisect

    at = bisect.bisect_right(windows, (seconds, 2**63)) - 1
    return windows[at] if at >= 0 and seconds < windows[at][1] else None


def archive_windows(
    archive_dir: str | Path, community: CommunityId, flavour: str
) -> list[tuple[int, int]]:
    """The windows of the community's archives in ``archive_dir`` (none yet: empty)."""
    from waku_legacy.archive.data_files import read_index

    index = read_index(archive_dir, community, flavour=flavour)
    return sorted({(e.window_from, e.window_to) for e in index.entries})


def _community(given: CommunityConfig | CommunityId | str) -> tuple[CommunityId, tuple[str, ...]]:
    from waku_legacy.community_config import CommunityConfig
    from waku_legacy.identity.topics import CommunityId

    if isinstance(given, CommunityConfig):
        return given.id, tuple(given.channels)
    if isinstance(given, CommunityId):
        return given, ()
    return CommunityId.parse(given), ()


def index_from_store(
    store_dsn: str,
    community_ids: Iterable[CommunityConfig | CommunityId | str],
    index: HistoryIndex,
    *,
    progress: Progress | None = None,
    windows: Mapping[str, Sequence[tuple[int, int]]] | None = None,
    since_ns: int | None = None,
    workers: int = 1,
    predecoded: Predecoded | None = None,
) -> IndexCounts:
    """Index every channel message of the communities in the store at ``store_dsn``: the
    channels of a given :class:`~waku_legacy.community_config.CommunityConfig`, plus those of
    the newest description signed by the community key found in the store. ``windows``:
    per community id, its archive windows (:func:`archive_windows`), for provenance;
    ``since_ns``: only the messages stored with a timestamp from then on (the bridge's viewer
    after an archive run: what is new since its last pass); ``workers`` > 1: decryption and
    decoding (two signature recoveries per message) in that many processes while this one
    reads the store and writes the index; ``predecoded``: the channels whose events were
    decoded elsewhere from the same rows (the migration's Spark tasks that decrypt them),
    folded in here as if read from the store (``since_ns`` does not apply to them)."""
    from waku_legacy.history.index import IndexCounts
    from waku_legacy.identity.descriptions import newest_description
    from waku_legacy.identity.topics import (
        chat_topic,
        symmetric_key_for_chat,
        v1_topic_to_content_topic,
    )
    from waku_legacy.members.published import read_store_published
    from waku_legacy.store import open_store

    total = IndexCounts()
    with contextlib.ExitStack() as stack:
        store = stack.enter_context(open_store(store_dsn))
        stack.enter_context(index.bulk_load())
        pools: list[ProcessPoolExecutor] = []

        def pool() -> ProcessPoolExecutor:  # spawned once, when first needed: the caller
            if not pools:  # may hold threads and a JVM
                pools.append(stack.enter_context(
                    ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn"))
                ))  # fmt: skip
            return pools[0]

        for given in community_ids:
            community, channels = _community(given)
            description = newest_description(
                read_store_published(store, community, "store").descriptions
            )
            if description is not None:
                index.set_description(description, str(community))
                channels = tuple(dict.fromkeys([*channels, *description.channel_uuids]))
            if not channels:
                raise ConfigError(
                    f"{community}: no channels to read: give the community's [[community]] "
                    "table (its channels) or a store holding its signed CommunityDescription"
                )
            read = 0
            for channel in channels:
                chat = community.channel_chat_id(channel)
                topic, key = (
                    v1_topic_to_content_topic(chat_topic(chat)),
                    symmetric_key_for_chat(chat),
                )
                spans = tuple((windows or {}).get(str(community), ()))
                given_pairs = predecoded(str(community), topic, spans) if predecoded else None
                if given_pairs is not None:
                    joiner = _segment_joiner()
                    events: Iterable[Event] = (
                        _joined(event, data, joiner, str(community)) for event, data in given_pairs
                    )
                elif workers > 1:
                    pages = _stored_pages(store, topic, since_ns)
                    events = _decoded_in_workers(pages, key, str(community), spans, pool(), workers)
                else:
                    rows = store_rows(store, topic, key, windows=spans, since_ns=since_ns)
                    events = decode_rows(rows, str(community))
                counts = index.add_events(str(community), events)
                total.merge(counts)
                read += counts.messages + counts.duplicates
                if progress is not None:
                    progress(str(community), read)
    return total


# -- the archives ----------------------------------------------------------------------------------


def archive_rows(entries: Iterable[ArchivedEntry], *, source: str) -> Iterator[WakuRow]:
    """Archived messages as rows: the payload is the decrypted data, ``sig`` the signer."""
    from waku_legacy.archive.partition import WEEK_SECONDS
    from waku_legacy.identity.topics import v1_topic_to_content_topic

    for entry in entries:
        message = entry.message
        signer = "0x" + bytes(message.sig).hex() if len(message.sig) == 65 else ""
        # the archive's own end (status-go's last window may be shorter than a week); a week
        # only for an entry built without it
        end = entry.window_to if entry.window_to is not None else entry.window_from + WEEK_SECONDS
        window = (entry.window_from, end)
        yield WakuRow(
            bytes(message.payload),
            WakuFacts(
                "0x" + bytes(message.hash).hex(),
                v1_topic_to_content_topic(bytes(message.topic)),
                "",
                int(message.timestamp),
                signer,
                window,
                source,
            ),
        )


def index_from_archive_entries(
    entries: Iterable[ArchivedEntry], community_id: str, index: HistoryIndex, *, source: str
) -> IndexCounts:
    """Index archived messages (their channel-topic and ``-memberUpdate`` copies are one)."""
    return index.add_events(community_id, decode_rows(archive_rows(entries, source=source),
                                                      community_id))  # fmt: skip


@dataclass(frozen=True, slots=True)
class ArchiveEntries:
    """The archived messages of one community and where they came from."""

    entries: Iterable[ArchivedEntry]  # import order: archives oldest first
    origin: str  # where they came from, for a report
    folder: Path | None  # where the link message files may be
    link: str | None = None  # the fetched torrent's info hash or the Logos Storage index CID
    source: str = ""  # Provenance.source: "archive-dir", "torrent", "logos-storage"


def folder_archive_entries(
    archive_dir: Path, community: CommunityId, flavour: str
) -> Iterator[ArchivedEntry]:
    """The archives of a folder, one archive in memory at a time, oldest window first."""
    from waku_legacy.archive.data_files import read_archive, read_index
    from waku_legacy.members.preview import ArchivedEntry

    index = read_index(archive_dir, community, flavour=flavour)
    for entry in sorted(index.entries, key=lambda e: (e.window_from, e.offset)):
        archive = read_archive(archive_dir, community, entry, flavour=flavour)
        for message in archive.messages:
            yield ArchivedEntry(entry.window_from, message, entry.window_to)


def open_archive_entries(
    args: argparse.Namespace, community: CommunityId, scratch: Path, *, command: str
) -> ArchiveEntries:
    """The archived messages named by the source options ``members preview`` and ``history
    export`` share (exactly one of ``archive_dir``, ``torrent``, ``magnet``, ``cid`` with
    ``logos_url``; ``peer``, ``flavour``, ``save_dir``, ``metadata_timeout``, ``timeout``,
    ``quiet`` and the torrent session's options), read from the folder or fetched as a
    member fetches them (into ``save_dir`` or ``scratch``)."""
    from waku_legacy.members.preview import ArchivedEntry

    given = [v for v in (args.archive_dir, args.torrent, args.magnet, args.cid) if v]
    if len(given) != 1:
        raise ConfigError(
            f"{command}: give exactly one of --archive-dir, --torrent, --magnet or --cid"
        )
    if args.cid is not None or args.logos_url is not None:
        if args.cid is None or args.logos_url is None:
            raise ConfigError("--cid and --logos-url go together")
        from waku_legacy.archive.logos_storage import LogosStorageClient, fetch_by_cid

        fetched = fetch_by_cid(LogosStorageClient(args.logos_url, timeout=args.timeout), args.cid)
        span = {a["archive_id"]: (int(a["from"]), int(a["to"])) for a in fetched.archives}
        entries = [ArchivedEntry(span[i][0], m, span[i][1]) for i, m in fetched.messages]
        return ArchiveEntries(
            entries, f"Logos Storage index {args.cid}", None, args.cid, "logos-storage"
        )
    if args.archive_dir:
        from waku_legacy.archive.layout import community_folder

        folder = community_folder(Path(args.archive_dir).resolve(), community)
        if not (folder / str(community) / "index").is_file():
            raise ConfigError(f"--archive-dir {args.archive_dir}: no {community}/index there")
        return ArchiveEntries(
            folder_archive_entries(folder, community, args.flavour), str(folder), folder,
            source="archive-dir",
        )  # fmt: skip
    from waku_legacy.archive.cli import Progress, member_fetch_options
    from waku_legacy.archive.fetch import fetch_archives

    options = member_fetch_options(args)
    save_dir = Path(args.save_dir) if args.save_dir else scratch / "fetched"
    source = args.magnet or args.torrent
    result = fetch_archives(source, community, save_dir, options, progress=Progress(not args.quiet))
    fetched_entries: Sequence[ArchivedEntry] = [
        ArchivedEntry(f.entry.window_from, m, f.entry.window_to)
        for f in result.archives
        for m in f.archive.messages
    ]
    torrent_folder = Path(args.torrent).resolve().parent if args.torrent else None
    origin = f"{'magnet link' if args.magnet else args.torrent} ({result.info_hash})"
    return ArchiveEntries(fetched_entries, origin, torrent_folder, result.info_hash, "torrent")
