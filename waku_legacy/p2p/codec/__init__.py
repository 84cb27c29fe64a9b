"""The libp2p codecs, sans-IO: bytes in, events and bytes out; no socket, no clock of their
own. None imports trio, libp2p or asyncio (tests/waku_legacy/p2p/test_codec_imports.py
checks every module of this package); they take their bounds from
:mod:`waku_legacy.p2p.limits` and raise the typed errors of :mod:`waku_legacy.p2p.errors`.

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
"""
