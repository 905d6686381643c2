"""The write path's speed measures: the lifted Arrow batch byte cap, the background
Parquet encoder (the benchmark's smoke runs: stress/tests/test_spark_bench.py)."""

from __future__ import annotations

import threading
from collections.abc import Callable
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


def test_encoder_runs_jobs_in_order_off_the_calling_thread() -> None:
    from aiocommit.integrations.spark.files import Encoder

    encoder = Encoder()
    ran: list[tuple[int, str]] = []

    def job(number: int) -> Callable[[], None]:
        return lambda: ran.append((number, threading.current_thread().name))

    for number in range(5):
        encoder.submit(job(number))
    encoder.shutdown()
    assert [n for n, _ in ran] == [0, 1, 2, 3, 4]
    assert all(name != threading.current_thread().name for _, name in ran)
    assert encoder.pending_bytes == 0


def test_encoder_raises_a_jobs_failure_on_the_next_call() -> None:
    from aiocommit.integrations.spark.files import Encoder

    encoder = Encoder()

    def fails() -> None:
        raise OSError("disk full")

    encoder.submit(fails, nbytes=10)
    assert encoder.pending_bytes == 10
    with pytest.raises(OSError, match="disk full"):
        encoder.submit(lambda: None)
    encoder.shutdown()  # the failure was raised once; nothing left


def test_parquet_sink_writes_row_groups_on_the_encoder(tmp_path: Path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    from aiocommit.integrations.spark.files import Encoder, ParquetSink

    schema = pa.schema([("id", pa.int64()), ("s", pa.string())])
    encoder = Encoder()
    sink = ParquetSink(str(tmp_path / "f.parquet"), schema, "snappy", 250, None, encoder)
    for start in range(0, 1000, 100):
        ids = list(range(start, start + 100))
        sink.add(pa.record_batch([pa.array(ids), pa.array([f"v{i}" for i in ids])], schema=schema))
    sink.close()
    encoder.shutdown()
    written = pq.ParquetFile(tmp_path / "f.parquet")
    assert written.metadata.num_rows == 1000
    assert [written.metadata.row_group(i).num_rows for i in range(4)] == [250, 250, 250, 250]
    assert written.read().column("id").to_pylist() == list(range(1000))
