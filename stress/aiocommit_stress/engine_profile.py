"""Where the time of one engine write through aiocommit goes (flat or partitioned), beside the
engine's own writer: wall and CPU of the driver's job set-up and job commit (and the commit's
stages, from its ``_SUCCESS`` statistics), and each write task's attempt set-up, write and commit.

    .venv/bin/python -m aiocommit_stress.engine_profile [--engines ray,dask]
        [--rows 1000000] [--files 100] [--rounds 3] [--variant flat|partitioned]

    .venv/bin/python -m aiocommit_stress.engine_profile --local-attempts 100 [--rounds 5]

``--local-attempts N``: no engine; N local task attempts in this process (each opened
from its handle, one small file written through ``open``, committed) and their job
commit, per round: the CPU per attempt and of the job commit, and their medians.

``--cprofile TOP``: each attempt's set-up and commit run under ``cProfile`` (in the
workers, or in this process with ``--local-attempts``); prints the TOP functions by own
and by cumulative time of the timed rounds, and the calls per attempt
(``--save-profile PATH`` keeps the merged profile for ``pstats``). The task lines also
count the garbage collections that ran during set-up and commit.

``--variant partitioned``: ``engine_bench``'s partitioned writes (``--files / 10`` tasks,
each writing one file per value of ``p``) instead of the flat ones; Ray's own writer's
tasks are timed too (``own task``: blocks to Arrow and ``write_dataset``), beside ours
(``task blocks``: blocks to Arrow; then set-up, write, commit).

Same data and clusters as ``engine_bench``. The tasks here are timed copies of the
integrations' own write tasks (the same calls, with clocks around each step): each task
appends one line to a file the driver reads. Prints, per engine and round, the
own writer's wall time, aiocommit's, and aiocommit's parts; then the medians.
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import json
import os
import pstats
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from aiocommit_stress.engine_bench import ENGINES

if TYPE_CHECKING:  # at run time too on a library that predates commit messages
    from aiocommit.integrations.attempts import AttemptHandle, TaskCommitMessage, WorkerAttempt

#: the job commit stages reported, in the order they run
STAGES = (
    "job_stage_load_manifests",
    "job_stage_resolve_conflicts",
    "job_stage_create_target_dirs",
    "job_stage_rename_files",
    "job_stage_save_success_marker",
    "job_stage_cleanup",
)


#: a file whose presence in the timings directory makes each task profile its attempt's
#: set-up and commit (``--cprofile``)
PROFILE = "cprofile"


def _collections() -> list[int]:
    """How many garbage collections of each generation this process ran."""
    return [generation["collections"] for generation in gc.get_stats()]


def _clock() -> tuple[float, float, float]:
    return time.perf_counter(), time.process_time(), time.thread_time()


def _since(start: tuple[float, float, float]) -> tuple[float, float, float]:
    """Milliseconds since ``start``: wall, the process's CPU (every thread's: in a Dask
    worker, the other tasks' too) and the calling thread's CPU."""
    wall, cpu, thread = _clock()
    return (wall - start[0]) * 1000, (cpu - start[1]) * 1000, (thread - start[2]) * 1000


def timed_task(
    write: Callable[[WorkerAttempt], None],
    timings_dir: str,
    handle: AttemptHandle,
    *,
    blocks: tuple[float, float, float] = (0.0, 0.0, 0.0),
) -> TaskCommitMessage | str:
    """Open ``handle``, ``write(attempt)``, commit; one JSON line of milliseconds (wall,
    process CPU, thread CPU) per step to a file of this process in ``timings_dir``."""
    profiler = cProfile.Profile() if os.path.exists(os.path.join(timings_dir, PROFILE)) else None
    collections = _collections()
    start = _clock()
    if profiler is not None:
        profiler.enable()
    opened = handle.open()
    attempt = opened.__enter__()
    if profiler is not None:
        profiler.disable()
    setup = _since(start)
    start = _clock()
    write(attempt)
    wrote = _since(start)
    collections_before_commit = _collections()
    start = _clock()
    if profiler is not None:
        profiler.enable()
    # ``commit`` where the library predates commit messages (to profile it side by side)
    commit: Callable[[], TaskCommitMessage | str] = getattr(
        attempt, "commit_message", attempt.commit
    )
    name = commit()
    opened.__exit__(None, None, None)
    if profiler is not None:
        profiler.disable()
    committed = _since(start)
    closed = (0.0, 0.0, 0.0)
    gc_runs = [after - before for before, after in zip(collections, _collections(), strict=True)]
    write_gc_runs = [
        after - before for before, after in zip(collections, collections_before_commit, strict=True)
    ]
    line = {
        "blocks": blocks,
        "setup": setup,
        "write": wrote,
        "commit": committed,
        "close": closed,
        "gc": [a - b for a, b in zip(gc_runs, write_gc_runs, strict=True)],
    }
    if profiler is not None:
        profiler.dump_stats(
            os.path.join(timings_dir, f"{os.getpid()}-{handle.task}-{handle.attempt}.prof")
        )
    with open(os.path.join(timings_dir, f"{os.getpid()}.jsonl"), "a") as out:
        out.write(json.dumps(line) + "\n")
    return name


def _partition_by(partitioned: bool) -> list[str]:
    return ["p"] if partitioned else []


def _ray_ours(timings_dir: str, partitioned: bool) -> Callable[[Any, Path], None]:
    import pyarrow as pa
    from ray.data.block import BlockAccessor

    from aiocommit.integrations.arrow import write_table
    from aiocommit.integrations.ray import AiocommitDatasink

    class TimedSink(AiocommitDatasink):
        def write(
            self, blocks: Any, ctx: Any
        ) -> Any:  # a message, or a name on a library before them
            assert self.job is not None
            start = _clock()
            tables = [BlockAccessor.for_block(block).to_arrow() for block in blocks]
            table = pa.concat_tables([t for t in tables if t.num_rows])
            blocks_ms = _since(start)
            return timed_task(
                lambda attempt: write_table(
                    attempt, table, format="parquet", partition_by=_partition_by(partitioned)
                ),
                timings_dir,
                self.job.handle(ctx.task_idx),
                blocks=blocks_ms,
            )

    def ours(data: Any, dest: Path) -> None:
        data.write_datasink(TimedSink(str(dest)))

    return ours


def _ray_own(timings_dir: str, partitioned: bool) -> Callable[[Any, Path], None]:
    """Ray's own ``write_parquet``, its write tasks timed (``ParquetDatasink.write``:
    blocks to Arrow and ``write_dataset``), one JSON line each in ``timings_dir``."""
    from ray.data._internal.datasource.parquet_datasink import ParquetDatasink

    class TimedParquetSink(ParquetDatasink):
        def write(self, blocks: Any, ctx: Any) -> None:
            start = _clock()
            super().write(blocks, ctx)
            line = {"own task": _since(start)}
            with open(os.path.join(timings_dir, f"own-{os.getpid()}.jsonl"), "a") as out:
                out.write(json.dumps(line) + "\n")

    def own(data: Any, dest: Path) -> None:
        sink = TimedParquetSink(str(dest), partition_cols=_partition_by(partitioned) or None)
        data.write_datasink(sink)

    return own


def _dask_partition(
    frame: Any, handle: Any, timings_dir: str, partitioned: bool
) -> TaskCommitMessage | str:
    import pyarrow as pa

    from aiocommit.integrations.arrow import write_table

    table = pa.Table.from_pandas(frame, preserve_index=False)
    return timed_task(
        lambda attempt: write_table(
            attempt, table, format="parquet", partition_by=_partition_by(partitioned)
        ),
        timings_dir,
        handle.retry(),
    )


def _dask_commit(handle: Any, records: list[TaskCommitMessage], timings_dir: str) -> Any:
    """The Dask job-commit task (``aiocommit.integrations.dask._commit``), timed."""
    from aiocommit.integrations.attempts import commit_job_blocking

    start = _clock()
    summary = commit_job_blocking(handle, records)
    parts = {"worker job commit": _since(start), **_stage_times(summary)}
    Path(timings_dir, "job-commit.json").write_text(json.dumps(parts))
    return summary


def _dask_ours(timings_dir: str, partitioned: bool) -> Callable[[Any, Path], None]:
    from dask.delayed import delayed

    from aiocommit.integrations.attempts import EngineJob

    def ours(data: Any, dest: Path) -> None:
        job = EngineJob.setup(str(dest))
        write = delayed(_dask_partition, pure=False)
        records = [
            write(part, job.handle(index), timings_dir, partitioned)
            for index, part in enumerate(data.to_delayed())
        ]
        delayed(_dask_commit, pure=False)(job.handle(0), records, timings_dir).compute()

    return ours


@contextmanager
def _driver_clocks(parts: dict[str, tuple[float, float, float]]) -> Iterator[None]:
    """Time ``EngineJob.setup`` and ``EngineJob.commit`` on the driver (Ray's sink calls
    both there; Dask's job commit is a task, timed in ``_dask_commit``)."""
    from aiocommit.integrations import attempts

    setup, commit = attempts.EngineJob.setup, attempts.EngineJob.commit

    def timed_setup(cls: Any, *args: Any, **kwargs: Any) -> Any:
        start = _clock()
        try:
            return setup.__func__(cls, *args, **kwargs)  # type: ignore[attr-defined]
        finally:
            parts["driver job setup"] = _since(start)

    def timed_commit(self: Any, *args: Any, **kwargs: Any) -> Any:
        start = _clock()
        try:
            summary = commit(self, *args, **kwargs)
        finally:
            parts["driver job commit"] = _since(start)
        parts.update(_stage_times(summary))
        return summary

    attempts.EngineJob.setup = classmethod(timed_setup)  # type: ignore[assignment]
    attempts.EngineJob.commit = timed_commit  # type: ignore[method-assign]
    try:
        yield
    finally:
        attempts.EngineJob.setup = setup  # type: ignore[method-assign]
        attempts.EngineJob.commit = commit  # type: ignore[method-assign]


def _stage_times(summary: Any) -> dict[str, tuple[float, float, float]]:
    """The job commit's stages' wall times (no CPU: nan)."""
    means = summary.iostatistics.meanstatistics
    out = {}
    for stage in STAGES:
        mean = means.get(stage + ".mean")
        if mean is not None and mean.samples:
            out["  " + stage] = (float(mean.sum), float("nan"), float("nan"))
    return out


def _task_times(timings_dir: Path) -> dict[str, tuple[float, float, float]]:
    """The medians and sums of the write tasks' steps (ours), or of the own writer's
    whole tasks (``own task``)."""
    lines = [
        json.loads(line)
        for path in timings_dir.glob("*.jsonl")
        for line in path.read_text().splitlines()
    ]
    out: dict[str, tuple[float, float, float]] = {}
    own = [line["own task"] for line in lines if "own task" in line]
    if own:
        medians = [statistics.median(line[at] for line in own) for at in range(3)]
        sums = [sum(line[at] for line in own) for at in range(3)]
        out[f"own task (median of {len(own)})"] = (medians[0], medians[1], medians[2])
        out["own task (sum)"] = (sums[0], sums[1], sums[2])
    lines = [line for line in lines if "setup" in line]
    if not lines:
        return out
    for step in ("blocks", "setup", "write", "commit"):
        walls = [line.get(step, (0.0, 0.0, 0.0))[0] for line in lines]
        cpus = [line.get(step, (0.0, 0.0, 0.0))[1] for line in lines]
        threads = [line.get(step, (0.0, 0.0, 0.0))[2] for line in lines]
        out[f"task {step} (median of {len(lines)})"] = (
            statistics.median(walls),
            statistics.median(cpus),
            statistics.median(threads),
        )
        out[f"task {step} (sum)"] = (sum(walls), sum(cpus), sum(threads))
    for generation in range(3):  # collections during set-up and commit, not the write
        runs = sum(line["gc"][generation] for line in lines)
        out[f"task gc gen{generation} runs (sum; count, not ms)"] = (runs, runs, runs)
    return out


def _print_profiles(paths: list[Path], top: int, save: str | None = None) -> None:
    """The ``top`` functions by own time, then by cumulative time, of every profile in
    ``paths`` (tasks' attempt set-up and commit), with the calls per attempt; saved
    merged to ``save`` if given."""
    if not paths:
        return
    stats = pstats.Stats(*(str(path) for path in paths), stream=sys.stdout)
    if save:
        stats.dump_stats(save)
    print(f"cProfile of {len(paths)} attempts' set-up and commit", flush=True)
    stats.sort_stats("tottime").print_stats(top)
    stats.sort_stats("cumulative").print_stats(top)
    calls = getattr(stats, "total_calls", 0)
    print(f"calls per attempt: {calls / len(paths):.0f}", flush=True)


def profile(
    engine: str,
    work: Path,
    *,
    rows: int,
    files: int,
    rounds: int,
    cprofile: int = 0,
    save_profile: str | None = None,
    variant: str = "flat",
) -> None:
    """Alternate the own writer and aiocommit's timed tasks (``variant``: flat or
    partitioned), printing each part (Ray's own writer's tasks timed too); with
    ``cprofile``, the top functions of the tasks' attempts (rounds after warm-up)."""
    timings_dir = work / "timings"
    profiles = work / "profiles"
    profiles.mkdir(exist_ok=True)
    table: dict[str, list[tuple[float, float, float]]] = {}
    with ENGINES[engine](rows, files) as (data, writers):
        partitioned = variant == "partitioned"
        ours = (_ray_ours if engine == "ray" else _dask_ours)(str(timings_dir), partitioned)
        own_writer = writers["own"]
        own = (
            _ray_own(str(timings_dir), partitioned)
            if engine == "ray"
            else lambda data, dest: own_writer(data, dest, partitioned)
        )
        flat = data[variant]
        for round_number in range(-1, rounds):  # round -1 warms up
            for name in ("own", "aiocommit") if round_number % 2 else ("aiocommit", "own"):
                dest = work / f"{engine}-{name}-{round_number}"
                shutil.rmtree(timings_dir, ignore_errors=True)
                timings_dir.mkdir()
                if cprofile:
                    (timings_dir / PROFILE).touch()
                parts: dict[str, tuple[float, float, float]] = {}
                start = _clock()
                if name == "own":
                    own(flat, dest)
                    parts.update(_task_times(timings_dir))
                else:
                    with _driver_clocks(parts):
                        ours(flat, dest)
                    parts.update(_task_times(timings_dir))
                    if round_number >= 0:
                        for path in timings_dir.glob("*.prof"):
                            path.rename(profiles / path.name)
                    commit_file = timings_dir / "job-commit.json"
                    if commit_file.exists():
                        parts.update(
                            {k: tuple(v) for k, v in json.loads(commit_file.read_text()).items()}
                        )
                parts[f"{name} write"] = _since(start)
                shutil.rmtree(dest, ignore_errors=True)
                if round_number < 0:
                    continue
                for part, value in parts.items():
                    table.setdefault(part, []).append(value)
                    print(
                        f"{engine} round {round_number} {part:<44} "
                        f"{value[0]:9.1f} ms wall {value[1]:9.1f} ms cpu "
                        f"{value[2]:9.2f} ms thread",
                        flush=True,
                    )
    print(f"{engine}: medians over {rounds} rounds (ms; thread: the task's own thread's CPU)")
    for part, values in table.items():
        walls = statistics.median(v[0] for v in values)
        cpus = statistics.median(v[1] for v in values)
        threads = statistics.median(v[2] for v in values)
        print(f"  {part:<44} {walls:9.1f} wall {cpus:9.1f} cpu {threads:9.2f} thread", flush=True)
    _print_profiles(sorted(profiles.glob("*.prof")), cprofile, save_profile)


def local_attempts(
    work: Path, *, attempts: int, rounds: int, cprofile: int = 0, save_profile: str | None = None
) -> tuple[float, float]:
    """``attempts`` local attempts and their job commit per round, after one round to
    warm up; prints each round's CPU per attempt and of the job commit (ms), returns
    their medians. With ``cprofile``: the top functions of the attempts (not the job
    commit), profiled in a round of their own after the timed ones."""
    from aiocommit.integrations.attempts import EngineJob

    per_attempt: list[float] = []
    job_commit: list[float] = []
    for round_number in range(-1, rounds):
        job = EngineJob.setup(str(work / f"local-{round_number}"))
        records = []
        start = time.process_time()
        for task in range(attempts):
            with job.handle(task).open() as attempt:
                with attempt.open(f"part-{task:05d}.bin") as file:
                    file.write(b"x" * 1000)
                records.append(attempt.commit())
        tasks_cpu = (time.process_time() - start) * 1000
        start = time.process_time()
        job.commit(records)
        commit_cpu = (time.process_time() - start) * 1000
        if round_number < 0:
            continue
        per_attempt.append(tasks_cpu / attempts)
        job_commit.append(commit_cpu)
        print(
            f"local round {round_number}: {tasks_cpu / attempts:.3f} ms cpu per attempt, "
            f"job commit {commit_cpu:.1f} ms cpu",
            flush=True,
        )
    medians = statistics.median(per_attempt), statistics.median(job_commit)
    print(
        f"local: medians over {rounds} rounds of {attempts} attempts: "
        f"{medians[0]:.3f} ms cpu per attempt, job commit {medians[1]:.1f} ms cpu",
        flush=True,
    )
    if cprofile:
        job = EngineJob.setup(str(work / "local-profiled"))
        paths = []
        for task in range(attempts):
            profiler = cProfile.Profile()
            profiler.enable()
            with job.handle(task).open() as attempt:
                with attempt.open(f"part-{task:05d}.bin") as file:
                    file.write(b"x" * 1000)
                attempt.commit()
            profiler.disable()
            paths.append(work / f"local-{task}.prof")
            profiler.dump_stats(str(paths[-1]))
        _print_profiles(paths, cprofile, save_profile)
    return medians


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument(
        "--engines",
        type=lambda text: [e.strip() for e in text.split(",") if e.strip()],
        default=["ray", "dask"],
    )
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--files", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--local-attempts", type=int, default=0, metavar="N")
    parser.add_argument(
        "--cprofile",
        type=int,
        default=0,
        metavar="TOP",
        help="profile each attempt's set-up and commit; print the TOP functions",
    )
    parser.add_argument("--save-profile", metavar="PATH", help="save the merged profile here")
    parser.add_argument("--variant", choices=("flat", "partitioned"), default="flat")
    args = parser.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="aiocommit-engine-profile-"))
    try:
        if args.local_attempts:
            local_attempts(
                work,
                attempts=args.local_attempts,
                rounds=args.rounds,
                cprofile=args.cprofile,
                save_profile=args.save_profile,
            )
            return
        for engine in args.engines:
            profile(
                engine,
                work,
                rows=args.rows,
                files=args.files,
                rounds=args.rounds,
                cprofile=args.cprofile,
                save_profile=args.save_profile,
                variant=args.variant,
            )
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
