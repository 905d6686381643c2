"""Run by ``test_cause_first.py`` in its own process (pyspark refuses a Connect session
in a process with a classic one): the errors of aiocommit writes through Spark Connect.

Usage: ``python -m tests.spark.connect_errors_client PORT DIRECTORY``; prints one JSON
line: case -> ``{"type": ..., "text": ...}`` (the error's ``str()``).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pyspark.sql import DataFrame, SparkSession

from aiocommit.integrations.spark import register


def cases(df: DataFrame, directory: Path) -> dict[str, Callable[[], Any]]:
    def save(name: str, mode: str = "append", **options: str) -> Callable[[], Any]:
        writer = df.write.format("aiocommit").mode(mode).options(**options)
        return lambda: writer.save(str(directory / name))

    return {
        "misspelt option": save("typo", compresion="zstd"),
        "bad conflict mode": save("conflict", conflict_mode="sideways"),
        "bad save mode": save("mode", mode="sideways"),
        "failing task": save("task", **{"aiocommit.test.failPartitionAlways": "1"}),
        "writeTo": lambda: df.writeTo("connect_v2").using("aiocommit").create(),
        "SQL INSERT": lambda: df.sparkSession.sql("INSERT INTO connect_t VALUES (1, 'a')"),
        "saveAsTable": lambda: df.write.format("aiocommit").saveAsTable("connect_t2"),
    }


def main(port: str, directory: str) -> None:
    spark = SparkSession.builder.remote(f"sc://127.0.0.1:{port}").getOrCreate()
    register(spark)
    df = spark.range(6).selectExpr("id", "cast(id % 2 as string) as k")
    spark.sql("CREATE TABLE connect_t (id BIGINT, k STRING) USING aiocommit")
    seen: dict[str, dict[str, str]] = {}
    try:
        for name, run in cases(df, Path(directory)).items():
            try:
                run()
                seen[name] = {"type": "", "text": ""}
            except Exception as error:
                seen[name] = {"type": type(error).__name__, "text": str(error)}
    finally:
        for table in ("connect_t", "connect_t2"):
            spark.sql(f"DROP TABLE IF EXISTS {table}")
    print(json.dumps(seen))


if __name__ == "__main__":
    main(*sys.argv[1:])
