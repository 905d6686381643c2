"""Randomized concurrent jobs on one destination, checked against every serial order.

A scenario (seeded): a destination, with older output or not; 2-4 jobs, each writing a
few files into random partitions (names drawn from a small set, so jobs clash), each with
a conflict mode (append, fail, replace, replace per partition); the jobs' commits start
together with random delays, some jobs are aborted instead; then each failed job is run
again (its recorded mode) or aborted. With ``kills``, one job per scenario commits as the
real CLI in a subprocess, SIGKILLed after a random delay (before, during or after its
publish) or, in half the scenarios, once it holds the destination's lease or has a random
number of its files in place (in its publish), then run again through the library: a
short ``lease_seconds`` lets the others take over a lease the killed job held. The
destination must then equal what some serial order of the jobs that succeeded leaves,
each job's mode applied in that order; nothing of a failed job is visible, nothing is
left under ``_temporary``, no lease, no upload. A job killed after it let go of the lease
whose re-run finds no job (``JobNotFound``) counts either way: a take-over aborted it, or
it had committed and cleaned up before the kill landed and a later job's ``_SUCCESS``
replaced its own, so nothing at the destination says it committed (its output must then
be whole). Killed holding the lease, only a take-over can have settled it: finished (its
re-run then succeeds) or aborted (it failed).

``python -m aiocommit_stress sweep concurrent-jobs`` runs the full counts on each store
(``scripts/sweeps.sh``); the test tiers run a sample (``stress/tests/test_concurrent_sweep.py``).
The killed CLI reaches the store as a user's would: its URL and the environment variables
the store's docs name (``cli_target``).
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import random
import subprocess
import sys
import tempfile
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import TypeVar

import anyio
import anyio.abc

from aiocommit import (
    AiocommitError,
    CommitOptions,
    NotFound,
    TaskAttempt,
    abort_job,
    commit_job,
    commit_task,
    setup_job,
    setup_task,
)
from aiocommit.committers.common.lease import LEASE_NAME
from aiocommit.errors import InvalidInput, JobNotFound, StoreError
from aiocommit.stores.base import Store, join
from aiocommit.stores.multipart import as_multipart, supports_multipart
from aiocommit_testing.s3_emulator import DUMMY_CREDENTIALS

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
    #: instead, SIGKILLed once it holds the lease (0) or this many of its own files are
    #: in place (its publish reached), watched on the store
    kill_at_files: int | None = None
    killed: bool = False
    #: killed not holding the lease, and its re-run found no job: aborted by a take-over,
    #: or committed and cleaned up before the kill landed (a later job's ``_SUCCESS``
    #: replaced its own)
    vanished: bool = False
    #: it was killed holding the destination's lease (in its publish)
    killed_holding_lease: bool = False
    #: it was killed with some of its own files in place (its publish had begun)
    killed_in_publish: bool = False


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
    killed_in_publish: int = 0
    killed_then_committed: int = 0
    failures: list[str] = field(default_factory=list)

    def line(self, store: str) -> str:
        kills = (
            f", CLI commits SIGKILLed {self.killed} ({self.killed_holding_lease} holding "
            f"the lease, {self.killed_in_publish} with some of its files in place; re-run "
            f"committed {self.killed_then_committed})"
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
    them commits by the CLI, SIGKILLed after ``kill_after`` or at ``kill_at_files``)."""
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
        if rng.random() < 0.5:  # in its publish, whatever the machine's speed
            victim.kill_at_files = rng.randrange(KILLED_JOB_EXTRA_FILES)
    return older, jobs


def options_of(mode: str, lease_seconds: float | None = None) -> CommitOptions:
    lease = CommitOptions().conflicts.lease_seconds if lease_seconds is None else lease_seconds
    if mode == "replace_partitions":
        return CommitOptions(conflict_mode="replace", replace_partitions=True, lease_seconds=lease)
    return CommitOptions(conflict_mode=mode, lease_seconds=lease)


#: the environment variables of each store's docs (docs/stores/*.md) a CLI run gets
#: from ``cli_target`` alone, not from the sweep's own environment
STORE_VARIABLES = (
    "AWS_ENDPOINT_URL",
    "AWS_ENDPOINT_URL_S3",
    "AIOCOMMIT_ADLS_ENDPOINT",
    "AZURE_STORAGE_CONNECTION_STRING",
    "AZURE_STORAGE_ACCOUNT_KEY",
    "AZURE_STORAGE_SAS_TOKEN",
    "STORAGE_EMULATOR_HOST",
)


def cli_target(store: Store, dest: str) -> tuple[str, dict[str, str]]:
    """The URL of ``dest`` for the ``aiocommit`` CLI, and the environment that reaches
    ``store`` as a user points it at a private endpoint: S3 ``AWS_ENDPOINT_URL_S3`` and
    credentials; ADLS ``AIOCOMMIT_ADLS_ENDPOINT`` and ``AZURE_STORAGE_ACCOUNT_KEY``; GCS
    ``STORAGE_EMULATOR_HOST``. ``InvalidInput`` for a store the CLI cannot reach (memory)."""
    from aiocommit.stores.adls import AdlsStore
    from aiocommit.stores.gcs import GcsStore
    from aiocommit.stores.s3 import S3Store

    env = {k: v for k, v in os.environ.items() if k not in STORE_VARIABLES}
    env.pop("AIOCOMMIT_LOG_LEVEL", None)
    url = store.qualify(dest)
    if isinstance(store, S3Store):
        env.update(DUMMY_CREDENTIALS)
        if store.endpoint_url:
            env["AWS_ENDPOINT_URL_S3"] = store.endpoint_url
        return url, env
    if isinstance(store, AdlsStore):
        opener = store.opener()
        keywords = getattr(opener, "keywords", {})
        if keywords.get("account_key") is None:
            raise InvalidInput(f"no account key to give the CLI for {url}")
        env["AZURE_STORAGE_ACCOUNT_KEY"] = keywords["account_key"]
        if keywords.get("endpoint"):
            env["AIOCOMMIT_ADLS_ENDPOINT"] = keywords["endpoint"]
        return url, env
    if isinstance(store, GcsStore):
        if store.api_root:
            env["STORAGE_EMULATOR_HOST"] = store.api_root
        return url, env
    if not url.startswith("file:"):
        raise InvalidInput(f"the CLI cannot reach {url} from another process")
    return dest, env


def cli_flags(mode: str) -> list[str]:
    if mode == "replace_partitions":
        return ["--conflict-mode", "replace", "--replace-partitions"]
    return ["--conflict-mode", mode]


async def _lease_holder(store: Store, dest: str) -> str | None:
    """The job holding ``dest``'s lease; None when none does, or a read of the raw store
    (no retries) failed in passing."""
    try:
        record = json.loads(await store.read_bytes(join(dest, LEASE_NAME)))
    except (NotFound, ValueError):
        return None
    except StoreError as error:
        if not error.retryable:
            raise
        return None
    holder = record.get("job_id") if isinstance(record, dict) else None
    return holder if isinstance(holder, str) else None


async def _own_files_in_place(store: Store, dest: str, job: PlannedJob) -> int:
    """How many of the killed job's own files (no other job writes their names) are in
    place at the destination; 0 when a listing of the raw store (no retries) failed in
    passing."""
    partition = next(name for name in job.files if f"/{job.name}-" in name).split("/", 1)[0]
    count = 0
    try:
        async for page in store.list_dir(join(dest, partition)):
            count += sum(f"/{job.name}-" in status.path for status in page)
    except NotFound:
        return 0
    except StoreError as error:
        if not error.retryable:
            raise
        return 0
    return count


#: a CLI commit watched for its publish is SIGKILLed after this long in any case
KILL_WAIT_LIMIT = 20.0


async def _kill_point(store: Store, dest: str, job: PlannedJob, process: anyio.abc.Process) -> None:
    """Return when ``job``'s CLI commit should die: after ``kill_after`` seconds, or with
    ``kill_at_files`` once it holds the lease (0) or has that many files in place."""
    assert job.kill_after is not None
    if job.kill_at_files is None:
        await anyio.sleep(job.kill_after)
        return
    with anyio.move_on_after(KILL_WAIT_LIMIT):
        while process.returncode is None:
            if job.kill_at_files == 0:
                if await _lease_holder(store, dest) == job.job_id:
                    return
            elif await _own_files_in_place(store, dest, job) >= job.kill_at_files:
                return
            await anyio.sleep(0.005)


async def _commit_by_cli(store: Store, dest: str, job: PlannedJob, lease_seconds: float) -> None:
    """``aiocommit commit`` in a subprocess, SIGKILLed at its kill point (``_kill_point``)
    unless it exited by then (0: committed; else refused)."""
    url, env = cli_target(store, dest)
    argv = [sys.executable, "-m", "aiocommit", "commit", url, "--job-id", job.job_id]
    argv += ["--no-progress", "--lease-seconds", str(lease_seconds), *cli_flags(job.mode)]
    process = await anyio.open_process(
        argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        async with anyio.create_task_group() as group:

            async def exited() -> None:
                await process.wait()
                group.cancel_scope.cancel()

            group.start_soon(exited)
            await _kill_point(store, dest, job, process)
            group.cancel_scope.cancel()
        if process.returncode is None:
            process.kill()
            job.killed = True
            await process.wait()
            job.killed_holding_lease = await _lease_holder(store, dest) == job.job_id
            in_place = await _own_files_in_place(store, dest, job)
            job.killed_in_publish = in_place > 0
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


def serial_outcomes(
    older: Files, succeeded: Sequence[PlannedJob], either: Sequence[PlannedJob] = ()
) -> list[Files]:
    """The destination after each serial order of ``succeeded`` (one that refuses none of
    them), and of ``succeeded`` with any of ``either`` (jobs that may have committed)."""
    found = []
    for count in range(len(either) + 1):
        for extra in itertools.combinations(either, count):
            for order in itertools.permutations([*succeeded, *extra]):
                state = apply_serially(older, list(order))
                if state is not None and state not in found:
                    found.append(state)
    return found


async def write_task(
    store: Store, dest: str, job_id: str, task: int, attempt: int, files: Files
) -> TaskAttempt:
    """Set up a task attempt and write ``files`` through it (not committed)."""
    task_attempt = await setup_task(dest, job_id, task, attempt, store=store)
    for relative, data in files.items():
        await task_attempt.write_bytes(relative, data, store=store)
    return task_attempt


T = TypeVar("T")

#: attempts of a check of the raw store (no retries of its own) that fails in passing
CHECK_ATTEMPTS = 5


async def steady(check: Callable[[], Awaitable[T]]) -> T:
    """``check()``, again after a retryable store error (an emulator's passing 500): a
    check of the destination must not fail a scenario the jobs did not."""
    for attempt in range(1, CHECK_ATTEMPTS + 1):
        try:
            return await check()
        except StoreError as error:
            if not error.retryable or attempt == CHECK_ATTEMPTS:
                raise
            await anyio.sleep(0.1 * attempt)
    raise AssertionError("unreachable")


async def exists(store: Store, path: str) -> bool:
    async def check() -> bool:
        try:
            await store.stat(path)
        except FileNotFoundError:
            return False
        return True

    return await steady(check)


async def output(store: Store, dest: str) -> Files:
    """Every file under ``dest`` (relative path → bytes) but ``_SUCCESS`` and ``_temporary``."""

    async def walk() -> Files:
        found: Files = {}
        pending = [dest]
        while pending:
            directory = pending.pop()
            try:
                async for page in store.list_dir(directory):
                    for status in page:
                        if status.is_dir:
                            pending.append(status.path)
                            continue
                        relative = status.path[len(dest.rstrip("/")) + 1 :]
                        if relative != "_SUCCESS" and not relative.startswith("_temporary/"):
                            found[relative] = await store.read_bytes(status.path)
            except FileNotFoundError:
                continue
        return found

    return await steady(walk)


async def outstanding_uploads(store: Store, dest: str) -> list[str]:
    """Paths of the outstanding multipart uploads under ``dest`` (none without uploads)."""
    if not supports_multipart(store):
        return []
    multipart = as_multipart(store)

    async def listing() -> list[str]:
        return [u.path async for page in multipart.list_uploads(join(dest, "")) for u in page]

    return await steady(listing)


async def _set_up(store: Store, dest: str, job: PlannedJob, setup: CommitOptions | None) -> None:
    job.job_id = await setup_job(dest, store=store, options=setup)
    attempt = await write_task(store, dest, job.job_id, 0, 0, job.files)
    await commit_task(attempt, store=store)


async def _settle(
    store: Store, dest: str, job: PlannedJob, lease_seconds: float | None = None
) -> None:
    """Commit the job (after its delay), or abort it instead."""
    await anyio.sleep(job.delay)
    if job.abort_instead:
        await abort_job(dest, job.job_id, store=store)
        return
    if job.kill_after is not None:
        await _commit_by_cli(store, dest, job, lease_seconds or 2.0)
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
        except JobNotFound:
            job.vanished = job.killed and not job.killed_holding_lease
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
    reruns: bool = True,
    kills: bool = False,
    lease_seconds: float | None = None,
    kill_after: tuple[float, float] = KILL_AFTER,
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
            group.start_soon(_settle, store, dest, job, lease_seconds)
    for job in jobs:
        if not job.succeeded and not job.abort_instead:
            await _finish_failed(store, dest, job, lease_seconds)
    succeeded = [job for job in jobs if job.succeeded]
    vanished = [job for job in jobs if job.vanished]
    expected = serial_outcomes(older, succeeded, vanished)
    found = visible(await output(store, dest))
    problems = []
    matched = sum(1 for state in expected if state == found)
    if not matched:
        either = f" (with or without {[j.name for j in vanished]})" if vanished else ""
        problems.append(
            f"no serial order of {[(j.name, j.mode) for j in succeeded]}{either} gives it"
        )
    if await exists(store, join(dest, "_temporary")):
        problems.append("_temporary left")
    if await exists(store, join(dest, LEASE_NAME)):
        problems.append("lease left")
    uploads = await outstanding_uploads(store, dest)
    if uploads:
        problems.append(f"uploads left: {uploads}")
    detail = "; ".join(problems)
    if problems:
        plan = [
            (j.name, j.mode, sorted(j.files), j.abort_instead, j.killed, j.succeeded, j.vanished)
            for j in jobs
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
    reruns: bool = True,
    kills: bool = False,
    lease_seconds: float | None = None,
    kill_after: tuple[float, float] = KILL_AFTER,
    parallel: int = 1,
) -> Figures:
    """Run ``scenarios`` scenarios, each in its own destination below ``root``
    (``reruns``: a failed job is run again or aborted; else always aborted; ``kills``: one
    job's CLI commit SIGKILLed per scenario ``kill_after`` seconds after it started, then
    run again; ``lease_seconds``: of every commit, 2 s with ``kills``), ``parallel`` of
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
                reruns=reruns,
                kills=kills,
                lease_seconds=lease_seconds,
                kill_after=kill_after,
            )
        figures.scenarios += 1
        figures.jobs += len(jobs)
        figures.succeeded += sum(job.succeeded for job in jobs)
        figures.killed += sum(job.killed for job in jobs)
        figures.killed_holding_lease += sum(job.killed_holding_lease for job in jobs)
        figures.killed_in_publish += sum(job.killed_in_publish for job in jobs)
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


# -- the harness command: ``python -m aiocommit_stress sweep concurrent-jobs`` ---------

#: the stores a sweep runs on; ``memory`` has no kill variant (no other process reaches it)
SWEEP_STORES = ("memory", "local", "s3", "adls", "gcs")
#: a killed CLI commit's delay per store: on the emulators its commit takes longer
KILL_AFTER_OF = {"local": KILL_AFTER, "s3": (0.2, 1.0), "adls": (0.4, 2.0), "gcs": (0.4, 2.0)}
#: scenarios at a time without kills (each in its own destination): the emulators'
#: request latency overlaps; a kill's timing stays the machine's own
PARALLEL_OF = {"memory": 1, "local": 1, "s3": 4, "adls": 4, "gcs": 4}


@contextlib.asynccontextmanager
async def sweep_store(kind: str) -> AsyncIterator[tuple[Store, str]]:
    """(store, empty root) on ``kind`` for the block: memory, a temporary local
    directory, or a fresh bucket / filesystem on an emulator started for the block (GCS
    behind the proxy that enforces the generation preconditions fake-gcs-server ignores)."""
    async with contextlib.AsyncExitStack() as stack:
        store: Store
        if kind == "memory":
            from aiocommit.stores.memory import MemoryStore

            store = MemoryStore(f"sweep-{os.getpid()}", page_size=7)
            root = "/sweep"
        elif kind == "local":
            from aiocommit.stores.local import LocalStore

            store = LocalStore(page_size=7)
            root = stack.enter_context(tempfile.TemporaryDirectory(prefix="aiocommit-sweep-"))
        elif kind == "s3":
            from aiocommit.stores.s3 import S3Store
            from aiocommit_testing.s3_emulator import create_bucket, run_moto_server

            moto = await stack.enter_async_context(run_moto_server())
            bucket = f"aiocommit-sweep-{os.getpid()}"
            await create_bucket(moto.endpoint, bucket)
            store = S3Store(bucket, endpoint_url=moto.endpoint, page_size=7)
            root = "/sweep"
        elif kind == "adls":
            from aiocommit.stores.adls import AdlsStore
            from aiocommit_testing.adls_emulator import run_adls_emulator

            emulator = await stack.enter_async_context(run_adls_emulator())
            emulator.create_filesystem("sweep")
            store = AdlsStore(
                emulator.account,
                "sweep",
                endpoint=emulator.endpoint,
                account_key=emulator.key,
                page_size=7,
            )
            root = "/sweep"
        elif kind == "gcs":
            from aiocommit.stores.gcs import GcsStore
            from aiocommit_testing.gcs_emulator import (
                create_bucket as create_gcs_bucket,
            )
            from aiocommit_testing.gcs_emulator import (
                precondition_proxy,
                run_fake_gcs_server,
            )

            server = await stack.enter_async_context(run_fake_gcs_server())
            bucket = f"aiocommit-sweep-{os.getpid()}"
            await create_gcs_bucket(server.endpoint, bucket)
            endpoint = await stack.enter_async_context(precondition_proxy(server.endpoint))
            store = GcsStore(bucket, api_root=endpoint, page_size=7)
            root = "/sweep"
        else:
            raise InvalidInput(f"no sweep store {kind!r}: one of {', '.join(SWEEP_STORES)}")
        stack.push_async_callback(store.aclose)
        await store.mkdirs(root)
        yield store, root


@dataclass
class VariantFigures:
    """One variant's sweep on one store."""

    store: str
    variant: str
    seed: int
    figures: Figures

    @property
    def exact(self) -> bool:
        return self.figures.exact == self.figures.scenarios and not self.figures.failures

    def line(self) -> str:
        return f"{self.figures.line(f'{self.store} ({self.variant}, seed {self.seed})')}"


async def sweep_variants(
    kind: str,
    scenarios: int,
    kills: int,
    *,
    seed: int = 3300,
    parallel: int | None = None,
    variants: tuple[str, ...] = ("aborted", "rerun", "kills"),
    on_variant: Callable[[VariantFigures], None] | None = None,
) -> list[VariantFigures]:
    """On one store: ``scenarios`` scenarios with failed jobs aborted, ``scenarios`` with
    them run again (seed ``seed``), and ``kills`` with a SIGKILLed CLI commit (seed
    ``seed + 1``; none on memory), those of ``variants``; ``on_variant`` gets each
    variant's figures as it ends."""
    found: list[VariantFigures] = []

    def ended(variant: VariantFigures) -> None:
        found.append(variant)
        if on_variant is not None:
            on_variant(variant)

    async with sweep_store(kind) as (store, root):
        for variant in variants:
            if variant == "kills":
                if not kills or kind == "memory":
                    continue
                figures = await sweep(
                    store,
                    join(root, "kills"),
                    kills,
                    seed=seed + 1,
                    kills=True,
                    kill_after=KILL_AFTER_OF[kind],
                    parallel=parallel or 1,
                )
                ended(VariantFigures(kind, "CLI SIGKILLed", seed + 1, figures))
                continue
            if not scenarios:
                continue
            reruns = variant == "rerun"
            figures = await sweep(
                store,
                join(root, variant),
                scenarios,
                seed=seed,
                reruns=reruns,
                parallel=parallel or PARALLEL_OF[kind],
            )
            label = "failures re-run" if reruns else "failures aborted"
            ended(VariantFigures(kind, label, seed, figures))
    return found
