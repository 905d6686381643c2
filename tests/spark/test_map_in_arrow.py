"""``aiocommit.integrations.spark.write(df, dest, ...)`` (``mapInArrow``; pyspark 3.5
and 4.x): exactly once with first attempts killed mid-partition, and what Spark's own
writer writes (partition names, types, save modes), as ``format("aiocommit")`` does."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.types import LongType, StructField, StructType

from aiocommit.integrations.spark import seam, write
from aiocommit.protocol.success import decode_success
from tests.spark.helpers import data_files, quiet, temporary_is_clean
from tests.spark.test_parity import (
    BINARY,
    PARTITION_COLUMNS,
    SCALARS,
    assert_parity,
    frame,
    leaf_dirs,
    read_back,
    typed_frame,
)


def test_first_attempts_killed_mid_partition_commit_exactly_once(
    spark: SparkSession, tmp_path: Path
) -> None:
    """Every task's attempt 0 dies (its process exits) after its second Arrow batch,
    with files of that attempt on disk; the retries' files are committed, each row once,
    and the killed attempts' files are gone."""
    dest, reports = tmp_path / "out", tmp_path / "reports"
    df = spark.range(0, 6000, numPartitions=2).selectExpr("id", "cast(id % 3 as string) AS k")
    options = {
        "maxRecordsPerFile": "300",
        "aiocommit.test.killFirstAttempts": "true",
        "spark.hadoop.mapreduce.manifest.committer.summary.report.directory": str(reports),
    }
    spark.conf.set("spark.sql.execution.arrow.maxRecordsPerBatch", "500")
    try:
        with quiet(spark):
            write(df, str(dest), mode="append", partition_by="k", options=options)
    finally:
        spark.conf.unset("spark.sql.execution.arrow.maxRecordsPerBatch")
    ids = [r[0] for r in spark.read.parquet(str(dest)).select("id").collect()]
    assert sorted(ids) == list(range(6000))
    assert temporary_is_clean(dest)
    (report,) = reports.glob("summary-*.json")
    counters = decode_success(report.read_bytes()).iostatistics.counters
    # the two killed attempts had written files into their own attempt directories
    assert counters["committer_uncommitted_task_attempts_deleted"] == 2, counters
    # part-<partition>-<job>-<Spark task attempt id>.c<n>...: one attempt per partition
    attempts = {(f.split("/")[-1][:10], f.split(".")[0].split("-")[-1]) for f in data_files(dest)}
    assert len(attempts) == 2, attempts


@pytest.fixture
def proleptic_parquet(spark: SparkSession) -> Iterator[None]:
    """Spark 3.5's writer refuses dates before 1582 and timestamps before 1900 in Parquet
    unless told how to write them; Spark 4 and aiocommit write them as they are
    (``CORRECTED``, Spark 4's default): so does Spark's writer here."""
    confs = (
        "spark.sql.parquet.datetimeRebaseModeInWrite",
        "spark.sql.parquet.int96RebaseModeInWrite",
    )
    if seam.PYSPARK >= (4, 0):
        yield
        return
    for conf in confs:
        spark.conf.set(conf, "CORRECTED")
    try:
        yield
    finally:
        for conf in confs:
            spark.conf.unset(conf)


@pytest.mark.usefixtures("proleptic_parquet")
def test_write_matches_sparks_writer(spark: SparkSession, tmp_path: Path) -> None:
    """Partition directory names of every type, every scalar type through each format,
    then append, static and dynamic overwrite: as Spark's own writer."""
    ours, native = both(
        partition_frame(spark), tmp_path / "names", "parquet", list(PARTITION_COLUMNS)
    )
    assert_parity(spark, ours, native, "parquet")
    cases = [("parquet", [*SCALARS, BINARY]), ("json", SCALARS), ("csv", SCALARS)]
    if seam.PYSPARK < (4, 0):  # CSV/JSON text is Spark 4's (docs/spark.md, Spark 3.5)
        cases = cases[:1]
    for fmt, columns in cases:
        df = typed_frame(spark, columns)
        ours, native = both(df, tmp_path / fmt, fmt, ["part"])
        assert_parity(spark, ours, native, fmt)
    first = typed_frame(spark, SCALARS[:3], rows=20)
    second = typed_frame(spark, SCALARS[:3], rows=6).where("part = 'a'")
    for mode, df, options in [
        ("append", first, {}),
        ("append", second, {}),
        ("overwrite", first, {}),
        ("overwrite", second, {"partitionOverwriteMode": "dynamic"}),
    ]:
        ours, native = both(df, tmp_path / "modes", "parquet", ["part"], mode, options)
        assert leaf_dirs(ours) == leaf_dirs(native)
        assert read_back(spark, ours, "parquet") == read_back(spark, native, "parquet")
    assert len(read_back(spark, ours, "parquet")[1]) == 10 + 3  # b's 10 kept, a replaced


def test_errorifexists_and_ignore_as_sparks_writer(spark: SparkSession, tmp_path: Path) -> None:
    from pyspark.errors import AnalysisException

    df = typed_frame(spark, SCALARS[:2], rows=8)
    write(df, str(tmp_path / "out"), format="csv", partition_by=["part"])
    before = data_files(tmp_path / "out")
    with pytest.raises(
        AnalysisException, match=r"^\[PATH_ALREADY_EXISTS\] Path .*out already"
    ) as e:
        write(df, str(tmp_path / "out"), format="csv")
    assert str(e.value).count("PATH_ALREADY_EXISTS") == 1, str(e.value)
    write(df, str(tmp_path / "out"), format="csv", mode="ignore")
    assert data_files(tmp_path / "out") == before
    with pytest.raises(ValueError, match="mode must be one of"):
        write(df, str(tmp_path / "out"), mode="replace")


@pytest.mark.skipif(not seam.HAS_DATA_SOURCES, reason='format("aiocommit") needs pyspark 4')
def test_write_and_the_data_source_write_the_same(spark: SparkSession, tmp_path: Path) -> None:
    df = typed_frame(spark, SCALARS, rows=30)
    write(df, str(tmp_path / "write"), partition_by="part", options={"compression": "zstd"})
    df.write.format("aiocommit").partitionBy("part").option("compression", "zstd").save(
        str(tmp_path / "source")
    )
    assert leaf_dirs(tmp_path / "write") == leaf_dirs(tmp_path / "source")
    assert all(f.endswith(".zstd.parquet") for f in data_files(tmp_path / "write"))
    assert read_back(spark, tmp_path / "write", "parquet") == read_back(
        spark, tmp_path / "source", "parquet"
    )


@pytest.mark.skipif(not seam.HAS_DATA_SOURCES, reason="Spark Connect server: pyspark 4")
def test_write_over_spark_connect(spark: SparkSession, tmp_path: Path) -> None:
    """``write()`` from a Spark Connect client (own process: pyspark refuses a Connect
    session in a process with a classic one), every row once, Spark's partition names."""
    pytest.importorskip("grpc")  # the spark-connect extra (in dev) installs the client
    dest = tmp_path / "out"
    port = spark.conf.get("spark.connect.grpc.binding.port")
    done = subprocess.run(
        [sys.executable, "-m", "tests.spark.connect_client", str(port), str(dest), "write"],
        capture_output=True,
        text=True,
        timeout=240,
        cwd=Path(__file__).parents[2],
    )
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report == {"session": "pyspark.sql.connect.session", "existing": "PATH_ALREADY_EXISTS"}
    assert sorted(r[0] for r in spark.read.parquet(str(dest)).collect()) == list(range(12))
    assert {Path(p).parent.name for p in data_files(dest)} == {"k=0", "k=1", "k=2"}


def partition_frame(spark: SparkSession) -> DataFrame:
    schema = StructType(
        [StructField("id", LongType())]
        + [StructField(n, t) for n, (t, _) in PARTITION_COLUMNS.items()]
    )
    longest = max(len(values) for _, values in PARTITION_COLUMNS.values()) + 1
    rows = [
        (i, *[[*values, None][i % (len(values) + 1)] for _, values in PARTITION_COLUMNS.values()])
        for i in range(longest)
    ]
    return frame(spark, rows, schema)


def both(
    df: DataFrame,
    base: Path,
    fmt: str,
    partition_by: list[str],
    mode: str = "append",
    options: dict[str, str] | None = None,
) -> tuple[Path, Path]:
    """(ours, native): the same write through ``write()`` and through Spark's writer."""
    ours, native = base / "ours", base / "native"
    writer = df.write.mode(mode).format(fmt).options(**(options or {})).partitionBy(*partition_by)
    writer.save(str(native))
    write(df, str(ours), format=fmt, mode=mode, partition_by=partition_by, options=options)
    return ours, native
