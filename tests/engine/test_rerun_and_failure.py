"""Re-running a job commit that died part-way, failures naming where they happened,
cancellation, and abort after a partial commit."""

from __future__ import annotations

import anyio
import pytest

from aiocommit import CommitError, CommitOptions, abort_job, commit_job
from aiocommit.io.operations import StoreOperations
from aiocommit.protocol import statistics as S
from aiocommit.protocol.iostatistics import IOStatistics
from aiocommit.stores.base import Store, join
from aiocommit.stores.faulty import Faults, FaultyStore, InjectedFailure, Latency
from tests.helpers import exists, output, run_tasks

NO_RETRY = CommitOptions(max_attempts=1, concurrency=8)


async def count_commit_calls(store: Store, dest: str) -> int:
    job_id, _ = await run_tasks(store, dest, tasks=3, files_per_task=4)
    counting = FaultyStore(store)
    await commit_job(dest, job_id, store=counting, options=NO_RETRY)
    return counting.counts.calls


async def test_rerun_after_a_crash_at_every_store_call(store_root: tuple[Store, str]) -> None:
    """Kill the job commit at its Nth store call, for every N; a re-run must then
    produce exactly the expected output, whatever state the first run left."""
    store, root = store_root
    total = await count_commit_calls(store, join(root, "probe"))
    assert total > 15
    for crash_at in range(total):
        dest = join(root, f"run{crash_at}")
        job_id, expected = await run_tasks(store, dest, tasks=3, files_per_task=4)
        crashing = FaultyStore(store, Faults(fail_after_calls=crash_at))
        with pytest.raises(CommitError) as caught:
            await commit_job(dest, job_id, store=crashing, options=NO_RETRY)
        assert isinstance(caught.value.__cause__, InjectedFailure), crash_at
        assert caught.value.stage is not None
        summary = await commit_job(dest, job_id, store=store)
        assert summary.success
        assert await output(store, dest) == expected, f"crash at call {crash_at}"
        assert not await exists(store, join(dest, "_temporary"))


async def test_permanent_rename_failure_names_stage_operation_path(
    store_root: tuple[Store, str],
) -> None:
    store, root = store_root
    dest = join(root, "out")
    job_id, expected = await run_tasks(store, dest, tasks=4, files_per_task=5)
    bad = "part-00002-0003.dat"
    failing = FaultyStore(
        store, Faults(fail_paths=lambda op, path: op == "rename" and path.endswith(bad))
    )
    with pytest.raises(CommitError) as caught:
        await commit_job(dest, job_id, store=failing)
    error = caught.value
    assert error.stage == S.JOB_STAGE_RENAME_FILES
    assert error.operation == "rename"
    assert error.path is not None and error.path.endswith(bad)
    assert not await exists(store, join(dest, "_SUCCESS"))
    # the fault clears; a re-run finishes the job
    await commit_job(dest, job_id, store=store)
    assert await output(store, dest) == expected


async def test_cancel_from_outside_then_rerun(store_root: tuple[Store, str]) -> None:
    store, root = store_root
    dest = join(root, "out")
    job_id, expected = await run_tasks(store, dest, tasks=4, files_per_task=10)
    slow = FaultyStore(store, Faults(latency_by_operation={"rename": Latency(fixed=0.01)}))
    async with anyio.create_task_group() as group:
        group.start_soon(
            lambda: commit_job(dest, job_id, store=slow, options=CommitOptions(concurrency=8))
        )
        while slow.counts.by_operation.get("rename", 0) < 12:  # noqa: ASYNC110 - polling a counter
            await anyio.sleep(0.001)
        group.cancel_scope.cancel()
    landed = await output(store, dest)
    assert 0 < len(landed) < len(expected), "cancelled in the middle of renaming"
    await commit_job(dest, job_id, store=store)
    assert await output(store, dest) == expected


async def test_cancel_releases_every_slot() -> None:
    from aiocommit.stores.memory import MemoryStore

    store = FaultyStore(MemoryStore("cancel"), Faults(latency=Latency(fixed=1.0)))
    operations = StoreOperations(store, CommitOptions(concurrency=4), IOStatistics())
    with anyio.move_on_after(0.05):
        async with anyio.create_task_group() as group:
            for n in range(10):
                group.start_soon(operations.mkdirs, f"/d{n}")
    assert operations.limiter.in_flight == 0


async def test_abort_after_partial_commit_moves_files_back(store_root: tuple[Store, str]) -> None:
    store, root = store_root
    dest = join(root, "out")
    await store.write_bytes(join(dest, "old.dat"), b"old")
    job_id, _ = await run_tasks(store, dest, tasks=3, files_per_task=6)
    crashing = FaultyStore(
        store, Faults(fail_paths=lambda op, path: op == "rename" and path.endswith("0004.dat"))
    )
    with pytest.raises(CommitError):
        await commit_job(dest, job_id, store=crashing, options=CommitOptions(concurrency=2))
    assert len(await output(store, dest)) > 1, "some files had been renamed"
    await abort_job(dest, job_id, store=store)
    assert await output(store, dest) == {"old.dat": b"old"}
    assert not await exists(store, join(dest, "_temporary"))


async def test_first_failure_cancels_the_rest_promptly(store_root: tuple[Store, str]) -> None:
    store, root = store_root
    dest = join(root, "out")
    job_id, _ = await run_tasks(store, dest, tasks=4, files_per_task=25)
    faulty = FaultyStore(
        store,
        Faults(
            latency_by_operation={"rename": Latency(fixed=0.02)},
            fail_paths=lambda op, path: op == "rename" and path.endswith("part-00000-0000.dat"),
        ),
    )
    started = anyio.current_time()
    with pytest.raises(CommitError):
        await commit_job(dest, job_id, store=faulty, options=CommitOptions(concurrency=4))
    assert anyio.current_time() - started < 1.0, "100 renames at 20 ms / 4 would take 0.5 s+"
    assert faulty.counts.by_operation["rename"] < 20
