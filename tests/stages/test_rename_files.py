"""``rename_files_stage``: every entry into place, re-runnable after a partial run."""

from __future__ import annotations

from collections import Counter
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TypeVar

import anyio
import pytest

from aiocommit.committers.common.context import StageContext
from aiocommit.committers.manifest import rename_workers
from aiocommit.committers.manifest.commit_file import commit_file
from aiocommit.committers.manifest.create_dirs import create_directories_stage
from aiocommit.committers.manifest.rename_files import rename_files_stage
from aiocommit.errors import CommitError, OutputConflict, StoreError
from aiocommit.options import CommitOptions
from aiocommit.protocol import statistics as S
from aiocommit.protocol.iostatistics import IOStatisticsSnapshot
from aiocommit.stores.base import RenameBatch, join
from aiocommit.stores.local import LocalStore
from aiocommit.stores.wrapper import StoreWrapper
from tests.helpers import output, run_tasks
from tests.stages.conftest import Job, load

T = TypeVar("T")


async def rename_all(context: StageContext) -> None:
    """Load the job's manifests, create the target directories, run the rename stage."""
    loaded = await load(context)
    try:
        await create_directories_stage(context, loaded.directories)
        await rename_files_stage(context, loaded)
    finally:
        loaded.close()


async def test_renames_every_entry(job: Job) -> None:
    async with job.context() as context:
        await rename_all(context)
        counters = context.stats.snapshot().counters
    assert await output(job.store, job.dest) == job.expected
    assert counters[S.COMMITTER_FILES_COMMITTED] == 12
    assert counters[S.COMMITTER_BYTES_COMMITTED] == sum(map(len, job.expected.values()))
    assert context.stats.snapshot().gauges["job_rename_processes"] == 1  # memory: here


async def test_a_rerun_finishes_a_partial_run(job: Job) -> None:
    async with job.context() as context:
        loaded = await load(context)
        try:
            await create_directories_stage(context, loaded.directories)
            first = loaded.manifests[0]
            for entry in loaded.entries(first, job.dest):
                await commit_file(context, entry)  # a run that died after one manifest
            await rename_files_stage(context, loaded)
        finally:
            loaded.close()
        counters = context.stats.snapshot().counters
    assert await output(job.store, job.dest) == job.expected
    assert counters[S.COMMITTER_FILES_ALREADY_COMMITTED] == first.file_count


async def test_an_existing_different_file_is_a_conflict(job: Job) -> None:
    taken = next(iter(job.expected))
    await job.store.write_bytes(join(job.dest, taken), b"someone else's")
    async with job.context(CommitOptions(concurrency=1)) as context:
        loaded = await load(context)
        try:
            with pytest.raises(CommitError) as caught:
                await rename_files_stage(context, loaded)
        finally:
            loaded.close()
    assert isinstance(caught.value, OutputConflict)
    assert caught.value.stage == S.JOB_STAGE_RENAME_FILES
    assert caught.value.path == job.store.qualify(join(job.dest, taken))
    assert await job.store.read_bytes(join(job.dest, taken)) == b"someone else's"


async def test_delete_target_files_replaces_it(job: Job) -> None:
    taken = next(iter(job.expected))
    await job.store.write_bytes(join(job.dest, taken), b"someone else's")
    async with job.context(CommitOptions(delete_target_files=True)) as context:
        loaded = await load(context)
        try:
            await rename_files_stage(context, loaded)
        finally:
            loaded.close()
    assert await output(job.store, job.dest) == job.expected


class _CountingStore(StoreWrapper):
    """The local store, counting its calls (one-by-one renames among them) and the
    renames of each of its rename batches."""

    def __init__(self, inner: LocalStore) -> None:
        super().__init__(inner)
        self.inner_local = inner
        self.calls = Counter[str]()
        self.batches: list[int] = []

    async def intercept(self, operation: str, path: str, call: Callable[[], Awaitable[T]]) -> T:
        self.calls[operation] += 1
        return await call()

    def rename_batcher(self) -> RenameBatch:
        batch = self.inner_local.rename_batcher()

        async def counted(renames: list[tuple[str, str, str | None]]) -> list[StoreError | None]:
            self.batches.append(len(renames))
            return await batch(renames)

        return counted


async def rename_tasks_here(
    tmp_path: Path, tasks: int, files_per_task: int
) -> tuple[_CountingStore, IOStatisticsSnapshot, str]:
    """Commit ``tasks`` tasks on the local store, then rename them in this process
    through a counting wrapper (its counts start at the rename stage); the wrapper, the
    job's statistics and its tasks directory."""
    local = LocalStore()
    dest = str(tmp_path / "out")
    job_id, expected = await run_tasks(local, dest, tasks=tasks, files_per_task=files_per_task)
    store = _CountingStore(local)
    async with Job(store, dest, job_id, expected).context() as context:
        loaded = await load(context)
        try:
            await create_directories_stage(context, loaded.directories)
            store.calls.clear()
            await rename_files_stage(context, loaded)
        finally:
            loaded.close()
        snapshot = context.stats.snapshot()
    assert await output(local, dest) == expected
    return store, snapshot, context.layout.tasks_dir


@pytest.mark.slow
async def test_a_job_of_many_small_tasks_renames_in_chunks_here(tmp_path: Path) -> None:
    """200 tasks of 3 files, renamed in this process on a store that batches renames:
    whole small manifests go together in chunks of ``CHUNK_FILES`` renames, each one
    store call (not 600 renames, each with its own task); every attempt directory is
    deleted as its manifest finishes, and the files are counted as one by one."""
    store, snapshot, tasks_dir = await rename_tasks_here(tmp_path, 200, 3)
    assert store.calls["rename"] == 0  # every rename in a batch
    chunk = rename_workers.CHUNK_FILES
    assert sum(store.batches) == 600
    # 21 whole manifests a chunk: 10 chunks (a call takes as many renames as the
    # in-flight limit has free slots, so a chunk may go in two)
    assert -(-600 // (chunk - chunk % 3)) <= len(store.batches) <= 20
    assert max(store.batches) <= chunk
    assert store.calls["delete"] == 200  # each attempt directory as its manifest finished
    assert snapshot.counters[S.COMMITTER_FILES_COMMITTED] == 600
    assert snapshot.counters[S.COMMITTER_TASK_ATTEMPT_DIRECTORIES_DELETED] == 200
    assert snapshot.meanstatistics[S.COMMIT_FILE_RENAME + ".mean"].samples == 600
    assert not [p async for p in anyio.Path(tasks_dir).iterdir()]


async def test_a_large_manifest_is_cut_into_even_chunks(tmp_path: Path) -> None:
    """A manifest of more than ``CHUNK_FILES`` files goes in even pieces (100 as 50 +
    50), its attempt directory deleted after the last piece."""
    store, snapshot, _ = await rename_tasks_here(tmp_path, 2, 100)
    assert sum(store.batches) == 200 and max(store.batches) == 50  # (a chunk may go in two)
    assert snapshot.counters[S.COMMITTER_TASK_ATTEMPT_DIRECTORIES_DELETED] == 2
