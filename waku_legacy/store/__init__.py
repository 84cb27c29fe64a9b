"""The Waku v2 message store in nwaku's schema (SQLite by default, PostgreSQL by URL)."""
