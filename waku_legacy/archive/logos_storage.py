"""Logos Storage (formerly Codex): the second archive back end, as status-go's current code has it.

status-go (``protocol/communities/archive/archive_manager.go``,
``createHistoryArchiveLogosStorage``; reader in
``protocol/communities/archive/logosstorage/archive_manager_logos_storage.go``) uploads every
``WakuMessageArchive`` on its own (the bare protobuf: no ``data`` file, no 102400-byte
padding), then a ``LogosStorageWakuMessageArchiveIndex`` whose keys are
``crypto.Keccak256Hash(proto.Marshal(LogosStorageWakuMessageArchiveIndexMetadata{Metadata,
Cid})).String()`` ("0x" + 64 hex; ``version`` left 0), and publishes the index's CID as the
archive link. The previous index's entries are carried into the new one.

Here the archives are still planned, encoded and kept in the local store exactly as for the
torrent back end (:mod:`waku_legacy.archive.data_files`: it is the record of what is archived and
makes reruns deterministic); :func:`publish_archives` uploads each stored archive's bytes
(``size - padding``: the bare protobuf) that has no CID yet, then the index when its bytes
changed. The CIDs live in ``<archive dir>/.0x<id>.logos-storage.json`` (written atomically),
so a rerun uploads nothing twice.

The node is spoken to over its REST API (logos-storage-nim ``openapi.yaml`` and
``storage/rest/api.nim``, base ``/api/storage/v1``): ``POST /data`` (body: the bytes,
``application/octet-stream``) answers 200 with the CID as text/plain; ``GET
/data/{cid}/network/stream`` answers 200 with the bytes, 400 for an invalid CID and 404 when
the content cannot be found. This client is synchronous (stdlib ``urllib``): the migration
calls it from the Spark driver, the bridge from a worker thread.
"""

from __future__ import annotations

import hashlib
import http.client
import json
import logging
import os
import re
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from waku_legacy.archive.data_files import read_archive_bytes, read_index
from waku_legacy.archive.encode import Flavour, decode_archive, encode_archive_map, encode_metadata
from waku_legacy.archive.errors import ArchiveCorrupted, ArchiveError, FetchError
from waku_legacy.archive.layout import CommunityLayout
from waku_legacy.archive.message import ArchiveMessage
from waku_legacy.crypto.keccak import keccak256
from waku_legacy.durable import write_atomic
from waku_legacy.errors import ConfigError, DecodeError
from waku_legacy.faults import FaultHook, no_fault
from waku_legacy.identity.topics import CommunityId
from waku_legacy.proto import status_archive_pb2
from waku_legacy.proto.codec import ProtobufDecodeError, parse_message
from waku_legacy.proto.wire import encode_varint

__all__ = [
    "API_PREFIX",
    "BACKENDS",
    "LOGOS_STORAGE",
    "TORRENT",
    "LogosStorageClient",
    "LogosStorageError",
    "LogosStorageFetch",
    "LogosStorageIndexEntry",
    "LogosStoragePublish",
    "check_cid",
    "client_for",
    "decode_logos_index",
    "encode_logos_index",
    "fetch_by_cid",
    "logos_index_entry",
    "parse_backend",
    "publish_archives",
    "recorded_index_cid",
    "state_path",
]

TORRENT = "torrent"
LOGOS_STORAGE = "logos-storage"
BACKENDS = (TORRENT, LOGOS_STORAGE)
API_PREFIX = "/api/storage/v1"
MAX_INDEX_BYTES = 64 * 1024 * 1024
MAX_DOWNLOAD_BYTES = 256 * 1024 * 1024
# A CID in any multibase the node prints (base58btc "z…"/"Qm…", base32 "b…"): letters and
# digits only, so it is safe as one URL path segment.
_CID = re.compile(r"^[A-Za-z0-9]{8,256}$")


log = logging.getLogger("waku_legacy.archive.logos_storage")


class LogosStorageError(ArchiveError):
    """The Logos Storage node refused a request or could not be reached."""


def parse_backend(value: Any, where: str) -> str:
    """The ``backend`` setting of a ``[[community]]``: ``"torrent"`` or ``"logos-storage"``.

    One community publishes one kind of archive link: a member reads the link according to its
    own back end, so a torrent member handed a CID (or a Logos Storage member handed a magnet
    link) cancels its download and fails. Asking for both is refused with that reason."""
    if value is None:
        from waku_legacy.archive.defaults import BACKEND

        return BACKEND
    both = (isinstance(value, list | tuple) and len(value) > 1) or value in ("both", "all")
    if both:
        raise ConfigError(
            f"{where}: key 'backend' asks for both archive back ends ({value!r}); a community "
            "publishes one kind of archive link: a member reads a link with its own back end, "
            "so a torrent member handed a Logos Storage CID (or the reverse) cancels its "
            'download and fails. Choose "torrent" or "logos-storage".'
        )
    if isinstance(value, list | tuple) and len(value) == 1:
        value = value[0]
    if value not in BACKENDS:
        raise ConfigError(
            f"{where}: key 'backend' must be \"torrent\" or \"logos-storage\", got {value!r}"
        )
    return str(value)


def parse_node_url(value: Any, where: str) -> str:
    """``[logos_storage] url``: the node's REST root (``http://host:port``)."""
    if not isinstance(value, str) or not value:
        raise ConfigError(f"{where}: key 'url' must be the node's REST URL, got {value!r}")
    parts = urllib.parse.urlsplit(value)
    if parts.scheme not in ("http", "https") or not parts.netloc or parts.query:
        raise ConfigError(
            f"{where}: key 'url' must look like http://127.0.0.1:8080 (the node's REST root), "
            f"got {value!r}"
        )
    return value.rstrip("/")


def check_cid(cid: Any, what: str = "Logos Storage CID") -> str:
    """``cid`` if it looks like a CID (multibase letters/digits), else DecodeError."""
    if not isinstance(cid, str) or not _CID.match(cid):
        raise DecodeError(what, f"{str(cid)[:80]!r} is not a CID (multibase letters/digits)")
    return cid


# -- index codec ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class LogosStorageIndexEntry:
    archive_id: str  # "0x" + keccak256(metadata_bytes)
    window_from: int
    window_to: int
    content_topics: tuple[bytes, ...]
    cid: str
    metadata_bytes: bytes  # serialized LogosStorageWakuMessageArchiveIndexMetadata


def logos_index_entry(
    window_from: int, window_to: int, content_topics: tuple[bytes, ...], cid: str
) -> LogosStorageIndexEntry:
    """The index entry of an uploaded archive, keyed as status-go keys it."""
    check_cid(cid)
    metadata = encode_metadata(window_from, window_to, content_topics)
    raw_cid = cid.encode("ascii")
    body = (
        b"\x12" + encode_varint(len(metadata)) + metadata
        + b"\x1a" + encode_varint(len(raw_cid)) + raw_cid
    )  # fmt: skip
    return LogosStorageIndexEntry(
        "0x" + keccak256(body).hex(), window_from, window_to, content_topics, cid, body
    )


def encode_logos_index(entries: list[LogosStorageIndexEntry]) -> bytes:
    """Serialized ``LogosStorageWakuMessageArchiveIndex``, map entries sorted by key."""
    return encode_archive_map((e.archive_id, e.metadata_bytes) for e in entries)


def decode_logos_index(data: bytes, *, verify_keys: bool = True) -> list[LogosStorageIndexEntry]:
    """Parse an index; with ``verify_keys`` every key must be the keccak of its entry."""
    what = "Logos Storage archive index"
    try:
        index = parse_message(
            status_archive_pb2.LogosStorageWakuMessageArchiveIndex, data, what,
            max_size=MAX_INDEX_BYTES,
        )  # fmt: skip
    except ProtobufDecodeError as exc:
        raise ArchiveCorrupted(what, exc.reason) from exc
    out = []
    for key, meta in sorted(index.archives.items()):
        check_cid(meta.cid, f"{what}: entry {key[:70]!r}")
        body = meta.SerializeToString()
        if verify_keys and key != "0x" + keccak256(body).hex():
            raise ArchiveCorrupted(what, f"key {key[:70]!r} is not keccak256 of its entry")
        m = meta.metadata
        out.append(
            LogosStorageIndexEntry(
                key, getattr(m, "from"), m.to, tuple(m.contentTopic), meta.cid, body
            )
        )
    return out


# -- REST client ---------------------------------------------------------------------------


class _Transient(LogosStorageError):
    """A failure worth retrying: 5xx, a dropped or refused connection, a timeout."""


class LogosStorageClient:
    """The REST subset the archives need (``/api/storage/v1``).

    Every request it makes is idempotent (an upload is content addressed: the same bytes
    give the same CID), so a transient failure -- a 5xx answer, a dropped or refused
    connection, a timeout -- is retried up to ``attempts`` times in all, ``backoff`` seconds
    doubling between tries (0.5, 1, 2 s by default: a node restarting is back within a few
    seconds, a node that is down fails the run in under 4 s). Each retry is logged and
    counted in ``retries``; 4xx answers are not retried (the request is wrong)."""

    def __init__(
        self, url: str, *, timeout: float = 60.0, attempts: int = 4, backoff: float = 0.5,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:  # fmt: skip
        self.url = parse_node_url(url, "Logos Storage node")
        self.timeout = timeout
        self.attempts = max(1, attempts)
        self.backoff = backoff
        self.sleep = sleep
        self.retries = 0  # transient failures retried, over this client's life

    def _request(self, method: str, path: str, body: bytes | None = None) -> bytes:
        delay = self.backoff
        for attempt in range(1, self.attempts + 1):
            try:
                return self._request_once(method, path, body)
            except _Transient as exc:
                if attempt == self.attempts:
                    raise LogosStorageError(f"{exc} (after {attempt} attempts)") from None
                self.retries += 1
                log.warning(
                    "Logos Storage request failed, retrying in %.1f s (attempt %d of %d): %s",
                    delay, attempt, self.attempts, exc,
                )  # fmt: skip
                self.sleep(delay)
                delay *= 2
        raise AssertionError("unreachable")  # pragma: no cover

    def _request_once(self, method: str, path: str, body: bytes | None = None) -> bytes:
        request = urllib.request.Request(
            self.url + API_PREFIX + path, data=body, method=method,
            headers={"Content-Type": "application/octet-stream"} if body is not None else {},
        )  # fmt: skip
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as answer:
                data: bytes = answer.read(MAX_DOWNLOAD_BYTES + 1)
        except urllib.error.HTTPError as exc:
            text = exc.read(500).decode("utf-8", "replace").strip()
            error = _Transient if exc.code >= 500 else LogosStorageError
            raise error(
                f"Logos Storage node {self.url}: {method} {API_PREFIX}{path} answered "
                f"{exc.code}" + (f" ({text})" if text else "")
            ) from None
        except (urllib.error.URLError, OSError, http.client.HTTPException) as exc:
            reason = getattr(exc, "reason", exc)
            raise _Transient(
                f"cannot reach the Logos Storage node {self.url}: {reason!r}"
            ) from None
        if len(data) > MAX_DOWNLOAD_BYTES:
            raise LogosStorageError(f"{method} {path}: answer over {MAX_DOWNLOAD_BYTES} bytes")
        return data

    def upload(self, data: bytes) -> str:
        """``POST /data``: store ``data``; returns its CID."""
        if not data:
            raise LogosStorageError("refusing to upload 0 bytes (the node cannot store them)")
        answer = self._request("POST", "/data", data)
        try:
            return check_cid(answer.decode("ascii").strip(), "CID the node answered")
        except (UnicodeDecodeError, DecodeError) as exc:
            raise LogosStorageError(f"POST /data: the answer is not a CID ({exc})") from None

    def exists(self, cid: str) -> bool:
        """``GET /data/{cid}/exists``: whether the node holds the CID's block locally (for a
        dataset: its manifest; the node answers ``{"<cid>": true|false}``)."""
        check_cid(cid)
        answer = self._request("GET", f"/data/{cid}/exists")
        try:
            value = json.loads(answer)[cid]
        except (ValueError, KeyError, TypeError) as exc:
            raise LogosStorageError(
                f"GET /data/{cid}/exists: not the node's {{cid: bool}} answer ({exc!r})"
            ) from None
        if not isinstance(value, bool):
            raise LogosStorageError(f"GET /data/{cid}/exists: {value!r} is not true or false")
        return value

    def download(self, cid: str) -> bytes:
        """``GET /data/{cid}/network/stream``: the content, from the network if needed."""
        check_cid(cid)
        return self._request("GET", f"/data/{cid}/network/stream")


# -- publishing ----------------------------------------------------------------------------


def state_path(layout: CommunityLayout) -> Path:
    """``<archive dir>/.0x<id>.logos-storage.json``: the CIDs uploaded so far."""
    return layout.archive_dir / f".{layout.name}.logos-storage.json"


def _read_state(path: Path) -> dict[str, Any]:
    try:
        state = json.loads(path.read_bytes())
    except FileNotFoundError:
        return {"archives": {}, "index_cid": None, "index_sha256": None}
    except (OSError, ValueError, RecursionError) as exc:  # RecursionError: nested too deeply
        raise ArchiveCorrupted("Logos Storage state", f"{path}: {exc!r}") from None
    if not isinstance(state, dict) or not isinstance(state.get("archives"), dict):
        raise ArchiveCorrupted("Logos Storage state", f"{path}: not a state document")
    return state


@dataclass(slots=True)
class LogosStoragePublish:
    index_cid: str | None = None
    archives: int = 0
    uploaded_archives: int = 0
    uploaded_index: bool = False
    archive_cids: dict[str, str] = field(default_factory=dict)  # local archive id -> CID
    checked: int = 0  # saved CIDs the node was asked about (exists)
    missing: int = 0  # of those, the node no longer held: uploaded again
    retries: int = 0  # transient failures retried during this publish

    @property
    def changed(self) -> bool:
        """Whether the node was sent anything (the link may need publishing again)."""
        return bool(self.uploaded_archives or self.uploaded_index)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def publish_archives(
    archive_dir: str | os.PathLike[str],
    community: CommunityId | str,
    client: LogosStorageClient,
    *,
    flavour: Flavour | str = Flavour.STATUS_GO,
    fault: FaultHook = no_fault,
    fsync: bool = True,
) -> LogosStoragePublish:
    """Upload every stored archive the node does not hold, then the index if it changed or
    the node lost it.

    The saved state is not trusted blindly: the node is asked (``exists``) for every CID
    the link depends on -- each archive's and the index's -- and what it no longer holds
    (real nodes expire blocks: block TTL, 30 days by default) is uploaded again. The state
    is saved after each upload, so a run killed half way uploads only what is left.
    """
    flavour = Flavour.parse(flavour)
    if flavour is not Flavour.STATUS_GO:
        raise ConfigError("the Logos Storage back end carries status-go archives only")
    layout = CommunityLayout.of(archive_dir, community)
    path = state_path(layout)
    state = _read_state(path)
    cids: dict[str, str] = state["archives"]
    report = LogosStoragePublish(index_cid=state.get("index_cid"))

    def save() -> None:
        data = (json.dumps(state, indent=2, sort_keys=True) + "\n").encode()
        write_atomic(path, data, fault=fault, step="logos-storage-state", fsync=fsync)

    retries_before = client.retries
    index = read_index(archive_dir, layout.community, flavour=flavour)
    entries = []
    for stored in index.entries:
        cid = cids.get(stored.archive_id)
        if cid is not None:
            report.checked += 1
            if not client.exists(cid):
                log.warning("Logos Storage node lost archive %s (%s): uploading it again",
                            stored.archive_id, cid)  # fmt: skip
                report.missing += 1
                cid = None
        if cid is None:
            cid = client.upload(read_archive_bytes(layout.data, stored))
            cids[stored.archive_id] = cid
            report.uploaded_archives += 1
            save()
        report.archive_cids[stored.archive_id] = cid
        entries.append(
            logos_index_entry(stored.window_from, stored.window_to, stored.content_topics, cid)
        )
    report.archives = len(entries)
    if not entries:
        return report
    data = encode_logos_index(entries)
    digest = hashlib.sha256(data).hexdigest()
    lost_index = False
    if state.get("index_sha256") == digest and state.get("index_cid"):
        report.checked += 1
        lost_index = not client.exists(state["index_cid"])
        report.missing += int(lost_index)
    if lost_index or state.get("index_sha256") != digest or not state.get("index_cid"):
        state["index_cid"] = client.upload(data)
        state["index_sha256"] = digest
        report.uploaded_index = True
        save()
    report.index_cid = state["index_cid"]
    report.retries = client.retries - retries_before
    return report


def recorded_index_cid(layout: CommunityLayout) -> str | None:
    """The index CID last uploaded for the community (None before the first upload)."""
    cid = _read_state(state_path(layout)).get("index_cid")
    return cid if isinstance(cid, str) else None


# -- fetching ------------------------------------------------------------------------------


@dataclass(slots=True)
class LogosStorageFetch:
    index_cid: str
    archives: list[dict[str, Any]] = field(default_factory=list)
    messages: list[tuple[str, ArchiveMessage]] = field(default_factory=list)  # (id, msg)


def fetch_by_cid(
    client: LogosStorageClient,
    index_cid: str,
    *,
    on_archive: Callable[[LogosStorageIndexEntry, bytes], None] | None = None,
) -> LogosStorageFetch:
    """A member's view: the index at ``index_cid``, then every archive it names.

    Each archive's window must match its index entry (a node handing out other bytes under a
    CID is caught here). Messages come out in window order, each archive's in its order.
    """
    check_cid(index_cid)
    try:
        entries = decode_logos_index(client.download(index_cid))
    except LogosStorageError as exc:
        raise FetchError(f"cannot fetch the archive index {index_cid}: {exc}") from None
    result = LogosStorageFetch(index_cid)
    for entry in sorted(entries, key=lambda e: (e.window_from, e.archive_id)):
        data = client.download(entry.cid)
        archive = decode_archive(data, flavour=Flavour.STATUS_GO, what=f"archive {entry.cid}")
        if (archive.window_from, archive.window_to) != (entry.window_from, entry.window_to):
            raise ArchiveCorrupted(
                f"archive {entry.cid}",
                f"covers {archive.window_from}..{archive.window_to}, the index says "
                f"{entry.window_from}..{entry.window_to}",
            )
        if on_archive is not None:
            on_archive(entry, data)
        result.archives.append(
            {"archive_id": entry.archive_id, "cid": entry.cid, "from": entry.window_from,
             "to": entry.window_to, "messages": len(archive.messages)}
        )  # fmt: skip
        result.messages.extend((entry.archive_id, m) for m in archive.messages)
    return result


def client_for(backend: str, url: str | None, what: str) -> LogosStorageClient | None:
    """The node client a community with ``backend`` uploads to (None: the torrent back end)."""
    if backend != LOGOS_STORAGE:
        return None
    if url is None:
        raise ConfigError(f'{what}: backend = "logos-storage" needs [logos_storage] url')
    return LogosStorageClient(url)
