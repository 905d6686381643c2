"""``write(df, dest, engine="jvm")``: Spark's own file writers through the committer in
aiocommit's jar (Hadoop's ManifestCommitter task side, no job commit), then aiocommit's
job commit. Real Spark, real files; the test session has no ``spark.jars``, so the first
write adds the jar to the running session."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import DataFrame, SparkSession

from aiocommit.errors import Unsupported
from aiocommit.integrations.spark import seam, write
from aiocommit.integrations.spark.jvm_engine import (
    COMMITTER_CLASS,
    COMMITTER_OPTIONS,
    JOB_ID_OPTION,
    NO_FORK_OPTIONS,
    ensure_committer,
    jar_path,
)
from aiocommit.protocol.manifest import TaskManifest, decode_manifest
from aiocommit.protocol.success import decode_success
from tests.spark.helpers import data_files, quiet, temporary_is_clean

ROOT = Path(__file__).resolve().parents[2]
HAS_MANIFEST_COMMITTER = seam.PYSPARK >= (4, 0)  # pyspark 3.5 ships Hadoop 3.3.4
needs_manifest_committer = pytest.mark.skipif(
    not HAS_MANIFEST_COMMITTER, reason="pyspark 3.5's Hadoop 3.3.4 has no ManifestCommitter"
)


def frame(spark: SparkSession, tasks: int = 8, rows: int = 400) -> DataFrame:
    return (
        spark.range(rows, numPartitions=2)
        .selectExpr("id", "cast(id % 5 AS int) AS k", "concat('v', id) AS s")
        .repartition(tasks)
    )


def leaf_dirs(root: Path) -> set[str]:
    return {str(Path(f).parent) for f in data_files(root)}


def rows(spark: SparkSession, dest: Path, fmt: str = "parquet") -> list[tuple[object, ...]]:
    reader = spark.read.format(fmt)
    if fmt == "csv":
        reader = reader.option("header", "true").option("inferSchema", "true")
    df = reader.load(str(dest))
    return sorted(tuple(r) for r in df.select(*sorted(df.columns)).collect())


@needs_manifest_committer
@pytest.mark.skipif(shutil.which("javac") is None, reason="no JDK (scripts/ensure_java.sh)")
def test_the_committed_jar_holds_its_sources_classes(tmp_path: Path) -> None:
    """scripts/build_jar.sh rebuilds the jar from java/ (against this pyspark's Hadoop):
    the same classes, byte for byte, as the jar the wheel ships (so the jar cannot
    drift from its source)."""
    rebuilt = tmp_path / "rebuilt.jar"
    env = {**os.environ, "PYTHON": sys.executable}
    subprocess.run(["bash", "scripts/build_jar.sh", str(rebuilt)], cwd=ROOT, check=True, env=env)

    def classes(jar: str | Path) -> dict[str, bytes]:
        with zipfile.ZipFile(jar) as archive:
            return {n: archive.read(n) for n in archive.namelist() if n.endswith(".class")}

    shipped = classes(jar_path())
    assert shipped, "the jar holds no class"
    assert classes(rebuilt) == shipped, "run scripts/build_jar.sh and commit the jar"


@needs_manifest_committer
@pytest.mark.parametrize("partitioned", [False, True], ids=["flat", "partitioned"])
def test_writes_what_sparks_writer_writes_and_commits_through_aiocommit(
    spark: SparkSession, tmp_path: Path, partitioned: bool
) -> None:
    """The same files, directories and rows as ``df.write.parquet``; no file before the
    job commit (Spark's job ends with the manifests only); aiocommit's ``_SUCCESS``
    names every file; nothing left in ``_temporary``."""
    df = frame(spark)
    columns = ["k"] if partitioned else []
    ours, theirs = tmp_path / "jvm", tmp_path / "spark"
    write(df, str(ours), mode="append", partition_by=columns, engine="jvm")
    df.write.mode("append").partitionBy(*columns).parquet(str(theirs))

    assert rows(spark, ours) == rows(spark, theirs)
    assert leaf_dirs(ours) == leaf_dirs(theirs)
    assert len(data_files(ours)) == len(data_files(theirs))
    success = decode_success((ours / "_SUCCESS").read_bytes())
    committed = sorted(name.split("/jvm/", 1)[1] for name in success.filenames)
    assert committed == sorted(data_files(ours)), success.filenames
    assert temporary_is_clean(ours)


@needs_manifest_committer
def test_task_manifests_are_hadoops_and_hadoops_job_commit_commits_them(
    spark: SparkSession, tmp_path: Path
) -> None:
    """The task side alone (Spark's writer through the committer, no aiocommit job
    commit): one manifest per task, saved in one plain write (no ``.crc`` file, compact
    JSON, no empty statistics); Hadoop's ``TaskManifest.load`` and aiocommit's decoder
    read each, with the same files; Hadoop's own ``ManifestCommitter.commitJob`` commits
    them into what ``df.write.parquet`` writes."""
    ensure_committer(spark)
    df = frame(spark, tasks=4, rows=40)
    dest, job_id = tmp_path / "out", "job-hadoop-commits"
    writer = df.write.mode("append").partitionBy("k").option(JOB_ID_OPTION, job_id)
    for key in COMMITTER_OPTIONS:
        writer = writer.option(key, COMMITTER_CLASS)
    writer.parquet(str(dest))

    manifests = dest / "_temporary" / job_id / "00" / "manifests"
    others = [p.name for p in manifests.iterdir() if not p.name.endswith("-manifest.json")]
    assert others == [], "a manifest alone, without a .crc file"
    saved = sorted(manifests.glob("*-manifest.json"))
    assert len(saved) == 4
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    hadoop = jvm.org.apache.hadoop
    conf = hadoop.conf.Configuration(spark.sparkContext._jsc.hadoopConfiguration())
    fs = hadoop.fs.Path(dest.as_uri()).getFileSystem(conf)
    for path in saved:
        text = path.read_bytes()
        assert b"\n" not in text, "compact JSON"
        ours = decode_manifest(text)
        stats = ours.iostatistics
        assert 0 not in [*stats.counters.values(), *stats.gauges.values()]
        assert -1 not in [*stats.minimums.values(), *stats.maximums.values()]
        assert all(mean.samples for mean in stats.meanstatistics.values())
        theirs = hadoop.mapreduce.lib.output.committer.manifest.files.TaskManifest.load(
            fs, hadoop.fs.Path(path.as_uri())
        ).validate()
        assert theirs.getTaskID() == ours.task_id
        assert sorted(str(e.getDest()) for e in theirs.getFilesToCommit()) == sorted(
            f.dest for f in ours.files
        )
        assert ours.files and ours.iostatistics.counters["task_stage_commit"] == 1

    conf.set("spark.sql.sources.writeJobUUID", job_id)
    mr = hadoop.mapreduce
    job = mr.JobID("hadoop", 1)
    attempt = mr.TaskAttemptID(mr.TaskID(job, mr.TaskType.MAP, 0), 0)
    context = mr.task.TaskAttemptContextImpl(conf, attempt)
    committer = mr.lib.output.committer.manifest.ManifestCommitter(
        hadoop.fs.Path(dest.as_uri()), context
    )
    committer.commitJob(mr.task.JobContextImpl(conf, job))
    theirs_dest = tmp_path / "spark"
    df.write.mode("append").partitionBy("k").parquet(str(theirs_dest))
    assert rows(spark, dest) == rows(spark, theirs_dest)
    assert leaf_dirs(dest) == leaf_dirs(theirs_dest)
    assert (dest / "_SUCCESS").exists()


@needs_manifest_committer
def test_the_local_task_commit_saves_hadoops_manifest(spark: SparkSession, tmp_path: Path) -> None:
    """On the local filesystem the committer commits a task itself (not through Hadoop's
    task commit stages): for the same attempt directory (files at the top, in a partition
    directory whose destination exists, and two levels down) its manifest has the files,
    the directories with their destination's state and level, and the IDs of Hadoop's
    ``ManifestCommitter.commitTask``; its task set-up makes the attempt directory; a task
    that wrote nothing saves a manifest of no files."""
    ensure_committer(spark)
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    hadoop, mr = jvm.org.apache.hadoop, jvm.org.apache.hadoop.mapreduce
    conf = hadoop.conf.Configuration(spark.sparkContext._jsc.hadoopConfiguration())
    job_id = "job-local-task-commit"
    conf.set(JOB_ID_OPTION, job_id)
    conf.set("spark.sql.sources.writeJobUUID", job_id)
    dest = tmp_path / "out"
    (dest / "k=1").mkdir(parents=True)  # an existing destination directory
    out = hadoop.fs.Path(dest.as_uri())
    job = mr.JobID("local", 7)

    def context(task: int) -> Any:
        return mr.task.TaskAttemptContextImpl(
            conf, mr.TaskAttemptID(mr.TaskID(job, mr.TaskType.MAP, task), 1)
        )

    def ours(task: int) -> tuple[Any, Any]:
        made = context(task)
        return made, jvm.aiocommit.spark.DeferredManifestCommitter(out, made)

    made, committer = ours(0)
    committer.setupJob(made)
    committer.setupTask(made)
    attempt = Path(committer.getWorkPath().toUri().getPath())
    assert attempt.is_dir(), "made at task set-up"
    for name in ("a.parquet", "k=1/b.parquet", "k=2/j=3/c.parquet", "k=2/d.parquet"):
        (attempt / name).parent.mkdir(parents=True, exist_ok=True)
        (attempt / name).write_bytes(b"x" * len(name))
    manifests = dest / "_temporary" / job_id / "00" / "manifests"

    def saved() -> TaskManifest:
        (path,) = manifests.glob("*-manifest.json")
        manifest = decode_manifest(path.read_bytes())
        path.unlink()
        return manifest

    theirs_context = context(0)
    hadoop_committer = mr.lib.output.committer.manifest.ManifestCommitter(out, theirs_context)
    hadoop_committer.commitTask(theirs_context)
    theirs = saved()
    committer.commitTask(made)
    mine = saved()
    for field in ("job_id", "job_attempt_number", "task_id", "task_attempt_id"):
        assert getattr(mine, field) == getattr(theirs, field), field
    assert Path(mine.task_attempt_dir.removeprefix("file:")) == attempt
    assert sorted(mine.files, key=str) == sorted(theirs.files, key=str)
    assert len(mine.files) == 4
    assert sorted(mine.directories, key=str) == sorted(theirs.directories, key=str)
    assert {(Path(d.dest).name, d.level) for d in mine.directories} == {
        ("k=1", 1),
        ("k=2", 1),
        ("j=3", 2),
    }
    assert len({d.state for d in mine.directories}) == 2, "k=1 exists, the others do not"
    counters = mine.iostatistics.counters
    assert counters["committer_task_file_count"] == 4 and counters["task_stage_commit"] == 1

    empty_context, empty = ours(1)
    empty.commitTask(empty_context)  # no set-up, no file: no attempt directory
    nothing = saved()
    assert nothing.files == [] and nothing.task_id.endswith("_000001")


@needs_manifest_committer
def test_spark_writer_options_and_other_formats(spark: SparkSession, tmp_path: Path) -> None:
    """Spark's writer options go to Spark's writer (CSV ``header``, ``compression``),
    aiocommit's commit options to the job commit (a summary report); csv, json, orc."""
    df = frame(spark, tasks=3, rows=30)
    expected = rows_of(df)
    reports = tmp_path / "reports"
    csv = tmp_path / "csv"
    options = {"header": "true", "compression": "gzip", "aiocommit.report_dir": str(reports)}
    write(df, str(csv), format="csv", mode="append", options=options, engine="jvm")
    files = data_files(csv)
    assert files and all(f.endswith(".csv.gz") for f in files), files
    assert rows(spark, csv, "csv") == expected
    assert len(list(reports.glob("summary-*.json"))) == 1
    for fmt in ("json", "orc"):
        dest = tmp_path / fmt
        write(df, str(dest), format=fmt, mode="append", engine="jvm")
        assert rows(spark, dest, fmt) == expected


@needs_manifest_committer
def test_save_modes(spark: SparkSession, tmp_path: Path) -> None:
    """errorifexists: Spark's PATH_ALREADY_EXISTS; ignore: nothing written; append adds;
    overwrite replaces all (static) or the written partitions (dynamic), in the job
    commit (Spark's own writer runs as an append)."""
    from pyspark.errors import AnalysisException

    dest = tmp_path / "out"
    first = frame(spark, tasks=2, rows=10)  # k in 0..4
    write(first, str(dest), mode="errorifexists", partition_by="k", engine="jvm")
    with pytest.raises(AnalysisException, match="PATH_ALREADY_EXISTS"):
        write(first, str(dest), mode="errorifexists", partition_by="k", engine="jvm")
    before = data_files(dest)
    write(first, str(dest), mode="ignore", partition_by="k", engine="jvm")
    assert data_files(dest) == before
    write(first, str(dest), mode="append", partition_by="k", engine="jvm")
    assert rows(spark, dest) == sorted(rows_of(first) * 2)

    only_k1 = spark.range(100, 103).selectExpr("id", "1 AS k", "concat('w', id) AS s")
    write(
        only_k1,
        str(dest),
        mode="overwrite",
        partition_by="k",
        options={"partitionOverwriteMode": "dynamic"},
        engine="jvm",
    )
    kept = [r for r in rows_of(first) * 2 if r[0] is not None and r[1] != 1]
    assert rows(spark, dest) == sorted(kept + rows_of(only_k1))
    write(only_k1, str(dest), mode="overwrite", partition_by="k", engine="jvm")
    assert rows(spark, dest) == rows_of(only_k1)
    assert {Path(f).parent.name for f in data_files(dest)} == {"k=1"}
    assert temporary_is_clean(dest)


@needs_manifest_committer
def test_failed_first_attempts_are_retried_and_committed_exactly_once(
    spark: SparkSession, tmp_path: Path
) -> None:
    """Every task's attempt 0 fails half-way through its rows (its file open in its
    attempt directory); the retries commit; every row once."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import LongType

    fail_first_attempt = F.udf(_fail_first_attempt, LongType())
    df = spark.range(0, 400, numPartitions=4).select(fail_first_attempt("id").alias("id"))
    dest = tmp_path / "out"
    with quiet(spark):
        write(df, str(dest), mode="append", engine="jvm")
    assert sorted(r[0] for r in spark.read.parquet(str(dest)).collect()) == list(range(400))
    assert temporary_is_clean(dest)


@needs_manifest_committer
def test_a_failed_write_is_aborted_and_the_old_output_stays(
    spark: SparkSession, tmp_path: Path
) -> None:
    """A task that fails on every attempt fails the write: Spark's error is raised, the
    job is aborted (no ``_temporary/JOB``), and an overwrite leaves the old output as it
    was (Spark's own writer deletes it before its job)."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import LongType

    always_fails = F.udf(_always_fails, LongType())
    dest = tmp_path / "out"
    old = frame(spark, tasks=2, rows=20)
    write(old, str(dest), mode="append", engine="jvm")
    before = data_files(dest)
    failing = spark.range(0, 40, numPartitions=2).select(always_fails("id").alias("id"))
    with quiet(spark), pytest.raises(Exception, match="every attempt"):
        write(failing, str(dest), mode="overwrite", engine="jvm")
    assert data_files(dest) == before
    assert rows(spark, dest) == rows_of(old)
    assert temporary_is_clean(dest)


@needs_manifest_committer
def test_bad_input_is_refused_before_spark_writes(spark: SparkSession, tmp_path: Path) -> None:
    """An unknown engine, a format Spark's file writers lack, a store Spark's JVM does
    not write through Hadoop's manifest committer: a clear error, nothing written; the
    committer without the job ID option fails at job set-up."""
    df = frame(spark, tasks=1, rows=3)
    dest = tmp_path / "out"
    with pytest.raises(ValueError, match="engine must be"):
        write(df, str(dest), engine="scala")
    with pytest.raises(ValueError, match='engine="jvm" writes parquet'):
        write(df, str(dest), format="avro", engine="jvm")
    with pytest.raises(ValueError, match="not s3://"):
        write(df, "s3://bucket/out", engine="jvm")
    with pytest.raises(ValueError, match="not memory://"):
        write(df, "memory://bucket/out", engine="jvm")
    protocol = "spark.sql.sources.commitProtocolClass"
    spark.conf.set(protocol, "org.apache.spark.internal.io.HadoopMapReduceCommitProtocol")
    try:
        with pytest.raises(Unsupported, match="needs Spark's default commit protocol"):
            write(df, str(dest), engine="jvm")
    finally:
        spark.conf.unset(protocol)
    assert not dest.exists()
    write(df, str(dest), mode="append", engine="jvm")  # the session has the jar now
    committer = "aiocommit.spark.DeferredManifestCommitter"
    with quiet(spark), pytest.raises(Exception, match=JOB_ID_OPTION):
        df.write.option("spark.sql.parquet.output.committer.class", committer).parquet(
            str(tmp_path / "bare")
        )


@pytest.mark.skipif(HAS_MANIFEST_COMMITTER, reason="pyspark 4 has Hadoop's ManifestCommitter")
def test_refused_where_hadoop_has_no_manifest_committer(
    spark: SparkSession, tmp_path: Path
) -> None:
    """pyspark 3.5 (Hadoop 3.3.4): engine="jvm" says why and what to use; nothing written."""
    dest = tmp_path / "out"
    with pytest.raises(Unsupported, match=r"Hadoop 3\.3\.4.*use the default engine"):
        write(frame(spark, tasks=1, rows=3), str(dest), engine="jvm")
    assert not dest.exists()


# Python UDFs without type hints (pyspark 4 would take hints for an Arrow UDF's)
def _fail_first_attempt(value):  # type: ignore[no-untyped-def]
    from pyspark import TaskContext

    context = TaskContext.get()
    if context is not None and context.attemptNumber() == 0 and value % 50 == 25:
        raise RuntimeError("attempt 0 fails on purpose")
    return value


def _always_fails(value):  # type: ignore[no-untyped-def]
    if value == 7:
        raise RuntimeError("this task fails on every attempt")
    return value


def rows_of(df: DataFrame) -> list[tuple[object, ...]]:
    return sorted(tuple(r) for r in df.select(*sorted(df.columns)).collect())


def _no_fork_bytes_written(spark: SparkSession) -> int:
    """Bytes Spark's JVM wrote through the ``aiocommitfile`` scheme (Hadoop's per-scheme
    filesystem statistics)."""
    found = spark._jvm.org.apache.hadoop.fs.FileSystem.getAllStatistics()  # type: ignore[union-attr]
    return sum(s.getBytesWritten() for s in found if s.getScheme() == "aiocommitfile")


@needs_manifest_committer
def test_local_task_files_are_written_without_chmod_children(
    spark: SparkSession, tmp_path: Path
) -> None:
    """On a local destination the tasks write through the jar's ``NoForkLocalFileSystem``
    (permissions by system call, not a ``chmod`` child process of Spark's JVM per file and
    directory); the files and directories get the permissions Spark's writer gives."""
    ensure_committer(spark)
    jvm = spark._jvm
    assert jvm is not None
    conf = jvm.org.apache.hadoop.conf.Configuration()
    for key, value in NO_FORK_OPTIONS.items():  # the mapping write(engine="jvm") gives
        conf.set(key, value)
    fs = jvm.org.apache.hadoop.fs.FileSystem.get(jvm.java.net.URI.create("aiocommitfile:///"), conf)
    permission = jvm.org.apache.hadoop.fs.permission.FsPermission
    made = tmp_path / "made"
    assert fs.mkdirs(jvm.org.apache.hadoop.fs.Path(f"aiocommitfile:{made}"), permission(0o750))
    assert made.stat().st_mode & 0o7777 == 0o750
    fs.setPermission(jvm.org.apache.hadoop.fs.Path(f"aiocommitfile:{made}"), permission(0o701))
    assert made.stat().st_mode & 0o7777 == 0o701

    before = _no_fork_bytes_written(spark)
    df = frame(spark)
    ours, theirs = tmp_path / "jvm", tmp_path / "spark"
    write(df, str(ours), mode="append", partition_by=["k"], engine="jvm")
    df.write.mode("append").partitionBy("k").parquet(str(theirs))
    assert _no_fork_bytes_written(spark) > before
    assert rows(spark, ours) == rows(spark, theirs)

    def modes(root: Path) -> set[tuple[str, int]]:
        found = {("dir", p.stat().st_mode & 0o7777) for p in root.rglob("*") if p.is_dir()}
        files = (p for p in root.rglob("*.parquet"))
        return found | {("file", p.stat().st_mode & 0o7777) for p in files}

    assert modes(ours) == modes(theirs)
    assert temporary_is_clean(ours)
