"""Identities: message hashes, topics, community ids and shards. One place owns each."""
