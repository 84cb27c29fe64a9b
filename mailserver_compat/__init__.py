"""The Waku v1 wire: everything that speaks or stores Waku v1, above the core and below the
two applications (see the README's layer picture; ``tests/test_layers.py`` enforces it).

Subpackages, one role each:

- :mod:`.wire` -- sans-IO codecs: envelope, PoW, bloom, history requests
  and cursors, request-complete, the waku/1 capability, v1 <-> v2 conversion;
- :mod:`.rlpx` -- the devp2p transport: EIP-8 handshake, frames, p2p base protocol, enode
  URLs, the asyncio adapter (node key files are :mod:`waku_legacy.crypto.key_file`);
- :mod:`.server` -- the mailserver (history requests, live envelopes) and its limits;
- :mod:`.client` -- pulling history out of a legacy mailserver;
- :mod:`.storage` -- legacy mailserver databases (status-go LevelDB and PostgreSQL),
  envelope dumps, and the envelope store the mailserver reads history from.

Modules: :mod:`.rlp_fields` -- go-ethereum-strict RLP reads (wire and RLPx share them);
:mod:`.waku_peer` -- one waku/1 peer over an asyncio RLPx session (server and
client share it); :mod:`.cli` -- ``waku-legacy v1 serve`` and ``waku-legacy v1 pull``.
"""
