"""``df.write.format("aiocommit")`` against a real local Spark: read back with
``spark.read`` and compare row for row."""

from __future__ import annotations

import asyncio
import datetime
from collections.abc import Mapping, Sequence
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.types import (
    BooleanType,
    DateType,
    DecimalType,
    DoubleType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from aiocommit import abort_job, list_jobs
from aiocommit.integrations.spark import seam
from aiocommit.protocol.success import decode_success
from tests.spark.helpers import data_files, quiet, temporary_is_clean

#: every test here writes through format("aiocommit")
pytestmark = pytest.mark.skipif(
    not seam.HAS_DATA_SOURCES, reason='format("aiocommit") needs pyspark 4 (3.5 has write() only)'
)

SCHEMA = StructType(
    [
        StructField("id", LongType()),
        StructField("k", StringType()),
        StructField("v", DoubleType()),
    ]
)

Row = tuple[Any, ...]


def frame(
    spark: SparkSession, rows: Sequence[Row], schema: StructType, slices: int = 2
) -> DataFrame:
    """A DataFrame with exactly ``slices`` input partitions, split deterministically."""
    return spark.createDataFrame(spark.sparkContext.parallelize(list(rows), slices), schema)


def write(
    df: DataFrame, dest: Path, mode: str = "append", options: Mapping[str, str] | None = None
) -> None:
    writer = df.write.format("aiocommit").mode(mode)
    for key, value in (options or {}).items():
        writer = writer.option(key, value)
    writer.save(str(dest))


def read_rows(
    spark: SparkSession, dest: Path, schema: StructType, fmt: str = "parquet"
) -> list[Row]:
    reader = spark.read.schema(schema)
    if fmt == "csv":  # Spark's default quoting (\"), as aiocommit writes it
        reader = reader.option("header", "true").option("multiLine", "true")
    df = reader.format(fmt).load(str(dest)).select(*schema.names)
    return ordered(tuple(r) for r in df.collect())


def ordered(rows: Any) -> list[Row]:
    return sorted(rows, key=repr)


def keyed(start: int, count: int, keys: Sequence[str]) -> list[Row]:
    return [(i, keys[i % len(keys)], i * 0.5) for i in range(start, start + count)]


def leaf_dirs(root: Path) -> set[str]:
    return {str(Path(p).parent) for p in data_files(root)}


def test_append_partitioned_round_trip(spark: SparkSession, tmp_path: Path) -> None:
    dest = tmp_path / "out"
    first = keyed(0, 300, ["a", "b", "c"])
    write(frame(spark, first, SCHEMA), dest, options={"partitionBy": "k"})
    assert read_rows(spark, dest, SCHEMA) == ordered(first)
    assert leaf_dirs(dest) == {"k=a", "k=b", "k=c"}
    files = data_files(dest)
    assert all(name.endswith(".snappy.parquet") for name in files)
    # the partition column is not inside the files
    import pyarrow.parquet as pq

    assert pq.read_schema(dest / next(iter(files))).names == ["id", "v"]
    success = decode_success((dest / "_SUCCESS").read_bytes())
    assert success.success and len(success.filenames) == len(files) == 6
    assert temporary_is_clean(dest)

    second = keyed(300, 50, ["c", "d"])
    write(frame(spark, second, SCHEMA), dest, options={"partitionBy": "k"})
    assert read_rows(spark, dest, SCHEMA) == ordered(first + second)
    assert set(files) < set(data_files(dest))  # appended, nothing replaced
    assert temporary_is_clean(dest)


SPECIAL = [
    "plain",
    "with space",
    "a/b",
    " leading and trailing ",
    "ünïcödé ✓",
    "日本語/パス",
    "100%",
    "a=b",
    "colon:x",
    "q?#",
    "brace{[]}^",
    "tab\tnew\nline",
    "quote\"'",
    "star*",
    "back\\slash",
    "del\x7f",
    "..",
    "",
    None,
]


def test_partition_values_escaped_as_spark_does(spark: SparkSession, tmp_path: Path) -> None:
    rows = [(i, value, float(i)) for i, value in enumerate(SPECIAL)]
    df = frame(spark, rows, SCHEMA)
    ours, native = tmp_path / "ours", tmp_path / "native"
    write(df, ours, options={"partitionBy": "k"})
    df.write.partitionBy("k").parquet(str(native))
    assert leaf_dirs(ours) == leaf_dirs(native)
    assert "k=__HIVE_DEFAULT_PARTITION__" in leaf_dirs(ours)
    assert "k=a%2Fb" in leaf_dirs(ours)
    # Spark reads "" back as null, for its own output as for ours
    expected = ordered((i, value or None, v) for i, value, v in rows)
    assert read_rows(spark, ours, SCHEMA) == expected
    assert read_rows(spark, native, SCHEMA) == expected


def test_typed_partition_columns_match_spark(spark: SparkSession, tmp_path: Path) -> None:
    schema = StructType(
        [
            StructField("id", LongType()),
            StructField("day", DateType()),
            StructField("flag", BooleanType()),
            StructField("n", IntegerType()),
            StructField("x", DoubleType()),
            StructField("amount", DecimalType(10, 2)),
            StructField("ts", TimestampType()),
        ]
    )
    stamp = datetime.datetime(2024, 3, 12, 1, 2, 3)
    rows: list[Row] = [
        (
            i,
            datetime.date(2024, 1, 1 + i % 3),
            i % 2 == 0,
            i % 4 - 1,
            [1.5, 1e20, 0.0001, 100.0][i % 4],
            Decimal(f"{i % 3}.50"),
            stamp + datetime.timedelta(hours=i % 2, microseconds=250_000 * (i % 2)),
        )
        for i in range(12)
    ]
    rows.append((99, None, None, None, None, None, None))
    df = frame(spark, rows, schema)
    columns = "day,flag,n,x,amount,ts"
    ours, native = tmp_path / "ours", tmp_path / "native"
    write(df, ours, options={"partitionBy": columns})
    df.write.partitionBy(*columns.split(",")).parquet(str(native))
    assert leaf_dirs(ours) == leaf_dirs(native)
    assert read_rows(spark, ours, schema) == read_rows(spark, native, schema)
    assert read_rows(spark, ours, schema) == ordered(rows)


def test_overwrite_static_replaces_everything(spark: SparkSession, tmp_path: Path) -> None:
    dest = tmp_path / "out"
    old = keyed(0, 100, ["a", "b"])
    write(frame(spark, old, SCHEMA), dest, options={"partitionBy": "k"})
    old_files = set(data_files(dest))
    new = keyed(1000, 60, ["b", "c"])
    write(frame(spark, new, SCHEMA), dest, "overwrite", {"partitionBy": "k"})
    assert read_rows(spark, dest, SCHEMA) == ordered(new)
    assert not old_files & set(data_files(dest))
    assert not (dest / "k=a").exists()  # the emptied old partition is gone
    assert temporary_is_clean(dest)
    # unpartitioned over partitioned: the old partition directories go too
    flat = keyed(5000, 10, ["z"])
    write(frame(spark, flat, SCHEMA), dest, "overwrite")
    assert read_rows(spark, dest, SCHEMA) == ordered(flat)
    assert leaf_dirs(dest) == {"."}
    assert temporary_is_clean(dest)


def test_overwrite_dynamic_replaces_written_partitions(spark: SparkSession, tmp_path: Path) -> None:
    dest = tmp_path / "out"
    old = keyed(0, 90, ["a", "b", "with space/x"])
    write(frame(spark, old, SCHEMA), dest, options={"partitionBy": "k"})
    new = keyed(1000, 40, ["b", "c", "with space/x"])
    options = {"partitionBy": "k", "partitionOverwriteMode": "dynamic"}
    write(frame(spark, new, SCHEMA), dest, "overwrite", options)
    kept = [r for r in old if r[1] == "a"]
    assert read_rows(spark, dest, SCHEMA) == ordered(kept + new)
    assert temporary_is_clean(dest)
    # an empty dynamic overwrite replaces nothing
    write(frame(spark, [], SCHEMA), dest, "overwrite", options)
    assert read_rows(spark, dest, SCHEMA) == ordered(kept + new)


def test_empty_input(spark: SparkSession, tmp_path: Path) -> None:
    dest = tmp_path / "empty"
    write(spark.createDataFrame([], SCHEMA), dest)
    back = spark.read.parquet(str(dest))
    assert back.count() == 0
    assert back.schema.names == SCHEMA.names
    assert [f.dataType for f in back.schema.fields] == [f.dataType for f in SCHEMA.fields]
    assert len(data_files(dest)) == 1

    # a static overwrite with nothing empties the destination
    full = tmp_path / "full"
    write(frame(spark, keyed(0, 20, ["a", "b"]), SCHEMA), full, options={"partitionBy": "k"})
    write(frame(spark, [], SCHEMA), full, "overwrite", {"partitionBy": "k"})
    assert data_files(full) == {}
    assert (full / "_SUCCESS").exists()
    assert temporary_is_clean(full)


def test_failed_first_attempt_is_retried_exactly_once(spark: SparkSession, tmp_path: Path) -> None:
    dest, reports = tmp_path / "out", tmp_path / "reports"
    rows = keyed(0, 200, ["a", "b", "c", "d"])
    options = {
        "partitionBy": "k",
        "aiocommit.test.failPartitionOnFirstAttempt": "1",
        "spark.hadoop.mapreduce.manifest.committer.summary.report.directory": str(reports),
    }
    with quiet(spark):
        write(frame(spark, rows, SCHEMA), dest, options=options)
    assert read_rows(spark, dest, SCHEMA) == ordered(rows)
    files = data_files(dest)
    # one file per task and partition value: the failed attempt's uploaded files are gone
    for key in "abcd":
        names = sorted(Path(f).name for f in files if f.startswith(f"k={key}/"))
        assert [n[:10] for n in names] == ["part-00000", "part-00001"], names
    assert temporary_is_clean(dest)
    (report,) = reports.glob("summary-*.json")
    summary = decode_success(report.read_bytes())
    assert summary.success
    counters = summary.iostatistics.counters
    assert counters["committer_uncommitted_task_attempts_deleted"] == 1
    assert counters["committer_task_attempt_directories_deleted"] == 3


def test_partition_that_always_fails_aborts(spark: SparkSession, tmp_path: Path) -> None:
    dest = tmp_path / "out"
    before = keyed(0, 30, ["a", "b"])
    write(frame(spark, before, SCHEMA), dest, options={"partitionBy": "k"})
    snapshot = data_files(dest)
    options = {"partitionBy": "k", "aiocommit.test.failPartitionAlways": "1"}
    with quiet(spark), pytest.raises(Exception, match=r"aiocommit\.test hook: partition 1"):
        write(frame(spark, keyed(100, 30, ["b", "c"]), SCHEMA), dest, options=options)
    assert data_files(dest) == snapshot
    assert temporary_is_clean(dest)
    assert read_rows(spark, dest, SCHEMA) == ordered(before)
    # the same again, as an overwrite: nothing of the old data may go
    with quiet(spark), pytest.raises(Exception, match=r"aiocommit\.test hook: partition 1"):
        write(frame(spark, keyed(100, 30, ["b", "c"]), SCHEMA), dest, "overwrite", options)
    assert data_files(dest) == snapshot
    assert temporary_is_clean(dest)


def test_commit_failing_part_way_leaves_nothing_visible(
    spark: SparkSession, tmp_path: Path
) -> None:
    dest = tmp_path / "out"
    before = keyed(0, 40, ["a", "b"])
    write(frame(spark, before, SCHEMA), dest, options={"partitionBy": "k"})
    snapshot = data_files(dest)
    new = keyed(100, 400, ["b", "c", "d", "e", "f"])
    # one file of task 1 cannot be renamed; task 0's files are renamed first or alongside
    failing = {"partitionBy": "k", "aiocommit.test.commitFault": "rename:k=f/part-00001"}
    with quiet(spark), pytest.raises(Exception, match="PYTHON_DATA_SOURCE_ERROR"):
        write(frame(spark, new, SCHEMA), dest, options=failing)
    # abort moved back whatever the commit had renamed and removed the job
    assert data_files(dest) == snapshot
    assert temporary_is_clean(dest)
    # a re-run (a new job) completes
    write(frame(spark, new, SCHEMA), dest, options={"partitionBy": "k"})
    assert read_rows(spark, dest, SCHEMA) == ordered(before + new)
    assert temporary_is_clean(dest)


def test_overwrite_failing_part_way_is_undone_by_abort(spark: SparkSession, tmp_path: Path) -> None:
    dest = tmp_path / "out"
    old = keyed(0, 40, ["a", "b"])
    write(frame(spark, old, SCHEMA), dest, options={"partitionBy": "k"})
    snapshot = data_files(dest)
    victim = sorted(snapshot)[-1]
    new = keyed(100, 40, ["b", "c"])
    # the new files are in; an old one cannot be moved aside: commit() fails
    options = {"partitionBy": "k", "aiocommit.test.commitFault": f"rename:{victim}"}
    with quiet(spark), pytest.raises(Exception, match="injected permanent failure"):
        write(frame(spark, new, SCHEMA), dest, "overwrite", options)
    # abort() undid the job and moved the old files it had moved aside back
    assert data_files(dest) == snapshot
    assert read_rows(spark, dest, SCHEMA) == ordered(old)
    assert temporary_is_clean(dest)


def test_overwrite_whose_abort_failed_is_undone_by_abort_job(
    spark: SparkSession, tmp_path: Path
) -> None:
    dest = tmp_path / "out"
    old = keyed(0, 40, ["a", "b"])
    write(frame(spark, old, SCHEMA), dest, options={"partitionBy": "k"})
    snapshot = data_files(dest)
    victim = sorted(snapshot)[-1]
    new = keyed(100, 40, ["b", "c"])
    options = {
        "partitionBy": "k",
        "aiocommit.test.commitFault": f"rename:{victim}",
        "aiocommit.test.abortFault": "rename:k=c",  # moving the new files back fails
    }
    with quiet(spark), pytest.raises(Exception, match="injected permanent failure"):
        write(frame(spark, new, SCHEMA), dest, "overwrite", options)
    # stuck half-way, and recorded: the job is committing ...
    (job,) = asyncio.run(list_jobs(str(dest)))
    assert job.state == "committing"
    # ... until an abort (aiocommit abort) finishes undoing it from its commit plan
    assert asyncio.run(abort_job(str(dest), job.job_id)) == []
    assert data_files(dest) == snapshot
    assert read_rows(spark, dest, SCHEMA) == ordered(old)
    assert temporary_is_clean(dest)


@pytest.mark.parametrize(
    ("fmt", "options"),
    [
        ("csv", {"header": "true"}),
        ("json", {"compression": "gzip"}),
        ("parquet", {"compression": "zstd", "rowGroupSize": "7"}),
    ],
)
def test_formats(spark: SparkSession, tmp_path: Path, fmt: str, options: dict[str, str]) -> None:
    dest = tmp_path / fmt
    rows = [*keyed(0, 50, ["a", "b"]), (50, "a", None)]
    write(frame(spark, rows, SCHEMA), dest, options={"format": fmt, "partitionBy": "k", **options})
    assert read_rows(spark, dest, SCHEMA, fmt) == ordered(rows)
    suffix = {"csv": ".csv", "json": ".json.gz", "parquet": ".zstd.parquet"}[fmt]
    assert all(name.endswith(suffix) for name in data_files(dest))
    if fmt == "parquet":
        import pyarrow.parquet as pq

        meta = pq.ParquetFile(dest / sorted(data_files(dest))[0]).metadata
        assert meta.num_row_groups > 1
        assert max(meta.row_group(i).num_rows for i in range(meta.num_row_groups)) == 7


def test_commit_options_by_hadoop_names_in_any_case(spark: SparkSession, tmp_path: Path) -> None:
    dest, reports = tmp_path / "out", tmp_path / "reports"
    options = {
        # Spark lower-cases option keys; both spellings must work
        "MapReduce.Manifest.Committer.IO.Threads": "7",
        "spark.hadoop.mapreduce.fileoutputcommitter.marksuccessfuljobs": "false",
        "aiocommit.report_dir": str(reports),
        "partitionBy": "k",
    }
    write(frame(spark, keyed(0, 20, ["a", "b"]), SCHEMA), dest, options=options)
    assert not (dest / "_SUCCESS").exists()
    (report,) = reports.glob("summary-*.json")
    assert (
        decode_success(report.read_bytes()).diagnostics["mapreduce.manifest.committer.io.threads"]
        == "7"
    )
    # an overwrite without a _SUCCESS marker works the same
    new = keyed(100, 10, ["c"])
    write(frame(spark, new, SCHEMA), dest, "overwrite", options)
    assert read_rows(spark, dest, SCHEMA) == ordered(new)
    assert temporary_is_clean(dest)


def test_bad_options_fail_before_any_task(spark: SparkSession, tmp_path: Path) -> None:
    df = frame(spark, keyed(0, 4, ["a"]), SCHEMA)
    with pytest.raises(Exception, match="not in the schema"):
        write(df, tmp_path / "a", options={"partitionBy": "nope"})
    with pytest.raises(Exception, match="partitionOverwriteMode"):
        write(df, tmp_path / "b", "overwrite", {"partitionOverwriteMode": "sometimes"})
    with pytest.raises(Exception, match="did you mean 'rowgroupsize'"):
        write(df, tmp_path / "c", options={"rowGroupSzie": "10"})
    assert not any((tmp_path / name).exists() for name in "abc")


@pytest.mark.parametrize("fmt", ["csv", "json"])
def test_text_formats_keep_dates_timestamps_and_decimals(
    spark: SparkSession, tmp_path: Path, fmt: str
) -> None:
    schema = StructType(
        [
            StructField("id", LongType()),
            StructField("day", DateType()),
            StructField("ts", TimestampType()),
            StructField("amount", DecimalType(10, 2)),
            StructField("text", StringType()),
        ]
    )
    # milliseconds: what Spark's own CSV and JSON writers keep (see test_parity.py)
    stamp = datetime.datetime(2024, 5, 6, 7, 8, 9, 123000)
    rows: list[Row] = [
        (
            i,
            datetime.date(2024, 1, 1 + i),
            stamp + datetime.timedelta(days=i),
            Decimal(f"{i}.25"),
            t,
        )
        for i, t in enumerate(["plain", 'comma, "quoted"', "ünï\nline", None])
    ]
    dest = tmp_path / fmt
    header = {"header": "true"} if fmt == "csv" else {}  # JSON's writer has no header option
    write(frame(spark, rows, schema), dest, options={"format": fmt, **header})
    assert read_rows(spark, dest, schema, fmt) == ordered(rows)
