"""PySpark integration: the ``aiocommit`` data source for ``df.write.format("aiocommit")``.

Needs the ``spark`` extra (``pip install 'aiocommit[spark]'``: pyspark 4 and pyarrow)::

    from aiocommit.integrations.spark import register
    register(spark)
    (df.write.format("aiocommit").mode("overwrite")
        .partitionBy("country", "day")
        .save("abfss://container@account.dfs.core.windows.net/table"))

See ``docs/spark.md`` for the options, the guarantees and how it runs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from aiocommit.integrations.spark.dataframe_writer import install
from aiocommit.integrations.spark.source import (
    AiocommitCommitMessage,
    AiocommitDataSource,
    AiocommitWriter,
)

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = [
    "AiocommitCommitMessage",
    "AiocommitDataSource",
    "AiocommitWriter",
    "register",
]


def register(spark: SparkSession) -> None:
    """Register the ``aiocommit`` data source with a session (once per session), and
    make ``df.write.format("aiocommit")`` honour what Spark's Python data source API
    drops: every save mode, ``partitionBy``, the session's write confs, writes from any
    thread, errors with their cause first (see ``dataframe_writer``)."""
    install()
    spark.dataSource.register(AiocommitDataSource)
