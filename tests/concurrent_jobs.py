"""Randomized concurrent jobs on one destination, checked against every serial order.

A scenario (seeded): a destination, with older output or not; 2-4 jobs, each writing a
few files into random partitions (names drawn from a small set, so jobs clash), each with
a conflict mode (append, fail, replace, replace per partition); the jobs' commits start
together with random delays, some jobs are aborted instead; then each failed job is run
again (its recorded mode) or aborted. The destination must then equal what some serial
order of the jobs that succeeded leaves, each job's mode applied in that order; nothing
of a failed job is visible, nothing is left under ``_temporary``, no lease, no upload.
"""

from __future__ import annotations

import contextlib
import itertools
import random
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


@dataclass
class Figures:
    """What a sweep of scenarios found."""

    scenarios: int = 0
    exact: int = 0
    jobs: int = 0
    succeeded: int = 0
    serial_orders_matched: int = 0
    failures: list[str] = field(default_factory=list)

    def line(self, store: str) -> str:
        return (
            f"concurrent jobs on {store}: {self.scenarios} scenarios, {self.exact} exact, "
            f"{self.jobs} jobs ({self.succeeded} committed), serial orders matched "
            f"{self.serial_orders_matched}"
        )


def plan_scenario(rng: random.Random, *, reruns: bool = True) -> tuple[Files, list[PlannedJob]]:
    """The older output (maybe none) and the jobs of one scenario."""
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
    return older, jobs


def options_of(mode: str) -> CommitOptions:
    if mode == "replace_partitions":
        return CommitOptions(conflict_mode="replace", replace_partitions=True)
    return CommitOptions(conflict_mode=mode)


def apply_serially(
    older: Files, jobs: list[PlannedJob], *, append_overwrites: bool = False
) -> Files | None:
    """The destination after ``jobs`` committed one after another in this order; None
    when one of them would have been refused in this order. ``append_overwrites``: an
    append overwrites a same-named file (Hadoop S3A's staging default) instead of being
    refused."""
    state = dict(older)
    for job in jobs:
        if job.mode == "append":
            if not append_overwrites and any(name in state for name in job.files):
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


def serial_outcomes(
    older: Files, succeeded: list[PlannedJob], *, append_overwrites: bool = False
) -> list[Files]:
    found = []
    for order in itertools.permutations(succeeded):
        state = apply_serially(older, list(order), append_overwrites=append_overwrites)
        if state is not None:
            found.append(state)
    return found


async def _set_up(store: Store, dest: str, job: PlannedJob, setup: CommitOptions | None) -> None:
    job.job_id = await setup_job(dest, store=store, options=setup)
    attempt = await write_task(store, dest, job.job_id, 0, 0, job.files)
    await commit_task(attempt, store=store)


async def _settle(store: Store, dest: str, job: PlannedJob) -> None:
    """Commit the job (after its delay), or abort it instead."""
    await anyio.sleep(job.delay)
    if job.abort_instead:
        await abort_job(dest, job.job_id, store=store)
        return
    try:
        await commit_job(dest, job.job_id, store=store, options=options_of(job.mode))
        job.succeeded = True
    except AiocommitError:
        pass


async def _finish_failed(store: Store, dest: str, job: PlannedJob) -> None:
    """A failed commit: run again with no options (the recorded mode), else abort. The
    other jobs have settled by now."""
    if job.rerun:
        try:
            await commit_job(dest, job.job_id, store=store)
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
    append_overwrites: bool = False,
) -> tuple[bool, int, str, int, int]:
    """One scenario; (exact, serial orders matched, what differed, jobs, committed)."""
    older, jobs = plan_scenario(rng, reruns=reruns)
    if older:
        seed = PlannedJob("older", "append", older, False, 0.0, False)
        await _set_up(store, dest, seed, setup)
        await commit_job(dest, seed.job_id, store=store)
    for job in jobs:
        await _set_up(store, dest, job, setup)
    async with anyio.create_task_group() as group:
        for job in jobs:
            group.start_soon(_settle, store, dest, job)
    for job in jobs:
        if not job.succeeded and not job.abort_instead:
            await _finish_failed(store, dest, job)
    succeeded = [job for job in jobs if job.succeeded]
    expected = serial_outcomes(older, succeeded, append_overwrites=append_overwrites)
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
        plan = [(j.name, j.mode, sorted(j.files), j.abort_instead, j.succeeded) for j in jobs]
        detail += f"; found {sorted(found)}; older {sorted(older)}; jobs {plan}"
    return not problems, matched, detail, len(jobs), len(succeeded)


async def sweep(
    store: Store,
    root: str,
    scenarios: int,
    *,
    seed: int = 33,
    setup: CommitOptions | None = None,
    leftovers: Callable[[Store, str], object] | None = None,
    reruns: bool = True,
    append_overwrites: bool = False,
) -> Figures:
    """Run ``scenarios`` scenarios, each in its own destination below ``root``
    (``reruns``: a failed job is run again or aborted; else always aborted)."""
    figures = Figures()
    for number in range(scenarios):
        rng = random.Random(seed * 100_003 + number)
        exact, matched, detail, jobs, succeeded = await run_scenario(
            store,
            join(root, f"s{number}"),
            rng,
            setup=setup,
            leftovers=leftovers,
            reruns=reruns,
            append_overwrites=append_overwrites,
        )
        figures.scenarios += 1
        figures.jobs += jobs
        figures.succeeded += succeeded
        figures.exact += exact
        figures.serial_orders_matched += matched > 0
        if not exact:
            figures.failures.append(f"scenario {number}: {detail}")
    return figures
