"""``commit_files``: renames made in store batches (the rename workers' path) end, count
and recover exactly as ``commit_file`` one by one does."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from aiocommit.committers.manifest.commit_file import (
    Entry,
    batches_commits,
    commit_file,
    commit_files,
)
from aiocommit.committers.manifest.create_dirs import create_directories_stage
from aiocommit.committers.manifest.load_manifests import LoadedJob
from aiocommit.errors import OutputConflict, StoreError, Transient
from aiocommit.options import CommitOptions
from aiocommit.protocol import statistics as S
from aiocommit.stores.base import RenameBatch, join, rename_batcher
from aiocommit.stores.faulty import Faults, FaultyStore, Latency
from aiocommit.stores.local import LocalStore
from aiocommit.stores.wrapper import StoreWrapper
from tests.helpers import output, run_tasks
from tests.stages.conftest import Job, load


@pytest.fixture
async def local_job(tmp_path: Path) -> Job:
    """Three committed tasks of four files each on the local store."""
    store = LocalStore()
    dest = str(tmp_path / "out")
    job_id, expected = await run_tasks(store, dest, tasks=3, files_per_task=4)
    return Job(store, dest, job_id, expected)


def every_entry(loaded: LoadedJob, dest: str) -> list[Entry]:
    return [entry for manifest in loaded.manifests for entry in loaded.entries(manifest, dest)]


async def test_a_batch_counts_and_recovers_as_one_by_one(local_job: Job) -> None:
    """A re-run after a partial run: the files already renamed are counted as already
    committed, the rest renamed; one rename call and one commit per file."""
    slow = FaultyStore(local_job.store, Faults(latency=Latency(fixed=0.02)))
    async with Job(slow, local_job.dest, local_job.job_id, {}).context() as context:
        loaded = await load(context)
        try:
            await create_directories_stage(context, loaded.directories)
            entries = every_entry(loaded, local_job.dest)
            for entry in entries[:2]:
                await commit_file(context, entry)  # a run that died after two files
            assert batches_commits(context)
            calls = slow.counts.calls
            renames = slow.counts.by_operation["rename"]
            started = time.perf_counter()
            await commit_files(context, entries)
            elapsed = time.perf_counter() - started
        finally:
            loaded.close()
        snapshot = context.stats.snapshot()
    assert await output(local_job.store, local_job.dest) == local_job.expected
    assert elapsed >= 0.02  # every call still waits its latency
    counters = snapshot.counters
    assert counters[S.COMMITTER_FILES_ALREADY_COMMITTED] == 2
    # a rename call of the batches per file, and a stat of each already committed one
    assert slow.counts.by_operation["rename"] - renames == 12
    assert slow.counts.calls - calls == 12 + 2
    assert counters[S.OP_RENAME] == 12  # 2 one by one, 10 batched
    assert counters[S.OP_RENAME + ".failures"] == 2  # the sources already gone
    assert snapshot.meanstatistics[S.COMMIT_FILE_RENAME + ".mean"].samples == 2 + 12


async def test_a_conflict_in_a_batch_is_an_output_conflict(local_job: Job) -> None:
    taken = sorted(local_job.expected)[5]
    await local_job.store.write_bytes(join(local_job.dest, taken), b"someone else's")
    async with local_job.context() as context:
        loaded = await load(context)
        try:
            with pytest.raises(OutputConflict):
                await commit_files(context, every_entry(loaded, local_job.dest))
        finally:
            loaded.close()
        snapshot = context.stats.snapshot()
    assert snapshot.meanstatistics[S.COMMIT_FILE_RENAME + ".failures.mean"].samples == 1


class _FailsOnce(StoreWrapper):
    """Batched renames whose rename of ``path`` fails once with a transient error that
    was not applied (then succeeds, as the same rename one by one does)."""

    def __init__(self, inner: LocalStore) -> None:
        super().__init__(inner)
        self.path = ""
        self.failed = False

    def rename_batcher(self) -> RenameBatch:
        inner = rename_batcher(self.inner)
        assert inner is not None

        async def batch(renames: list[tuple[str, str, str | None]]) -> list[StoreError | None]:
            if self.failed:
                return await inner(renames)
            self.failed = True
            kept = [r for r in renames if r[0] != self.path]
            outcomes = iter(await inner(kept))
            return [
                Transient("injected", path=r[0], operation="rename", maybe_applied=False)
                if r[0] == self.path
                else next(outcomes)
                for r in renames
            ]

        return batch


async def test_a_transient_failure_in_a_batch_is_retried_alone(local_job: Job) -> None:
    assert isinstance(local_job.store, LocalStore)
    flaky = _FailsOnce(local_job.store)
    flaky_job = Job(flaky, local_job.dest, local_job.job_id, {})
    async with flaky_job.context(CommitOptions(retry_base_delay=0.001)) as context:
        loaded = await load(context)
        try:
            await create_directories_stage(context, loaded.directories)
            entries = every_entry(loaded, local_job.dest)
            flaky.path = entries[3][0]
            await commit_files(context, entries)
        finally:
            loaded.close()
        snapshot = context.stats.snapshot()
    assert flaky.failed
    assert await output(local_job.store, local_job.dest) == local_job.expected
    counters = snapshot.counters
    assert counters[S.STORE_IO_TRANSIENT] == 1
    assert counters[S.STORE_IO_RETRY] == 1
    assert counters[S.OP_RENAME] == 12 and counters[S.OP_RENAME + ".failures"] == 1
    assert counters.get(S.COMMITTER_FILES_ALREADY_COMMITTED, 0) == 0
    assert snapshot.meanstatistics[S.COMMIT_FILE_RENAME + ".mean"].samples == 12


async def test_batches_only_where_each_rename_needs_nothing_of_its_own(
    local_job: Job, job: Job
) -> None:
    """Not with ``delete_target_files`` (a check per file first), a rate limit (a turn
    per call), faults beyond fixed latency (drawn per call), or a store without batches."""
    cases = [
        (local_job, None, CommitOptions(), True),
        (local_job, None, CommitOptions(delete_target_files=True), False),
        (local_job, None, CommitOptions(rate_limit=1000), False),
        (local_job, Faults(latency=Latency(fixed=0.01, jitter=0.001)), CommitOptions(), False),
        (local_job, Faults(throttle_probability=0.1), CommitOptions(), False),
        (job, None, CommitOptions(), False),  # the memory store
    ]
    for which, faults, options, batched in cases:
        store = which.store if faults is None else FaultyStore(which.store, faults)
        async with Job(store, which.dest, which.job_id, {}).context(options) as context:
            assert batches_commits(context) is batched, (faults, options)
