"""Concurrent jobs on one destination: a killed S3 ``replace`` taken over by a neighbour
still leaves a serial order (issue 33). The randomized sweep that found it is
``aiocommit_stress.concurrent_sweep``: a sample in ``stress/tests/test_concurrent_sweep.py``,
the full counts by ``python -m aiocommit_stress sweep concurrent-jobs`` (``scripts/sweeps.sh``).
"""

from __future__ import annotations

import subprocess
import sys

import anyio
import pytest

from aiocommit import commit_job, commit_task, setup_job
from aiocommit.stores.base import Store, join
from aiocommit_stress.concurrent_sweep import cli_flags, cli_target, options_of, visible
from tests.helpers import exists, output, write_task
from tests.s3.helpers import outstanding
from tests.stores.s3_fixtures import s3_store_factory


@pytest.mark.slow
async def test_killed_s3_replace_taken_over_is_a_serial_order(s3_endpoint: str) -> None:
    """A ``replace_partitions`` CLI commit SIGKILLed just after its old file went (S3
    cannot restore it); a neighbour's append takes the expired lease over and finishes
    A's commit first; A's re-run reports it committed. The destination is A's files + B
    (the serial order A, B), whether the kill landed before A's commit point or after."""
    async with s3_store_factory(s3_endpoint) as (store, root):
        dest = join(root, "dest")
        old = await _committed_job(store, dest, {"p=0/old.dat": b"old"})
        assert old
        a = await _set_up_job(store, dest, {f"p=0/new-{i}.dat": b"a" for i in range(200)})
        b = await _set_up_job(store, dest, {"p=5/b.dat": b"b"})
        url, env = cli_target(store, dest)
        argv = [sys.executable, "-m", "aiocommit", "commit", url, "--job-id", a]
        argv += ["--no-progress", "--lease-seconds", "2", *cli_flags("replace_partitions")]
        process = await anyio.open_process(
            argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        try:  # polling the store is the point: kill A once its old file is gone
            while await exists(store, join(dest, "p=0/old.dat")):
                if process.returncode is not None:
                    break
                await anyio.sleep(0.005)
            exited = process.returncode is not None  # finished, cleanup and all: no kill
        finally:
            process.kill()
            await process.wait()
            await process.aclose()
        await commit_job(dest, b, store=store, options=options_of("append", 2.0))
        a_files = {f"p=0/new-{i}.dat" for i in range(200)}
        assert set(visible(await output(store, dest))) == a_files | {"p=5/b.dat"}
        if not exited:  # a re-run after the take-over finished A: committed
            rerun = await commit_job(
                dest, a, store=store, options=options_of("replace_partitions", 2.0)
            )
            assert rerun.job_id == a and rerun.success
        assert set(visible(await output(store, dest))) == a_files | {"p=5/b.dat"}
        assert await outstanding(store, dest) == []
        assert not await exists(store, join(dest, "_temporary"))


async def _set_up_job(store: Store, dest: str, files: dict[str, bytes]) -> str:
    job_id = await setup_job(dest, store=store)
    attempt = await write_task(store, dest, job_id, 0, 0, files)
    await commit_task(attempt, store=store)
    return job_id


async def _committed_job(store: Store, dest: str, files: dict[str, bytes]) -> str:
    job_id = await _set_up_job(store, dest, files)
    await commit_job(dest, job_id, store=store)
    return job_id
