"""Job commit at a store's rate limit, over real HTTP (issue 22's throttling front).

``aiocommit stress bench throttled --store adls|gcs|s3 --rate R``: a job of ``files`` files
is prepared past the proxy (set-up, tasks, task commits), then committed through the chaos
proxy in rate mode (a token bucket of ``R`` requests a second per ADLS account, GCS bucket
or S3 key prefix, throttling the rest in the store's own format) with default options.
Prints files/s and store requests/s against ``R``, the throttled share of requests and
retries per file; the output is checked directly.
"""

from __future__ import annotations

import time
from typing import Any

import anyio

from aiocommit.engine.job import commit_job, setup_job
from aiocommit.engine.s3a import (
    commit_magic_task,
    commit_s3_job,
    setup_magic_task,
    setup_s3_job,
    write_magic_file,
)
from aiocommit.engine.task import commit_task, setup_task
from aiocommit.options import CommitOptions
from aiocommit.protocol import statistics as S
from aiocommit.stores.base import Store
from aiocommit.stress.chaos import chaos_target, check_destination
from aiocommit.testing.chaos_proxy import Chaos, RateScope, StoreKind

#: where each store applies its request-rate limit
SCOPES: dict[str, RateScope] = {"adls": "account", "gcs": "bucket", "s3": "prefix"}


async def _prepare(kind: StoreKind, store: Store, dest: str, tasks: int, files: int) -> str:
    """Set up a job and commit ``tasks`` tasks of ``files // tasks`` files, past the proxy."""
    per_task = max(1, files // tasks)
    limiter = anyio.CapacityLimiter(64)
    if kind == "s3":
        job_id = await setup_s3_job(dest, store=store)
    else:
        job_id = await setup_job(dest, store=store)

    async def task(number: int) -> None:
        names = [f"part={n % 8}/part-{number:05d}-{n:05d}.dat" for n in range(per_task)]
        if kind == "s3":
            magic = await setup_magic_task(dest, job_id, number, 0, store=store)

            async def upload(name: str) -> None:
                async with limiter:
                    await write_magic_file(magic, name, name.encode(), store=store)

            async with anyio.create_task_group() as group:
                for name in names:
                    group.start_soon(upload, name)
            await commit_magic_task(magic, store=store)
            return
        attempt = await setup_task(dest, job_id, number, 0, store=store)

        async def write(name: str) -> None:
            async with limiter:
                await store.write_bytes(attempt.path(name), name.encode())

        async with anyio.create_task_group() as group:
            for name in names:
                group.start_soon(write, name)
        await commit_task(attempt, store=store)

    async with anyio.create_task_group() as group:
        for number in range(tasks):
            group.start_soon(task, number)
    return job_id


async def throttled_bench(
    kind: StoreKind, *, rate: float, files: int, tasks: int, reporter: Any
) -> dict[str, Any]:
    chaos = Chaos(rate=None, rate_scope=SCOPES[kind], enforce=True)
    async with chaos_target(kind, chaos) as target:
        dest = "/throttled/out"
        reporter.log(f"{kind}: preparing {files} files in {tasks} tasks past the proxy")
        job_id = await _prepare(kind, target.direct, dest, tasks, files)
        expected = {
            f"part={n % 8}/part-{t:05d}-{n:05d}.dat": f"part={n % 8}/part-{t:05d}-{n:05d}.dat"
            for t in range(tasks)
            for n in range(max(1, files // tasks))
        }
        target.proxy.counts.clear()
        chaos.rate = rate
        options = CommitOptions()
        begin = time.perf_counter()
        if kind == "s3":
            summary = await commit_s3_job(dest, job_id, store=target.store, options=options)
        else:
            summary = await commit_job(dest, job_id, store=target.store, options=options)
        seconds = time.perf_counter() - begin
        chaos.rate = None
        problems = await check_destination(
            target, dest, {name: data.encode() for name, data in expected.items()}
        )
    counts = target.proxy.counts
    committed = len(expected)
    requests = counts["requests"]
    counters = summary.iostatistics.counters
    figures = {
        "store": kind,
        "rate": rate,
        "files": committed,
        "seconds": round(seconds, 2),
        "files_per_second": round(committed / seconds, 1),
        "requests_per_second": round(requests / seconds, 1),
        "of_rate": round(requests / seconds / rate, 3),
        "throttled_share": round(counts["rate_throttled"] / requests, 4) if requests else 0.0,
        "retries_per_file": round(counters.get(S.STORE_IO_RETRY, 0) / committed, 3),
        "problems": problems,
    }
    reporter.figure(
        f"throttled {kind} at {rate:g} req/s: {figures['files_per_second']} files/s, "
        f"{figures['requests_per_second']} req/s ({figures['of_rate']:.2f} of R), "
        f"{figures['throttled_share']:.1%} throttled, {figures['retries_per_file']} retries/file"
        f"; {'PASS' if not problems else 'FAIL: ' + problems[0]}"
    )
    return {"scenario": "bench throttled", "ok": not problems, "figures": figures}
