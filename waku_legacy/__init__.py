"""waku-legacy: keeps Status communities' Waku v1 history alive on Waku v2.

The core, lowest layer first (the README's "Layers" picture; ``tests/test_layers.py``):

- ``errors``: the typed errors every decoder and parser raises; ``faults``: the named points
  where crash tests make a run die.
- ``files``: bounded reads of the files a config names; ``durable``: atomic, crash-safe
  writes; ``limits``: the token buckets and log throttling every listener shares;
  ``console``: what operator commands print (JSON on stdout).
- ``config/``: TOML tables, each key declared once; ``crypto/``: keccak, secp256k1, ECIES,
  AES-GCM, 26/WAKU-PAYLOAD, key files.
- ``identity/``: message hashes, topics, shards, the topic mapping, signed descriptions.
- ``store/``: the v2 store in nwaku's schema and its protocols; ``archive/``: community
  history archives, torrents, the archive-link message, seeding and fetching.
- ``community_config``: the ``[[community]]`` table both applications read; ``p2p/``:
  libp2p for Waku v2 peers; ``members/``: what members' clients import from the archives.
- ``history/``: the readable history (decode, index, reader, pages, exports).
- ``cli/``: the ``waku-legacy`` command line.

Installed beside it under the same namespace: ``waku_legacy.proto`` (protobuf schemas),
``waku_legacy.mailserver_compat`` (the Waku v1 wire), ``waku_legacy.migrate`` (the Spark
migration) and ``waku_legacy.bridge`` (the long-running service).
"""

__version__ = "0.1.0"
