"""Job commit through a front that throttles a fixed share of requests at random (issue 37).

``aiocommit stress bench random-throttle``: on each store (ADLS emulator, fake-gcs-server,
moto), each behind its own chaos proxy, jobs of ``files`` files are prepared past the proxy;
then, for each share (0, then 20 % and 30 % by default), one job per store is committed
through its proxy with default options, the stores in parallel (the load of the issue's
run: three commits at once). The emulators and the proxies run in child processes, as a
remote store's servers would: this process's event loop runs only the three commits, so
what is timed is the committer, not the harness serving the other stores' retries. The
proxy answers that share of requests at random with the store's own throttling response
(ADLS ``503 ServerBusy``, GCS ``429`` / ``503``, S3 ``503 SlowDown``), independent of the
pace: cutting concurrency or the rate does not cut the share.

``retry_after_share`` of those answers carry ``Retry-After: 1``; by default none, as the
stores answer (the issue asks for each store's throttle response): Azure Storage documents
no ``Retry-After`` on its data plane's ``503 ServerBusy``, and S3's ``503 SlowDown`` and
GCS's ``429`` / ``503`` come without one (``../shared/notes/stores.md``). ``0.5`` is the
harder case, the engine honouring a server's asked pause.

Prints, per store and share, the commit's seconds and its ratio to the same store's
unthrottled commit in the same run; the target is at most ``target`` (3×). The output is
checked directly.
"""

from __future__ import annotations

import os
import time
from contextlib import AsyncExitStack
from typing import Any

import anyio

from aiocommit.client.job import commit_job
from aiocommit.options import CommitOptions
from aiocommit.protocol import statistics as S
from aiocommit_stress.chaos import ChildChaosTarget, check_destination, child_chaos_target
from aiocommit_stress.throttled import PARTITIONS, _names, _prepare
from aiocommit_testing.chaos_proxy import KINDS, Chaos, StoreKind

#: the issue's throttled shares
SHARES = (0.2, 0.3)
#: most seconds a throttled commit may take, as a multiple of the unthrottled one
TARGET = 3.0


async def _commit(
    target: ChildChaosTarget, dest: str, job_id: str
) -> tuple[float, dict[str, float]]:
    """Commit through the proxy with default options: seconds, and the job's counters
    with what its calls slept: ``backoff_seconds`` (retries' backoff, summed over the
    calls), ``backoff_most_seconds`` (the longest one), ``paced_seconds`` (turns waited
    at the adaptive rate, summed), and its ``peak_in_flight`` and final
    ``concurrency_limit``."""
    begin = time.perf_counter()
    summary = await commit_job(dest, job_id, store=target.store, options=CommitOptions())
    seconds = time.perf_counter() - begin
    stats = summary.iostatistics
    figures: dict[str, float] = dict(stats.counters)
    means = stats.meanstatistics
    backoff = means.get(S.STORE_IO_BACKOFF + ".mean")
    paced = means.get(S.STORE_IO_RATE_LIMITED + ".mean")
    figures["backoff_seconds"] = backoff.sum / 1000 if backoff else 0.0
    figures["backoff_most_seconds"] = (
        max(0, stats.maximums.get(S.STORE_IO_BACKOFF + ".max", 0)) / 1000
    )
    figures["paced_seconds"] = paced.sum / 1000 if paced else 0.0
    figures["peak_in_flight"] = stats.gauges.get(S.STORE_IO_CONCURRENCY_PEAK, 0)
    figures["concurrency_limit"] = stats.gauges.get(S.STORE_IO_CONCURRENCY_LIMIT, 0)
    return seconds, figures


async def random_throttle_bench(
    *,
    stores: tuple[StoreKind, ...] = KINDS,
    shares: tuple[float, ...] = SHARES,
    files: int = 1000,
    tasks: int = 10,
    target: float = TARGET,
    seed: int = 0,
    retry_after_share: float = 0.0,
    reporter: Any,
) -> dict[str, Any]:
    """Run the bench (see the module docstring); ``retry_after_share``: the share of
    throttle answers carrying ``Retry-After: 1`` (none by default, as the stores answer)."""
    levels = (0.0, *shares)
    chaos = Chaos(seed=seed, enforce=True, retry_after_share=retry_after_share)
    expected = {name: data.encode() for name, data in _names(tasks, files, PARTITIONS).items()}
    rows: list[dict[str, Any]] = []
    problems: list[str] = []
    async with AsyncExitStack() as stack:
        targets: dict[StoreKind, ChildChaosTarget] = {}
        for kind in stores:
            targets[kind] = await stack.enter_async_context(child_chaos_target(kind, chaos))
        await _run(targets, levels, files, tasks, target, expected, rows, problems, reporter)
    verdict = "PASS" if not problems else "FAIL: " + "; ".join(problems)
    reporter.figure(f"random throttles, {files} files per commit: {verdict}")
    return {
        "scenario": "bench random-throttle",
        "ok": not problems,
        "figures": {"files": files, "target": target, "rows": rows, "problems": problems},
    }


async def _run(
    targets: dict[StoreKind, ChildChaosTarget],
    levels: tuple[float, ...],
    files: int,
    tasks: int,
    target: float,
    expected: dict[str, bytes],
    rows: list[dict[str, Any]],
    problems: list[str],
    reporter: Any,
) -> None:
    """Prepare the jobs, then commit them one share at a time, the stores in parallel;
    appends a row per commit to ``rows`` and what failed to ``problems``."""
    stores = tuple(targets)
    jobs: dict[tuple[StoreKind, float], tuple[str, str]] = {}

    async def prepare(kind: StoreKind) -> None:
        for share in levels:
            dest = f"/random-throttle/{int(share * 100)}"
            job_id = await _prepare(kind, targets[kind].direct, dest, tasks, files, PARTITIONS)
            jobs[kind, share] = (dest, job_id)

    reporter.log(
        f"preparing {len(levels)} jobs of {files} files on {', '.join(stores)} (in parallel)"
    )
    async with anyio.create_task_group() as group:
        for kind in stores:
            group.start_soon(prepare, kind)
    base: dict[StoreKind, float] = {}
    for share in levels:
        load = os.getloadavg()[0]
        done: dict[StoreKind, tuple[float, dict[str, float], dict[str, int]]] = {}

        async def commit(kind: StoreKind, share: float, done: dict[StoreKind, Any]) -> None:
            proxy = targets[kind].proxy
            dest, job_id = jobs[kind, share]
            seconds, counters = await _commit(targets[kind], dest, job_id)
            counts = dict(await proxy.counts())
            await proxy.update(throttle=0.0)
            done[kind] = (seconds, counters, counts)

        async def throttle(kind: StoreKind, share: float) -> None:
            await targets[kind].proxy.update(throttle=share)
            await targets[kind].proxy.clear_counts()

        async with anyio.create_task_group() as group:  # every store set before any commit
            for kind in stores:
                group.start_soon(throttle, kind, share)
        async with anyio.create_task_group() as group:
            for kind in stores:
                group.start_soon(commit, kind, share, done)
        for kind in stores:
            seconds, counters, counts = done[kind]
            dest, _ = jobs[kind, share]
            found = await check_destination(targets[kind], dest, expected)
            problems += [f"{kind} {share:.0%}: {problem}" for problem in found]
            if share == 0.0:
                base[kind] = seconds
            ratio = seconds / base[kind]
            requests = counts.get("requests", 0)
            row = {
                "store": kind,
                "share": share,
                "seconds": round(seconds, 2),
                "ratio": round(ratio, 2),
                "files_per_second": round(len(expected) / seconds, 1),
                "requests": requests,
                "throttled": counts.get("throttled", 0),
                "retries": counters.get(S.STORE_IO_RETRY, 0),
                "concurrency_decreases": counters.get(S.STORE_IO_CONCURRENCY_DECREASED, 0),
                "rate_decreases": counters.get(S.STORE_IO_RATE_DECREASED, 0),
                "backoff_seconds": round(counters["backoff_seconds"], 1),
                "backoff_most_seconds": round(counters["backoff_most_seconds"], 2),
                "paced_seconds": round(counters["paced_seconds"], 1),
                "peak_in_flight": counters["peak_in_flight"],
                "concurrency_limit": counters["concurrency_limit"],
                "load": round(load, 1),
            }
            rows.append(row)
            if share and ratio > target:
                problems.append(f"{kind} at {share:.0%} throttled: {ratio:.2f}x > {target}x")
            reporter.figure(
                f"{kind} {share:.0%} throttled: {seconds:.2f} s ({ratio:.2f}x unthrottled), "
                f"{row['files_per_second']} files/s, {row['throttled']} of {requests} "
                f"requests throttled, {row['retries']} retries, "
                f"{row['concurrency_decreases']} concurrency / {row['rate_decreases']} rate "
                f"decreases, slept {row['backoff_seconds']} s in backoff (longest "
                f"{row['backoff_most_seconds']} s) and {row['paced_seconds']} s paced "
                f"(summed over calls), in flight at most {row['peak_in_flight']}, limit "
                f"{row['concurrency_limit']} at the end (load {load:.1f})"
            )
