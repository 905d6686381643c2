"""S3A job side, ``load_pendingsets_stage``: every pending set parsed and checked against
the job, the destination and the store's outstanding uploads; nothing visible changes."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from aiocommit.committers.s3a.load_pendingsets import (
    LoadedPending,
    list_pendingset_names,
    load_pendingsets_stage,
)
from aiocommit.errors import ManifestError, OutputConflict
from aiocommit.protocol.pending import (
    PendingSet,
    decode_pendingset,
    encode_pendingset,
    pendingset_path,
)
from aiocommit.stores.base import join
from tests.helpers import output
from tests.stages.s3a import DEST, S3AJob, s3a_job

FILES = {0: {"p=1/a.dat": b"a", "p=2/b.dat": b"bb"}, 1: {"p=1/c.dat": b"ccc"}}


async def two_tasks(job: S3AJob) -> None:
    for task, files in FILES.items():
        await job.commit_task(task, files)


async def load(job: S3AJob) -> LoadedPending:
    names = await list_pendingset_names(job.context)
    return await load_pendingsets_stage(job.context, job.mops, names)


async def test_loads_every_pending_commit() -> None:
    async with s3a_job() as job:
        await two_tasks(job)
        loaded = await load(job)
        assert set(loaded.destinations) == {join(DEST, r) for f in FILES.values() for r in f}
        assert len(loaded.commits) == 3 and loaded.completed == set()
        assert len(loaded.digests) == 2
        assert await output(job.store, DEST) == {}


async def rewrite_set(job: S3AJob, task: int, change: Callable[[PendingSet], None]) -> None:
    path = pendingset_path(job.context.layout, job.task_id(task))
    pending = decode_pendingset(await job.store.read_bytes(path))
    change(pending)
    await job.store.write_bytes(path, encode_pendingset(pending))


async def test_a_set_of_another_job() -> None:
    async with s3a_job() as job:
        await two_tasks(job)
        await rewrite_set(job, 1, lambda p: setattr(p, "job_id", "job_202001010000_0001"))
        with pytest.raises(ManifestError, match="pending set is of job"):
            await load(job)


async def test_a_destination_outside_the_destination() -> None:
    def move_out(pending: PendingSet) -> None:
        pending.commits[0].destination_key = "elsewhere/a.dat"
        pending.commits[0].uri = pending.commits[0].uri.replace("/out/p=1/", "/elsewhere/")

    async with s3a_job() as job:
        await two_tasks(job)
        await rewrite_set(job, 0, move_out)
        with pytest.raises(ManifestError, match="outside the destination"):
            await load(job)


async def test_two_tasks_claiming_one_destination() -> None:
    async with s3a_job() as job:
        await two_tasks(job)
        await job.commit_task(2, {"p=1/a.dat": b"again"})
        with pytest.raises(OutputConflict, match="two tasks claim"):
            await load(job)


async def test_an_upload_that_is_gone() -> None:
    async with s3a_job() as job:
        await two_tasks(job)
        gone = (await load(job)).commits[0]
        await job.store.abort_upload("/" + gone.destination_key, gone.upload_id)
        with pytest.raises(ManifestError, match="no longer exists"):
            await load(job)


async def test_an_upload_completed_by_an_earlier_run() -> None:
    async with s3a_job() as job:
        await two_tasks(job)
        done = (await load(job)).commits[0]
        path = "/" + done.destination_key
        await job.store.complete_upload(path, done.upload_id, done.etags)
        assert (await load(job)).completed == {path}
