"""S3A task side, ``save_pendingset_stage``: the task's uploads named in its pending set;
the last attempt to commit wins, the earlier attempt's uploads are aborted."""

from __future__ import annotations

import pytest

from aiocommit.committers.s3a.save_pendingset import save_pendingset_stage
from aiocommit.errors import CommitError
from aiocommit.protocol.pending import decode_pendingset, pendingset_path, pendingsets_dir
from tests.stages.s3a import DEST, s3a_job


async def test_last_attempt_wins() -> None:
    async with s3a_job() as job:
        context, task = job.context, job.task_id()
        first = [await job.upload("a.dat", b"first")]
        await save_pendingset_stage(context, job.mops, task, job.attempt_id(0, 0), first)
        second = [await job.upload("b.dat", b"second")]
        await save_pendingset_stage(context, job.mops, task, job.attempt_id(0, 1), second)
        path = pendingset_path(context.layout, task)
        saved = decode_pendingset(await job.store.read_bytes(path))
        assert [c.upload_id for c in saved.commits] == [second[0].upload_id]
        assert await job.outstanding() == {f"{DEST}/b.dat"}, "the first attempt's upload aborted"
        # the same attempt saved again (a retried task commit) keeps its uploads
        await save_pendingset_stage(context, job.mops, task, job.attempt_id(0, 1), second)
        assert await job.outstanding() == {f"{DEST}/b.dat"}


async def test_per_attempt_sets() -> None:
    async with s3a_job() as job:
        attempt = job.attempt_id(0, 3)
        commits = [await job.upload("a.dat", b"a")]
        await save_pendingset_stage(
            job.context, job.mops, job.task_id(), attempt, commits, per_attempt=True
        )
        path = pendingset_path(job.context.layout, attempt)
        saved = decode_pendingset(await job.store.read_bytes(path))
        assert saved.extra_data["task.attempt.id"] == attempt


async def test_refused_when_the_job_is_gone() -> None:
    async with s3a_job() as job:
        commits = [await job.upload("a.dat", b"a")]
        await job.store.delete(pendingsets_dir(job.context.layout), recursive=True)
        with pytest.raises(CommitError, match="no pending sets directory"):
            await save_pendingset_stage(
                job.context, job.mops, job.task_id(), job.attempt_id(), commits
            )
