"""The commit plan: saved whole, read back, its manifest copies, and the re-run check."""

from __future__ import annotations

import pytest

from aiocommit.committers.common.commit_plan import (
    COMMITTED,
    COMMITTING,
    CommitPlan,
    check_unchanged,
    copies_reader,
    read_plan,
    save_plan,
)
from aiocommit.committers.common.session import new_statistics
from aiocommit.committers.manifest import plan_copies
from aiocommit.committers.manifest.load_manifests import list_manifest_names, load_manifests_stage
from aiocommit.committers.manifest.plan_copies import save_copies
from aiocommit.errors import ManifestError
from aiocommit.stores.base import join
from tests.helpers import exists
from tests.stages.conftest import Job


async def test_saved_whole_and_read_back(job: Job) -> None:
    async with job.context() as context:
        assert await read_plan(context) is None
        plan = CommitPlan(job.job_id, {"a-manifest.json": "0" * 64})
        await save_plan(context, plan)
        plan.state = COMMITTED
        await save_plan(context, plan)
        again = await read_plan(context)
        assert again is not None and (again.state, again.manifests) == (COMMITTED, plan.manifests)
        assert not await exists(job.store, context.layout.commit_plan_path + ".tmp")


async def test_a_plan_cut_short_reads_as_absent_and_a_wrong_one_is_refused(job: Job) -> None:
    async with job.context() as context:
        await job.store.write_bytes(context.layout.commit_plan_path, b'{"job_id": ')
        assert await read_plan(context) is None  # its first write stopped part-way
        await job.store.write_bytes(context.layout.commit_plan_path, b'{"job_id": 7}')
        with pytest.raises(ManifestError) as caught:
            await read_plan(context)
        assert caught.value.path == context.layout.commit_plan_path


async def test_copies_in_parts_read_back_byte_for_byte(
    job: Job, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(plan_copies, "PART_BYTES", 1)  # one manifest per part
    async with job.context() as context:
        names = await list_manifest_names(context)
        loaded = await load_manifests_stage(context, names, new_statistics(), keep_bytes=True)
        try:
            copies = await save_copies(context, loaded)
        finally:
            loaded.close()
        assert sorted(part for part, _, _ in copies.values()) == [0, 1, 2]
        plan = CommitPlan(job.job_id, {}, copies=copies)
        read = copies_reader(context, plan)
        for name in names:
            original = await job.store.read_bytes(join(context.layout.manifests_dir, name))
            assert await read(name) == original


async def test_a_rerun_refuses_changed_manifests(job: Job) -> None:
    async with job.context() as context:
        plan = CommitPlan(job.job_id, {"task-manifest.json": "1" * 64}, state=COMMITTING)
        check_unchanged(context, plan, {"task-manifest.json": "1" * 64})
        with pytest.raises(ManifestError, match="manifest changed since"):
            check_unchanged(context, plan, {"task-manifest.json": "2" * 64})
