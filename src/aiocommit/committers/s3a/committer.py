"""The S3A committers (staging, partitioned, magic) behind the ``Committer`` interface."""

from __future__ import annotations

import dataclasses
import os
from collections.abc import AsyncIterator, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass

import anyio

from aiocommit.committers.common.committer import (
    AttemptFile,
    TaskAttempt,
    name_attempt,
    open_attempt,
)
from aiocommit.committers.common.context import StageContext
from aiocommit.committers.s3a.job import abort_s3, cleanup_s3, commit_s3, setup_s3
from aiocommit.committers.s3a.magic import (
    abort_magic,
    bytes_chunks,
    commit_magic,
    stream_magic,
    write_magic,
)
from aiocommit.committers.s3a.options import S3CommitterOptions
from aiocommit.committers.s3a.staging import (
    abort_staging_task,
    check_active,
    commit_staging,
    file_chunks,
    link_local,
    local_path,
    setup_staging,
    write_local,
)
from aiocommit.options import CommitOptions
from aiocommit.protocol.manifest import TaskManifest
from aiocommit.protocol.pending import PENDINGSET_SUFFIX, PendingSet
from aiocommit.protocol.success import SuccessData
from aiocommit.stores.base import Store
from aiocommit.stores.registry import open_store


@dataclass(frozen=True)
class S3ACommitter:
    """The staging, partitioned or magic committer, as its settings say: ``given`` (by
    the caller, now), else those a job commit's plan recorded, else ``recorded`` (with
    the job at setup), else the defaults (staging)."""

    given: S3CommitterOptions | None = None
    recorded: S3CommitterOptions | None = None

    @property
    def s3_options(self) -> S3CommitterOptions:
        return self.given or self.recorded or S3CommitterOptions()

    @property
    def name(self) -> str:
        return self.s3_options.kind

    def describe(self) -> dict[str, str]:
        return {"committer": self.name, **self.s3_options.as_record()}

    async def setup_job(self, context: StageContext) -> None:
        await setup_s3(context)

    async def commit_job(
        self, context: StageContext, committed: Sequence[str] | None
    ) -> SuccessData:
        return await commit_s3(context, self.given, committed, fallback=self.recorded)

    async def abort_job(self, context: StageContext, *, undo: bool) -> list[str]:
        return await abort_s3(context, self.given, revert=undo, fallback=self.recorded)

    async def cleanup_job(self, context: StageContext) -> None:
        await cleanup_s3(context, self.given, fallback=self.recorded)

    @property
    def _magic(self) -> bool:
        return self.s3_options.committer == "magic"

    async def setup_task(self, context: StageContext, attempt: TaskAttempt) -> TaskAttempt:
        if self._magic:
            await check_active(context)
            return attempt
        return await setup_staging(context, attempt)

    async def write_bytes(
        self, context: StageContext, attempt: TaskAttempt, relative: str, data: bytes
    ) -> None:
        if self._magic:
            chunks = bytes_chunks(data, self.s3_options.part_size)
            await write_magic(context, attempt, relative, chunks)
        else:
            await write_local(attempt, relative, data)

    def open(
        self, context: StageContext, attempt: TaskAttempt, relative: str
    ) -> AbstractAsyncContextManager[AttemptFile]:
        if self._magic:
            return stream_magic(context, attempt, relative, self.s3_options.part_size)
        return _local_file(local_path(attempt, relative))

    async def write_file(
        self, context: StageContext, attempt: TaskAttempt, relative: str, local_path: str
    ) -> None:
        if self._magic:
            chunks = file_chunks(local_path, self.s3_options.part_size)
            await write_magic(context, attempt, relative, chunks)
        else:
            await link_local(attempt, relative, local_path)

    async def commit_task(
        self,
        context: StageContext,
        attempt: TaskAttempt,
        *,
        per_attempt: bool,
        written: Sequence[tuple[str, int]] | None = None,
    ) -> TaskManifest | PendingSet:
        # ``written`` is not needed: the pending set holds the attempt's own uploads
        if self._magic:
            return await commit_magic(context, attempt, per_attempt=per_attempt)
        pending = await commit_staging(context, attempt, self.s3_options, per_attempt=per_attempt)
        await abort_staging_task(attempt)
        return pending

    async def abort_task(self, context: StageContext, attempt: TaskAttempt) -> None:
        if self._magic:
            await abort_magic(context, attempt)
        else:
            await abort_staging_task(attempt)

    def committed_name(self, attempt: TaskAttempt, *, per_attempt: bool) -> str:
        return (attempt.task_attempt_id if per_attempt else attempt.task_id) + PENDINGSET_SUFFIX


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


def s3_task_attempt(
    dest: str,
    job_id: str,
    task: str | int,
    attempt: int | str = 0,
    *,
    job_attempt: int = 0,
    local_dir: str | None = None,
    store: Store | None = None,
    s3_options: S3CommitterOptions | None = None,
) -> TaskAttempt:
    """Name a task attempt of an S3A job (``task``: an ID or partition number;
    ``attempt``: a number or an attempt ID). ``dest`` is a URL, or a path of ``store``."""
    if store is not None and dest.startswith("/"):
        url, path = store.qualify(dest), dest
    else:
        url, path = dest, (store.unqualify(dest) if store is not None else "")
    if not path:
        _, path = open_store(dest)  # parsing only: openers connect on first use
    named = name_attempt(
        url,
        path.rstrip("/") or "/",
        job_id,
        task,
        attempt,
        job_attempt=job_attempt,
        committer=S3ACommitter(s3_options),
    )
    return dataclasses.replace(named, local_dir=local_dir)


async def setup_magic_task(
    dest: str,
    job_id: str,
    task: str | int,
    attempt: int | str = 0,
    *,
    job_attempt: int = 0,
    store: Store | None = None,
    options: CommitOptions | None = None,
    s3_options: S3CommitterOptions | None = None,
) -> TaskAttempt:
    """Name a magic task attempt; the job must be set up."""
    settings = S3CommitterOptions.of_kind("magic", s3_options)
    named = s3_task_attempt(
        dest, job_id, task, attempt, job_attempt=job_attempt, store=store, s3_options=settings
    )
    async with open_attempt(named, store, options) as context:
        await check_active(context)
    return named
