"""``peerAddr`` on ``GET /store/v3/messages``: ask that peer, as nwaku does
(waku/waku_api/rest/store/handlers.nim, ``performStoreQuery``), with the project's own
libp2p client (:mod:`waku_legacy.p2p.transport.native_client`, on the codecs the listener uses) and
store v3 codec (:mod:`waku_legacy.p2p.store_client`).

nwaku's answers, kept here (the Waku team's store interop suite checks them):

- a ``peerAddr`` that does not parse: 400 ``Failed parsing remote peer info: <why>``, where
  ``<why>`` is ``MultiAddress.init [multiaddress: <reason>]`` for text that is no multiaddr
  (``Invalid MultiAddress, must start with `/```, ``Unsupported protocol '<name>'``), the
  ``Error in parsePeerInfo: p2p part should contain / …`` text without a ``/p2p/`` part,
  and ``invalid multiaddress: no supported transport found`` without TCP (or WebSocket)
  (waku_core/peers.nim ``parsePeerInfo``, ``parseUrlPeerAddr``); the other query
  parameters are checked first;
- no answer within 5 s (``futTimeout``): 500 ``No history response received (timeout)``;
- a peer that cannot be dialled or does not serve the store protocol: 500
  ``Error occurred in queryFut.read() [PEER_DIAL_FAILURE: <peer id>]``; an answer that
  does not decode: the same with ``BAD_RESPONSE: <why>`` (waku_store/common.nim ``$``);
- the peer's status 429: 429 ``Request rate limit reached``;
- any other answer: 200 with the peer's ``StoreQueryResponse`` as JSON (its own
  ``statusCode`` and ``statusDesc`` inside, a refusal included).

Remote queries are bounded: at most :data:`MAX_CONCURRENT` at once per process (a waiting
request counts against its own 5 s), each response at most the client's 10 MiB cap, on the
bridge's own loop (no thread).
"""

from __future__ import annotations

import asyncio
import base64
from dataclasses import dataclass
from typing import Any

from waku_legacy.bridge.store_rest_server import RestError
from waku_legacy.errors import DecodeError, LimitExceeded
from waku_legacy.store import StoreQuery

__all__ = ["MAX_CONCURRENT", "QUERY_TIMEOUT", "RemotePeer", "parse_peer_addr", "query_remote"]

#: nwaku's futTimeout for a store query to another peer.
QUERY_TIMEOUT = 5.0
#: Remote store queries in flight per process (a REST request must not open unbounded dials).
MAX_CONCURRENT = 4
PEER_INFO_ERROR = "Failed parsing remote peer info: "
_WIRE = {"ip4", "ip6", "dns", "dnsaddr", "dns4", "dns6", "tcp", "ws", "wss"}


@dataclass(frozen=True, slots=True)
class RemotePeer:
    address: str  # the multiaddr as given, ending in /p2p/<peer id>
    peer_id: str


def _bad(why: str) -> RestError:
    return RestError(400, PEER_INFO_ERROR + why)


def parse_peer_addr(text: str | None) -> RemotePeer | None:
    """The peer ``peerAddr`` names, None when absent or empty (raises :class:`RestError`)."""
    if not text:
        return None
    from multiaddr import Multiaddr
    from multiaddr.protocols import protocol_with_name

    if not text.startswith("/"):
        raise _bad("MultiAddress.init [multiaddress: Invalid MultiAddress, must start with `/`]")
    parts = text.strip("/").split("/")
    index = 0
    names = []
    while index < len(parts):
        name = parts[index]
        try:
            protocol = protocol_with_name(name)
        except Exception:
            raise _bad(
                f"MultiAddress.init [multiaddress: Unsupported protocol '{name[:40]}']"
            ) from None
        names.append(name)
        index += 1 if protocol.size == 0 else 2
    try:
        address = Multiaddr(text)
    except Exception as exc:
        reason = str(exc).splitlines()[0][:200] if str(exc) else type(exc).__name__
        raise _bad(f"MultiAddress.init [multiaddress: {reason}]") from None
    if "p2p" not in names:
        raise _bad(
            f"Error in parsePeerInfo: p2p part should contain / [p2pPartStr:] [peer:{text[:200]}]"
        )
    if not {"tcp"} & set(names) or not set(names) - {"p2p"} <= _WIRE:
        raise _bad("invalid multiaddress: no supported transport found")
    peer_id = str(address.value_for_protocol("p2p"))
    return RemotePeer(text, peer_id)


_slots: dict[int, asyncio.Semaphore] = {}  # per event loop (one per process)


def _semaphore() -> asyncio.Semaphore:
    loop = id(asyncio.get_running_loop())
    if loop not in _slots:
        _slots[loop] = asyncio.Semaphore(MAX_CONCURRENT)
    return _slots[loop]


async def query_remote(peer: RemotePeer, query: StoreQuery, request_id: str) -> dict[str, Any]:
    """The peer's answer to ``query`` as nwaku's REST JSON (raises :class:`RestError` with
    nwaku's status and text when there is none)."""
    from waku_legacy.p2p.errors import P2PError, P2PTimeout
    from waku_legacy.p2p.store_client import (
        STORE_V3_CODEC,
        StoreQueryArgs,
        build_request,
        decode_response,
    )
    from waku_legacy.p2p.transport.native_client import native_request_once

    args = StoreQueryArgs(
        pubsub_topic=query.pubsub_topic, content_topics=tuple(query.content_topics),
        time_start=query.start_time, time_end=query.end_time,
        message_hashes=tuple(query.hashes), include_data=query.include_data,
        forward=query.ascending, page_size=query.limit, cursor=query.cursor,
        request_id=request_id,
    )  # fmt: skip
    timeout = RestError(500, "No history response received (timeout)")
    loop = asyncio.get_running_loop()
    deadline = loop.time() + QUERY_TIMEOUT
    try:
        async with asyncio.timeout(QUERY_TIMEOUT):
            await _semaphore().acquire()
    except TimeoutError:
        raise timeout from None
    try:
        left = max(deadline - loop.time(), 0.1)
        body = await native_request_once(
            peer.address, STORE_V3_CODEC, build_request(args), timeout=left
        )
        response = decode_response(body)
    except P2PTimeout:
        raise timeout from None
    except P2PError:
        raise RestError(
            500, f"Error occurred in queryFut.read() [PEER_DIAL_FAILURE: {peer.peer_id}]"
        ) from None
    except (DecodeError, LimitExceeded) as exc:
        raise RestError(500, f"Error occurred in queryFut.read() [BAD_RESPONSE: {exc}]") from None
    finally:
        _semaphore().release()
    if response.status_code == 429:
        raise RestError(429, "Request rate limit reached")
    return _response_json(response)


def _response_json(response: Any) -> dict[str, Any]:
    """nwaku's ``StoreQueryResponseHex`` JSON of a decoded ``StoreQueryResponse``."""

    def b64(data: bytes) -> str:
        return base64.b64encode(data).decode("ascii")

    messages = []
    for entry in response.messages:
        item: dict[str, Any] = {"messageHash": "0x" + entry.message_hash.hex()}
        if entry.HasField("message"):
            m = entry.message
            message: dict[str, Any] = {"payload": b64(m.payload), "contentTopic": m.content_topic}
            if m.meta:
                message["meta"] = b64(m.meta)
            message["version"] = m.version
            message["timestamp"] = m.timestamp
            message["ephemeral"] = m.ephemeral
            item["message"] = message
        if entry.HasField("pubsub_topic"):
            item["pubsubTopic"] = entry.pubsub_topic
        messages.append(item)
    out: dict[str, Any] = {
        "requestId": response.request_id,
        "statusCode": response.status_code,
        "statusDesc": response.status_desc,
        "messages": messages,
    }
    if response.HasField("pagination_cursor"):
        out["paginationCursor"] = "0x" + response.pagination_cursor.hex()
    return out
