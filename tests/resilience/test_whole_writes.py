"""Issue 23, defect 1: every file that records state is written whole or not at all.

A write that fails at any of its requests (ADLS: create, append, flush, and the rename
into place; GCS and S3: the one upload) leaves no partial state file, and the job can
still be finished by a re-run or undone by an abort; ``list_jobs`` (``aiocommit jobs``)
answers throughout. A plan left empty by an older version's failed write reads as absent.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from aiocommit import CommitError, CommitOptions, abort_job, commit_job, list_jobs
from aiocommit.protocol.layout import JobLayout
from aiocommit.stores.adls import AdlsStore
from aiocommit.stores.base import Store, join
from aiocommit.stores.faulty import Faults, FaultyStore
from aiocommit_testing.adls_emulator import EmulatorHandle, run_adls_emulator
from tests.helpers import exists, output, run_tasks
from tests.stores.adls_fixtures import adls_store_factory

FAST = CommitOptions(max_attempts=3, retry_base_delay=0.001, retry_max_delay=0.01)

#: the state files a manifest job commit writes, by a part of their name
PLAN = "commit-plan.json"
PLAN_PART = "plan-manifests"
SUCCESS = "_SUCCESS"


@pytest.fixture
async def adls() -> AsyncIterator[tuple[EmulatorHandle, AdlsStore, str]]:
    async with run_adls_emulator() as emulator, adls_store_factory(emulator) as (store, root):
        yield emulator, store, root


async def _assert_no_partial_state(store: Store, dest: str, job_id: str) -> None:
    """No state file of the job is short: each is absent or decodes (the plan read works)."""
    layout = JobLayout(dest, job_id)
    if await exists(store, layout.commit_plan_path):
        data = await store.read_bytes(layout.commit_plan_path)
        assert data.startswith(b"{") and data.rstrip().endswith(b"}"), data[:40]


@pytest.mark.parametrize("operation", ["create", "append", "flush", "rename"])
@pytest.mark.parametrize("finish", ["re-run", "abort"])
async def test_plan_write_failing_on_adls_can_be_rerun_and_aborted(
    adls: tuple[EmulatorHandle, AdlsStore, str], operation: str, finish: str
) -> None:
    """The first plan write fails at one of its requests until the retries give up; the
    commit fails, and the job is still finished by a re-run, or undone by an abort, and
    ``list_jobs`` answers. (The old code left a 0-byte plan that wedged all of these.)"""
    emulator, store, root = adls
    dest = join(root, "out")
    job_id, expected = await run_tasks(store, dest, tasks=3, files_per_task=4)
    emulator.faults.inject(500, "InternalError", operation=operation, path_contains=PLAN, times=99)
    with pytest.raises(CommitError):
        await commit_job(dest, job_id, store=store, options=FAST)
    emulator.faults.clear()
    await _assert_no_partial_state(store, dest, job_id)
    jobs = await list_jobs(dest, store=store)
    assert [(j.job_id, j.state) for j in jobs] == [(job_id, "set up")]
    if finish == "re-run":
        await commit_job(dest, job_id, store=store, options=FAST)
        assert await output(store, dest) == expected
    else:
        await abort_job(dest, job_id, store=store, options=FAST)
        assert await output(store, dest) == {}
    assert not await exists(store, join(dest, "_temporary"))


@pytest.mark.parametrize("operation", ["create", "append", "flush", "rename"])
@pytest.mark.parametrize("what", [PLAN, PLAN_PART, SUCCESS, "-manifest.json"])
async def test_each_state_file_write_fails_at_each_request_on_adls(
    adls: tuple[EmulatorHandle, AdlsStore, str], operation: str, what: str
) -> None:
    """One state file kind, one request of its write failing for good: whatever fails,
    the store holds no partial state file, a re-run finishes the job, and the output is
    exact. Lost responses (the request applied, its answer dropped) are recovered in-run."""
    emulator, store, root = adls
    dest = join(root, "out")
    emulator.faults.inject(500, "InternalError", operation=operation, path_contains=what, times=99)
    try:
        job_id, expected = await run_tasks(store, dest, tasks=2, files_per_task=3, options=FAST)
    except CommitError:  # a manifest write of a task commit failed: abort, run again
        emulator.faults.clear()
        for job in await list_jobs(dest, store=store):
            await abort_job(dest, job.job_id, store=store)
        job_id, expected = await run_tasks(store, dest, tasks=2, files_per_task=3, options=FAST)
    committed = True
    try:
        await commit_job(dest, job_id, store=store, options=FAST)
    except CommitError:
        committed = False
    emulator.faults.clear()
    await _assert_no_partial_state(store, dest, job_id)
    assert (await list_jobs(dest, store=store)) is not None
    if not committed:
        await commit_job(dest, job_id, store=store, options=FAST)
    assert await output(store, dest) == expected
    success = await store.read_bytes(join(dest, SUCCESS))
    assert job_id.encode() in success


@pytest.mark.parametrize("operation", ["create", "append", "flush", "rename"])
async def test_lost_responses_of_a_whole_write_are_recovered_on_adls(
    adls: tuple[EmulatorHandle, AdlsStore, str], operation: str
) -> None:
    """Each request of the plan's write applied but its answer lost once: the commit
    goes through in one run and leaves no temporary file beside the plan."""
    emulator, store, root = adls
    dest = join(root, "out")
    job_id, expected = await run_tasks(store, dest, tasks=2, files_per_task=3)
    emulator.faults.inject(
        500, "OperationTimedOut", operation=operation, path_contains=PLAN, apply_first=True
    )
    await commit_job(dest, job_id, store=store, options=CommitOptions(cleanup_skip=True))
    assert await output(store, dest) == expected
    attempt_dir = JobLayout(dest, job_id).job_attempt_dir
    names = [s.name async for page in store.list_dir(attempt_dir) for s in page]
    assert PLAN in names
    assert not [n for n in names if n.endswith(".tmp")], names


async def test_an_empty_plan_left_by_an_older_version_reads_as_absent(
    any_store_root: tuple[Store, str],
) -> None:
    """A 0-byte or cut-short ``commit-plan.json`` (what the old ADLS write left) wedges
    nothing: ``list_jobs`` says "set up", an abort cleans up, a re-run commits."""
    store, root = any_store_root
    for cut, finish in ((0, "abort"), (17, "re-run")):
        dest = join(root, f"out-{cut}")
        job_id, expected = await run_tasks(store, dest, tasks=2, files_per_task=3)
        plan_path = JobLayout(dest, job_id).commit_plan_path
        await store.write_bytes(plan_path, b'{\n  "job_id": "x", "manifests": {}}'[:cut])
        jobs = await list_jobs(dest, store=store)
        assert [(j.job_id, j.state) for j in jobs] == [(job_id, "set up")]
        if finish == "abort":
            await abort_job(dest, job_id, store=store)
            assert await output(store, dest) == {}
        else:
            await commit_job(dest, job_id, store=store)
            assert await output(store, dest) == expected
        assert not await exists(store, join(dest, "_temporary"))


@pytest.mark.parametrize("what", [PLAN, PLAN_PART, SUCCESS, "-manifest.json"])
async def test_each_state_file_write_fails_on_object_stores(
    cloud_store_root: tuple[Store, str], what: str, request: pytest.FixtureRequest
) -> None:
    """GCS and S3 write a state file in one request (a conditional create where asked):
    that request failing for good, or applied with its answer lost, leaves the job
    finishable by a re-run with exact output (ADLS, several requests, is covered above)."""
    store, root = cloud_store_root
    dest = join(root, "out")
    job_id, expected = await run_tasks(store, dest, tasks=2, files_per_task=3)
    for faults in (
        Faults(seed=1, fail_paths=lambda op, path: op == "write_bytes" and what in path),
        Faults(seed=1, lost_response_probability=1.0, lost_response_operations=("write_bytes",)),
    ):
        faulty = FaultyStore(store, faults)
        try:
            await commit_job(dest, job_id, store=faulty, options=FAST)
        except CommitError:
            pass
        await _assert_no_partial_state(store, dest, job_id)
    await commit_job(dest, job_id, store=store, options=FAST)
    assert await output(store, dest) == expected
