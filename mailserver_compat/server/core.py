"""The Waku v1 mailserver's sans-IO core: what a request and a live envelope are checked
against and what a page of history is sent as, with no sockets or event loop (the asyncio node
around it is :mod:`.asyncio_server`).

Request handling follows status-go's ``mailserver.go``:

1. decode the request in either form (:func:`~waku_legacy.mailserver_compat.wire.request.
   decode_p2p_request`: an envelope encrypted with the request key or to this node's key,
   or the plain ``[id, from, to, limit, cursor, bloom, topics]``); an envelope request must
   carry enough PoW when ``min_request_pow`` is set;
2. apply the serving rules (:func:`~waku_legacy.mailserver_compat.wire.request.normalize_request`:
   limit 0 -> 1000, > 1000 refused, upper 0 -> now + 60, bloom or topics required, topics
   override the bloom);
3. rate limit fresh requests with token buckets per peer (one token per ``rate_limit``
   seconds, burst ``limits.request_burst``) and per source address (``limits.
   address_request_*``: new node keys from one address share its budget); a request that
   continues from a cursor this server handed the same peer for the same query is a page
   of an answered request and spends nothing (status-go's client sends it as soon as the
   previous page completes); trusted peers are exempt;
4. read one page from the store, examining at most ``limits.scan_limit`` rows (a partial
   page then ends with the cursor of the last row examined, and the client continues),
   send it in 0x7f packets each holding as many envelopes as fit ``max_message_size`` (one
   envelope per packet for non-batch requests), then 0x7d with the request id, the last
   envelope's hash and the next page's cursor.

Any failure in 1-3 is answered with a 0x7d ``ERROR=`` report naming the problem; a payload
so broken that no request id can be read from it ends the session (SUBPROTOCOL_ERROR).
Either way the failure is logged and the server keeps serving its other peers.

Live envelopes (0x01) are rate limited per peer and per source address (``limits.live_*``)
and checked by :func:`validate_live_envelope`, the rules of status-go's ``Waku.add``
(a TTL above 0, not sent more than 10 s in the future, not expired, not over the size
limit, PoW, adjusted for a future send time, at least the requirement this node
advertises), de-duplicated through a bounded seen set, and only then handed to the sink:
the sink (the v1 store of ``v1 serve --live-dump``, the bridge's store and archives) never
sees an envelope that failed them. Every refusal is logged with its reason, counted in
``stats`` (``refused_<kind>_<reason>``) and :attr:`MailServer.refusals`, and passed to the
``on_refusal`` hook. 0x7f packets are only taken from trusted peers (status-go ignores
them from others): trusted history is delivered as is.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import coincurve
import rlp

from waku_legacy.config.keys import Kind, key
from waku_legacy.crypto.keccak import keccak256
from waku_legacy.errors import CryptoError, DecodeError
from waku_legacy.limits import Continuations, RateLimiter, address_key, allow_all
from waku_legacy.mailserver_compat.server.limits import V1Limits
from waku_legacy.mailserver_compat.storage.envelope_store import (
    EnvelopeQuery,
    EnvelopeStore,
    StorePage,
)
from waku_legacy.mailserver_compat.waku_peer import DEFAULT_MAX_MESSAGE_SIZE
from waku_legacy.mailserver_compat.wire.complete import ZERO_HASH, RequestComplete
from waku_legacy.mailserver_compat.wire.cursor import CURSOR_SIZE
from waku_legacy.mailserver_compat.wire.envelope import Envelope
from waku_legacy.mailserver_compat.wire.pow import pow_of
from waku_legacy.mailserver_compat.wire.request import (
    MessagesRequest,
    RequestForm,
    decode_p2p_request,
    default_request_key,
    normalize_request,
)
from waku_legacy.mailserver_compat.wire.waku_protocol import (
    StatusOptions,
)

__all__ = [
    "ENVELOPE_HEADER_LENGTH",
    "STORE_UNAVAILABLE",
    "SYNC_ALLOWANCE",
    "LiveRefusal",
    "MailServerConfig",
    "MailServerCore",
    "PreparedRequest",
    "RequestRejected",
    "SeenSet",
    "V1Limits",
    "bundle_envelopes",
    "validate_live_envelope",
]


# The request's failure text while the store cannot be reached (nwaku's store error name
# for it, waku_store/common.nim): the peer may ask again later.
STORE_UNAVAILABLE = "SERVICE_UNAVAILABLE: the store is unreachable; retry later"

SYNC_ALLOWANCE = 10  # status-go DefaultSyncAllowance, seconds
ENVELOPE_HEADER_LENGTH = 20  # status-go EnvelopeHeaderLength: size() = 20 + len(data)
_ISSUED_CURSORS = 100_000  # cursors remembered for continuations (oldest forgotten first)
_LIST_HEADER_MAX = 9  # an RLP list header is at most 9 bytes


@dataclass(frozen=True)
class MailServerConfig:
    """How the mailserver decodes, limits and answers.

    ``symmetric_key``: the request key (None: PBKDF2 of status-go's default password
    ``status-offline-inbox``); ``decrypt_with_node_key``: also open requests encrypted to
    this node's key; ``rate_limit``: seconds per fresh request of one peer (0 = off;
    ``limits.request_burst`` may be sent at once); ``trusted_peers``: 64-byte public keys
    exempt from the rate limits whose 0x7f envelopes are accepted; ``min_pow``: advertised
    and enforced for live envelopes; ``limits``: the per-peer and per-address limits. The
    keys declared here are the bridge's ``[v1]`` keys of the same names.
    """

    symmetric_key: bytes | None = None
    decrypt_with_node_key: bool = True
    rate_limit: float = key(
        1.0,
        kind=Kind.DURATION,
        min=0,
        example="1s",
        doc="a fresh history request per peer per interval (0: none)",
    )
    max_message_size: int = DEFAULT_MAX_MESSAGE_SIZE
    min_request_pow: float = 0.0
    min_pow: float = key(
        0.001, min=0, example=0.002, doc="advertised, and enforced for live envelopes"
    )
    trusted_peers: frozenset[bytes] = frozenset()
    confirmations: bool = False
    # the live bridge's seen-cache holds as many (bridge.live)
    seen_capacity: int = key(
        100_000,
        min=100,
        max=10_000_000,
        example=100000,
        doc="bounded seen-cache (loops and repeats)",
    )
    client_id: str = "waku-legacy-mailserver/v0.1.0"
    limits: V1Limits = field(default_factory=V1Limits)


class RequestRejected(Exception):
    """A request answered with an error report (``request_id`` known) or a disconnect;
    ``code`` is the refusal's metric label."""

    def __init__(self, request_id: bytes | None, message: str, code: str = "invalid") -> None:
        super().__init__(message)
        self.request_id = request_id
        self.message = message
        self.code = code


@dataclass(frozen=True, slots=True)
class LiveRefusal:
    """Why a live envelope was not accepted: ``code`` (a metric label) and status-go's
    ``description``."""

    code: str
    description: str


def validate_live_envelope(
    raw: bytes,
    envelope: Envelope,
    *,
    now: int,
    min_pow: float,
    max_message_size: int,
) -> LiveRefusal | None:
    """The rules a Waku v1 node applies before accepting a live envelope (status-go
    ``Waku.add``), plus a TTL above 0 (a zero TTL made PoW free). ``None``: accept."""
    if envelope.ttl <= 0:
        return LiveRefusal("zero_ttl", "envelope with zero TTL")
    if envelope.expiry < envelope.ttl:
        # status-go's uint32 ``expiry - ttl`` wraps around: a send time in the far future.
        return LiveRefusal("in_future", "envelope created in the future")
    sent = envelope.expiry - envelope.ttl
    if sent > now + SYNC_ALLOWANCE:
        return LiveRefusal("in_future", "envelope created in the future")
    if envelope.expiry < now:
        return LiveRefusal("expired", "expired envelope")
    if len(raw) > max_message_size or ENVELOPE_HEADER_LENGTH + len(envelope.data) > (
        max_message_size
    ):
        return LiveRefusal("oversized", "huge messages are not allowed")
    if min_pow > 0:
        # status-go recomputes the PoW of an envelope sent ahead of now over the longer
        # lifetime, plus one second for latency.
        extra = sent - now + 1 if sent > now else 0
        if pow_of(envelope, extra_ttl=extra) < min_pow:
            return LiveRefusal("low_pow", "envelope with low PoW received")
    return None


class SeenSet:
    """A bounded set of envelope hashes (oldest forgotten first)."""

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self._hashes: OrderedDict[bytes, None] = OrderedDict()

    def add(self, digest: bytes) -> bool:
        """``True`` if ``digest`` is new (and now remembered)."""
        if digest in self._hashes:
            return False
        self._hashes[digest] = None
        if len(self._hashes) > self.capacity:
            self._hashes.popitem(last=False)
        return True

    def __contains__(self, digest: object) -> bool:
        return digest in self._hashes

    def __len__(self) -> int:
        return len(self._hashes)


def bundle_envelopes(envelopes: Sequence[bytes], max_message_size: int) -> list[list[bytes]]:
    """Split encoded envelopes into packets whose RLP list fits ``max_message_size``.

    An envelope too big for any packet still goes alone in one (status-go does the same;
    the receiving peer decides what to do with it).
    """
    budget = max_message_size - _LIST_HEADER_MAX
    bundles: list[list[bytes]] = []
    current: list[bytes] = []
    size = 0
    for raw in envelopes:
        if current and size + len(raw) > budget:
            bundles.append(current)
            current, size = [], 0
        current.append(raw)
        size += len(raw)
    if current:
        bundles.append(current)
    return bundles


def _request_id_of(payload: bytes) -> bytes | None:
    """The id an error report can name: the envelope hash of an envelope request, or the
    id field of a plain request; ``None`` when the payload shows neither."""
    try:
        item = rlp.decode(payload, strict=True)
    except Exception:
        return None
    if isinstance(item, list) and len(item) == 5:
        return keccak256(payload)
    if isinstance(item, list) and len(item) == 7 and isinstance(item[0], bytes):
        return item[0] if len(item[0]) == 32 else None
    return None


@dataclass(frozen=True, slots=True)
class PreparedRequest:
    request: MessagesRequest
    received_at: float
    query_key: tuple[object, ...] = ()


def _query_of(request: MessagesRequest) -> tuple[object, ...]:
    """What a continuation must repeat: the range and the selection, as sent."""
    return (request.lower, request.upper, tuple(sorted(request.topics)),
            b"" if request.topics else request.bloom)  # fmt: skip


@dataclass
class MailServerCore:
    """The sans-IO part: request decoding, validation, rate limiting, paging, live checks."""

    store: EnvelopeStore
    node_key: coincurve.PrivateKey
    config: MailServerConfig = field(default_factory=MailServerConfig)
    clock: Callable[[], float] = time.time

    def __post_init__(self) -> None:
        self.symmetric_key = self.config.symmetric_key or default_request_key()
        limits = self.limits = self.config.limits
        self.rate_limiter = RateLimiter(self.config.rate_limit, burst=limits.request_burst)
        self.address_rate_limiter = RateLimiter(
            rate=limits.address_request_rate, burst=limits.address_request_burst
        )
        self.live_limiter = RateLimiter(rate=limits.live_rate, burst=limits.live_burst)
        self.address_live_limiter = RateLimiter(
            rate=limits.address_live_rate, burst=limits.address_live_burst
        )
        self.seen = SeenSet(self.config.seen_capacity)
        # (peer, cursor handed out) -> the query it continues; one use each.
        self._issued = Continuations(_ISSUED_CURSORS)

    def is_trusted(self, peer: bytes) -> bool:
        return peer in self.config.trusted_peers

    def status(self) -> StatusOptions:
        """What this node advertises: its PoW requirement, a full bloom (it archives
        everything), no light mode, its confirmation setting."""
        return StatusOptions(
            pow_requirement=self.config.min_pow,
            bloom=b"\xff" * 64,
            light_node=False,
            confirmations=self.config.confirmations,
        )

    # -- requests ----------------------------------------------------------------------

    def prepare(self, peer: bytes, payload: bytes, address: str = "") -> PreparedRequest:
        """Decode, validate and rate-limit one 0x7e payload from ``peer`` (its public key)
        at ``address`` (its source address); raises :class:`RequestRejected`."""
        now = self.clock()
        try:
            request = decode_p2p_request(
                payload,
                symmetric_key=self.symmetric_key,
                private_key=self.node_key if self.config.decrypt_with_node_key else None,
                max_size=self.config.max_message_size,
            )
        except CryptoError as exc:
            raise RequestRejected(
                _request_id_of(payload), f"failed to decrypt p2p request: {exc}"
            ) from exc
        except DecodeError as exc:
            raise RequestRejected(_request_id_of(payload), f"invalid request: {exc}") from exc
        if request.form is not RequestForm.PLAIN and self.config.min_request_pow > 0:
            envelope_pow = pow_of(Envelope.decode(payload))
            if envelope_pow < self.config.min_request_pow:
                raise RequestRejected(
                    request.request_id,
                    f"PoW too low: {envelope_pow:.6g} < {self.config.min_request_pow}",
                    "low_pow",
                )
        asked = _query_of(request)
        try:
            request = normalize_request(request, now=int(now))
        except DecodeError as exc:
            raise RequestRejected(request.request_id, f"request is invalid: {exc.reason}") from exc
        if self.is_trusted(peer) or self._continues(peer, request.cursor, asked):
            return PreparedRequest(request, now, asked)
        failed = allow_all(
            [(self.rate_limiter, peer), (self.address_rate_limiter, address_key(address))], now
        )
        if failed >= 0:
            raise RequestRejected(
                request.request_id,
                "rate limit exceeded",
                "peer_rate_limit" if failed == 0 else "address_rate_limit",
            )
        return PreparedRequest(request, now, asked)

    def _continues(self, peer: bytes, cursor: bytes, asked: tuple[object, ...]) -> bool:
        """Is this the next page of a query this server answered for ``peer``? (The
        cursor is used up; a forged or repeated cursor is a fresh request.)"""
        return bool(cursor) and self._issued.redeem((peer, cursor), 0.0, asked)

    def _issue(self, peer: bytes, cursor: bytes, asked: tuple[object, ...]) -> None:
        self._issued.issue((peer, cursor), 0.0, asked)

    def query(self, prepared: PreparedRequest) -> StorePage:
        request = prepared.request
        query = EnvelopeQuery(
            request.lower,
            request.upper,
            topics=request.topics,
            bloom=request.bloom or None,
            limit=request.limit,
            cursor=request.cursor,
            max_scan=self.limits.scan_limit,
        )
        return self.store.query(query)

    def response(
        self, prepared: PreparedRequest, page: StorePage, peer: bytes | None = None
    ) -> tuple[list[list[bytes]], RequestComplete]:
        """The 0x7f bundles and the 0x7d completion for one page (its next cursor is
        remembered as ``peer``'s continuation of this query)."""
        envelopes = [raw for _, raw in page.envelopes]
        if prepared.request.batch:
            bundles = bundle_envelopes(envelopes, self.config.max_message_size)
        else:
            bundles = [[raw] for raw in envelopes]
        last_hash = page.envelopes[-1][0][4:CURSOR_SIZE] if page.envelopes else ZERO_HASH
        complete = RequestComplete(
            request_id=prepared.request.request_id,
            last_envelope_hash=last_hash,
            cursor=page.next_cursor,
        )
        if peer is not None and page.next_cursor:
            self._issue(peer, page.next_cursor, prepared.query_key)
        return bundles, complete

    # -- live envelopes ----------------------------------------------------------------

    def live_refusal(self, raw: bytes, envelope: Envelope, now: int) -> LiveRefusal | None:
        """Why a live envelope breaks the v1 rules (``None``: it passes them)."""
        return validate_live_envelope(
            raw,
            envelope,
            now=now,
            min_pow=self.config.min_pow,
            max_message_size=self.config.max_message_size,
        )

    def admit_live(self, peer: bytes, address: str, now: float, count: int = 1) -> str | None:
        """Spend ``count`` live-envelope tokens of ``peer`` and its address; the refusal
        code when either is out of them (trusted peers are not limited)."""
        if self.is_trusted(peer):
            return None
        failed = allow_all(
            [(self.live_limiter, peer), (self.address_live_limiter, address_key(address))],
            now,
            count,
        )
        if failed < 0:
            return None
        return "peer_rate_limit" if failed == 0 else "address_rate_limit"
