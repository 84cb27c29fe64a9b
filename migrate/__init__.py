"""The Spark migration: legacy v1 sources to deduplicated v2 messages, a v2 store and
community history archives.

Modules:

- ``config``: the TOML configuration; ``records``: the row shapes (Arrow schemas);
  ``spark``: the one place that builds SparkSessions; ``steps``: named, timed steps whose
  failure is one line; ``progress``: progress bars and JSON progress lines.
- ``sources``: sources planned and read in parallel partitions; ``decode``: raw records to
  v2 messages (or quarantine); ``message_files``: step 1's sorted Parquet files;
  ``work_files``: the work directory's crash-safe files; ``dedup``: one message per key.
- ``sinks``: the v2 store and the quarantine; ``archives`` and ``archive_jobs``: the
  communities' archives encoded on Spark; ``readable``: the readable step's decoding in the
  tasks that decrypt the channels (the history's events); ``report``: the run report.
- ``pipeline``: one migration run, end to end; ``discover``: a community's channels from
  its signed descriptions; ``audit/``: the published archives against the sources.
- ``sample``: a realistic generated legacy sample; ``demo_serve``: the bridge config the
  demo writes; ``cli``: ``waku-legacy migrate``, ``export`` and ``audit``.
"""
