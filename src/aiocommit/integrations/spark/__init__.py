"""PySpark integration: the ``aiocommit`` data source for ``df.write.format("aiocommit")``
(pyspark 4.0 to 4.3), and ``write(df, dest, ...)`` (pyspark 3.5 to 4.3, classic or Spark
Connect).

Needs the ``spark`` extra (``pip install 'aiocommit[spark]'``: pyspark and pyarrow)::

    from aiocommit.integrations.spark import register
    register(spark)
    (df.write.format("aiocommit").mode("overwrite")
        .partitionBy("country", "day")
        .save("abfss://container@account.dfs.core.windows.net/table"))

    # any supported pyspark, Spark 3.5 included
    from aiocommit.integrations.spark import write
    write(df, "abfss://container@account.dfs.core.windows.net/table",
          mode="overwrite", partition_by=["country", "day"])

    # many small tasks (pyspark >= 4.0): Spark's own writer, aiocommit's job commit
    write(df.repartition(300), "/data/table", format="parquet", engine="jvm")

See ``docs/spark.md`` for the options, the guarantees and how it runs.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from aiocommit.integrations.spark.map_in_arrow import write
    from aiocommit.integrations.spark.source import (
        AiocommitCommitMessage,
        AiocommitDataSource,
        AiocommitWriter,
    )

__all__ = [
    "AiocommitCommitMessage",
    "AiocommitDataSource",
    "AiocommitWriter",
    "register",
    "write",
]

#: loaded on first use, so the modules that need no pyspark (``paths``, ``values``...)
#: import without it
_LAZY = {
    "AiocommitCommitMessage": "aiocommit.integrations.spark.source",
    "AiocommitDataSource": "aiocommit.integrations.spark.source",
    "AiocommitWriter": "aiocommit.integrations.spark.source",
    "write": "aiocommit.integrations.spark.map_in_arrow",
}


def __getattr__(name: str) -> Any:
    if name not in _LAZY:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(_LAZY[name]), name)
    globals()[name] = value
    return value


def register(spark: SparkSession) -> None:
    """Register the ``aiocommit`` data source with a session, and make
    ``df.write.format("aiocommit")`` honour what Spark's Python data source API drops:
    every save mode, ``partitionBy``, the session's write confs, writes from any thread
    and from every session of the application (``newSession()``, before or after this
    call), errors with their cause first (see ``dataframe_writer``). Idempotent: any
    number of calls, on any session. The thread's active session is left as it was.
    Needs pyspark 4.0 or later (Spark's Python data source API); on 3.5 use
    ``write(df, ...)``."""
    from aiocommit.errors import Unsupported
    from aiocommit.integrations.spark import seam
    from aiocommit.integrations.spark.dataframe_writer import ensure_registered, install

    if not seam.HAS_DATA_SOURCES:
        raise Unsupported(
            f"pyspark {seam.VERSION} has no Python data source API (new in 4.0): "
            'format("aiocommit") needs pyspark >= 4.0; write with '
            "aiocommit.integrations.spark.write(df, dest, ...) instead"
        )
    install()
    ensure_registered(spark)
