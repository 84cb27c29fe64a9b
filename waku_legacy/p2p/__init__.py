"""libp2p for Waku v2 peers: the bridge's store listener and the project's own client.

Built on py-libp2p (PyPI ``libp2p``; the project writes no libp2p itself). See
:mod:`waku_legacy.p2p.host` for the transports, security and muxers the real clients need,
:mod:`waku_legacy.p2p.listener` for how the trio-based host shares a process with asyncio
(its own thread under ``trio.run``, handlers on a fixed worker pool), and
:mod:`waku_legacy.p2p.metadata` for 66/WAKU2-METADATA, and :mod:`waku_legacy.p2p.limits`
for the listener's bounds (each the ``[libp2p]`` key of its name, declared there).
"""
