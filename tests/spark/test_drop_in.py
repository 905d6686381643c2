"""``df.write.format("aiocommit")`` as a drop-in for Spark's writer (issue #13, commit
side): committed writes never fail in cleanup, session confs, save modes, partitionBy,
other threads, errors, tables. Combined into few tests: each Spark write costs time."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from aiocommit.client.job import cleanup_job
from aiocommit.protocol.success import decode_success
from tests.spark.helpers import data_files, quiet, temporary_is_clean
from tests.spark.test_write import SCHEMA, frame, keyed, leaf_dirs, ordered, read_rows, write


@contextmanager
def session_conf(spark: SparkSession, key: str, value: str) -> Iterator[None]:
    before = spark.conf.get(key)
    spark.conf.set(key, value)
    try:
        yield
    finally:
        if before is None:
            spark.conf.unset(key)
        else:
            spark.conf.set(key, before)


# the first Spark test of a run also pays the session's start and its first Python
# data-source write (about 100 s together on a loaded 2-core machine)
@pytest.mark.timeout(300)
def test_cleanup_failing_after_success_does_not_fail_the_write(
    spark: SparkSession, tmp_path: Path
) -> None:
    """Item 1: once ``_SUCCESS`` is saved, a cleanup that keeps failing (here: every
    delete under ``_temporary``, as when a losing speculative attempt is still writing
    there) is retried and then left to ``aiocommit cleanup``; the write succeeds."""
    dest = tmp_path / "out"
    rows = keyed(0, 60, ["a", "b"])
    options = {"partitionBy": "k", "aiocommit.test.commitFault": "delete:_temporary"}
    write(frame(spark, rows, SCHEMA), dest, options=options)
    assert read_rows(spark, dest, SCHEMA) == ordered(rows)
    success = decode_success((dest / "_SUCCESS").read_bytes())
    assert success.success and len(success.filenames) == len(data_files(dest))
    assert not temporary_is_clean(dest)  # left behind, not a failure
    asyncio.run(cleanup_job(str(dest), success.job_id))
    assert temporary_is_clean(dest)
    # the same for an overwrite: committed, old files replaced, cleanup left over
    new = keyed(100, 20, ["c"])
    write(frame(spark, new, SCHEMA), dest, "overwrite", options)
    assert read_rows(spark, dest, SCHEMA) == ordered(new)


def test_session_confs_and_unknown_options(spark: SparkSession, tmp_path: Path) -> None:
    """Item 3: the session's partitionOverwriteMode and Parquet codec are honoured (an
    explicit option wins), and a misspelt option is refused with the closest name."""
    dest = tmp_path / "out"
    old = keyed(0, 40, ["a", "b"])
    df_old = frame(spark, old, SCHEMA)
    write(df_old, dest, options={"partitionBy": "k"})
    new = keyed(100, 20, ["b", "c"])
    with session_conf(spark, "spark.sql.sources.partitionOverwriteMode", "dynamic"):
        with session_conf(spark, "spark.sql.parquet.compression.codec", "zstd"):
            write(frame(spark, new, SCHEMA), dest, "overwrite", {"partitionBy": "k"})
        kept = [r for r in old if r[1] == "a"]
        assert read_rows(spark, dest, SCHEMA) == ordered(kept + new)
        assert {Path(n).name.split(".", 2)[2] for n in data_files(dest) if "k=c" in n} == {
            "zstd.parquet"
        }
        # the option overrides the session conf, as in Spark
        write(frame(spark, new, SCHEMA), dest, "overwrite", {"partitionOverwriteMode": "static"})
        assert read_rows(spark, dest, SCHEMA) == ordered(new)
        assert leaf_dirs(dest) == {"."}
    with pytest.raises(Exception, match=r"'compresion' \(did you mean 'compression'\?\)"):
        write(frame(spark, new, SCHEMA), tmp_path / "typo", options={"compresion": "zstd"})
    assert not (tmp_path / "typo").exists()


def test_all_save_modes_like_spark(spark: SparkSession, tmp_path: Path) -> None:
    """Item 6: errorifexists (the default) and ignore work, on a new and an existing path,
    as Spark's own writer behaves."""
    df = frame(spark, keyed(0, 10, ["a"]), SCHEMA)
    other = frame(spark, keyed(50, 5, ["z"]), SCHEMA)
    for mode in (None, "error", "errorifexists", "ignore"):
        ours, native = tmp_path / f"ours-{mode}", tmp_path / f"native-{mode}"
        for target, fmt in ((ours, "aiocommit"), (native, "parquet")):
            writer = df.write.format(fmt)
            (writer.mode(mode) if mode else writer).save(str(target))
        assert read_rows(spark, ours, SCHEMA) == read_rows(spark, native, SCHEMA)
        before = data_files(ours)
        if mode == "ignore":
            other.write.format("aiocommit").mode("ignore").save(str(ours))
        else:
            with pytest.raises(Exception, match="already exists"):
                other.write.format("aiocommit").save(str(ours), mode=mode)
            with pytest.raises(Exception, match="already exists"):
                other.write.mode(mode or "error").parquet(str(native))
        assert data_files(ours) == before
        assert temporary_is_clean(ours)
    # append and overwrite unchanged
    dest = tmp_path / "modes"
    df.write.format("aiocommit").save(str(dest), mode="append", partitionBy="k")
    other.write.format("aiocommit").save(str(dest), mode="append", partitionBy="k")
    assert leaf_dirs(dest) == {"k=a", "k=z"}
    # a reused DataFrameWriter keeps no earlier save's mode
    reused = other.write.format("aiocommit")
    with pytest.raises(Exception, match="already exists"):
        reused.save(str(dest))
    reused.mode("overwrite").save(str(dest))
    assert read_rows(spark, dest, SCHEMA) == ordered(keyed(50, 5, ["z"]))


def test_write_from_another_thread(spark: SparkSession, tmp_path: Path) -> None:
    """Item 8: a write from a thread that did not create the session."""
    dest = tmp_path / "threaded"
    rows = keyed(0, 30, ["0", "1"])
    errors: list[BaseException] = []

    def run() -> None:
        try:
            # spark.range (unlike createDataFrame) leaves the thread without an active
            # session in the JVM, where the data source is looked up
            df = spark.range(30).selectExpr(
                "id", "CAST(id % 2 AS STRING) AS k", "CAST(id * 0.5 AS DOUBLE) AS v"
            )
            write(df, dest, options={"partitionBy": "k"})
        except BaseException as error:  # reported below
            errors.append(error)

    thread = threading.Thread(target=run)
    thread.start()
    thread.join()
    assert not errors, errors
    assert read_rows(spark, dest, SCHEMA) == ordered(rows)


def test_errors_name_their_cause_first(spark: SparkSession, tmp_path: Path) -> None:
    """Item 12: the first line of the exception is the cause, and a column type the
    format cannot hold is refused before any task runs."""
    df = frame(spark, keyed(0, 4, ["a"]), SCHEMA)
    with pytest.raises(Exception, match="not in the schema") as failed:
        write(df, tmp_path / "a", options={"partitionBy": "nope"})
    first = str(failed.value).splitlines()[0]
    assert first.startswith("aiocommit: ValueError: partitionBy column 'nope' is not in"), first

    nested = df.selectExpr("id", "map(k, v) AS m")
    # the Python writer's refusal; the JVM engine raises Spark's CSV writer's own
    # UNSUPPORTED_DATA_TYPE_FOR_DATASOURCE
    with quiet(spark), pytest.raises(Exception, match="CSV cannot hold") as refused:
        write(nested, tmp_path / "csv", options={"format": "csv", "engine": "python"})
    first = str(refused.value).splitlines()[0]
    assert first.startswith("aiocommit: TypeError: CSV cannot hold column 'm'"), first
    assert not (tmp_path / "csv").exists()  # refused in writer(): no job was set up


def test_tables_save_as_table_and_insert_into(spark: SparkSession, tmp_path: Path) -> None:
    """Item 7: saveAsTable (new table, append, overwrite, errorifexists, ignore) and
    insertInto (by position, append and dynamic overwrite) through aiocommit; the
    catalog reads the table with Spark's own Parquet reader."""
    location = tmp_path / "events"
    rows = keyed(0, 40, ["a", "b"])
    df = frame(spark, rows, SCHEMA)
    try:
        df.write.format("aiocommit").partitionBy("k").option("path", str(location)).saveAsTable(
            "events"
        )
        assert (location / "_SUCCESS").exists()  # written by aiocommit's commit
        table = spark.table("events")
        assert table.schema == spark.createDataFrame([], "id bigint, v double, k string").schema
        assert ordered(tuple(r) for r in table.select(*SCHEMA.names).collect()) == ordered(rows)
        with pytest.raises(Exception, match="TABLE_OR_VIEW_ALREADY_EXISTS"):
            df.write.format("aiocommit").saveAsTable("events")
        df.write.format("aiocommit").mode("ignore").saveAsTable("events")
        more = keyed(100, 10, ["c"])
        frame(spark, more, SCHEMA).write.format("aiocommit").mode("append").saveAsTable("events")
        table = spark.table("events").select(*SCHEMA.names)
        assert ordered(tuple(r) for r in table.collect()) == ordered(rows + more)
        # insertInto: by position (id, v, k), dynamic overwrite from the session
        replaced = [(7, 0.25, "c")]
        positional = spark.createDataFrame(replaced, "x bigint, y double, z string")
        with session_conf(spark, "spark.sql.sources.partitionOverwriteMode", "dynamic"):
            positional.write.format("aiocommit").insertInto("events", overwrite=True)
        table = spark.table("events").select(*SCHEMA.names)
        expected = [*rows, (7, "c", 0.25)]
        assert ordered(tuple(r) for r in table.collect()) == ordered(expected)
        # a static overwrite drops the partitions that are gone from the catalog too
        frame(spark, more, SCHEMA).write.format("aiocommit").mode("overwrite").saveAsTable("events")
        assert ordered(tuple(r) for r in spark.table("events").select(*SCHEMA.names).collect()) == (
            ordered(more)
        )
        assert [r[0] for r in spark.sql("SHOW PARTITIONS events").collect()] == ["k=c"]
    finally:
        spark.sql("DROP TABLE IF EXISTS events")
    assert (location / "_SUCCESS").exists()  # an external table: dropping keeps the files


def test_failed_append_keeps_the_old_success(spark: SparkSession, tmp_path: Path) -> None:
    """Item 5: a failed append changes nothing, so the old ``_SUCCESS`` stays (the new
    job's setup no longer removes it; only its commit's renaming replaces it)."""
    dest = tmp_path / "out"
    write(frame(spark, keyed(0, 20, ["a", "b"]), SCHEMA), dest, options={"partitionBy": "k"})
    old = (dest / "_SUCCESS").read_bytes()
    failing = {"partitionBy": "k", "aiocommit.test.failPartitionAlways": "1"}
    with quiet(spark), pytest.raises(Exception, match=r"aiocommit\.test hook: partition 1"):
        write(frame(spark, keyed(100, 20, ["c"]), SCHEMA), dest, options=failing)
    assert (dest / "_SUCCESS").read_bytes() == old
    assert temporary_is_clean(dest)
