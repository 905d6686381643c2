"""A Python data source that writes nothing: the floor of what any Python data source
writer pays per Spark task (the Python worker's task set-up, the Arrow transfer, the
commit message), for ``spark_bench``'s small-task mode to print beside aiocommit and
Spark's own writer. pyspark >= 4.0; defined in an importable module so that Spark's
Python workers unpickle it by reference."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from aiocommit.integrations.spark.seam import (
    DataSource,
    DataSourceArrowWriter,
    WriterCommitMessage,
)

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql.types import StructType

NAME = "aiocommit_bench_noop"


class NoopWriter(DataSourceArrowWriter):
    def write(self, iterator: Iterator[pa.RecordBatch]) -> WriterCommitMessage:
        for _ in iterator:  # take every batch, as a writer does
            pass
        return WriterCommitMessage()

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        pass


class NoopSource(DataSource):
    @classmethod
    def name(cls) -> str:
        return NAME

    def writer(self, schema: StructType, overwrite: bool) -> NoopWriter:
        return NoopWriter()
