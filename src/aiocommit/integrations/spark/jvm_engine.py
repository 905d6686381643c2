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
"""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import Mapping, Sequence
from importlib import resources
from typing import TYPE_CHECKING, Any

from aiocommit.integrations.spark import seam
from aiocommit.integrations.spark.committer import (
    abort_write,
    commit_write,
    destination_exists,
)
from aiocommit.integrations.spark.dataframe_writer import (
    ERROR_MODES,
    option_text,
    session_conf,
)
from aiocommit.integrations.spark.settings import WriteSettings, is_commit_option
from aiocommit.integrations.spark.source import qualify_on_driver
from aiocommit.integrations.spark.spark_jvm import SparkCondition, sparks_exception
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

_READY: weakref.WeakKeyDictionary[Any, bool] = weakref.WeakKeyDictionary()


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
    if fmt not in FORMATS:
        raise ValueError(f'engine="jvm" writes {", ".join(FORMATS)}, not {format!r}')
    scheme = dest.partition("://")[0].lower() if "://" in dest else "file"
    if scheme not in SCHEMES:
        raise ValueError(
            f'engine="jvm" writes to {", ".join(SCHEMES)} destinations (Hadoop\'s manifest '
            f"committer, renames), not {scheme}://: use the default engine"
        )
    spark = df.sparkSession
    given = {str(k): option_text(v) for k, v in options.items()}
    ours = {k.lower(): v for k, v in given.items() if _is_ours(k.lower())}
    theirs = {k: v for k, v in given.items() if not _is_ours(k.lower())}
    ours.setdefault("partitionoverwritemode", _session_overwrite_mode(spark))
    settings = WriteSettings.from_options(
        {**ours, "path": qualify_on_driver(dest), "partitionby": ",".join(partition_by)}
    )
    checked = mode in ERROR_MODES or mode == "ignore"
    if checked and asyncio.run(destination_exists(settings)):
        if mode == "ignore":
            return
        found = SparkCondition("PATH_ALREADY_EXISTS", {"outputPath": settings.url})
        raise sparks_exception(spark, found)
    protocol = session_conf(spark, "spark.sql.sources.commitProtocolClass") or SPARK_PROTOCOL
    if protocol != SPARK_PROTOCOL:  # another protocol ignores the committer option
        raise RuntimeError(
            f'engine="jvm" needs Spark\'s default commit protocol ({SPARK_PROTOCOL}), '
            f"not spark.sql.sources.commitProtocolClass={protocol}"
        )
    ensure_committer(spark)
    overwrite = mode == "overwrite"
    job_id = new_job_id()
    writer = df.write.format(fmt).mode("append").options(**theirs)
    for key in COMMITTER_OPTIONS:
        writer = writer.option(key, COMMITTER_CLASS)
    writer = writer.option(JOB_ID_OPTION, job_id)
    if scheme == "file":
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
    Connect server needs the jar in its ``spark.jars``. ``RuntimeError`` says why not."""
    if _READY.get(spark):
        return
    version = _hadoop_version(spark)
    if version is not None and version < MANIFEST_HADOOP:
        have = ".".join(map(str, version))
        raise RuntimeError(
            f'engine="jvm" needs Hadoop\'s ManifestCommitter (Hadoop >= 3.3.5, pyspark '
            f">= 4.0); this Spark has Hadoop {have} (pyspark {seam.VERSION}): use the "
            "default engine"
        )
    loadable = seam.class_loadable(spark, COMMITTER_CLASS)
    if not loadable and not seam.add_jar(spark, jar_path()):
        raise RuntimeError(
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
