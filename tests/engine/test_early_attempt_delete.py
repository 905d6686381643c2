"""Task attempt directories deleted by the rename stage as each manifest finishes: the
same calls cleanup made, earlier; a failed commit with some of them gone is still
finished by a re-run or undone by ``abort_job``."""

from __future__ import annotations

from pathlib import Path

import pytest

from aiocommit import CommitError, CommitOptions, abort_job, commit_job
from aiocommit.protocol import statistics as S
from aiocommit.protocol.layout import JobLayout
from aiocommit.stores.base import Store, join
from aiocommit.stores.faulty import Faults, FaultyStore
from aiocommit.stores.local import LocalStore
from tests.helpers import exists, output, run_tasks

#: one rename at a time: manifests finish in name order, tasks 0 and 1 before task 2
ONE_AT_A_TIME = CommitOptions(concurrency=1)


def fail_task_2(operation: str, path: str) -> bool:
    return operation == "rename" and path.endswith("part-00002-0001.dat")


async def attempt_dirs(store: Store, dest: str, job_id: str) -> list[str]:
    tasks_dir = JobLayout(dest, job_id).tasks_dir
    found: list[str] = []
    async for page in store.list_dir(tasks_dir):
        found.extend(s.name for s in page if s.is_dir)
    return sorted(found)


async def failed_after_two_manifests(
    tmp_path: Path,
) -> tuple[LocalStore, str, str, dict[str, bytes]]:
    store = LocalStore()
    dest = join(str(tmp_path), "out")
    job_id, expected = await run_tasks(store, dest, tasks=4, files_per_task=3)
    before = await attempt_dirs(store, dest, job_id)
    assert len(before) == 4
    faulty = FaultyStore(store, Faults(fail_paths=fail_task_2))
    with pytest.raises(CommitError):
        await commit_job(dest, job_id, store=faulty, options=ONE_AT_A_TIME)
    # the two manifests renamed whole lost their attempt directories; the others keep them
    assert await attempt_dirs(store, dest, job_id) == before[2:]
    return store, dest, job_id, expected


async def test_a_rerun_finishes_after_early_deletes(tmp_path: Path) -> None:
    store, dest, job_id, expected = await failed_after_two_manifests(tmp_path)
    summary = await commit_job(dest, job_id, store=store, options=ONE_AT_A_TIME)
    assert summary.success
    assert await output(store, dest) == expected
    counters = summary.iostatistics.counters
    # tasks 0 and 1 whole, and task 2's first file, renamed before its second failed
    assert counters[S.COMMITTER_FILES_ALREADY_COMMITTED] == 7
    assert not await exists(store, join(dest, "_temporary"))


async def test_abort_moves_files_back_into_deleted_attempt_dirs(tmp_path: Path) -> None:
    store, dest, job_id, _ = await failed_after_two_manifests(tmp_path)
    await abort_job(dest, job_id, store=store)
    assert await output(store, dest) == {}
    assert not await exists(store, join(dest, "_temporary"))


async def test_cleanup_counts_every_attempt_dir_once(tmp_path: Path) -> None:
    store = LocalStore()
    dest = join(str(tmp_path), "out")
    job_id, expected = await run_tasks(store, dest, tasks=5, files_per_task=2)
    summary = await commit_job(dest, job_id, store=store)
    assert await output(store, dest) == expected
    assert not await exists(store, join(dest, "_temporary"))
    report = summary.iostatistics.counters
    # _SUCCESS is written before cleanup: what the rename stage deleted is already counted
    assert report[S.COMMITTER_TASK_ATTEMPT_DIRECTORIES_DELETED] == 5


async def test_no_early_deletes_when_cleanup_is_skipped(tmp_path: Path) -> None:
    store = LocalStore()
    dest = join(str(tmp_path), "out")
    job_id, _ = await run_tasks(store, dest, tasks=3, files_per_task=2)
    await commit_job(dest, job_id, store=store, options=CommitOptions(cleanup_skip=True))
    assert len(await attempt_dirs(store, dest, job_id)) == 3
