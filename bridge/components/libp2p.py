"""The libp2p store listener as a component (:class:`Libp2pComponent`): the shards it
announces and the addresses the worker processes may share."""

from __future__ import annotations

import logging
from dataclasses import replace
from typing import TYPE_CHECKING

from waku_legacy.bridge.components.store import StoreComponent
from waku_legacy.bridge.config import Libp2pConfig
from waku_legacy.bridge.lifecycle import READY, Component
from waku_legacy.errors import WakuLegacyError

if TYPE_CHECKING:  # imported when opened: the libp2p stack loads only when used
    from waku_legacy.p2p.transport.native import NativeListener

__all__ = ["Libp2pComponent"]

log = logging.getLogger("waku_legacy.bridge")


class Libp2pComponent(Component):
    """The libp2p store listener (:mod:`waku_legacy.bridge.p2p`) on the same store threads'
    connections as the REST API; closing is bounded (``ListenerLimits.stop_timeout``)."""

    name = "libp2p"

    def __init__(self, config: Libp2pConfig, store: StoreComponent) -> None:
        self.config = config  # after open: with the shards it announces
        self.store = store
        self.needs = (store.name,)
        self.listener: NativeListener | None = None

    async def open(self) -> None:
        from waku_legacy.bridge.p2p import start_p2p_listener
        from waku_legacy.store.legacy_query import LegacyCursorCache

        store = self.store.opened
        libp2p = self.config
        if not libp2p.shards_configured:
            # announce every shard this store answers for (js-waku picks its store peer by
            # the shards in metadata): the configured communities' plus the store's own
            stored = await store.read(_stored_shards, libp2p.cluster_id)
            shards = tuple(sorted(set(libp2p.shards) | stored))
            if shards != libp2p.shards:
                self.config = replace(libp2p, shards=shards)  # the workers announce them too
        self.listener = await start_p2p_listener(
            self.config, store.stores, LegacyCursorCache(), exclusive=True
        )

    async def close(self) -> None:
        if self.listener is not None:
            await self.listener.stop()  # bounded

    def health(self) -> str | None:
        listener = self.listener
        if listener is None:
            return None
        return READY if listener.running else f"Not Ready: {listener.failure or 'stopped'}"

    def shareable_listen(self) -> tuple[str, ...]:
        """The listener's addresses as bound (ports resolved, no /p2p/ suffix), for the
        worker processes to listen on as well; () when they cannot share them."""
        if self.listener is None:
            return ()
        listen = tuple(dict.fromkeys(a.split("/p2p/")[0] for a in self.listener.multiaddrs))
        if any(a.rstrip("/").endswith(("/ws", "/wss")) for a in listen):
            # the listener binds WebSocket ports without SO_REUSEPORT (py-libp2p's did too: a
            # worker logged "[Errno 98] Address already in use" and failed at every start)
            log.info("libp2p: WebSocket addresses cannot be shared; only the primary serves")
            return ()
        ports = [a.split("/tcp/")[1].split("/")[0] for a in listen if "/tcp/" in a]
        if len(set(ports)) < len(ports):
            # TCP and WebSocket on one port share one socket (told apart by their first
            # bytes), bound without SO_REUSEPORT: a second process cannot listen there
            log.info("libp2p: TCP and WebSocket share a port; only the primary serves libp2p")
            return ()
        return listen


def _stored_shards(store: object, cluster_id: int) -> set[int]:
    """The shards of ``cluster_id`` the store's messages are on (static-sharding topics)."""
    from waku_legacy.identity.shards import parse_pubsub_topic

    found = set()
    for topic in getattr(store, "pubsub_topics", lambda: [])():
        try:
            shard = parse_pubsub_topic(topic)
        except WakuLegacyError:
            continue  # a named or malformed topic: no shard to announce
        if shard.cluster == cluster_id:
            found.add(shard.shard)
    return found
