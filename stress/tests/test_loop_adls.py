"""A job commit on ADLS (the emulator in a process of its own, started by the harness's
targets) keeps few tasks and objects in the caller's event loop."""

from __future__ import annotations

import asyncio
import gc
import os

import anyio
import anyio.to_thread
import pytest

from aiocommit import CommitOptions, commit_job

#: objects a job commit of 200 manifests on ADLS, its renames in worker processes, may
#: promote to the oldest generation in the caller: 43,000-56,000 before (200 tasks at once),
#: 4,000-4,500 now (load 5)
ADLS_PROMOTED_BOUND = 15_000


#: the name anyio gives the tasks of ``parallel()``
DRAIN = "aiocommit.committers.common.context.parallel.<locals>.drain"


@pytest.mark.emulator  # starts its own ADLS emulator
async def test_a_job_commit_on_adls_keeps_few_tasks_and_objects_in_the_caller(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """With the renames in worker processes, the caller's loop only loads the manifests,
    checks the sources (a listing per partition of each task), creates directories and
    cleans up: items far fewer than files. Each ran as wide as the store's pool (ADLS:
    256 tasks), every task holding its coroutine and request objects, which each
    middle-generation collection promoted to the oldest generation: at 20,000 files
    enough to set off a full collection of the host's heap (42-62 ms of the loop). Now
    ``LOOP_WORKERS`` at once: the caller runs few tasks and promotes few objects."""
    from tests.helpers import output, run_tasks

    from aiocommit.committers.common.context import LOOP_WORKERS
    from aiocommit.committers.manifest import rename_workers
    from aiocommit_stress.targets import open_target

    monkeypatch.setattr(rename_workers, "MIN_FILES_PER_PROCESS", 4)
    tasks = 200
    # the emulator in a process of its own: what is counted here is the caller's
    async with open_target("adls") as target:
        store, dest = target.store, f"{target.root}/out"
        job_id, expected = await run_tasks(store, dest, tasks=tasks, files_per_task=3)
        peak = 0
        promoted = [0]
        young: list[int] = []

        def counted(phase: str, info: dict[str, int]) -> None:
            # what a middle-generation collection does not free goes to the oldest one
            if info["generation"] != 1:
                return
            if phase == "start":
                young.append(len(gc.get_objects(0)) + len(gc.get_objects(1)))
            else:
                promoted[0] += young.pop() - info["collected"] - info["uncollectable"]

        async def sample() -> None:
            nonlocal peak
            while True:
                drains = sum(1 for task in asyncio.all_tasks() if task.get_name() == DRAIN)
                peak = max(peak, drains)
                await anyio.sleep(0.0005)

        gc.collect()
        gc.callbacks.append(counted)
        try:
            async with anyio.create_task_group() as group:
                group.start_soon(sample)
                every_core = CommitOptions(processes=0)  # the library's default is 1
                summary = await commit_job(dest, job_id, store=store, options=every_core)
                group.cancel_scope.cancel()
        finally:
            gc.callbacks.remove(counted)
        assert summary.iostatistics.gauges["job_rename_processes"] >= 2 or os.cpu_count() == 1
        assert await output(store, dest) == expected
    assert 8 <= peak <= LOOP_WORKERS, f"{peak} of parallel()'s tasks at once"
    assert promoted[0] <= ADLS_PROMOTED_BOUND, f"{promoted[0]} objects promoted"
