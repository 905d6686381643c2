"""``bench loop``: does a commit keep its caller's event loop from running?

A service embeds aiocommit in its own event loop, so a commit must never hold that loop
for long. A 1 ms ticker runs beside the commits and measures, per gap between two of its
wake-ups, the loop thread's own CPU time (``time.thread_time``: what the loop ran in
that gap; a wait for the GIL or the kernel is not counted) and the wall time. Parts:

* ``local`` / ``cloud``: ``commit_job`` of N files on the local store and on a cloud
  emulator (ADLS or fake-gcs), default options. By default (``--host service``) the
  commits run in a service-like process (``loop_host``: aiohttp's server and client and
  aiocommit loaded, not the harness), which reports the full collections during the
  commit and the longest (each walks every tracked object of the process) and how many
  objects it tracked; ``--host bench`` runs them in the bench's own process, as before
  (it also holds the harness, and the prepared job's N expected entries as structs the
  garbage collector does not track, ``ExpectedFile``). What is measured is the job commit:
  on ADLS the tasks' output files are seeded into the emulator's state in one request
  per task (``/_emulator/seed``) instead of three requests per file, and the task
  commits (listing, manifest) run through the store as ever; fake-gcs has no such call,
  so there every file is written through the store (slow at 100,000).
* ``concurrent``: 8 commits at once in one loop (local store), N/8 files each.
* ``cancel``: commits cancelled at seeded points (``asyncio.timeout``, ``Task.cancel``,
  anyio ``move_on_after`` in turn): the time from the cancel to the return, that no
  process, thread or descriptor is left, and that a re-run finishes the job exactly or
  ``abort_job`` leaves nothing of it.
* ``rss``: 20 commits in one process for each ``processes`` setting, the host making
  cyclic garbage between them as a service does: RSS after each commit; flat when the
  trend (median pairwise slope) over the last half of the commits grows it by at most
  1 MB.
"""

from __future__ import annotations

import asyncio
import gc
import json
import os
import pickle
import random
import shutil
import statistics
import sys
import threading
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import anyio
import anyio.to_thread

from aiocommit import Client, CommitOptions, abort_job, commit_job
from aiocommit.options import option_specs
from aiocommit.protocol.layout import TEMPORARY
from aiocommit.stores.base import opener_of
from aiocommit_stress.jobgen import JobSpec, PreparedJob
from aiocommit_stress.loop_host import HostRequest, commit_beside_ticker
from aiocommit_stress.report import Reporter
from aiocommit_stress.runner import prepare
from aiocommit_stress.scenarios import Common, verdict
from aiocommit_stress.targets import Target, open_target
from aiocommit_stress.verify import verify_output, walk
from aiocommit_testing.ticker import ticking

#: targets the issue sets: the loop thread's CPU per gap, and a cancel's lateness
STALL_TARGET_MS = 50.0
CANCEL_TARGET_MS = 100.0
#: "RSS flat": over the last half of the commits (the first ones warm caches and malloc
#: arenas up), the least-squares trend grows RSS by at most this much in all
RSS_GROWTH_TARGET_MB = 1.0
PART_NAMES = ("local", "cloud", "concurrent", "cancel", "rss", "cloud-cancel", "cloud-rss")


def _spec(files: int, seed: int) -> JobSpec:
    per_task = 100 if files >= 100 else files
    return JobSpec(tasks=max(1, files // per_task), files_per_task=per_task, dirs=10, seed=seed)


async def _check(target: Target, job: PreparedJob) -> bool:
    verification = await verify_output(target.store, job.dest, [job.expected])
    return verification.ok


async def commit_part(
    name: str,
    target: Target,
    files: int,
    options: CommitOptions,
    reporter: Reporter,
    *,
    jobs: int = 1,
    seed: int = 0,
    direct: bool = False,
    host: str = "service",
) -> dict[str, Any]:
    """``jobs`` commits of ``files // jobs`` files each, at once, beside the ticker.
    ``direct``: the tasks' output files are seeded into the emulator's state where the
    target can (ADLS), not written through the store; task commits run as ever.
    ``host``: ``service`` commits in a service-like process (``loop_host``) where the
    store can be opened in another (not the memory store), ``bench`` in this one."""
    if host not in HOSTS:
        raise ValueError(f"host {host!r}: use one of {', '.join(HOSTS)}")
    prepare_started = time.perf_counter()
    prepared = [
        await prepare(
            target, _spec(files // jobs, seed + n), reporter, name=f"{name}-{n}", direct=direct
        )
        for n in range(jobs)
    ]
    prepare_seconds = time.perf_counter() - prepare_started
    seeded = direct and target.seed_files is not None
    opener = opener_of(target.store) if host == "service" else None
    to_commit = [(job.dest, job.job_id) for job in prepared]
    if opener is not None:
        measured = await in_service_host(HostRequest(opener, to_commit, options))
    else:
        measured = await commit_beside_ticker(target.store, to_commit, options)
    ok = all([await _check(target, job) for job in prepared])
    figures = {
        "part": name,
        "store": target.kind,
        "processes": options.processes,
        "files": sum(len(j.expected.files) for j in prepared),
        "jobs": jobs,
        "host": "service" if opener is not None else "bench",
        "prepare_seconds": round(prepare_seconds, 1),
        "outputs_seeded": seeded,
        "verified": ok,
        **measured,
    }
    figures["ok"] = ok and figures["worst_stall_ms"] <= STALL_TARGET_MS
    reporter.log(
        f"{name} ({target.kind}, {figures['files']:,} files, {jobs} job(s), "
        f"processes={options.processes}, {figures['host']} host of "
        f"{figures['host_tracked_objects']:,} tracked objects, a full collection "
        f"{figures['host_full_collection_ms']} ms after): "
        f"{figures['commit_seconds']:.2f} s, worst stall {figures['worst_stall_ms']} ms "
        f"(collecting {figures['worst_stall_collecting_ms']} ms, the rest "
        f"{figures['worst_stall_rest_ms']}; the worst rest of any gap "
        f"{figures['worst_rest_ms']} ms; wall gap {figures['worst_wall_gap_ms']} ms), "
        f"{figures['full_collections']} full "
        f"collections (longest {figures['longest_full_collection_ms']} ms), verified {ok}"
    )
    reporter.log(
        "  worst stall per stage (ms): "
        + ", ".join(f"{stage} {ms}" for stage, ms in figures["stage_worst_stall_ms"].items())
    )
    return figures


#: where ``commit_part`` runs the commits: a service-like process, or the bench's own
HOSTS = ("service", "bench")


async def in_service_host(request: HostRequest) -> dict[str, Any]:
    """``request`` committed by ``python -m aiocommit_stress.loop_host``; its figures."""
    process = await anyio.run_process(
        [sys.executable, "-m", "aiocommit_stress.loop_host"],
        input=pickle.dumps(request),
        check=False,
    )
    if process.returncode != 0:
        tail = process.stderr.decode(errors="replace").strip().splitlines()[-5:]
        raise RuntimeError(f"the loop host failed ({process.returncode}): {' / '.join(tail)}")
    figures: dict[str, Any] = json.loads(process.stdout.decode().splitlines()[-1])
    return figures


# -- cancellation ------------------------------------------------------------------------

CANCEL_WAYS = ("asyncio.timeout", "task.cancel", "anyio.move_on_after")


def _descriptors() -> int:
    return len(os.listdir("/proc/self/fd"))


def _own_threads() -> int:
    """Threads other than anyio's pooled workers (idle ones linger by design)."""
    return sum(1 for t in threading.enumerate() if not t.name.startswith("AnyIO worker"))


def _children() -> list[int]:
    import psutil

    return [p.pid for p in psutil.Process().children(recursive=True)]


@dataclass
class CancelTiming:
    """A cancel's lateness: wall seconds from its due time to the return, and the loop
    thread's own CPU in that time (what the commit ran after the cancel; on a loaded
    machine the wall time also holds the waits for a core)."""

    late: float
    loop_cpu: float


async def _cancelled_commit(
    way: str, delay: float, call: Callable[[], Awaitable[object]]
) -> CancelTiming | None:
    """Run ``call`` and cancel it ``delay`` seconds in, the ``way`` given; how late it
    returned, or None when it finished first."""
    loop = asyncio.get_running_loop()
    due = loop.time() + delay
    at_due: list[float] = []
    timer = loop.call_at(due, lambda: at_due.append(time.thread_time()))

    def timing() -> CancelTiming:
        cpu_at_due = at_due[0] if at_due else time.thread_time()
        return CancelTiming(loop.time() - due, time.thread_time() - cpu_at_due)

    try:
        if way == "asyncio.timeout":
            try:
                async with asyncio.timeout_at(due):
                    await call()
            except TimeoutError:
                return timing()
            return None
        if way == "task.cancel":
            task = asyncio.ensure_future(call())
            loop.call_at(due, task.cancel)
            try:
                await task
            except asyncio.CancelledError:
                return timing()
            return None
        with anyio.move_on_after(delay) as scope:
            await call()
        return timing() if scope.cancelled_caught else None
    finally:
        timer.cancel()


async def cancel_part(
    target: Target, files: int, points: int, options: CommitOptions, reporter: Reporter, seed: int
) -> dict[str, Any]:
    """Commits cancelled at ``points`` seeded times over an uncancelled commit's span;
    each on a job as prepared (``_restorable``: a hard-linked copy on the local store, a
    new job with seeded outputs on ADLS)."""
    restore = await _restorable(target, files, seed, "cancel", reporter)
    job = await restore()
    started = time.perf_counter()
    await commit_job(job.dest, job.job_id, store=target.store, options=options)
    span = time.perf_counter() - started
    rng = random.Random(seed)
    runs: list[dict[str, Any]] = []

    with reporter.bar(f"cancelling commits, processes={options.processes}", points) as advance:
        for point in range(points):
            job = await restore()

            def call(job: PreparedJob = job) -> Awaitable[object]:
                return commit_job(job.dest, job.job_id, store=target.store, options=options)

            way = CANCEL_WAYS[point % len(CANCEL_WAYS)]
            delay = rng.uniform(0.0, 1.1 * span)
            fds, threads, before = _descriptors(), _own_threads(), set(_children())
            async with ticking() as ticker:
                late = await _cancelled_commit(way, delay, call)
            children = [pid for pid in _children() if pid not in before]  # not the emulator's
            fds_left, threads_left = _descriptors() - fds, _own_threads() - threads
            # half the points are finished by a re-run, half undone by abort
            if late is None or point % 2 == 0:
                await call()
                clean = await _check(target, job)
                after = "re-run exact" if clean else "re-run NOT exact"
            elif await _committed(target, job):  # the cancel landed past the commit point
                await call()  # finishes what the cancel left: the _SUCCESS, the clean-up
                clean = await _check(target, job)
                after = "committed before the cancel, exact" if clean else "committed, NOT exact"
            else:
                await abort_job(job.dest, job.job_id, store=target.store, options=options)
                clean = await _nothing_left(target, job)
                after = "abort clean" if clean else "abort NOT clean"
            runs.append(
                {
                    "point": point,
                    "way": way,
                    "at_s": round(delay, 3),
                    "late_ms": None if late is None else round(late.late * 1000, 1),
                    "late_loop_cpu_ms": None if late is None else round(late.loop_cpu * 1000, 1),
                    "worst_stall_ms": ticker.figures()["worst_stall_ms"],
                    "after": after,
                    # a cloud store client keeps a pool of connections: its descriptors
                    # come and go with it, and are reported, not judged
                    "clean": clean
                    and not children
                    and (fds_left <= 0 or target.local_root is None)
                    and threads_left <= 0,
                    "leftovers": {
                        "processes": children,
                        "descriptors": fds_left,
                        "threads": threads_left,
                    },
                }
            )
            advance(1)
    lates = [r["late_ms"] for r in runs if r["late_ms"] is not None]
    worst = max(lates, default=0.0)
    worst_cpu = max((r["late_loop_cpu_ms"] for r in runs if r["late_ms"] is not None), default=0.0)
    by_way = {way: _lateness(runs, way) for way in CANCEL_WAYS}
    figures: dict[str, Any] = {
        "part": "cancel",
        "store": target.kind,
        "processes": options.processes,
        "files": len(job.expected.files),
        "uncancelled_seconds": round(span, 2),
        "points": points,
        "cancelled": len(lates),
        "worst_cancel_ms": worst,
        "median_cancel_ms": round(statistics.median(lates), 1) if lates else None,
        "worst_cancel_loop_cpu_ms": worst_cpu,
        "worst_stall_ms": max((r["worst_stall_ms"] for r in runs), default=0.0),
        "by_way": by_way,
        "all_clean": all(r["clean"] for r in runs),
        "runs": runs,
    }
    figures["ok"] = figures["all_clean"] and worst <= CANCEL_TARGET_MS
    reporter.log(
        f"cancel ({target.kind}, {figures['files']:,} files, processes={options.processes}): "
        f"{len(lates)} of {points} "
        f"cancelled, worst {worst} ms late (median {figures['median_cancel_ms']}; loop CPU "
        f"after the cancel at most {worst_cpu} ms), worst "
        f"stall {figures['worst_stall_ms']} ms, all clean {figures['all_clean']}"
    )
    for way, lateness in by_way.items():
        reporter.log(
            f"  {way}: {lateness['cancelled']} cancelled, worst {lateness['worst_ms']} ms late "
            f"(median {lateness['median_ms']}; loop CPU after the cancel at most "
            f"{lateness['worst_loop_cpu_ms']} ms)"
        )
    return figures


def _lateness(runs: list[dict[str, Any]], way: str) -> dict[str, Any]:
    """The cancels made ``way``: how many, the worst and median lateness, and the loop
    thread's worst CPU after a cancel."""
    cancelled = [r for r in runs if r["way"] == way and r["late_ms"] is not None]
    lates = [r["late_ms"] for r in cancelled]
    return {
        "cancelled": len(lates),
        "worst_ms": max(lates, default=0.0),
        "median_ms": round(statistics.median(lates), 1) if lates else None,
        "worst_loop_cpu_ms": max((r["late_loop_cpu_ms"] for r in cancelled), default=0.0),
    }


async def _restorable(
    target: Target, files: int, seed: int, name: str, reporter: Reporter
) -> Callable[[], Awaitable[PreparedJob]]:
    """A function that gives a job as prepared, for a commit each call. On the local
    store one job prepared once, put back by hard links of its files (a restore takes a
    fraction of a preparation); on ADLS a new job each call, its task outputs seeded
    into the emulator (``prepare(direct=True)``), the previous job's tree deleted."""
    if target.local_root is not None:
        return await _linked(target, files, seed, name, reporter)
    if target.seed_files is None:
        raise ValueError(f"the {name} part needs the local store or ADLS (seeded jobs)")
    previous: list[PreparedJob] = []

    async def fresh() -> PreparedJob:
        for old in previous:
            await target.store.delete(old.dest, recursive=True)
        previous.clear()
        job = await prepare(target, _spec(files, seed), reporter, name=name, direct=True)
        previous.append(job)
        return job

    return fresh


async def _linked(
    target: Target, files: int, seed: int, name: str, reporter: Reporter
) -> Callable[[], Awaitable[PreparedJob]]:
    job = await prepare(target, _spec(files, seed), reporter, name=name)
    pristine = job.dest + "-pristine"
    await anyio.to_thread.run_sync(_link_tree, job.dest, pristine)

    async def restore() -> PreparedJob:
        # in child processes where there are GNU tools: the bench's own scaffolding
        # (lists of every name, in a pooled thread's malloc arena) stays out of the RSS
        # measured here
        if _CP is not None and _RM is not None:
            await anyio.run_process([_RM, "-rf", job.dest])
            await anyio.run_process([_CP, "-al", pristine, job.dest])
        else:
            await anyio.to_thread.run_sync(_restore, pristine, job.dest)
        return job

    return restore


async def _committed(target: Target, job: PreparedJob) -> bool:
    """Whether ``job``'s commit passed its commit point: its state is ``committed`` (its
    plan says so, or the destination's ``_SUCCESS`` is its own). A re-run finishes such
    a job (its ``_SUCCESS``, its clean-up); an abort would only clean it up, its output
    staying in place (``docs/protocol.md``)."""
    async with Client(job.dest, store=target.store) as client:
        return (await client.job(job.job_id).info()).state == "committed"


async def _nothing_left(target: Target, job: PreparedJob) -> bool:
    """After an abort: none of the job's files in the destination, no ``_temporary``."""
    landed = await walk(target.store, job.dest)
    return not any(p in job.expected.files or p.startswith(TEMPORARY) for p in landed)


# -- RSS over many commits -----------------------------------------------------------------


class _Node:
    def __init__(self) -> None:
        self.me = self  # a cycle: only the garbage collector frees it
        self.payload = bytearray(64)


def _host_garbage(count: int = 20_000) -> None:
    """What a service leaves between requests: cyclic garbage not yet collected."""
    for _ in range(count):
        _Node()


def _rss_mb() -> float:
    import psutil

    return float(psutil.Process().memory_info().rss) / 2**20


async def rss_part(
    target: Target,
    files: int,
    commits: int,
    settings: list[int],
    base: CommitOptions,
    reporter: Reporter,
) -> dict[str, Any]:
    """``commits`` commits of one job shape per ``processes`` setting, in this process,
    each on a hard-linked copy of one prepared job."""
    results: dict[str, Any] = {}
    for processes in settings:
        options = base.with_values(processes=processes)
        restore = await _restorable(target, files, processes, f"rss-{processes}", reporter)
        samples: list[float] = []
        with reporter.bar(f"commits, processes={processes}", commits) as advance:
            for _ in range(commits):
                job = await restore()
                _host_garbage()
                await commit_job(job.dest, job.job_id, store=target.store, options=options)
                samples.append(_rss_mb())
                advance(1)
        results[str(processes)] = figures = rss_figures(samples)
        reporter.log(
            f"rss ({target.kind}, {files:,} files) processes={processes}: "
            f"{samples[0]:.1f} -> {samples[-1]:.1f} MB over "
            f"{commits} commits; last {figures['tail_commits']}: "
            f"{figures['slope_mb_per_commit']:+.3f} MB per commit, "
            f"{figures['tail_growth_mb']:+.2f} MB in all (flat: <= {RSS_GROWTH_TARGET_MB:g}; "
            f"least squares {figures['tail_growth_least_squares_mb']:+.2f}); "
            "per commit: " + " ".join(f"{sample:.1f}" for sample in samples)
        )
    return {
        "part": "rss",
        "store": target.kind,
        "files": files,
        "commits": commits,
        "settings": results,
        "ok": all(r["flat"] for r in results.values()),
    }


def rss_figures(samples: list[float]) -> dict[str, Any]:
    """RSS after each commit, judged over the last half (the first commits warm caches
    and malloc arenas up): the trend's slope, times the commits, is the growth; flat when
    it is at most ``RSS_GROWTH_TARGET_MB``.

    The slope is the median of the slopes between every two samples (Theil-Sen), not the
    least-squares one: RSS right after a commit is sometimes 1.7 MB higher for that one
    commit (freed memory not yet returned; the next commit is back on the line), and one
    such sample near the end moved the least-squares growth over 10 commits by up to
    0.9 MB. A steady leak moves every pairwise slope, so the median shows it in full.
    The least-squares figure is reported beside it."""
    tail = samples[len(samples) // 2 :] if len(samples) >= 4 else samples
    slope = _median_slope(tail)
    growth = slope * len(tail)
    return {
        "rss_first_mb": round(samples[0], 1),
        "rss_last_mb": round(samples[-1], 1),
        "tail_commits": len(tail),
        "slope_mb_per_commit": round(slope, 3),
        "tail_growth_mb": round(growth, 2),
        "tail_growth_least_squares_mb": round(_least_squares_slope(tail) * len(tail), 2),
        "flat": growth <= RSS_GROWTH_TARGET_MB,
        "rss_mb": [round(sample, 1) for sample in samples],
    }


def _median_slope(values: list[float]) -> float:
    slopes = [
        (values[j] - values[i]) / (j - i)
        for i in range(len(values))
        for j in range(i + 1, len(values))
    ]
    return statistics.median(slopes) if slopes else 0.0


def _least_squares_slope(values: list[float]) -> float:
    if len(values) < 2:
        return 0.0
    return statistics.linear_regression(range(len(values)), values).slope


_CP, _RM = shutil.which("cp"), shutil.which("rm")


def _link_tree(source: str, copy: str) -> None:
    shutil.copytree(source, copy, copy_function=os.link)


def _restore(pristine: str, dest: str) -> None:
    shutil.rmtree(dest, ignore_errors=True)
    shutil.copytree(pristine, dest, copy_function=os.link)


# -- the benchmark -----------------------------------------------------------------------


async def loop_bench(
    common: Common,
    parts: list[str],
    *,
    files: int,
    cloud: str,
    cloud_files: int,
    jobs: int,
    cancel_points: int,
    cancel_files: int,
    rss_files: int,
    rss_commits: int,
    rss_processes: list[int],
    options: CommitOptions,
    seed: int,
    reporter: Reporter,
    processes: list[int] | None = None,
    host: str = "service",
) -> dict[str, Any]:
    """The parts asked for (the commit parts in ``host``: see ``commit_part``); ``local``,
    ``cloud``, ``concurrent`` and the two cancel parts
    once per ``processes`` setting (by default ``options``' own), the RSS parts once
    per ``rss_processes`` setting. The cloud parts commit ``cloud_files`` files."""
    results: list[dict[str, Any]] = []
    settings = [options.with_values(processes=p) for p in processes or [options.processes]]
    gc.collect()
    with reporter.live():
        if {"local", "concurrent", "cancel", "rss"} & set(parts):
            async with open_target("local", workdir=common.workdir, keep=common.keep) as target:
                for each in settings:
                    if "local" in parts:
                        results.append(
                            await commit_part("local", target, files, each, reporter, host=host)
                        )
                    if "concurrent" in parts:
                        results.append(
                            await commit_part(
                                "concurrent",
                                target,
                                files,
                                each,
                                reporter,
                                jobs=jobs,
                                seed=seed,
                                host=host,
                            )
                        )
                    if "cancel" in parts:
                        results.append(
                            await cancel_part(
                                target, cancel_files, cancel_points, each, reporter, seed
                            )
                        )
                if "rss" in parts:
                    results.append(
                        await rss_part(
                            target, rss_files, rss_commits, rss_processes, options, reporter
                        )
                    )
        if {"cloud", "cloud-cancel", "cloud-rss"} & set(parts):
            async with open_target(cloud, keep=common.keep) as target:
                for each in settings:
                    if "cloud" in parts:
                        results.append(
                            await commit_part(
                                "cloud", target, cloud_files, each, reporter, direct=True, host=host
                            )
                        )
                    if "cloud-cancel" in parts:
                        cancelled = await cancel_part(
                            target, cloud_files, cancel_points, each, reporter, seed
                        )
                        results.append({**cancelled, "part": "cloud-cancel"})
                if "cloud-rss" in parts:
                    measured = await rss_part(
                        target, cloud_files, rss_commits, rss_processes, options, reporter
                    )
                    results.append({**measured, "part": "cloud-rss"})
    stalls = [r["worst_stall_ms"] for r in results if "worst_stall_ms" in r]
    cancels = [r["worst_cancel_ms"] for r in results if "worst_cancel_ms" in r]
    ok = all(r["ok"] for r in results)
    headline = []
    if stalls:
        headline.append(f"worst stall {max(stalls)} ms (target <= {STALL_TARGET_MS:g})")
    if cancels:
        cpu = max(r["worst_cancel_loop_cpu_ms"] for r in results if "worst_cancel_ms" in r)
        headline.append(
            f"worst cancel {max(cancels)} ms late, {cpu} ms of loop CPU after it "
            f"(target <= {CANCEL_TARGET_MS:g})"
        )
    for result in results:
        if result["part"] in ("rss", "cloud-rss"):
            growths = ", ".join(
                f"processes={p}: {r['tail_growth_mb']:+.2f} MB over the last {r['tail_commits']}"
                for p, r in result["settings"].items()
            )
            headline.append(
                f"RSS ({result['store']}) {growths} commits (flat: <= {RSS_GROWTH_TARGET_MB:g})"
            )
    reporter.figure(f"bench loop: {'; '.join(headline)}; {verdict(ok)}")
    return {
        "scenario": "bench-loop",
        "ok": ok,
        "options": {
            spec.name: options.value(spec)
            for spec in option_specs()
            if options.value(spec) is not None
        },
        "results": results,
    }
