"""``write(df, dest, engine="jvm")``: Spark's own file writers do the tasks, aiocommit
commits the job, for writes of many small tasks, where a Python worker's round trip per
task costs more than the task's work.

How it runs:

* in the calling process: the save mode is checked against the destination, a job ID
  is made, and this package's jar (``aiocommit-spark.jar``: the committer
  ``aiocommit.spark.DeferredManifestCommitter``) is added to the session if it is not
  on its class path yet;
* Spark writes ``df`` with its own writer (``df.write.format(format).mode("append")``,
  the options, ``partitionBy``) through that committer: Hadoop's ManifestCommitter's task
  side (each task attempt writes into its own attempt directory; the attempt Spark's
  commit coordinator allows to commit saves ``_temporary/JOB/00/manifests/TASK-manifest.json``)
  and no job commit. Spark's own writer always runs as an append: the save mode is
  aiocommit's job commit's;
* here, after the Spark job returned: ``commit_job`` of every manifest of the job (one
  per task: only the attempt Spark allowed commits its task), with the save mode's
  conflict mode (overwrite: replace, per partition when dynamic), then ``_SUCCESS``
  and cleanup; on failure ``abort_job``, which removes ``_temporary/JOB`` with every
  attempt's files.

Needs Hadoop's ManifestCommitter in Spark's JVM (Hadoop >= 3.3.5: pyspark 4.0 and later;
pyspark 3.5 ships Hadoop 3.3.4) and a destination Spark's JVM can write (a local path, or
``abfs``/``abfss``/``gs`` with their Hadoop connectors on the class path).

``chosen_engine`` picks this engine or the Python writer for ``format("aiocommit")`` and
``write()``: the ``engine`` option (``auto``, the default, ``jvm`` or ``python``) decides;
under ``auto`` this engine runs wherever ``jvm_refusal`` finds nothing against it.
"""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import Mapping, Sequence
from importlib import resources
from typing import TYPE_CHECKING, Any

from aiocommit.errors import AiocommitError, InvalidInput, Unsupported
from aiocommit.integrations.spark import seam
from aiocommit.integrations.spark.committer import (
    abort_write,
    commit_write,
    destination_exists,
)
from aiocommit.integrations.spark.session_conf import (
    ERROR_MODES,
    all_confs,
    hadoop_session_options,
    option_text,
    qualified_path,
    session_conf,
)
from aiocommit.integrations.spark.settings import (
    JAVA_VERSION_OPTION,
    WriteSettings,
    is_commit_option,
)
from aiocommit.integrations.spark.source import qualify_on_driver, resolve_partition_columns
from aiocommit.integrations.spark.spark_jvm import SparkCondition, sparks_exception
from aiocommit.integrations.spark.text_options import COMMON_OPTIONS, CSV_OPTIONS, JSON_OPTIONS
from aiocommit.options import S3A_PREFIX
from aiocommit.protocol.ids import new_job_id

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

#: the committer class in the jar, and the write option naming its job directory
COMMITTER_CLASS = "aiocommit.spark.DeferredManifestCommitter"
JOB_ID_OPTION = "aiocommit.jvm.jobId"
JAR_NAME = "aiocommit-spark.jar"
#: the formats of Spark's own file writers
FORMATS = ("parquet", "csv", "json", "orc", "text")
#: destinations: those Spark's JVM writes through Hadoop and aiocommit commits by rename
SCHEMES = ("file", "abfs", "abfss", "gs")
#: Spark's committer settings: the Parquet writer's, then every other format's
COMMITTER_OPTIONS = (
    "spark.sql.parquet.output.committer.class",
    "spark.sql.sources.outputCommitterClass",
)
#: Spark's default commit protocol: the one that takes the committer from the options
SPARK_PROTOCOL = "org.apache.spark.sql.execution.datasources.SQLHadoopMapReduceCommitProtocol"
#: on a local destination, the tasks' work paths are under this filesystem's scheme: the
#: local filesystem setting permissions without a ``chmod`` child process per file and
#: directory (``NoForkLocalFileSystem`` in the jar)
NO_FORK_OPTIONS = {"fs.aiocommitfile.impl": "aiocommit.spark.NoForkLocalFileSystem"}
#: Hadoop's ManifestCommitter is in Hadoop 3.3.5 and later
MANIFEST_HADOOP = (3, 3, 5)

#: the option choosing the engine of ``format("aiocommit")`` and ``write()``
ENGINE_OPTION = "engine"
ENGINES = ("auto", "jvm", "python")
#: the engine of a write that does not set the option
DEFAULT_ENGINE = "auto"
#: the options of a write that Spark's own file writers honour as the Python writer
#: does (lower-cased); besides them, aiocommit's commit options and Hadoop's ``fs.s3a.*``
#: keys (the job commit's). A write with any other option runs the Python writer under
#: ``engine=auto`` (it checks the option, or honours what Spark's writer cannot)
JVM_OPTIONS = frozenset(
    (
        "path",
        "format",
        "partitionby",
        "partitionoverwritemode",
        "compression",
        "maxrecordsperfile",
        "timezone",
        ENGINE_OPTION,
        JAVA_VERSION_OPTION,
        *COMMON_OPTIONS,
        *CSV_OPTIONS,
        *JSON_OPTIONS,
    )
)
#: under ``engine=auto`` a partitioned write of at most this many tasks per core of the
#: session (``defaultParallelism``) runs the Python writer: such tasks are large, Spark's
#: writer sorts each task's rows by the partition columns, the Python writer keeps up to
#: 100 files open instead, and one Python worker round trip per task is small beside the
#: task's work
FEW_TASKS_PER_CORE = 4
#: options only the Python writer reads: the write itself ran on the JVM engine
PYTHON_ONLY = (ENGINE_OPTION, JAVA_VERSION_OPTION)

_READY: weakref.WeakKeyDictionary[Any, bool] = weakref.WeakKeyDictionary()
#: per session: whether Spark's JVM has a Hadoop filesystem for each scheme asked about
_FILESYSTEMS: weakref.WeakKeyDictionary[Any, dict[str, bool]] = weakref.WeakKeyDictionary()


def requested_engine(options: Mapping[str, str]) -> str:
    """The ``engine`` option (``DEFAULT_ENGINE`` when unset); ``InvalidInput`` for a
    value not in ``ENGINES``."""
    requested = str(options.get(ENGINE_OPTION, DEFAULT_ENGINE)).strip().lower()
    if requested not in ENGINES:
        raise InvalidInput(f"engine must be one of {', '.join(ENGINES)}, not {requested!r}")
    return requested


def chosen_engine(
    spark: SparkSession,
    dest: str | None,
    options: Mapping[str, str],
    *,
    df: DataFrame | None = None,
    partitioned: bool = False,
) -> str:
    """``"jvm"`` or ``"python"`` for a write of ``options`` (lower-cased keys, ``format``
    among them) to ``dest``. ``engine=python`` is the Python writer; ``engine=jvm`` this
    engine, or the reason it cannot write (``jvm_refusal``) raised; ``engine=auto`` this
    engine on a classic session where nothing speaks against it, else the Python
    writer; also the Python writer for a ``partitioned`` write of ``df`` in few tasks
    (``FEW_TASKS_PER_CORE``)."""
    requested = requested_engine(options)
    if requested == "python":
        return "python"
    if requested == "auto" and (dest is None or seam.jvm(spark) is None):
        # Spark Connect: the job commit would run in this client, which may not see
        # the server's filesystem; engine=jvm there is the user's call
        return "python"
    if dest is None:
        raise InvalidInput('engine="jvm" needs a destination path')
    refusal = jvm_refusal(spark, dest, options, every_option=requested == "auto")
    if refusal is not None:
        if requested == "jvm":
            raise refusal
        return "python"
    if requested == "auto" and partitioned and df is not None and _few_tasks(spark, df):
        return "python"
    return "jvm"


def _few_tasks(spark: SparkSession, df: DataFrame) -> bool:
    cores = seam.default_parallelism(spark)
    tasks = seam.task_count(df)
    return cores is not None and tasks is not None and tasks <= FEW_TASKS_PER_CORE * cores


def jvm_refusal(
    spark: SparkSession, dest: str, options: Mapping[str, str], *, every_option: bool
) -> AiocommitError | None:
    """Why this engine cannot write ``options`` (lower-cased keys) to ``dest``, as the
    error to raise; None when it can. ``every_option``: an option outside ``JVM_OPTIONS``
    (and the commit options) is a reason too."""
    fmt = str(options.get("format", "parquet")).strip().lower()
    if fmt not in FORMATS:
        return InvalidInput(f'engine="jvm" writes {", ".join(FORMATS)}, not {fmt!r}')
    scheme = dest.partition("://")[0].lower() if "://" in dest else "file"
    if scheme not in SCHEMES:
        return InvalidInput(
            f'engine="jvm" writes to {", ".join(SCHEMES)} destinations (Hadoop\'s manifest '
            f"committer, renames), not {scheme}://: use the default engine"
        )
    if every_option:
        others = sorted(k for k in options if not _jvm_honours(k))
        if others:
            return InvalidInput(
                f"Spark's own writer does not honour option(s) {', '.join(others)}: "
                'the Python writer (engine="python") writes them'
            )
    protocol = session_conf(spark, "spark.sql.sources.commitProtocolClass") or SPARK_PROTOCOL
    if protocol != SPARK_PROTOCOL:  # another protocol ignores the committer option
        return Unsupported(
            f'engine="jvm" needs Spark\'s default commit protocol ({SPARK_PROTOCOL}), '
            f"not spark.sql.sources.commitProtocolClass={protocol}"
        )
    version = _hadoop_version(spark)
    if version is not None and version < MANIFEST_HADOOP:
        have = ".".join(map(str, version))
        return Unsupported(
            f'engine="jvm" needs Hadoop\'s ManifestCommitter (Hadoop >= 3.3.5, pyspark '
            f">= 4.0); this Spark has Hadoop {have} (pyspark {seam.VERSION}): use the "
            "default engine"
        )
    if scheme != "file" and not _has_filesystem(spark, scheme):
        return InvalidInput(
            f'engine="jvm" needs a Hadoop connector for {scheme}:// on Spark\'s class '
            "path (none is): use the default engine"
        )
    if seam.jvm(spark) is None and not seam.class_loadable(spark, COMMITTER_CLASS):
        return Unsupported(
            f"{COMMITTER_CLASS} is not on the Spark Connect server's class path: start "
            f"the server with spark.jars={jar_path()} (aiocommit.integrations.spark."
            "jvm_engine.jar_path())"
        )
    return None


def _jvm_honours(key: str) -> bool:
    return (
        key in JVM_OPTIONS
        or key.removeprefix("spark.hadoop.").startswith(S3A_PREFIX)
        or is_commit_option(key)
    )


def _has_filesystem(spark: SparkSession, scheme: str) -> bool:
    known = _FILESYSTEMS.setdefault(spark, {})
    if scheme not in known:
        known[scheme] = seam.hadoop_has_filesystem(spark, scheme)
    return known[scheme]


def jar_path() -> str:
    """The jar with the committer, for ``spark.jars`` (a cluster's executors need it on
    their class path; ``write(..., engine="jvm")`` adds it to a running local session)."""
    return str(resources.files("aiocommit.integrations.spark") / JAR_NAME)


def write_jvm(
    df: DataFrame,
    dest: str,
    *,
    format: str,
    mode: str,
    partition_by: Sequence[str],
    options: Mapping[str, Any],
) -> None:
    """See the module docstring; ``write()`` checks ``mode`` and calls this."""
    fmt = format.strip().lower()
    spark = df.sparkSession
    refusal = jvm_refusal(spark, dest, {"format": fmt}, every_option=False)
    if refusal is not None:
        raise refusal
    resolve_partition_columns(df.schema, tuple(partition_by))  # the Python writer's check
    given = {
        str(k): option_text(v) for k, v in options.items() if str(k).lower() not in PYTHON_ONLY
    }
    ours = {k.lower(): v for k, v in given.items() if _is_ours(k.lower())}
    theirs = {k: v for k, v in given.items() if not _is_ours(k.lower())}
    ours.update(hadoop_session_options(all_confs(spark), ours))
    ours.setdefault("partitionoverwritemode", _session_overwrite_mode(spark))
    settings = WriteSettings.from_options(
        {**ours, "path": qualify_on_driver(dest), "partitionby": ",".join(partition_by)}
    )
    checked = mode in ERROR_MODES or mode == "ignore"
    if checked and asyncio.run(destination_exists(settings)):
        if mode == "ignore":
            return
        found = SparkCondition("PATH_ALREADY_EXISTS", {"outputPath": qualified_path(dest)})
        raise sparks_exception(spark, found)
    ensure_committer(spark)
    overwrite = mode == "overwrite"
    job_id = new_job_id()
    writer = df.write.format(fmt).mode("append").options(**theirs)
    for key in COMMITTER_OPTIONS:
        writer = writer.option(key, COMMITTER_CLASS)
    writer = writer.option(JOB_ID_OPTION, job_id)
    if "://" not in dest or dest.lower().startswith("file:"):
        writer = writer.options(**NO_FORK_OPTIONS)
    if partition_by:
        writer = writer.partitionBy(*partition_by)
    try:
        writer.save(settings.url)
        asyncio.run(commit_write(settings, job_id, overwrite, None))
    except BaseException:
        asyncio.run(abort_write(settings, job_id, overwrite))
        raise


def _is_ours(key: str) -> bool:
    """Options aiocommit's job commit takes (not passed to Spark's writer)."""
    return key == "partitionoverwritemode" or is_commit_option(key)


def _session_overwrite_mode(spark: SparkSession) -> str:
    return session_conf(spark, "spark.sql.sources.partitionOverwriteMode") or "static"


def ensure_committer(spark: SparkSession) -> None:
    """Make the committer loadable by the session's write: check Hadoop has the
    ManifestCommitter; on a classic session add the jar to the driver's class loader
    and to the executors (``SparkContext.addJar``) unless it is there already; a Spark
    Connect server needs the jar in its ``spark.jars``. ``Unsupported`` says why not."""
    if _READY.get(spark):
        return
    loadable = seam.class_loadable(spark, COMMITTER_CLASS)
    if not loadable and not seam.add_jar(spark, jar_path()):
        raise Unsupported(
            f"{COMMITTER_CLASS} is not on the Spark Connect server's class path: start "
            f"the server with spark.jars={jar_path()} (aiocommit.integrations.spark."
            "jvm_engine.jar_path())"
        )
    _READY[spark] = True


def _hadoop_version(spark: SparkSession) -> tuple[int, ...] | None:
    text = seam.hadoop_version(spark)
    if not text:
        return None
    numbers = []
    for part in text.split("-")[0].split(".")[:3]:
        if not part.isdigit():
            break
        numbers.append(int(part))
    return tuple(numbers) or None
