"""``cleanup_stage``: the job's temporary tree goes, another job's stays."""

from __future__ import annotations

import pytest

from aiocommit import setup_job
from aiocommit.committers.common.cleanup import cleanup_stage
from aiocommit.errors import CommitError
from aiocommit.options import CommitOptions
from aiocommit.protocol import statistics as S
from aiocommit.stores.faulty import Faults, FaultyStore
from tests.helpers import exists, write_task
from tests.stages.conftest import Job


async def test_removes_the_job_and_an_empty_temporary(job: Job) -> None:
    uncommitted = await write_task(job.store, job.dest, job.job_id, 9, 0, {"x.dat": b"x"})
    async with job.context() as context:
        committed = {
            context.layout.task_attempt_dir(f"attempt_{job.job_id[4:]}_m_{t:06d}_0")
            for t in range(3)
        }
        await cleanup_stage(context, committed)
        counters = context.stats.snapshot().counters
        assert not await exists(job.store, context.layout.temporary_dir)
    assert counters[S.COMMITTER_TASK_ATTEMPT_DIRECTORIES_DELETED] == 4
    assert counters[S.COMMITTER_UNCOMMITTED_TASK_ATTEMPTS_DELETED] == 1
    assert not await exists(job.store, uncommitted.path(""))


async def test_another_jobs_directory_stays(job: Job) -> None:
    other = await setup_job(job.dest, store=job.store)
    async with job.context() as context:
        await cleanup_stage(context)
        assert not await exists(job.store, context.layout.job_dir)
        assert await exists(job.store, context.layout.temporary_dir + "/" + other)
    await cleanup_stage_again_is_a_no_op(job)


async def cleanup_stage_again_is_a_no_op(job: Job) -> None:
    async with job.context() as context:
        await cleanup_stage(context)


@pytest.mark.parametrize("ignore", [False, True])
async def test_a_failure_is_raised_unless_ignored(job: Job, ignore: bool) -> None:
    failing = FaultyStore(job.store, Faults(fail_paths=lambda op, path: op == "delete"))
    options = CommitOptions(cleanup_ignore_failures=ignore)
    async with Job(failing, job.dest, job.job_id, job.expected).context(options) as context:
        if ignore:
            await cleanup_stage(context)
            counters = context.stats.snapshot().counters
            assert counters[S.JOB_STAGE_CLEANUP + ".ignored_failures"] == 1
        else:
            with pytest.raises(CommitError) as caught:
                await cleanup_stage(context)
            assert caught.value.stage == S.JOB_STAGE_CLEANUP
        assert await exists(job.store, context.layout.job_dir)
