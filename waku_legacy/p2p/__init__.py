"""libp2p for Waku v2 peers: the bridge's store listener and the project's client, on a
libp2p stack of the project's own (sans-IO codecs, an asyncio transport, a policy object the
transport holds). No libp2p library is a runtime dependency: py-libp2p left on 2026-11-29
(issue 36) and stays only as an independent test peer (``tests/p2p_pylibp2p``), beside
js-libp2p and @waku/sdk.

The tree, imports going one way (``transport/`` -> ``policy.py`` -> ``codec/`` ->
``limits.py``, ``errors.py``):

- ``codec/``: the codecs, sans-IO (bytes in, events and bytes out; none imports trio,
  libp2p or asyncio): multistream-select, Noise XX, peer keys, yamux and mplex, WebSocket,
  identify and metadata, one inbound and one outbound connection, the inbound gate (its
  ``__init__.py`` names each module);
- the policy, apart from any transport (no trio, libp2p or asyncio either): ``policy.py``
  (:class:`~waku_legacy.p2p.policy.ListenerPolicy`: the protocols served and their
  handlers, request rates, free next pages, counters, throttled logging of refusals),
  ``limits.py`` (the listener's bounds, each the ``[libp2p]`` key of its name; the codecs
  take theirs from it too), ``errors.py`` (the typed errors, each refusal with its counter
  name and GO_AWAY code; the codecs raise them);
- ``transport/``: the transports, on asyncio: the listener's server side
  (:class:`~waku_legacy.p2p.transport.native.NativeListener`, holding a
  ``ListenerPolicy``), the threads its handlers run on, and the client that
  ``store query --peer`` and the REST API's ``peerAddr`` use;
- the store protocol over any client: ``store_client.py`` (store v3 requests and pages,
  on a client that has a ``request`` method; no transport of its own), ``cli.py``
  (``store query``: the transport's client with it);
- identity and addresses: ``keys.py`` (the node key file and its peer id, on coincurve),
  ``multiaddrs.py`` (parsing listen addresses, the free-port check), ``enr.py``
  (31/WAKU2-ENR).
"""
