"""The write path's speed measures: the lifted Arrow batch byte cap, the background
Parquet encoder, and a smoke run of ``stress.spark_bench`` (no speed assertion)."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from aiocommit.integrations.spark.transfer import (
    ARROW_MAX_BYTES_CONF,
    NO_BYTE_CAP,
    lifted_arrow_byte_cap,
)

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def _explicit(spark: SparkSession) -> str | None:
    return spark.conf.getAll.get(ARROW_MAX_BYTES_CONF)


def test_byte_cap_lifted_only_during_the_block(spark: SparkSession) -> None:
    assert _explicit(spark) is None
    with lifted_arrow_byte_cap(spark) as lifted:
        assert lifted
        assert spark.conf.get(ARROW_MAX_BYTES_CONF) == NO_BYTE_CAP
    assert _explicit(spark) is None


def test_byte_cap_the_user_set_is_kept(spark: SparkSession) -> None:
    spark.conf.set(ARROW_MAX_BYTES_CONF, "32MB")
    try:
        with lifted_arrow_byte_cap(spark) as lifted:
            assert not lifted
            assert spark.conf.get(ARROW_MAX_BYTES_CONF) == "32MB"
        assert _explicit(spark) == "32MB"
    finally:
        spark.conf.unset(ARROW_MAX_BYTES_CONF)


def test_byte_cap_stays_lifted_until_the_last_concurrent_write_ends(
    spark: SparkSession,
) -> None:
    first_in = threading.Event()
    second_done = threading.Event()
    seen: list[str | None] = []

    def second() -> None:
        first_in.wait(30)
        with lifted_arrow_byte_cap(spark):
            pass
        seen.append(_explicit(spark))  # the first write is still running
        second_done.set()

    thread = threading.Thread(target=second)
    thread.start()
    with lifted_arrow_byte_cap(spark):
        first_in.set()
        assert second_done.wait(30)
    thread.join(30)
    assert seen == [NO_BYTE_CAP]
    assert _explicit(spark) is None


def test_write_restores_the_byte_cap_even_when_it_fails(
    spark: SparkSession, tmp_path: Path
) -> None:
    df = spark.range(100).selectExpr("id", "cast(id % 3 as int) as k")
    df.write.format("aiocommit").mode("append").save(str(tmp_path / "ok"))
    assert _explicit(spark) is None
    with pytest.raises(Exception, match="compresion"):
        df.write.format("aiocommit").option("compresion", "zstd").save(str(tmp_path / "bad"))
    assert _explicit(spark) is None
    assert spark.read.parquet(str(tmp_path / "ok")).count() == 100
