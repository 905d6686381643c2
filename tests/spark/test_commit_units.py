"""Commit-side parts without a Spark session: option checking, path qualification,
session confs plumbed into settings, the one-line cause, tolerant cleanup."""

from __future__ import annotations

import os
from pathlib import Path

import anyio
import pytest

from aiocommit import CommitOptions
from aiocommit.integrations.spark.committer import clean_up_committed
from aiocommit.integrations.spark.dataframe_writer import one_line_cause
from aiocommit.integrations.spark.settings import WriteSettings
from aiocommit.integrations.spark.source import check_types, qualify_on_driver
from aiocommit.protocol.layout import JobLayout
from aiocommit.stores.faulty import Faults, FaultyStore
from aiocommit.stores.local import LocalStore


def test_unknown_options_name_the_closest_valid_one() -> None:
    with pytest.raises(ValueError, match=r"'compresion' \(did you mean 'compression'\?\)"):
        WriteSettings.from_options({"path": "/x", "compresion": "zstd"})
    with pytest.raises(ValueError, match=r"'partitionsby' \(did you mean 'partitionby'\?\)"):
        WriteSettings.from_options({"path": "/x", "partitionsby": "k"})
    with pytest.raises(ValueError, match=r"'zzz'$"):
        WriteSettings.from_options({"path": "/x", "zzz": "1"})
    # every accepted spelling of a commit option still passes
    settings = WriteSettings.from_options(
        {
            "path": "/x",
            "mapreduce.manifest.committer.io.threads": "3",
            "spark.hadoop.mapreduce.fileoutputcommitter.marksuccessfuljobs": "false",
            "aiocommit.validate_output": "true",
            "report_dir": "/r",
            "maxrecordsperfile": "7",
            "timezone": "Asia/Tokyo",
            "aiocommit.savemode": "ignore",
        }
    )
    assert settings.commit.concurrency == 3 and not settings.commit.write_success
    assert settings.commit.validate_output and settings.commit.report_dir == "/r"
    assert settings.max_records_per_file == 7 and settings.time_zone == "Asia/Tokyo"
    assert settings.save_mode == "ignore"


def test_relative_destinations_are_qualified_on_the_driver(tmp_path: Path) -> None:
    before = os.getcwd()
    os.chdir(tmp_path)
    try:
        assert qualify_on_driver("rel/out") == str(tmp_path / "rel" / "out")
    finally:
        os.chdir(before)
    for url in ("/abs/out", "file:///abs/out", "gs://b/out", "memory://m/out"):
        assert qualify_on_driver(url) == url


def test_one_line_cause_is_the_innermost_python_exception() -> None:
    text = (
        "[PYTHON_DATA_SOURCE_ERROR] Failed to create Python data source instance: "
        "Traceback (most recent call last):\n"
        '  File "/x/source.py", line 3, in writer\n'
        "    raise ValueError(...)\n"
        "ValueError: partitionBy column 'nope' is not in the schema (id, k)\n"
        "\nJVM stacktrace:\norg.apache.spark.sql.AnalysisException: NotThis: x\n"
    )
    assert (
        one_line_cause(text) == "ValueError: partitionBy column 'nope' is not in the schema (id, k)"
    )
    assert one_line_cause("nothing here") is None


async def _tolerant(dest: str) -> tuple[bool, bool]:
    faulty = FaultyStore(
        LocalStore(), Faults(fail_paths=lambda op, path: op == "delete" and "_temporary" in path)
    )
    kept = await clean_up_committed(faulty, dest, "job_x", CommitOptions(), pauses=(0.0,))
    gone = await clean_up_committed(LocalStore(), dest, "job_x", CommitOptions(), pauses=(0.0,))
    return kept, gone


def test_cleanup_after_commit_never_raises(tmp_path: Path) -> None:
    dest = str(tmp_path / "out")
    Path(JobLayout(dest, "job_x").job_dir, "late").mkdir(parents=True)
    kept, gone = anyio.run(_tolerant, dest)
    assert kept is False and gone is True
    assert not Path(JobLayout(str(tmp_path / "out"), "job_x").job_dir).exists()


def test_types_a_format_cannot_hold_are_refused() -> None:
    from pyspark.sql.types import (
        ArrayType,
        BinaryType,
        LongType,
        MapType,
        StringType,
        StructField,
        StructType,
    )

    from aiocommit.integrations.spark import seam

    def schema(data_type: object) -> StructType:
        return StructType([StructField("id", LongType()), StructField("c", data_type)])  # type: ignore[arg-type]

    csv = WriteSettings(url="/x", format="csv")
    parquet = WriteSettings(url="/x")
    for data_type in (MapType(StringType(), LongType()), ArrayType(LongType())):
        with pytest.raises(TypeError, match="CSV cannot hold column 'c'"):
            check_types(schema(data_type), csv)
        check_types(schema(data_type), parquet)  # Parquet holds them
    check_types(schema(BinaryType()), csv)  # Spark's CSV writer writes binary as [00 61 62]
    if seam.PYSPARK < (4, 0):  # CalendarIntervalType is new in 4.0: no 3.5 schema holds one
        return
    with pytest.raises(TypeError, match=r"column 'c' has type interval, .*cast\('string'\)"):
        check_types(schema(seam.CalendarIntervalType()), parquet)
