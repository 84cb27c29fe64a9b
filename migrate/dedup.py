"""Deduplication across sources: one message per ``dedup_key`` (see :mod:`.decode`).

Which copy is kept does not depend on partitioning or input order: a v1 envelope before a v2
record (it carries the original envelope bytes v1 clients are served), then the source that
comes first in the config, then the record's location. Every other copy is marked
``duplicate`` and counted against its own source. Quarantined records have a key of their
own (derived from their provenance), so they are never anyone's duplicate.

The decision needs only the keys: :func:`duplicate_copies` finds the copies to drop from the
key columns alone (the payloads and envelope bytes never cross a shuffle), and
:func:`mark_duplicates` flags them in the full rows. A record is identified by its source
and location (unique per record: the provenance quarantine keys are derived from too).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

__all__ = [
    "COUNT_COLUMNS",
    "DUPLICATES_DIR",
    "DUPLICATE_COLUMNS",
    "KEY_COLUMNS",
    "MESSAGES_DIR",
    "deduplicate",
    "duplicate_copies",
    "mark_duplicates",
    "read_messages",
]

#: step 1's output in the work directory: every decoded row (without the flag), and the
#: :func:`duplicate_copies` of them
MESSAGES_DIR = "messages"
DUPLICATES_DIR = "duplicates"

#: what :func:`duplicate_copies` returns of each copy to drop: which record it is (the
#: message hash first: the driver's store stream is in hash order, and so are these), then
#: the groups it is counted in
DUPLICATE_COLUMNS = ("message_hash", "source", "location")
COUNT_COLUMNS = ("community", "week", "pubsub_topic", "channel")
#: what it reads of each MESSAGE row
KEY_COLUMNS = ("dedup_key", "from_v2", "rank", "quarantined", *DUPLICATE_COLUMNS, *COUNT_COLUMNS)


def deduplicate(messages: DataFrame) -> DataFrame:
    """MESSAGE rows -> the same rows plus a boolean ``duplicate`` column."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    order = Window.partitionBy("dedup_key").orderBy(
        F.col("from_v2").asc(), F.col("rank").asc(), F.col("source").asc(), F.col("location").asc()
    )
    return messages.withColumn(
        "duplicate", (F.row_number().over(order) > 1) & ~F.col("quarantined")
    )


def duplicate_copies(messages: DataFrame) -> DataFrame:
    """MESSAGE rows (at least KEY_COLUMNS) -> DUPLICATE_COLUMNS and COUNT_COLUMNS of every
    copy that is a duplicate (:func:`deduplicate`'s choice). Only keys that occur more than
    once go through the window; finding them is an aggregation of the 32-byte keys."""
    from pyspark.sql import functions as F

    keys = messages.select(*KEY_COLUMNS)
    repeated = keys.groupBy("dedup_key").count().filter(F.col("count") > 1).select("dedup_key")
    candidates = keys.join(repeated, "dedup_key", "left_semi")
    return (
        deduplicate(candidates)
        .filter(F.col("duplicate"))
        .select(*DUPLICATE_COLUMNS, *COUNT_COLUMNS)
    )


def mark_duplicates(messages: DataFrame, duplicates: DataFrame) -> DataFrame:
    """MESSAGE rows and :func:`duplicate_copies` of them -> the rows plus a boolean
    ``duplicate`` column (a broadcast join while the copies are few)."""
    from pyspark.sql import functions as F

    flags = duplicates.select("source", "location", F.lit(True).alias("flag"))
    return (
        messages.join(flags, ["source", "location"], "left")
        .withColumn("duplicate", F.coalesce(F.col("flag"), F.lit(False)))
        .drop("flag")
    )


def read_messages(spark: SparkSession, work_dir: str | Path) -> DataFrame:
    """Step 1's output in ``work_dir``: every decoded MESSAGE row with its ``duplicate``
    flag."""
    work = Path(work_dir)
    return mark_duplicates(
        spark.read.parquet(str(work / MESSAGES_DIR)), spark.read.parquet(str(work / DUPLICATES_DIR))
    )
