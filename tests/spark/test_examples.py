"""The examples in ``examples/`` run, against the shared session."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

from pyspark.sql import SparkSession

from tests.spark.helpers import data_files, temporary_is_clean

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def load(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, EXAMPLES / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def test_rdd_example_commits_exactly_the_collected_manifests(
    spark: SparkSession, tmp_path: Path
) -> None:
    example = load("spark_rdd_example")
    dest = tmp_path / "rdd"
    summary = example.run(spark, str(dest), rows=500)
    assert summary.success
    assert summary.iostatistics.counters["committer_files_committed"] == 4
    assert len(data_files(dest)) == 4
    back = spark.read.json(str(dest))
    assert sorted(r["id"] for r in back.collect()) == list(range(500))
    assert temporary_is_clean(dest)


def test_spark_demo_round_trip(spark: SparkSession, tmp_path: Path) -> None:
    demo = load("spark_demo")
    figures = demo.run_demo(spark, str(tmp_path / "demo"), rows=3000)
    assert figures["read_back"] == figures["rows"] == 3000
    assert figures["files"] > 0
