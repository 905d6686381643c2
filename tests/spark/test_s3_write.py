"""``df.write.format("aiocommit").save("s3a://bucket/table")`` through moto (real HTTP):
the zero-rename committers, staging by default, magic by option; first-attempt task
failures write exactly once and leave no outstanding upload."""

from __future__ import annotations

import io
import itertools
import os
from collections.abc import Mapping
from typing import Any

import anyio
import pyarrow.parquet as pq
import pytest
from pyspark.sql import SparkSession
from pyspark.sql.types import DoubleType, IntegerType, StringType, StructField, StructType

from aiocommit.protocol.pending import MAGIC_COMMITTER, PARTITIONED_COMMITTER
from aiocommit.protocol.success import decode_success
from aiocommit.stores.s3 import S3Store
from aiocommit_testing.s3_emulator import create_bucket
from tests.helpers import walk
from tests.s3.helpers import outstanding
from tests.spark.helpers import quiet

SCHEMA = StructType(
    [
        StructField("id", IntegerType()),
        StructField("k", StringType()),
        StructField("v", DoubleType()),
    ]
)
Row = tuple[Any, ...]
#: each write goes through moto, a Python HTTP server: slow on a loaded 2-core machine
pytestmark = pytest.mark.timeout(300)


def keyed(start: int, count: int) -> list[Row]:
    return [(i, "abcd"[i % 4], i * 0.5) for i in range(start, start + count)]


_names = itertools.count(1)


@pytest.fixture
def bucket(s3_endpoint: str) -> tuple[str, S3Store]:
    """A fresh bucket, and a store on it for reading back (closed by ``read_back``)."""
    name = f"spark-{os.getpid()}-{next(_names)}"
    anyio.run(create_bucket, s3_endpoint, name)
    return name, S3Store(name, endpoint_url=s3_endpoint)


def s3_options(endpoint: str) -> dict[str, str]:
    """The endpoint travels as an option; credentials come from the environment
    (``tests/conftest.py`` sets moto's dummy ones before the session starts)."""
    return {"fs.s3a.endpoint": endpoint, "fs.s3a.path.style.access": "true"}


def write(
    spark: SparkSession,
    rows: list[Row],
    url: str,
    options: Mapping[str, str],
    mode: str = "append",
) -> None:
    df = spark.createDataFrame(spark.sparkContext.parallelize(rows, 2), SCHEMA)
    writer = df.write.format("aiocommit").mode(mode)
    for key, value in options.items():
        writer = writer.option(key, value)
    writer.save(url)


def read_back(store: S3Store, root: str) -> tuple[list[Row], dict[str, bytes]]:
    async def go() -> tuple[list[Row], dict[str, bytes], list[str]]:
        try:
            files = await walk(store, root)
            left = await outstanding(store, root)
        finally:
            await store.aclose()
        rows: list[Row] = []
        for relative, data in files.items():
            if not relative.endswith(".parquet"):
                continue
            key = relative.split("/")[0].split("=")[1]
            for record in pq.read_table(io.BytesIO(data)).to_pylist():
                rows.append((record["id"], key, record["v"]))
        return sorted(rows), files, left

    rows, files, left = anyio.run(go)
    assert left == [], "no outstanding multipart upload"
    return rows, files


@pytest.mark.parametrize("committer", [None, "magic"])
def test_first_attempt_failures_write_exactly_once(
    spark: SparkSession, s3_endpoint: str, bucket: tuple[str, S3Store], committer: str | None
) -> None:
    name, store = bucket
    url = f"s3a://{name}/table"
    options = {
        **s3_options(s3_endpoint),
        "partitionBy": "k",
        "aiocommit.test.failPartitionOnFirstAttempt": "1",
    }
    if committer:
        options["committer"] = committer
    rows = keyed(0, 200)
    with quiet(spark):
        write(spark, rows, url, options)
    got, files = read_back(store, "/table")
    assert got == sorted(rows)
    assert not [f for f in files if f.startswith(("_temporary", "__magic"))]
    success = decode_success(files["_SUCCESS"])
    assert success.committer == (MAGIC_COMMITTER if committer else PARTITIONED_COMMITTER)
    assert success.iostatistics.counters["committer_commits_completed"] == 8
    assert success.iostatistics.counters.get("op_rename", 0) <= 1  # _SUCCESS only


def test_overwrite_modes(
    spark: SparkSession, s3_endpoint: str, bucket: tuple[str, S3Store]
) -> None:
    name, store = bucket
    url = f"s3a://{name}/table"
    options = {**s3_options(s3_endpoint), "partitionBy": "k"}
    write(spark, keyed(0, 40), url, options)
    write(spark, keyed(100, 20), url, options)  # append
    dynamic = {**options, "partitionOverwriteMode": "dynamic"}
    only_a = [r for r in keyed(1000, 8) if r[1] == "a"]
    write(spark, only_a, url, dynamic, mode="overwrite")
    got, _ = read_back(store, "/table")
    expected = [r for r in keyed(0, 40) + keyed(100, 20) if r[1] != "a"] + only_a
    assert got == sorted(expected)
    store = S3Store(name, endpoint_url=s3_endpoint)
    write(spark, keyed(500, 8), url, options, mode="overwrite")  # static: everything
    got, _ = read_back(store, "/table")
    assert got == sorted(keyed(500, 8))


def test_credentials_in_options_are_refused(spark: SparkSession, s3_endpoint: str) -> None:
    options = {**s3_options(s3_endpoint), "spark.hadoop.fs.s3a.secret.key": "SECRET"}
    with quiet(spark), pytest.raises(Exception, match="credentials never go in options"):
        write(spark, keyed(0, 4), "s3a://nobucket/table", options)


def test_hadoop_committer_keys(
    spark: SparkSession, s3_endpoint: str, bucket: tuple[str, S3Store]
) -> None:
    """``spark.hadoop.fs.s3a.committer.name`` as a session conf chooses the magic
    committer (it was not read), and ``fs.s3a.committer.staging.conflict-mode=fail``
    refuses an append into a partition that has files, per partition as Hadoop's
    partitioned committer does (appends used to ignore it)."""
    name, store = bucket
    url = f"s3a://{name}/table"
    options = {**s3_options(s3_endpoint), "partitionBy": "k"}
    spark.conf.set("spark.hadoop.fs.s3a.committer.name", "magic")
    try:
        write(spark, keyed(0, 8), url, options)
    finally:
        spark.conf.unset("spark.hadoop.fs.s3a.committer.name")
    _, files = read_back(store, "/table")
    assert decode_success(files["_SUCCESS"]).committer == MAGIC_COMMITTER
    fail = {**options, "fs.s3a.committer.staging.conflict-mode": "fail"}
    with quiet(spark), pytest.raises(Exception, match="conflict"):
        write(spark, [(100, "a", 1.0)], url, fail)  # k=a has files
    write(spark, [(101, "e", 2.0)], url, fail)  # a new partition: no conflict
    got, _ = read_back(S3Store(name, endpoint_url=s3_endpoint), "/table")
    assert got == sorted([*keyed(0, 8), (101, "e", 2.0)])
