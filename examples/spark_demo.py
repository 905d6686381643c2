"""Write a partitioned dataset through aiocommit from PySpark, read it back, and show
what the commit did.

    python examples/spark_demo.py [DEST] [--rows N]

DEST is any store URL or local directory (default: a new temporary directory).
Spark runs in local mode; Java 17 must be installed (``scripts/ensure_java.sh``).
"""

from __future__ import annotations

import argparse
import atexit
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

STAGES = (
    "job_stage_load_manifests",
    "job_stage_create_target_dirs",
    "job_stage_rename_files",
    "job_stage_save_success_marker",
    "job_stage_cleanup",
    "committer_commit_job",
)


def start_spark(master: str = "local[2]") -> SparkSession:
    """A quiet local session whose Python workers run this interpreter."""
    os.environ["PYSPARK_PYTHON"] = sys.executable  # before the JVM starts
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from pyspark.sql import SparkSession

    scratch = Path(tempfile.mkdtemp(prefix="aiocommit-spark-"))
    atexit.register(shutil.rmtree, scratch, True)  # log4j file and warehouse dir
    log4j = scratch / "log4j2.properties"
    log4j.write_text(
        "rootLogger.level = error\nrootLogger.appenderRef.stdout.ref = console\n"
        "appender.console.type = Console\nappender.console.name = console\n"
        "appender.console.target = SYSTEM_ERR\nappender.console.layout.type = PatternLayout\n"
        "appender.console.layout.pattern = %d{HH:mm:ss} %p %c{1}: %m%n\n"
    )
    spark = (
        SparkSession.builder.master(master)
        .appName("aiocommit-demo")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.sql.warehouse.dir", str(log4j.parent / "warehouse"))
        .config("spark.driver.extraJavaOptions", f"-Dlog4j2.configurationFile=file:{log4j}")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def run_demo(spark: SparkSession, dest: str, rows: int = 200_000) -> dict[str, float]:
    """Write ``rows`` events partitioned by country and day, read them back, print the
    commit summary. Returns the figures printed."""
    from pyspark.sql import functions as F

    from aiocommit.integrations.spark import register
    from aiocommit.protocol.success import decode_success
    from aiocommit.stores.registry import open_store

    register(spark)
    countries = F.element_at(
        F.array(*[F.lit(c) for c in ("de", "fr", "jp", "us", "São Tomé")]),
        (F.col("id") % 5 + 1).cast("int"),
    )
    events = (
        spark.range(rows, numPartitions=4)
        .withColumn("country", countries)
        .withColumn(
            "day", F.date_add(F.lit("2024-01-01").cast("date"), (F.col("id") % 3).cast("int"))
        )
        .withColumn("amount", (F.col("id") % 1000) * 0.25)
    )
    started = time.perf_counter()
    (
        events.write.format("aiocommit")
        .mode("overwrite")
        .option("partitionBy", "country,day")
        .save(dest)
    )
    seconds = time.perf_counter() - started
    back = spark.read.parquet(dest)
    read_back = back.count()
    print(f"wrote {rows:,} rows to {dest} in {seconds:.1f} s; read back {read_back:,} rows")
    print(f"partitions: {back.select('country', 'day').distinct().count()}")
    if read_back != rows:
        raise SystemExit(f"row counts differ: wrote {rows}, read {read_back}")

    import asyncio

    async def read_success() -> bytes:
        store, path = open_store(dest)
        try:
            return await store.read_bytes(path.rstrip("/") + "/_SUCCESS")
        finally:
            await store.aclose()

    summary = decode_success(asyncio.run(read_success()))
    stats = summary.iostatistics
    files = stats.counters.get("committer_files_committed", 0)
    size = stats.counters.get("committer_bytes_committed", 0)
    print(f"job {summary.job_id}: success={summary.success}")
    print(f"files committed: {files}, bytes committed: {size:,}")
    print(f"tasks committed: {stats.counters.get('committer_tasks_completed', 0)}")
    for name in STAGES:
        mean = stats.meanstatistics.get(name + ".mean")
        if mean is not None and mean.samples:
            print(f"  {name:<32} {mean.sum:>6} ms")
    return {"rows": float(rows), "read_back": float(read_back), "files": float(files)}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dest", nargs="?", help="store URL or directory (default: a temp dir)")
    parser.add_argument("--rows", type=int, default=200_000)
    args = parser.parse_args(argv)
    dest = args.dest or tempfile.mkdtemp(prefix="aiocommit-spark-demo-")
    spark = start_spark()
    try:
        run_demo(spark, dest, args.rows)
    finally:
        spark.stop()


if __name__ == "__main__":
    main()
