"""Randomized concurrent jobs on one destination, checked against every serial order.

A scenario (seeded): a destination, with older output or not; 2-4 jobs, each writing a
few files into random partitions (names drawn from a small set, so jobs clash), each with
a conflict mode (append, fail, replace, replace per partition); the jobs' commits start
together with random delays, some jobs are aborted instead; then each failed job is run
again (its recorded mode) or aborted. With ``kills``, one job per scenario commits as the
real CLI in a subprocess, SIGKILLed after a random delay (before, during or after its
publish), then run again through the library: a short ``lease_seconds`` lets the others
take over a lease the killed job held. The destination must then equal what some serial
order of the jobs that succeeded leaves, each job's mode applied in that order; nothing
of a failed job is visible, nothing is left under ``_temporary``, no lease, no upload.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import random
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass, field

import anyio

from aiocommit import (
    AiocommitError,
    CommitOptions,
    NotFound,
    abort_job,
    commit_job,
    commit_task,
    setup_job,
)
from aiocommit.committers.common.lease import LEASE_NAME
from aiocommit.stores.base import Store, join
from aiocommit.stores.s3 import S3Store
from aiocommit_testing.s3_emulator import DUMMY_CREDENTIALS
from tests.helpers import exists, output, write_task

MODES = ("append", "fail", "replace", "replace_partitions")
Files = dict[str, bytes]


@dataclass
class PlannedJob:
    name: str
    mode: str
    files: Files
    abort_instead: bool
    delay: float
    rerun: bool
    job_id: str = ""
    succeeded: bool = False
    #: seconds after which its CLI commit is SIGKILLed; None: committed by the library
    kill_after: float | None = None
    killed: bool = False
    #: it was killed holding the destination's lease (in its publish)
    killed_holding_lease: bool = False


@dataclass
class Figures:
    """What a sweep of scenarios found."""

    scenarios: int = 0
    exact: int = 0
    jobs: int = 0
    succeeded: int = 0
    serial_orders_matched: int = 0
    killed: int = 0
    killed_holding_lease: int = 0
    killed_then_committed: int = 0
    failures: list[str] = field(default_factory=list)

    def line(self, store: str) -> str:
        kills = (
            f", CLI commits SIGKILLed {self.killed} ({self.killed_holding_lease} holding "
            f"the lease; re-run committed {self.killed_then_committed})"
            if self.killed
            else ""
        )
        return (
            f"concurrent jobs on {store}: {self.scenarios} scenarios, {self.exact} exact, "
            f"{self.jobs} jobs ({self.succeeded} committed), serial orders matched "
            f"{self.serial_orders_matched}{kills}"
        )


#: a killed CLI commit dies this many seconds after it started (its start-up takes most
#: of the first), so before, during or after its publish
KILL_AFTER = (0.2, 0.7)
#: files of its own (no other job writes these names) the killed job writes besides
KILLED_JOB_EXTRA_FILES = 40


def plan_scenario(
    rng: random.Random,
    *,
    reruns: bool = True,
    kills: bool = False,
    kill_after: tuple[float, float] = KILL_AFTER,
) -> tuple[Files, list[PlannedJob]]:
    """The older output (maybe none) and the jobs of one scenario (``kills``: one of
    them commits by the CLI, SIGKILLed after ``kill_after``)."""
    older: Files = {}
    if rng.random() < 0.5:
        for partition in rng.sample(range(4), rng.randint(1, 3)):
            older[f"p={partition}/part-{rng.randrange(3)}.dat"] = b"older"
    jobs = []
    for n in range(rng.randint(2, 4)):
        files: Files = {}
        for partition in rng.sample(range(4), rng.randint(1, 2)):
            for _ in range(rng.randint(1, 2)):
                files[f"p={partition}/part-{rng.randrange(3)}.dat"] = f"job {n}".encode()
        jobs.append(
            PlannedJob(
                name=f"job{n}",
                mode=rng.choice(MODES),
                files=files,
                abort_instead=rng.random() < 0.15,
                delay=rng.random() * 0.01,
                rerun=rng.random() < 0.5 and reruns,
            )
        )
    if kills:  # drawn last: the scenarios without kills stay as they were
        victim = rng.choice(jobs)
        victim.abort_instead = False
        victim.kill_after = kill_after[0] + rng.random() * (kill_after[1] - kill_after[0])
        own_partition = next(iter(victim.files)).split("/", 1)[0]
        for number in range(KILLED_JOB_EXTRA_FILES):  # a publish long enough to be hit
            victim.files[f"{own_partition}/{victim.name}-{number}.dat"] = victim.name.encode()
    return older, jobs


def options_of(mode: str, lease_seconds: float | None = None) -> CommitOptions:
    lease = CommitOptions().conflicts.lease_seconds if lease_seconds is None else lease_seconds
    if mode == "replace_partitions":
        return CommitOptions(conflict_mode="replace", replace_partitions=True, lease_seconds=lease)
    return CommitOptions(conflict_mode=mode, lease_seconds=lease)


def cli_target(store: Store, dest: str) -> tuple[str, dict[str, str]]:
    """The URL of ``dest`` for the CLI, and the environment that reaches ``store``."""
    env = dict(os.environ)
    env.pop("AIOCOMMIT_LOG_LEVEL", None)
    if isinstance(store, S3Store):
        env.update(DUMMY_CREDENTIALS)
        if store.endpoint_url:
            env["AWS_ENDPOINT_URL_S3"] = store.endpoint_url
        return f"s3://{store.bucket}{dest}", env
    url = store.qualify(dest)
    if not url.startswith("file:"):
        raise ValueError(f"no CLI URL for {url}")
    return dest, env


def cli_flags(mode: str) -> list[str]:
    if mode == "replace_partitions":
        return ["--conflict-mode", "replace", "--replace-partitions"]
    return ["--conflict-mode", mode]


async def _lease_holder(store: Store, dest: str) -> str | None:
    try:
        record = json.loads(await store.read_bytes(join(dest, LEASE_NAME)))
    except (NotFound, ValueError):
        return None
    holder = record.get("job_id") if isinstance(record, dict) else None
    return holder if isinstance(holder, str) else None


#: with ``in_publish``, how long a killed CLI commit may take to take the lease
PUBLISH_WAIT_SECONDS = 60.0


async def _commit_by_cli(
    store: Store, dest: str, job: PlannedJob, lease_seconds: float, in_publish: bool = False
) -> None:
    """``aiocommit commit`` in a subprocess, SIGKILLed at ``job.kill_after`` (with
    ``in_publish``: after it took the lease) unless it exited by then (0: committed;
    else refused)."""
    assert job.kill_after is not None
    url, env = cli_target(store, dest)
    argv = [sys.executable, "-m", "aiocommit", "commit", url, "--job-id", job.job_id]
    argv += ["--no-progress", "--lease-seconds", str(lease_seconds), *cli_flags(job.mode)]
    process = await anyio.open_process(
        argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        if in_publish:  # polling the store is the point: the kill lands in the publish
            with anyio.move_on_after(PUBLISH_WAIT_SECONDS):
                while process.returncode is None:
                    if await _lease_holder(store, dest) == job.job_id:
                        break
                    await anyio.sleep(0.005)
        with anyio.move_on_after(job.kill_after):
            await process.wait()
        if process.returncode is None:
            process.kill()
            job.killed = True
            await process.wait()
            job.killed_holding_lease = await _lease_holder(store, dest) == job.job_id
        else:
            job.succeeded = process.returncode == 0
    finally:
        await process.aclose()


def apply_serially(older: Files, jobs: list[PlannedJob]) -> Files | None:
    """The destination after ``jobs`` committed one after another in this order; None
    when one of them would have been refused in this order (an append refuses a name
    clash on every store)."""
    state = dict(older)
    for job in jobs:
        if job.mode == "append":
            if any(name in state for name in job.files):
                return None
        elif job.mode == "fail":
            if state:
                return None
        elif job.mode == "replace":
            state = {}
        else:
            partitions = {name.split("/", 1)[0] for name in job.files}
            state = {k: v for k, v in state.items() if k.split("/", 1)[0] not in partitions}
        state.update(job.files)
    return state


def serial_outcomes(older: Files, succeeded: list[PlannedJob]) -> list[Files]:
    found = []
    for order in itertools.permutations(succeeded):
        state = apply_serially(older, list(order))
        if state is not None:
            found.append(state)
    return found


async def _set_up(store: Store, dest: str, job: PlannedJob, setup: CommitOptions | None) -> None:
    job.job_id = await setup_job(dest, store=store, options=setup)
    attempt = await write_task(store, dest, job.job_id, 0, 0, job.files)
    await commit_task(attempt, store=store)


async def _settle(
    store: Store,
    dest: str,
    job: PlannedJob,
    lease_seconds: float | None = None,
    kill_in_publish: bool = False,
) -> None:
    """Commit the job (after its delay), or abort it instead."""
    await anyio.sleep(job.delay)
    if job.abort_instead:
        await abort_job(dest, job.job_id, store=store)
        return
    if job.kill_after is not None:
        await _commit_by_cli(store, dest, job, lease_seconds or 2.0, kill_in_publish)
        return
    options = options_of(job.mode, lease_seconds)
    try:
        await commit_job(dest, job.job_id, store=store, options=options)
        job.succeeded = True
    except AiocommitError:
        pass


async def _finish_failed(
    store: Store, dest: str, job: PlannedJob, lease_seconds: float | None = None
) -> None:
    """A failed commit: run again with no options (the recorded mode), else abort; a
    killed one is always run again. The other jobs have settled by now."""
    if job.rerun or job.killed:
        rerun = None if lease_seconds is None else CommitOptions(lease_seconds=lease_seconds)
        if job.killed:  # it may have died before recording its mode
            rerun = options_of(job.mode, lease_seconds)
        try:
            await commit_job(dest, job.job_id, store=store, options=rerun)
            job.succeeded = True
            return
        except AiocommitError:
            pass
    with contextlib.suppress(NotFound):  # a take-over aborted it, and it is gone
        await abort_job(dest, job.job_id, store=store)


def visible(files: Files) -> Files:
    """What a reader that skips ``_`` names sees."""
    return {k: v for k, v in files.items() if not k.split("/", 1)[0].startswith("_")}


async def run_scenario(
    store: Store,
    dest: str,
    rng: random.Random,
    *,
    setup: CommitOptions | None = None,
    leftovers: Callable[[Store, str], object] | None = None,
    reruns: bool = True,
    kills: bool = False,
    lease_seconds: float | None = None,
    kill_after: tuple[float, float] = KILL_AFTER,
    kill_in_publish: bool = False,
) -> tuple[bool, int, str, list[PlannedJob]]:
    """One scenario; (exact, serial orders matched, what differed, its jobs)."""
    older, jobs = plan_scenario(rng, reruns=reruns, kills=kills, kill_after=kill_after)
    if lease_seconds is None and kills:
        lease_seconds = KILL_LEASE_SECONDS
    if older:
        seed = PlannedJob("older", "append", older, False, 0.0, False)
        await _set_up(store, dest, seed, setup)
        await commit_job(dest, seed.job_id, store=store)
    for job in jobs:
        await _set_up(store, dest, job, setup)
    async with anyio.create_task_group() as group:
        for job in jobs:
            group.start_soon(_settle, store, dest, job, lease_seconds, kill_in_publish)
    for job in jobs:
        if not job.succeeded and not job.abort_instead:
            await _finish_failed(store, dest, job, lease_seconds)
    succeeded = [job for job in jobs if job.succeeded]
    expected = serial_outcomes(older, succeeded)
    found = visible(await output(store, dest))
    problems = []
    matched = sum(1 for state in expected if state == found)
    if not matched:
        problems.append(f"no serial order of {[(j.name, j.mode) for j in succeeded]} gives it")
    if await exists(store, join(dest, "_temporary")):
        problems.append("_temporary left")
    if await exists(store, join(dest, LEASE_NAME)):
        problems.append("lease left")
    if leftovers is not None:
        left = await leftovers(store, dest)  # type: ignore[misc]
        if left:
            problems.append(f"left: {left}")
    detail = "; ".join(problems)
    if problems:
        plan = [
            (j.name, j.mode, sorted(j.files), j.abort_instead, j.killed, j.succeeded) for j in jobs
        ]
        detail += f"; found {sorted(found)}; older {sorted(older)}; jobs {plan}"
    return not problems, matched, detail, jobs


#: the lease of the kill scenarios: a killed holder's lease expires this soon
KILL_LEASE_SECONDS = 2.0


async def sweep(
    store: Store,
    root: str,
    scenarios: int,
    *,
    seed: int = 33,
    setup: CommitOptions | None = None,
    leftovers: Callable[[Store, str], object] | None = None,
    reruns: bool = True,
    kills: bool = False,
    lease_seconds: float | None = None,
    kill_after: tuple[float, float] = KILL_AFTER,
    kill_in_publish: bool = False,
    parallel: int = 1,
) -> Figures:
    """Run ``scenarios`` scenarios, each in its own destination below ``root``
    (``reruns``: a failed job is run again or aborted; else always aborted; ``kills``: one
    job's CLI commit SIGKILLed per scenario ``kill_after`` seconds after it started, then
    run again; ``kill_in_publish``: ``kill_after`` counts from when it took the lease;
    ``lease_seconds``: of every commit, 2 s with ``kills``), ``parallel`` of
    them at a time (each has its own destination). The seed of scenario N is
    ``seed * 100_003 + N``."""
    figures = Figures()
    found: dict[int, str] = {}
    limiter = anyio.Semaphore(parallel)

    async def one(number: int) -> None:
        async with limiter:
            rng = random.Random(seed * 100_003 + number)
            exact, matched, detail, jobs = await run_scenario(
                store,
                join(root, f"s{number}"),
                rng,
                setup=setup,
                leftovers=leftovers,
                reruns=reruns,
                kills=kills,
                lease_seconds=lease_seconds,
                kill_after=kill_after,
                kill_in_publish=kill_in_publish,
            )
        figures.scenarios += 1
        figures.jobs += len(jobs)
        figures.succeeded += sum(job.succeeded for job in jobs)
        figures.killed += sum(job.killed for job in jobs)
        figures.killed_holding_lease += sum(job.killed_holding_lease for job in jobs)
        figures.killed_then_committed += sum(job.killed and job.succeeded for job in jobs)
        figures.exact += exact
        figures.serial_orders_matched += matched > 0
        if not exact:
            found[number] = f"scenario {number}: {detail}"

    async with anyio.create_task_group() as group:
        for number in range(scenarios):
            group.start_soon(one, number)
    figures.failures = [found[number] for number in sorted(found)]
    return figures
