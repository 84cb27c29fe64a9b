"""The libp2p transports, on asyncio: sockets, the loop's clock and threads around the
sans-IO codecs of :mod:`waku_legacy.p2p.codec`. The listener holds a
:class:`~waku_legacy.p2p.policy.ListenerPolicy` (composition: the policy knows no
transport).

- ``native.py``: the listener's server side
  (:class:`~waku_legacy.p2p.transport.native.NativeListener`): one :class:`asyncio.Protocol`
  per TCP or ``/ws`` connection, the policy's protocols, limits and refusals applied;
- ``worker_pool.py``: the threads its handlers run on, results handed back in batches;
- ``native_client.py``: the client that ``store query --peer`` and the REST API's
  ``peerAddr`` use (the codecs' dialler over TCP or ``/ws``).
"""
