"""libp2p for Waku v2 peers: the bridge's store listener and the project's client, on a
libp2p stack of the project's own (sans-IO codecs, an asyncio transport), with py-libp2p's
trio server still selectable (``[libp2p] server = "py-libp2p"``, issue 36 retires it).

The codecs, sans-IO (bytes in, events and bytes out; no socket, no clock of their own):

- ``multistream.py``: multistream-select 1.0.0, the listener's and the dialler's side;
- ``noise.py``: Noise XX on ``cryptography`` and libp2p's signed handshake payload;
- ``peer_key.py``: libp2p public keys (secp256k1, Ed25519, ECDSA, RSA in libp2p's bounds)
  and peer ids;
- ``yamux.py`` and ``mplex.py``: the two stream muxers (windows, the send side's queues),
  ``muxer_events.py``: what both report;
- ``websocket.py``: libp2p over ``/ws`` on wsproto, both sides;
- ``identify.py`` and ``metadata.py``: identify/ping and 66/WAKU2-METADATA messages;
- ``connection.py``: one inbound connection (handshake, streams, send budget, deadlines);
  ``dialler.py``: one outbound request-response connection.

The transports, on asyncio:

- ``native.py``: the listener's server side (:class:`~waku_legacy.p2p.native.NativeListener`,
  the default), ``worker_pool.py``: the threads its handlers run on;
- ``native_client.py``: the client ``store query --peer`` and the REST API's ``peerAddr``
  use; ``store_client.py``: store v3 requests and pages for it; ``cli.py``: ``store query``.

Policy and settings: ``limits.py`` (the listener's bounds, each the ``[libp2p]`` key of its
name), ``gate.py`` (the inbound gate, sans-IO: connection and handshake slots per address),
``guard.py`` (the gate and other bounds hooked into py-libp2p), ``errors.py`` (the typed
errors), ``keys.py`` (the node key file), ``enr.py`` (31/WAKU2-ENR).

py-libp2p, still here until issue 36's split: ``listener.py`` (the trio server and the policy
the native server inherits), ``host.py`` (py-libp2p's host and transports), ``client.py``
(py-libp2p's client, used by tests as an independent peer), ``streams.py`` (frames on its
streams).
"""
