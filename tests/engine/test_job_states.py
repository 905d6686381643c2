"""Issue #12, abort: a job's state is recorded with the job, so abort never deletes
committed output, never leaves an aborted job visible, and can be re-run at any point."""

from __future__ import annotations

import pytest

from aiocommit import (
    CommitError,
    CommitOptions,
    JobNotFound,
    ManifestError,
    abort_job,
    commit_job,
    commit_task,
    job_info,
    list_jobs,
    setup_job,
)
from aiocommit.committers.common.job_state import read_job_record
from aiocommit.committers.common.session import open_context
from aiocommit.committers.manifest import plan_copies
from aiocommit.protocol.layout import JobLayout
from aiocommit.stores.base import Store, join
from aiocommit.stores.faulty import Faults, FaultyStore
from tests.helpers import MANIFEST, exists, output, run_tasks, task_files, write_task


def failing_renames(store: Store, marker: str) -> FaultyStore:
    """Every rename whose path contains ``marker`` fails for good."""
    return FaultyStore(store, Faults(fail_paths=lambda op, path: op == "rename" and marker in path))


async def part_way_commit(store: Store, dest: str, job_id: str, attempt: int = 0) -> None:
    """A job commit that renamed some files, then failed."""
    with pytest.raises(CommitError):
        await commit_job(
            dest,
            job_id,
            attempt=attempt,
            store=failing_renames(store, "part=1"),
            options=CommitOptions(concurrency=2, max_attempts=1),
        )


async def state_of(store: Store, dest: str, job_id: str) -> str | None:
    async with open_context(dest, job_id, store=store) as context:
        record = await read_job_record(context)
    return None if record is None else record.state


async def directories(store: Store, root: str) -> set[str]:
    found: set[str] = set()
    pending = [root]
    while pending:
        directory = pending.pop()
        async for page in store.list_dir(directory):
            for status in page:
                if status.is_dir:
                    found.add(status.path[len(root) + 1 :])
                    pending.append(status.path)
    return found


async def new_job(store: Store, dest: str, tag: str) -> tuple[str, dict[str, bytes]]:
    """A job whose two tasks write names no other job in these tests writes."""
    job_id = await setup_job(dest, store=store, options=MANIFEST)
    expected: dict[str, bytes] = {}
    for task in range(2):
        files = task_files(task, 4, tag=tag)
        await commit_task(await write_task(store, dest, job_id, task, 0, files), store=store)
        expected.update(files)
    return job_id, expected


@pytest.mark.parametrize("how", ["cleanup skipped", "cleanup failure ignored"])
async def test_abort_never_deletes_a_committed_jobs_output(
    store_root: tuple[Store, str], how: str
) -> None:
    """Case 1: a committed job whose cleanup did not happen, then another job committed
    to the same destination (replacing _SUCCESS): abort of the first only cleans up."""
    store, root = store_root
    dest = join(root, "out")
    old_id, old_files = await new_job(store, dest, "-old")
    if how == "cleanup skipped":
        await commit_job(dest, old_id, store=store, options=CommitOptions(cleanup_skip=True))
    else:
        job_dir = JobLayout(dest, old_id).job_dir
        failing = FaultyStore(
            store,
            Faults(
                fail_paths=lambda op, path: op.startswith("delete") and path.startswith(job_dir)
            ),
        )
        await commit_job(
            dest,
            old_id,
            store=failing,
            options=CommitOptions(cleanup_ignore_failures=True, max_attempts=1),
        )
    assert await exists(store, JobLayout(dest, old_id).job_dir)
    new_id, new_files = await new_job(store, dest, "-new")
    await commit_job(dest, new_id, store=store)
    assert await state_of(store, dest, old_id) == "committed"
    await abort_job(dest, old_id, store=store)
    assert await output(store, dest) == {**old_files, **new_files}
    assert not await exists(store, JobLayout(dest, old_id).job_dir)


async def test_setup_keeps_an_older_success_until_renaming_starts(
    store_root: tuple[Store, str],
) -> None:
    """#13 item 5: a new job's setup leaves the destination's _SUCCESS; its commit removes
    it when it starts renaming, and writes its own at the end."""
    store, root = store_root
    dest = join(root, "out")
    old_id, _ = await new_job(store, dest, "-old")
    await commit_job(dest, old_id, store=store)
    new_id, _ = await new_job(store, dest, "-new")
    success = join(dest, "_SUCCESS")
    assert b'"jobId": "' + old_id.encode() in await store.read_bytes(success)
    await part_way_commit(store, dest, new_id)
    assert not await exists(store, success), "renaming started: the old _SUCCESS is gone"
    await commit_job(dest, new_id, store=store)
    assert b'"jobId": "' + new_id.encode() in await store.read_bytes(success)


async def test_abort_after_a_late_attempt_replaced_a_manifest(
    store_root: tuple[Store, str],
) -> None:
    """Case 2: the plan's own copies of the manifests drive the undo."""
    store, root = store_root
    dest = join(root, "out")
    await store.write_bytes(join(dest, "old.dat"), b"old")
    job_id, _ = await run_tasks(store, dest, tasks=3, files_per_task=12)
    await part_way_commit(store, dest, job_id)
    assert len(await output(store, dest)) > 1
    late = await write_task(store, dest, job_id, 0, 1, task_files(0, 5, tag="-late"))
    await commit_task(late, store=store)
    with pytest.raises(ManifestError, match="changed since"):
        await commit_job(dest, job_id, store=store)
    assert await state_of(store, dest, job_id) == "committing"
    await abort_job(dest, job_id, store=store)
    assert await output(store, dest) == {"old.dat": b"old"}
    assert not await exists(store, join(dest, "_temporary"))


async def test_abort_from_copies_kept_in_a_part_each(
    store_root: tuple[Store, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Case 2 with each manifest's copy in a part of its own (parts written several at
    once): the undo reads every part back."""
    monkeypatch.setattr(plan_copies, "PART_BYTES", 1)
    await test_abort_after_a_late_attempt_replaced_a_manifest(store_root)


async def test_abort_interrupted_in_its_cleanup_can_be_rerun(
    store_root: tuple[Store, str],
) -> None:
    """Case 3: abort's undo finished, then its deletion stopped after removing the task
    attempt directories but not the plan: the re-run finishes."""
    store, root = store_root
    dest = join(root, "out")
    await store.write_bytes(join(dest, "old.dat"), b"old")
    job_id, _ = await run_tasks(store, dest, tasks=3, files_per_task=8)
    await part_way_commit(store, dest, job_id)
    layout = JobLayout(dest, job_id)
    stopping = FaultyStore(
        store,
        Faults(fail_paths=lambda op, path: op.startswith("delete") and path == layout.job_dir),
    )
    with pytest.raises(CommitError):
        await abort_job(dest, job_id, store=stopping, options=CommitOptions(max_attempts=1))
    await store.delete(layout.tasks_dir, recursive=True)  # what a kill mid-delete leaves
    assert await exists(store, layout.commit_plan_path)
    assert await state_of(store, dest, job_id) == "aborted"
    await abort_job(dest, job_id, store=store)
    assert await output(store, dest) == {"old.dat": b"old"}
    assert not await exists(store, layout.job_dir)


async def test_abort_of_another_attempt_undoes_every_attempt(
    store_root: tuple[Store, str],
) -> None:
    """Case 4: abort given attempt 1 undoes attempt 0's part-way commit."""
    store, root = store_root
    dest = join(root, "out")
    await store.write_bytes(join(dest, "old.dat"), b"old")
    job_id, _ = await run_tasks(store, dest, tasks=3, files_per_task=8)
    await part_way_commit(store, dest, job_id)
    await setup_job(dest, job_id, attempt=1, store=store, options=MANIFEST)
    await abort_job(dest, job_id, attempt=1, store=store)
    assert await output(store, dest) == {"old.dat": b"old"}
    assert not await exists(store, join(dest, "_temporary"))


async def test_finished_abort_rerun_succeeds(store_root: tuple[Store, str]) -> None:
    """Case 5 (library side; the CLI's exit code is tested in tests/cli)."""
    store, root = store_root
    dest = join(root, "out")
    job_id, _ = await run_tasks(store, dest, tasks=2, files_per_task=4)
    await part_way_commit(store, dest, job_id)
    await abort_job(dest, job_id, store=store)
    # nothing of the job is left: a second abort changes nothing, and says so (the
    # CLI's `abort` reports "nothing to abort" and exits 0)
    with pytest.raises(JobNotFound):
        await abort_job(dest, job_id, store=store)
    assert await output(store, dest) == {}
    assert await state_of(store, dest, job_id) is None


async def test_abort_removes_the_empty_directories_the_commit_created(
    store_root: tuple[Store, str],
) -> None:
    """Case 6: directories the part-run commit made go; one that was there stays."""
    store, root = store_root
    if not store.capabilities.directories:
        pytest.skip("no directories on this store")
    dest = join(root, "out")
    await store.write_bytes(join(dest, "part=0", "old.dat"), b"old")
    job_id = await setup_job(dest, store=store, options=MANIFEST)
    files = {
        "part=0/deep/a/x.dat": b"x",
        "part=1/y.dat": b"y",
        "part=2/sub/z.dat": b"z",
        "top.dat": b"t",
    }
    await commit_task(await write_task(store, dest, job_id, 0, 0, files), store=store)
    await part_way_commit(store, dest, job_id)
    # the failed commit itself already removed the directories it left empty (#15); the
    # ones that hold a file it renamed stay until abort moves the file back
    renamed = set(await output(store, dest)) - {"part=0/old.dat"}
    holding = {name.rsplit("/", 1)[0] for name in renamed if "/" in name}
    assert holding <= await directories(store, dest)
    await abort_job(dest, job_id, store=store)
    assert await output(store, dest) == {"part=0/old.dat": b"old"}
    assert await directories(store, dest) == {"part=0"}


async def test_job_states_through_a_commit(store_root: tuple[Store, str]) -> None:
    """set up -> committing -> committed, each recognised from the plan."""
    store, root = store_root
    dest = join(root, "out")
    job_id, expected = await run_tasks(store, dest, tasks=2, files_per_task=4)
    assert await state_of(store, dest, job_id) == "set up"
    await part_way_commit(store, dest, job_id)
    assert await state_of(store, dest, job_id) == "committing"
    await commit_job(dest, job_id, store=store, options=CommitOptions(cleanup_skip=True))
    assert await state_of(store, dest, job_id) == "committed"
    await store.delete(join(dest, "_SUCCESS"))  # replaced by another job, say
    assert await state_of(store, dest, job_id) == "committed"
    summary = await commit_job(dest, job_id, store=store)  # re-run: writes _SUCCESS again
    assert summary.success
    assert await output(store, dest) == expected
    assert await state_of(store, dest, job_id) is None


async def test_an_aborted_job_cannot_be_committed(store_root: tuple[Store, str]) -> None:
    store, root = store_root
    dest = join(root, "out")
    job_id, _ = await run_tasks(store, dest, tasks=2, files_per_task=4)
    await part_way_commit(store, dest, job_id)
    layout = JobLayout(dest, job_id)
    stopping = FaultyStore(
        store,
        Faults(fail_paths=lambda op, path: op.startswith("delete") and path == layout.job_dir),
    )
    with pytest.raises(CommitError):
        await abort_job(dest, job_id, store=stopping, options=CommitOptions(max_attempts=1))
    with pytest.raises(CommitError, match="aborted"):
        await commit_job(dest, job_id, store=store)
    assert await output(store, dest) == {}


async def test_list_jobs_reports_each_state_through_retries(
    store_root: tuple[Store, str],
) -> None:
    """``list_jobs`` reads every job's durable record, through the retrying door: a store
    that throttles a third of its calls changes nothing in the answer."""
    store, root = store_root
    dest = join(root, "out")
    set_up, _ = await new_job(store, dest, "-a")
    committing, _ = await new_job(store, dest, "-b")
    committed, _ = await new_job(store, dest, "-c")
    await commit_job(dest, committed, store=store, options=CommitOptions(cleanup_skip=True))
    aborted, _ = await new_job(store, dest, "-d")
    await part_way_commit(store, dest, aborted)
    layout = JobLayout(dest, aborted)
    stopping = FaultyStore(
        store,
        Faults(fail_paths=lambda op, path: op.startswith("delete") and path == layout.job_dir),
    )
    with pytest.raises(CommitError):
        await abort_job(dest, aborted, store=stopping, options=CommitOptions(max_attempts=1))
    # last: the next job's commit would abort this unfinished one first (its lease)
    await part_way_commit(store, dest, committing)
    flaky = FaultyStore(store, Faults(seed=5, throttle_probability=0.3))
    options = CommitOptions(retry_base_delay=0.0001, retry_max_delay=0.001, max_attempts=40)
    jobs = {job.job_id: job for job in await list_jobs(dest, store=flaky, options=options)}
    assert {job_id: job.state for job_id, job in jobs.items()} == {
        set_up: "set up",
        committing: "committing",
        committed: "committed",
        aborted: "aborted",
    }
    assert jobs[set_up].manifests == 2 and jobs[set_up].files == 8
    assert flaky.counts.throttled > 0
    assert (await job_info(dest, committing, store=store)).state == "committing"
    with pytest.raises(JobNotFound):
        await job_info(dest, "job_209901010000_0001", store=store)
