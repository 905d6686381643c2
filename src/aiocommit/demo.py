"""A demo job on the local store: tasks write files, commit, then the job commits."""

from __future__ import annotations

import os
import secrets
import tempfile
import time

import anyio

from aiocommit.client.job import commit_job, setup_job
from aiocommit.client.task import abort_task, commit_task, setup_task
from aiocommit.options import CommitOptions
from aiocommit.protocol.success import SuccessData
from aiocommit.stores.local import LocalStore


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
    land) into ``dest`` (a new temporary directory by default). Returns (dest, summary,
    seconds)."""
    dest = dest or _new_directory()
    store = LocalStore()
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
    return dest, summary, time.perf_counter() - started
