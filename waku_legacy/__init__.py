"""waku-legacy: keeps Status communities' Waku v1 history alive on Waku v2.

Subpackages: ``crypto`` (keccak, secp256k1, ECIES, AES-GCM), ``identity`` (message hashes,
topics, shards), ``proto`` (protobuf schemas), ``mailserver_compat`` (the Waku v1 wire),
``archive`` (community history archives), ``migrate`` (the Spark migration) and ``bridge``
(the long-running service).
"""

__version__ = "0.1.0"
