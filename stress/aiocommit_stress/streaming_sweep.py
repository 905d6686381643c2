"""A file-source stream SIGKILLed at seeded points and restarted from its checkpoint
(issue #35): ``format("aiocommit")`` against Spark's own file sink (``parquet``).

One run: ``batches`` JSON files of ``ROWS`` rows each in an input directory, read with
``maxFilesPerTrigger=1`` (one micro-batch per file, ``partitionBy("k")``: two files per
task), written by a query in a child process (``python -m
aiocommit_stress.streaming_sweep query ...``, its own process group: the Python driver,
Spark's JVM and its Python workers). The parent watches the checkpoint's ``offsets/`` and
``commits/`` and the destination, and SIGKILLs the whole group when the seed's next kill
point is reached, then starts the query again, until a start runs every batch.

Kill points (a batch and a phase, by seed):

* ``planned``: the batch's ``offsets/N`` is written, plus a seeded delay (anywhere in the
  batch);
* ``writing``: a task has written a file of the batch (aiocommit: under ``_temporary``;
  parquet: a new file in the destination);
* ``committing``: aiocommit: a file of the batch is in the destination and ``_SUCCESS``
  does not name the batch yet (mid-commit); parquet: as ``committed``;
* ``committed``: the sink committed the batch (aiocommit: ``_SUCCESS`` names it; parquet:
  ``_spark_metadata/N`` exists) and Spark has not written ``commits/N``.

A reader thread lists the destination as a plain directory (no ``_spark_metadata``, no
``_SUCCESS``, nothing whose name starts with ``_`` or ``.``) and reads every Parquet file,
all through the run: a listing taken twice alike is one observation; it counts the
observations that hold part of a batch's rows (a partial batch), a row twice, or a file it
could not read. At the end the plain directory is read once more: every input row must be
there exactly once.
"""

from __future__ import annotations

import json
import os
import random
import re
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from aiocommit_testing.jvm import SHORT_LIVED_JVM_OPTIONS

#: rows per input file (one micro-batch each)
ROWS = 10
PHASES = ("planned", "writing", "committing", "committed")
SINKS = ("aiocommit", "parquet")
#: a query start that runs no further than this is stuck
START_TIMEOUT = 600.0
#: how often the parent looks for the next kill point
POLL = 0.005


# --- the child: one start of the query ------------------------------------------------


def run_query(sink: str, source: str, checkpoint: str, dest: str) -> None:
    """Start the stream from its checkpoint, run every available batch, stop."""
    from pyspark.sql import SparkSession

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    spark = (
        SparkSession.builder.master("local[2]")
        .appName(f"aiocommit-streaming-sweep-{sink}")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.driver.extraJavaOptions", SHORT_LIVED_JVM_OPTIONS)
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    stream = (
        spark.readStream.schema("id INT, k STRING")
        .option("maxFilesPerTrigger", 1)
        .json(source)
        .writeStream.option("checkpointLocation", checkpoint)
    )
    if sink == "aiocommit":
        from aiocommit.integrations.spark import register

        register(spark)
        query = stream.format("aiocommit").option("partitionBy", "k").start(dest)
    else:
        query = stream.format(sink).partitionBy("k").start(dest)
    try:
        query.processAllAvailable()
    finally:
        query.stop()
    spark.stop()
    print("all batches done", flush=True)


# --- the parent: kills, restarts, the reader, the check -------------------------------


@dataclass(frozen=True)
class KillPoint:
    batch: int
    phase: str
    #: seconds after the phase is seen
    delay: float


def kill_plan(seed: int, batches: int, kills: int) -> list[KillPoint]:
    """``kills`` points on distinct batches, in batch order."""
    chance = random.Random(seed)
    chosen = sorted(chance.sample(range(batches), min(kills, batches)))
    plan = []
    for batch in chosen:
        phase = chance.choice(PHASES)
        delay = {"planned": chance.uniform(0.0, 0.8), "committing": 0.0}.get(
            phase, chance.uniform(0.0, 0.02)
        )
        plan.append(KillPoint(batch, phase, round(delay, 3)))
    return plan


def _visible_files(dest: Path) -> list[Path]:
    """The destination's data files as a plain-directory reader lists them."""
    found: list[Path] = []
    for root, dirs, files in os.walk(dest):
        dirs[:] = sorted(d for d in dirs if not d.startswith(("_", ".")))
        found.extend(Path(root, f) for f in sorted(files) if not f.startswith(("_", ".")))
    return found


def _temporary_files(dest: Path) -> list[Path]:
    found: list[Path] = []
    for root, _dirs, files in os.walk(dest / "_temporary"):
        found.extend(Path(root, f) for f in files)
    return found


def _exists(path: Path) -> bool:
    return path.exists()


def _success_names_batch(dest: Path, batch: int) -> bool:
    try:
        job_id = json.loads((dest / "_SUCCESS").read_bytes()).get("jobId", "")
    except (OSError, ValueError, AttributeError):
        return False
    return re.search(rf"b{batch}g\d+_", str(job_id)) is not None


class Phases:
    """Whether a batch has reached a phase, read from the checkpoint and destination."""

    def __init__(self, sink: str, checkpoint: Path, dest: Path) -> None:
        self.sink, self.checkpoint, self.dest = sink, checkpoint, dest
        self.visible_at_plan: dict[int, int] = {}

    def reached(self, point: KillPoint) -> bool | None:
        """True: kill now; False: not yet; None: the batch is past (Spark recorded it)."""
        batch = point.batch
        if _exists(self.checkpoint / "commits" / str(batch)):
            return None
        if not _exists(self.checkpoint / "offsets" / str(batch)):
            return False
        if batch not in self.visible_at_plan:
            self.visible_at_plan[batch] = len(_visible_files(self.dest))
        if point.phase == "planned":
            return True
        marker = re.compile(rf"b{batch}g\d+_")
        if self.sink == "aiocommit":
            if point.phase == "writing":
                return any(marker.search(p.name) for p in _temporary_files(self.dest))
            if point.phase == "committing":  # files first: _SUCCESS is written after them
                return any(
                    marker.search(p.name) for p in _visible_files(self.dest)
                ) and not _success_names_batch(self.dest, batch)
            return _success_names_batch(self.dest, batch)
        if point.phase == "writing":
            return len(_visible_files(self.dest)) > self.visible_at_plan[batch]
        return _exists(self.dest / "_spark_metadata" / str(batch))


@dataclass
class ReaderFigures:
    """What the plain-directory reader saw, in listings (observations)."""

    observations: int = 0
    #: listings holding part of a batch's rows
    partial: int = 0
    #: listings holding a row twice
    duplicated: int = 0
    #: listings with a file that could not be read (incomplete)
    unreadable: int = 0
    #: listings missing a batch an earlier listing held (its files taken back)
    retracted: int = 0
    examples: list[str] = field(default_factory=list)


def read_ids(
    files: list[Path], cache: dict[tuple[Path, int, int], list[int]] | None = None
) -> tuple[Counter[int], int]:
    """Every row's ``id`` in these Parquet files, and how many could not be read (gone
    or incomplete). ``cache``: the ids of files read before, by path, size and mtime."""
    import pyarrow.parquet as pq

    cache = {} if cache is None else cache
    ids: Counter[int] = Counter()
    unreadable = 0
    for path in files:
        try:
            stat = path.stat()
            key = (path, stat.st_size, stat.st_mtime_ns)
            if key not in cache:
                cache[key] = pq.read_table(path, columns=["id"]).column("id").to_pylist()
            ids.update(cache[key])
        except FileNotFoundError:
            continue  # moved or deleted since the listing
        except Exception:
            unreadable += 1
    return ids, unreadable


class PlainReader(threading.Thread):
    """Lists and reads the destination as a plain directory until stopped."""

    def __init__(self, dest: Path, batches: int) -> None:
        super().__init__(daemon=True, name="plain-reader")
        self.dest, self.batches = dest, batches
        self.figures = ReaderFigures()
        self.stopping = threading.Event()
        self.seen_batches: set[int] = set()
        self.cache: dict[tuple[Path, int, int], list[int]] = {}

    def run(self) -> None:
        while not self.stopping.wait(0.02):
            first = _visible_files(self.dest)
            ids, unreadable = read_ids(first, self.cache)
            if _visible_files(self.dest) != first:
                continue  # the directory changed while it was read: no one state seen
            self.observe(ids, unreadable)

    def observe(self, ids: Counter[int], unreadable: int) -> None:
        figures = self.figures
        figures.observations += 1
        figures.unreadable += unreadable > 0
        per_batch: Counter[int] = Counter(i // ROWS for i in ids)
        if self.seen_batches - set(per_batch):
            figures.retracted += 1
            if len(figures.examples) < 3:
                gone = sorted(self.seen_batches - set(per_batch))
                figures.examples.append(f"batch {gone[0]} seen, then gone")
        self.seen_batches |= set(per_batch)
        partial = [b for b, n in per_batch.items() if len(_distinct(ids, b)) < ROWS and n]
        if partial:
            figures.partial += 1
            if len(figures.examples) < 3:
                b = partial[0]
                figures.examples.append(f"batch {b}: {len(_distinct(ids, b))} of {ROWS} rows")
        if any(n > 1 for n in ids.values()):
            figures.duplicated += 1


def _distinct(ids: Counter[int], batch: int) -> set[int]:
    return {i for i in range(batch * ROWS, (batch + 1) * ROWS) if ids[i]}


@dataclass
class RunFigures:
    sink: str
    seed: int
    plan: list[KillPoint]
    kills: list[str] = field(default_factory=list)
    missed: list[str] = field(default_factory=list)
    starts: int = 0
    seconds: float = 0.0
    duplicated_rows: int = 0
    missing_rows: int = 0
    orphan_files: int = 0
    leftover_temporary: int = 0
    unreadable_files: int = 0
    reader: ReaderFigures = field(default_factory=ReaderFigures)
    error: str = ""

    @property
    def exactly_once(self) -> bool:
        return not self.error and self.duplicated_rows == 0 and self.missing_rows == 0

    @property
    def clean(self) -> bool:
        """Exactly once, and no reader ever saw a partial batch or a row twice."""
        return (
            self.exactly_once
            and self.reader.partial == 0
            and self.reader.duplicated == 0
            and self.reader.unreadable == 0
            and self.orphan_files == 0
            and self.unreadable_files == 0
            and self.leftover_temporary == 0
        )

    def line(self) -> str:
        return (
            f"{self.sink:<9} seed {self.seed}: kills {','.join(self.kills) or '-'}"
            f"{' (missed ' + ','.join(self.missed) + ')' if self.missed else ''}; "
            f"{self.starts} starts, {self.seconds:.0f} s; rows duplicated "
            f"{self.duplicated_rows}, missing {self.missing_rows}; files orphan "
            f"{self.orphan_files}, unreadable {self.unreadable_files}, left in _temporary "
            f"{self.leftover_temporary}; reader: {self.reader.partial} partial, "
            f"{self.reader.duplicated} duplicated, {self.reader.unreadable} unreadable, "
            f"{self.reader.retracted} retracted of {self.reader.observations} listings"
            f"{'; ' + self.error if self.error else ''}"
        )

    def as_json(self) -> dict[str, Any]:
        return {
            "sink": self.sink,
            "seed": self.seed,
            "plan": [vars(p) for p in self.plan],
            "kills": self.kills,
            "missed": self.missed,
            "starts": self.starts,
            "seconds": round(self.seconds, 1),
            "duplicated_rows": self.duplicated_rows,
            "missing_rows": self.missing_rows,
            "orphan_files": self.orphan_files,
            "leftover_temporary": self.leftover_temporary,
            "unreadable_files": self.unreadable_files,
            "reader": vars(self.reader),
            "exactly_once": self.exactly_once,
            "clean": self.clean,
            "error": self.error,
        }


def write_input(source: Path, batches: int) -> None:
    """One JSON file of ``ROWS`` rows per batch, oldest first (the file source's order)."""
    source.mkdir(parents=True, exist_ok=True)
    base = time.time() - batches - 10
    for batch in range(batches):
        lines = [json.dumps({"id": batch * ROWS + i, "k": "ab"[i % 2]}) + "\n" for i in range(ROWS)]
        path = source / f"batch-{batch:03d}.json"
        path.write_text("".join(lines))
        os.utime(path, (base + batch, base + batch))


def _metadata_files(dest: Path) -> set[str]:
    """The files Spark's ``_spark_metadata`` log lists (their names)."""
    names: set[str] = set()
    log = dest / "_spark_metadata"
    if not log.exists():
        return names
    for entry in log.iterdir():
        if entry.name.startswith("."):
            continue
        for line in entry.read_text().splitlines()[1:]:
            names.add(Path(json.loads(line)["path"]).name)
    return names


def _start(
    sink: str, source: Path, checkpoint: Path, dest: Path, log: Path
) -> subprocess.Popen[bytes]:
    command = [sys.executable, "-m", "aiocommit_stress.streaming_sweep", "query"]
    with log.open("ab") as out:
        return subprocess.Popen(
            [*command, sink, str(source), str(checkpoint), str(dest)],
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its own group: Spark's JVM and workers die with it
            env={**os.environ, "PYSPARK_PYTHON": sys.executable},
        )


def _group_alive(group: int) -> bool:
    """Whether a process of the group ``group`` still runs (zombies do not count)."""
    import psutil

    for process in psutil.process_iter(["status"]):
        try:
            if os.getpgid(process.pid) == group and process.status() != psutil.STATUS_ZOMBIE:
                return True
        except (ProcessLookupError, psutil.Error):
            continue
    return False


def _kill_group(child: subprocess.Popen[bytes]) -> None:
    """SIGKILL the query's process group: its driver, Spark's JVM and Python workers."""
    try:
        os.killpg(child.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    child.wait()
    deadline = time.monotonic() + 30
    while _group_alive(child.pid) and time.monotonic() < deadline:
        time.sleep(0.05)


def run_seed(
    sink: str,
    seed: int,
    workdir: Path,
    *,
    batches: int = 20,
    kills: int = 3,
    plan: list[KillPoint] | None = None,
    log: Callable[[str], None] = lambda _: None,
) -> RunFigures:
    """One seeded run of one sink; see the module docstring. ``plan``: these kill points
    instead of the seed's."""
    root = workdir / f"{sink}-{seed}"
    source, checkpoint, dest = root / "in", root / "checkpoint", root / "out"
    dest.mkdir(parents=True)
    write_input(source, batches)
    plan = kill_plan(seed, batches, kills) if plan is None else plan
    figures = RunFigures(sink, seed, plan)
    phases = Phases(sink, checkpoint, dest)
    reader = PlainReader(dest, batches)
    reader.start()
    started = time.monotonic()
    pending = list(plan)
    try:
        while True:
            figures.starts += 1
            child = _start(sink, source, checkpoint, dest, root / "query.log")
            deadline = time.monotonic() + START_TIMEOUT
            killed = False
            while child.poll() is None and time.monotonic() < deadline:
                if pending:
                    state = phases.reached(pending[0])
                    if state is None:
                        point = pending.pop(0)
                        figures.missed.append(f"{point.batch}/{point.phase}")
                        continue
                    if state:
                        point = pending.pop(0)
                        time.sleep(point.delay)
                        _kill_group(child)
                        figures.kills.append(f"{point.batch}/{point.phase}")
                        log(f"  {sink} seed {seed}: killed at batch {point.batch} {point.phase}")
                        killed = True
                        break
                time.sleep(POLL)
            if killed:
                continue
            if child.poll() is None:
                _kill_group(child)
                figures.error = f"a start ran over {START_TIMEOUT:.0f} s"
                break
            if child.returncode != 0:
                tail = (root / "query.log").read_text(errors="replace").strip().splitlines()
                figures.error = f"the query failed (rc {child.returncode}): {tail[-1:]}"
                break
            figures.missed += [f"{p.batch}/{p.phase}" for p in pending]
            break
    finally:
        reader.stopping.set()
        reader.join()
    figures.seconds = time.monotonic() - started
    figures.reader = reader.figures
    ids, unreadable = read_ids(_visible_files(dest))
    expected = range(batches * ROWS)
    figures.duplicated_rows = sum(n - 1 for n in ids.values() if n > 1)
    figures.missing_rows = sum(1 for i in expected if not ids[i])
    figures.unreadable_files = unreadable
    if sink == "aiocommit":
        figures.leftover_temporary = len(_temporary_files(dest))
    else:
        listed = _metadata_files(dest)
        figures.orphan_files = sum(1 for p in _visible_files(dest) if p.name not in listed)
    return figures


def main(argv: list[str]) -> None:
    if argv[:1] == ["query"]:
        run_query(*argv[1:5])
        return
    raise SystemExit(
        "usage: python -m aiocommit_stress.streaming_sweep query SINK SOURCE CHECKPOINT DEST"
    )


if __name__ == "__main__":
    main(sys.argv[1:])
