"""``df.write.format("aiocommit")`` and ``write()`` pick the engine: the JVM engine
(Spark's file writer, aiocommit's job commit) where Spark's JVM writes the destination
and honours the options, the Python writer elsewhere; ``engine=jvm|python`` overrides.
Real Spark, real files (and moto for S3); the JVM engine's entry point is observed, not
replaced."""

from __future__ import annotations

import re
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import DataFrame, SparkSession

from aiocommit.errors import InvalidInput
from aiocommit.integrations.spark import jvm_engine, map_in_arrow, seam, write
from aiocommit.integrations.spark.jvm_engine import chosen_engine
from tests.spark.helpers import data_files, quiet, temporary_is_clean
from tests.spark.test_jvm_engine import _always_fails, _fail_first_attempt

pytestmark = pytest.mark.skipif(
    not seam.HAS_DATA_SOURCES, reason="format('aiocommit') and the JVM engine need pyspark 4"
)

#: a file Spark's own writer names (``part-00000-UUID-c000...``); the Python writer puts
#: aiocommit's job ID and the task attempt in the name instead
SPARKS_NAME = re.compile(r"part-\d{5}-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


@pytest.fixture
def jvm_writes(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The destinations the JVM engine wrote (its ``write_jvm`` still runs)."""
    seen: list[str] = []
    real: Callable[..., None] = jvm_engine.write_jvm

    def observed(df: DataFrame, dest: str, **kwargs: Any) -> None:
        seen.append(dest)
        real(df, dest, **kwargs)

    monkeypatch.setattr(jvm_engine, "write_jvm", observed)
    monkeypatch.setattr(map_in_arrow, "write_jvm", observed)
    return seen


def frame(spark: SparkSession, start: int = 0, rows: int = 40) -> DataFrame:
    return spark.range(start, start + rows, numPartitions=4).selectExpr(
        "id", "cast(id % 4 AS int) AS k"
    )


def ids(spark: SparkSession, dest: Path) -> list[int]:
    return sorted(r[0] for r in spark.read.parquet(str(dest)).select("id").collect())


def engine_of(dest: Path) -> str:
    names = [Path(f).name for f in data_files(dest)]
    assert names, f"no data file in {dest}"
    return "jvm" if all(SPARKS_NAME.match(n) for n in names) else "python"


def test_a_local_destination_is_written_by_the_jvm_engine(
    spark: SparkSession, tmp_path: Path, jvm_writes: list[str]
) -> None:
    dest = tmp_path / "out"
    many = frame(spark).repartition(12)  # more tasks than FEW_TASKS_PER_CORE x 2 cores
    many.write.format("aiocommit").partitionBy("k").save(str(dest))
    assert jvm_writes == [str(dest)]
    assert engine_of(dest) == "jvm"
    assert ids(spark, dest) == list(range(40))
    assert sorted(p.name for p in dest.iterdir()) == ["_SUCCESS", "k=0", "k=1", "k=2", "k=3"]
    assert temporary_is_clean(dest)


@pytest.mark.parametrize("engine", ["python", "jvm"])
def test_the_engine_option_overrides_the_choice(
    spark: SparkSession, tmp_path: Path, jvm_writes: list[str], engine: str
) -> None:
    dest = tmp_path / "out"
    frame(spark).write.format("aiocommit").option("engine", engine).save(str(dest))
    assert engine_of(dest) == engine
    assert jvm_writes == ([str(dest)] if engine == "jvm" else [])
    assert ids(spark, dest) == list(range(40))


def test_a_partitioned_write_of_few_tasks_is_left_to_the_python_writer(
    spark: SparkSession, tmp_path: Path, jvm_writes: list[str]
) -> None:
    """Four tasks on two cores: large tasks, which Spark's writer would sort by the
    partition column; a flat write of them still runs the JVM engine."""
    frame(spark).write.format("aiocommit").partitionBy("k").save(str(tmp_path / "parted"))
    frame(spark).write.format("aiocommit").save(str(tmp_path / "flat"))
    assert jvm_writes == [str(tmp_path / "flat")]
    assert engine_of(tmp_path / "parted") == "python"
    assert ids(spark, tmp_path / "parted") == list(range(40))


def test_an_option_only_the_python_writer_honours_picks_it(
    spark: SparkSession, tmp_path: Path, jvm_writes: list[str]
) -> None:
    dest = tmp_path / "out"
    frame(spark).write.format("aiocommit").option("rowGroupSize", "7").save(str(dest))
    assert jvm_writes == []
    assert engine_of(dest) == "python"
    assert ids(spark, dest) == list(range(40))


def test_memory_is_left_to_the_python_writer(spark: SparkSession) -> None:
    """memory:// lives in aiocommit's own processes, which Spark's JVM cannot write (a
    Spark write there only works where every step shares one process: not asserted)."""
    assert chosen_engine(spark, "memory://engine-choice/out", {}) == "python"
    assert chosen_engine(spark, "memory://engine-choice/out", {"engine": "python"}) == "python"


def test_what_the_jvm_engine_cannot_write_is_refused_under_engine_jvm(
    spark: SparkSession, tmp_path: Path
) -> None:
    df = frame(spark)
    with pytest.raises(InvalidInput, match="not memory://"):
        df.write.format("aiocommit").option("engine", "jvm").save("memory://engine-choice/x")
    with pytest.raises(InvalidInput, match="engine must be one of auto, jvm, python"):
        df.write.format("aiocommit").option("engine", "spark").save(str(tmp_path / "x"))
    with pytest.raises(InvalidInput, match="not s3a://"):
        chosen_engine(spark, "s3a://bucket/x", {"engine": "jvm"})
    assert not (tmp_path / "x").exists()


@pytest.mark.emulator
def test_s3_is_written_by_the_python_writer(
    spark: SparkSession, s3_endpoint: str, jvm_writes: list[str]
) -> None:
    import anyio

    from aiocommit.stores.s3 import S3Store
    from aiocommit_testing.s3_emulator import create_bucket
    from tests.helpers import walk

    anyio.run(create_bucket, s3_endpoint, "engine-choice")
    options = {"fs.s3a.endpoint": s3_endpoint, "fs.s3a.path.style.access": "true"}
    frame(spark).write.format("aiocommit").options(**options).save("s3a://engine-choice/out")
    assert jvm_writes == []

    async def listed() -> list[str]:
        store = S3Store("engine-choice", endpoint_url=s3_endpoint)
        try:
            return sorted(await walk(store, "out"))
        finally:
            await store.aclose()

    names = [n.lstrip("/") for n in anyio.run(listed)]
    assert "_SUCCESS" in names
    assert [n for n in names if n.endswith(".parquet")]


def test_write_picks_the_engine_too(
    spark: SparkSession, tmp_path: Path, jvm_writes: list[str]
) -> None:
    many = frame(spark).repartition(12)
    write(many, str(tmp_path / "auto"), partition_by="k")
    write(many, str(tmp_path / "python"), partition_by="k", engine="python")
    assert jvm_writes == [str(tmp_path / "auto")]
    assert engine_of(tmp_path / "auto") == "jvm"
    assert engine_of(tmp_path / "python") == "python"


@pytest.mark.parametrize("engine", ["python", "jvm"])
def test_save_modes_on_both_engines(spark: SparkSession, tmp_path: Path, engine: str) -> None:
    from pyspark.errors import AnalysisException

    dest = tmp_path / "out"

    def save(df: DataFrame, mode: str, **options: str) -> None:
        df.write.format("aiocommit").option("engine", engine).options(**options).mode(
            mode
        ).partitionBy("k").save(str(dest))

    save(frame(spark, 0, 8), "errorifexists")
    with pytest.raises(AnalysisException, match="PATH_ALREADY_EXISTS"):
        save(frame(spark, 100, 8), "errorifexists")
    save(frame(spark, 100, 8), "ignore")
    assert ids(spark, dest) == list(range(8))
    save(frame(spark, 100, 8), "append")
    assert ids(spark, dest) == [*range(8), *range(100, 108)]
    save(frame(spark, 200, 2), "overwrite", partitionOverwriteMode="dynamic")  # k=0, k=1
    assert ids(spark, dest) == [2, 3, 6, 7, 102, 103, 106, 107, 200, 201]
    save(frame(spark, 300, 2), "overwrite")
    assert ids(spark, dest) == [300, 301]
    assert temporary_is_clean(dest)


@pytest.mark.parametrize("engine", ["python", "jvm"])
def test_exactly_once_and_abort_on_both_engines(
    spark: SparkSession, tmp_path: Path, engine: str
) -> None:
    """Every task's first attempt fails mid-partition: each row once. Then a write whose
    tasks fail on every attempt is aborted: the old output stays, nothing is left."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import LongType

    dest = tmp_path / "out"
    flaky = F.udf(_fail_first_attempt, LongType())
    df = spark.range(0, 200, numPartitions=4).select(flaky("id").alias("id"))
    with quiet(spark):
        df.write.format("aiocommit").option("engine", engine).mode("append").save(str(dest))
    assert ids(spark, dest) == list(range(200))
    before = data_files(dest)
    failing = F.udf(_always_fails, LongType())
    bad = spark.range(0, 20, numPartitions=2).select(failing("id").alias("id"))
    with quiet(spark), pytest.raises(Exception, match="fails on every attempt"):
        bad.write.format("aiocommit").option("engine", engine).mode("overwrite").save(str(dest))
    assert data_files(dest) == before
    assert temporary_is_clean(dest)


@pytest.mark.parametrize("engine", ["python", "jvm"])
def test_two_concurrent_jobs_on_one_destination(
    spark: SparkSession, tmp_path: Path, engine: str
) -> None:
    """Two appends to one destination at once, from two threads: both commit, every
    row of each once, no job directory left (the same on both engines)."""
    dest = tmp_path / "out"
    frames = [frame(spark, 0, 40).repartition(6), frame(spark, 1000, 40).repartition(6)]
    errors: list[BaseException] = []
    start = threading.Barrier(2)

    def append(df: DataFrame) -> None:
        try:
            start.wait()
            df.write.format("aiocommit").option("engine", engine).mode("append").partitionBy(
                "k"
            ).save(str(dest))
        except BaseException as error:  # reported below
            errors.append(error)

    threads = [threading.Thread(target=append, args=(df,)) for df in frames]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert ids(spark, dest) == [*range(40), *range(1000, 1040)]
    assert temporary_is_clean(dest)
    assert (dest / "_SUCCESS").exists()
