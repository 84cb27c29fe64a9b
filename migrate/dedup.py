"""Deduplication across sources: one message per ``dedup_key`` (see :mod:`.decode`).

Which copy is kept does not depend on partitioning or input order: a v1 envelope before a v2
record (it carries the original envelope bytes v1 clients are served), then the source that
comes first in the config, then the record's location. Every other copy is marked
``duplicate`` and counted against its own source. Quarantined records have a key of their
own (derived from their provenance), so they are never anyone's duplicate.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

__all__ = ["deduplicate"]


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
