"""Cryptographic primitives shared by every protocol module (one place each).

- ``keccak``: Keccak-256; ``secp256k1``: keys, recoverable signatures, raw ECDH;
  ``key_file``: node key files (geth's ``nodekey``).
- ``ecies``: ECIES as go-ethereum implements it (v1 asymmetric payloads, RLPx);
  ``symmetric``: AES-256-GCM and the PBKDF2 chat keys of Status public chats.
- ``payload``: 26/WAKU-PAYLOAD, as status-go builds and opens it.
"""
