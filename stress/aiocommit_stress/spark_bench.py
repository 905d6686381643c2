"""Throughput of ``df.write.format("aiocommit")`` against Spark's native Parquet writer.

    .venv/bin/python -m aiocommit_stress.spark_bench [--rows 10000000] [--rounds 2] [--master M]
    .venv/bin/python -m aiocommit_stress.spark_bench --tasks 300,200 --rows-per-task 10  # small
    .venv/bin/python -m aiocommit_stress.spark_bench --tasks 300,200 --writers jvm,native
    .venv/bin/python -m aiocommit_stress.spark_bench --tasks 300,200 --writers jvm,native \
        --variants flat --rounds 4  # flat only, more rounds (each round's ratio is printed)
    .venv/bin/python -m aiocommit_stress.spark_bench --tasks 300,200 --partition-values 4
    .venv/bin/python -m aiocommit_stress.spark_bench --rows 5000000 --partition-values 20
    .venv/bin/python -m aiocommit_stress.spark_bench --rows 5000000 --partition-values 20 \
        --rounds 3 --writers aiocommit,native,jvm,python  # both engines, forced, beside

Writes the same DataFrame (``id bigint, k int, x double, s string, ts timestamp`` from
``spark.range``, two input partitions) to the local filesystem, unpartitioned and
partitioned by a 50-value column (``p = id % 50``; ``--partition-values``), alternating
aiocommit and Spark's own writer round by round after a warm-up write of each writer, flat
and partitioned, of up to ``WARM_UP_ROWS`` rows (the first Python data-source write starts
the planner and commit workers; the JVM compiles each writer's code on its first large
write). Prints rows/s of
each (median and best of the rounds), the ratio aiocommit/native per variant (target >=
0.9), rows per CPU-second of the JVM and all Python workers (steadier than wall time on
a shared machine), output sizes and the job commit's share of the aiocommit write's wall
time, taken from the job's summary report, and the load average at start and end. The
last line is the lower of the two median ratios. ``register(spark)`` lifts Spark's
per-row Arrow batch byte check while aiocommit writes (see
``aiocommit.integrations.spark.transfer``); the line ``Arrow batch byte cap`` says
whether it was.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from aiocommit.integrations.spark.transfer import ARROW_MAX_BYTES_CONF

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

#: aiocommit's rows/s as a share of Spark's own writer's, the issue's goal
TARGET = 0.9

LOG4J = (
    "rootLogger.level = error\nrootLogger.appenderRef.stdout.ref = console\n"
    "appender.console.type = Console\nappender.console.name = console\n"
    "appender.console.target = SYSTEM_ERR\nappender.console.layout.type = PatternLayout\n"
    "appender.console.layout.pattern = %d{HH:mm:ss} %p %c{1}: %m%n\n"
)


@dataclass
class Series:
    name: str
    seconds: list[float] = field(default_factory=list)
    cpu: list[float] = field(default_factory=list)
    sizes: list[int] = field(default_factory=list)
    files: list[int] = field(default_factory=list)

    def rates(self, rows: int) -> tuple[float, float]:
        """(median, best) rows per second."""
        return rows / statistics.median(self.seconds), rows / min(self.seconds)


def start(master: str, work: Path) -> SparkSession:
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from pyspark.sql import SparkSession

    log4j = work / "log4j2.properties"
    log4j.write_text(LOG4J)
    spark = (
        SparkSession.builder.master(master)
        .appName("aiocommit-spark-bench")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.driver.memory", "2g")
        .config("spark.sql.warehouse.dir", str(work / "warehouse"))
        .config("spark.driver.extraJavaOptions", f"-Dlog4j2.configurationFile=file:{log4j}")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    return spark


#: the values of the partition column ``p`` unless ``--partition-values`` says otherwise
PARTITION_VALUES = 50
#: rows of the large-write mode's warm-up (each writer writes them flat and partitioned
#: before the measured rounds): the JVM compiles a writer's hot code on its first large
#: write, and a 10,000-row warm-up left that to round 0's first writer of each code path
#: (Spark's Parquet writer is native's and the JVM engine's)
WARM_UP_ROWS = 1_000_000


def dataset(spark: SparkSession, rows: int, partition_values: int = PARTITION_VALUES) -> DataFrame:
    from pyspark.sql import functions as F

    return spark.range(rows, numPartitions=2).select(
        F.col("id"),
        (F.col("id") % partition_values).cast("int").alias("p"),
        (F.col("id") % 1000).cast("int").alias("k"),
        F.rand(7).alias("x"),
        F.concat(F.lit("row-"), F.col("id").cast("string")).alias("s"),
        (F.lit(1_700_000_000) + F.col("id")).cast("timestamp").alias("ts"),
    )


def cpu_snapshot() -> dict[tuple[int, float], float]:
    """User + system CPU of each of this process's descendants (the JVM and every Python
    worker, with their reaped children), by (pid, start time)."""
    import psutil

    seen: dict[tuple[int, float], float] = {}
    for process in psutil.Process().children(recursive=True):
        try:
            times = process.cpu_times()
            key = (process.pid, process.create_time())
        except psutil.NoSuchProcess:
            continue
        seen[key] = times.user + times.system + times.children_user + times.children_system
    return seen


def cpu_seconds(before: dict[tuple[int, float], float]) -> float:
    """CPU the descendants used since ``before``: processes alive then and now count
    their difference, new ones all of theirs. A process that ended in between is left
    out rather than subtracted (Spark's daemon retires idle Python workers while the
    native writer runs); its last seconds are not counted."""
    after = cpu_snapshot()
    return sum(used - before.get(key, 0.0) for key, used in after.items())


def tree_size(root: Path) -> int:
    return sum(p.stat().st_size for p in root.rglob("*") if p.is_file())


def commit_seconds(reports: Path) -> float:
    """The job commit's duration from the newest summary report (written after cleanup,
    so it covers the whole commit)."""
    stat = newest_means(reports).get("committer_commit_job.mean")
    return stat.sum / 1000 if stat is not None and stat.samples else float("nan")


Writer = Callable[["DataFrame", Path, bool], None]
VARIANTS = {"flat": False, "partitioned": True}
#: the writers that commit through aiocommit, and where (below the reports directory)
#: each keeps its job summaries
REPORTED = {"aiocommit": ".", "jvm": "jvm", "python": "python"}
#: the small-task mode's writers: Spark's own is the reference (``native``); ``jvm`` is
#: ``write(df, dest, engine="jvm")`` (Spark's writer, aiocommit's job commit)
SMALL_WRITERS = ("aiocommit", "native", "py-noop", "jvm")
DEFAULT_SMALL_WRITERS = ("aiocommit", "native", "py-noop")
#: the large-write mode's writers: ``aiocommit`` (the engine ``auto`` picks) and Spark's
#: own always; ``jvm`` and ``python`` force an engine (``format("aiocommit")`` with
#: ``engine=python``), to compare the engines on one shape
LARGE_WRITERS = ("aiocommit", "native", "jvm", "python")


def alternate(
    writers: Mapping[str, Writer],
    df: DataFrame,
    work: Path,
    rows: int,
    rounds: int,
    reports: Path,
    keep: bool,
    variants: Sequence[str] = tuple(VARIANTS),
) -> tuple[dict[tuple[str, str], Series], list[float]]:
    """Each writer writes ``df`` in each of ``variants`` (flat, partitioned), in
    alternating order round by round; the series by (writer, variant) and the job
    commit's share of each aiocommit write."""
    results = {(n, v): Series(f"{n} {v}") for v in variants for n in writers}
    commit_share: list[float] = []
    for round_number in range(rounds):
        for variant in variants:
            partitioned = VARIANTS[variant]
            order = list(writers) if round_number % 2 == 0 else list(writers)[::-1]
            for name in order:
                dest = work / f"{name}-{variant}-{round_number}"
                series = results[(name, variant)]
                cpu_before = cpu_snapshot()
                started = time.perf_counter()
                writers[name](df, dest, partitioned)
                elapsed = time.perf_counter() - started
                series.seconds.append(elapsed)
                series.cpu.append(cpu_seconds(cpu_before))
                series.sizes.append(tree_size(dest))
                series.files.append(sum(1 for p in dest.rglob("*.parquet")))
                line = f"round {round_number} {variant:<11} {name:<9} {elapsed:6.2f} s"
                line += f" {rows / elapsed / 1e6:5.2f} M rows/s"
                line += f" {series.cpu[-1]:6.1f} CPU-s"
                if name in REPORTED:
                    seconds = commit_seconds(reports / REPORTED[name])
                    commit_share.append(seconds / elapsed)
                    line += f"  (job commit {seconds:.3f} s)"
                print(line, flush=True)
                if not keep:
                    shutil.rmtree(dest, ignore_errors=True)
    return results, commit_share


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=10_000_000)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--keep", action="store_true", help="keep the output directories")
    parser.add_argument(
        "--tasks",
        type=lambda text: [int(n) for n in text.split(",")],
        default=[],
        help="small-task mode: this many tasks (repartition), --rows-per-task rows each; "
        "several shapes comma-separated (300,200: also Spark's 200 default shuffle tasks)",
    )
    parser.add_argument("--rows-per-task", type=int, default=10)
    parser.add_argument(
        "--partition-values",
        type=int,
        default=PARTITION_VALUES,
        help="the values of the partition column p of the partitioned variant",
    )
    parser.add_argument(
        "--variants",
        type=lambda text: [v.strip() for v in text.split(",") if v.strip()],
        default=list(VARIANTS),
        help="small-task mode: the variants to write, of flat,partitioned (both by default)",
    )
    parser.add_argument(
        "--writers",
        type=lambda text: [w.strip() for w in text.split(",") if w.strip()],
        default=[],
        help=f"the writers to alternate, of {','.join(SMALL_WRITERS)} (small-task mode) or "
        f"{','.join(LARGE_WRITERS)} (native, Spark's own, is always run: the reference)",
    )
    args = parser.parse_args(argv)
    if not args.variants or set(args.variants) - set(VARIANTS):
        parser.error(f"--variants: choose of {', '.join(VARIANTS)}")
    known = SMALL_WRITERS if args.tasks else LARGE_WRITERS
    if not args.writers:
        args.writers = list(DEFAULT_SMALL_WRITERS if args.tasks else ("aiocommit", "native"))
    unknown = sorted(set(args.writers) - set(known))
    if unknown:
        parser.error(f"unknown writer(s) {', '.join(unknown)}: choose of {', '.join(known)}")

    from aiocommit.integrations.spark import register

    work = Path(tempfile.mkdtemp(prefix="aiocommit-spark-bench-"))
    spark = start(args.master, work)
    try:
        register(spark)
        if args.tasks:
            run_small_tasks(
                spark,
                work,
                tasks=args.tasks,
                rows_per_task=args.rows_per_task,
                rounds=args.rounds,
                keep=args.keep,
                writers=args.writers,
                variants=args.variants,
                partition_values=args.partition_values,
            )
        else:
            run(
                spark,
                work,
                rows=args.rows,
                rounds=args.rounds,
                keep=args.keep,
                label=args.master,
                partition_values=args.partition_values,
                writers=args.writers,
            )
    finally:
        spark.stop()
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)


def both_writers(reports: Path) -> dict[str, Writer]:
    """aiocommit (its summary reports in ``reports``) and Spark's own Parquet writer."""

    def aiocommit_write(frame: DataFrame, dest: Path, partitioned: bool) -> None:
        writer = frame.write.format("aiocommit").mode("append")
        if partitioned:
            writer = writer.option("partitionBy", "p")
        writer.option("aiocommit.report_dir", str(reports)).save(str(dest))

    def native_write(frame: DataFrame, dest: Path, partitioned: bool) -> None:
        writer = frame.write.mode("append")
        if partitioned:
            writer = writer.partitionBy("p")
        writer.parquet(str(dest))

    return {"aiocommit": aiocommit_write, "native": native_write}


def python_writer(reports: Path) -> Writer:
    """``format("aiocommit")`` with ``engine=python``: the Python data source's writer
    whatever the shape."""

    def python_write(frame: DataFrame, dest: Path, partitioned: bool) -> None:
        writer = frame.write.format("aiocommit").mode("append").option("engine", "python")
        if partitioned:
            writer = writer.option("partitionBy", "p")
        writer.option("aiocommit.report_dir", str(reports / REPORTED["python"])).save(str(dest))

    return python_write


def jvm_writer(reports: Path) -> Writer:
    """``write(df, dest, engine="jvm")``: Spark's Parquet writer, aiocommit's job commit."""
    from aiocommit.integrations.spark import write

    def jvm_write(frame: DataFrame, dest: Path, partitioned: bool) -> None:
        options = {"aiocommit.report_dir": str(reports / REPORTED["jvm"])}
        columns = ["p"] if partitioned else []
        write(frame, str(dest), mode="append", partition_by=columns, options=options, engine="jvm")

    return jvm_write


def run_small_tasks(
    spark: SparkSession,
    work: Path,
    *,
    tasks: int | list[int],
    rows_per_task: int,
    rounds: int,
    keep: bool = False,
    writers: Sequence[str] = DEFAULT_SMALL_WRITERS,
    variants: Sequence[str] = tuple(VARIANTS),
    partition_values: int = PARTITION_VALUES,
) -> list[float]:
    """The shape most Spark jobs end with: a shuffle into many small tasks
    (``repartition(tasks)``, ``rows_per_task`` rows each; several shapes in turn),
    flat and partitioned (``variants``), the writers alternating (Spark's own,
    ``native``, always). Prints each write, then per shape and variant the median wall
    time of each writer, the ratio of each to native (target <= 1.0) and the ratios of
    the writes of each round (written back to back), the cost per task of each and the
    difference, CPU per task, and aiocommit's per-task breakdown from its job summary
    (task stages, summed over the tasks, per task; the job commit per task). Returns
    the median ratios (per shape and variant, each writer in turn)."""
    reports = work / "reports"
    available = dict(both_writers(reports))
    if "py-noop" in writers:
        from aiocommit_stress.spark_floor import NAME, NoopSource

        spark.dataSource.register(NoopSource)

        def noop_write(frame: DataFrame, dest: Path, partitioned: bool) -> None:
            frame.write.format(NAME).mode("append").save(str(dest))

        available["py-noop"] = noop_write
    if "jvm" in writers:
        available["jvm"] = jvm_writer(reports)
    chosen = {n: w for n, w in available.items() if n in writers or n == "native"}
    warm_up(chosen, dataset(spark, 1_000).repartition(20), work)
    ratios: list[float] = []
    compared = [n for n in chosen if n not in ("native", "py-noop")]
    by_writer: dict[str, list[float]] = {n: [] for n in compared}
    for count in [tasks] if isinstance(tasks, int) else tasks:
        rows = count * rows_per_task
        df = dataset(spark, rows, partition_values).repartition(count)
        print(f"== {count} tasks x {rows_per_task} rows", flush=True)
        results, _ = alternate(chosen, df, work / str(count), rows, rounds, reports, keep, variants)
        shape = small_task_table(
            results, reports, count, rows_per_task, rounds, list(chosen), variants
        )
        for (name, _variant), ratio in shape:
            by_writer[name].append(ratio)
            ratios.append(ratio)
    for name, found in by_writer.items():
        print(f"ratio {name}/native (highest of the medians): {max(found):.2f}")
    return ratios


def small_task_table(
    results: dict[tuple[str, str], Series],
    reports: Path,
    tasks: int,
    rows_per_task: int,
    rounds: int,
    writers: Sequence[str] = DEFAULT_SMALL_WRITERS,
    variants: Sequence[str] = tuple(VARIANTS),
) -> list[tuple[tuple[str, str], float]]:
    """Print one small-task shape's figures (see ``run_small_tasks``); its ratios to
    native by (writer, variant)."""
    print()
    print(f"tasks per write         {tasks} x {rows_per_task} rows, {rounds} rounds")
    print(f"load average at end     {' '.join(f'{x:.1f}' for x in os.getloadavg())}")
    compared = [n for n in writers if n not in ("native", "py-noop")]
    ratios: list[tuple[tuple[str, str], float]] = []
    for variant in variants:
        native_s = statistics.median(results[("native", variant)].seconds)
        print(f"-- {variant}")
        for name in [*compared, "native"]:
            series = results[(name, variant)]
            seconds, cpu = statistics.median(series.seconds), statistics.median(series.cpu)
            print(
                f"{name:<23} {seconds:.2f} s median, {seconds / tasks * 1000:.1f} ms per task,"
                f" {cpu / tasks * 1000:.1f} CPU-ms per task"
            )
        if "py-noop" in writers:
            floor = statistics.median(results[("py-noop", variant)].seconds)
            floor_cpu = statistics.median(results[("py-noop", variant)].cpu)
            versus = ""
            if "aiocommit" in compared:
                ours = statistics.median(results[("aiocommit", variant)].seconds)
                versus = f"; aiocommit/floor {ours / floor:.2f}"
            print(
                f"{'py-noop (floor)':<23} {floor:.2f} s median, {floor / tasks * 1000:.1f} ms "
                f"per task, {floor_cpu / tasks * 1000:.1f} CPU-ms per task (a Python data "
                f"source writing nothing{versus})"
            )
        for name in compared:
            seconds = statistics.median(results[(name, variant)].seconds)
            ratios.append(((name, variant), seconds / native_s))
            print(f"extra per task {name:<8} {(seconds - native_s) / tasks * 1000:+.1f} ms")
            verdict = "meets" if seconds / native_s <= 1.0 else "MISSES"
            label = f"ratio {name}/native"
            print(f"{label:<23} {seconds / native_s:.2f} (wall time; {verdict} the 1.0 target)")
            mine, theirs = results[(name, variant)].seconds, results[("native", variant)].seconds
            paired = [a / b for a, b in zip(mine, theirs, strict=True)]
            print(
                f"{'  by round':<23} {', '.join(f'{r:.2f}' for r in paired)}"
                f" (median {statistics.median(paired):.2f}; each round's two writes back to back)"
            )
    for name in compared:
        if name in REPORTED:
            print(f"-- {name} per task, from the last job's summary (ms per task)")
            for stage, per_task in stage_costs(reports / REPORTED[name], tasks):
                print(f"  {stage:<38} {per_task:8.2f}")
    return ratios


def newest_means(reports: Path) -> dict[str, Any]:
    """The mean statistics of the newest job summary report in ``reports``."""
    from aiocommit.protocol.success import decode_success

    newest = max(reports.glob("summary-*.json"), key=lambda p: p.stat().st_mtime)
    return dict(decode_success(newest.read_bytes()).iostatistics.meanstatistics)


def warm_up(
    writers: Mapping[str, Writer],
    df: DataFrame,
    work: Path,
    variants: Sequence[str] = ("flat",),
) -> None:
    """Print the load average; one write each of each of ``variants`` (worker daemons,
    imports, JIT)."""
    print(f"load average at start   {' '.join(f'{x:.1f}' for x in os.getloadavg())}", flush=True)
    for variant in variants:
        for name, write in writers.items():
            dest = work / f"warmup-{name}-{variant}"
            write(df, dest, VARIANTS[variant])
            shutil.rmtree(dest, ignore_errors=True)


def stage_costs(reports: Path, tasks: int) -> list[tuple[str, float]]:
    """(stage, milliseconds per task) of the task and job stages in the newest summary."""
    mean = newest_means(reports)
    costs = []
    for key in sorted(mean):
        if key.endswith(".mean") and key.startswith(("task_stage_", "job_stage_", "committer_")):
            stat = mean[key]
            if stat.samples:
                costs.append((key.removesuffix(".mean"), stat.sum / tasks))
    return costs


def run(
    spark: SparkSession,
    work: Path,
    *,
    rows: int,
    rounds: int,
    keep: bool = False,
    label: str = "",
    partition_values: int = PARTITION_VALUES,
    writers: Sequence[str] = ("aiocommit", "native"),
) -> list[float]:
    """The benchmark in a session where aiocommit is registered, writing below ``work``;
    prints as it goes and returns the median ratio aiocommit/native per variant (flat,
    partitioned). ``writers`` (of ``LARGE_WRITERS``; aiocommit and native always) adds
    ``jvm`` and ``python``, each engine forced: their wall-time ratios to native are
    printed by round."""
    reports = work / "reports"
    df = dataset(spark, rows, partition_values)
    chosen = dict(both_writers(reports))
    if "jvm" in writers:
        chosen["jvm"] = jvm_writer(reports)
    if "python" in writers:
        chosen["python"] = python_writer(reports)
    warm = dataset(spark, min(rows, WARM_UP_ROWS), partition_values)
    return _run_large(spark, work, df, warm, chosen, rows, rounds, keep, label)


def _run_large(
    spark: SparkSession,
    work: Path,
    df: DataFrame,
    warm: DataFrame,
    writers: Mapping[str, Writer],
    rows: int,
    rounds: int,
    keep: bool,
    label: str,
) -> list[float]:
    reports = work / "reports"
    warm_up(writers, warm, work, variants=tuple(VARIANTS))
    cap = spark.conf.getAll.get(ARROW_MAX_BYTES_CONF)
    state = f"{cap} (set by the user)" if cap else "lifted while aiocommit writes"
    print(f"Arrow batch byte cap    {state} ({ARROW_MAX_BYTES_CONF})", flush=True)
    results, commit_share = alternate(writers, df, work, rows, rounds, reports, keep)
    print()
    print(f"rows per write          {rows:,} ({label or 'session'}, {rounds} rounds)")
    print(f"load average at end     {' '.join(f'{x:.1f}' for x in os.getloadavg())}")
    ratios: list[float] = []
    for variant in VARIANTS:
        ours, theirs = results[("aiocommit", variant)], results[("native", variant)]
        ours_median, ours_best = ours.rates(rows)
        native_median, native_best = theirs.rates(rows)
        ratio = ours_median / native_median
        ratios.append(ratio)
        print(f"-- {variant}")
        for name, series, median, best in (
            ("aiocommit", ours, ours_median, ours_best),
            ("native", theirs, native_median, native_best),
        ):
            print(
                f"{name:<23} {median / 1e6:.2f} M rows/s median, {best / 1e6:.2f} best, "
                f"{statistics.median(series.sizes) / 1e6:.1f} MB in "
                f"{statistics.median(series.files):.0f} files"
            )
        verdict = "meets" if ratio >= TARGET else "MISSES"
        print(
            f"ratio aiocommit/native  {ratio:.2f} median, {ours_best / native_best:.2f} best "
            f"({verdict} the {TARGET} target)"
        )
        # tiny smoke runs can measure no CPU at all
        ours_cpu = max(statistics.median(ours.cpu), 1e-3)
        native_cpu = max(statistics.median(theirs.cpu), 1e-3)
        print(
            f"rows per CPU-second     aiocommit {rows / ours_cpu / 1e6:.2f} M,"
            f" native {rows / native_cpu / 1e6:.2f} M"
            f" (ratio {native_cpu / ours_cpu:.2f})"
        )
    print(
        f"job commit share        {statistics.median(commit_share) * 100:.1f} % "
        "of the aiocommit write's wall time"
    )
    print("-- wall time / native's, by round (each round's writes back to back; <= 1 is faster)")
    for variant in VARIANTS:
        theirs = results[("native", variant)]
        for name in (n for n in writers if n != "native"):
            mine = results[(name, variant)]
            paired = [a / b for a, b in zip(mine.seconds, theirs.seconds, strict=True)]
            cpu = statistics.median(mine.cpu) / max(statistics.median(theirs.cpu), 1e-3)
            print(
                f"{variant:<11} {name:<9} {', '.join(f'{r:.2f}' for r in paired)}"
                f" (median {statistics.median(paired):.2f}; CPU-s {cpu:.2f})"
            )
    print(f"ratio aiocommit/native (lower of the two medians): {min(ratios):.2f}")
    return ratios


if __name__ == "__main__":
    main()
