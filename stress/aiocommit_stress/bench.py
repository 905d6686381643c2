"""The benchmark suite. Each benchmark prints its figure last.

* W1/W2 (``latency``): job commit of T tasks x F files over D dirs with L ms injected
  per store call during the job commit only; ops/s against the ideal
  min(concurrency / latency, store rate limit; on the local store also the filesystem's
  own rename rate, ``stress.fs_floor``), and Apache Hadoop's ManifestCommitter on the
  same job shape in the same run (``stress.hadoop``) when Java is present.
* ``cpu``: the same job at 0 ms: CPU seconds per rename.
* ``task-scan``: one task commit of a D-directory x F-file tree at L ms against the
  estimate for a sequential scan making the same calls.
* ``scale``: the synthetic 10M-file job at several sizes, each in a fresh process: peak RSS.
* ``crash``: the crash scenario's N kills.
"""

from __future__ import annotations

import functools
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio

from aiocommit import CommitOptions, TaskManifest, commit_job, commit_task, setup_job, setup_task
from aiocommit.protocol import statistics as S
from aiocommit.protocol.success import SuccessData
from aiocommit.protocol.uris import manifest_path
from aiocommit_stress import fs_floor, hadoop
from aiocommit_stress.jobgen import JobSpec, Writer
from aiocommit_stress.metering import CpuClock, MeteredStore
from aiocommit_stress.report import Reporter, grid_table, plot, subprocess_env
from aiocommit_stress.runner import measured_commit, prepare, profiling, save_profile
from aiocommit_stress.scenarios import Common, verdict
from aiocommit_stress.targets import FaultOptions, open_target
from aiocommit_stress.verify import Expected, ExpectedFile, verify_output

#: store operations a job commit makes, from its statistics (workers' merged in); listings
#: and stats are left out because ``_SUCCESS`` also aggregates the tasks' own (their
#: directory scans), which would count work the job commit did not do
OP_COUNTERS = (
    S.OP_RENAME,
    S.OP_LOAD_MANIFEST,
    S.OP_LOAD_COMMIT_PLAN,
    S.OP_LOAD_SUCCESS,
    S.OP_MKDIRS,
    S.OP_DELETE,
    S.OP_DELETE_DIR,
)


def _children_cpu() -> float:
    """CPU seconds of this process's reaped children (the rename workers)."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def store_ops(summary: SuccessData) -> int:
    """Job-commit store calls (renames, manifest reads, mkdirs, deletes; the tasks' one
    manifest rename each is in too, about 1%)."""
    counters = summary.iostatistics.counters
    return sum(counters.get(n, 0) + counters.get(n + ".failures", 0) for n in OP_COUNTERS)


async def latency_bench(
    name: str,
    common: Common,
    spec: JobSpec,
    latency_ms: float,
    options: CommitOptions,
    reporter: Reporter,
    *,
    hadoop_threads: list[int],
    rate_limit: float | None = None,
) -> dict[str, Any]:
    """W1/W2: the job commit at ``latency_ms`` per store call, against the ideal
    min(concurrency / latency, store rate limit, on the local store the filesystem's own
    rename rate), and Hadoop's committer on the same job shape in the same run (when
    Java is here)."""
    hadoop_missing = hadoop.available() if hadoop_threads else "not asked for"
    async with open_target(common.store, workdir=common.workdir, keep=common.keep) as target:
        with reporter.live():
            job = await prepare(
                target,
                spec,
                reporter,
                name="latency",
                concurrency=common.prep_concurrency,
                label=f"preparing the {latency_ms:g} ms job",
            )
        if target.local_root is not None:
            # the prepared files reach the disk now, not while the commit is timed (the
            # Hadoop side is prepared and flushed the same way)
            await anyio.to_thread.run_sync(os.sync)
        # not metered: the statistics count the calls, and the store stays re-openable
        # in the rename workers
        store = FaultOptions(latency_ms=latency_ms, always_wrap=True).wrap(target.store)
        children_before = _children_cpu()
        with CpuClock() as cpu:
            begin = time.perf_counter()
            with profiling(common.profile is not None) as profiler:
                summary = await commit_job(job.dest, job.job_id, store=store, options=options)
            seconds = time.perf_counter() - begin
        workers_cpu = _children_cpu() - children_before
        floor: float | None = None
        if target.local_root is not None:
            reporter.log(f"{name}: the filesystem's own rename rate on the same job shape ...")
            floor = await anyio.to_thread.run_sync(
                functools.partial(
                    fs_floor.renames_per_second,
                    target.local_root,
                    tasks=spec.tasks,
                    files_per_task=spec.files_per_task,
                    dirs=spec.dirs,
                    processes=os.cpu_count() or 1,
                )
            )
        if profiler is not None and common.profile is not None:
            save_profile(profiler, common.profile)  # this process only, not the workers'
            reporter.log(f"{name}: profile of this process in {common.profile}")
        verification = await verify_output(target.store, job.dest, [job.expected], summary=summary)
    hadoop_runs: list[hadoop.HadoopRun] = []
    if hadoop_missing is None:
        for threads in hadoop_threads:
            reporter.log(f"{name}: Hadoop ManifestCommitter, {threads} threads ...")
            hadoop_runs.append(
                await hadoop.commit_like_hadoop(
                    tasks=spec.tasks,
                    files_per_task=spec.files_per_task,
                    dirs=spec.dirs,
                    latency_ms=latency_ms,
                    threads=threads,
                    workdir=common.workdir,
                )
            )
    ops = store_ops(summary)
    bound = options.concurrency / (latency_ms / 1000) if latency_ms else float("inf")
    ideal = min(bound, rate_limit or bound, floor or bound)
    ops_per_second = ops / seconds
    ratio = ops_per_second / ideal
    processes = summary.iostatistics.gauges.get("job_rename_processes", 1)
    ok = summary.success and verification.ok and all(r.ok for r in hadoop_runs)
    figures: dict[str, Any] = {
        "commit_seconds": round(seconds, 3),
        "store_ops": ops,
        "ops_per_second": round(ops_per_second, 1),
        "ideal_ops_per_second": round(ideal, 1),
        "filesystem_renames_per_second": round(floor, 1) if floor else None,
        "ratio_to_ideal": round(ratio, 3),
        "concurrency": options.concurrency,
        "processes": processes,
        "cpu_seconds_parent": round(cpu.total, 3),
        "cpu_seconds_total": round(cpu.total + workers_cpu, 3),
        "cpu_us_per_store_op": round((cpu.total + workers_cpu) / ops * 1e6, 1),
        "stages_ms": {
            name: mean.sum
            for name in S.JOB_STAGES
            if (mean := summary.iostatistics.meanstatistics.get(name + ".mean")) and mean.samples
        },
    }
    speedups: dict[int, float] = {}
    for run in hadoop_runs:
        figures[f"hadoop_{run.threads}_threads_stages_ms"] = run.raw.get("stage_ms", {})
        speedups[run.threads] = run.job_commit_seconds / seconds
        figures[f"hadoop_{run.threads}_threads_seconds"] = run.job_commit_seconds
        figures[f"hadoop_{run.threads}_threads_ops"] = run.store_ops
        figures[f"hadoop_{run.threads}_threads_cpu_seconds"] = run.job_commit_cpu_seconds
        figures[f"speedup_vs_hadoop_{run.threads}"] = round(speedups[run.threads], 2)
    reporter.table(
        grid_table(
            f"{name}: {spec.describe()} at {latency_ms:g} ms per store call, {target.kind}",
            ["figure", "value"],
            [[k, v] for k, v in figures.items()],
        )
    )
    for problem in verification.problems:
        reporter.out.print(f"[red]  {problem}")
    versus = (
        "; ".join(
            f"Hadoop@{t} {r.job_commit_seconds:.1f} s = {speedups[t]:.1f}x"
            for t, r in zip(hadoop_threads, hadoop_runs, strict=False)
        )
        if hadoop_runs
        else f"Hadoop not run: {hadoop_missing}"
    )
    reporter.figure(
        f"{name}: job commit {seconds:.2f} s ({ops:,} store ops, {ops_per_second:,.0f} ops/s, "
        f"{ratio:.2f} of ideal {ideal:,.0f} = min({options.concurrency}/{latency_ms:g} ms"
        + (f", rate limit {rate_limit:,.0f}/s" if rate_limit else "")
        + (f", the filesystem's {floor:,.0f} renames/s" if floor else "")
        + f"); {processes} processes; {versus}; verification {verdict(ok)}"
    )
    return {
        "benchmark": name,
        "store": target.kind,
        "job": spec.describe(),
        "latency_ms": latency_ms,
        "concurrency": options.concurrency,
        "ok": ok,
        "figures": figures,
        "hadoop": [r.raw for r in hadoop_runs],
        "hadoop_missing": hadoop_missing,
    }


async def versus_bench(
    common: Common,
    spec: JobSpec,
    latency_ms: float,
    concurrencies: list[int],
    processes: int,
    reporter: Reporter,
) -> dict[str, Any]:
    """Store ops/s against concurrency at ``latency_ms``: aiocommit at each in-flight
    limit, Hadoop's committer at the same number of threads, in one run; plots both."""
    missing = hadoop.available()
    points: list[dict[str, Any]] = []
    ok = True
    async with open_target(common.store, workdir=common.workdir, keep=common.keep) as target:
        for concurrency in concurrencies:
            with reporter.live():
                job = await prepare(target, spec, reporter, concurrency=common.prep_concurrency)
            store = FaultOptions(latency_ms=latency_ms, always_wrap=True).wrap(target.store)
            options = CommitOptions(concurrency=concurrency, processes=processes)
            begin = time.perf_counter()
            summary = await commit_job(job.dest, job.job_id, store=store, options=options)
            seconds = time.perf_counter() - begin
            verification = await verify_output(
                target.store, job.dest, [job.expected], summary=summary
            )
            ok = ok and verification.ok
            point: dict[str, Any] = {
                "concurrency": concurrency,
                "aiocommit_seconds": round(seconds, 3),
                "aiocommit_ops_per_second": round(store_ops(summary) / seconds, 1),
                "ideal_ops_per_second": round(concurrency / (latency_ms / 1000), 1),
            }
            if missing is None:
                reporter.log(f"versus: Hadoop at {concurrency} threads ...")
                run = await hadoop.commit_like_hadoop(
                    tasks=spec.tasks,
                    files_per_task=spec.files_per_task,
                    dirs=spec.dirs,
                    latency_ms=latency_ms,
                    threads=concurrency,
                    workdir=common.workdir,
                )
                ok = ok and run.ok
                point["hadoop_seconds"] = run.job_commit_seconds
                point["hadoop_ops_per_second"] = round(run.store_ops / run.job_commit_seconds, 1)
            points.append(point)
    png = plot_versus(
        common.out / "versus_concurrency.png",
        points,
        f"{spec.tasks:,} tasks x {spec.files_per_task} files, {latency_ms:g} ms per store call",
        latency_ms,
    )
    columns = ["concurrency", "aiocommit s", "aiocommit ops/s", "Hadoop s", "Hadoop ops/s"]
    reporter.table(
        grid_table(
            f"versus: {latency_ms:g} ms per call",
            columns,
            [
                [
                    p["concurrency"],
                    p["aiocommit_seconds"],
                    f"{p['aiocommit_ops_per_second']:,.0f}",
                    p.get("hadoop_seconds", "-"),
                    f"{p.get('hadoop_ops_per_second', 0):,.0f}",
                ]
                for p in points
            ],
        )
    )
    best = max(points, key=lambda p: float(p["aiocommit_ops_per_second"]))
    hadoop_best = max((float(p.get("hadoop_ops_per_second", 0)) for p in points), default=0)
    reporter.figure(
        f"versus: aiocommit best {best['aiocommit_ops_per_second']:,.0f} ops/s at "
        f"{best['concurrency']}; Hadoop best {hadoop_best:,.0f} ops/s"
        + (f" ({missing})" if missing else "")
        + f"; plot {png}; verification {verdict(ok)}"
    )
    return {
        "benchmark": "versus",
        "job": spec.describe(),
        "latency_ms": latency_ms,
        "ok": ok,
        "points": points,
        "plots": [str(png)],
    }


def plot_versus(path: Path, points: list[dict[str, Any]], title: str, latency_ms: float) -> Path:
    """The versus plot: store ops/s against concurrency, both committers and the ideal."""
    xs = [float(p["concurrency"]) for p in points]
    series = {"aiocommit": (xs, [float(p["aiocommit_ops_per_second"]) for p in points])}
    if all("hadoop_ops_per_second" in p for p in points):
        series["Hadoop ManifestCommitter"] = (
            xs,
            [float(p["hadoop_ops_per_second"]) for p in points],
        )
    series["ideal: concurrency / latency"] = (xs, [x / (latency_ms / 1000) for x in xs])
    return plot(
        path,
        title=f"job commit, store ops/s against concurrency ({title})",
        xlabel="concurrency (aiocommit: calls in flight; Hadoop: threads)",
        ylabel="store ops/s (log)",
        series=series,
        logx=True,
        logy=True,
        dashed=["ideal: concurrency / latency"],
    )


async def cpu_bench(
    common: Common,
    stores: list[str],
    spec: JobSpec,
    options: CommitOptions,
    reporter: Reporter,
) -> dict[str, Any]:
    """CPU seconds per rename of a 0 ms job commit, per store."""
    results: dict[str, Any] = {}
    ok = True
    for store in stores:
        async with open_target(store, workdir=common.workdir, keep=common.keep) as target:
            with reporter.live():
                job = await prepare(target, spec, reporter, concurrency=common.prep_concurrency)
                run = await measured_commit(
                    target,
                    job,
                    faults=FaultOptions(),
                    options=options,
                    reporter=reporter,
                    label=f"0 ms on {store}",
                    profile=common.profile,
                )
        ok = ok and run.ok
        renames = run.counter(S.COMMITTER_FILES_COMMITTED) or run.files
        results[store] = {
            "cpu_seconds_per_rename": run.cpu.total / renames,
            "cpu_us_per_rename": round(run.cpu.total / renames * 1e6, 1),
            "cpu_us_per_store_op": round(run.cpu.total / run.metered.calls * 1e6, 1),
            "user_us_per_rename": round(run.cpu.user / renames * 1e6, 1),
            "system_us_per_rename": round(run.cpu.system / renames * 1e6, 1),
            "renames": renames,
            "store_ops": run.metered.calls,
            "commit_seconds": round(run.seconds, 3),
            "ops_per_second": round(run.metered.calls / run.seconds, 1),
            "run": run.figures(),
        }
    reporter.table(
        grid_table(
            "engine CPU per operation (0 ms latency)",
            ["store", "µs CPU/rename", "user", "system", "µs CPU/store op", "ops/s", "time s"],
            [
                [
                    s,
                    r["cpu_us_per_rename"],
                    r["user_us_per_rename"],
                    r["system_us_per_rename"],
                    r["cpu_us_per_store_op"],
                    f"{r['ops_per_second']:,.0f}",
                    r["commit_seconds"],
                ]
                for s, r in results.items()
            ],
        )
    )
    reporter.figure(
        "cpu: "
        + ", ".join(
            f"{r['cpu_seconds_per_rename'] * 1e6:,.0f} µs CPU per rename on {s} "
            f"({r['cpu_seconds_per_rename']:.2e} s)"
            for s, r in results.items()
        )
        + f"; verification {verdict(ok)}"
    )
    return {"benchmark": "cpu", "job": spec.describe(), "ok": ok, "results": results}


async def task_scan_bench(
    common: Common,
    dirs: int,
    files_per_dir: int,
    depth: int,
    latency_ms: float,
    options: CommitOptions,
    reporter: Reporter,
) -> dict[str, Any]:
    """One task commit of a dirs x files tree at ``latency_ms``, against a sequential scan."""
    spec = JobSpec(tasks=2, files_per_task=dirs * files_per_dir, dirs=dirs, depth=depth)
    leaves = spec.partition_dirs()
    async with open_target(common.store, workdir=common.workdir, keep=common.keep) as target:
        store = target.store
        dest = target.new_dest("task-scan")
        job_id = await setup_job(dest, store=store)
        writer = Writer(target)
        expected: dict[str, ExpectedFile] = {}
        timings: dict[str, Any] = {}
        for task, latency in ((0, 0.0), (1, latency_ms)):
            files = spec.task_files(task, leaves)
            attempt = await setup_task(dest, job_id, task, 0, store=store)
            await writer.write(attempt, files)
            metered = MeteredStore(FaultOptions(latency_ms=latency, always_wrap=True).wrap(store))
            with CpuClock() as cpu:
                begin = time.perf_counter()
                manifest = await commit_task(attempt, store=metered, options=options)
                seconds = time.perf_counter() - begin
            if not isinstance(manifest, TaskManifest):
                raise AssertionError("the rename benchmark needs the manifest committer")
            start = len(dest) + 1
            names = [store.unqualify(manifest_path(e.dest))[start:] for e in manifest.files]
            sizes = {name: e.size for name, e in zip(names, manifest.files, strict=True)}
            etags = {name: e.etag for name, e in zip(names, manifest.files, strict=True)}
            if sizes != dict(files):
                raise AssertionError(f"task {task}'s manifest does not list exactly its files")
            for relative, size in files:
                expected[relative] = ExpectedFile(size, etags.get(relative))
            timings[f"{latency:g} ms"] = {
                "seconds": seconds,
                "cpu_seconds": cpu.total,
                "store_ops": metered.calls,
                "ops": {k: v.calls for k, v in metered.ops.items()},
                "directories": len(manifest.directories),
                "files": len(manifest.files),
            }
        summary = await commit_job(dest, job_id, store=store, options=options)
        verification = await verify_output(
            store, dest, [Expected(job_id, dest, expected)], summary=summary
        )
    zero = timings["0 ms"]
    slow = timings[f"{latency_ms:g} ms"]
    estimate = zero["seconds"] + slow["store_ops"] * latency_ms / 1000
    # Hadoop's commitTask (LAYOUT.md), one call at a time: 1+d listings and d getFileStatus
    # for d directories, then delete, create, 2 getFileStatus and rename to save the manifest
    hadoop_calls = 2 * slow["directories"] + 6
    hadoop_estimate = hadoop_calls * latency_ms / 1000
    speedup = estimate / slow["seconds"]
    figures = {
        "dirs": dirs,
        "files_per_dir": files_per_dir,
        "latency_ms": latency_ms,
        "task_commit_seconds": round(slow["seconds"], 3),
        "task_commit_seconds_0ms": round(zero["seconds"], 3),
        "store_ops": slow["store_ops"],
        "ops": slow["ops"],
        "sequential_estimate_seconds": round(estimate, 3),
        "hadoop_calls": hadoop_calls,
        "hadoop_speedup": round(hadoop_estimate / slow["seconds"], 1),
        "hadoop_sequential_estimate_seconds": round(hadoop_estimate, 3),
        "speedup": round(speedup, 1),
        "cpu_seconds": round(slow["cpu_seconds"], 3),
        "verification": verification.describe(),
    }
    reporter.table(
        grid_table(
            f"task commit scan: {dirs:,} dirs x {files_per_dir} files",
            ["figure", "value"],
            [[k, v] for k, v in figures.items() if k != "verification"],
        )
    )
    ok = verification.ok
    for problem in verification.problems:
        reporter.out.print(f"[red]  {problem}")
    reporter.figure(
        f"task-scan: {dirs:,} dirs x {files_per_dir} files at {latency_ms:g} ms: commit_task "
        f"{slow['seconds']:.2f} s vs sequential-scan estimate {estimate:.1f} s "
        f"({speedup:,.0f}x faster; {slow['store_ops']:,} calls), Hadoop's sequential "
        f"{hadoop_calls:,} calls {hadoop_estimate:.1f} s ({figures['hadoop_speedup']:,.0f}x); "
        f"verification {verdict(ok)}"
    )
    return {"benchmark": "task-scan", "store": target.kind, "ok": ok, "figures": figures}


async def scale_bench(
    sizes: list[int],
    files_per_task: int,
    dirs: int,
    concurrency: int,
    limit_mb: float,
    reporter: Reporter,
) -> dict[str, Any]:
    """The synthetic scale job at each size, each in a fresh process (ru_maxrss is per
    process), comparing peak RSS."""
    points = []
    with tempfile.TemporaryDirectory(prefix="aiocommit-scale-") as scratch:
        for size in sizes:
            out = Path(scratch) / f"scale-{size}.json"
            command = [
                sys.executable,
                "-m",
                "aiocommit_stress",
                "scale",
                "--files",
                str(size),
                "--files-per-task",
                str(files_per_task),
                "--dirs",
                str(dirs),
                "--concurrency",
                str(concurrency),
                "--json",
                str(out),
                "--quiet",
            ]
            if not reporter.show_progress:
                command.append("--no-progress")
            reporter.log(f"scale: {size:,} files ...")
            code = await anyio.to_thread.run_sync(
                functools.partial(subprocess.call, command, env=subprocess_env())
            )
            if not out.exists():
                raise RuntimeError(f"scale run for {size:,} files failed (exit {code})")
            data = json.loads(out.read_text())
            figures = data["figures"]
            points.append(
                {
                    "files": size,
                    "ok": data["ok"],
                    "problems": data["problems"],
                    **{
                        k: figures[k]
                        for k in (
                            "rss_before_commit_mb",
                            "rss_peak_mb",
                            "ru_maxrss_mb",
                            "commit_seconds",
                            "files_per_second",
                            "cpu_us_per_file",
                        )
                    },
                }
            )
    smallest, largest = points[0], points[-1]
    slope = (
        (largest["rss_peak_mb"] - smallest["rss_peak_mb"])
        * 2**20
        / max(1, largest["files"] - smallest["files"])
    )
    peak = max(p["rss_peak_mb"] for p in points)
    ok = all(p["ok"] for p in points)
    under = peak < limit_mb
    reporter.table(
        grid_table(
            "scale: peak RSS by file count (synthetic store)",
            [
                "files",
                "RSS before MB",
                "peak RSS MB",
                "ru_maxrss MB",
                "time s",
                "files/s",
                "µs CPU/file",
                "ok",
            ],
            [
                [
                    f"{p['files']:,}",
                    p["rss_before_commit_mb"],
                    p["rss_peak_mb"],
                    p["ru_maxrss_mb"],
                    p["commit_seconds"],
                    f"{p['files_per_second']:,.0f}",
                    p["cpu_us_per_file"],
                    verdict(p["ok"]),
                ]
                for p in points
            ],
        )
    )
    reporter.figure(
        "scale: peak RSS "
        + ", ".join(f"{p['files']:,} files {p['rss_peak_mb']:,.0f} MB" for p in points)
        + f"; growth {slope:.1f} bytes/file; under {limit_mb:g} MB: {verdict(under)}; "
        f"verification {verdict(ok)}"
    )
    return {
        "benchmark": "scale",
        "ok": ok and under,
        "limit_mb": limit_mb,
        "growth_bytes_per_file": round(slope, 2),
        "points": points,
    }
