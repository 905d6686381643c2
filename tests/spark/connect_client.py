"""Run by ``test_parity.py`` in its own process (pyspark refuses a Connect session in a
process with a classic one): writes through Spark Connect with ``register(spark)``.

Usage: ``python -m tests.spark.connect_client PORT DESTINATION [write]``; prints a JSON
line. With ``write``: through ``aiocommit.integrations.spark.write()`` (``mapInArrow``).
"""

from __future__ import annotations

import json
import sys

from pyspark.errors import AnalysisException
from pyspark.sql import SparkSession

from aiocommit.integrations.spark import register, write


def main(port: str, destination: str, how: str = "format") -> None:
    spark = SparkSession.builder.remote(f"sc://127.0.0.1:{port}").getOrCreate()
    df = spark.range(12).selectExpr("id", "cast(id % 3 as string) as k")
    if how == "write":
        write(df, destination, partition_by="k")
        try:
            write(df, destination)
            condition = None
        except AnalysisException as error:
            condition = error.getCondition()
        print(json.dumps({"session": type(spark).__module__, "existing": condition}))
        return
    register(spark)
    # Spark refuses the default mode and partitionBy for Python data sources, also here
    df.write.format("aiocommit").partitionBy("k").save(destination)
    try:
        df.write.format("aiocommit").save(destination)
        condition = None
    except AnalysisException as error:
        condition = error.getCondition()
    print(json.dumps({"session": type(spark).__module__, "existing": condition}))


if __name__ == "__main__":
    main(*sys.argv[1:])
