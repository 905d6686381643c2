"""``undo_commit_stage``: a part-run commit's renamed files moved back."""

from __future__ import annotations

import pytest

from aiocommit.committers.common.commit_plan import (
    ABORTED,
    CommitPlan,
    read_plan,
    save_plan,
)
from aiocommit.committers.common.session import new_statistics
from aiocommit.committers.manifest.abort import undo_commit_stage
from aiocommit.committers.manifest.commit_file import commit_file
from aiocommit.committers.manifest.create_dirs import create_directories_stage
from aiocommit.committers.manifest.load_manifests import list_manifest_names, load_manifests_stage
from aiocommit.committers.manifest.plan_copies import save_copies
from aiocommit.errors import CommitError
from aiocommit.stores.base import join
from tests.helpers import exists, output, walk
from tests.stages.conftest import Job


async def part_way(job: Job, manifests_done: int) -> CommitPlan:
    """A commit that saved its plan and renamed ``manifests_done`` manifests' files."""
    async with job.context() as context:
        names = await list_manifest_names(context)
        loaded = await load_manifests_stage(context, names, new_statistics(), keep_bytes=True)
        try:
            plan = CommitPlan(
                job.job_id,
                {m.name: m.digest for m in loaded.manifests},
                copies=await save_copies(context, loaded),
            )
            await save_plan(context, plan)
            await create_directories_stage(context, loaded.directories)
            for manifest in loaded.manifests[:manifests_done]:
                for entry in loaded.entries(manifest, job.dest):
                    await commit_file(context, entry)
        finally:
            loaded.close()
    return plan


async def test_moves_renamed_files_back_and_removes_created_directories(job: Job) -> None:
    async with job.context() as context:
        tasks_before = await walk(job.store, context.layout.tasks_dir)
    plan = await part_way(job, manifests_done=2)
    assert await output(job.store, job.dest)
    async with job.context() as context:
        moved = await undo_commit_stage(context, plan, new_statistics())
        assert moved == 8
        assert await walk(job.store, context.layout.tasks_dir) == tasks_before
        saved = await read_plan(context)
        assert saved is not None and saved.state == ABORTED
    assert await output(job.store, job.dest) == {}
    assert not await exists(job.store, join(job.dest, "part=0"))


async def test_rerunnable(job: Job) -> None:
    plan = await part_way(job, manifests_done=3)
    async with job.context() as context:
        assert await undo_commit_stage(context, plan, new_statistics()) == 12
        assert await undo_commit_stage(context, plan, new_statistics()) == 0
    assert await output(job.store, job.dest) == {}


async def test_a_file_neither_here_nor_there_stops_it(job: Job) -> None:
    plan = await part_way(job, manifests_done=1)
    renamed = await output(job.store, job.dest)
    lost = join(job.dest, sorted(renamed)[0])
    await job.store.delete(lost)
    async with job.context() as context:
        with pytest.raises(CommitError, match="neither at its source nor at its destination"):
            await undo_commit_stage(context, plan, new_statistics())
        saved = await read_plan(context)
        assert saved is not None and saved.state != ABORTED
