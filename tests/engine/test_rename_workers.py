"""The rename stage over worker processes: same output as in one event loop, one clear
error for the first failure anywhere, and a SIGKILL of a worker or of the parent leaves a
job that a re-run finishes or ``abort_job`` undoes."""

from __future__ import annotations

import functools
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import anyio
import psutil
import pytest

from aiocommit import (
    CommitError,
    CommitOptions,
    OutputConflict,
    abort_job,
    commit_job,
    commit_task,
)
from aiocommit.committers.common.context import Progress
from aiocommit.committers.common.session import open_context
from aiocommit.committers.manifest import rename_workers
from aiocommit.protocol import statistics as S
from aiocommit.stores.base import join
from aiocommit.stores.faulty import Faults, FaultyStore, Latency
from aiocommit.stores.local import LocalStore
from aiocommit.stores.memory import MemoryStore
from tests.helpers import exists, output, run_tasks, task_files, visible_paths, write_task

TWO = CommitOptions(processes=2, concurrency=16)


@pytest.fixture(autouse=True)
def small_jobs_use_workers(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(rename_workers, "MIN_FILES_PER_PROCESS", 4)


@pytest.fixture
def local(tmp_path: Path) -> tuple[LocalStore, str]:
    root = tmp_path / "store"
    root.mkdir()
    return LocalStore(), str(root)


@pytest.fixture
def only_workers_rename(monkeypatch: pytest.MonkeyPatch) -> None:
    """Faults aimed at the workers must not reach this (the test's) process."""
    monkeypatch.setattr(rename_workers, "PARENT_RENAMES", False)


def kill_self_on_rename_of_task_2(operation: str, path: str) -> bool:
    """A fault that SIGKILLs the worker renaming task 2's third file (picklable)."""
    if operation == "rename" and path.endswith("part-00002-0003.dat"):
        os.kill(os.getpid(), signal.SIGKILL)
    return False


@pytest.mark.parametrize("parent_renames", [True, False])
async def test_workers_commit_the_same_output_and_merge_statistics(
    local: tuple[LocalStore, str], parent_renames: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(rename_workers, "PARENT_RENAMES", parent_renames)
    store, root = local
    dest = join(root, "out")
    job_id, expected = await run_tasks(store, dest, tasks=6, files_per_task=5)
    reports: list[Progress] = []
    summary = await commit_job(dest, job_id, store=store, options=TWO, progress=reports.append)
    assert summary.success
    assert await output(store, dest) == expected
    stats = summary.iostatistics
    assert stats.gauges["job_rename_processes"] == 2
    assert stats.counters[S.COMMITTER_FILES_COMMITTED] == 30
    assert stats.counters[S.OP_RENAME] >= 30  # the workers' renames, merged
    assert stats.meanstatistics[S.COMMIT_FILE_RENAME + ".mean"].samples == 30
    done = [r.files_done for r in reports if r.stage == S.JOB_STAGE_RENAME_FILES]
    assert done == sorted(done) and done[-1] == 30
    assert not await exists(store, join(dest, "_temporary"))


async def test_a_store_of_this_process_renames_in_the_caller_loop(tmp_path: Path) -> None:
    store = MemoryStore(f"workers-{id(tmp_path)}")
    job_id, expected = await run_tasks(store, "/out", tasks=4, files_per_task=5)
    summary = await commit_job("/out", job_id, store=store, options=TWO)
    assert summary.iostatistics.gauges["job_rename_processes"] == 1
    assert await output(store, "/out") == expected


async def test_processes_one_stays_in_the_caller_loop(local: tuple[LocalStore, str]) -> None:
    store, root = local
    job_id, expected = await run_tasks(store, join(root, "o"), tasks=4, files_per_task=5)
    options = CommitOptions(processes=1)
    summary = await commit_job(join(root, "o"), job_id, store=store, options=options)
    assert summary.iostatistics.gauges["job_rename_processes"] == 1
    assert await output(store, join(root, "o")) == expected


async def test_a_conflict_is_refused_before_the_workers_rename_and_abort_cleans_up(
    local: tuple[LocalStore, str],
) -> None:
    """A file in the way is found by the conflict check, before any worker renames."""
    store, root = local
    dest = join(root, "out")
    job_id, _ = await run_tasks(store, dest, tasks=6, files_per_task=5)
    taken = "part=1/part-00003-0001.dat"
    await store.write_bytes(join(dest, taken), b"someone else's")
    with pytest.raises(OutputConflict) as caught:
        await commit_job(dest, job_id, store=store, options=TWO)
    assert caught.value.stage == S.JOB_STAGE_RESOLVE_CONFLICTS
    assert await output(store, dest) == {taken: b"someone else's"}
    assert caught.value.path is not None and caught.value.path.endswith(taken)
    await abort_job(dest, job_id, store=store)
    assert await output(store, dest) == {taken: b"someone else's"}


@pytest.mark.slow
async def test_a_killed_worker_fails_the_commit_and_a_rerun_finishes(
    local: tuple[LocalStore, str], only_workers_rename: None
) -> None:
    store, root = local
    dest = join(root, "out")
    job_id, expected = await run_tasks(store, dest, tasks=6, files_per_task=5)
    faults = Faults(latency=Latency(fixed=0.002), fail_paths=kill_self_on_rename_of_task_2)
    started = time.monotonic()
    with pytest.raises(CommitError, match="died with exit code -9") as caught:
        await commit_job(dest, job_id, store=FaultyStore(store, faults), options=TWO)
    assert caught.value.stage == S.JOB_STAGE_RENAME_FILES
    assert time.monotonic() - started < 30
    summary = await commit_job(dest, job_id, store=store, options=TWO)
    assert summary.success
    assert await output(store, dest) == expected


async def test_a_killed_worker_then_abort_leaves_nothing(
    local: tuple[LocalStore, str], only_workers_rename: None
) -> None:
    store, root = local
    dest = join(root, "out")
    job_id, _ = await run_tasks(store, dest, tasks=6, files_per_task=5)
    faults = Faults(fail_paths=kill_self_on_rename_of_task_2)
    with pytest.raises(CommitError, match="died"):
        await commit_job(dest, job_id, store=FaultyStore(store, faults), options=TWO)
    await abort_job(dest, job_id, store=store)
    assert await output(store, dest) == {}
    assert not await exists(store, join(dest, "_temporary"))


PARENT = textwrap.dedent(
    """
    import json, sys, anyio
    from aiocommit import CommitOptions, commit_job
    from aiocommit.committers.manifest import rename_workers
    from aiocommit.stores.faulty import Faults, FaultyStore, Latency
    from aiocommit.stores.local import LocalStore

    rename_workers.MIN_FILES_PER_PROCESS = 4
    dest, job_id = sys.argv[1], sys.argv[2]
    store = FaultyStore(LocalStore(), Faults(latency=Latency(fixed=0.05)))
    options = CommitOptions(processes=2, concurrency=2)
    anyio.run(lambda: commit_job(dest, job_id, store=store, options=options))
    """
)


def _children(pid: int) -> list[int]:
    found: list[int] = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        found += [int(p) for p in (task / "children").read_text().split()]
    return found


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return False
    return state != "Z"


@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc/self/task").exists(), reason="reads /proc (Linux)")
@pytest.mark.parametrize("then", ["rerun", "abort"])
async def test_sigkill_of_the_parent_stops_the_workers(
    local: tuple[LocalStore, str], then: str
) -> None:
    store, root = local
    dest = join(root, "out")
    job_id, expected = await run_tasks(store, dest, tasks=6, files_per_task=5)
    parent = await anyio.open_process([sys.executable, "-c", PARENT, dest, job_id])
    try:
        workers: list[int] = []
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            workers = _children(parent.pid)
            committed = (await visible_paths(store, dest)) & expected.keys()
            if len(workers) == 2 and committed:
                break
            await anyio.sleep(0.05)
        assert len(workers) == 2, "the workers never started"
    finally:
        parent.send_signal(signal.SIGKILL)
        await parent.wait()
    deadline = time.monotonic() + 10
    while any(_alive(w) for w in workers) and time.monotonic() < deadline:  # noqa: ASYNC110
        await anyio.sleep(0.05)
    assert not any(_alive(w) for w in workers), "a worker outlived its parent"
    renamed = await output(store, dest)
    assert 0 < len(renamed) < len(expected)
    if then == "rerun":
        summary = await commit_job(dest, job_id, store=store, options=TWO)
        assert summary.success
        assert await output(store, dest) == expected
    else:
        await abort_job(dest, job_id, store=store)
        assert await output(store, dest) == {}


async def test_by_default_the_library_starts_no_process(
    local: tuple[LocalStore, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The library's default (``processes=1``): a job large enough for worker processes
    still renames in the caller's event loop (an embedded commit never forks unasked);
    the same job with ``processes=0`` (every core) does start them."""
    started: list[list[str]] = []
    popen = subprocess.Popen

    def counting_popen(args: list[str], *rest: Any, **kwargs: Any) -> Any:
        started.append(args)
        return popen(args, *rest, **kwargs)

    monkeypatch.setattr(subprocess, "Popen", counting_popen)
    store, root = local
    before = {child.pid for child in psutil.Process().children()}  # e.g. emulator servers
    assert CommitOptions().processes == 1
    dest = join(root, "out")
    job_id, expected = await run_tasks(store, dest, tasks=8, files_per_task=5)
    summary = await commit_job(dest, job_id, store=store)
    assert await output(store, dest) == expected
    assert summary.iostatistics.gauges["job_rename_processes"] == 1
    assert started == []
    assert [child for child in psutil.Process().children() if child.pid not in before] == []

    every_core = join(root, "every-core")
    job_id, expected = await run_tasks(store, every_core, tasks=8, files_per_task=5)
    options = CommitOptions(processes=0)
    summary = await commit_job(every_core, job_id, store=store, options=options)
    assert await output(store, every_core) == expected
    cores = os.cpu_count() or 1
    assert summary.iostatistics.gauges["job_rename_processes"] == min(cores, 8)
    assert len(started) == (min(cores, 8) if cores > 1 else 0)
    with pytest.raises(ValueError, match="processes"):
        CommitOptions(processes=-1)


def test_stores_say_whether_another_process_can_open_them(tmp_path: Path) -> None:
    from aiocommit.stores.base import opener_of

    local = LocalStore(threads=3)
    reopened = opener_of(FaultyStore(local, Faults(latency=Latency(fixed=0.01))))
    assert reopened is not None
    again = reopened()
    assert isinstance(again, FaultyStore) and isinstance(again.inner, LocalStore)
    assert again.inner.threads == 3 and again.faults.latency.fixed == 0.01
    assert opener_of(MemoryStore(f"o-{id(tmp_path)}")) is None
    assert opener_of(FaultyStore(MemoryStore(f"p-{id(tmp_path)}"))) is None


def test_a_worker_starts_without_the_public_api_until_asked() -> None:
    """A worker imports what it runs, not every committer (the package's ``__init__``
    loads its public names when asked); a module that asks the package for a name still
    gets it."""
    from aiocommit.io.processes import Finished, WorkerProcess
    from tests.engine.worker_mains import modules_loaded

    names = ["aiocommit.client.job", "aiocommit.committers.s3a", "aiocommit.io.processes"]
    worker = WorkerProcess(0, modules_loaded, names)
    try:
        finished = worker.receive()
    finally:
        worker.kill()
        worker.reap()
    assert isinstance(finished, Finished)
    assert finished.result == {
        "aiocommit.client.job": False,
        "aiocommit.committers.s3a": False,
        "aiocommit.io.processes": True,  # the worker's own
        "after": True,
    }


def test_workers_split_the_limits() -> None:
    options = rename_workers.worker_options(
        CommitOptions(concurrency=2048, rate_limit=1000.0, processes=0), 3
    )
    assert (options.concurrency, options.rate_limit, options.processes) == (683, 1000 / 3, 1)
    small = rename_workers.worker_options(CommitOptions(concurrency=3, min_concurrency=3), 3)
    assert (small.concurrency, small.min_concurrency) == (1, 1), "the floor within the share"


@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc/self/task").exists(), reason="reads /proc (Linux)")
async def test_cancelling_the_commit_kills_the_workers(local: tuple[LocalStore, str]) -> None:
    store, root = local
    dest = join(root, "out")
    job_id, expected = await run_tasks(store, dest, tasks=6, files_per_task=5)
    slow = FaultyStore(store, Faults(latency=Latency(fixed=0.2)))
    options = CommitOptions(processes=3, concurrency=3)
    before = set(_children(os.getpid()))
    workers: set[int] = set()
    async with anyio.create_task_group() as group:
        group.start_soon(lambda: commit_job(dest, job_id, store=slow, options=options))
        with anyio.fail_after(60):
            while len(workers) < 2:
                await anyio.sleep(0.05)
                workers = {p for p in set(_children(os.getpid())) - before if _alive(p)}
        await anyio.sleep(0.5)
        group.cancel_scope.cancel()
    assert not any(_alive(p) for p in workers)
    summary = await commit_job(dest, job_id, store=store, options=TWO)
    assert summary.success
    assert await output(store, dest) == expected


class _SpawnSpy:
    """Records every worker process started, and when the rename stage began."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.spawned: list[tuple[float, rename_workers._Worker]] = []
        self.rename_began: list[float] = []
        spawn = rename_workers._Worker.__init__
        rename = rename_workers.rename_in_workers

        def spawning(handle: rename_workers._Worker, *args: object) -> None:
            spawn(handle, *args)  # type: ignore[arg-type]
            self.spawned.append((time.monotonic(), handle))

        async def renaming(*args: object, **kwargs: object) -> tuple[int, int]:
            self.rename_began.append(time.monotonic())
            return await rename(*args, **kwargs)  # type: ignore[arg-type]

        monkeypatch.setattr(rename_workers._Worker, "__init__", spawning)
        monkeypatch.setattr(rename_workers, "rename_in_workers", renaming)

    def all_dead(self) -> bool:
        return all(handle.process.poll() is not None for _, handle in self.spawned)


@pytest.mark.slow
async def test_workers_start_while_the_manifests_load(
    local: tuple[LocalStore, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """After the first manifests load, the job's size is estimated from them and the
    workers start then: the rename stage uses those, and starts no others."""
    monkeypatch.setattr(rename_workers.RenameWorkers, "SAMPLE_MANIFESTS", 2)
    spy = _SpawnSpy(monkeypatch)
    store, root = local
    dest = join(root, "out")
    job_id, expected = await run_tasks(store, dest, tasks=8, files_per_task=5)
    summary = await commit_job(dest, job_id, store=store, options=CommitOptions(processes=3))
    assert await output(store, dest) == expected
    assert summary.iostatistics.gauges["job_rename_processes"] == 3
    assert len(spy.spawned) == 3, "a worker per process, started once"
    assert len(spy.rename_began) == 1
    assert all(at < spy.rename_began[0] for at, _ in spy.spawned)
    assert spy.all_dead()


def record_renaming_process(log: str, operation: str, path: str) -> bool:
    """A fault that injects nothing: it appends the pid of each process that renames a
    task's file (picklable, with ``functools.partial``)."""
    if operation == "rename" and "/part-" in path:
        with open(log, "a") as out:
            out.write(f"{os.getpid()}\n")
    return False


@pytest.mark.slow
async def test_workers_started_ahead_do_every_rename(
    local: tuple[LocalStore, str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """A worker renames on a loop of its own at a fraction of the caller's cost per file,
    so when the workers started ahead are ready this process leaves every rename to them
    (it renames only while none is)."""
    monkeypatch.setattr(rename_workers.RenameWorkers, "SAMPLE_MANIFESTS", 2)
    monkeypatch.setattr(rename_workers, "READY_GRACE_SECONDS", 30.0)
    spy = _SpawnSpy(monkeypatch)
    store, root = local
    dest = join(root, "out")
    job_id, expected = await run_tasks(store, dest, tasks=8, files_per_task=5)
    log = tmp_path / "renamers.log"
    faults = Faults(fail_paths=functools.partial(record_renaming_process, str(log)))
    summary = await commit_job(
        dest, job_id, store=FaultyStore(store, faults), options=CommitOptions(processes=2)
    )
    assert await output(store, dest) == expected
    assert summary.iostatistics.gauges["job_rename_processes"] == 2
    assert len(spy.spawned) == 2 and all(at < spy.rename_began[0] for at, _ in spy.spawned)
    renamers = log.read_text().split()
    assert len(renamers) == 40
    assert str(os.getpid()) not in renamers, "this process renamed"
    assert set(renamers) <= {str(handle.process.pid) for _, handle in spy.spawned}


async def test_workers_started_ahead_die_when_loading_fails(
    local: tuple[LocalStore, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(rename_workers.RenameWorkers, "SAMPLE_MANIFESTS", 2)
    spy = _SpawnSpy(monkeypatch)
    store, root = local
    dest = join(root, "out")
    job_id, _ = await run_tasks(store, dest, tasks=8, files_per_task=5)
    # a ninth task writes task 0's files: a clash found once every manifest has loaded
    await commit_task(await write_task(store, dest, job_id, 8, 0, task_files(0, 5)))
    with pytest.raises(OutputConflict):
        await commit_job(dest, job_id, store=store, options=CommitOptions(processes=3))
    assert spy.spawned, "the workers had been started ahead"
    assert not spy.rename_began
    assert spy.all_dead(), "a failed load leaves no worker process behind"
    assert not any(name.startswith("part=") for name in await visible_paths(store, dest))


async def test_a_worker_started_ahead_and_not_needed_is_killed(
    local: tuple[LocalStore, str],
) -> None:
    store, root = local
    dest = join(root, "out")
    job_id, _ = await run_tasks(store, dest, tasks=1, files_per_task=1)
    options = CommitOptions(processes=3)
    async with open_context(dest, job_id, store=store, options=options) as context:
        async with rename_workers.RenameWorkers(context) as ahead:
            ahead.manifests_loaded(32, 32 * 5, 100)  # an estimate of 500 files: 3 renamers
            started = list(ahead.handles)
            assert len(started) == 3
            assert context.reopen is not None
            taken = ahead.take(1, context.reopen)
            assert taken == started[:1]
            try:
                for extra in started[1:]:
                    extra.process.wait(timeout=30)  # the extras are killed at once
            finally:
                taken[0].kill()
                taken[0].reap()
        assert all(handle.process.poll() is not None for handle in started)


@pytest.mark.slow
async def test_a_worker_renames_on_while_attempt_directories_are_deleted(
    local: tuple[LocalStore, str], only_workers_rename: None
) -> None:
    """A worker deletes a finished manifest's task attempt directory without its renamer
    waiting for the delete: with one renamer per worker (``concurrency`` 128: 64 per
    worker, one chunk) and 0.4 s per delete, 40 manifests took 20 deletes one after
    another per worker (8 s+) before; now the deletes overlap the renames. Nothing is
    left behind and every delete is counted."""
    store, root = local
    dest = join(root, "out")
    job_id, expected = await run_tasks(store, dest, tasks=40, files_per_task=2)
    faults = Faults(latency_by_operation={"delete": Latency(fixed=0.4)})
    summary = await commit_job(
        dest,
        job_id,
        store=FaultyStore(store, faults),
        options=CommitOptions(processes=2, concurrency=128),
    )
    assert await output(store, dest) == expected
    assert not await exists(store, join(dest, "_temporary"))
    stats = summary.iostatistics
    assert stats.gauges["job_rename_processes"] == 2
    assert stats.counters[S.COMMITTER_TASK_ATTEMPT_DIRECTORIES_DELETED] == 40
    # the stage includes the workers' start (~0.3 s each, seconds on a loaded machine)
    assert stats.meanstatistics[S.JOB_STAGE_RENAME_FILES + ".mean"].sum < 5_000
