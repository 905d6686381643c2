"""Custom writers on Spark's RDD API with the aiocommit task and job API.

The tasks (``mapPartitionsWithIndex``) each set up a task attempt, write their files
below its directory and commit it; the driver collects the manifest names and commits
exactly those. Any file format works: here, JSON lines.

    python examples/spark_rdd_example.py [DEST]

Caveat: the RDD API has no commit coordinator. With ``spark.speculation`` on, two
attempts of a task can both commit their manifest (the last one wins, each complete);
the ``aiocommit`` data source checks Spark's choice for you, the RDD path does not.
"""

from __future__ import annotations

import asyncio
import json
import sys
import tempfile
from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING

from aiocommit import (
    SuccessData,
    abort_job,
    commit_job,
    commit_task,
    open_store,
    setup_job,
    setup_task,
)
from aiocommit.protocol.layout import MANIFEST_SUFFIX

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


async def write_task(
    dest: str, job_id: str, partition: int, attempt: int, tid: int, rows: list[dict[str, object]]
) -> str:
    """Executor side: one task attempt. Returns its manifest's file name."""
    task = await setup_task(dest, job_id, partition, attempt)
    store, _ = open_store(dest)  # a client per asyncio.run: Spark reuses its workers
    try:
        data = "".join(json.dumps(row) + "\n" for row in rows).encode()
        await store.write_bytes(task.path(f"part-{partition:05d}-{tid}.json"), data)
    finally:
        await store.aclose()
    await commit_task(task)
    return task.task_id + MANIFEST_SUFFIX


def task_function(
    dest: str, job_id: str
) -> Callable[[int, Iterable[dict[str, object]]], Iterator[str]]:
    def write_partition(partition: int, rows: Iterable[dict[str, object]]) -> Iterator[str]:
        from pyspark import TaskContext

        context = TaskContext.get()
        assert context is not None
        yield asyncio.run(
            write_task(
                dest,
                job_id,
                partition,
                context.attemptNumber(),
                context.taskAttemptId(),
                list(rows),
            )
        )

    return write_partition


def run(spark: SparkSession, dest: str, rows: int = 1000) -> SuccessData:
    """Driver side: set the job up, run the tasks, commit what they name."""
    if __name__ != "__main__":  # imported: ship this module's functions by value
        from pyspark import cloudpickle

        cloudpickle.register_pickle_by_value(sys.modules[__name__])  # type: ignore[no-untyped-call]
    job_id = asyncio.run(setup_job(dest))
    records: list[dict[str, object]] = [{"id": i, "square": i * i} for i in range(rows)]
    data = spark.sparkContext.parallelize(records, 4)
    try:
        manifests = data.mapPartitionsWithIndex(task_function(dest, job_id)).collect()
        return asyncio.run(commit_job(dest, job_id, task_records=manifests))
    except BaseException:
        asyncio.run(abort_job(dest, job_id))
        raise


def main() -> None:
    sys.path.insert(0, __file__.rsplit("/", 1)[0])
    from spark_demo import start_spark

    dest = sys.argv[1] if len(sys.argv) > 1 else tempfile.mkdtemp(prefix="aiocommit-rdd-")
    spark = start_spark()
    try:
        summary = run(spark, dest)
        files = summary.iostatistics.counters["committer_files_committed"]
        print(f"committed {files} files to {dest}")
        print(f"read back {spark.read.json(dest).count()} rows")
    finally:
        spark.stop()


if __name__ == "__main__":
    main()
