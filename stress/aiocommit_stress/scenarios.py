"""Scenarios: one job, the concurrency and throttling sweeps, many jobs sharing one
store client, and a store with a fixed capacity. Each returns every figure as a dict
(for the JSON report) and prints its headline figure last."""

from __future__ import annotations

import dataclasses
import statistics
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import anyio

from aiocommit import CommitOptions, commit_job
from aiocommit.protocol import statistics as S
from aiocommit.protocol.success import SuccessData
from aiocommit_stress.jobgen import JobSpec, PreparedJob
from aiocommit_stress.metering import CpuClock, MeteredStore, RssSampler
from aiocommit_stress.report import Reporter, grid_table, plot
from aiocommit_stress.runner import CommitRun, measured_commit, options_dict, prepare
from aiocommit_stress.targets import FaultOptions, open_target
from aiocommit_stress.verify import Verification, verify_output


@dataclasses.dataclass
class Common:
    """Settings every scenario shares (from the command line)."""

    store: str = "memory"
    workdir: str | None = None
    keep: bool = False
    prep_concurrency: int = 16
    out: Path = Path("stress/out")
    profile: Path | None = None


def verdict(ok: bool) -> str:
    return "PASS" if ok else "FAIL"


async def job_scenario(
    common: Common,
    spec: JobSpec,
    faults: FaultOptions,
    options: CommitOptions,
    reporter: Reporter,
) -> dict[str, Any]:
    """One job commit at a given size."""
    async with open_target(common.store, workdir=common.workdir, keep=common.keep) as target:
        with reporter.live():
            job = await prepare(target, spec, reporter, concurrency=common.prep_concurrency)
            run = await measured_commit(
                target,
                job,
                faults=faults,
                options=options,
                reporter=reporter,
                profile=common.profile,
            )
    reporter.table(run.table(f"job commit on {target.kind}"))
    _print_problems(reporter, run)
    figures = run.figures()
    failed = ""
    if run.error:
        failed = "; COMMIT FAILED, " + (
            "a re-run finished it" if run.recovered else "re-run failed"
        )
    reporter.figure(
        f"job: {run.files:,} files in {run.seconds:.2f} s "
        f"({run.metered.calls / max(run.seconds, 1e-9):,.0f} store ops/s){failed}; "
        f"verification {verdict(run.ok)}"
    )
    return {
        "scenario": "job",
        "store": target.kind,
        "job": spec.describe(),
        "prepared": job.describe(),
        "ok": run.ok,
        "run": figures,
    }


def _print_problems(reporter: Reporter, run: CommitRun) -> None:
    if run.error:
        reporter.out.print(f"[red]commit failed: {run.error}")
    if run.verification is not None and not run.verification.ok:
        for problem in run.verification.problems:
            reporter.out.print(f"[red]  {problem}")


async def sweep_concurrency(
    common: Common,
    spec: JobSpec,
    faults: FaultOptions,
    options: CommitOptions,
    concurrencies: Sequence[int],
    reporter: Reporter,
) -> dict[str, Any]:
    """Store ops/s as the in-flight limit grows, against the ideal concurrency / latency."""
    points = []
    runs = []
    latency = faults.latency_ms / 1000
    async with open_target(common.store, workdir=common.workdir, keep=common.keep) as target:
        with reporter.live():
            for concurrency in concurrencies:
                job = await prepare(target, spec, reporter, concurrency=common.prep_concurrency)
                run = await measured_commit(
                    target,
                    job,
                    faults=faults,
                    options=options.with_values(concurrency=concurrency),
                    reporter=reporter,
                    label=f"concurrency {concurrency}",
                )
                ops = run.metered.calls / run.seconds
                ideal = concurrency / latency if latency else None
                points.append(
                    {
                        "concurrency": concurrency,
                        "ops_per_second": round(ops, 1),
                        "files_per_second": round(run.files_per_second(), 1),
                        "ideal_ops_per_second": ideal,
                        "ratio_to_ideal": round(ops / ideal, 3) if ideal else None,
                        "commit_seconds": round(run.seconds, 3),
                        "p50_ms": round(run.metered.latency().quantile(0.5) * 1000, 3),
                        "p99_ms": round(run.metered.latency().quantile(0.99) * 1000, 3),
                        "ok": run.ok,
                    }
                )
                runs.append(run.figures())
                _print_problems(reporter, run)
    ok = all(p["ok"] for p in points)
    reporter.table(
        grid_table(
            f"concurrency sweep on {target.kind}, latency {faults.latency_ms:g} ms",
            ["concurrency", "ops/s", "files/s", "ideal ops/s", "ratio", "p50 ms", "p99 ms", "ok"],
            [
                [
                    p["concurrency"],
                    f"{p['ops_per_second']:,.0f}",
                    f"{p['files_per_second']:,.0f}",
                    f"{p['ideal_ops_per_second']:,.0f}" if p["ideal_ops_per_second"] else "-",
                    p["ratio_to_ideal"] or "-",
                    p["p50_ms"],
                    p["p99_ms"],
                    verdict(bool(p["ok"])),
                ]
                for p in points
            ],
        )
    )
    xs = [float(p["concurrency"]) for p in points]  # type: ignore[arg-type]
    series = {"measured ops/s": (xs, [float(p["ops_per_second"]) for p in points])}  # type: ignore[arg-type]
    if latency:
        series["ideal (concurrency / latency)"] = (xs, [x / latency for x in xs])
    png = plot(
        common.out / "sweep_concurrency.png",
        title=f"store ops/s vs concurrency ({target.kind}, {faults.latency_ms:g} ms/op)",
        xlabel="concurrency (in-flight limit)",
        ylabel="store ops/s",
        series=series,
        logx=True,
        dashed=["ideal (concurrency / latency)"],
    )
    best = max(points, key=lambda p: float(p["ops_per_second"]))  # type: ignore[arg-type]
    reporter.figure(
        f"sweep-concurrency: best {best['ops_per_second']:,.0f} ops/s at concurrency "
        f"{best['concurrency']}; plot {png}; verification {verdict(ok)}"
    )
    return {
        "scenario": "sweep-concurrency",
        "store": target.kind,
        "job": spec.describe(),
        "faults": faults.describe(),
        "ok": ok,
        "points": points,
        "runs": runs,
        "plots": [str(png)],
    }


async def sweep_throttle(
    common: Common,
    spec: JobSpec,
    faults: FaultOptions,
    options: CommitOptions,
    probabilities: Sequence[float],
    reporter: Reporter,
) -> dict[str, Any]:
    """Goodput and retries as the throttling probability rises, adaptive on and off."""
    points: list[dict[str, Any]] = []
    runs = []
    async with open_target(common.store, workdir=common.workdir, keep=common.keep) as target:
        with reporter.live():
            for probability in probabilities:
                for adaptive in (True, False):
                    job = await prepare(target, spec, reporter, concurrency=common.prep_concurrency)
                    run = await measured_commit(
                        target,
                        job,
                        faults=dataclasses.replace(faults, throttle=probability),
                        options=options.with_values(adaptive_concurrency=adaptive),
                        reporter=reporter,
                        label=f"throttle {probability:g} adaptive {'on' if adaptive else 'off'}",
                    )
                    points.append(
                        {
                            "throttle_probability": probability,
                            "adaptive": adaptive,
                            "goodput_files_per_second": round(run.files_per_second(), 1),
                            "served_ops_per_second": round(run.metered.served / run.seconds, 1),
                            "commit_seconds": round(run.seconds, 3),
                            "retries": run.counter(S.STORE_IO_RETRY),
                            "throttled": run.metered.throttled,
                            "concurrency_decreases": run.counter(S.STORE_IO_CONCURRENCY_DECREASED),
                            "final_limit": (
                                run.summary.iostatistics.gauges.get("store_io_concurrency_limit")
                                if run.summary
                                else None
                            ),
                            "commit_failed": run.error is not None,
                            "ok": run.verified,
                        }
                    )
                    runs.append(run.figures())
                    _print_problems(reporter, run)
    ok = all(p["ok"] for p in points)
    reporter.table(
        grid_table(
            f"throttling sweep on {target.kind}, latency {faults.latency_ms:g} ms, "
            f"concurrency {options.concurrency}",
            [
                "throttle p",
                "adaptive",
                "goodput files/s",
                "served ops/s",
                "time s",
                "retries",
                "throttled",
                "decreases",
                "final limit",
                "commit",
                "ok",
            ],
            [
                [
                    p["throttle_probability"],
                    "on" if p["adaptive"] else "off",
                    f"{p['goodput_files_per_second']:,.0f}",
                    f"{p['served_ops_per_second']:,.0f}",
                    p["commit_seconds"],
                    p["retries"],
                    p["throttled"],
                    p["concurrency_decreases"],
                    p["final_limit"],
                    "failed, re-run" if p["commit_failed"] else "ok",
                    verdict(p["ok"]),
                ]
                for p in points
            ],
        )
    )

    def line(adaptive: bool, key: str) -> tuple[list[float], list[float]]:
        chosen = [p for p in points if p["adaptive"] is adaptive]
        return ([p["throttle_probability"] for p in chosen], [float(p[key]) for p in chosen])

    png = plot(
        common.out / "sweep_throttle.png",
        title=f"goodput vs throttling ({target.kind}, {faults.latency_ms:g} ms/op, "
        f"concurrency {options.concurrency})",
        xlabel="throttle probability per call",
        ylabel="goodput (files committed / s)",
        series={
            "adaptive on": line(True, "goodput_files_per_second"),
            "adaptive off": line(False, "goodput_files_per_second"),
        },
        secondary={
            "retries, adaptive on": line(True, "retries"),
            "retries, adaptive off": line(False, "retries"),
        },
        secondary_label="retries",
    )
    worst = max(probabilities)
    on = next(p for p in points if p["throttle_probability"] == worst and p["adaptive"])
    off = next(p for p in points if p["throttle_probability"] == worst and not p["adaptive"])
    reporter.figure(
        f"sweep-throttle: at p={worst:g} goodput {on['goodput_files_per_second']:,.0f} files/s "
        f"adaptive on vs {off['goodput_files_per_second']:,.0f} off (retries {on['retries']:,} "
        f"vs {off['retries']:,}); plot {png}; verification {verdict(ok)}"
    )
    return {
        "scenario": "sweep-throttle",
        "store": target.kind,
        "job": spec.describe(),
        "faults": faults.describe(),
        "options": options_dict(options),
        "ok": ok,
        "points": points,
        "runs": runs,
        "plots": [str(png)],
    }


def jain(values: Sequence[float]) -> float:
    """Jain's fairness index: 1 when all equal, 1/n when one takes everything."""
    total = sum(values)
    squares = sum(v * v for v in values)
    return total * total / (len(values) * squares) if squares else 1.0


async def multi_job(
    common: Common,
    spec: JobSpec,
    faults: FaultOptions,
    options: CommitOptions,
    jobs: int,
    shared_dest: bool,
    reporter: Reporter,
) -> dict[str, Any]:
    """``jobs`` job commits at once in one event loop, all through one store client.

    Each job's output must be exactly its own; with ``shared_dest`` all jobs commit into one
    destination (disjoint partitions), so they also share ``_temporary``.
    """
    async with open_target(common.store, workdir=common.workdir, keep=common.keep) as target:
        shared = MeteredStore(faults.wrap(target.store))
        with reporter.live():
            solo_job = await prepare(
                target, spec, reporter, name="solo", concurrency=common.prep_concurrency
            )
            solo = await measured_commit(
                target,
                solo_job,
                faults=faults,
                options=options,
                reporter=reporter,
                label="one job alone",
            )
            dest = target.new_dest("shared") if shared_dest else None
            prepared: list[PreparedJob] = []
            for index in range(jobs):
                job_spec = dataclasses.replace(
                    spec,
                    seed=spec.seed + index + 1,
                    prefix=f"job={index:03d}" if shared_dest else spec.prefix,
                )
                if dest is not None:
                    from aiocommit_stress.jobgen import prepare_job

                    with reporter.bar(f"preparing job {index}", job_spec.tasks) as advance:
                        prepared.append(
                            await prepare_job(
                                target,
                                dest,
                                job_spec,
                                concurrency=common.prep_concurrency,
                                on_task=lambda _: advance(1),
                            )
                        )
                else:
                    prepared.append(
                        await prepare(
                            target,
                            job_spec,
                            reporter,
                            name=f"job{index}",
                            concurrency=common.prep_concurrency,
                        )
                    )
            times: list[float] = [0.0] * jobs
            summaries: list[SuccessData | None] = [None] * jobs
            errors: list[str | None] = [None] * jobs
            shared.reset()

            async def one(index: int) -> None:
                job = prepared[index]
                with reporter.commit_bar(f"job {index}") as on_progress:
                    begin = time.perf_counter()
                    try:
                        summaries[index] = await commit_job(
                            job.dest,
                            job.job_id,
                            store=shared,
                            options=options,
                            progress=on_progress,
                        )
                    except Exception as error:
                        errors[index] = f"{type(error).__name__}: {error}"
                    times[index] = time.perf_counter() - begin

            with RssSampler() as rss, CpuClock() as cpu:
                begin = time.perf_counter()
                async with anyio.create_task_group() as group:
                    for index in range(jobs):
                        group.start_soon(one, index)
                wall = time.perf_counter() - begin
        verification = Verification()
        if dest is not None:
            verification.merge(
                await verify_output(target.store, dest, [j.expected for j in prepared])
            )
        else:
            for job, summary in zip(prepared, summaries, strict=True):
                verification.merge(
                    await verify_output(target.store, job.dest, [job.expected], summary=summary)
                )
    rates = [len(j.expected.files) / t for j, t in zip(prepared, times, strict=True)]
    total_files = sum(len(j.expected.files) for j in prepared)
    ok = verification.ok and not any(errors) and solo.ok
    per_job = [
        {
            "job": index,
            "files": len(job.expected.files),
            "commit_seconds": round(t, 3),
            "files_per_second": round(rate, 1),
            "error": errors[index],
        }
        for index, (job, t, rate) in enumerate(zip(prepared, times, rates, strict=True))
    ]
    figures = {
        "jobs": jobs,
        "shared_dest": shared_dest,
        "wall_seconds": round(wall, 3),
        "aggregate_files_per_second": round(total_files / wall, 1),
        "solo_files_per_second": round(solo.files_per_second(), 1),
        "solo_commit_seconds": round(solo.seconds, 3),
        "jain_fairness": round(jain(rates), 4),
        "slowest_over_fastest": round(max(times) / min(times), 3),
        "median_commit_seconds": round(statistics.median(times), 3),
        "cpu_seconds": round(cpu.total, 3),
        "rss_peak_mb": round(rss.peak / 2**20, 1),
        "store": shared.figures(wall),
    }
    reporter.table(
        grid_table(
            f"{jobs} concurrent jobs on {target.kind} (one store client)",
            ["job", "files", "time s", "files/s", "error"],
            [
                [
                    p["job"],
                    p["files"],
                    p["commit_seconds"],
                    f"{p['files_per_second']:,.0f}",
                    p["error"] or "",
                ]
                for p in per_job
            ],
        )
    )
    reporter.table(
        grid_table(
            "multi-job summary",
            ["figure", "value"],
            [[k, v] for k, v in figures.items() if k != "store"],
        )
    )
    for problem in verification.problems:
        reporter.out.print(f"[red]  {problem}")
    reporter.figure(
        f"multi-job: {jobs} jobs, Jain fairness {figures['jain_fairness']:.3f}, "
        f"slowest/fastest {figures['slowest_over_fastest']:.2f}, aggregate "
        f"{figures['aggregate_files_per_second']:,.0f} files/s vs one job alone "
        f"{figures['solo_files_per_second']:,.0f}; verification {verdict(ok)}"
    )
    return {
        "scenario": "multi-job",
        "store": target.kind,
        "job": spec.describe(),
        "faults": faults.describe(),
        "options": options_dict(options),
        "ok": ok,
        "figures": figures,
        "per_job": per_job,
        "solo": solo.figures(),
        "verification": verification.describe(),
    }


async def capacity(
    common: Common,
    spec: JobSpec,
    faults: FaultOptions,
    options: CommitOptions,
    capacity_per_second: float,
    reporter: Reporter,
) -> dict[str, Any]:
    """A store that serves at most R calls/s and throttles the rest: goodput with
    adaptive concurrency on (no rate limit configured) and off."""
    if options.rate_limit is not None:
        raise ValueError("the capacity scenario runs without a configured rate limit")
    limited = dataclasses.replace(faults, capacity=capacity_per_second)
    results: dict[str, Any] = {}
    timelines: dict[str, tuple[list[float], list[float]]] = {}
    ok = True
    async with open_target(common.store, workdir=common.workdir, keep=common.keep) as target:
        with reporter.live():
            for adaptive in (True, False):
                name = "adaptive on" if adaptive else "adaptive off"
                job = await prepare(target, spec, reporter, concurrency=common.prep_concurrency)
                run = await measured_commit(
                    target,
                    job,
                    faults=limited,
                    options=options.with_values(adaptive_concurrency=adaptive),
                    reporter=reporter,
                    label=f"capacity {capacity_per_second:g}/s, {name}",
                )
                # without adaptive concurrency the commit may give up (retries exhausted):
                # a figure, not a failure, when a re-run finishes it correctly
                ok = ok and (run.ok if adaptive else run.verified)
                _print_problems(reporter, run)
                figures = _capacity_figures(run, capacity_per_second)
                results[name] = {**figures, "run": run.figures()}
                step = run.metered.step
                timelines[name] = (
                    [i * step for i in range(len(run.metered.timeline))],
                    [count / step for count in run.metered.timeline],
                )
    on, off = results["adaptive on"], results["adaptive off"]
    reporter.table(
        grid_table(
            f"store capacity {capacity_per_second:g} ops/s on {target.kind}, "
            f"latency {faults.latency_ms:g} ms, max concurrency {options.concurrency}",
            [
                "",
                "rename goodput/s",
                "of capacity",
                "steady served/s",
                "of capacity",
                "throttled",
                "retries",
                "decreases",
                "final limit",
                "time s",
            ],
            [
                [
                    name,
                    f"{r['rename_goodput']:,.0f}",
                    f"{r['rename_goodput_ratio']:.2f}",
                    f"{r['steady_served_per_second']:,.0f}",
                    f"{r['steady_ratio']:.2f}",
                    r["throttled"],
                    r["retries"],
                    r["concurrency_decreases"],
                    r["final_limit"],
                    r["commit_seconds"],
                ]
                for name, r in results.items()
            ],
        )
    )
    png = plot(
        common.out / "capacity.png",
        title=f"served store calls/s against a {capacity_per_second:g}/s capacity",
        xlabel="seconds into the job commit",
        ylabel="served calls/s",
        series={
            **timelines,
            "capacity": (
                [0.0, max(max(t[0], default=0) for t in timelines.values())],
                [capacity_per_second, capacity_per_second],
            ),
        },
        dashed=["capacity"],
        markers=False,
    )
    reporter.figure(
        f"capacity: adaptive concurrency reached {on['rename_goodput_ratio']:.2f} of "
        f"{capacity_per_second:g} ops/s (rename-stage goodput {on['rename_goodput']:,.0f}/s, "
        f"no rate limit; {on['throttled']:,} throttles); adaptive off "
        + (
            f"FAILED after {off['commit_seconds']:.1f} s (retries exhausted; a re-run finished "
            f"it) having reached {off['rename_goodput_ratio']:.2f}"
            if off["commit_failed"]
            else f"{off['rename_goodput_ratio']:.2f}"
        )
        + f" with {off['throttled']:,} throttles; target >= 0.80: "
        f"{verdict(on['rename_goodput_ratio'] >= 0.8)}; verification {verdict(ok)}"
    )
    return {
        "scenario": "capacity",
        "store": target.kind,
        "job": spec.describe(),
        "capacity_per_second": capacity_per_second,
        "faults": faults.describe(),
        "options": options_dict(options),
        "ok": ok,
        "results": results,
        "plots": [str(png)],
    }


def _capacity_figures(run: CommitRun, capacity_per_second: float) -> dict[str, Any]:
    stage_ms = run.stages_ms().get(S.JOB_STAGE_RENAME_FILES, 0) if run.error is None else 0
    renames = run.metered.ops.get("rename")
    served_renames = renames.served if renames else 0
    # a failed commit has no stage times: rate over the whole (failed) commit instead
    seconds = stage_ms / 1000 if stage_ms else run.seconds
    rename_goodput = served_renames / seconds if seconds else 0.0
    steady = run.metered.timeline
    cut = len(steady) // 10
    middle = steady[cut : len(steady) - cut] or steady
    steady_rate = statistics.mean(middle) / run.metered.step if middle else 0.0
    gauges = run.summary.iostatistics.gauges if run.summary else {}
    return {
        "rename_goodput": round(rename_goodput, 1),
        "rename_goodput_ratio": round(rename_goodput / capacity_per_second, 3),
        "steady_served_per_second": round(steady_rate, 1),
        "steady_ratio": round(steady_rate / capacity_per_second, 3),
        "served_per_second_overall": round(run.metered.served / run.seconds, 1),
        "throttled": run.metered.throttled,
        "retries": run.counter(S.STORE_IO_RETRY),
        "concurrency_decreases": run.counter(S.STORE_IO_CONCURRENCY_DECREASED),
        "final_limit": gauges.get("store_io_concurrency_limit"),
        "commit_seconds": round(run.seconds, 3),
        "commit_failed": run.error,
        "recovered_by_rerun": run.recovered,
    }
