"""One measured job commit: the engine talks to ``MeteredStore(FaultyStore(store))``;
time, CPU, RSS and the store figures are taken around ``commit_job`` only, and the output is
verified afterwards through the raw store."""

from __future__ import annotations

import cProfile
import glob
import io
import os
import pstats
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from aiocommit import CommitOptions, commit_job
from aiocommit.protocol import statistics as S
from aiocommit.protocol.success import SuccessData
from aiocommit_stress.jobgen import JobSpec, PreparedJob, prepare_job
from aiocommit_stress.metering import CpuClock, MeteredStore, RssSampler
from aiocommit_stress.report import Reporter, mb, run_table
from aiocommit_stress.targets import FaultOptions, Target
from aiocommit_stress.verify import Verification, verify_output

#: iostatistics counters copied into every report
ENGINE_COUNTERS = (
    S.COMMITTER_FILES_COMMITTED,
    S.COMMITTER_BYTES_COMMITTED,
    S.COMMITTER_TASKS_COMPLETED,
    S.COMMITTER_DIRECTORIES_CREATED,
    S.COMMIT_FILE_RENAME_RECOVERED,
    S.COMMITTER_FILES_ALREADY_COMMITTED,
    S.COMMITTER_UNCOMMITTED_TASK_ATTEMPTS_DELETED,
    S.STORE_IO_RETRY,
    S.STORE_IO_THROTTLED,
    S.STORE_IO_TRANSIENT,
    S.STORE_IO_CONCURRENCY_DECREASED,
)


def options_dict(options: CommitOptions) -> dict[str, Any]:
    return {
        "concurrency": options.concurrency,
        "adaptive_concurrency": options.adaptive_concurrency,
        "min_concurrency": options.min_concurrency,
        "rate_limit": options.rate_limit,
        "max_attempts": options.max_attempts,
        "validate_output": options.validate_output,
    }


def spill_dirs() -> set[str]:
    """The engine's manifest spill directories currently in the temp dir."""
    return set(glob.glob(os.path.join(tempfile.gettempdir(), "aiocommit-spill-*")))


@dataclass
class CommitRun:
    label: str
    files: int
    bytes: int
    seconds: float
    cpu: CpuClock
    rss: RssSampler
    metered: MeteredStore
    faults: FaultOptions
    options: CommitOptions
    summary: SuccessData | None = None
    error: str | None = None
    verification: Verification | None = None
    leaked_spill_dirs: int = 0
    profile_top: list[str] = field(default_factory=list)
    #: after a failed commit: did a plain re-run (no faults) finish it, and how long it took
    recovered: bool | None = None
    recovery_seconds: float | None = None

    @property
    def ok(self) -> bool:
        """The commit succeeded and its output verified."""
        return self.error is None and (self.verification is None or self.verification.ok)

    @property
    def verified(self) -> bool:
        """The output verified, directly or after a re-run finished a failed commit."""
        if self.verification is None:
            return self.error is None
        return self.verification.ok and (self.error is None or bool(self.recovered))

    def counter(self, name: str) -> int:
        if self.summary is None:
            return 0
        return self.summary.iostatistics.counters.get(name, 0)

    def stages_ms(self) -> dict[str, int]:
        """Per-stage time (ms) from the iostatistics means of ``job_stage_*``."""
        if self.summary is None:
            return {}
        means = self.summary.iostatistics.meanstatistics
        out = {}
        for name in (*S.JOB_STAGES, S.COMMITTER_COMMIT_JOB):
            mean = means.get(name + ".mean")
            if mean is not None and mean.samples:
                out[name] = mean.sum
        return out

    def files_per_second(self) -> float:
        return self.files / self.seconds if self.seconds > 0 else 0.0

    def figures(self) -> dict[str, Any]:
        gauges = self.summary.iostatistics.gauges if self.summary is not None else {}
        return {
            "label": self.label,
            "ok": self.ok,
            "error": self.error,
            "files": self.files,
            "bytes": self.bytes,
            "commit_seconds": round(self.seconds, 4),
            "files_per_second": round(self.files_per_second(), 1),
            "cpu_seconds": round(self.cpu.total, 4),
            "cpu_user_seconds": round(self.cpu.user, 4),
            "cpu_system_seconds": round(self.cpu.system, 4),
            "cpu_us_per_file": round(self.cpu.total / self.files * 1e6, 2) if self.files else 0,
            "cpu_us_per_store_op": (
                round(self.cpu.total / self.metered.calls * 1e6, 2) if self.metered.calls else 0
            ),
            "rss_baseline_mb": round(self.rss.baseline / 2**20, 1),
            "rss_peak_mb": round(self.rss.peak / 2**20, 1),
            "store": self.metered.figures(self.seconds),
            "stages_ms": self.stages_ms(),
            "engine_counters": {name: self.counter(name) for name in ENGINE_COUNTERS},
            "engine_gauges": dict(gauges),
            "faults": self.faults.describe(),
            "options": options_dict(self.options),
            "verification": self.verification.describe() if self.verification else None,
            "recovered_by_rerun": self.recovered,
            "recovery_seconds": self.recovery_seconds,
            "leaked_spill_dirs": self.leaked_spill_dirs,
            "profile_top": self.profile_top,
        }

    def rows(self) -> list[tuple[str, str]]:
        latency = self.metered.latency()
        rows = [
            ("job commit time", f"{self.seconds:.3f} s"),
            ("files committed", f"{self.files:,} ({self.bytes / 2**20:,.1f} MiB)"),
            ("files/s", f"{self.files_per_second():,.0f}"),
            ("store ops", f"{self.metered.calls:,}"),
            ("store ops/s", f"{self.metered.calls / max(self.seconds, 1e-9):,.0f}"),
            (
                "op latency p50 / p99",
                f"{latency.quantile(0.5) * 1000:.2f} / {latency.quantile(0.99) * 1000:.2f} ms",
            ),
        ]
        for name, ms in self.stages_ms().items():
            rows.append((f"  {name}", f"{ms / 1000:.3f} s"))
        rows += [
            ("retries", f"{self.counter(S.STORE_IO_RETRY):,}"),
            ("throttle events", f"{self.metered.throttled:,}"),
            ("transient errors", f"{self.metered.transient:,}"),
            ("concurrency decreases", f"{self.counter(S.STORE_IO_CONCURRENCY_DECREASED):,}"),
            ("peak calls in flight", f"{self.metered.peak_in_flight:,}"),
            (
                "CPU",
                f"{self.cpu.total:.2f} s ({self.cpu.total / max(self.files, 1) * 1e6:,.0f}"
                " µs/file)",
            ),
            ("peak RSS", mb(self.rss.peak)),
        ]
        if self.leaked_spill_dirs:
            rows.append(("leaked spill dirs", str(self.leaked_spill_dirs)))
        if self.error:
            rows.append(("COMMIT FAILED", self.error[:200]))
            rows.append(
                ("re-run without faults", "finished the job" if self.recovered else "FAILED")
            )
        if self.verification is not None:
            verdict = "PASS" if self.verification.ok else "FAIL"
            rows.append(
                (
                    "verification",
                    f"{verdict} ({self.verification.files_found:,} files"
                    f", {self.verification.etags_checked:,} etags)",
                )
            )
        return rows

    def table(self, title: str | None = None) -> Any:
        return run_table(title or self.label, self.rows())


async def measured_commit(
    target: Target,
    job: PreparedJob,
    *,
    faults: FaultOptions,
    options: CommitOptions,
    reporter: Reporter,
    label: str = "job commit",
    verify: bool = True,
    profile: Path | None = None,
    recover: bool = True,
) -> CommitRun:
    """Commit ``job`` through the faults and the meter; verify the output after.

    When the commit fails (e.g. retries exhausted under throttling) and ``recover`` is set,
    it is re-run on the raw store, as an operator would, and that outcome is verified.
    """
    metered = MeteredStore(faults.wrap(target.store))
    spills_before = spill_dirs()
    summary: SuccessData | None = None
    error: str | None = None
    with reporter.commit_bar(label) as on_progress, RssSampler() as rss, CpuClock() as cpu:
        metered.reset()
        begin = time.perf_counter()
        with profiling(profile is not None) as profiler:
            try:
                summary = await commit_job(
                    job.dest, job.job_id, store=metered, options=options, progress=on_progress
                )
            except Exception as raised:
                error = f"{type(raised).__name__}: {raised}"
        seconds = time.perf_counter() - begin
    run = CommitRun(
        label=label,
        files=len(job.expected.files),
        bytes=job.expected.total_bytes,
        seconds=seconds,
        cpu=cpu,
        rss=rss,
        metered=metered,
        faults=faults,
        options=options,
        summary=summary,
        error=error,
        leaked_spill_dirs=len(spill_dirs() - spills_before),
    )
    if profiler is not None and profile is not None:
        run.profile_top = save_profile(profiler, profile)
    if error is not None and recover:
        begin = time.perf_counter()
        try:
            summary = await commit_job(job.dest, job.job_id, store=target.store, options=options)
            run.recovered = True
        except Exception as raised:
            run.recovered = False
            run.error = f"{error}; re-run failed too: {type(raised).__name__}: {raised}"
        run.recovery_seconds = round(time.perf_counter() - begin, 3)
    if verify and (error is None or run.recovered):
        run.verification = await verify_output(
            target.store, job.dest, [job.expected], summary=summary
        )
    return run


@contextmanager
def profiling(enabled: bool) -> Iterator[cProfile.Profile | None]:
    """A profiler running over the block when ``enabled`` (else None); the caller saves
    it (``save_profile``) once its timing is taken."""
    if not enabled:
        yield None
        return
    profiler = cProfile.Profile()
    profiler.enable()
    try:
        yield profiler
    finally:
        profiler.disable()


def save_profile(profiler: cProfile.Profile, path: Path, top: int = 25) -> list[str]:
    """Dump the profile to ``path`` and return the top functions by own time."""
    path.parent.mkdir(parents=True, exist_ok=True)
    profiler.dump_stats(str(path))
    text = io.StringIO()
    stats = pstats.Stats(profiler, stream=text)
    stats.sort_stats("tottime").print_stats(top)
    lines = [line.rstrip() for line in text.getvalue().splitlines() if line.strip()]
    path.with_suffix(".txt").write_text("\n".join(lines) + "\n")
    return lines[-top:]


async def prepare(
    target: Target,
    spec: JobSpec,
    reporter: Reporter,
    *,
    name: str = "run",
    concurrency: int = 16,
    label: str = "preparing tasks",
    direct: bool = False,
) -> PreparedJob:
    dest = target.new_dest(name)
    with reporter.bar(label, spec.tasks) as advance:
        return await prepare_job(
            target,
            dest,
            spec,
            concurrency=concurrency,
            on_task=lambda _: advance(1),
            direct=direct,
        )
