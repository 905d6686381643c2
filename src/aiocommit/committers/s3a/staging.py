"""The staging committers (Hadoop's ``StagingCommitter`` and
``PartitionedStagingCommitter``), over the shared S3A job side: tasks write local files;
task commit uploads each to its final key as a multipart upload it does not complete,
and saves the task's pending set::

    setup: a local directory for the attempt -> the task writes files below it
    -> commit: upload every file (uncompleted, each recorded as the attempt's as it
       starts, the record kept with the job), save pending set, delete the local files
    -> abort: delete the local files (no upload starts before task commit; a task
       commit that fails aborts its own; one that died is left to the job's abort and
       cleanup, which find its uploads by their records)
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import tempfile
from collections.abc import AsyncIterator, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager

import anyio
import anyio.to_thread

from aiocommit.committers.common.committer import AttemptFile, TaskAttempt, WrittenFile
from aiocommit.committers.common.context import StageContext, parallel, stage
from aiocommit.committers.s3a.abort_uploads import abort_pending_stage
from aiocommit.committers.s3a.committer import S3ACommitter, refuse_unsaved
from aiocommit.committers.s3a.options import S3CommitterOptions
from aiocommit.committers.s3a.save_pendingset import save_pendingset_stage
from aiocommit.committers.s3a.upload import upload_pending
from aiocommit.errors import CommitError, InvalidInput
from aiocommit.io.multipart import MultipartOperations
from aiocommit.protocol import s3_statistics as S3
from aiocommit.protocol import statistics as S
from aiocommit.protocol.manifest import TaskManifest
from aiocommit.protocol.pending import PendingSet, SinglePendingCommit, pendingsets_dir
from aiocommit.stores.base import check_clean, join

#: the environment variable naming where staging attempts keep their local files
STAGING_DIR_ENV = "AIOCOMMIT_STAGING_DIR"


def staging_dir(job_id: str, task_attempt_id: str) -> str:
    """The local directory of a staging attempt (below ``$AIOCOMMIT_STAGING_DIR``, else
    the system's temporary directory)."""
    root = os.environ.get(STAGING_DIR_ENV) or os.path.join(
        tempfile.gettempdir(), "aiocommit-staging"
    )
    return os.path.join(root, job_id, task_attempt_id)


async def check_active(context: StageContext) -> None:
    """The job is set up and neither committed nor aborted: its pending sets directory
    exists."""
    if await context.ops.stat_or_none(pendingsets_dir(context.layout)) is None:
        raise CommitError(
            "job is not active (not set up, or already committed or aborted)",
            stage=S.TASK_STAGE_SETUP,
            path=context.qualify(pendingsets_dir(context.layout)),
        )


async def setup_staging(context: StageContext, attempt: TaskAttempt) -> TaskAttempt:
    """An empty local directory for the attempt (an earlier run's files are removed)."""
    await check_active(context)
    local = attempt.local_dir or staging_dir(attempt.job_id, attempt.task_attempt_id)

    def make() -> None:
        shutil.rmtree(local, ignore_errors=True)
        os.makedirs(local, exist_ok=True)

    await anyio.to_thread.run_sync(make)
    return _with_local_dir(attempt, local)


def _with_local_dir(attempt: TaskAttempt, local: str) -> TaskAttempt:
    return dataclasses.replace(attempt, local_dir=local)


def local_path(attempt: TaskAttempt, relative: str) -> str:
    """The local file of the attempt's output that lands at ``DEST/relative``."""
    if attempt.local_dir is None:
        raise InvalidInput("a staging task attempt needs its local_dir (was setup_task run?)")
    check_clean("/" + relative)
    return os.path.join(attempt.local_dir, *relative.split("/"))


async def write_local(attempt: TaskAttempt, relative: str, data: bytes) -> None:
    path = local_path(attempt, relative)
    await anyio.Path(os.path.dirname(path)).mkdir(parents=True, exist_ok=True)
    await anyio.Path(path).write_bytes(data)


async def link_local(attempt: TaskAttempt, relative: str, source: str) -> None:
    """Put the finished local file ``source`` into the attempt's directory: a hard link
    where the filesystem allows, else a copy."""
    path = local_path(attempt, relative)

    def link() -> None:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        try:
            os.link(source, path)
        except OSError:
            shutil.copyfile(source, path)

    await anyio.to_thread.run_sync(link)


def _local_files(root: str) -> list[tuple[str, str]]:
    """(relative path, local path) of every file below ``root``, sorted."""
    found: list[tuple[str, str]] = []
    for directory, _dirs, files in os.walk(root):
        for name in files:
            local = os.path.join(directory, name)
            found.append((os.path.relpath(local, root).replace(os.sep, "/"), local))
    return sorted(found)


async def file_chunks(local: str, part_size: int) -> AsyncIterator[bytes]:
    async with await anyio.open_file(local, "rb") as handle:
        while True:
            chunk = await handle.read(part_size)
            if not chunk:
                return
            yield chunk


async def commit_staging(
    context: StageContext,
    attempt: TaskAttempt,
    s3_options: S3CommitterOptions,
    *,
    files: Sequence[tuple[str, str]] | None = None,
    per_attempt: bool = False,
) -> PendingSet:
    """Staging task commit: upload every file of ``attempt.local_dir`` (or ``files``:
    (path relative to the destination, local path) pairs) to its final key without
    completing it, then save the task's pending set (``per_attempt``: see
    ``save_pendingset_stage``). On failure every upload this call started is aborted and
    nothing is saved."""
    if attempt.local_dir is None and files is None:
        raise InvalidInput("a staging task attempt needs its local_dir or files")
    mops = MultipartOperations(context.ops)
    commits: list[SinglePendingCommit] = []
    try:
        async with stage(context, S.TASK_STAGE_COMMIT):
            await check_active(context)
            if files is None:
                files = await anyio.to_thread.run_sync(_local_files, str(attempt.local_dir))
            async with stage(context, S3.TASK_STAGE_UPLOAD):

                async def upload(item: tuple[str, str]) -> None:
                    relative, local = item
                    commits.append(
                        await upload_pending(
                            context,
                            mops,
                            join(context.layout.dest, relative),
                            file_chunks(local, s3_options.part_size),
                            task_id=attempt.task_id,
                            task_attempt_id=attempt.task_attempt_id,
                        )
                    )

                await parallel(list(files), upload, workers=context.ops.workers)
            commits.sort(key=lambda c: c.destination_key)
            return await save_pendingset_stage(
                context,
                mops,
                attempt.task_id,
                attempt.task_attempt_id,
                commits,
                per_attempt=per_attempt,
            )
    except BaseException:
        with anyio.CancelScope(shield=True):
            await abort_pending_stage(context, mops, commits, revert=False)
        raise


async def abort_staging_task(attempt: TaskAttempt) -> None:
    """Staging task abort: delete the attempt's local files (no upload has started before
    task commit, and a failed task commit aborted its own)."""
    if attempt.local_dir is not None:
        await anyio.to_thread.run_sync(
            lambda: shutil.rmtree(str(attempt.local_dir), ignore_errors=True)
        )


class StagingCommitter(S3ACommitter):
    """Hadoop's ``StagingCommitter`` (its ``DirectoryStagingCommitter``): the conflict
    mode applies to the whole destination."""

    async def setup_task(self, context: StageContext, attempt: TaskAttempt) -> TaskAttempt:
        return await setup_staging(context, attempt)

    async def write_bytes(
        self, context: StageContext, attempt: TaskAttempt, relative: str, data: bytes
    ) -> None:
        await write_local(attempt, relative, data)

    def open(
        self, context: StageContext, attempt: TaskAttempt, relative: str
    ) -> AbstractAsyncContextManager[AttemptFile]:
        return _local_file(local_path(attempt, relative))

    async def write_file(
        self, context: StageContext, attempt: TaskAttempt, relative: str, local_path: str
    ) -> None:
        await link_local(attempt, relative, local_path)

    async def commit_task(
        self,
        context: StageContext,
        attempt: TaskAttempt,
        *,
        per_attempt: bool,
        written: Sequence[WrittenFile] | None = None,
        save: bool = True,
    ) -> TaskManifest | PendingSet:
        # ``written`` is not needed: the pending set holds the attempt's own uploads
        refuse_unsaved(self.name, save)
        settings = self.settings_for(context)
        pending = await commit_staging(context, attempt, settings, per_attempt=per_attempt)
        await abort_staging_task(attempt)
        return pending

    async def abort_task(self, context: StageContext, attempt: TaskAttempt) -> None:
        await abort_staging_task(attempt)


class PartitionedStagingCommitter(StagingCommitter):
    """Hadoop's ``PartitionedStagingCommitter``: the staging committer whose conflict
    mode applies per partition the job writes (``S3CommitterOptions.partitioned``)."""


class _LocalFile:
    def __init__(self, handle: anyio.AsyncFile[bytes]) -> None:
        self._handle = handle

    async def write(self, data: bytes) -> None:
        await self._handle.write(data)


@asynccontextmanager
async def _local_file(path: str) -> AsyncIterator[AttemptFile]:
    """A local file of a staging attempt; removed again when its block raises."""
    await anyio.Path(os.path.dirname(path)).mkdir(parents=True, exist_ok=True)
    try:
        async with await anyio.open_file(path, "wb") as handle:
            yield _LocalFile(handle)
    except BaseException:
        with anyio.CancelScope(shield=True):
            await anyio.Path(path).unlink(missing_ok=True)
        raise
