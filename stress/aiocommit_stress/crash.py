"""The ``crash`` scenario: a job commit in a child process killed with SIGKILL at a random
point, then re-run to completion in this process and verified; N times, on the local store.

Kill points are drawn two ways, alternately: at a random store call (the child kills
itself just before or just after call K, K uniform over the calls a commit makes, so every
stage is hit in proportion to its calls) and at a random time (the parent sends SIGKILL
after a delay uniform over a commit's duration, which also lands between calls and inside
the local store's worker threads).
"""

from __future__ import annotations

import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, TypeVar

import anyio
from anyio.abc import Process
from anyio.streams.text import TextReceiveStream

from aiocommit import CommitOptions, commit_job
from aiocommit.protocol.layout import JobLayout
from aiocommit.stores.base import Store
from aiocommit.stores.local import LocalStore
from aiocommit_stress.jobgen import JobSpec
from aiocommit_stress.metering import MeteredStore
from aiocommit_stress.report import Reporter, grid_table, subprocess_env
from aiocommit_stress.runner import prepare
from aiocommit_stress.targets import FaultOptions, open_target
from aiocommit_stress.verify import verify_output, walk

T = TypeVar("T")


class KillAtCall(MeteredStore):
    """Counts store calls; kills this process with SIGKILL just before (or just after
    the answer of) call number ``at``. ``at=0`` never kills."""

    def __init__(self, inner: Store, at: int, after: bool) -> None:
        super().__init__(inner)
        self.at = at
        self.after = after
        self.count = 0

    @staticmethod
    def _die(number: int, operation: str, when: str) -> None:
        sys.stdout.write(f"KILL {number} {operation} {when}\n")
        sys.stdout.flush()
        os.kill(os.getpid(), signal.SIGKILL)

    async def intercept(self, operation: str, path: str, call: Callable[[], Awaitable[T]]) -> T:
        self.count += 1
        number = self.count
        if number == self.at and not self.after:
            self._die(number, operation, "before")
        try:
            return await super().intercept(operation, path, call)
        finally:
            if number == self.at and self.after:
                self._die(number, operation, "after")


async def child(
    dest: str, job_id: str, concurrency: int, faults: FaultOptions, kill_at: int, after: bool
) -> None:
    """The child's side: commit, maybe dying on the way; print calls and seconds."""
    store = KillAtCall(faults.wrap(LocalStore()), kill_at, after)
    print("READY", flush=True)
    begin = time.perf_counter()
    await commit_job(dest, job_id, store=store, options=CommitOptions(concurrency=concurrency))
    print(f"DONE {store.count} {time.perf_counter() - begin:.6f}", flush=True)


@dataclass
class ChildResult:
    killed: bool
    returncode: int | None
    lines: list[str]
    stderr: str


async def run_child(
    args: list[str],
    *,
    kill_after: float | None,
    tmpdir: str,
    limit_seconds: float = 120,
    command: str = "crash-child",
) -> ChildResult:
    """Run ``python -m aiocommit_stress COMMAND ARGS``; SIGKILL it ``kill_after`` seconds
    after it printed READY (never, when None)."""
    env = subprocess_env(TMPDIR=tmpdir)
    process: Process = await anyio.open_process(
        [sys.executable, "-m", "aiocommit_stress", command, *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
    )
    lines: list[str] = []
    errors: list[str] = []
    async with process:
        assert process.stdout is not None and process.stderr is not None
        stdout, stderr = process.stdout, process.stderr
        ready = anyio.Event()

        async def read_out() -> None:
            buffer = ""
            async for text in TextReceiveStream(stdout):
                buffer += text
                while "\n" in buffer:
                    line, buffer = buffer.split("\n", 1)
                    lines.append(line)
                    if line == "READY":
                        ready.set()
            ready.set()

        async def read_err() -> None:
            async for text in TextReceiveStream(stderr):
                errors.append(text)

        with anyio.fail_after(limit_seconds):
            async with anyio.create_task_group() as group:
                group.start_soon(read_out)
                group.start_soon(read_err)
                if kill_after is not None:
                    await ready.wait()
                    await anyio.sleep(kill_after)
                    if process.returncode is None:
                        process.kill()
                await process.wait()
    code = process.returncode
    return ChildResult(code == -signal.SIGKILL, code, lines, "".join(errors)[-2000:])


async def _state(store: Store, layout: JobLayout) -> tuple[str, int]:
    """Where the killed commit stood: its phase, and how many files had landed."""

    async def exists(path: str) -> bool:
        return await _exists(store, path)

    landed = await walk(store, layout.dest)
    files = sum(1 for p in landed if not p.startswith("_temporary/") and p != "_SUCCESS")
    if await exists(layout.success_path):
        return (
            "after_success_before_cleanup"
            if await exists(layout.temporary_dir)
            else "after_cleanup"
        ), files
    if await exists(layout.commit_plan_path):
        return ("renaming" if files else "plan_saved"), files
    return "before_plan", files


async def _exists(store: Store, path: str) -> bool:
    try:
        await store.stat(path)
    except FileNotFoundError:
        return False
    return True


async def crash(
    *,
    runs: int,
    spec: JobSpec,
    faults: FaultOptions,
    concurrency: int,
    seed: int,
    workdir: str | None,
    reporter: Reporter,
    max_seconds: float | None = None,
) -> dict[str, Any]:
    """Kill ``runs`` job commits at random points; re-run and verify each."""
    rng = random.Random(seed)
    tmpdir = tempfile.mkdtemp(prefix="aiocommit-crash-tmp-")
    phases: Counter[str] = Counter()
    killed_ops: Counter[str] = Counter()
    modes: Counter[str] = Counter()
    failures: list[str] = []
    kills = completions = attempts = unkilled = leaked = 0
    rerun_seconds: list[float] = []
    started = time.monotonic()
    base = [
        "--concurrency",
        str(concurrency),
        "--latency-ms",
        str(faults.latency_ms),
        "--jitter-ms",
        str(faults.jitter_ms),
    ]
    try:
        async with open_target("local", workdir=workdir) as target:
            store = target.store
            with reporter.live():
                job = await prepare(target, spec, reporter, label="calibration job")
                calibration = await run_child(
                    [*base, "--dest", job.dest, "--job-id", job.job_id],
                    kill_after=None,
                    tmpdir=tmpdir,
                )
                done = [line for line in calibration.lines if line.startswith("DONE")]
                if calibration.returncode != 0 or not done:
                    raise RuntimeError(f"calibration commit failed: {calibration.stderr}")
                _, calls_text, seconds_text = done[0].split()
                calls, seconds = int(calls_text), float(seconds_text)
                check = await verify_output(store, job.dest, [job.expected])
                if not check.ok:
                    raise RuntimeError(f"calibration output wrong: {check.problems}")
                shutil.rmtree(job.dest)
                with reporter.bar("kills", runs) as advance:
                    while kills < runs and attempts < runs * 3:
                        if max_seconds is not None and time.monotonic() - started > max_seconds:
                            break
                        attempts += 1
                        job = await prepare(target, spec, reporter, label=f"job {attempts}")
                        args = [*base, "--dest", job.dest, "--job-id", job.job_id]
                        if attempts % 2:
                            mode = "call"
                            at = rng.randint(1, calls)
                            after = rng.random() < 0.5
                            args += ["--kill-at-call", str(at)] + (["--after"] if after else [])
                            result = await run_child(args, kill_after=None, tmpdir=tmpdir)
                        else:
                            mode = "timer"
                            result = await run_child(
                                args, kill_after=rng.uniform(0, seconds), tmpdir=tmpdir
                            )
                        if result.returncode not in (0, -signal.SIGKILL):
                            failures.append(
                                f"run {attempts}: child exit {result.returncode}: "
                                f"{result.stderr[-500:]}"
                            )
                            continue
                        layout = JobLayout(job.dest, job.job_id)
                        phase, _ = await _state(store, layout)
                        if result.killed:
                            kills += 1
                            modes[mode] += 1
                            phases[phase] += 1
                            advance(1)
                            for line in result.lines:
                                if line.startswith("KILL"):
                                    killed_ops[line.split()[2]] += 1
                        else:
                            unkilled += 1
                        begin = time.perf_counter()
                        try:
                            summary = await commit_job(job.dest, job.job_id, store=store)
                        except Exception as error:
                            failures.append(
                                f"run {attempts} ({mode}, {phase}): re-run failed: "
                                f"{type(error).__name__}: {error}"
                            )
                            continue
                        rerun_seconds.append(time.perf_counter() - begin)
                        outcome = await verify_output(
                            store, job.dest, [job.expected], summary=summary
                        )
                        if outcome.ok:
                            completions += 1
                        else:
                            failures.append(
                                f"run {attempts} ({mode}, {phase}): "
                                + "; ".join(outcome.problems[:5])
                            )
                        shutil.rmtree(job.dest, ignore_errors=True)
                        leftovers = os.listdir(tmpdir)
                        leaked += len(leftovers)
                        for name in leftovers:
                            shutil.rmtree(os.path.join(tmpdir, name), ignore_errors=True)
    finally:
        shutil.rmtree(tmpdir, ignore_errors=True)
    verified = kills + unkilled
    ok = not failures and completions == verified and kills >= runs
    figures = {
        "kills": kills,
        "kills_requested": runs,
        "runs": attempts,
        "children_not_killed": unkilled,
        "correct_completions": completions,
        "failures": failures[:20],
        "kill_modes": dict(modes),
        "kill_phases": dict(phases),
        "killed_at_operation": dict(killed_ops),
        "calibration_calls": calls,
        "calibration_seconds": round(seconds, 4),
        "rerun_seconds_mean": round(sum(rerun_seconds) / len(rerun_seconds), 4)
        if rerun_seconds
        else None,
        "leaked_spill_dirs_from_killed_children": leaked,
        "elapsed_seconds": round(time.monotonic() - started, 1),
    }
    reporter.table(
        grid_table("crash runs: where the kills landed", ["phase", "kills"], sorted(phases.items()))
    )
    reporter.table(
        grid_table("killed at store call", ["operation", "kills"], sorted(killed_ops.items()))
    )
    for failure in failures[:20]:
        reporter.out.print(f"[red]  {failure}")
    reporter.figure(
        f"crash: {kills} kills at random points, {completions} correct completions of "
        f"{verified} re-runs ({unkilled} children finished before their kill); "
        f"{'PASS' if ok else 'FAIL'}"
    )
    return {
        "scenario": "crash",
        "ok": ok,
        "job": spec.describe(),
        "faults": faults.describe(),
        "concurrency": concurrency,
        "figures": figures,
    }


def child_main(argv: list[str]) -> None:
    """``python -m aiocommit_stress crash-child``: parsed by hand to start fast."""
    import argparse

    parser = argparse.ArgumentParser(prog="stress crash-child")
    parser.add_argument("--dest", required=True)
    parser.add_argument("--job-id", required=True)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--latency-ms", type=float, default=0.0)
    parser.add_argument("--jitter-ms", type=float, default=0.0)
    parser.add_argument("--kill-at-call", type=int, default=0)
    parser.add_argument("--after", action="store_true")
    args = parser.parse_args(argv)
    faults = FaultOptions(latency_ms=args.latency_ms, jitter_ms=args.jitter_ms)
    anyio.run(
        child, args.dest, args.job_id, args.concurrency, faults, args.kill_at_call, args.after
    )
