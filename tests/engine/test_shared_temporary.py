"""Per-job staging: a job's cleanup never fails or removes data because another job
uses the shared ``_temporary`` (issue 33, behaviour 4)."""

from __future__ import annotations

import functools

import anyio

from aiocommit import abort_job, commit_job, commit_task, setup_job
from aiocommit.stores.base import Store, join
from tests.helpers import MANIFEST, exists, output, write_task

ROUNDS = 12


async def _one_job(store: Store, dest: str, tag: str) -> str:
    job_id = await setup_job(dest, store=store, options=MANIFEST)
    attempt = await write_task(store, dest, job_id, 0, 0, {f"{tag}/f.dat": tag.encode()})
    await commit_task(attempt, store=store)
    return job_id


async def _set_up_and_abort(store: Store, dest: str) -> None:
    job_id = await setup_job(dest, store=store, options=MANIFEST)
    await abort_job(dest, job_id, store=store)


async def test_cleanups_racing_setups_never_fail(store_root: tuple[Store, str]) -> None:
    """Two jobs commit (and clean up) while a third sets up and aborts, round after
    round: every call succeeds, each commit's output is there, nothing is left."""
    store, root = store_root
    for round_number in range(ROUNDS):
        dest = join(root, f"out{round_number}")
        first = await _one_job(store, dest, "a")
        second = await _one_job(store, dest, "b")

        async with anyio.create_task_group() as group:
            for job_id in (first, second):
                group.start_soon(functools.partial(commit_job, dest, job_id, store=store))
            group.start_soon(_set_up_and_abort, store, dest)
        assert await output(store, dest) == {"a/f.dat": b"a", "b/f.dat": b"b"}
        assert not await exists(store, join(dest, "_temporary"))
