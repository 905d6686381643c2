"""``write(df, dest, ...)``: an aiocommit write without Spark's Python data source API
(pyspark >= 3.5), built on ``DataFrame.mapInArrow``.

How it runs, and why it is exactly once:

* in the calling process: the options are parsed, the job is set up and the writer made
  by the same ``AiocommitDataSource.writer()`` that ``format("aiocommit")`` uses;
* each task runs that writer's ``write(batches)`` in ``mapInArrow``: it writes its files
  into its own task attempt directory, commits the task (its manifest, named after the
  attempt) and returns its commit message as one row;
* ``collect()`` returns the rows of exactly one successful attempt per partition: Spark
  keeps the first successful attempt's result and drops every other (failed attempts,
  retries that lost, speculative copies that finished second). A failed or killed
  attempt returns nothing, whatever files it left;
* the writer's ``commit(messages)`` commits exactly the manifests those rows name, then
  removes the job's ``_temporary`` directory, with every other attempt's files in it;
  on failure ``abort()`` removes the job by its prefix, as with ``format("aiocommit")``.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import dataclasses
import json
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, nullcontext
from typing import TYPE_CHECKING, Any, TypeVar

from aiocommit.integrations.spark import seam
from aiocommit.integrations.spark.dataframe_writer import session_options
from aiocommit.integrations.spark.jvm_engine import chosen_engine, write_jvm
from aiocommit.integrations.spark.session_conf import ERROR_MODES, option_text, qualified_path
from aiocommit.integrations.spark.settings import SAVE_MODE_OPTION
from aiocommit.integrations.spark.source import (
    AiocommitCommitMessage,
    AiocommitDataSource,
    AiocommitWriter,
)
from aiocommit.integrations.spark.spark_jvm import SparkCondition, sparks_exception
from aiocommit.integrations.spark.transfer import lifted_arrow_byte_cap

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import DataFrame

T = TypeVar("T")

#: what each task returns: its partition and its commit message as JSON
MESSAGE_SCHEMA = "partition INT, message STRING"
MODES = ("append", "overwrite", "ignore", *ERROR_MODES)

Batches = Iterator["pa.RecordBatch"]


def write(
    df: DataFrame,
    dest: str,
    *,
    format: str = "parquet",
    mode: str = "errorifexists",
    partition_by: str | Sequence[str] = (),
    options: Mapping[str, Any] | None = None,
    engine: str | None = None,
) -> None:
    """Write ``df`` to ``dest`` through aiocommit's committer, as
    ``df.write.format("aiocommit").option("format", format).mode(mode)
    .partitionBy(*partition_by).options(**options).save(dest)`` does on pyspark 4, with
    the same files, partition directories, save modes, options and guarantees; on
    pyspark 3.5 and 4.x, classic or Spark Connect. For an existing
    ``dest`` in mode ``errorifexists``: Spark's ``AnalysisException``
    ``PATH_ALREADY_EXISTS``.

    ``engine="jvm"`` (pyspark >= 4.0): Spark's own file writer (``format``: parquet,
    csv, json, orc, text; ``options``: Spark's writer options, and aiocommit's commit
    options) writes the tasks' files, and aiocommit commits the job
    (``jvm_engine``): much faster for many small tasks, no Python worker per task.
    ``engine="auto"`` (the default, ``jvm_engine.DEFAULT_ENGINE``) runs it wherever it
    can write the destination and the options (``jvm_engine.chosen_engine``), else the
    Python writer; ``"python"`` always the Python writer."""
    mode = (mode or "errorifexists").strip().lower()
    if mode not in MODES:
        raise ValueError(f"mode must be one of {', '.join(MODES)}, not {mode!r}")
    columns = [partition_by] if isinstance(partition_by, str) else list(partition_by)
    given = {str(k).lower(): option_text(v) for k, v in (options or {}).items()}
    asked = {**given, "format": format}
    if engine is not None:
        asked["engine"] = engine
    chosen = chosen_engine(df.sparkSession, dest, asked, df=df, partitioned=bool(columns))
    if chosen == "jvm":
        write_jvm(df, dest, format=format, mode=mode, partition_by=columns, options=options or {})
        return
    given.pop("engine", None)
    given["path"] = dest
    given.setdefault("format", format)
    if columns:
        given["partitionby"] = ",".join(columns)
    spark = df.sparkSession
    given.update(session_options(spark, given))
    if mode in ERROR_MODES or mode == "ignore":
        given[SAVE_MODE_OPTION] = "ignore" if mode == "ignore" else "errorifexists"
    overwrite = mode == "overwrite"
    try:
        writer = _on_driver(lambda: AiocommitDataSource(given).writer(df.schema, overwrite))
    except FileExistsError:  # Spark's own error, as df.write.parquet raises it
        found = SparkCondition("PATH_ALREADY_EXISTS", {"outputPath": qualified_path(dest)})
        raise sparks_exception(spark, found) from None
    if writer.skip:  # mode("ignore") on an existing destination
        return
    try:
        # Spark >= 4.0 checks each row's Arrow batch size (transfer.py); 3.5 does not
        lifted: AbstractContextManager[object] = (
            lifted_arrow_byte_cap(spark) if seam.HAS_DATA_SOURCES else nullcontext()
        )
        with lifted:
            rows = df.mapInArrow(_task(writer), MESSAGE_SCHEMA).collect()
        messages = accepted_messages((row[0], row[1]) for row in rows)
    except BaseException:
        _on_driver(lambda: writer.abort([]))
        raise
    try:
        _on_driver(lambda: writer.commit(list(messages)))
    except BaseException:
        _on_driver(lambda: writer.abort(list(messages)))
        raise


def _task(writer: AiocommitWriter) -> Callable[[Batches], Batches]:
    """The function each task runs: write the partition, yield its commit message."""

    def run(batches: Batches) -> Batches:
        import pyarrow as pa

        message = writer.write(batches)
        text = json.dumps(dataclasses.asdict(message))
        yield pa.RecordBatch.from_pydict(
            {"partition": [message.partition], "message": [text]},
            schema=pa.schema([("partition", pa.int32()), ("message", pa.string())]),
        )

    return run


def accepted_messages(rows: Iterator[tuple[int, str]]) -> list[AiocommitCommitMessage]:
    """The commit messages of the collected rows, by partition; ``RuntimeError`` if a
    partition came twice (Spark returns one result per partition)."""
    messages: dict[int, AiocommitCommitMessage] = {}
    for partition, text in rows:
        fields = json.loads(text)
        fields["partitions"] = tuple(fields["partitions"])
        message = AiocommitCommitMessage(**fields)
        if partition in messages or message.partition != partition:
            raise RuntimeError(f"two commit messages for partition {partition}")
        messages[partition] = message
    return [messages[p] for p in sorted(messages)]


def _on_driver(call: Callable[[], T]) -> T:
    """Run a driver-side step (it runs its own event loop) here, or in a thread when
    this thread already runs one (a notebook, an async service)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return call()
    with concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="aiocommit-driver") as pool:
        return pool.submit(call).result()
