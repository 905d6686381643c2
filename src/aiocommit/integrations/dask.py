"""Dask: ``write(ddf, dest, ...)`` writes a Dask DataFrame through aiocommit's committer,
exactly once, and replaces old output only when the job commits. Needs the ``dask``
extra (``pip install 'aiocommit[dask]'``: dask, distributed, pyarrow).

How it runs, and why it is exactly once:

* in the calling process: the job is set up (its committer chosen, its conflict mode
  from ``mode``) and one graph built;
* one task per partition writes the partition through its own task attempt (a new
  attempt number for every execution: a retry or a re-run after a lost worker writes
  elsewhere) and commits it under the attempt's name, returning its commit message
  (with the manifest committer, the manifest itself: no file is saved for it). A killed
  or failed execution returns nothing, whatever files it left;
* one job-commit task depends on all of them and commits the job over exactly the
  messages it received: one per partition, whichever execution produced it. It is re-runnable,
  so a worker lost during it only makes it run again;
* if the graph fails (a partition failed on every retry), the job is aborted: nothing
  of it is visible and the old output is untouched.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import pyarrow as pa
from dask.delayed import delayed

from aiocommit.integrations.arrow import check_format, partition_columns, write_table
from aiocommit.integrations.attempts import (
    AttemptHandle,
    EngineJob,
    TaskCommitMessage,
    commit_job_blocking,
)
from aiocommit.protocol.success import SuccessData

if TYPE_CHECKING:
    import dask.dataframe as dd


def write(
    ddf: dd.DataFrame,
    dest: str,
    *,
    format: str = "parquet",
    mode: str = "error",
    partition_by: str | Sequence[str] = (),
    options: Mapping[str, Any] | None = None,
    writer_options: Mapping[str, Any] | None = None,
    retries: int = 2,
) -> SuccessData:
    """Write ``ddf`` to ``dest`` (a URL or local path) as ``format`` (parquet, csv, json)
    files, one per partition (or per partition and value of ``partition_by``, in
    Hive-style directories), and commit them as one job; the job's summary.

    ``mode``: ``error`` (the commit fails if ``dest`` holds files), ``append``,
    ``overwrite`` (the old output is replaced at commit) or ``overwrite_partitions``
    (only the partition directories written are replaced, at commit). ``options``: commit
    options by any of their names (``docs/configuration.md``); ``writer_options``: the
    format writer's (``write_table``); ``retries``: Dask's per-task retries.

    Computes on the current Dask scheduler (``distributed.Client`` if one is active).
    On failure the job is aborted and the task's error raised."""
    check_format(format)
    columns = partition_columns(partition_by)
    job = EngineJob.setup(dest, mode=mode, options=options)
    try:
        parts = ddf.to_delayed()
        write_part = delayed(_write_partition, pure=False)
        records = [
            write_part(part, job.handle(index), format, columns, dict(writer_options or {}))
            for index, part in enumerate(parts)
        ]
        commit = delayed(_commit, pure=False)(job.handle(0), records)
        summary: SuccessData = commit.compute(retries=retries)
    except BaseException:
        job.abort()
        raise
    return summary


def _write_partition(
    frame: Any,  # a pandas DataFrame
    handle: AttemptHandle,
    format: str,
    partition_by: list[str],
    writer_options: dict[str, Any],
) -> TaskCommitMessage:
    """Task: write one partition through a new attempt of its task, commit it; its
    commit message (the manifest committer's carries the manifest)."""
    table = pa.Table.from_pandas(frame, preserve_index=False)
    with handle.retry().open() as attempt:
        write_table(
            attempt, table, format=format, partition_by=partition_by, options=writer_options
        )
        return attempt.commit_message()


def _commit(handle: AttemptHandle, records: list[TaskCommitMessage]) -> SuccessData:
    """Task: commit the job over exactly ``records``."""
    return commit_job_blocking(handle, records)
