"""libp2p for Waku v2 peers: the bridge's store listener and the project's client, on a
libp2p stack of the project's own (sans-IO codecs, an asyncio transport, a policy object the
transport holds). No libp2p library is a runtime dependency: py-libp2p left on 2026-11-29
(issue 36) and stays only as an independent test peer (``tests/p2p_pylibp2p``), beside
js-libp2p and @waku/sdk.

The codecs, sans-IO (bytes in, events and bytes out; no socket, no clock of their own; none
imports trio, libp2p or asyncio):

- ``multistream.py``: multistream-select 1.0.0, the listener's and the dialler's side;
- ``noise.py``: Noise XX on ``cryptography`` and libp2p's signed handshake payload;
- ``peer_key.py``: libp2p public keys (secp256k1, Ed25519, ECDSA, RSA in libp2p's bounds)
  and peer ids;
- ``yamux.py`` and ``mplex.py``: the two stream muxers (windows, the send side's queues),
  ``muxer_events.py``: what both report;
- ``websocket.py``: libp2p over ``/ws`` on wsproto, both sides;
- ``identify.py`` and ``metadata.py``: identify/ping and 66/WAKU2-METADATA messages;
- ``connection.py``: one inbound connection (handshake, streams, send budget, deadlines);
  ``dialler.py``: one outbound request-response connection;
- ``gate.py``: the inbound gate (connection and handshake slots per address).

The policy, apart from any transport: ``policy.py`` (:class:`~waku_legacy.p2p.policy.
ListenerPolicy`: the protocols served and their handlers, request rates, free next pages,
counters, throttled logging of refusals), ``limits.py`` (the listener's bounds, each the
``[libp2p]`` key of its name), ``errors.py`` (the typed errors, each refusal with its
counter name and GO_AWAY code).

The transports, on asyncio:

- ``native.py``: the listener's server side (:class:`~waku_legacy.p2p.native.NativeListener`,
  holding a ``ListenerPolicy``), ``worker_pool.py``: the threads its handlers run on;
- ``native_client.py``: the client ``store query --peer`` and the REST API's ``peerAddr``
  use; ``store_client.py``: store v3 requests and pages for it; ``cli.py``: ``store query``.

Identity and addresses: ``keys.py`` (the node key file and its peer id, on coincurve),
``multiaddrs.py`` (parsing listen addresses, the free-port check), ``enr.py``
(31/WAKU2-ENR).
"""
