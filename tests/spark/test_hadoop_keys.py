"""Hadoop's committer keys mean what they mean in Hadoop (issue #35 item 4), as write
options and as session confs (``spark.hadoop.*``): ``fs.s3a.*`` configure S3 only (per
bucket too), the staging conflict mode decides an append, and the rest of what the
options tree takes applies. The S3 side through moto is in ``test_s3_write.py``."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from aiocommit.integrations.spark import seam
from aiocommit.integrations.spark.committer import setup_options
from aiocommit.integrations.spark.session_conf import hadoop_session_options
from aiocommit.integrations.spark.settings import WriteSettings
from tests.spark.helpers import data_files, quiet
from tests.spark.test_write import SCHEMA, frame, keyed, ordered, read_rows, write


def settings(url: str, **options: str) -> WriteSettings:
    return WriteSettings.from_options({"path": url, **options})


@pytest.mark.parametrize("key", ["fs.s3a.committer.name", "spark.hadoop.fs.s3a.committer.name"])
def test_s3a_committer_name_chooses_the_committer_on_s3(key: str) -> None:
    chosen = settings("s3a://bucket/table", **{key: "magic"})
    assert chosen.committer == "magic"
    assert setup_options(chosen).committer.name == "magic"


def test_s3a_keys_configure_s3_only() -> None:
    """As in Hadoop, where ``fs.s3a.*`` configure the S3A file system: a local write
    with them (say, from a session conf meant for S3) ignores them."""
    local = settings(
        "/tmp/table",
        **{
            "fs.s3a.committer.name": "magic",
            "spark.hadoop.fs.s3a.committer.staging.conflict-mode": "fail",
        },
    )
    assert local.commit.committer.name is None
    assert local.commit_options(overwriting=False).conflict_mode == "append"


def test_per_bucket_s3a_keys_apply_to_their_bucket() -> None:
    options = {
        "fs.s3a.committer.name": "staging",
        "fs.s3a.bucket.fast.committer.name": "magic",
        "fs.s3a.bucket.other.committer.name": "directory",
    }
    assert settings("s3a://fast/t", **options).committer == "magic"
    assert settings("s3a://slow/t", **options).committer == "staging"


def test_conflict_mode_decides_an_append() -> None:
    """Spark's append runs the staging committers' conflict mode (was always
    ``append``); per partition under the partitioned committer (S3's for a partitioned
    write), over the whole destination under ``directory``; overwrite replaces."""
    key = "fs.s3a.committer.staging.conflict-mode"
    partitioned = settings("s3a://b/t", partitionBy="k", **{key: "replace"})
    chosen = partitioned.commit_options(overwriting=False)
    assert (chosen.conflict_mode, chosen.replace_partitions) == ("replace", True)
    directory = settings(
        "s3a://b/t", partitionBy="k", **{key: "fail", "fs.s3a.committer.name": "directory"}
    )
    chosen = directory.commit_options(overwriting=False)
    assert (chosen.conflict_mode, chosen.replace_partitions) == ("fail", False)
    assert setup_options(directory).replace_partitions is False
    assert directory.commit_options(overwriting=True).conflict_mode == "replace"
    # our own name applies on every store
    local = settings("/tmp/t", conflict_mode="fail").commit_options(overwriting=False)
    assert local.conflict_mode == "fail"
    assert settings("/tmp/t").commit_options(overwriting=False).conflict_mode == "append"


def test_session_hadoop_confs_yield_to_the_writes_options() -> None:
    confs = {
        "spark.hadoop.fs.s3a.committer.name": "magic",
        "spark.hadoop.fs.s3a.committer.staging.conflict-mode": "fail",
        "spark.hadoop.fs.s3a.impl": "org.apache.hadoop.fs.s3a.S3AFileSystem",
        "spark.hadoop.fs.s3a.secret.key": "never passed",
        "spark.hadoop.mapreduce.manifest.committer.writer.queue.capacity": "8",
        "mapreduce.fileoutputcommitter.marksuccessfuljobs": "false",
        "spark.sql.shuffle.partitions": "2",
    }
    found = hadoop_session_options(confs, {"committer": "staging"})
    assert found == {
        "spark.hadoop.fs.s3a.committer.staging.conflict-mode": "fail",
        "mapreduce.fileoutputcommitter.marksuccessfuljobs": "false",
    }
    # another spelling of the same setting in the write's options wins too
    assert "spark.hadoop.fs.s3a.committer.staging.conflict-mode" not in hadoop_session_options(
        confs, {"conflict_mode": "append"}
    )


@contextmanager
def session_conf(spark: SparkSession, key: str, value: str) -> Iterator[None]:
    spark.conf.set(key, value)
    try:
        yield
    finally:
        spark.conf.unset(key)


@pytest.mark.skipif(not seam.HAS_DATA_SOURCES, reason='format("aiocommit") needs pyspark 4')
def test_hadoop_keys_in_spark_writes(spark: SparkSession, tmp_path: Path) -> None:
    """Session confs under ``spark.hadoop.`` reach the write (they were not read), an
    explicit option wins, an S3A session conf leaves a local write alone, and an
    append honours the conflict mode (it was always ``append``)."""
    rows = keyed(0, 10, ["a", "b"])
    df = frame(spark, rows, SCHEMA)
    no_success = "spark.hadoop.mapreduce.fileoutputcommitter.marksuccessfuljobs"
    with session_conf(spark, no_success, "false"):
        with session_conf(spark, "spark.hadoop.fs.s3a.committer.name", "magic"):
            write(df, tmp_path / "quiet", options={"partitionBy": "k"})
        write(
            df,
            tmp_path / "loud",
            options={"mapreduce.fileoutputcommitter.marksuccessfuljobs": "true"},
        )
    assert read_rows(spark, tmp_path / "quiet", SCHEMA) == ordered(rows)
    assert not (tmp_path / "quiet" / "_SUCCESS").exists()
    assert (tmp_path / "loud" / "_SUCCESS").exists()

    before = data_files(tmp_path / "loud")
    with quiet(spark), pytest.raises(Exception, match="conflict"):
        write(df, tmp_path / "loud", options={"conflict_mode": "fail"})
    assert data_files(tmp_path / "loud") == before
