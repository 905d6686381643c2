"""Every aiocommit error raised inside Spark is cause-first (issue #35 item 5): the
first line names aiocommit and the cause, in at most 200 characters, on the data
source path (``writer()``, a task, ``commit()``), the SQL paths and ``writeTo``."""

from __future__ import annotations

from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from tests.spark.helpers import quiet
from tests.spark.test_write import SCHEMA, frame, keyed, write

LIMIT = 200


def first_line(error: pytest.ExceptionInfo[BaseException]) -> str:
    line = str(error.value).splitlines()[0]
    assert len(line) <= LIMIT, line
    return line


def test_data_source_errors_are_cause_first(spark: SparkSession, tmp_path: Path) -> None:
    df = frame(spark, keyed(0, 6, ["a", "b"]), SCHEMA)
    # writer(): UnknownOption used to be on line 10 (its name does not end in Error)
    with pytest.raises(Exception, match="did you mean") as typo:
        write(df, tmp_path / "typo", options={"compresion": "zstd"})
    assert first_line(typo) == (
        "aiocommit: UnknownOption: unknown option(s) for aiocommit: 'compresion' "
        "(did you mean 'compression'?)"
    )
    # a task: Spark's PythonException words its text itself
    with quiet(spark), pytest.raises(Exception, match="fails after writing") as task:
        write(df, tmp_path / "task", options={"aiocommit.test.failPartitionAlways": "1"})
    assert first_line(task).startswith("aiocommit: InjectedTaskFailure: aiocommit.test hook")
    # commit(): a long cause is cut at the limit
    write(df, tmp_path / "old")
    with quiet(spark), pytest.raises(Exception, match="conflict mode") as conflict:
        write(df, tmp_path / "old", options={"conflict_mode": "fail"})
    assert first_line(conflict).startswith("aiocommit: OutputConflict: the destination")
    with quiet(spark), pytest.raises(Exception, match="injected") as commit:
        write(df, tmp_path / "commit", options={"aiocommit.test.commitFault": "rename:part-"})
    line = first_line(commit)
    assert line.startswith("aiocommit: CommitError: ") and line.endswith("\u2026"), line


def test_sql_and_write_to_errors_are_cause_first(spark: SparkSession, tmp_path: Path) -> None:
    refused = "aiocommit: InvalidInput: aiocommit cannot write through SQL INSERT/CTAS"
    df = frame(spark, keyed(0, 4, ["a"]), SCHEMA)
    with pytest.raises(Exception, match="cannot write through") as using:
        df.writeTo("cause_first_v2").using("aiocommit").create()
    assert first_line(using).startswith("aiocommit cannot write through SQL INSERT/CTAS")
    spark.sql("CREATE TABLE cause_first (id INT, k STRING, v DOUBLE) USING aiocommit")
    try:
        with pytest.raises(Exception, match="cannot write through") as insert:
            spark.sql("INSERT INTO cause_first VALUES (1, 'a', 1.0)")
        assert first_line(insert).startswith(refused)
        with pytest.raises(Exception, match="cannot write through") as ctas:
            spark.sql("CREATE TABLE cause_first_ctas USING aiocommit AS SELECT 1 AS id")
        assert first_line(ctas).startswith(refused)
        with pytest.raises(Exception, match="cannot write through") as append:
            df.writeTo("cause_first").append()
        assert first_line(append).startswith(refused)
        with pytest.raises(Exception, match="cannot write through") as insert_into:
            df.write.insertInto("cause_first")
        assert first_line(insert_into).startswith(refused)
    finally:
        spark.sql("DROP TABLE IF EXISTS cause_first")
        spark.sql("DROP TABLE IF EXISTS cause_first_ctas")
    # Spark's own errors are left as Spark words them
    with pytest.raises(Exception, match="TABLE_OR_VIEW_NOT_FOUND") as missing:
        spark.sql("SELECT * FROM cause_first_no_such_table")
    assert str(missing.value).startswith("[TABLE_OR_VIEW_NOT_FOUND]")
