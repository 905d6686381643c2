"""Speculative execution against the ``aiocommit`` data source on a real standalone
cluster: exactly-once output whichever attempt wins.

    .venv/bin/python tests/spark/speculation_job.py [--scenario late-loser|kill] [--rows N]
        [--via format,write,jvm]

Spark only speculates across hosts, so this starts a standalone master on 127.0.0.1
and two workers (2 cores each) bound to the loopback addresses 127.0.0.2 and
127.0.0.3, using pyspark's bundled ``spark-class``. Start-up takes about a minute;
each ``--via`` named (comma-separated) then writes, one after another, in one Spark
application on that cluster (its executors and Python workers started once), its report
lines prefixed ``[via]``; each write's commit coordinator decisions are told apart by its
stages (its writes run in a job group of their own).

Scenarios (partition 0's first attempt is the slow one; every task logs its timeline):

* ``late-loser``: attempt 0 of partition 0 sleeps until D+0.3 s, its speculative copy
  until D; both attempts of partition 1 run until D+5 s and race each other. D: a second
  after the speculative copies of partitions 0 and 1 have both started (each slow
  attempt records its start in a file the others read), or 15 s into the write if that
  comes first (a copy starting later then meets a race already begun). A loser
  that finishes ``write()`` before Spark's kill reaches it saves its task manifest
  *after* the winner's (the engine's per-task manifest: last writer wins); the job
  commit must still commit the attempt Spark accepted (it loads each accepted
  attempt's own manifest copy).
* ``kill``: attempt 0 of partition 0 sleeps 40 s; the speculative copy wins and the
  slow attempt is killed before it writes anything.

``--via write`` writes with ``aiocommit.integrations.spark.write()`` (``mapInArrow``, the
Spark 3.5 path) instead of ``format("aiocommit")``: there is no commit coordinator, the
accepted attempt of a partition is the one whose result ``collect()`` kept, so the check
is one attempt's files per partition and every row once. ``--via jvm`` writes with
``write(..., engine="jvm")`` (Spark's own Parquet writer through Hadoop's manifest task
commit, aiocommit's job commit): Spark's file names carry no attempt ID, so the check is
every row once and ``_SUCCESS``.

The destination is a **relative** path (``out-VIA``, the driver's working directory is the
run's work directory): the driver must qualify it, or each executor would write under
its own working directory. The write must succeed (cleanup after ``_SUCCESS`` never
fails it, even while a loser is still writing). It then reads the destination back and
checks every id appears exactly once and that partition 0's committed files are the
accepted attempt's. ``tests/spark/test_speculation.py`` runs it in the default suite.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING, Any

from aiocommit_testing.jvm import SHORT_LIVED_JVM_OPTIONS  # every JVM of the scenario

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

HOSTS = ("127.0.0.2", "127.0.0.3")
PARTITIONS = 6
#: late-loser: the latest start of the race (D), in seconds from just before the write
RACE_DEADLINE = 15.0
#: late-loser: D is this long after the later of the speculative copies of partitions 0
#: and 1 started, once both have (when sooner than ``RACE_DEADLINE``)
RACE_AFTER_COPIES = 1.0
#: the slow partitions of late-loser, each speculated
SLOW_PARTITIONS = (0, 1)


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as sock:
        sock.bind((host, 0))
        port: int = sock.getsockname()[1]
        return port


def spark_home() -> Path:
    import pyspark

    return Path(pyspark.__file__).parent


def wait_for(condition: Any, seconds: float, what: str) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.5)
    raise TimeoutError(f"timed out waiting for {what}")


class Cluster:
    """A standalone master and two workers; every process is ours and stopped by pid."""

    def __init__(self, work: Path) -> None:
        self.work = work
        self.processes: list[subprocess.Popen[bytes]] = []
        self.port = free_port()
        self.url = f"spark://127.0.0.1:{self.port}"

    def _start(self, name: str, args: list[str], env: dict[str, str]) -> None:
        log = open(self.work / f"{name}.log", "wb")  # noqa: SIM115 - closed with the process
        process = subprocess.Popen(
            [str(spark_home() / "bin" / "spark-class"), *args],
            stdout=log,
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,
        )
        self.processes.append(process)

    def start(self) -> None:
        """Start the master, wait until it leads, then start the workers.

        Post: the workers are starting (``wait_for_workers`` waits until they registered),
        so an application's driver may start beside them."""
        base = dict(
            os.environ,
            SPARK_HOME=str(spark_home()),
            PYSPARK_PYTHON=sys.executable,
            SPARK_DAEMON_JAVA_OPTS=SHORT_LIVED_JVM_OPTIONS,
        )
        master_env = dict(base, SPARK_LOCAL_IP="127.0.0.1")
        self._start(
            "master",
            [
                "org.apache.spark.deploy.master.Master",
                "--host", "127.0.0.1",
                "--port", str(self.port),
                "--webui-port", str(free_port()),
            ],
            master_env,
        )  # fmt: skip
        wait_for(lambda: b"I have been elected leader" in self._log("master"), 120, "master")
        for index, host in enumerate(HOSTS):
            worker_dir = self.work / f"worker{index}"
            worker_dir.mkdir()
            self._start(
                f"worker{index}",
                [
                    "org.apache.spark.deploy.worker.Worker",
                    "--host", host,
                    "--cores", "2",
                    "--memory", "1g",
                    "--work-dir", str(worker_dir),
                    "--webui-port", str(free_port(host)),
                    self.url,
                ],
                dict(base, SPARK_LOCAL_IP=host),
            )  # fmt: skip

    def wait_for_workers(self) -> None:
        """Post: both workers registered with the master."""
        wait_for(
            lambda: all(b"Successfully registered" in self._log(f"worker{i}") for i in range(2)),
            180,
            "workers",
        )

    def _log(self, name: str) -> bytes:
        try:
            return (self.work / f"{name}.log").read_bytes()
        except FileNotFoundError:
            return b""

    def stop(self) -> None:
        for process in reversed(self.processes):
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGTERM)  # its own session: only its tree
        for process in self.processes:
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()


def session(cluster: Cluster, work: Path) -> SparkSession:
    os.environ["PYSPARK_PYTHON"] = sys.executable
    from pyspark.sql import SparkSession

    log4j = work / "log4j2.properties"
    log4j.write_text(
        "rootLogger.level = warn\nrootLogger.appenderRef.stdout.ref = console\n"
        "appender.console.type = Console\nappender.console.name = console\n"
        "appender.console.target = SYSTEM_ERR\nappender.console.layout.type = PatternLayout\n"
        "appender.console.layout.pattern = %d{HH:mm:ss} %p %c{1}: %m%n\n"
        "logger.coord.name = org.apache.spark.scheduler.OutputCommitCoordinator\n"
        "logger.coord.level = info\n"
        "logger.tsm.name = org.apache.spark.scheduler.TaskSetManager\nlogger.tsm.level = info\n"
    )
    return (
        SparkSession.builder.master(cluster.url)
        .appName("aiocommit-speculation")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.executor.memory", "768m")
        .config("spark.executor.cores", "2")
        .config("spark.cores.max", "4")
        .config("spark.speculation", "true")
        .config("spark.speculation.interval", "200ms")
        .config("spark.speculation.quantile", "0.5")
        .config("spark.speculation.multiplier", "1.5")
        .config("spark.speculation.minTaskRuntime", "1s")
        .config("spark.speculation.efficiency.enabled", "false")
        .config("spark.sql.warehouse.dir", str(work / "warehouse"))
        .config(
            "spark.driver.extraJavaOptions",
            f"{SHORT_LIVED_JVM_OPTIONS} -Dlog4j2.configurationFile=file:{log4j}",
        )
        .config("spark.executor.extraJavaOptions", SHORT_LIVED_JVM_OPTIONS)
        .getOrCreate()
    )


def record_start(starts: Path, partition: int, attempt: int, started: float) -> None:
    """Record in ``starts`` that ``attempt`` of ``partition`` started at ``started``
    (written aside, then renamed: a reader sees the whole time or no file)."""
    aside = starts / f".p{partition}a{attempt}.{os.getpid()}"
    aside.write_text(repr(started))
    os.replace(aside, starts / f"p{partition}a{attempt}")


def race_start(starts: Path, deadline: float) -> float:
    """D of late-loser: ``deadline``, or ``RACE_AFTER_COPIES`` after the later of the
    first speculative copies (attempt 1 or later) of the ``SLOW_PARTITIONS`` started, once
    each has one, when that is sooner."""
    copies: list[float] = []
    for partition in SLOW_PARTITIONS:
        started = [
            float(path.read_text())
            for path in starts.glob(f"p{partition}a*")
            if int(path.name.partition("a")[2]) > 0
        ]
        if not started:
            return deadline
        copies.append(min(started))
    return min(deadline, max(copies) + RACE_AFTER_COPIES)


def slow_udf(scenario: str, deadline: float, timeline: str, starts: str) -> Any:
    """A Python UDF (no pandas needed) that is the identity, but partition 0's first
    attempt sleeps at its first row (late-loser: the slow partitions' attempts wait for
    the race, ``race_start``, recording their starts in the directory ``starts``); every
    task attempt logs when it resumed."""
    seen: set[int] = set()

    def identity(value: int) -> int:
        from pyspark import TaskContext

        context = TaskContext.get()
        assert context is not None
        tid = context.taskAttemptId()
        if tid in seen:
            return value
        seen.add(tid)
        partition, attempt = context.partitionId(), context.attemptNumber()
        started = time.time()
        if scenario == "kill":
            time.sleep(40.0 if (partition, attempt) == (0, 0) else 0.0)
        elif partition in SLOW_PARTITIONS:
            record_start(Path(starts), partition, attempt, started)
            after = 5.0 if partition == 1 else 0.3 if attempt == 0 else 0.0
            while (pause := race_start(Path(starts), deadline) + after - time.time()) > 0:
                time.sleep(min(pause, 0.05))
        with open(timeline, "a") as log:
            record = {
                "partition": partition,
                "attempt": attempt,
                "tid": tid,
                "pid": os.getpid(),
                "start": round(started, 3),
                "resumed": round(time.time(), 3),
            }
            log.write(json.dumps(record) + "\n")
        return value

    return identity


def coordinator_decisions(
    work: Path, application: str, stages: set[str]
) -> dict[int, dict[str, str]]:
    """Partition -> {Spark task attempt id: "authorized" or "denied"} in ``stages`` (the
    measured write's) of ``application``, from its executors' logs
    (``DataWritingSparkTask``)."""
    pattern = re.compile(
        r"Commit (authorized|denied) for partition (\d+) \(task (\d+), .*stage (\d+)"
    )
    decisions: dict[int, dict[str, str]] = {}
    for log in work.glob(f"worker*/{application}/*/stderr"):
        for match in pattern.finditer(log.read_text(errors="replace")):
            verdict, partition, tid, stage = match.groups()
            if stage in stages:
                decisions.setdefault(int(partition), {})[tid] = verdict
    return decisions


#: ``part-00003-<job uuid>-17-c000.snappy.parquet`` or ``part-00003-<job uuid>-17.c000...``
COMMITTED_NAME = re.compile(r"part-(?P<partition>\d+)-.*-(?P<tid>\d+)[.-]c\d{3}")


def committed_tids(dest: Path) -> dict[int, set[str]]:
    """Partition -> Spark task attempt ids in the committed file names
    (``part-<partition>-<job>-<taskAttemptId>-c<n>...``, or ``.c<n>`` inside partition
    directories, as Spark names them). Not below ``_temporary/``: a losing attempt still
    writing after the commit leaves files there, which never reach the destination (and
    ``aiocommit cleanup`` removes)."""
    found: dict[int, set[str]] = {}
    for path in dest.rglob("part-*"):
        if path.relative_to(dest).parts[0] == "_temporary":
            continue
        match = COMMITTED_NAME.match(path.name)
        if match is None:
            raise ValueError(f"not a name the writer gives: {path}")
        found.setdefault(int(match["partition"]), set()).add(match["tid"])
    return found


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scenario", choices=("late-loser", "kill"), default="late-loser")
    parser.add_argument("--rows", type=int, default=60_000)
    parser.add_argument("--keep", action="store_true")
    parser.add_argument(
        "--via",
        default="format",
        help="comma-separated, of format, write, jvm: each a write of its own, one after "
        "another on one cluster",
    )
    args = parser.parse_args(argv)
    vias = args.via.split(",")
    unknown = sorted(set(vias) - set(VIAS))
    if unknown:
        parser.error(f"--via: unknown {', '.join(unknown)} (choose from {', '.join(VIAS)})")

    work = Path(tempfile.mkdtemp(prefix="aiocommit-speculation-"))
    # the driver JVM starts in this process and keeps its working directory: "out-VIA"
    # below is relative to it, as a user's relative destination would be
    # SIGTERM (a test's timeout) unwinds through the finally below: the cluster stops
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    previous_cwd = os.getcwd()
    os.chdir(work)
    cluster = Cluster(work)
    t0 = time.monotonic()
    failed: list[str] = []
    try:
        cluster.start()
        spark = session(cluster, work)  # its driver starts while the workers do
        try:
            cluster.wait_for_workers()
            # the driver counts as one (pyspark 3.5's tracker has no getExecutorInfos):
            # every write below runs with both executors
            tracker = spark.sparkContext._jsc.sc().statusTracker()
            wait_for(
                lambda: len(tracker.getExecutorInfos()) > len(HOSTS),
                180,
                "an executor on each worker",
            )
            print(f"cluster up in {time.monotonic() - t0:.0f} s: {cluster.url}", flush=True)
            from aiocommit.integrations.spark import register, seam

            if seam.HAS_DATA_SOURCES:
                register(spark)
            for via in vias:
                if not scenario(spark, work, via, args.scenario, args.rows):
                    failed.append(via)
        finally:
            spark.stop()
        if failed:
            raise SystemExit(1)
    finally:
        cluster.stop()
        os.chdir(previous_cwd)
        print(f"logs in {work}" if args.keep else "", end="")
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)


#: the ways to write, each checked in turn in the one Spark application on the cluster
VIAS = ("format", "write", "jvm")


def measured_stages(spark: SparkSession, group: str) -> set[str]:
    """The ids of the stages of every job run in job group ``group``."""
    tracker = spark.sparkContext.statusTracker()
    stages: set[str] = set()
    for job in tracker.getJobIdsForGroup(group):
        info = tracker.getJobInfo(job)
        if info is not None:
            stages.update(str(stage) for stage in info.stageIds)
    return stages


def scenario(spark: SparkSession, work: Path, via: str, name: str, rows: int) -> bool:
    """One write ``via`` a way of writing in ``spark``'s application, checked: the commit
    coordinator's decisions are read for the stages of this write's job group only (the
    executors' logs hold every write's); its report lines start ``[via]``. True when it
    committed every row exactly once."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import LongType

    from aiocommit.integrations.spark import write

    def say(line: str) -> None:
        print(f"[{via}] {line}", flush=True)

    out = f"out-{via}"
    dest = work / out
    timeline = work / f"timeline-{via}.jsonl"
    context = spark.sparkContext
    application = context.applicationId
    measured = f"measured-{via}"
    try:
        df = spark.range(rows, numPartitions=PARTITIONS).selectExpr("id", "id % 7 AS k")
        # warm up the executors' Python workers so the timings below mean something
        engine = "jvm" if via == "jvm" else "python"
        warmup = str(work / f"warmup-{via}")
        if via in ("write", "jvm"):
            write(spark.range(100, numPartitions=4), warmup, mode="append", engine=engine)
        else:
            spark.range(100, numPartitions=4).write.format("aiocommit").option(
                "engine", engine
            ).mode("append").save(warmup)
        starts = work / f"starts-{via}"
        starts.mkdir()
        deadline = time.time() + RACE_DEADLINE
        delay = F.udf(slow_udf(name, deadline, str(timeline), str(starts)), LongType())
        slow = df.select(delay("id").alias("id"), "k")
        started = time.monotonic()
        context.setJobGroup(measured, f"the measured write via {via}")
        if via in ("write", "jvm"):
            write(slow, out, mode="append", partition_by="k", engine=engine)
        else:
            # the Python data source: on a local path auto would pick the JVM engine,
            # which the "jvm" via runs
            slow.write.format("aiocommit").option("engine", engine).mode("append").option(
                "partitionBy", "k"
            ).save(out)
        say(f"write took {time.monotonic() - started:.1f} s")
        if name == "late-loser":
            race = race_start(starts, deadline) - (deadline - RACE_DEADLINE)
            say(f"the race began {race:.1f} s in (at the latest {RACE_DEADLINE:.0f} s)")
    finally:
        context.setJobGroup(f"check-{via}", f"reading back the write via {via}")
    ids = [row["id"] for row in spark.read.parquet(str(dest)).select("id").collect()]
    duplicates = [i for i, n in Counter(ids).items() if n > 1]
    events = [json.loads(line) for line in timeline.read_text().splitlines()]
    for event in sorted(events, key=lambda e: (e["partition"], e["attempt"])):
        say(f"task {event}")
    finished = {str(e["tid"]): e["attempt"] for e in events if e["partition"] == 0}
    say(f"rows read back {len(ids)} of {rows}; distinct {len(set(ids))}")
    say(f"partition 0 attempts that got past the sleep: {finished}")
    leftovers = list((dest / "_temporary").rglob("*")) if (dest / "_temporary").exists() else []
    say(f"left under _temporary: {len(leftovers)} entries")
    stages = measured_stages(spark, measured)
    decisions = coordinator_decisions(work, application, stages)
    # the executors live on, their logs copied to the files as they come: for a moment
    # the last decisions may be missing (the check below reports what is there)
    lagging = time.monotonic() + 10
    while (
        via == "format"
        and time.monotonic() < lagging
        and not all(
            "authorized" in decisions.get(partition, {}).values() for partition in range(PARTITIONS)
        )
    ):
        time.sleep(0.2)
        decisions = coordinator_decisions(work, application, stages)
    # Spark's own file names carry no attempt ID
    committed = committed_tids(dest) if via != "jvm" else {}
    success = (dest / "_SUCCESS").exists()
    say(f"_SUCCESS saved: {success}")
    ok = len(ids) == rows and not duplicates and success
    for partition in range(PARTITIONS):
        accepted = {t for t, v in decisions.get(partition, {}).items() if v == "authorized"}
        if via == "jvm":  # every row once (above) is the check
            right = True
        elif via == "write":  # no coordinator: the attempt collect() kept
            right = len(committed.get(partition, set())) == 1
        else:
            right = committed.get(partition) == accepted
        ok = ok and right
        say(
            f"partition {partition}: coordinator {decisions.get(partition)}, "
            f"committed files from {sorted(committed.get(partition, set()))}"
            + ("" if right else "  <-- NOT the accepted attempt")
        )
    say("EXACTLY ONCE: " + ("yes" if ok else f"NO (duplicates: {duplicates[:5]})"))
    return ok


if __name__ == "__main__":
    main()
