"""The Waku v1 mailserver.

- ``core``: the sans-IO core: request decoding and serving rules, rate limits, live-envelope
  validation, the seen set and how a page is bundled into packets (no sockets, no loop);
- ``asyncio_server``: the asyncio node around it (RLPx listener, peers, the live sink);
- ``limits``: every per-peer and per-address knob (rates, bursts, connections, the work of
  one request).

It reads history from an :mod:`envelope store <..storage.envelope_store>`.
"""
