"""Ray Data: ``AiocommitDatasink`` (Ray's own extension point) and ``write(ds, dest, ...)``
write a Ray Dataset through aiocommit's committer, exactly once, replacing old output
only when the job commits. Needs the ``ray`` extra (``pip install 'aiocommit[ray]'``).

How it runs, and why it is exactly once:

* ``on_write_start`` (the driver) sets the job up: its committer, and the conflict mode
  from ``mode``;
* each write task writes its blocks through a new attempt of its task (a new attempt
  number for every execution, so Ray's retry of a killed task writes elsewhere), commits
  it under the attempt's name and returns its commit message (with the manifest
  committer, the manifest itself: no file is saved for it);
* ``on_write_complete`` commits the job over exactly the messages Ray collected: one per
  task that succeeded, whichever execution produced it;
* ``on_write_failed`` aborts the job, tasks that had succeeded included: nothing of it is
  visible, the old output untouched.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import pyarrow as pa
from ray.data import Datasink
from ray.data.block import BlockAccessor

from aiocommit.errors import InvalidInput
from aiocommit.integrations.arrow import check_format, partition_columns, write_table
from aiocommit.integrations.attempts import EngineJob, TaskCommitMessage, check_mode
from aiocommit.protocol.success import SuccessData

if TYPE_CHECKING:
    from ray.data import Dataset
    from ray.data._internal.execution.interfaces import TaskContext
    from ray.data.block import Block
    from ray.data.datasource.datasink import WriteResult


class AiocommitDatasink(Datasink[TaskCommitMessage]):
    """A Ray Data sink committing through aiocommit (see the module docstring).

    Args:
        dest: the destination directory (a URL or local path every worker reaches).
        format: ``parquet``, ``csv`` or ``json`` (JSON lines).
        mode: ``error``, ``append``, ``overwrite`` or ``overwrite_partitions`` (the
            partition directories written are replaced; the others stay), applied when
            the job commits.
        partition_by: columns to write as Hive-style partition directories.
        options: commit options by any of their names.
        writer_options: the format writer's keyword arguments.
    """

    def __init__(
        self,
        dest: str,
        *,
        format: str = "parquet",
        mode: str = "error",
        partition_by: str | Sequence[str] = (),
        options: Mapping[str, Any] | None = None,
        writer_options: Mapping[str, Any] | None = None,
    ):
        check_format(format)
        self.dest = dest
        self.format = format
        self.mode = check_mode(mode)
        self.partition_by = partition_columns(partition_by)
        self.options = dict(options or {})
        self.writer_options = dict(writer_options or {})
        self.job: EngineJob | None = None
        #: the job's summary, once ``on_write_complete`` committed it
        self.summary: SuccessData | None = None

    def get_name(self) -> str:
        return "Aiocommit"

    def on_write_start(self, schema: pa.Schema | None = None) -> None:
        """Driver: set the job up (once)."""
        if self.job is None:
            self.job = EngineJob.setup(self.dest, mode=self.mode, options=self.options)

    def write(self, blocks: Iterable[Block], ctx: TaskContext) -> TaskCommitMessage:
        """Write task: the blocks through a new attempt of task ``ctx.task_idx``, then
        commit it; its commit message (the manifest committer's carries the manifest)."""
        if self.job is None:
            raise InvalidInput("the job was not set up: on_write_start did not run")
        tables = [BlockAccessor.for_block(block).to_arrow() for block in blocks]
        tables = [table for table in tables if table.num_rows]
        with self.job.handle(ctx.task_idx).open() as attempt:
            if tables:
                write_table(
                    attempt,
                    pa.concat_tables(tables, promote_options="default"),
                    format=self.format,
                    partition_by=self.partition_by,
                    options=self.writer_options,
                )
            return attempt.commit_message()

    def on_write_complete(self, write_result: WriteResult[TaskCommitMessage]) -> None:
        """Driver: commit the job over exactly the messages the tasks returned."""
        assert self.job is not None
        self.summary = self.job.commit(list(write_result.write_returns))

    def on_write_failed(self, error: Exception) -> None:
        """Driver: abort the job (the tasks that succeeded too)."""
        if self.job is not None:
            self.job.abort()


def write(
    ds: Dataset,
    dest: str,
    *,
    format: str = "parquet",
    mode: str = "error",
    partition_by: str | Sequence[str] = (),
    options: Mapping[str, Any] | None = None,
    writer_options: Mapping[str, Any] | None = None,
    concurrency: int | None = None,
) -> SuccessData:
    """Write ``ds`` to ``dest`` through an ``AiocommitDatasink`` (same arguments); the
    job's summary. On failure the job is aborted and Ray's error raised."""
    sink = AiocommitDatasink(
        dest,
        format=format,
        mode=mode,
        partition_by=partition_by,
        options=options,
        writer_options=writer_options,
    )
    ds.write_datasink(sink, concurrency=concurrency)
    assert sink.summary is not None
    return sink.summary
