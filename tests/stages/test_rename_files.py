"""``rename_files_stage``: every entry into place, re-runnable after a partial run."""

from __future__ import annotations

import pytest

from aiocommit.errors import CommitError, OutputConflict
from aiocommit.options import CommitOptions
from aiocommit.protocol import statistics as S
from aiocommit.stages.commit_file import commit_file
from aiocommit.stages.create_dirs import create_directories_stage
from aiocommit.stages.rename_files import rename_files_stage
from aiocommit.stores.base import join
from tests.helpers import output
from tests.stages.conftest import Job, load


async def test_renames_every_entry(job: Job) -> None:
    async with job.context() as context:
        loaded = await load(context)
        try:
            await create_directories_stage(context, loaded.directories)
            await rename_files_stage(context, loaded)
        finally:
            loaded.close()
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
