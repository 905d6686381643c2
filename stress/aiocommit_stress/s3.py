"""Stress runs of the S3A committers on S3 through moto in server mode.

``job``: one staging (or magic) job of ``tasks`` x ``files`` through aiobotocore over
HTTP, faults optionally injected during the job commit; verified byte for byte, with no
multipart upload left outstanding.

``crash``: a job commit in a child process killed with SIGKILL at a random point (just
before or after a random store call, or after a random delay), then re-run in this
process; each run verified exactly, and the destination must hold no outstanding upload.
"""

from __future__ import annotations

import contextlib
import os
import random
import signal
import tempfile
import time
from collections import Counter
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import anyio

from aiocommit.client.job import commit_job, setup_job
from aiocommit.client.task import commit_task, setup_task
from aiocommit.options import CommitOptions
from aiocommit.protocol import s3_statistics as S3
from aiocommit.stores.base import Store, join
from aiocommit.stores.faulty import Faults, FaultyStore
from aiocommit.stores.s3 import S3Store
from aiocommit_stress.crash import ChildResult, KillAtCall, run_child
from aiocommit_stress.report import Reporter, grid_table
from aiocommit_stress.targets import FaultOptions
from aiocommit_stress.verify import walk
from aiocommit_testing.s3_emulator import create_bucket, run_moto_server


@dataclass
class S3Target:
    store: S3Store
    endpoint: str
    bucket: str


@asynccontextmanager
async def s3_target() -> AsyncIterator[S3Target]:
    """A moto server on loopback (its own process), a fresh bucket and a store on it."""
    async with run_moto_server() as server:
        bucket = f"aiocommit-stress-{os.getpid()}"
        await create_bucket(server.endpoint, bucket)
        store = S3Store(bucket, endpoint_url=server.endpoint)
        try:
            yield S3Target(store, server.endpoint, bucket)
        finally:
            await store.aclose()


def _files(task: int, count: int, rng: random.Random) -> dict[str, bytes]:
    return {
        f"part={n % 4}/part-{task:05d}-{n:04d}.dat": rng.randbytes(rng.randint(0, 2048))
        for n in range(count)
    }


async def prepare_s3_job(
    store: Store,
    dest: str,
    tasks: int,
    files: int,
    seed: int,
    committer: str,
    tmp: str,
    *,
    failed_attempt: bool = True,
) -> tuple[str, dict[str, bytes]]:
    """Set up a job and commit ``tasks`` tasks of ``files`` files; plus (``failed_attempt``)
    an attempt that uploaded and never committed, for the job's cleanup to abort."""
    rng = random.Random(seed)
    job_id = await setup_job(dest, store=store, options=CommitOptions(committer=committer))
    expected: dict[str, bytes] = {}
    for task in range(tasks + 1 if failed_attempt else tasks):
        content = _files(task, files, rng)
        failed = task == tasks
        attempt = await setup_task(dest, job_id, task, 0, store=store)
        for relative, data in content.items():
            await attempt.write_bytes(relative, data, store=store)
        if failed and committer != "magic":
            # staging uploads at task commit: as a task that died after uploading (its
            # pending set and its own aborts fail; the uploads' records stay)
            dying = FaultyStore(store, Faults(fail_paths=_died_after_uploading))
            with contextlib.suppress(Exception):  # the task dies: whatever it raised
                await commit_task(attempt, store=dying, options=CommitOptions(max_attempts=1))
        if not failed:
            await commit_task(attempt, store=store)
            expected.update(content)
    return job_id, expected


def _died_after_uploading(operation: str, path: str) -> bool:
    return operation == "abort_upload" or (operation == "write_bytes" and "pendingset" in path)


async def verify_s3(store: S3Store, dest: str, expected: dict[str, bytes]) -> list[str]:
    """Problems with ``dest``: output not exactly ``expected``, leftovers, open uploads."""
    problems: list[str] = []
    found = await walk(store, dest)
    data_files = {p for p in found if p != "_SUCCESS"}
    missing = sorted(set(expected) - data_files)
    extra = sorted(data_files - set(expected))
    if missing:
        problems.append(f"{len(missing)} missing, e.g. {missing[0]}")
    if extra:
        problems.append(f"{len(extra)} unexpected, e.g. {extra[0]}")
    for relative in sorted(set(expected) & data_files):
        if await store.read_bytes(join(dest, relative)) != expected[relative]:
            problems.append(f"wrong bytes in {relative}")
            break
    if "_SUCCESS" not in found:
        problems.append("no _SUCCESS")
    uploads = [u async for page in store.list_uploads(dest.rstrip("/") + "/") for u in page]
    if uploads:
        problems.append(f"{len(uploads)} outstanding multipart upload(s)")
    return problems


async def job_scenario(
    *,
    tasks: int,
    files: int,
    committer: str,
    faults: FaultOptions,
    options: CommitOptions,
    seed: int,
    reporter: Reporter,
) -> dict[str, Any]:
    async with s3_target() as target:
        store = target.store
        dest = "/stress/job"
        with tempfile.TemporaryDirectory(prefix="aiocommit-s3-stress-") as tmp:
            reporter.log(f"preparing {tasks} tasks x {files} files ({committer}) on moto")
            job_id, expected = await prepare_s3_job(store, dest, tasks, files, seed, committer, tmp)
        begin = time.perf_counter()
        summary = await commit_job(dest, job_id, store=faults.wrap(store), options=options)
        seconds = time.perf_counter() - begin
        problems = await verify_s3(store, dest, expected)
    counters = summary.iostatistics.counters
    ok = not problems
    figures = {
        "files": len(expected),
        "commit_seconds": round(seconds, 4),
        "files_per_second": round(len(expected) / seconds, 1) if seconds else None,
        "uploads_completed": counters.get(S3.COMMITTER_COMMITS_COMPLETED, 0),
        "uploads_aborted_by_cleanup": counters.get(S3.COMMITTER_PENDING_UPLOADS_ABORTED, 0),
        "renames": counters.get("op_rename", 0),
        "problems": problems,
    }
    for problem in problems:
        reporter.out.print(f"[red]  {problem}")
    reporter.figure(
        f"s3 job ({committer}): {len(expected)} files committed in {seconds:.2f} s through "
        f"moto, {figures['uploads_aborted_by_cleanup']} stray uploads aborted, "
        f"{'PASS' if ok else 'FAIL'}"
    )
    return {
        "scenario": "job",
        "store": "s3",
        "ok": ok,
        "faults": faults.describe(),
        "figures": figures,
    }


async def child(endpoint: str, bucket: str, dest: str, job_id: str, at: int, after: bool) -> None:
    """The child's side: commit on S3, maybe dying on the way; print calls and seconds."""
    store = KillAtCall(S3Store(bucket, endpoint_url=endpoint), at, after)
    print("READY", flush=True)
    begin = time.perf_counter()
    try:
        await commit_job(dest, job_id, store=store, options=CommitOptions(concurrency=8))
    finally:
        await store.aclose()
    print(f"DONE {store.count} {time.perf_counter() - begin:.6f}", flush=True)


def child_main(argv: list[str]) -> None:
    """``python -m aiocommit_stress crash-child-s3 ENDPOINT BUCKET DEST JOB AT AFTER``."""
    endpoint, bucket, dest, job_id, at, after = argv
    anyio.run(child, endpoint, bucket, dest, job_id, int(at), after == "1")


async def _child(
    target: S3Target, dest: str, job_id: str, at: int, after: bool, **kw: Any
) -> ChildResult:
    args = [target.endpoint, target.bucket, dest, job_id, str(at), "1" if after else "0"]
    return await run_child(args, command="crash-child-s3", **kw)


async def crash_scenario(
    *, runs: int, tasks: int, files: int, committer: str, seed: int, reporter: Reporter
) -> dict[str, Any]:
    rng = random.Random(seed)
    kills = completions = attempts = unkilled = outstanding_left = 0
    killed_ops: Counter[str] = Counter()
    failures: list[str] = []
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="aiocommit-s3-crash-") as tmpdir:
        async with s3_target() as target:
            store = target.store
            with reporter.live():
                dest = "/crash/calibration"
                job_id, expected = await prepare_s3_job(
                    store, dest, tasks, files, seed, committer, tmpdir
                )
                calibration = await _child(
                    target, dest, job_id, 0, False, kill_after=None, tmpdir=tmpdir
                )
                done = [line for line in calibration.lines if line.startswith("DONE")]
                if calibration.returncode != 0 or not done:
                    raise RuntimeError(f"calibration commit failed: {calibration.stderr}")
                _, calls_text, seconds_text = done[0].split()
                calls, seconds = int(calls_text), float(seconds_text)
                if problems := await verify_s3(store, dest, expected):
                    raise RuntimeError(f"calibration output wrong: {problems}")
                with reporter.bar("kills", runs) as advance:
                    while kills < runs and attempts < runs * 3:
                        attempts += 1
                        dest = f"/crash/run-{attempts:04d}"
                        job_id, expected = await prepare_s3_job(
                            store, dest, tasks, files, seed + attempts, committer, tmpdir
                        )
                        if attempts % 2:
                            at, after = rng.randint(1, calls), rng.random() < 0.5
                            result = await _child(
                                target, dest, job_id, at, after, kill_after=None, tmpdir=tmpdir
                            )
                        else:
                            delay = rng.uniform(0, seconds)
                            result = await _child(
                                target, dest, job_id, 0, False, kill_after=delay, tmpdir=tmpdir
                            )
                        if result.returncode not in (0, -signal.SIGKILL):
                            failures.append(
                                f"run {attempts}: child exit {result.returncode}: "
                                f"{result.stderr[-300:]}"
                            )
                            continue
                        if result.killed:
                            kills += 1
                            advance(1)
                            for line in result.lines:
                                if line.startswith("KILL"):
                                    killed_ops[line.split()[2]] += 1
                        else:
                            unkilled += 1
                        try:
                            await commit_job(dest, job_id, store=store)
                        except Exception as error:
                            failures.append(
                                f"run {attempts}: re-run failed: {type(error).__name__}: {error}"
                            )
                            continue
                        problems = await verify_s3(store, dest, expected)
                        outstanding_left += sum(1 for p in problems if "outstanding" in p)
                        if problems:
                            failures.append(f"run {attempts}: " + "; ".join(problems))
                        else:
                            completions += 1
    verified = kills + unkilled
    ok = not failures and completions == verified and kills >= runs and outstanding_left == 0
    reporter.table(
        grid_table("killed at store call", ["operation", "kills"], sorted(killed_ops.items()))
    )
    for failure in failures[:20]:
        reporter.out.print(f"[red]  {failure}")
    reporter.figure(
        f"crash on s3 ({committer}, moto): {kills} kills at random points, {completions} exact "
        f"completions of {verified} re-runs ({unkilled} children finished first), "
        f"{outstanding_left} runs with an outstanding upload left; {'PASS' if ok else 'FAIL'}"
    )
    return {
        "scenario": "crash",
        "store": "s3",
        "ok": ok,
        "figures": {
            "kills": kills,
            "runs": attempts,
            "children_not_killed": unkilled,
            "correct_completions": completions,
            "runs_with_outstanding_uploads": outstanding_left,
            "killed_at_operation": dict(killed_ops),
            "calibration_calls": calls,
            "calibration_seconds": round(seconds, 4),
            "failures": failures[:20],
            "elapsed_seconds": round(time.monotonic() - started, 1),
        },
    }


class RequestCounter:
    """Counts the HTTP requests an aiobotocore client sends, by S3 operation name."""

    def __init__(self) -> None:
        self.requests: Counter[str] = Counter()

    def attach(self, client: Any) -> None:
        client.meta.events.register("before-send.s3.*", self._count)

    def _count(self, request: Any, **kwargs: Any) -> None:
        event = str(kwargs.get("event_name", ""))
        self.requests[event.rsplit(".", 1)[-1] or "?"] += 1

    def reset(self) -> Counter[str]:
        snapshot, self.requests = self.requests, Counter()
        return snapshot


async def cost_scenario(*, tasks: int, files: int, reporter: Reporter) -> dict[str, Any]:
    """HTTP requests and bytes copied per file: the staging and magic committers against
    the manifest committer, on one moto server in one run."""
    from aiocommit.client.job import commit_job, setup_job
    from aiocommit.client.task import commit_task, setup_task

    rows: list[tuple[str, str, float, float, float]] = []
    figures: dict[str, Any] = {}
    async with s3_target() as target:
        store = target.store
        counter = RequestCounter()
        counter.attach(await store.client())
        rng = random.Random(1)
        count = tasks * files
        with tempfile.TemporaryDirectory(prefix="aiocommit-s3-cost-") as tmp:
            for committer in ("staging", "magic", "manifest"):
                dest = f"/cost/{committer}"
                counter.reset()
                if committer == "manifest":  # asked for: S3's default is staging
                    manifest = CommitOptions(committer="manifest")
                    job_id = await setup_job(dest, store=store, options=manifest)
                    size = 0
                    for task in range(tasks):
                        attempt = await setup_task(dest, job_id, task, 0, store=store)
                        for relative, data in _files(task, files, rng).items():
                            await store.write_bytes(attempt.path(relative), data)
                            size += len(data)
                        await commit_task(attempt, store=store)
                else:
                    job_id, expected = await prepare_s3_job(
                        store, dest, tasks, files, 1, committer, tmp, failed_attempt=False
                    )
                    size = sum(map(len, expected.values()))
                task_requests = counter.reset()
                if committer == "manifest":
                    await commit_job(dest, job_id, store=store)
                else:
                    await commit_job(dest, job_id, store=store)
                job_requests = counter.reset()
                copies = job_requests.get("CopyObject", 0)
                per_task = sum(task_requests.values()) / count
                per_job = sum(job_requests.values()) / count
                copied = size if committer == "manifest" else 0
                rows.append(
                    (
                        committer,
                        ", ".join(f"{k} {v}" for k, v in sorted(job_requests.items())),
                        per_task,
                        per_job,
                        copies / count,
                    )
                )
                figures[committer] = {
                    "task_side_requests_per_file": round(per_task, 2),
                    "job_commit_requests_per_file": round(per_job, 2),
                    "copies_per_file": round(copies / count, 2),
                    "bytes_copied": copied if copies else 0,
                    "job_commit_requests": dict(job_requests),
                }
    reporter.table(
        grid_table(
            f"requests per file ({count} files)",
            ["committer", "job commit requests", "task/file", "job/file", "copies/file"],
            [(c, r, f"{t:.2f}", f"{j:.2f}", f"{k:.2f}") for c, r, t, j, k in rows],
        )
    )
    reporter.figure(
        "s3 cost per file (job commit): "
        + "; ".join(
            f"{c} {figures[c]['job_commit_requests_per_file']} requests, "
            f"{figures[c]['copies_per_file']} copies"
            for c in ("staging", "magic", "manifest")
        )
    )
    return {"scenario": "s3-cost", "ok": True, "figures": figures}
