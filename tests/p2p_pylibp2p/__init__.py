"""py-libp2p as an independent test peer (it left the runtime on 2026-11-29, issue 36):
``listener.py`` (its server, holding the product's :class:`~waku_legacy.p2p.policy.
ListenerPolicy`), ``host.py`` (its host, transports and muxers), ``guard.py`` (the inbound
gate and bounds hooked into it), ``client.py`` (its client), ``streams.py`` (frames on its
streams), ``keys.py`` (its key pair of one of ours)."""
