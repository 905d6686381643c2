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


def test_spark_connect_errors_are_cause_first(spark: SparkSession, tmp_path: Path) -> None:
    """The same errors through Spark Connect (a server in the test session's driver, a
    client in its own process, ``tests/spark/connect_errors_client.py``): the client's
    error keeps its type and Spark's whole message, after the cause's line."""
    import json
    import subprocess
    import sys

    from aiocommit.integrations.spark.settings import CONNECT_TABLE_WRITES_REFUSED

    pytest.importorskip("grpc")  # the spark-connect extra (in dev) installs the client
    port = spark.conf.get("spark.connect.grpc.binding.port")
    done = subprocess.run(
        [sys.executable, "-m", "tests.spark.connect_errors_client", str(port), str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=Path(__file__).parents[2],
    )
    assert done.returncode == 0, done.stderr[-3000:]
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    first = {case: error["text"].splitlines()[0] for case, error in seen.items()}
    assert all(len(line) <= LIMIT for line in first.values()), first
    assert first["misspelt option"] == (
        "aiocommit: UnknownOption: unknown option(s) for aiocommit: 'compresion' "
        "(did you mean 'compression'?)"
    )
    assert first["bad conflict mode"] == (
        "aiocommit: InvalidInput: conflict_mode must be one of fail, append, replace, "
        "not 'sideways'"
    )
    assert seen["misspelt option"]["type"] == "AnalysisException"
    assert "[PYTHON_DATA_SOURCE_ERROR]" in seen["misspelt option"]["text"]
    assert first["failing task"].startswith(
        "aiocommit: InjectedTaskFailure: aiocommit.test hook: partition"
    )
    assert seen["failing task"]["type"] == "PythonException"
    assert first["SQL INSERT"].startswith(
        "aiocommit: InvalidInput: aiocommit cannot write through SQL INSERT/CTAS"
    )
    assert first["writeTo"].startswith("aiocommit cannot write through SQL INSERT/CTAS")
    assert first["saveAsTable"] == CONNECT_TABLE_WRITES_REFUSED
    # Spark's own refusal, made by the Connect client before any aiocommit code runs
    assert first["bad save mode"] == "[UNSUPPORTED_OPERATION] sideways is not supported."
