"""``python -m aiocommit_stress``: build realistic jobs, commit them, verify every run,
report figures.

Scenarios: ``job``, ``sweep-concurrency``, ``sweep-throttle``, ``multi-job``, ``scale``,
``crash``, ``capacity``; benchmarks under ``bench``. Every command verifies its output,
exits 1 when a verification fails, writes every figure to ``--json PATH`` and prints its
headline figure last.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

import anyio
import click

from aiocommit import CommitOptions
from aiocommit.options import LimitOptions, RetryOptions
from aiocommit_stress.jobgen import JobSpec, SizeDist
from aiocommit_stress.report import DEFAULT_OUT, Reporter, write_json
from aiocommit_stress.scenarios import Common, verdict
from aiocommit_stress.targets import KINDS, FaultOptions

F = TypeVar("F", bound=Callable[..., Any])


def _compose(*decorators: Callable[[F], F]) -> Callable[[F], F]:
    def apply(function: F) -> F:
        for decorator in reversed(decorators):
            function = decorator(function)
        return function

    return apply


def _floats(text: str) -> list[float]:
    return [float(part) for part in text.split(",") if part.strip()]


def _ints(text: str) -> list[int]:
    return [int(float(part)) for part in text.split(",") if part.strip()]


def job_options(
    tasks: int = 20,
    files: int = 20,
    dirs: int = 4,
    failed: float = 0.0,
    aborted: float = 0.0,
    duplicates: float = 0.0,
) -> Callable[[F], F]:
    return _compose(
        click.option("--tasks", type=int, default=tasks, show_default=True, help="Tasks (T)."),
        click.option(
            "--files-per-task",
            type=int,
            default=files,
            show_default=True,
            help="Files per task (F).",
        ),
        click.option(
            "--dirs",
            type=int,
            default=dirs,
            show_default=True,
            help="Leaf partition directories (D).",
        ),
        click.option(
            "--depth",
            type=int,
            default=1,
            show_default=True,
            help="key=value nesting depth of the partition directories.",
        ),
        click.option(
            "--sizes",
            default="lognormal:1024:1.0:65536",
            show_default=True,
            help="fixed:N | uniform:LOW:HIGH | lognormal:MEDIAN:SIGMA[:CAP] bytes.",
        ),
        click.option(
            "--odd-names/--plain-names",
            default=False,
            show_default=True,
            help="Spaces, %, #, ?, unicode... in directory and file names.",
        ),
        click.option(
            "--failed",
            type=float,
            default=failed,
            show_default=True,
            help="Fraction of tasks whose first attempt fails (before or in commit).",
        ),
        click.option(
            "--aborted",
            type=float,
            default=aborted,
            show_default=True,
            help="Fraction of tasks whose first attempt is aborted.",
        ),
        click.option(
            "--duplicates",
            type=float,
            default=duplicates,
            show_default=True,
            help="Fraction of tasks with two committing attempts (last wins).",
        ),
        click.option("--seed", type=int, default=0, show_default=True),
    )


def target_options(store: str = "memory") -> Callable[[F], F]:
    return _compose(
        click.option(
            "--store",
            default=store,
            show_default=True,
            help=f"{' | '.join(KINDS)} | a store URL (file:///..., memory://..., "
            "abfss://..., gs://...).",
        ),
        click.option(
            "--workdir",
            type=click.Path(file_okay=False),
            default=None,
            help="Parent directory for the local store's scratch directory.",
        ),
        click.option("--keep", is_flag=True, help="Keep the committed output."),
        click.option(
            "--prep-concurrency",
            type=int,
            default=16,
            show_default=True,
            help="Tasks prepared at once.",
        ),
    )


def fault_options(latency_ms: float = 0.0, capacity: bool = True) -> Callable[[F], F]:
    options = [
        click.option(
            "--latency-ms",
            type=float,
            default=latency_ms,
            show_default=True,
            help="Latency injected per store call during the job commit.",
        ),
        click.option("--jitter-ms", type=float, default=0.0, show_default=True),
        click.option(
            "--spike-prob",
            type=float,
            default=0.0,
            show_default=True,
            help="Probability of a tail-latency spike per call.",
        ),
        click.option("--spike-ms", type=float, default=0.0, show_default=True),
        click.option(
            "--throttle",
            type=float,
            default=0.0,
            show_default=True,
            help="Probability a call is throttled (503).",
        ),
        click.option("--throttle-burst", type=int, default=0, show_default=True),
        click.option("--retry-after", type=float, default=None, help="Retry-After seconds."),
        click.option(
            "--transient",
            type=float,
            default=0.0,
            show_default=True,
            help="Probability of a transient error.",
        ),
        click.option(
            "--lost-responses",
            type=float,
            default=0.0,
            show_default=True,
            help="Probability a rename/delete is applied but its answer lost.",
        ),
        click.option("--fault-seed", type=int, default=0, show_default=True),
    ]
    if capacity:
        options.append(
            click.option(
                "--capacity",
                type=float,
                default=None,
                help="Store capacity in calls/s; beyond it, throttled.",
            )
        )
    return _compose(*options)


def commit_options(concurrency: int = 256) -> Callable[[F], F]:
    return _compose(
        click.option("--concurrency", type=int, default=concurrency, show_default=True),
        click.option(
            "--adaptive/--no-adaptive",
            default=True,
            show_default=True,
            help="Adaptive concurrency (AIMD on throttling).",
        ),
        click.option("--min-concurrency", type=int, default=4, show_default=True),
        click.option("--rate-limit", type=float, default=None, help="Store calls per second."),
        click.option(
            "--max-attempts", type=int, default=RetryOptions.max_attempts, show_default=True
        ),
        click.option("--validate-output", is_flag=True, help="Engine's own output validation."),
    )


def output_options(function: F) -> F:
    return _compose(
        click.option(
            "--json",
            "json_path",
            type=click.Path(dir_okay=False, path_type=Path),
            default=None,
            help="Write every figure to this JSON file.",
        ),
        click.option(
            "--out",
            type=click.Path(file_okay=False, path_type=Path),
            default=DEFAULT_OUT,
            show_default=True,
            help="Directory for plots.",
        ),
        click.option(
            "--progress/--no-progress",
            default=None,
            help="Live progress bar (default: when stderr is a terminal).",
        ),
        click.option("--quiet", is_flag=True, help="Only the headline figure."),
        click.option(
            "--profile",
            type=click.Path(dir_okay=False, path_type=Path),
            default=None,
            help="cProfile the job commit into this file (this process, not rename workers).",
        ),
    )(function)


def _spec(kw: dict[str, Any]) -> JobSpec:
    return JobSpec(
        tasks=kw.pop("tasks"),
        files_per_task=kw.pop("files_per_task"),
        dirs=kw.pop("dirs"),
        depth=kw.pop("depth"),
        sizes=SizeDist.parse(kw.pop("sizes")),
        odd_names=kw.pop("odd_names"),
        failed=kw.pop("failed"),
        aborted=kw.pop("aborted"),
        duplicates=kw.pop("duplicates"),
        seed=kw.pop("seed"),
    )


def _faults(kw: dict[str, Any]) -> FaultOptions:
    return FaultOptions(
        latency_ms=kw.pop("latency_ms"),
        jitter_ms=kw.pop("jitter_ms"),
        spike_probability=kw.pop("spike_prob"),
        spike_ms=kw.pop("spike_ms"),
        throttle=kw.pop("throttle"),
        throttle_burst=kw.pop("throttle_burst"),
        retry_after=kw.pop("retry_after"),
        capacity=kw.pop("capacity", None),
        transient=kw.pop("transient"),
        lost_responses=kw.pop("lost_responses"),
        seed=kw.pop("fault_seed"),
    )


def _options(kw: dict[str, Any]) -> CommitOptions:
    return CommitOptions(
        concurrency=kw.pop("concurrency"),
        adaptive_concurrency=kw.pop("adaptive"),
        min_concurrency=kw.pop("min_concurrency"),
        rate_limit=kw.pop("rate_limit"),
        max_attempts=kw.pop("max_attempts"),
        validate_output=kw.pop("validate_output"),
    )


def _common(kw: dict[str, Any]) -> Common:
    return Common(
        store=kw.pop("store", "memory"),
        workdir=kw.pop("workdir", None),
        keep=kw.pop("keep", False),
        prep_concurrency=kw.pop("prep_concurrency", 16),
        out=kw["out"],
        profile=kw.get("profile"),
    )


def _run(kw: dict[str, Any], make: Callable[[Reporter], Awaitable[dict[str, Any]]]) -> None:
    """Run a scenario; write its JSON; exit 1 unless it verified."""
    reporter = Reporter(progress=kw.get("progress"), quiet=kw.get("quiet", False))
    result = anyio.run(make, reporter)
    json_path: Path | None = kw.get("json_path")
    if json_path is not None:
        write_json(json_path, result)
        reporter.log(f"figures written to {json_path}")
    if not result.get("ok", False):
        sys.exit(1)


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
def main() -> None:
    """Stress scenarios and benchmarks for aiocommit's job commit; every run is verified."""


@main.command()
@job_options(tasks=20, files=20, failed=0.05, aborted=0.05, duplicates=0.05)
@target_options()
@fault_options()
@commit_options()
@output_options
def job(**kw: Any) -> None:
    """One job commit at a given size (``--store s3``: the staging committer on moto)."""
    from aiocommit_stress.scenarios import job_scenario

    if kw["store"] == "s3":
        _s3_job(kw)
        return
    spec, faults, options, common = _spec(kw), _faults(kw), _options(kw), _common(kw)
    _run(kw, lambda r: job_scenario(common, spec, faults, options, r))


def _s3_job(kw: dict[str, Any]) -> None:
    from aiocommit_stress.s3 import job_scenario as s3_job

    tasks, files, seed = kw["tasks"], kw["files_per_task"], kw["seed"]
    faults, options = _faults(kw), _options(kw)
    _run(
        kw,
        lambda r: s3_job(
            tasks=tasks,
            files=files,
            committer="staging",
            faults=faults,
            options=options,
            seed=seed,
            reporter=r,
        ),
    )


def _s3_crash(kw: dict[str, Any], runs: int, seed: int, tasks: int = 4, files: int = 4) -> None:
    from aiocommit_stress.s3 import crash_scenario

    _run(
        kw,
        lambda r: crash_scenario(
            runs=runs, tasks=tasks, files=files, committer="staging", seed=seed, reporter=r
        ),
    )


@main.command("sweep-concurrency")
@job_options(tasks=100, files=100, dirs=10)
@target_options()
@fault_options(latency_ms=10.0)
@commit_options()
@click.option("--concurrency-list", default="4,8,16,32,64,128,256,512", show_default=True)
@output_options
def sweep_concurrency_command(**kw: Any) -> None:
    """Store ops/s vs concurrency at a fixed latency (plot: sweep_concurrency.png)."""
    from aiocommit_stress.scenarios import sweep_concurrency

    values = _ints(kw.pop("concurrency_list"))
    spec, faults, options, common = _spec(kw), _faults(kw), _options(kw), _common(kw)
    _run(kw, lambda r: sweep_concurrency(common, spec, faults, options, values, r))


@main.command("sweep-throttle")
@job_options(tasks=50, files=100, dirs=10)
@target_options()
@fault_options(latency_ms=5.0)
@commit_options(concurrency=64)
@click.option("--throttle-list", default="0,0.01,0.02,0.05,0.1,0.2", show_default=True)
@output_options
def sweep_throttle_command(**kw: Any) -> None:
    """Goodput and retries as throttling rises, adaptive concurrency on and off
    (plot: sweep_throttle.png)."""
    from aiocommit_stress.scenarios import sweep_throttle

    values = _floats(kw.pop("throttle_list"))
    spec, faults, options, common = _spec(kw), _faults(kw), _options(kw), _common(kw)
    _run(kw, lambda r: sweep_throttle(common, spec, faults, options, values, r))


@main.group()
def sweep() -> None:
    """Randomized sweeps checked against a model; exit 1 on any inexact scenario."""


@sweep.command("concurrent-jobs")
@click.option(
    "--store",
    "stores",
    default="memory,local,s3,adls,gcs",
    show_default=True,
    help="Comma-separated: memory, local, s3 (moto), adls, gcs (emulators started here).",
)
@click.option(
    "--scenarios",
    type=int,
    default=100,
    show_default=True,
    help="Scenarios per store with failed jobs aborted, and as many with them re-run.",
)
@click.option(
    "--kills",
    type=int,
    default=0,
    show_default=True,
    help="Scenarios per store with one CLI commit SIGKILLed, then re-run (not memory).",
)
@click.option("--seed", type=int, default=3300, show_default=True, help="Kills: SEED + 1.")
@click.option("--parallel", type=int, default=None, help="Scenarios at a time (each store's).")
@output_options
def sweep_concurrent_jobs(**kw: Any) -> None:
    """2-4 jobs on one destination commit together (random modes, partitions, delays,
    aborts, SIGKILLed CLI commits, re-runs); every final state must be a serial order of
    the jobs that succeeded, with nothing left (docs/protocol.md). Prints exact/total per
    store and variant."""
    import logging

    from aiocommit_stress.concurrent_sweep import SWEEP_STORES, VariantFigures, sweep_variants

    stores = [s.strip() for s in kw.pop("stores").split(",") if s.strip()]
    unknown = [s for s in stores if s not in SWEEP_STORES]
    if unknown:
        raise click.BadParameter(f"{', '.join(unknown)}: use {', '.join(SWEEP_STORES)}")
    scenarios, kills, seed, parallel = (
        kw.pop(k) for k in ("scenarios", "kills", "seed", "parallel")
    )

    async def run(reporter: Reporter) -> dict[str, Any]:
        found: list[VariantFigures] = []

        def show(variant: VariantFigures) -> None:
            reporter.out.print(variant.line())
            for failure in variant.figures.failures[:5]:
                reporter.out.print(f"  inexact: {failure}")

        for store in stores:
            started = time.monotonic()
            found += await sweep_variants(
                store, scenarios, kills, seed=seed, parallel=parallel, on_variant=show
            )
            reporter.out.print(f"  ({store}: {time.monotonic() - started:.0f} s)")
        exact = sum(v.figures.exact for v in found)
        total = sum(v.figures.scenarios for v in found)
        table = "; ".join(
            f"{v.store} {v.variant.split()[-1]} {v.figures.exact}/{v.figures.scenarios}"
            for v in found
        )
        ok = all(v.exact for v in found)
        reporter.figure(f"concurrent-jobs sweep: {exact}/{total} exact ({table}); {verdict(ok)}")
        return {
            "sweep": "concurrent-jobs",
            "seed": seed,
            "results": [
                {
                    "store": v.store,
                    "variant": v.variant,
                    "seed": v.seed,
                    "scenarios": v.figures.scenarios,
                    "exact": v.figures.exact,
                    "killed": v.figures.killed,
                    "failures": v.figures.failures,
                }
                for v in found
            ],
            "ok": ok,
        }

    # take-overs and the proxies' cut connections of killed commits are the point here
    quieted = {"aiocommit": logging.ERROR, "aiohttp.server": logging.CRITICAL}
    levels = {name: logging.getLogger(name).level for name in quieted}
    for name, level in quieted.items():
        logging.getLogger(name).setLevel(level)
    try:
        _run(kw, run)
    finally:
        for name, level in levels.items():
            logging.getLogger(name).setLevel(level)


@sweep.command("streaming")
@click.option("--seeds", type=int, default=3, show_default=True, help="Seeded runs per sink.")
@click.option("--seed", type=int, default=3500, show_default=True, help="The first seed.")
@click.option("--batches", type=int, default=20, show_default=True, help="Micro-batches.")
@click.option("--kills", type=int, default=3, show_default=True, help="SIGKILLs per run.")
@click.option(
    "--sinks",
    default="aiocommit,parquet",
    show_default=True,
    help="Comma-separated: aiocommit (format('aiocommit')), parquet (Spark's file sink).",
)
@click.option(
    "--workdir",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Where the runs' input, checkpoints and output go (default: a temporary one).",
)
@output_options
def sweep_streaming(**kw: Any) -> None:
    """A file-source stream (one micro-batch per file) SIGKILLed at seeded points and
    restarted from its checkpoint, into format("aiocommit") and into Spark's own file
    sink, alternating by seed; a plain-directory reader lists and reads the destination
    throughout. Fails unless every aiocommit run is exactly once, leaves nothing behind
    and its reader never saw a partial batch, a row twice or an unreadable file; Spark's
    sink is reported, not judged."""
    import tempfile
    from functools import partial

    from aiocommit_stress.streaming_sweep import SINKS, RunFigures, run_seed

    sinks = [s.strip() for s in kw.pop("sinks").split(",") if s.strip()]
    unknown = [s for s in sinks if s not in SINKS]
    if unknown:
        raise click.BadParameter(f"{', '.join(unknown)}: use {', '.join(SINKS)}")
    seeds, first, batches, kills, workdir = (
        kw.pop(k) for k in ("seeds", "seed", "batches", "kills", "workdir")
    )

    async def run(reporter: Reporter) -> dict[str, Any]:
        found: list[RunFigures] = []
        with tempfile.TemporaryDirectory(prefix="aiocommit-streaming-") as scratch:
            root = Path(workdir) if workdir is not None else Path(scratch)
            for seed in range(first, first + seeds):
                for sink in sinks:
                    one = partial(
                        run_seed, sink, seed, root, batches=batches, kills=kills, log=reporter.log
                    )
                    figures = await anyio.to_thread.run_sync(one)
                    reporter.out.print(figures.line())
                    found.append(figures)
        summary = []
        for sink in sinks:
            runs = [f for f in found if f.sink == sink]
            summary.append(
                f"{sink}: {sum(f.exactly_once for f in runs)}/{len(runs)} exactly once, "
                f"{sum(len(f.kills) for f in runs)} kills, "
                f"{sum(f.duplicated_rows for f in runs)} rows duplicated, "
                f"{sum(f.orphan_files for f in runs)} orphan and "
                f"{sum(f.unreadable_files for f in runs)} unreadable files; the reader saw "
                f"partial batches in {sum(f.reader.partial for f in runs)}, duplicates in "
                f"{sum(f.reader.duplicated for f in runs)}, unreadable files in "
                f"{sum(f.reader.unreadable for f in runs)}, retracted batches in "
                f"{sum(f.reader.retracted for f in runs)} of "
                f"{sum(f.reader.observations for f in runs)} listings"
            )
        ok = all(f.clean for f in found if f.sink == "aiocommit")
        reporter.figure(f"streaming sweep: {'; '.join(summary)}; {verdict(ok)}")
        return {
            "sweep": "streaming",
            "seed": first,
            "batches": batches,
            "results": [f.as_json() for f in found],
            "ok": ok,
        }

    _run(kw, run)


@main.command("multi-job")
@job_options(tasks=10, files=20, failed=0.05, aborted=0.05, duplicates=0.05)
@target_options()
@fault_options(latency_ms=2.0)
@commit_options(concurrency=64)
@click.option("--jobs", type=int, default=8, show_default=True)
@click.option(
    "--shared-dest/--separate-dests",
    default=False,
    show_default=True,
    help="All jobs commit into one destination (disjoint partitions).",
)
@output_options
def multi_job_command(**kw: Any) -> None:
    """Many concurrent jobs in one event loop sharing one store client."""
    from aiocommit_stress.scenarios import multi_job

    jobs, shared = kw.pop("jobs"), kw.pop("shared_dest")
    spec, faults, options, common = _spec(kw), _faults(kw), _options(kw), _common(kw)
    _run(kw, lambda r: multi_job(common, spec, faults, options, jobs, shared, r))


@main.command()
@job_options(tasks=100, files=100, dirs=10)
@target_options()
@fault_options(latency_ms=20.0, capacity=False)
@commit_options()
@click.option(
    "--capacity",
    "capacity_per_second",
    type=float,
    default=1000.0,
    show_default=True,
    help="Calls per second the store serves (R).",
)
@output_options
def capacity(**kw: Any) -> None:
    """A store that serves at most R calls/s: adaptive concurrency on (no rate limit) and off
    (plot: capacity.png)."""
    from aiocommit_stress.scenarios import capacity as run_capacity

    rate = kw.pop("capacity_per_second")
    spec, faults, options, common = _spec(kw), _faults(kw), _options(kw), _common(kw)
    _run(kw, lambda r: run_capacity(common, spec, faults, options, rate, r))


@main.command()
@click.option("--files", type=int, default=10_000_000, show_default=True)
@click.option("--files-per-task", type=int, default=1000, show_default=True)
@click.option("--dirs", type=int, default=100, show_default=True)
@commit_options()
@output_options
def scale(**kw: Any) -> None:
    """A synthetic job of millions of files in this process: peak RSS is the engine's."""
    from aiocommit_stress.synthetic import scale as run_scale

    files, per_task, dirs = kw.pop("files"), kw.pop("files_per_task"), kw.pop("dirs")
    options = _options(kw)
    _run(kw, lambda r: run_scale(files, per_task, dirs, options, r))


@main.command()
@click.option("--runs", type=int, default=20, show_default=True, help="Kills to make.")
@job_options(tasks=8, files=8, dirs=4, failed=0.1, aborted=0.1, duplicates=0.1)
@click.option("--latency-ms", type=float, default=2.0, show_default=True)
@click.option("--jitter-ms", type=float, default=2.0, show_default=True)
@click.option("--concurrency", type=int, default=8, show_default=True)
@click.option("--workdir", type=click.Path(file_okay=False), default=None)
@click.option("--max-seconds", type=float, default=None, help="Stop making kills after this.")
@click.option(
    "--store",
    type=click.Choice(["local", "s3"]),
    default="local",
    show_default=True,
    help="local: the manifest committer; s3: the staging committer on moto.",
)
@output_options
def crash(**kw: Any) -> None:
    """Job commits in a subprocess killed with SIGKILL at random points, re-run, verified
    (local store, or S3 on moto)."""
    from aiocommit_stress.crash import crash as run_crash

    runs, seed = kw.pop("runs"), kw["seed"]
    if kw.pop("store") == "s3":
        _s3_crash(kw, runs, seed, kw["tasks"], kw["files_per_task"])
        return
    spec = _spec(kw)
    faults = FaultOptions(latency_ms=kw.pop("latency_ms"), jitter_ms=kw.pop("jitter_ms"))
    concurrency, workdir, limit = kw.pop("concurrency"), kw.pop("workdir"), kw.pop("max_seconds")
    _run(
        kw,
        lambda r: run_crash(
            runs=runs,
            spec=spec,
            faults=faults,
            concurrency=concurrency,
            seed=seed,
            workdir=workdir,
            reporter=r,
            max_seconds=limit,
        ),
    )


@main.command("kill-cli")
@click.option(
    "--operation",
    type=click.Choice(["abort", "cleanup", "replace"]),
    default="abort",
    show_default=True,
)
@click.option("--runs", type=int, default=40, show_default=True, help="Kills to make.")
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--workdir", type=click.Path(file_okay=False), default=None)
@output_options
def kill_cli(**kw: Any) -> None:
    """`aiocommit abort`, `aiocommit cleanup` or `aiocommit commit --conflict-mode
    replace` killed with SIGKILL at stratified random store calls beside other jobs'
    work, re-run (a replace: re-run or aborted, every other run), and checked (local
    store)."""
    import tempfile

    from aiocommit_stress.kill_cli import kill_anywhere

    operation, runs, seed = kw.pop("operation"), kw.pop("runs"), kw.pop("seed")
    workdir = kw.pop("workdir") or tempfile.mkdtemp(prefix="aiocommit-kill-")

    async def make(reporter: Reporter) -> dict[str, Any]:
        figures = await kill_anywhere(operation, runs=runs, seed=seed, workdir=workdir)
        for failure in figures["failures"]:
            reporter.out.print(f"[red]  {failure}")
        reporter.figure(
            f"kill-cli {operation}: {figures['kills']} kills at random store calls of "
            f"{figures['calls_unkilled']}, {len(figures['failures'])} failures after re-run; "
            f"{'PASS' if figures['ok'] else 'FAIL'}"
        )
        return {"scenario": "kill-cli", "ok": figures["ok"], "figures": figures}

    _run(kw, make)


# -- benchmarks ----------------------------------------------------------------------------


@main.command()
@click.option("--store", type=click.Choice(["adls", "gcs", "s3"]), required=True)
@click.option("--seeds", type=int, default=20, show_default=True)
@click.option("--first-seed", type=int, default=0, show_default=True)
@click.option("--tasks", type=int, default=4, show_default=True, help="Tasks per job.")
@click.option("--files-per-task", type=int, default=250, show_default=True)
@click.option("--throttle", type=float, default=0.2, show_default=True)
@click.option("--lost", type=float, default=0.05, show_default=True, help="Lost responses.")
@click.option("--reset", type=float, default=0.03, show_default=True, help="Resets.")
@click.option("--latency-ms", type=float, default=2.0, show_default=True, help="Median.")
@click.option("--retry-after", type=float, default=1.0, show_default=True)
@output_options
def chaos(**kw: Any) -> None:
    """Seeded whole jobs (set-up, tasks, job commit, abort) through the chaos proxy in
    front of the store's emulator, default options; the destination checked directly.
    Passes when every seed is exact and no public call raised."""
    from aiocommit_stress.chaos import chaos_scenario, chaos_settings

    settings = chaos_settings(
        throttle=kw["throttle"],
        lost=kw["lost"],
        reset=kw["reset"],
        latency=kw["latency_ms"] / 1000,
        retry_after=kw["retry_after"],
    )
    _run(
        kw,
        lambda r: chaos_scenario(
            kw["store"],
            seeds=kw["seeds"],
            first_seed=kw["first_seed"],
            tasks=kw["tasks"],
            files=kw["files_per_task"],
            chaos=settings,
            options=CommitOptions(),
            reporter=r,
        ),
    )


@main.group()
def bench() -> None:
    """The benchmark suite; each prints its figure last."""


def _latency_command(name: str, latency_ms: float, hadoop_threads: str) -> Callable[..., None]:
    @click.option("--tasks", type=int, default=1000, show_default=True)
    @click.option("--files-per-task", type=int, default=100, show_default=True)
    @click.option("--dirs", type=int, default=10, show_default=True)
    @click.option("--latency-ms", type=float, default=latency_ms, show_default=True)
    @click.option("--concurrency", type=int, default=2048, show_default=True)
    @click.option(
        "--processes",
        type=int,
        default=0,
        show_default=True,
        help="Rename worker processes (0: one per core, 1: the caller's event loop).",
    )
    @click.option(
        "--hadoop-threads",
        default=hadoop_threads,
        show_default=True,
        help="Hadoop ManifestCommitter thread counts to run in the same run ('' for none).",
    )
    @target_options(store="local")
    @click.option("--seed", type=int, default=0, show_default=True)
    @output_options
    def command(**kw: Any) -> None:
        from aiocommit_stress.bench import latency_bench

        spec = JobSpec(
            tasks=kw.pop("tasks"),
            files_per_task=kw.pop("files_per_task"),
            dirs=kw.pop("dirs"),
            seed=kw.pop("seed"),
        )
        latency = kw.pop("latency_ms")
        options = CommitOptions(concurrency=kw.pop("concurrency"), processes=kw.pop("processes"))
        threads = _ints(kw.pop("hadoop_threads"))
        common = _common(kw)
        _run(
            kw,
            lambda r: latency_bench(
                name, common, spec, latency, options, r, hadoop_threads=threads
            ),
        )

    command.__doc__ = (
        f"{name}: job commit of T tasks x F files over D dirs at {latency_ms:g} ms per store "
        "call; ratio to the ideal, and Hadoop's committer on the same job in the same run."
    )
    return command


bench.command("w1")(_latency_command("W1", 10.0, "32,256"))
bench.command("w2")(_latency_command("W2", 50.0, "256"))


@bench.command("throttled")
@click.option("--store", type=click.Choice(["adls", "gcs", "s3"]), required=True)
@click.option("--rate", type=float, required=True, help="Requests/s the store admits (R).")
@click.option("--files", type=int, default=20000, show_default=True)
@click.option("--tasks", type=int, default=20, show_default=True)
@click.option(
    "--halve-at",
    type=float,
    default=None,
    help="Seconds into the commit at which the store tightens to R/2.",
)
@click.option(
    "--capacity-files",
    type=int,
    default=2000,
    show_default=True,
    help="Files of the unthrottled commit that measures this machine's capacity first.",
)
@click.option(
    "--partitions",
    type=int,
    default=8,
    show_default=True,
    help="Partition directories the files spread over (on S3, each a prefix limited to R).",
)
@output_options
def bench_throttled(**kw: Any) -> None:
    """Job commit through a token-bucket throttling front (per ADLS account, GCS bucket,
    S3 prefix) at R requests/s, default options: files/s and requests/s against R,
    throttled share, retries per file; first the unthrottled capacity, same run. Plots
    files/s against time into OUT/throttled-STORE.png."""
    from aiocommit_stress.throttled import throttled_bench

    _run(
        kw,
        lambda r: throttled_bench(
            kw["store"],
            rate=kw["rate"],
            files=kw["files"],
            tasks=kw["tasks"],
            reporter=r,
            halve_at=kw["halve_at"],
            capacity_files=kw["capacity_files"],
            partitions=kw["partitions"],
            out=kw["out"],
        ),
    )


@bench.command("random-throttle")
@click.option(
    "--stores",
    default="adls,gcs,s3",
    show_default=True,
    help="Stores committed to in parallel, each behind its own chaos proxy.",
)
@click.option(
    "--shares",
    default="0.2,0.3",
    show_default=True,
    help="Throttled shares of requests, at random (after an unthrottled commit).",
)
@click.option("--files", type=int, default=1000, show_default=True)
@click.option("--tasks", type=int, default=10, show_default=True)
@click.option("--target", type=float, default=3.0, show_default=True, help="Most x unthrottled.")
@click.option("--seed", type=int, default=0, show_default=True)
@click.option(
    "--retry-after-share",
    type=float,
    default=0.0,
    show_default=True,
    help="Share of throttle answers with Retry-After: 1. 0 answers as the stores do (Azure's "
    "503 ServerBusy, S3's 503 SlowDown and GCS's 429 come without it); 0.5 is the harder case.",
)
@output_options
def bench_random_throttle(**kw: Any) -> None:
    """Job commit through a front throttling a fixed share of requests at random (the
    store's own throttle answer, independent of the pace), default options, the stores
    in parallel (their emulators and fronts in child processes): seconds against the
    same store's unthrottled commit in the same run."""
    from aiocommit_stress.random_throttle import random_throttle_bench

    stores = tuple(s.strip() for s in kw["stores"].split(",") if s.strip())
    shares = tuple(float(s) for s in kw["shares"].split(",") if s.strip())
    _run(
        kw,
        lambda r: random_throttle_bench(
            stores=stores,
            shares=shares,
            files=kw["files"],
            tasks=kw["tasks"],
            target=kw["target"],
            seed=kw["seed"],
            retry_after_share=kw["retry_after_share"],
            reporter=r,
        ),
    )


@bench.command("throttled-plot")
@click.argument(
    "results", nargs=-1, required=True, type=click.Path(exists=True, dir_okay=False, path_type=Path)
)
@click.option(
    "--png",
    type=click.Path(dir_okay=False, path_type=Path),
    default=Path("docs/performance-throttled.png"),
    show_default=True,
)
def bench_throttled_plot(results: tuple[Path, ...], png: Path) -> None:
    """Plot files/s against time from ``bench throttled --json`` files."""
    import json

    from aiocommit_stress.throttled import plot_throttled

    click.echo(plot_throttled([json.loads(path.read_text()) for path in results], png))


@bench.command("loop")
@click.option(
    "--parts",
    default="local,cloud,concurrent,cancel,rss",
    show_default=True,
    help="Comma-separated: local, cloud, concurrent, cancel, rss, cloud-cancel, cloud-rss "
    "(the cancel and RSS parts on the cloud emulator, ADLS only: --cloud-files per job).",
)
@click.option("--files", type=int, default=100_000, show_default=True)
@click.option(
    "--cloud",
    type=click.Choice(["adls", "gcs", "s3"]),
    default="adls",
    show_default=True,
    help="The cloud part's emulator. On adls the tasks' output files are seeded into the "
    "emulator's state (one request per task, not three per file) and the task commits "
    "run through the store: what is measured is the job commit. gcs and s3 write every "
    "file (s3: the manifest committer, each rename a copy and a delete).",
)
@click.option("--cloud-files", type=int, default=100_000, show_default=True)
@click.option("--jobs", type=int, default=8, show_default=True, help="Commits at once.")
@click.option("--cancel-points", type=int, default=30, show_default=True)
@click.option("--cancel-files", type=int, default=20_000, show_default=True)
@click.option("--rss-files", type=int, default=20_000, show_default=True)
@click.option("--rss-commits", type=int, default=20, show_default=True)
@click.option("--rss-processes", default="1,0,2", show_default=True)
@click.option(
    "--processes",
    default=str(LimitOptions.processes),
    show_default=True,
    help="processes settings, comma-separated (1,0,2): the local, cloud, concurrent and "
    "cancel parts run once per setting.",
)
@click.option("--concurrency", type=int, default=LimitOptions.concurrency, show_default=True)
@click.option("--seed", type=int, default=0, show_default=True)
@click.option(
    "--tune-gc",
    is_flag=True,
    help="CommitOptions(tune_gc=True): the host opts in to a frozen heap and rarer "
    "collections during each commit (a process-wide change; off by default).",
)
@click.option(
    "--host",
    type=click.Choice(["service", "bench"]),
    default="service",
    show_default=True,
    help="Where the local, cloud and concurrent commits run: a service-like process "
    "(aiohttp and aiocommit loaded, not this harness), or this bench's own process.",
)
@click.option("--workdir", type=click.Path(file_okay=False), default=None)
@output_options
def bench_loop(**kw: Any) -> None:
    """A 1 ms ticker beside job commits (local, a cloud emulator, 8 at once), commits
    cancelled at seeded points, and RSS over many commits: the worst loop stall (the
    loop thread's own CPU per gap), the cancel latency and the RSS growth (flat: the
    trend over the last half of the commits adds at most 1 MB)."""
    from aiocommit_stress.loop_bench import PART_NAMES, loop_bench

    parts = [p for p in kw.pop("parts").split(",") if p]
    unknown = set(parts) - set(PART_NAMES)
    if unknown:
        raise click.BadParameter(f"unknown parts {sorted(unknown)}", param_hint="--parts")
    processes = _ints(kw.pop("processes"))
    if not processes:
        raise click.BadParameter("give at least one setting", param_hint="--processes")
    options = CommitOptions(
        concurrency=kw.pop("concurrency"), processes=processes[0], tune_gc=kw.pop("tune_gc")
    )
    figures = {
        name: kw.pop(name)
        for name in (
            "files",
            "cloud",
            "cloud_files",
            "jobs",
            "cancel_points",
            "cancel_files",
            "rss_files",
            "rss_commits",
            "seed",
            "host",
        )
    }
    rss_processes = _ints(kw.pop("rss_processes"))
    common = _common(kw)
    _run(
        kw,
        lambda r: loop_bench(
            common,
            parts,
            rss_processes=rss_processes,
            options=options,
            processes=processes,
            reporter=r,
            **figures,
        ),
    )


@bench.command("versus")
@click.option("--tasks", type=int, default=200, show_default=True)
@click.option("--files-per-task", type=int, default=100, show_default=True)
@click.option("--dirs", type=int, default=10, show_default=True)
@click.option("--latency-ms", type=float, default=10.0, show_default=True)
@click.option("--concurrency", "concurrencies", default="32,128,512,2048", show_default=True)
@click.option("--processes", type=int, default=0, show_default=True)
@target_options(store="local")
@output_options
def bench_versus(**kw: Any) -> None:
    """Store ops/s against concurrency, aiocommit and Hadoop's committer (plot)."""
    from aiocommit_stress.bench import versus_bench

    spec = JobSpec(
        tasks=kw.pop("tasks"), files_per_task=kw.pop("files_per_task"), dirs=kw.pop("dirs")
    )
    latency, processes = kw.pop("latency_ms"), kw.pop("processes")
    concurrencies = _ints(kw.pop("concurrencies"))
    common = _common(kw)
    _run(kw, lambda r: versus_bench(common, spec, latency, concurrencies, processes, r))


@bench.command("concurrent-jobs")
@click.option("--jobs", type=int, default=4, show_default=True)
@click.option("--files", type=int, default=20_000, show_default=True, help="Files per job.")
@click.option("--tasks", type=int, default=20, show_default=True, help="Tasks per job.")
@click.option("--workdir", type=click.Path(file_okay=False), default=None)
@click.option(
    "--drivers",
    type=click.Choice(["processes", "loop"]),
    default="processes",
    show_default=True,
    help="processes: each job's commit in a process of its own; loop: all in this "
    "process's event loop.",
)
@output_options
def bench_concurrent_jobs(**kw: Any) -> None:
    """Jobs into disjoint partitions of one local destination: committed together
    against one after another, both in this run (ratio: together / one after another)."""
    from aiocommit_stress.concurrent_jobs import concurrent_jobs_bench

    jobs, files, tasks, workdir, drivers = (
        kw.pop("jobs"),
        kw.pop("files"),
        kw.pop("tasks"),
        kw.pop("workdir"),
        kw.pop("drivers"),
    )
    _run(kw, lambda r: concurrent_jobs_bench(jobs, files, tasks, workdir, r, drivers))


@bench.command("cpu")
@click.option("--tasks", type=int, default=1000, show_default=True)
@click.option("--files-per-task", type=int, default=100, show_default=True)
@click.option("--dirs", type=int, default=10, show_default=True)
@click.option("--concurrency", type=int, default=256, show_default=True)
@click.option("--stores", default="local,memory", show_default=True)
@click.option("--workdir", type=click.Path(file_okay=False), default=None)
@output_options
def bench_cpu(**kw: Any) -> None:
    """CPU seconds per rename of the W1 job at 0 ms (engine cost per operation)."""
    from aiocommit_stress.bench import cpu_bench

    spec = JobSpec(
        tasks=kw.pop("tasks"), files_per_task=kw.pop("files_per_task"), dirs=kw.pop("dirs")
    )
    stores = [s for s in kw.pop("stores").split(",") if s]
    options = CommitOptions(concurrency=kw.pop("concurrency"))
    common = _common(kw)
    _run(kw, lambda r: cpu_bench(common, stores, spec, options, r))


@bench.command("ops")
@click.option(
    "--store",
    "stores",
    default="adls",
    show_default=True,
    help="Comma-separated: adls, gcs, local, memory, s3 (moto).",
)
@click.option("--files", type=int, default=2000, show_default=True)
@click.option("--concurrency", type=int, default=64, show_default=True)
@output_options
def bench_ops(**kw: Any) -> None:
    """Client CPU µs per rename/stat/delete through each adapter (server in another
    process) and the bare aiohttp request floor."""
    from aiocommit_stress.ops_bench import ops_bench

    stores = [s for s in kw.pop("stores").split(",") if s]
    files, concurrency, profile = kw.pop("files"), kw.pop("concurrency"), kw.get("profile")
    _run(kw, lambda r: ops_bench(stores, files, concurrency, r, profile))


@bench.command("task-scan")
@click.option("--dirs", type=int, default=1000, show_default=True)
@click.option("--files-per-dir", type=int, default=10, show_default=True)
@click.option("--depth", type=int, default=1, show_default=True)
@click.option("--latency-ms", type=float, default=10.0, show_default=True)
@click.option("--concurrency", type=int, default=256, show_default=True)
@target_options(store="local")
@output_options
def bench_task_scan(**kw: Any) -> None:
    """Task commit of a D-dir x F-file tree at L ms (parallel scan) vs a sequential scan."""
    from aiocommit_stress.bench import task_scan_bench

    dirs, per_dir, depth = kw.pop("dirs"), kw.pop("files_per_dir"), kw.pop("depth")
    latency = kw.pop("latency_ms")
    options = CommitOptions(concurrency=kw.pop("concurrency"))
    common = _common(kw)
    _run(kw, lambda r: task_scan_bench(common, dirs, per_dir, depth, latency, options, r))


@bench.command("scale")
@click.option(
    "--sizes",
    default="1000000,10000000",
    show_default=True,
    help="File counts, each run in a fresh process.",
)
@click.option("--files-per-task", type=int, default=1000, show_default=True)
@click.option("--dirs", type=int, default=100, show_default=True)
@click.option("--concurrency", type=int, default=256, show_default=True)
@click.option("--limit-mb", type=float, default=512, show_default=True)
@output_options
def bench_scale(**kw: Any) -> None:
    """Peak RSS of the synthetic job commit at several file counts."""
    from aiocommit_stress.bench import scale_bench

    sizes = _ints(kw.pop("sizes"))
    per_task, dirs, concurrency = kw.pop("files_per_task"), kw.pop("dirs"), kw.pop("concurrency")
    limit = kw.pop("limit_mb")
    _run(kw, lambda r: scale_bench(sizes, per_task, dirs, concurrency, limit, r))


@bench.command("s3-cost")
@click.option("--tasks", type=int, default=4, show_default=True)
@click.option("--files-per-task", type=int, default=25, show_default=True)
@output_options
def bench_s3_cost(**kw: Any) -> None:
    """HTTP requests and copies per file on S3 (moto): staging and magic committers
    against the manifest committer, measured in one run."""
    from aiocommit_stress.s3 import cost_scenario

    tasks, files = kw.pop("tasks"), kw.pop("files_per_task")
    _run(kw, lambda r: cost_scenario(tasks=tasks, files=files, reporter=r))


@bench.command("crash")
@click.option("--runs", type=int, default=200, show_default=True)
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--workdir", type=click.Path(file_okay=False), default=None)
@click.option(
    "--store",
    type=click.Choice(["local", "s3"]),
    default="local",
    show_default=True,
    help="local: the manifest committer; s3: the staging committer on moto.",
)
@output_options
def bench_crash(**kw: Any) -> None:
    """200 SIGKILLs at random points of a job commit, each re-run and verified (on S3:
    also no outstanding multipart upload left)."""
    from aiocommit_stress.crash import crash as run_crash

    runs, seed, workdir = kw.pop("runs"), kw.pop("seed"), kw.pop("workdir")
    if kw.pop("store") == "s3":
        _s3_crash(kw, runs, seed)
        return
    spec = JobSpec(
        tasks=8, files_per_task=8, dirs=4, failed=0.1, aborted=0.1, duplicates=0.1, seed=seed
    )
    faults = FaultOptions(latency_ms=2.0, jitter_ms=2.0)
    _run(
        kw,
        lambda r: run_crash(
            runs=runs,
            spec=spec,
            faults=faults,
            concurrency=8,
            seed=seed,
            workdir=workdir,
            reporter=r,
        ),
    )
