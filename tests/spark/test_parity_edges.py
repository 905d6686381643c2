"""Parity with Spark's own writer where the two used to differ (issue 20, items 1-8): each
test writes the same DataFrame with Spark's writer and with aiocommit and compares the
files and rows, or the errors (class, condition, SQLSTATE, message)."""

from __future__ import annotations

import datetime
import math
import random
import struct
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from pyspark.sql import SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import DoubleType, FloatType, StructField, StructType, TimestampType

from aiocommit.integrations.spark import seam
from tests.spark.helpers import data_files
from tests.spark.test_parity import assert_parity, decoded_files, frame, leaf_dirs, write_both

#: each test writes with both writers; the first run in a process also starts Spark
pytestmark = [pytest.mark.timeout(300), pytest.mark.usefixtures("each_engine")]


@contextmanager
def session_conf(spark: SparkSession, key: str, value: str) -> Iterator[None]:
    before = spark.conf.get(key, None)
    spark.conf.set(key, value)
    try:
        yield
    finally:
        if before is None:
            spark.conf.unset(key)
        else:
            spark.conf.set(key, before)


@contextmanager
def no_job_runs(spark: SparkSession) -> Iterator[None]:
    """Fails if Spark ran a job (any task) inside the block."""
    context = spark.sparkContext
    group = f"must-run-no-job-{uuid.uuid4().hex}"
    context.setJobGroup(group, "refused before any task")
    try:
        yield
    finally:
        context.setLocalProperty("spark.jobGroup.id", None)  # type: ignore[arg-type]
        context.setLocalProperty("spark.job.description", None)  # type: ignore[arg-type]
        assert list(context.statusTracker().getJobIdsForGroup(group)) == []


def raised(write: Callable[..., object], *args: object) -> Exception:
    try:
        write(*args)
    except Exception as error:
        return error
    raise AssertionError("the write did not fail")


def assert_same_error(ours: Exception, native: Exception, ours_path: str, native_path: str) -> None:
    """Spark's own exception: class, condition, SQLSTATE and message (paths aside)."""
    assert type(ours) is type(native), (type(ours), type(native))
    assert ours.getCondition() == native.getCondition()  # type: ignore[attr-defined]
    assert ours.getSqlState() == native.getSqlState()  # type: ignore[attr-defined]
    assert native.getSqlState() is not None  # type: ignore[attr-defined]
    assert str(ours).replace(ours_path, "PATH") == str(native).replace(native_path, "PATH")


def unique(tmp_path: Path, stem: str) -> str:
    return f"{stem}_{tmp_path.name}".replace("-", "_").lower()


def table_rows(spark: SparkSession, name: str) -> list[str]:
    table = spark.table(name)
    return sorted(repr(tuple(r)) for r in table.select(*sorted(table.columns)).collect())


# item 1


def test_partition_by_keeps_the_name_as_given(spark: SparkSession, tmp_path: Path) -> None:
    """``partitionBy("COUNTRY")`` on a column ``country``: Spark resolves the column
    case-insensitively and names the directories (so the column read back) as given."""
    df = spark.createDataFrame([(1, "de"), (2, "fr"), (3, "de")], "id long, country string")
    for name, fmt in (("COUNTRY", "parquet"), ("CounTry", "csv")):
        ours, native = write_both(df, tmp_path / fmt, fmt, partition_by=[name])
        assert leaf_dirs(ours) == leaf_dirs(native) == {f"{name}=de", f"{name}=fr"}
        assert_parity(spark, ours, native, fmt)
    assert spark.read.parquet(str(tmp_path / "parquet" / "ours")).columns == ["id", "COUNTRY"]


# item 2


@pytest.mark.parametrize("mode", ["error", "errorifexists", "default", None])
def test_existing_path_raises_sparks_own_error(
    spark: SparkSession, tmp_path: Path, mode: str | None
) -> None:
    df = spark.range(3)
    ours, native = write_both(df, tmp_path, "parquet")
    before = (data_files(ours), data_files(native))
    errors = []
    for writer, target in (
        (df.write.format("parquet"), native),
        (df.write.format("aiocommit"), ours),
    ):
        if mode is not None:
            writer = writer.mode(mode)
        errors.append(raised(writer.save, str(target)))
    native_error, ours_error = errors
    assert native_error.getSqlState() == "42K04"  # type: ignore[attr-defined]
    assert_same_error(ours_error, native_error, str(ours), str(native))
    assert str(ours_error).count("[PATH_ALREADY_EXISTS]") == 1
    assert (data_files(ours), data_files(native)) == before


# item 3


def test_save_as_table_overwrite_replaces_the_whole_table_in_dynamic_mode(
    spark: SparkSession, tmp_path: Path
) -> None:
    """``saveAsTable(mode="overwrite")`` on a partitioned table Spark created, with
    ``partitionOverwriteMode=dynamic`` (session or option): Spark replaces the whole
    table; ``insertInto(overwrite=True)`` replaces only the partitions written."""
    big = spark.range(20).selectExpr("id", "cast(id % 4 as string) as p")
    small = spark.range(2).selectExpr("id + 100 as id", "'0' as p")
    names = []
    try:
        with session_conf(spark, "spark.sql.sources.partitionOverwriteMode", "dynamic"):
            for how in ("conf", "option", "insert"):
                results = {}
                for who, fmt in (("native", "parquet"), ("ours", "aiocommit")):
                    name = unique(tmp_path, f"dyn_{how}_{who}")
                    names.append(name)
                    big.write.partitionBy("p").saveAsTable(name)  # Spark's own table
                    writer = small.write.format(fmt)
                    if how == "insert":
                        writer.insertInto(name, overwrite=True)
                    else:
                        if how == "option":
                            writer = writer.option("partitionOverwriteMode", "dynamic")
                        writer.mode("overwrite").partitionBy("p").saveAsTable(name)
                    results[who] = table_rows(spark, name)
                assert results["ours"] == results["native"], how
                assert len(results["native"]) == (17 if how == "insert" else 2)
    finally:
        for name in names:
            spark.sql(f"DROP TABLE IF EXISTS {name}")


# item 4


def test_bucketed_save_as_table_is_refused_before_any_task(
    spark: SparkSession, tmp_path: Path
) -> None:
    """Spark's writer makes a bucketed table; aiocommit does not write Spark's bucketed
    layout, so it refuses before any task runs, naming the reason, and creates nothing
    (nor writes unbucketed files into a table Spark bucketed)."""
    df = spark.range(8).selectExpr("id", "cast(id % 2 as string) as k")
    native, ours = unique(tmp_path, "bucketed_native"), unique(tmp_path, "bucketed_ours")
    try:
        df.write.bucketBy(4, "id").sortBy("id").saveAsTable(native)
        details = {r[0]: r[1] for r in spark.sql(f"DESCRIBE TABLE EXTENDED {native}").collect()}
        assert details["Num Buckets"] == "4"
        before = table_rows(spark, native)
        for write in (
            lambda: df.write.format("aiocommit").bucketBy(4, "id").sortBy("id").saveAsTable(ours),
            lambda: df.write.format("aiocommit").bucketBy(4, "id").saveAsTable(ours),
            lambda: df.write.format("aiocommit").mode("append").saveAsTable(native),
            lambda: df.write.format("aiocommit").insertInto(native),
        ):
            with no_job_runs(spark):
                error = raised(write)
            assert "bucket" in str(error).splitlines()[0], str(error)
        assert not spark.catalog.tableExists(ours)
        assert table_rows(spark, native) == before
    finally:
        spark.sql(f"DROP TABLE IF EXISTS {native}")
        spark.sql(f"DROP TABLE IF EXISTS {ours}")


# item 5


def test_sql_and_write_to_name_the_cause_and_the_pattern_first(
    spark: SparkSession, tmp_path: Path
) -> None:
    """``writeTo(...).using("aiocommit")`` fails with the cause and the pattern to use on
    its first line, before any task; SQL ``INSERT INTO`` a ``USING aiocommit`` table and
    CTAS ``USING aiocommit`` (errors Spark words itself) are rewritten cause-first, the
    pattern in the Python error they carry."""
    pattern = 'df.write.format("aiocommit")'
    df = spark.range(3)
    table, ctas = unique(tmp_path, "v2_table"), unique(tmp_path, "ctas")
    try:
        for write in (
            lambda: df.writeTo(table).using("aiocommit").create(),
            lambda: df.writeTo(table).using("AioCommit").createOrReplace(),
        ):
            with no_job_runs(spark):
                error = raised(write)
            first = str(error).splitlines()[0]
            assert first.startswith("aiocommit cannot write"), first
            assert pattern in first, first
        spark.sql(f"CREATE TABLE {table} (id BIGINT) USING aiocommit")
        for statement in (
            f"INSERT INTO {table} VALUES (1)",
            f"CREATE TABLE {ctas} USING aiocommit AS SELECT 1 AS id",
        ):
            with no_job_runs(spark):
                error = raised(spark.sql, statement)
            first = str(error).splitlines()[0]
            assert first.startswith("aiocommit: InvalidInput: aiocommit cannot write"), first
            python_error = error.getMessageParameters()["msg"]  # type: ignore[attr-defined]
            assert pattern in python_error, python_error
    finally:
        spark.sql(f"DROP TABLE IF EXISTS {table}")
        spark.sql(f"DROP TABLE IF EXISTS {ctas}")


# item 6


def test_null_typed_columns_as_sparks_writer(spark: SparkSession, tmp_path: Path) -> None:
    """``F.lit(None)`` columns (top level and nested): Parquet and JSON written as Spark
    writes them; CSV refused with Spark's own error before any task."""
    df = (
        spark.range(6)
        .withColumn("x", F.lit(None))
        .selectExpr("id", "x", "array(x) AS a", "named_struct('z', x, 'n', id) AS s")
    )
    if seam.PYSPARK < (4, 1):  # Spark 4.0's Parquet writer refuses void columns
        native_parquet, ours_parquet = (
            tmp_path / "parquet" / "native",
            tmp_path / "parquet" / "ours",
        )
        native_error = raised(lambda: df.write.parquet(str(native_parquet)))
        with no_job_runs(spark):
            ours_error = raised(
                lambda: (
                    df.write.format("aiocommit").option("format", "parquet").save(str(ours_parquet))
                )
            )
        assert_same_error(ours_error, native_error, str(ours_parquet), str(native_parquet))
    else:
        ours, native = write_both(df, tmp_path / "parquet", "parquet")
        assert_parity(spark, ours, native, "parquet")
        assert spark.read.parquet(str(ours)).schema == spark.read.parquet(str(native)).schema
    ours, native = write_both(df, tmp_path / "json", "json")
    assert decoded_files(ours, None, "utf-8") == decoded_files(native, None, "utf-8")
    flat = df.select("id", "x")
    ours, native = write_both(
        flat, tmp_path / "json-nulls", "json", options={"ignoreNullFields": "false"}
    )
    assert decoded_files(ours, None, "utf-8") == decoded_files(native, None, "utf-8")
    native_csv, ours_csv = tmp_path / "csv" / "native", tmp_path / "csv" / "ours"
    native_error = raised(lambda: flat.write.csv(str(native_csv)))
    with no_job_runs(spark):
        ours_error = raised(
            lambda: flat.write.format("aiocommit").option("format", "csv").save(str(ours_csv))
        )
    assert native_error.getCondition() == "UNSUPPORTED_DATA_TYPE_FOR_DATASOURCE"  # type: ignore[attr-defined]
    assert_same_error(ours_error, native_error, str(ours_csv), str(native_csv))
    assert not ours_csv.exists()


# item 7


def test_duplicate_column_names_differing_in_case(spark: SparkSession, tmp_path: Path) -> None:
    """``id`` and ``ID``: Spark's Parquet and JSON writers refuse them
    (``COLUMN_ALREADY_EXISTS``) unless ``spark.sql.caseSensitive``; its CSV writer takes
    them. aiocommit does the same, refusing before any task."""
    df = spark.createDataFrame([(1, 2, "a"), (3, 4, "b")], "id int, ID int, s string")
    for fmt in ("parquet", "json"):
        native, ours = tmp_path / fmt / "native", tmp_path / fmt / "ours"
        native_error = raised(df.write.format(fmt).save, str(native))
        writer = df.write.format("aiocommit").option("format", fmt)
        with no_job_runs(spark):
            ours_error = raised(writer.save, str(ours))
        assert native_error.getCondition() == "COLUMN_ALREADY_EXISTS"  # type: ignore[attr-defined]
        assert_same_error(ours_error, native_error, str(ours), str(native))
        assert not ours.exists()
    ours, native = write_both(df, tmp_path / "csv", "csv", options={"header": "true"})
    assert decoded_files(ours, None, "utf-8") == decoded_files(native, None, "utf-8")
    with session_conf(spark, "spark.sql.caseSensitive", "true"):
        ours, native = write_both(df.select("id", "ID"), tmp_path / "sensitive", "parquet")
        assert sorted(data_files(ours)) and len(data_files(ours)) == len(data_files(native))
        assert [f.name for f in spark.read.parquet(str(ours)).schema] == ["id", "ID"]


# item 8


def doubles_to_test(count: int) -> list[float]:
    """Doubles whose Java text differs from Python's ``repr`` in some JDK: random bit
    patterns, subnormals (shortest form one digit long), integers between 2^53 and 2^63,
    and round numbers from 1e-325 to 1e308."""
    rng = random.Random(20)
    values = [struct.unpack("<d", struct.pack("<Q", rng.getrandbits(64)))[0] for _ in range(count)]
    values += [k * 5e-324 for k in range(1, 40)]
    values += [float(rng.randrange(2**53, 2**63)) for _ in range(count // 4)]
    values += [float(f"{m}e{e}") for e in range(-325, 309, 7) for m in (1, 2, 5, 9.5, 3.3)]
    values += [k / 1000 for k in range(0, 3000, 37)] + [1e23, 2e23, 5e22, 4.35, 0.3]
    return [v for v in values if not math.isnan(v)]


def test_doubles_and_floats_as_javas_text(spark: SparkSession, tmp_path: Path) -> None:
    """CSV and JSON text of doubles and floats: Java's ``Double.toString``/
    ``Float.toString`` of the JVM Spark runs on (the shortest digits that read back the
    same double, at least two when the shortest has one: ``4.9E-324``, ``1.0E-323``, ...;
    before Java 19 also the exact digits of integers below 2^63 and other
    non-shortest results)."""
    doubles = doubles_to_test(1500)
    rows = [(d, d) for d in doubles]
    schema = StructType([StructField("d", DoubleType()), StructField("f", FloatType())])
    df = frame(spark, rows, schema)
    for fmt in ("csv", "json"):
        ours, native = write_both(df, tmp_path / fmt, fmt)
        ours_text, native_text = (
            decoded_files(ours, None, "utf-8"),
            decoded_files(native, None, "utf-8"),
        )
        assert "4.9E-324" in "".join(native_text)
        differing = [
            (a, b)
            for a, b in zip(
                "".join(ours_text).splitlines(), "".join(native_text).splitlines(), strict=True
            )
            if a != b
        ]
        assert not differing, differing[:10]


def test_offset_patterns_truncate_seconds_as_java(spark: SparkSession, tmp_path: Path) -> None:
    """``timestampFormat`` offsets of a zone whose offset has seconds (Asia/Kolkata before
    1942: +05:21:10, and +05:53:28 before 1870): ``XXX`` writes ``+05:21`` as Java does,
    also when the pattern given is the default's text; the patterns that print seconds
    print them."""
    letters = "X XX XXX XXXX XXXXX x xx xxx xxxx xxxxx Z ZZ ZZZ ZZZZZ"
    stamps = [
        datetime.datetime(1900, 1, 1, 12, 0),
        datetime.datetime(1850, 6, 1),
        datetime.datetime(2024, 1, 1),
        datetime.datetime(1970, 1, 1),
    ]
    schema = StructType([StructField("ts", TimestampType())])
    df = frame(spark, [(s,) for s in stamps], schema)
    for name, pattern in (
        ("letters", f"yyyy-MM-dd'T'HH:mm:ss {letters}"),
        ("default-text", "yyyy-MM-dd'T'HH:mm:ss.SSSXXX"),
    ):
        options = {"timeZone": "Asia/Kolkata", "timestampFormat": pattern}
        for fmt in ("csv", "json"):
            ours, native = write_both(df, tmp_path / name / fmt, fmt, options=options)
            native_text = "".join(decoded_files(native, None, "utf-8"))
            assert "+05:21" in native_text
            assert decoded_files(ours, None, "utf-8") == decoded_files(native, None, "utf-8")
