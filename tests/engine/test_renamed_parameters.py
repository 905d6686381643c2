"""Parameters renamed when their old names stopped fitting (``commit_job(manifests=)``
also takes the S3A committers' pending sets, ``abort_job(undo_renames=)`` also reverts
uploads): the old names still work, with a ``DeprecationWarning``."""

from __future__ import annotations

import pytest

from aiocommit import CommitError, CommitOptions, abort_job, commit_job, commit_task, setup_job
from aiocommit.errors import InvalidInput
from aiocommit.stores.base import join
from aiocommit.stores.faulty import Faults, FaultyStore
from aiocommit.stores.memory import MemoryStore
from tests.helpers import output, task_files, write_task

ONE_AT_A_TIME = CommitOptions(concurrency=1, max_attempts=1)
OLDER = "part=2/old.dat"
#: what a reader skips: the summary, and the destination's lease (named with ``_``)
NOT_DATA = ("_SUCCESS", "_aiocommit.lease")


async def data(store: MemoryStore, dest: str) -> dict[str, bytes]:
    return await output(store, dest, ignore=NOT_DATA)


async def half_committed(store: MemoryStore, dest: str) -> str:
    """A job (beside an older file) whose commit renamed some files, then failed on one
    that could not be renamed."""
    job_id = await setup_job(dest, store=store)
    for task in range(2):
        attempt = await write_task(store, dest, job_id, task, 0, task_files(task, 3))
        await commit_task(attempt, store=store)
    await store.write_bytes(join(dest, OLDER), b"older output")
    failing = FaultyStore(
        store,
        Faults(fail_paths=lambda op, path: op == "rename" and path.endswith("00001-0002.dat")),
    )
    with pytest.raises(CommitError):
        await commit_job(dest, job_id, store=failing, options=ONE_AT_A_TIME)
    assert len(await data(store, dest)) > 1
    return job_id


async def test_manifests_is_the_deprecated_name_of_task_records() -> None:
    store = MemoryStore("renamed-manifests")
    dest = "/out"
    job_id = await setup_job(dest, store=store)
    chosen = await write_task(store, dest, job_id, 0, 0, task_files(0, 2))
    await commit_task(chosen, store=store)
    await commit_task(await write_task(store, dest, job_id, 1, 0, task_files(1, 2)), store=store)
    name = f"{chosen.task_id}-manifest.json"
    with pytest.raises(InvalidInput, match="give task_records= only"):
        await commit_job(dest, job_id, store=store, task_records=[name], manifests=[name])
    with pytest.warns(DeprecationWarning, match="manifests= is deprecated: use task_records="):
        await commit_job(dest, job_id, store=store, manifests=[name])
    assert await output(store, dest) == task_files(0, 2)
    await store.aclose()


@pytest.mark.parametrize("undo", [True, False])
async def test_undo_renames_is_the_deprecated_name_of_undo(undo: bool) -> None:
    store = MemoryStore(f"renamed-undo-{undo}")
    dest = "/out"
    job_id = await half_committed(store, dest)
    visible = await data(store, dest)
    with pytest.warns(DeprecationWarning, match="undo_renames= is deprecated: use undo="):
        await abort_job(dest, job_id, store=store, undo_renames=undo)
    assert await data(store, dest) == ({OLDER: b"older output"} if undo else visible)
    await store.aclose()


async def test_undo_false_keeps_the_renamed_files() -> None:
    store = MemoryStore("undo-false")
    dest = "/out"
    job_id = await half_committed(store, dest)
    visible = await data(store, dest)
    with pytest.raises(InvalidInput, match="give undo= only"):
        await abort_job(dest, job_id, store=store, undo=False, undo_renames=False)
    await abort_job(dest, job_id, store=store, undo=False)
    assert await data(store, dest) == visible
    await store.aclose()


async def test_a_clients_job_takes_the_new_names_and_the_old_ones_with_a_warning() -> None:
    from aiocommit import Client

    store = MemoryStore("renamed-client")
    dest = "/out"
    job_id = await half_committed(store, dest)
    visible = await data(store, dest)
    async with Client(dest, store=store) as client:
        job = client.job(job_id)
        with pytest.warns(DeprecationWarning, match="undo_renames= is deprecated: use undo="):
            await job.abort(undo_renames=False)
    assert await data(store, dest) == visible
    await store.aclose()
