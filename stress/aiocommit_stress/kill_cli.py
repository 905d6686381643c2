"""Kill anywhere: ``aiocommit abort`` and ``aiocommit cleanup`` killed with SIGKILL at a
random point, then re-run; nothing of the aborted or cleaned jobs may stay visible and
nothing of any other job may be lost.

Each run builds a destination on the local store with other jobs' work beside the one
under test, starts the real CLI in a child process over a store that kills the child
just before (or just after) its K-th store call, K drawn from one of ``runs`` equal
strata of the calls an unkilled run makes (so every stage, cleanup included, is hit),
re-runs the same command unkilled, and checks:

abort
    a job whose commit renamed part of its files and failed; beside it a committed job
    (its output must stay) and a set-up job (it must still commit, whole).
cleanup (``--all``)
    a committed job with its temporary files left and a set-up job (both removed), a
    job whose commit stopped part-way (refused: kept, and still undone whole by a later
    abort), and a committed job's output (untouched).
replace (``commit --conflict-mode replace``)
    a destination holding a committed job's output and a set-up job that replaces it,
    most of its files at the old files' names (a Spark overwrite). Every other run is
    finished by re-running the commit (the destination then holds exactly the new job's
    output and ``_SUCCESS``); the others by ``aiocommit abort``:
    a job killed before its commit point leaves exactly the old output and ``_SUCCESS``
    (moved back from the job's directory), one killed after it exactly the new.
replace-s3
    the same on S3 with the staging committer (``kill_anywhere(store=S3Store(...))``,
    the children reaching moto through ``AWS_ENDPOINT_URL_S3``): no upload may be left
    outstanding, and an abort may lose only the old objects it names as deleted.
"""

from __future__ import annotations

import dataclasses
import os
import random
import shutil
import signal
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from aiocommit import CommitError, CommitOptions, abort_job, commit_job, commit_task, setup_job
from aiocommit.client.jobs import list_jobs
from aiocommit.client.task import setup_task
from aiocommit.protocol.layout import SUCCESS, TEMPORARY
from aiocommit.protocol.success import decode_success
from aiocommit.stores.base import Store, join
from aiocommit.stores.faulty import Faults, FaultyStore
from aiocommit.stores.local import LocalStore
from aiocommit.stores.multipart import supports_multipart
from aiocommit.stores.wrapper import StoreWrapper
from aiocommit_stress.crash import run_child

T = TypeVar("T")

OPERATIONS = ("abort", "cleanup", "replace", "replace-s3")
_kill = {"at": 0, "after": 0, "count": 0}


class _KillingStore(StoreWrapper):
    """A local store that SIGKILLs this process at the ``at``-th call of all such
    stores in the process (the CLI may open more than one)."""

    async def intercept(self, operation: str, path: str, call: Callable[[], Awaitable[T]]) -> T:
        _kill["count"] += 1
        number = _kill["count"]
        if number == _kill["at"] and not _kill["after"]:
            _die(number, operation, "before")
        try:
            return await call()
        finally:
            if number == _kill["at"] and _kill["after"]:
                _die(number, operation, "after")


def _die(number: int, operation: str, when: str) -> None:
    sys.stdout.write(f"KILL {number} {operation} {when}\n")
    sys.stdout.flush()
    os.kill(os.getpid(), signal.SIGKILL)


def open_killing_local(url: str) -> tuple[Store, str]:
    """The ``file`` scheme's opener in the child: a local store that kills on cue."""
    from aiocommit.stores.registry import _open_local

    store, path = _open_local(url)
    return _KillingStore(store), path


def open_killing_s3(url: str) -> tuple[Store, str]:
    """The ``s3``/``s3a`` schemes' opener in the child: an S3 store that kills on cue."""
    from aiocommit.stores.s3 import open_s3

    store, path = open_s3(url)
    return _KillingStore(store), path


def cli_child_main(argv: list[str]) -> None:
    """``python -m aiocommit_stress kill-cli-child AT AFTER CLI-ARGS...``"""
    from aiocommit.cli import main
    from aiocommit.stores.registry import register_scheme

    _kill["at"], _kill["after"] = int(argv[0]), int(argv[1])
    register_scheme("file", "aiocommit_stress.kill_cli:open_killing_local")
    for scheme in ("s3", "s3a"):
        register_scheme(scheme, "aiocommit_stress.kill_cli:open_killing_s3")
    print("READY", flush=True)
    code: Any = 0
    try:
        main(argv[2:], prog_name="aiocommit")
    except SystemExit as exit_:
        code = exit_.code or 0
    print(f"DONE {_kill['count']} {code}", flush=True)
    sys.exit(code)


# -- scenes --------------------------------------------------------------------------------


@dataclass
class Scene:
    """A destination with the job under test and the jobs that must not lose anything."""

    dest: str
    args: list[str]
    expected_code: int
    #: what a reader must see once the operation finished (``_SUCCESS`` aside)
    visible: dict[str, bytes]
    #: a set-up job that must survive and still commit whole (abort scene)
    survivor: str | None = None
    survivor_files: dict[str, bytes] = field(default_factory=dict)
    #: a job whose commit stopped part-way that cleanup must refuse (cleanup scene)
    refused: str | None = None
    #: jobs whose directory must be gone
    gone: list[str] = field(default_factory=list)
    #: the job whose ``_SUCCESS`` the destination must hold afterwards (None: unchecked)
    success: str | None = None
    #: replace: the job under test, and what a reader sees if its commit is undone
    job: str | None = None
    #: the destination's URL for the command (its store path otherwise)
    url: str | None = None
    old_visible: dict[str, bytes] = field(default_factory=dict)
    old_success: str | None = None


async def _job(
    store: Store, dest: str, tag: str, tasks: int = 2, files: int = 6, names: str = ""
) -> tuple[str, dict[str, bytes]]:
    """A set-up job with committed tasks; its files are named after ``names`` (default
    ``tag``: another tag's names make the files land on that job's), hold ``tag``."""
    job_id = await setup_job(dest, store=store)
    written: dict[str, bytes] = {}
    for task in range(tasks):
        attempt = await setup_task(dest, job_id, task, store=store)
        for n in range(files):
            name = f"part={n % 3}/{names or tag}-{task:03d}-{n:03d}.dat"
            data = f"{tag} {task} {n}".encode()
            await store.write_bytes(attempt.path(name), data)
            written[name] = data
        await commit_task(attempt, store=store)
    return job_id, written


async def _part_way(store: Store, dest: str, job_id: str) -> None:
    failing = FaultyStore(
        store, Faults(fail_paths=lambda op, path: op == "rename" and "part=1" in path)
    )
    try:
        await commit_job(
            dest, job_id, store=failing, options=CommitOptions(concurrency=2, max_attempts=1)
        )
    except CommitError:
        return
    raise RuntimeError("the part-way commit finished")


async def abort_scene(store: Store, dest: str) -> Scene:
    await store.write_bytes(join(dest, "old.dat"), b"old")
    other, other_files = await _job(store, dest, "other")
    await commit_job(dest, other, store=store)
    survivor, survivor_files = await _job(store, dest, "survivor")
    target, _ = await _job(store, dest, "target", tasks=3, files=12)
    await _part_way(store, dest, target)
    return Scene(
        dest,
        ["abort", dest, "--job-id", target],
        0,
        {"old.dat": b"old", **other_files},
        survivor=survivor,
        survivor_files=survivor_files,
        gone=[target],
    )


async def cleanup_scene(store: Store, dest: str) -> Scene:
    await store.write_bytes(join(dest, "old.dat"), b"old")
    committed, committed_files = await _job(store, dest, "committed")
    await commit_job(dest, committed, store=store, options=CommitOptions(cleanup_skip=True))
    pending, _ = await _job(store, dest, "pending")
    refused, _ = await _job(store, dest, "refused", tasks=3, files=12)
    await _part_way(store, dest, refused)
    return Scene(
        dest,
        ["cleanup", dest, "--all", "--min-age", "0s"],
        1,
        {"old.dat": b"old", **committed_files},
        refused=refused,
        gone=[committed, pending],
    )


async def replace_scene(store: Store, dest: str) -> Scene:
    await store.write_bytes(join(dest, "old.dat"), b"old")
    old, old_files = await _job(store, dest, "old", tasks=2, files=9)
    await commit_job(dest, old, store=store)
    # most of the new files land on old names (a Spark overwrite of the same partitions)
    new, new_files = await _job(store, dest, "new", tasks=3, files=8, names="old")
    return Scene(
        dest,
        # one process: every store call goes through the killing store
        ["commit", dest, "--job-id", new, "--conflict-mode", "replace", "--processes", "1"],
        0,
        new_files,
        gone=[new],
        success=new,
        job=new,
        old_visible={"old.dat": b"old", **old_files},
        old_success=old,
    )


async def s3_replace_scene(store: Store, dest: str) -> Scene:
    """``replace_scene`` on S3 with the staging committer: the old output is a committed
    staging job's, the new job's tasks are uploaded and not completed."""
    from aiocommit import commit_job

    old, old_files = await _s3_job(store, dest, "old", tasks=2, files=9)
    await commit_job(dest, old, store=store)
    new, new_files = await _s3_job(store, dest, "new", tasks=3, files=8, names="old")
    url = store.qualify(dest)
    return Scene(
        dest,
        ["commit", url, "--job-id", new, "--conflict-mode", "replace"],
        0,
        new_files,
        gone=[new],
        success=new,
        job=new,
        old_visible=old_files,
        old_success=None,  # the S3A committers delete _SUCCESS at job setup
        url=url,
    )


async def _s3_job(
    store: Store, dest: str, tag: str, tasks: int, files: int, names: str = ""
) -> tuple[str, dict[str, bytes]]:
    from aiocommit import CommitOptions, commit_task, setup_job, setup_task

    staging = CommitOptions(committer="staging")
    job_id = await setup_job(dest, store=store, options=staging)
    written: dict[str, bytes] = {}
    for task in range(tasks):
        attempt = await setup_task(dest, job_id, task, store=store)
        for n in range(files):
            name = f"part={n % 3}/{names or tag}-{task:03d}-{n:03d}.dat"
            written[name] = data = f"{tag} {task} {n}".encode()
            await attempt.write_bytes(name, data, store=store)
        await commit_task(attempt, store=store)
    return job_id, written


SCENES = {
    "abort": abort_scene,
    "cleanup": cleanup_scene,
    "replace": replace_scene,
    "replace-s3": s3_replace_scene,
}


async def _visible(store: Store, dest: str) -> dict[str, bytes]:
    found: dict[str, bytes] = {}
    pending = [dest]
    while pending:
        directory = pending.pop()
        async for page in store.list_dir(directory):
            for status in page:
                relative = status.path[len(dest) + 1 :]
                if relative in (TEMPORARY, SUCCESS):
                    continue
                if status.is_dir:
                    pending.append(status.path)
                else:
                    found[relative] = await store.read_bytes(status.path)
    return found


async def check_scene(store: Store, scene: Scene) -> list[str]:
    """What is wrong with the destination after the operation finished."""
    problems: list[str] = []
    jobs = {job.job_id: job for job in await list_jobs(scene.dest, store=store)}
    for job_id in scene.gone:
        if job_id in jobs:
            problems.append(f"job {job_id} still there ({jobs[job_id].state})")
    if scene.refused is not None:
        state = jobs[scene.refused].state if scene.refused in jobs else None
        if state != "committing":
            problems.append(f"refused job's state is {state}, not committing")
        else:
            await abort_job(scene.dest, scene.refused, store=store)
    visible = await _visible(store, scene.dest)
    if supports_multipart(store):
        from aiocommit.committers.s3a import list_outstanding_uploads

        left = await list_outstanding_uploads(scene.dest, store=store)
        if left:
            problems.append(f"{len(left)} multipart upload(s) left outstanding")
    if scene.success is not None:
        try:
            owner: str | None = decode_success(
                await store.read_bytes(join(scene.dest, SUCCESS))
            ).job_id
        except FileNotFoundError:
            owner = None
        if owner != scene.success:
            problems.append(f"_SUCCESS is job {owner}'s, not {scene.success}'s")
    if visible != scene.visible:
        extra = sorted(set(visible) - set(scene.visible))[:5]
        lost = sorted(set(scene.visible) - set(visible))[:5]
        problems.append(f"output differs: extra {extra}, lost {lost}")
    if scene.survivor is not None:
        state = jobs[scene.survivor].state if scene.survivor in jobs else None
        if state != "set up":
            problems.append(f"the other set-up job's state is {state}")
        else:
            await commit_job(scene.dest, scene.survivor, store=store)
            now = await _visible(store, scene.dest)
            if now != {**scene.visible, **scene.survivor_files}:
                problems.append("the other set-up job did not commit whole")
    return problems


async def _abort_instead(store: Store, scene: Scene) -> Scene:
    """The scene finished by ``aiocommit abort`` instead of a re-run: what a reader must
    see then depends on whether the killed commit had passed its commit point."""
    assert scene.job is not None
    jobs = {job.job_id: job for job in await list_jobs(scene.dest, store=store)}
    committed = scene.job not in jobs or jobs[scene.job].state == "committed"
    return dataclasses.replace(
        scene,
        args=["abort", scene.url or scene.dest, "--job-id", scene.job],
        expected_code=0,
        visible=scene.visible if committed else scene.old_visible,
        success=scene.success if committed else scene.old_success,
    )


def _named_unrestorable(store: Store, scene: Scene, stderr: str) -> set[str]:
    """The old files (relative to the destination) ``aiocommit abort`` named as deleted
    and not restorable; each must have been one of the old output's."""
    named = set()
    for line in stderr.splitlines():
        if line.startswith("  ") and "://" in line:
            path = store.unqualify(line.strip())
            named.add(path[len(scene.dest.rstrip("/")) + 1 :])
    unknown = named - set(scene.old_visible) - {SUCCESS}
    if unknown:
        raise RuntimeError(f"abort named files that were never old output: {sorted(unknown)}")
    return named


# -- the runs ------------------------------------------------------------------------------


async def kill_anywhere(
    operation: str, *, runs: int, seed: int, workdir: str, store: Store | None = None
) -> dict[str, Any]:
    """Kill ``aiocommit OPERATION`` ``runs`` times at stratified random store calls,
    re-run it unkilled and check; returns the figures (``ok`` when all held).
    ``store``: where the scenes are built (``workdir`` is then a path in it; the child
    reaches it by its URL); by default the local store."""
    rng = random.Random(seed)
    owned = store is None
    store = store or LocalStore()
    tmpdir = tempfile.mkdtemp(prefix="aiocommit-kill-tmp-")
    scene_of = SCENES[operation]
    failures: list[str] = []
    kills = 0
    positions: list[float] = []
    started = time.monotonic()

    async def child(scene: Scene, at: int, after: bool) -> tuple[bool, int, int, str]:
        result = await run_child(
            [str(at), str(int(after)), *scene.args],
            kill_after=None,
            tmpdir=tmpdir,
            command="kill-cli-child",
        )
        done = [line for line in result.lines if line.startswith("DONE")]
        if result.killed:
            return True, 0, -signal.SIGKILL, result.stderr
        if not done:
            raise RuntimeError(f"child failed: {result.returncode}: {result.stderr[-800:]}")
        _, calls, code = done[0].split()
        return False, int(calls), int(code), result.stderr

    try:
        calibration = await scene_of(store, join(workdir, "calibration"))
        _, calls, code, _ = await child(calibration, 0, False)
        if code != calibration.expected_code:
            raise RuntimeError(f"unkilled {operation} exited {code}")
        problems = await check_scene(store, calibration)
        if problems:
            raise RuntimeError(f"unkilled {operation} left: {problems}")
        for run in range(runs):
            low = 1 + run * calls // runs
            high = max(low, (run + 1) * calls // runs)
            at = rng.randint(low, high)
            after = rng.random() < 0.5
            scene = await scene_of(store, join(workdir, f"run-{run}"))
            killed, _, _, _ = await child(scene, at, after)
            kills += killed
            where = f"call {at}/{calls} {'after' if after else 'before'}"
            positions.append(round(at / calls, 3))
            if scene.job is not None and run % 2:
                scene = await _abort_instead(store, scene)
            _, _, code, stderr = await child(scene, 0, False)
            if code != scene.expected_code:
                failures.append(f"{where}: re-run exited {code}")
                continue
            if scene.args[0] == "abort":  # what the abort said it cannot restore is gone
                named = _named_unrestorable(store, scene, stderr)
                scene.visible = {k: v for k, v in scene.visible.items() if k not in named}
            problems = await check_scene(store, scene)
            failures.extend(f"{where}: {problem}" for problem in problems)
            if owned:
                shutil.rmtree(scene.dest, ignore_errors=True)
    finally:
        shutil.rmtree(tmpdir, ignore_errors=True)
        if owned:
            await store.aclose()
    return {
        "operation": operation,
        "ok": not failures and kills == runs,
        "runs": runs,
        "kills": kills,
        "calls_unkilled": calls,
        "kill_positions": positions,  # the killed call / the calls of an unkilled run
        "failures": failures[:20],
        "elapsed_seconds": round(time.monotonic() - started, 1),
    }
