"""``bench concurrent-jobs``: jobs into disjoint partitions of one local destination,
committed together against the same jobs committed one after another, in one run.

Only the publish step of a job commit (resolve conflicts, renames, ``_SUCCESS``) is
serialised per destination by its lease; loading and checking the manifests overlap, so
committing together should take no longer than one after another (ratio <= 1).

``drivers``: where the commits run. ``processes``: each job's ``commit_job`` in a process
of its own (a driver per job, as separate pipelines or Spark applications commit), both
ways; ``loop``: every commit in this process's one event loop (an async service), where
the CPU-bound part of the commits shares one core whichever way they run.
"""

from __future__ import annotations

import functools
import os
import shutil
import sys
import tempfile
import time
from typing import Any

import anyio
import anyio.to_thread

from aiocommit import commit_job, commit_task, setup_job, setup_task
from aiocommit.committers.common.lease import LEASE_NAME
from aiocommit.stores.local import LocalStore
from aiocommit_stress.report import Reporter
from aiocommit_stress.scenarios import verdict


def _write_files(directory: str, job: int, task: int, count: int) -> list[tuple[str, int]]:
    """``count`` small files of one task in its partition ``job=J/task=T/``."""
    relative_dir = f"job={job}/task={task:03d}"
    os.makedirs(os.path.join(directory, relative_dir), exist_ok=True)
    written = []
    for n in range(count):
        relative = f"{relative_dir}/part-{n:05d}.dat"
        data = b"job %d task %d file %d\n" % (job, task, n)
        with open(os.path.join(directory, relative), "wb") as file:
            file.write(data)
        written.append((relative, len(data)))
    return written


async def _prepare(store: LocalStore, dest: str, job: int, files: int, tasks: int) -> str:
    """A set-up job whose ``tasks`` committed tasks wrote ``files`` files in all."""
    job_id = await setup_job(dest, store=store)
    for task in range(tasks):
        attempt = await setup_task(dest, job_id, task, 0, store=store)
        count = files // tasks + (1 if task < files % tasks else 0)
        written = await anyio.to_thread.run_sync(_write_files, attempt.work_dir, job, task, count)
        await commit_task(attempt, store=store, written=written)
    return job_id


#: one job's commit, in a process of its own
DRIVER = (
    "import asyncio, sys\n"
    "from aiocommit import commit_job\n"
    "asyncio.run(commit_job(sys.argv[1], sys.argv[2]))\n"
)


async def _drive(dest: str, job_id: str) -> None:
    await anyio.run_process([sys.executable, "-c", DRIVER, dest, job_id], check=True)


def _count_files(dest: str) -> tuple[int, bool]:
    """(files a reader sees, whether anything of the commit protocol is left)."""
    seen = 0
    for directory, subdirectories, names in os.walk(dest):
        if directory == dest:
            subdirectories[:] = [d for d in subdirectories if not d.startswith("_")]
            names = [n for n in names if not n.startswith("_")]
        seen += len(names)
    left = any(os.path.exists(os.path.join(dest, name)) for name in ("_temporary", LEASE_NAME))
    return seen, left


async def concurrent_jobs_bench(
    jobs: int,
    files: int,
    tasks: int,
    workdir: str | None,
    reporter: Reporter,
    drivers: str = "processes",
) -> dict[str, Any]:
    """Commit ``jobs`` jobs of ``files`` files each one after another into one local
    destination, then the same into another destination all at once; the wall times and
    their ratio (together / one after another)."""
    root = tempfile.mkdtemp(prefix="aiocommit-concurrent-jobs-", dir=workdir)
    store = LocalStore()
    try:
        serial_dest = os.path.join(root, "serial")
        together_dest = os.path.join(root, "together")
        reporter.log(f"preparing {jobs} jobs x {files:,} files twice under {root}")
        serial_jobs = [await _prepare(store, serial_dest, j, files, tasks) for j in range(jobs)]
        together_jobs = [await _prepare(store, together_dest, j, files, tasks) for j in range(jobs)]

        in_loop = functools.partial(commit_job, store=store)
        commit = _drive if drivers == "processes" else in_loop
        started = time.monotonic()
        for job_id in serial_jobs:
            await commit(serial_dest, job_id)
        serial = time.monotonic() - started

        started = time.monotonic()
        async with anyio.create_task_group() as group:
            for job_id in together_jobs:
                group.start_soon(commit, together_dest, job_id)
        together = time.monotonic() - started

        counts = [
            await anyio.to_thread.run_sync(_count_files, d) for d in (serial_dest, together_dest)
        ]
        ok = all(seen == jobs * files and not left for seen, left in counts)
    finally:
        await anyio.to_thread.run_sync(lambda: shutil.rmtree(root, ignore_errors=True))
        await store.aclose()
    ratio = together / serial
    load = os.getloadavg()
    reporter.figure(
        f"concurrent-jobs ({drivers}): {jobs} jobs x {files:,} files into disjoint "
        f"partitions of one local destination: together {together:.2f} s, "
        f"one after another {serial:.2f} s, "
        f"ratio {ratio:.2f} (target <= 1); load average {load[0]:.2f}; "
        f"verification {verdict(ok)}"
    )
    return {
        "benchmark": "concurrent-jobs",
        "drivers": drivers,
        "jobs": jobs,
        "files_per_job": files,
        "tasks_per_job": tasks,
        "together_seconds": round(together, 3),
        "serial_seconds": round(serial, 3),
        "ratio": round(ratio, 3),
        "load_average": load,
        "ok": ok,
    }
