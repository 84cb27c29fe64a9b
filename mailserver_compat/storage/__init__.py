"""Legacy mailserver storage formats: status-go LevelDB and PostgreSQL, envelope dumps."""
