"""Re-running a job commit that died part-way, failures naming where they happened,
cancellation, and abort after a partial commit."""

from __future__ import annotations

import anyio
import pytest

from aiocommit import CommitError, CommitOptions, abort_job, commit_job
from aiocommit.io.operations import StoreOperations
from aiocommit.protocol import statistics as S
from aiocommit.protocol.iostatistics import IOStatistics
from aiocommit.stores.base import Store, join, parent_of
from aiocommit.stores.faulty import Faults, FaultyStore, InjectedFailure, Latency
from aiocommit.stores.wrapper import StoreWrapper
from tests.helpers import exists, output, run_tasks

NO_RETRY = CommitOptions(max_attempts=1, concurrency=8)


async def count_commit_calls(store: Store, dest: str) -> int:
    job_id, _ = await run_tasks(store, dest, tasks=3, files_per_task=4)
    counting = FaultyStore(store)
    await commit_job(dest, job_id, store=counting, options=NO_RETRY)
    return counting.counts.calls


@pytest.mark.slow
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


class _ParentRemover(StoreWrapper):
    """Removes a rename's destination directory just before the rename, the first
    ``times`` renames into it (another process deleting it after the directories stage)."""

    def __init__(self, inner: Store, times: int) -> None:
        super().__init__(inner)
        self.times = times
        self.renames: dict[str, int] = {}

    async def rename(
        self, source: str, dest: str, *, overwrite: bool = False, source_etag: str | None = None
    ) -> None:
        parent = parent_of(dest)
        if "/tasks/" not in source:  # the job's own files (plan, _SUCCESS), not output
            await self.inner.rename(source, dest, overwrite=overwrite, source_etag=source_etag)
            return
        self.renames[parent] = self.renames.get(parent, 0) + 1
        if self.renames[parent] <= self.times:
            await self.inner.delete(parent, recursive=True)
        await self.inner.rename(source, dest, overwrite=overwrite, source_etag=source_etag)


@pytest.mark.parametrize("store_root", ["local"], indirect=True)
async def test_a_vanished_destination_directory_is_made_again(
    store_root: tuple[Store, str],
) -> None:
    store, root = store_root
    dest = join(root, "out")
    job_id, expected = await run_tasks(store, dest, tasks=1, files_per_task=2)  # a dir each
    removing = _ParentRemover(store, times=2)
    summary = await commit_job(dest, job_id, store=removing, options=CommitOptions(concurrency=1))
    assert await output(store, dest) == expected
    assert set(removing.renames.values()) == {3}, "two renames into a vanished parent, then one"
    assert summary.iostatistics.counters[S.OP_MKDIRS] >= 4


@pytest.mark.parametrize("store_root", ["local"], indirect=True)
async def test_a_destination_directory_that_keeps_vanishing_fails_the_commit(
    store_root: tuple[Store, str],
) -> None:
    store, root = store_root
    dest = join(root, "out")
    job_id, _ = await run_tasks(store, dest, tasks=1, files_per_task=1)
    removing = _ParentRemover(store, times=100)
    with pytest.raises(CommitError, match="destination parent keeps vanishing"):
        await commit_job(dest, job_id, store=removing, options=CommitOptions(concurrency=1))
    assert list(removing.renames.values()) == [3], "three renames, then the error"
    await abort_job(dest, job_id, store=store)
    assert await output(store, dest) == {}
