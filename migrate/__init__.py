"""The Spark migration: legacy v1 sources to deduplicated v2 messages, a v2 store and
community history archives."""
