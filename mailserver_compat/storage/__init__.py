"""Legacy mailserver storage formats: status-go LevelDB and PostgreSQL, envelope dumps; and
``envelope_store``, the history the mailserver serves (one of those, or the v2 store).

- ``leveldb``: status-go's LevelDB mailserver database; ``postgres``: its PostgreSQL one;
  ``dump``: envelope dump files (``v1 pull`` writes, the migration reads);
  ``envelope_store``: the ``EnvelopeStore`` the v1 mailserver reads its history from.
"""
