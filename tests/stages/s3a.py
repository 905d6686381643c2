"""What the S3A stage tests share: a set-up S3A job on the memory store (which has
multipart uploads, as S3 has), its stage context and multipart operations, and uploads."""

from __future__ import annotations

import itertools
from collections.abc import AsyncIterator, Iterable
from contextlib import asynccontextmanager
from dataclasses import dataclass

from aiocommit.committers.common.context import StageContext
from aiocommit.committers.common.session import open_context
from aiocommit.committers.s3a.save_pendingset import save_pendingset_stage
from aiocommit.committers.s3a.upload import upload_pending
from aiocommit.io.multipart import MultipartOperations
from aiocommit.options import CommitOptions
from aiocommit.protocol.pending import SinglePendingCommit, pendingsets_dir
from aiocommit.stores.base import join
from aiocommit.stores.memory import MemoryStore
from tests.stages.conftest import memory_store

_jobs = itertools.count(1)
DEST = "/out"


@dataclass
class S3AJob:
    store: MemoryStore
    context: StageContext
    mops: MultipartOperations

    async def upload(self, relative: str, *parts: bytes, task: int = 0) -> SinglePendingCommit:
        """One file of task ``task`` as an uncompleted upload of ``DEST/relative``."""
        return await upload_pending(
            self.context,
            self.mops,
            join(DEST, relative),
            chunks(parts),
            task_id=self.task_id(task),
        )

    def task_id(self, task: int = 0) -> str:
        return f"task_{self.context.layout.job_id[4:]}_m_{task:06d}"

    def attempt_id(self, task: int = 0, attempt: int = 0) -> str:
        return f"attempt_{self.context.layout.job_id[4:]}_m_{task:06d}_{attempt}"

    async def commit_task(self, task: int, files: dict[str, bytes], attempt: int = 0) -> None:
        """Upload ``files`` and save them as task ``task``'s pending set."""
        commits = [await self.upload(rel, data, task=task) for rel, data in files.items()]
        await save_pendingset_stage(
            self.context, self.mops, self.task_id(task), self.attempt_id(task, attempt), commits
        )

    async def outstanding(self) -> set[str]:
        return {u.path async for page in self.store.list_uploads("/") for u in page}


async def chunks(parts: Iterable[bytes]) -> AsyncIterator[bytes]:
    for part in parts:
        yield part


@asynccontextmanager
async def s3a_job(options: CommitOptions | None = None) -> AsyncIterator[S3AJob]:
    """A job set up as the S3A committers set one up (its pending sets directory)."""
    store = memory_store()
    job_id = f"job_2026112400{next(_jobs):02d}_0001"
    async with open_context(DEST, job_id, store=store, options=options) as context:
        await store.mkdirs(pendingsets_dir(context.layout))
        yield S3AJob(store, context, MultipartOperations(context.ops))
