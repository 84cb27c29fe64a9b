"""Files in the run's work directory, written the way a killed or retried Spark task cannot
leave half of: under a dot-name (which Spark's readers and the driver's merge skip) in their
directory, renamed into place once complete."""

from __future__ import annotations

import os
import shutil
import uuid
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

__all__ = [
    "ROW_GROUP_BYTES",
    "ParquetFileWriter",
    "empty_directory",
    "parquet_batches",
    "remove_temporaries",
    "write_parquet_file",
]

#: small row groups: the driver streams step 1's files back holding one row group per file
ROW_GROUP_BYTES = 4 * 1024 * 1024


class ParquetFileWriter:
    """One Parquet file written under a dot-name beside ``path``, renamed to ``path`` by
    :meth:`commit` (removed by :meth:`abort`); row groups of about ROW_GROUP_BYTES."""

    def __init__(self, path: Path, schema: pa.Schema) -> None:
        self.path = path
        self.temporary = path.with_name(f".{path.name}.{uuid.uuid4().hex}.tmp")
        self._writer = pq.ParquetWriter(self.temporary, schema)
        self.rows = 0

    def write(self, table: pa.Table) -> None:
        if not table.num_rows:
            return
        per_row = max(1, table.nbytes // table.num_rows)
        self._writer.write_table(table, row_group_size=max(64, ROW_GROUP_BYTES // per_row))
        self.rows += table.num_rows

    def commit(self) -> None:
        self._writer.close()
        os.replace(self.temporary, self.path)

    def abort(self) -> None:
        try:
            self._writer.close()
        finally:
            self.temporary.unlink(missing_ok=True)


def write_parquet_file(path: Path, table: pa.Table) -> None:
    """``table`` as the Parquet file ``path``, whole or not at all."""
    writer = ParquetFileWriter(path, table.schema)
    try:
        writer.write(table)
        writer.commit()
    except BaseException:
        writer.abort()
        raise


def empty_directory(directory: Path) -> None:
    """``directory`` created, or emptied of a previous run's files."""
    directory.mkdir(parents=True, exist_ok=True)
    for entry in directory.iterdir():
        if entry.is_dir():
            shutil.rmtree(entry)
        else:
            entry.unlink()


def remove_temporaries(directory: Path) -> int:
    """Remove the dot-named temporaries (:class:`ParquetFileWriter`'s) a killed task left in
    ``directory``; how many there were."""
    removed = 0
    if directory.is_dir():
        for entry in directory.iterdir():
            if entry.name.startswith(".") and entry.name.endswith(".tmp") and entry.is_file():
                entry.unlink(missing_ok=True)
                removed += 1
    return removed


def parquet_batches(
    path: Path, batch_size: int, columns: list[str] | None = None
) -> Iterator[pa.RecordBatch]:
    """The file's rows (``columns`` of them) a batch at a time, holding one row group."""
    # pre_buffer=False: with pre-buffering a reader keeps every row group it read cached
    # until it is closed, so its memory grows with the file; without, one row group.
    parquet = pq.ParquetFile(path, pre_buffer=False)
    yield from parquet.iter_batches(batch_size=batch_size, columns=columns, use_threads=False)
