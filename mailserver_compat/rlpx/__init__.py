"""RLPx (devp2p) transport: sans-IO handshake, framing and p2p base protocol, asyncio adapter."""
