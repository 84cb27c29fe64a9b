"""The bridge's parts as components (:class:`~waku_legacy.bridge.lifecycle.Component`):
async context managers, each opening, closing and telling its own health, each declaring
the components it needs (:attr:`~waku_legacy.bridge.lifecycle.Component.needs`), which the
:class:`~waku_legacy.bridge.lifecycle.Lifecycle` enters before it; :mod:`waku_legacy.bridge
.service` says which run, from which config.

A component is built with the components it needs (built, not yet opened) and takes their
running objects in its ``open()``: it opens after them and closes before them. The running
objects stay readable after the close (``/debug/v1/info`` and the tests read them after a
stop), except the singletons' when the leader lock is lost (:meth:`Singletons.release`).

Modules, one component each:

- :mod:`.context` -- :class:`BridgeContext` (what every part shares), the local state folder;
- :mod:`.store` -- the v2 store's threads, and the probe that watches it;
- :mod:`.http_client` -- the HTTP client session of the relay publisher and history pulls;
- :mod:`.relay` -- the relay publisher's queue (nwaku's REST relay);
- :mod:`.live` -- the live bridge (v1 <-> v2) and its batch writer;
- :mod:`.http` -- the REST API's server (its socket, shared with the workers when they run);
- :mod:`.v1` -- the Waku v1 mailserver (RLPx listener);
- :mod:`.libp2p` -- the libp2p store listener, the shards it announces, what workers share;
- :mod:`.seeder` -- the libtorrent seeder, the archive folders;
- :mod:`.archiving` -- every community's archive runs on their schedule;
- :mod:`.history` -- history pulls from v2 store nodes;
- :mod:`.singletons` -- what one instance of a store does (seeder, archiving, history);
- :mod:`.leader` -- the leader lock that hands the singletons between instances (PostgreSQL);
- :mod:`.workers` -- the worker processes on the REST socket.

The history viewer's component is :class:`waku_legacy.bridge.viewer.ViewerComponent` (it
loads the history pages only when ``[viewer]`` is on).
"""

from __future__ import annotations

from waku_legacy.bridge.components.archiving import ArchivingComponent
from waku_legacy.bridge.components.context import BridgeContext, local_state_dir
from waku_legacy.bridge.components.history import HistoryComponent
from waku_legacy.bridge.components.http import HttpApi
from waku_legacy.bridge.components.http_client import HttpClient
from waku_legacy.bridge.components.leader import LeaderComponent
from waku_legacy.bridge.components.libp2p import Libp2pComponent
from waku_legacy.bridge.components.live import LiveComponent
from waku_legacy.bridge.components.relay import RelayComponent
from waku_legacy.bridge.components.seeder import SeederComponent
from waku_legacy.bridge.components.singletons import Singletons
from waku_legacy.bridge.components.store import StoreComponent, store_watcher
from waku_legacy.bridge.components.v1 import MailserverComponent
from waku_legacy.bridge.components.workers import WorkersComponent

__all__ = [
    "ArchivingComponent",
    "BridgeContext",
    "HistoryComponent",
    "HttpApi",
    "HttpClient",
    "LeaderComponent",
    "Libp2pComponent",
    "LiveComponent",
    "MailserverComponent",
    "RelayComponent",
    "SeederComponent",
    "Singletons",
    "StoreComponent",
    "WorkersComponent",
    "local_state_dir",
    "store_watcher",
]
