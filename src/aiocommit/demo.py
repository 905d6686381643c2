"""A demo job on the local store: tasks write files, commit, then the job commits."""

from __future__ import annotations

import os
import secrets
import tempfile
import time

import anyio

from aiocommit.client.job import commit_job, setup_job
from aiocommit.client.task import abort_task, commit_task, setup_task
from aiocommit.errors import InvalidInput
from aiocommit.options import CommitOptions
from aiocommit.protocol.success import SuccessData
from aiocommit.stores.base import Store
from aiocommit.stores.local import LocalStore
from aiocommit.stores.registry import open_store


def _new_directory() -> str:
    """A new directory under the temporary directory, with the mode ``mkdir`` gives (not
    ``mkdtemp``'s 0700), so the demo's output is as readable as the umask says."""
    while True:
        path = os.path.join(tempfile.gettempdir(), f"aiocommit-demo-{secrets.token_hex(6)}")
        try:
            os.mkdir(path)
        except FileExistsError:  # pragma: no cover - 48 random bits collided
            continue
        return path


async def run_demo(
    dest: str | None = None, *, tasks: int = 8, files_per_task: int = 25, partitions: int = 4
) -> tuple[str, SuccessData, float]:
    """Run a job of ``tasks`` tasks (plus one failed attempt whose output must not
    land) into ``dest``: a store URL or a local path (relative to the working
    directory), a new temporary directory by default. Returns (dest as a URL, summary,
    seconds). ``InvalidInput`` for ``tasks`` or ``files_per_task`` below 1."""
    if tasks < 1 or files_per_task < 1:
        raise InvalidInput(
            f"a demo job needs at least one task and one file per task, not "
            f"tasks={tasks}, files_per_task={files_per_task}"
        )
    store: Store
    if dest is None:
        store, dest = LocalStore(), _new_directory()
    else:
        store, dest = open_store(dest)
    try:
        return await _run(store, dest, tasks, files_per_task, partitions)
    finally:
        await store.aclose()


async def _run(
    store: Store, dest: str, tasks: int, files_per_task: int, partitions: int
) -> tuple[str, SuccessData, float]:
    options = CommitOptions(validate_output=True)
    started = time.perf_counter()
    job_id = await setup_job(dest, store=store)

    async def run_task(task: int) -> None:
        if task == 0:  # a first attempt that fails after writing: its files must not land
            failed = await setup_task(dest, job_id, task, 0, store=store)
            await store.write_bytes(failed.path("part=0/from-failed-attempt.csv"), b"x\n")
            await abort_task(failed, store=store)
        attempt = await setup_task(dest, job_id, task, 1 if task == 0 else 0, store=store)
        for number in range(files_per_task):
            partition = number % partitions
            name = f"part={partition}/part-{task:05d}-{number:04d}.csv"
            await store.write_bytes(attempt.path(name), f"{task},{number}\n".encode())
        await commit_task(attempt, store=store, options=options)

    async with anyio.create_task_group() as group:
        for task in range(tasks):
            group.start_soon(run_task, task)
    summary = await commit_job(dest, job_id, store=store, options=options)
    shown = dest if isinstance(store, LocalStore) else store.qualify(dest)
    return shown, summary, time.perf_counter() - started
