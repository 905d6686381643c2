"""Job commit at a store's rate limit, over real HTTP (issue 22's throttling front).

``aiocommit stress bench throttled --store adls|gcs|s3 --rate R``: two jobs are prepared past
the proxy (set-up, tasks, task commits); the first is committed through the proxy with no
limit (this machine's and emulator's unthrottled capacity, measured in the same run), the
second through the chaos proxy in rate mode: a token bucket of ``R`` requests a second per
ADLS account, GCS bucket or S3 key prefix, throttling the rest in the store's own format
(half of the answers with ``Retry-After: 1``), with default options. ``halve_at``: the
store tightens to ``R / 2`` that many seconds into the commit.

Prints files/s, and store requests/s admitted against what the bucket allowed (``R`` per
scope; on S3 the job's files spread over ``partitions`` prefixes, each its own bucket), the
throttled share of requests and retries per file; records a timeline (files and requests
per interval) for the plot. The output is checked directly.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import anyio

from aiocommit.client.job import commit_job, setup_job
from aiocommit.client.task import commit_task, setup_task
from aiocommit.committers.common.context import Progress
from aiocommit.options import CommitOptions
from aiocommit.protocol import statistics as S
from aiocommit.stores.base import Store
from aiocommit_stress.chaos import ChaosTarget, chaos_target, check_destination
from aiocommit_stress.report import plot
from aiocommit_testing.chaos_proxy import Chaos, RateScope, StoreKind

#: where each store applies its request-rate limit
SCOPES: dict[str, RateScope] = {"adls": "account", "gcs": "bucket", "s3": "prefix"}
#: partition directories the files spread over by default (on S3, each a prefix with its
#: own limit)
PARTITIONS = 8
#: seconds between timeline samples
SAMPLE_SECONDS = 0.5


def _names(tasks: int, files: int, partitions: int) -> dict[str, str]:
    return {
        f"part={n % partitions}/part-{t:05d}-{n:05d}.dat": f"{t}/{n}"
        for t in range(tasks)
        for n in range(max(1, files // tasks))
    }


async def _prepare(
    kind: StoreKind, store: Store, dest: str, tasks: int, files: int, partitions: int
) -> str:
    """Set up a job and commit ``tasks`` tasks of ``files // tasks`` files, past the proxy."""
    per_task = max(1, files // tasks)
    limiter = anyio.CapacityLimiter(64)
    magic = CommitOptions(committer="magic") if kind == "s3" else None
    job_id = await setup_job(dest, store=store, options=magic)

    async def task(number: int) -> None:
        names = [f"part={n % partitions}/part-{number:05d}-{n:05d}.dat" for n in range(per_task)]
        if kind == "s3":
            streaming = await setup_task(dest, job_id, number, 0, store=store)

            async def upload(name: str, n: int) -> None:
                async with limiter:
                    await streaming.write_bytes(name, f"{number}/{n}".encode(), store=store)

            async with anyio.create_task_group() as group:
                for n, name in enumerate(names):
                    group.start_soon(upload, name, n)
            await commit_task(streaming, store=store)
            return
        attempt = await setup_task(dest, job_id, number, 0, store=store)

        async def write(name: str, n: int) -> None:
            async with limiter:
                await store.write_bytes(attempt.path(name), f"{number}/{n}".encode())

        async with anyio.create_task_group() as group:
            for n, name in enumerate(names):
                group.start_soon(write, name, n)
        await commit_task(attempt, store=store)

    async with anyio.create_task_group() as group:
        for number in range(tasks):
            group.start_soon(task, number)
    return job_id


class _Timeline:
    """Samples files committed (from the commit's progress) and the proxy's counts."""

    def __init__(self, target: ChaosTarget, chaos: Chaos) -> None:
        self.target, self.chaos = target, chaos
        self.begin = time.perf_counter()
        self.files = 0
        self.rows: list[dict[str, float]] = []
        self.halved_row: int | None = None

    def progress(self, report: Progress) -> None:
        if report.unit == "files":
            self.files = max(self.files, report.files_done)

    def sample(self) -> None:
        counts = self.target.proxy.counts
        self.rows.append(
            {
                "t": round(time.perf_counter() - self.begin, 3),
                "files": self.files,
                "requests": counts["requests"],
                "throttled": counts["rate_throttled"],
                "rate": self.chaos.rate or 0.0,
            }
        )

    async def run(self) -> None:
        while True:
            self.sample()
            await anyio.sleep(SAMPLE_SECONDS)


async def _commit(
    target: ChaosTarget,
    chaos: Chaos,
    dest: str,
    job_id: str,
    *,
    rate: float | None,
    halve_at: float | None,
) -> tuple[float, Any, _Timeline, float]:
    """Commit through the proxy at ``rate`` (None: no limit), halving it at ``halve_at``
    seconds; the seconds taken, the summary, the timeline and when the halving happened."""
    target.proxy.counts.clear()
    target.proxy.buckets = type(target.proxy.buckets)()  # full buckets at the start
    chaos.rate = rate
    timeline = _Timeline(target, chaos)
    halved = float("inf")

    async def halve() -> None:
        nonlocal halved
        assert halve_at is not None and rate is not None
        await anyio.sleep(halve_at)
        timeline.sample()  # the counts at the halving
        chaos.rate = rate / 2
        halved = time.perf_counter() - timeline.begin
        timeline.halved_row = len(timeline.rows) - 1

    async with anyio.create_task_group() as group:
        group.start_soon(timeline.run)
        if halve_at is not None and rate is not None:
            group.start_soon(halve)
        summary = await commit_job(
            dest, job_id, store=target.store, options=CommitOptions(), progress=timeline.progress
        )
        seconds = time.perf_counter() - timeline.begin
        group.cancel_scope.cancel()
    timeline.sample()
    chaos.rate = None
    return seconds, summary, timeline, halved


def _phases(timeline: _Timeline, allowed: float) -> list[dict[str, Any]]:
    """Figures before and after the halving (one phase without it), from the timeline."""
    rows = timeline.rows
    cut = timeline.halved_row
    spans = [("whole", rows[0], rows[-1], allowed)]
    if cut is not None:
        spans = [
            ("before halving", rows[0], rows[cut], allowed),
            ("after halving", rows[cut], rows[-1], allowed / 2),
        ]
    phases = []
    for name, first, last, limit in spans:
        seconds = max(last["t"] - first["t"], 1e-3)
        requests = last["requests"] - first["requests"]
        throttled = last["throttled"] - first["throttled"]
        phases.append(
            {
                "phase": name,
                "seconds": round(seconds, 2),
                "limit": limit,
                "files_per_second": round((last["files"] - first["files"]) / seconds, 1),
                "admitted_per_second": round((requests - throttled) / seconds, 1),
                "of_rate": round((requests - throttled) / seconds / limit, 3),
                "throttled_share": round(throttled / requests, 4) if requests else 0.0,
            }
        )
    return phases


async def throttled_bench(
    kind: StoreKind,
    *,
    rate: float,
    files: int,
    tasks: int,
    reporter: Any,
    halve_at: float | None = None,
    capacity_files: int = 2000,
    partitions: int = PARTITIONS,
    out: Path | None = None,
) -> dict[str, Any]:
    """Run the bench (see the module docstring); with ``out``, also plot files/s against
    time into ``out/throttled-<store>.png``."""
    chaos = Chaos(rate=None, rate_scope=SCOPES[kind], enforce=True)
    scopes = partitions if kind == "s3" else 1
    async with chaos_target(kind, chaos) as target:
        probe_dest, dest = "/throttled/capacity", "/throttled/out"
        capacity_files = max(tasks, min(files, capacity_files))
        reporter.log(
            f"{kind}: preparing {capacity_files} + {files} files in {tasks} tasks past the proxy"
        )
        probe_job = await _prepare(
            kind, target.direct, probe_dest, tasks, capacity_files, partitions
        )
        job_id = await _prepare(kind, target.direct, dest, tasks, files, partitions)
        probe_seconds, _, probe_line, _ = await _commit(
            target, chaos, probe_dest, probe_job, rate=None, halve_at=None
        )
        probe_requests = probe_line.rows[-1]["requests"]
        probe_files = len(_names(tasks, capacity_files, partitions))
        reporter.log(f"{kind}: unthrottled commit done; committing at {rate:g} req/s")
        seconds, summary, timeline, halved = await _commit(
            target, chaos, dest, job_id, rate=rate, halve_at=halve_at
        )
        expected = _names(tasks, files, partitions)
        problems = await check_destination(
            target, dest, {name: data.encode() for name, data in expected.items()}
        )
        problems += await check_destination(
            target,
            probe_dest,
            {
                name: data.encode()
                for name, data in _names(tasks, capacity_files, partitions).items()
            },
        )
    counts = target.proxy.counts
    committed = len(expected)
    requests = counts["requests"]
    throttled = counts["rate_throttled"]
    admitted = requests - throttled
    # what the buckets allowed over the commit: R per scope, R / 2 after the halving
    allowed = rate * scopes * (min(seconds, halved) + max(0.0, seconds - halved) / 2)
    counters = summary.iostatistics.counters
    if timeline.rows[-1]["files"] == 0 and admitted:  # no progress reports (S3's stage)
        for row in timeline.rows:  # files in proportion to the requests admitted
            row["files"] = round((row["requests"] - row["throttled"]) * committed / admitted)
    phases = _phases(timeline, rate * scopes)
    figures = {
        "store": kind,
        "rate": rate,
        "scopes": scopes,
        "halve_at": halve_at,
        "files": committed,
        "seconds": round(seconds, 2),
        "files_per_second": round(committed / seconds, 1),
        "requests": requests,
        "requests_per_second": round(requests / seconds, 1),
        "admitted_per_second": round(admitted / seconds, 1),
        "of_rate": round(admitted / allowed, 3),
        "requests_per_file": round(admitted / committed, 3),
        "throttled_share": round(throttled / requests, 4) if requests else 0.0,
        "retries_per_file": round(counters.get(S.STORE_IO_RETRY, 0) / committed, 3),
        "rate_decreases": counters.get(S.STORE_IO_RATE_DECREASED, 0),
        "capacity_files_per_second": round(probe_files / probe_seconds, 1),
        "capacity_requests_per_second": round(probe_requests / probe_seconds, 1),
        "phases": phases,
        "timeline": timeline.rows,
        "problems": problems,
    }
    limit = f"{rate:g} req/s" + (f" x {scopes} prefixes" if scopes > 1 else "")
    if halve_at is not None:
        limit += f", halved at {halve_at:g} s"
    reporter.figure(
        f"unthrottled {kind} (same run): {figures['capacity_files_per_second']} files/s, "
        f"{figures['capacity_requests_per_second']} req/s"
    )
    for phase in phases:
        reporter.figure(
            f"  {phase['phase']}: {phase['seconds']} s at {phase['limit']:g} req/s allowed: "
            f"{phase['files_per_second']} files/s, {phase['admitted_per_second']} req/s "
            f"admitted ({phase['of_rate']:.2f} of it), {phase['throttled_share']:.1%} throttled"
        )
    reporter.figure(
        f"throttled {kind} at {limit}: {figures['files_per_second']} files/s, "
        f"{figures['admitted_per_second']} req/s admitted ({figures['of_rate']:.2f} of what "
        f"the limit allowed), {figures['throttled_share']:.1%} of {requests} requests "
        f"throttled, {figures['retries_per_file']} retries/file, "
        f"{figures['requests_per_file']} requests/file"
        f"; {'PASS' if not problems else 'FAIL: ' + problems[0]}"
    )
    result = {"scenario": "bench throttled", "ok": not problems, "figures": figures}
    if out is not None:
        png = plot_throttled([result], Path(out) / f"throttled-{kind}.png")
        reporter.log(f"files/s against time plotted in {png}")
    return result


def plot_throttled(results: list[dict[str, Any]], path: Path, *, smooth: float = 2.0) -> Path:
    """Files/s against time of ``bench throttled`` runs (their JSON), each over ``smooth``
    seconds (the requests admitted, times the run's files per admitted request), with the
    files/s each store's limit allowed (dashed: R per scope over the run's requests per
    file, halved where the run halved it)."""
    series: dict[str, tuple[list[float], list[float]]] = {}
    dashed = []
    for result in results:
        figures = result["figures"]
        rows = figures["timeline"]
        name = f"{figures['store']} (R={figures['rate']:g}" + (
            f" x {figures['scopes']} prefixes)" if figures["scopes"] > 1 else ")"
        )
        # files in proportion to the requests admitted (progress reports come in batches)
        per_request = figures["files"] / max(1, rows[-1]["requests"] - rows[-1]["throttled"])
        xs, ys = [], []
        for row in rows:
            earlier = [r for r in rows if r["t"] <= row["t"] - smooth]
            if not earlier:
                continue
            first = earlier[-1]
            admitted = (row["requests"] - row["throttled"]) - (
                first["requests"] - first["throttled"]
            )
            xs.append(row["t"])
            ys.append(admitted * per_request / (row["t"] - first["t"]))
        series[name] = (xs, ys)
        limit = f"{figures['store']}: allowed"
        per_file = figures["requests_per_file"]
        series[limit] = (
            [row["t"] for row in rows],
            [row["rate"] * figures["scopes"] / per_file for row in rows],
        )
        dashed.append(limit)
    return plot(
        path,
        title="Job commit through a throttling store (token bucket), default options",
        xlabel="seconds into the job commit",
        ylabel=f"files/s (over {smooth:g} s)",
        series=series,
        dashed=dashed,
        markers=False,
    )
