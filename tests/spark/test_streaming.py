"""``writeStream.format("aiocommit")`` (issue #35 item 2): each micro-batch one aiocommit
job derived from the query ID and the batch ID, committed exactly once across restarts
from the checkpoint; append only."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from pyspark.sql import SparkSession

from aiocommit.client.jobs import list_jobs
from aiocommit.integrations.spark.committer import (
    TaskOutcome,
    close_task_attempt,
    commit_task_files,
    commit_write,
    open_task_attempt,
)
from aiocommit.integrations.spark.settings import WriteSettings
from aiocommit.integrations.spark.streaming import prepare_stream_batch, stream_job_id
from aiocommit.protocol.success import decode_success
from tests.spark.helpers import data_files

QUERY = "b6cad122-0767-41a0-a5aa-abb078cd2ec5"


def test_a_batch_is_committed_or_aborted_and_rewritten(tmp_path: Path) -> None:
    """The driver's step before a batch's tasks: a batch stopped part-way is aborted and
    written again as the next generation; one ``_SUCCESS`` names is not written again."""
    settings = WriteSettings.from_options({"path": str(tmp_path / "dest")})

    async def task(job_id: str) -> TaskOutcome:
        opened = await open_task_attempt(settings, job_id, partition=0, attempt_number=0)
        try:
            return await commit_task_files(
                settings, opened, partition=0, attempt_number=0, files=[]
            )
        finally:
            await close_task_attempt(opened)

    async def scenario() -> None:
        job_id, committed = await prepare_stream_batch(settings, QUERY, 3)
        assert (job_id, committed) == (stream_job_id(QUERY, 3, 0), False)
        await task(job_id)
        # the query stopped before the commit: undone, the batch written again
        again, committed = await prepare_stream_batch(settings, QUERY, 3)
        assert (again, committed) == (stream_job_id(QUERY, 3, 1), False)
        assert [j.job_id for j in await list_jobs(str(tmp_path / "dest"))] == [again]
        await commit_write(settings, again, False, [await task(again)])
        # committed, then replayed (Spark had not recorded the commit): nothing again
        assert await prepare_stream_batch(settings, QUERY, 3) == (again, True)
        assert await prepare_stream_batch(settings, QUERY, 4) == (
            stream_job_id(QUERY, 4, 0),
            False,
        )

    asyncio.run(scenario())


def test_a_committed_batch_killed_before_its_cleanup_leaves_nothing(tmp_path: Path) -> None:
    """The query killed after a batch's ``_SUCCESS`` and before its job's directory was
    removed: the replay recognises the batch as committed and removes what is left under
    ``_temporary`` (it stayed there for good before)."""
    dest = tmp_path / "dest"
    settings = WriteSettings.from_options({"path": str(dest)})
    stopped = WriteSettings.from_options({"path": str(dest), "cleanup_skip": "true"})

    async def scenario() -> None:
        job_id, _ = await prepare_stream_batch(settings, QUERY, 5)
        opened = await open_task_attempt(settings, job_id, partition=0, attempt_number=0)
        try:
            done = await commit_task_files(
                settings, opened, partition=0, attempt_number=0, files=[]
            )
        finally:
            await close_task_attempt(opened)
        await commit_write(stopped, job_id, False, [done])  # _SUCCESS, then the kill
        assert [j.job_id for j in await list_jobs(str(dest))] == [job_id]
        assert await prepare_stream_batch(settings, QUERY, 5) == (job_id, True)
        assert await list_jobs(str(dest)) == []

    asyncio.run(scenario())


def _rows(dest: Path) -> list[tuple[int, str]]:
    found: list[tuple[int, str]] = []
    for name in data_files(dest):
        key = name.split("/")[0].split("=")[1]
        found.extend((r["id"], key) for r in pq.read_table(dest / name).to_pylist())
    return sorted(found)


@pytest.mark.timeout(600)
def test_stream_writes_each_row_once_across_restarts(spark: SparkSession, tmp_path: Path) -> None:
    """A file-source stream of a micro-batch per file, stopped and restarted from its
    checkpoint; the restart replays a batch that had committed before the stop but whose
    commit Spark had not recorded (its commit log entry removed): every row once, and
    ``_SUCCESS`` names the latest batch."""
    source, dest, checkpoint = tmp_path / "in", tmp_path / "out", tmp_path / "checkpoint"
    source.mkdir()

    def add(number: int) -> None:
        lines = [json.dumps({"id": number * 10 + i, "k": "ab"[i % 2]}) for i in range(10)]
        (source / f"part-{number}.json").write_text("\n".join(lines) + "\n")

    def run() -> str:
        stream = spark.readStream.schema("id INT, k STRING").option("maxFilesPerTrigger", 1)
        query = (
            stream.json(str(source))
            .writeStream.format("aiocommit")
            .option("checkpointLocation", str(checkpoint))
            .option("partitionBy", "k")
            .start(str(dest))
        )
        try:
            query.processAllAvailable()
        finally:
            query.stop()
        return str(query.id)

    add(0)
    add(1)
    query_id = run()
    assert _rows(dest) == sorted((i, "ab"[i % 2]) for i in range(20))
    success = decode_success((dest / "_SUCCESS").read_bytes())
    assert success.job_id == stream_job_id(query_id, 1, 0)
    # committed, not recorded by Spark (a stop between the two): the log entry gone
    for lost in ("1", ".1.crc"):
        (checkpoint / "commits" / lost).unlink(missing_ok=True)
    add(2)
    assert run() == query_id
    assert _rows(dest) == sorted((i, "ab"[i % 2]) for i in range(30))
    success = decode_success((dest / "_SUCCESS").read_bytes())
    assert success.job_id == stream_job_id(query_id, 2, 0)
    assert not list((dest / "_temporary").glob("*")) if (dest / "_temporary").exists() else True


def test_only_append_is_accepted(spark: SparkSession, tmp_path: Path) -> None:
    stream = spark.readStream.format("rate").load().groupBy().count()
    writer = stream.writeStream.format("aiocommit").outputMode("complete")
    with pytest.raises(Exception, match=r'use outputMode\("append"\)') as refused:
        writer.option("checkpointLocation", str(tmp_path / "c")).start(str(tmp_path / "o"))
    assert str(refused.value).count("\n") == 0


@pytest.mark.timeout(600)
def test_a_stream_starts_from_a_thread_with_no_active_session(
    spark: SparkSession, tmp_path: Path
) -> None:
    """The JVM looks the source up in the calling thread's active session; a thread with
    none (a new py4j connection, a service's worker thread) got ``DATA_SOURCE_NOT_FOUND``
    from ``start()``. The thread is left with no active session, as it was."""
    from aiocommit.integrations.spark import seam

    source, dest = tmp_path / "in", tmp_path / "out"
    source.mkdir()
    (source / "part-0.json").write_text(
        "\n".join(json.dumps({"id": i, "k": "ab"[i % 2]}) for i in range(6)) + "\n"
    )
    stream = spark.readStream.schema("id INT, k STRING").json(str(source))
    session_class = spark._get_j_spark_session_class(spark.sparkContext._jvm)
    session_class.clearActiveSession()
    try:
        query = (
            stream.writeStream.format("aiocommit")
            .option("checkpointLocation", str(tmp_path / "checkpoint"))
            .option("partitionBy", "k")
            .start(str(dest))
        )
        assert seam.active_jvm_session(spark) is None
        try:
            query.processAllAvailable()
        finally:
            query.stop()
    finally:
        seam.make_active(spark)
    assert _rows(dest) == [(i, "ab"[i % 2]) for i in range(6)]
