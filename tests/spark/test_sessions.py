"""Every session of the application writes (issue #35 item 3): ``register()`` is
idempotent across ``spark.newSession()`` and sessions made after it, a write in any
session works, and a write leaves the thread's active session as it found it."""

from __future__ import annotations

from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from aiocommit.integrations.spark import register, seam
from tests.spark.test_write import SCHEMA, frame, keyed, ordered, read_rows, write


def is_active(spark: SparkSession, session: SparkSession) -> bool:
    found = seam.active_jvm_session(spark)
    return found is not None and bool(found.equals(session._jsparkSession))


@pytest.mark.skipif(not seam.HAS_DATA_SOURCES, reason="register() needs pyspark >= 4.0")
def test_every_session_registers_and_writes(spark: SparkSession, tmp_path: Path) -> None:
    """``register(spark.newSession())`` used to raise ``DATA_SOURCE_ALREADY_EXISTS``
    (Spark checks the name in the thread's active session), and a write in a session
    made after ``register()`` raised ``DATA_SOURCE_NOT_FOUND``."""
    registered = spark.newSession()
    later = spark.newSession()  # never registered: its first write registers it
    seam.make_active(spark)
    register(registered)
    register(registered)  # idempotent
    register(spark)
    assert is_active(spark, spark)
    for number, session in enumerate((registered, later, spark)):
        rows = keyed(number * 100, 12, ["a", "b"])
        dest = tmp_path / f"out-{number}"
        df = frame(session, rows, SCHEMA)
        seam.make_active(spark)  # createDataFrame makes its session active
        write(df, dest, options={"partitionBy": "k"})
        assert read_rows(spark, dest, SCHEMA) == ordered(rows)
        # the write made its own session active for the JVM's look-up, and put back
        # the thread's active session
        assert is_active(spark, spark), f"session {number} left active"
    assert seam.has_data_source(later, "aiocommit")


@pytest.mark.skipif(not seam.HAS_DATA_SOURCES, reason="register() needs pyspark >= 4.0")
def test_a_write_leaves_no_active_session_where_there_was_none(
    spark: SparkSession, tmp_path: Path
) -> None:
    other = spark.newSession()
    df = frame(other, keyed(0, 4, ["a"]), SCHEMA)
    session_class = spark._get_j_spark_session_class(spark.sparkContext._jvm)
    session_class.clearActiveSession()
    try:
        write(df, tmp_path / "out")
        assert seam.active_jvm_session(spark) is None
    finally:
        seam.make_active(spark)
    assert read_rows(spark, tmp_path / "out", SCHEMA) == ordered(keyed(0, 4, ["a"]))


class _Interrupted(BaseException):
    """What pytest-timeout's failure is to py4j: not an ``Exception``."""


def test_a_call_interrupted_mid_answer_does_not_spoil_the_next_tests(
    spark: SparkSession,
) -> None:
    """A Spark call stopped by a ``BaseException`` (pytest-timeout) leaves its answer
    unread on the thread's pinned py4j connection; before the conftest dropped that
    connection after such a failure, the next call read it ("PythonRDD does not exist in
    the JVM", "'p'") and every later Spark test of the run failed."""
    import signal
    import time

    from tests.spark.helpers import drop_thread_connection

    def interrupt(signum: int, frame: object) -> None:
        raise _Interrupted

    previous = signal.signal(signal.SIGALRM, interrupt)
    try:
        signal.setitimer(signal.ITIMER_REAL, 1.0)
        with pytest.raises(_Interrupted):
            spark.sparkContext.parallelize([4], 1).map(time.sleep).collect()
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    drop_thread_connection()
    assert spark.range(5).count() == 5
    assert spark.sparkContext.parallelize([1, 2, 3], 1).sum() == 6


def test_the_session_jvm_runs_with_its_options(spark: SparkSession) -> None:
    """The test session's JVM got ``SESSION_JVM_OPTIONS`` (in client mode Spark reads
    ``spark.driver.extraJavaOptions`` only when it starts the JVM)."""
    from tests.spark.conftest import SESSION_JVM_OPTIONS

    jvm = spark.sparkContext._jvm
    assert jvm is not None
    runtime = jvm.java.lang.management.ManagementFactory.getRuntimeMXBean()
    assert set(SESSION_JVM_OPTIONS.split()) <= set(runtime.getInputArguments())
