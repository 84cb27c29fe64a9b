"""Legacy mailserver storage formats: status-go LevelDB and PostgreSQL, envelope dumps; and
``envelope_store``, the history the mailserver serves (one of those, or the v2 store)."""
