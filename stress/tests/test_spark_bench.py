"""Smoke runs of the Spark benchmark (``aiocommit_stress.spark_bench``): every figure
printed, no speed asserted."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from tests.spark.conftest import spark  # noqa: F401  (the session fixture)

from aiocommit.integrations.spark import seam

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

pytestmark = pytest.mark.spark


def test_spark_bench_smoke(
    spark: SparkSession, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from aiocommit_stress import spark_bench

    ratios = spark_bench.run(spark, tmp_path, rows=2_000, rounds=1)
    out = capsys.readouterr().out
    assert len(ratios) == 2 and all(r > 0 for r in ratios)
    for variant in ("flat", "partitioned"):
        assert f"-- {variant}" in out
        assert f"round 0 {variant:<11} aiocommit" in out
        assert f"round 0 {variant:<11} native" in out
    assert out.count("ratio aiocommit/native  ") == 2
    assert "ratio aiocommit/native (lower of the two medians): " in out.splitlines()[-1]
    assert "MB in 1 files" not in out.split("-- partitioned")[1]  # 50 partition files
    rounds = [line.split() for line in out.splitlines() if line.startswith("round ")]
    assert len(rounds) == 4
    assert all(float(fields[fields.index("CPU-s") - 1]) >= 0 for fields in rounds)


def test_spark_bench_small_tasks_smoke(
    spark: SparkSession, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from aiocommit_stress import spark_bench

    ratios = spark_bench.run_small_tasks(spark, tmp_path, tasks=[6, 4], rows_per_task=5, rounds=1)
    out = capsys.readouterr().out
    assert len(ratios) == 4 and all(r > 0 for r in ratios)  # two shapes, flat and partitioned
    assert "== 6 tasks x 5 rows" in out and "== 4 tasks x 5 rows" in out
    # aiocommit, Spark's writer and the no-op Python data source (the floor), per variant
    assert out.count(" s median, ") == 12 and out.count("extra per task") == 4
    assert out.count("CPU-ms per task") == 12 and out.count("py-noop (floor)") == 4
    assert "task_stage_scan_directory" in out and "committer_commit_job" in out
    assert "ratio aiocommit/native (highest of the medians): " in out.splitlines()[-1]


@pytest.mark.skipif(seam.PYSPARK < (4, 0), reason="engine='jvm' needs Hadoop's ManifestCommitter")
def test_spark_bench_small_tasks_with_the_jvm_writer(
    spark: SparkSession, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--writers jvm,native``: write(engine="jvm") against Spark's writer, its ratio
    per variant and its job commit per task from its own summaries."""
    from aiocommit_stress import spark_bench

    ratios = spark_bench.run_small_tasks(
        spark, tmp_path, tasks=[4], rows_per_task=5, rounds=1, writers=["jvm", "native"]
    )
    out = capsys.readouterr().out
    assert len(ratios) == 2 and all(r > 0 for r in ratios)
    assert out.count("ratio jvm/native  ") == 2 and "py-noop" not in out
    assert "round 0 flat        jvm" in out and "(job commit " in out
    assert "-- jvm per task" in out and "committer_commit_job" in out
    assert "ratio jvm/native (highest of the medians): " in out.splitlines()[-1]


@pytest.mark.skipif(seam.PYSPARK < (4, 0), reason="engine='jvm' needs Hadoop's ManifestCommitter")
def test_spark_bench_large_writes_compare_both_engines(
    spark: SparkSession, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--writers aiocommit,native,jvm,python`` without ``--tasks``: each engine forced
    beside the chosen one, each with its wall-time ratio to native by round."""
    from aiocommit_stress import spark_bench

    ratios = spark_bench.run(
        spark, tmp_path, rows=2_000, rounds=2, writers=["aiocommit", "native", "jvm", "python"]
    )
    out = capsys.readouterr().out
    assert len(ratios) == 2 and all(r > 0 for r in ratios)
    for name in ("jvm", "python"):
        assert f"round 1 partitioned {name:<9}" in out
        for variant in ("flat", "partitioned"):
            (line,) = (x for x in out.splitlines() if x.startswith(f"{variant:<11} {name:<9} "))
            by_round = line.split(" (median ")[0].split()[2:]
            assert len(by_round) == 2 and "CPU-s " in line, line
    assert "ratio aiocommit/native (lower of the two medians): " in out.splitlines()[-1]
