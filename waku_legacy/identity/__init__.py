"""Identities: message hashes, topics, community ids and shards. One place owns each.

- ``message_hash``: every message identity (14/WAKU2-MESSAGE deterministic hash, envelope
  hashes); ``topics``: v1 topics, content topics, chat ids and keys, community ids.
- ``shards``: relay shards and pubsub topics; ``topic_mapping``: which pubsub topic a
  v1-era message lands on in v2.
- ``application``: a Status message's signed wrapper, author and id; ``descriptions``: a
  community's signed ``CommunityDescription`` (channels, members).
- ``cli``: ``waku-legacy hash`` and ``waku-legacy topics``."""
