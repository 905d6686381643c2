"""The ``aiocommit`` Python data source: ``df.write.format("aiocommit").save(url)``.

Where each method runs (pyspark 4, see ``docs/spark.md``):

* ``AiocommitDataSource.writer(schema, overwrite)``: once, in a Python worker of the
  driver. It parses the options, creates the job ID and runs ``setup_job``. The writer
  it returns is pickled once; every task and ``commit()``/``abort()`` get a copy, so they
  all see the same job ID.
* ``AiocommitWriter.write(batches)``: once per task attempt, on an executor. It writes
  the attempt's files locally and uploads them into its own task attempt directory (for
  a local destination it writes them there directly), runs ``commit_task`` and returns
  an ``AiocommitCommitMessage`` naming its manifest.
* ``commit(messages)`` / ``abort(messages)``: on the driver host after every partition
  has one successful attempt / after the job (or ``commit()``) failed.
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
import shutil
import tempfile
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING

from pyspark import TaskContext
from pyspark.sql.types import (
    ArrayType,
    BooleanType,
    ByteType,
    CharType,
    DataType,
    DateType,
    DayTimeIntervalType,
    DecimalType,
    DoubleType,
    FloatType,
    IntegerType,
    LongType,
    MapType,
    ShortType,
    StringType,
    StructType,
    TimestampNTZType,
    TimestampType,
    VarcharType,
    YearMonthIntervalType,
)

from aiocommit.errors import InvalidInput
from aiocommit.integrations.spark import seam
from aiocommit.integrations.spark.committer import (
    abort_write,
    close_task_attempt,
    commit_task_files,
    commit_write,
    destination_exists,
    open_task_attempt,
    prepare_job,
)
from aiocommit.integrations.spark.files import TaskOutput
from aiocommit.integrations.spark.schema import (
    data_schema,
    floor_to_millis,
    parquet_metadata,
    parquet_writer_options,
    sparks_refusal,
)
from aiocommit.integrations.spark.seam import (
    CalendarIntervalType,
    DataSource,
    DataSourceArrowWriter,
    DataSourceStreamWriter,
    VariantType,
    WriterCommitMessage,
    arrow_schema,
)
from aiocommit.integrations.spark.settings import (
    STREAM_APPEND_ONLY,
    TABLE_WRITES_REFUSED,
    WriteSettings,
)
from aiocommit.integrations.spark.streaming import prepare_stream_batch, stream_position
from aiocommit.integrations.task_loop import run_in_task_loop
from aiocommit.protocol.ids import new_job_id

if TYPE_CHECKING:
    import pyarrow as pa

PARTITION_TYPES = (
    StringType,
    CharType,
    VarcharType,
    BooleanType,
    ByteType,
    ShortType,
    IntegerType,
    LongType,
    FloatType,
    DoubleType,
    DecimalType,
    DateType,
    TimestampType,
    TimestampNTZType,
)


@dataclass
class AiocommitCommitMessage(WriterCommitMessage):
    """What one successful task attempt tells the driver: small, whatever it wrote."""

    partition: int
    attempt_number: int
    spark_task_attempt_id: int
    task_id: str
    task_attempt_id: str
    manifest: str  # file name in the job's manifests directory
    files: int
    bytes: int
    rows: int
    partitions: tuple[str, ...]  # partition directories written, relative to the destination
    job_id: str = ""  # the job the attempt wrote into (a stream's commit() takes it from here)


class AiocommitDataSource(DataSource):
    """Register with ``aiocommit.integrations.spark.register(spark)``, then write with
    ``df.write.format("aiocommit").save(url)`` in any save mode. A bare
    ``spark.dataSource.register(AiocommitDataSource)`` registers the source only: then
    Spark's Python data source limits apply (append/overwrite, the ``partitionBy``
    option, no session confs; see ``dataframe_writer``)."""

    @classmethod
    def name(cls) -> str:
        return "aiocommit"

    def streamWriter(self, schema: StructType, overwrite: bool) -> AiocommitStreamWriter:
        """Before each micro-batch's tasks (and again to commit it): the batch's job,
        derived from the query's ID and the batch ID (``streaming``). Append only."""
        if overwrite:
            raise InvalidInput(STREAM_APPEND_ONLY)
        settings = self._settings(schema)
        if seam.in_stream_commit():  # commit() takes the job from the messages
            return AiocommitStreamWriter(settings, "", schema, False)
        checkpoint = self.options.get("checkpointlocation")
        if not checkpoint:
            raise InvalidInput("writeStream.format('aiocommit') needs a checkpointLocation")
        query_id, batch_id = asyncio.run(stream_position(checkpoint))
        job_id, committed = asyncio.run(prepare_stream_batch(settings, query_id, batch_id))
        return AiocommitStreamWriter(settings, job_id, schema, False, skip=committed)

    def writer(self, schema: StructType, overwrite: bool) -> AiocommitWriter:
        settings = self._settings(schema)
        job_id = new_job_id()
        if settings.save_mode and asyncio.run(destination_exists(settings)):
            if settings.save_mode == "errorifexists":
                raise FileExistsError(
                    f"[PATH_ALREADY_EXISTS] {settings.url} already exists: use "
                    'mode("append"), mode("overwrite") or mode("ignore")'
                )
            return AiocommitWriter(settings, job_id, schema, overwrite, skip=True)
        asyncio.run(prepare_job(settings, job_id))
        return AiocommitWriter(settings, job_id, schema, overwrite)

    def _settings(self, schema: StructType) -> WriteSettings:
        """The write's settings from the options, checked against the schema."""
        if not self.options.get("path"):  # raised here: a one-frame traceback in Spark's error
            raise InvalidInput(TABLE_WRITES_REFUSED)
        settings = WriteSettings.from_options(dict(self.options.items()))
        settings = dataclasses.replace(
            settings,
            url=qualify_on_driver(settings.url),
            partition_by=resolve_partition_columns(schema, settings.partition_by),
            partition_names=settings.partition_by,
        )
        refusal = sparks_refusal(
            schema, settings.format, settings.partition_by, case_sensitive=settings.case_sensitive
        )
        if refusal is not None:  # what Spark's own writer refuses (register() raises Spark's)
            raise ValueError(refusal.message())
        check_types(schema, settings)
        return with_interval_columns(schema, settings)


def qualify_on_driver(url: str) -> str:
    """A relative local path made absolute against the driver's working directory (the
    driver JVM's, which its Python workers inherit), as Spark qualifies its own paths:
    executors run elsewhere (a worker's ``app-*/N/`` directory on a cluster)."""
    if "://" in url or url.startswith("file:") or os.path.isabs(url):
        return url
    return os.path.abspath(url)


#: formats whose files hold only flat, textual columns (Spark's CSV writer refuses
#: struct, array, map and variant columns; it writes binary as ``[00 61 62]``, and so do we)
FLAT_FORMATS = ("csv",)


def _types(name: str, data_type: DataType) -> Iterator[tuple[str, DataType]]:
    """(column path, type) of a column and of every type nested in it."""
    yield name, data_type
    if isinstance(data_type, StructType):
        for field in data_type.fields:
            yield from _types(f"{name}.{field.name}", field.dataType)
    elif isinstance(data_type, ArrayType):
        yield from _types(f"{name}[]", data_type.elementType)
    elif isinstance(data_type, MapType):
        yield from _types(f"{name}{{key}}", data_type.keyType)
        yield from _types(f"{name}{{value}}", data_type.valueType)


def check_types(schema: StructType, settings: WriteSettings) -> None:
    """``TypeError`` before any task runs for a column the format cannot hold, or that
    pyspark's Arrow transfer to a Python data source cannot carry, naming the column and
    the cast that writes it."""
    for field in schema.fields:
        for path, data_type in _types(field.name, field.dataType):
            kind = data_type.simpleString()
            if isinstance(data_type, YearMonthIntervalType | CalendarIntervalType):
                raise TypeError(
                    f"column {path!r} has type {kind}, which pyspark's Arrow transfer to a "
                    "Python data source cannot carry: cast it first, e.g. "
                    f"df.withColumn({field.name!r}, col({field.name!r}).cast('string')) "
                    "(the text Spark's CSV/JSON writers write)"
                )
            if isinstance(data_type, VariantType) and settings.text.pretty:
                raise TypeError(
                    f"column {path!r} is a variant: aiocommit does not write variants with "
                    "JSON's pretty option; leave pretty out, or cast it to a string first "
                    f"(to_json({field.name}))"
                )
            nested = path != field.name
            if (
                isinstance(data_type, DayTimeIntervalType)
                and settings.format != "parquet"
                and (nested)
            ):
                raise TypeError(
                    f"column {path!r} has type {kind} inside {field.name!r}: aiocommit writes "
                    f"top-level intervals only as {settings.format.upper()}; cast it to a "
                    f"string first, e.g. df.withColumn({field.name!r}, "
                    f"col({field.name!r}).cast('string')), which is the text Spark's own "
                    "writer writes (INTERVAL '1 00:00:00' DAY TO SECOND)"
                )
    if settings.format in FLAT_FORMATS:
        for field in schema.fields:
            if isinstance(field.dataType, StructType | ArrayType | MapType | VariantType):
                raise TypeError(
                    f"{settings.format.upper()} cannot hold column {field.name!r} of type "
                    f"{field.dataType.simpleString()}, as Spark's CSV writer cannot: use parquet "
                    "or json, or convert the column to a string first"
                )
    try:
        arrow_schema(schema)
    except Exception as error:
        raise TypeError(f"cannot write this schema as {settings.format}: {error}") from None


def with_interval_columns(schema: StructType, settings: WriteSettings) -> WriteSettings:
    """``settings`` with the CSV/JSON writer told the DAY/HOUR/MINUTE/SECOND fields of the
    top-level day-time interval columns, which Spark's Arrow batches do not carry."""
    if settings.format == "parquet":
        return settings
    intervals = tuple(
        (f.name, f.dataType.startField, f.dataType.endField)
        for f in schema.fields
        if isinstance(f.dataType, DayTimeIntervalType) and f.name not in settings.partition_by
    )
    if not intervals:
        return settings
    return dataclasses.replace(
        settings, text=dataclasses.replace(settings.text, intervals=intervals)
    )


def resolve_partition_columns(schema: StructType, names: tuple[str, ...]) -> tuple[str, ...]:
    """The schema's spelling of each ``partitionBy`` column (matched case-insensitively,
    as Spark does); ``ValueError`` for a missing or unsupported column."""
    by_lower = {f.name.lower(): f for f in schema.fields}
    resolved: list[str] = []
    for name in names:
        field = by_lower.get(name.lower())
        if field is None:
            raise ValueError(
                f"partitionBy column {name!r} is not in the schema ({', '.join(schema.names)})"
            )
        if not _partitionable(field.dataType):
            raise ValueError(
                f"cannot partition by {field.name!r} of type {field.dataType.simpleString()}"
            )
        resolved.append(field.name)
    if resolved and len(resolved) == len(schema.fields):
        raise ValueError("cannot use all columns for partitioning: no data columns would remain")
    return tuple(resolved)


def _partitionable(data_type: DataType) -> bool:
    return isinstance(data_type, PARTITION_TYPES)


def _local_root(settings: WriteSettings) -> str | None:
    if settings.local_dir:
        return settings.local_dir
    spark_dirs = os.environ.get("SPARK_LOCAL_DIRS", "")
    first = spark_dirs.split(",")[0].strip()
    return first or None


class AiocommitWriter(DataSourceArrowWriter):
    def __init__(
        self,
        settings: WriteSettings,
        job_id: str,
        schema: StructType,
        overwrite: bool,
        *,
        skip: bool = False,
    ) -> None:
        self.settings = settings
        self.job_id = job_id
        self.schema = schema
        self.overwrite = overwrite
        #: mode("ignore") on an existing destination: write and commit nothing
        self.skip = skip

    def _arrow_schema(self) -> pa.Schema:
        data = StructType(
            [f for f in self.schema.fields if f.name not in self.settings.partition_by]
        )
        return arrow_schema(data)

    def _text_schema(self) -> pa.Schema | None:
        """For JSON: the data columns' Arrow form from the Spark schema (it marks variant
        columns, which Spark's Arrow batches do not)."""
        if self.settings.format != "json":
            return None
        return arrow_schema(data_schema(self.schema, self.settings.partition_by))

    def write(self, iterator: Iterator[pa.RecordBatch]) -> AiocommitCommitMessage:
        context = TaskContext.get()
        partition = context.partitionId() if context is not None else 0
        attempt_number = context.attemptNumber() if context is not None else 0
        spark_attempt = context.taskAttemptId() if context is not None else 0
        if self.skip:
            for _ in iterator:  # Spark sends the rows anyway; nothing is written
                pass
            return AiocommitCommitMessage(
                partition, attempt_number, spark_attempt, "", "", "", 0, 0, 0, ()
            )
        settings = self.settings
        core = self.job_id[len("job_") :] if self.job_id.startswith("job_") else self.job_id
        opened = run_in_task_loop(
            partial(
                open_task_attempt,
                settings,
                self.job_id,
                partition=partition,
                attempt_number=attempt_number,
            )
        )
        attempt_dir = opened.in_place_dir
        # local files (or, writing in place, only a spill) go here: made when first needed
        local_dir = os.path.join(
            _local_root(settings) or tempfile.gettempdir(),
            f"aiocommit-{partition}-{spark_attempt}-{uuid.uuid4().hex[:16]}",
        )
        try:
            if attempt_dir is None:
                os.makedirs(local_dir)
            output = TaskOutput(
                fmt=settings.format,
                compression=settings.compression,
                row_group_size=settings.row_group_size,
                text_options=settings.text,
                text_schema=self._text_schema(),
                local_dir=attempt_dir or local_dir,
                scratch_dir=local_dir,
                in_place=attempt_dir is not None,
                base_name=f"part-{partition:05d}-{core}-{spark_attempt}",
                partition_by=settings.partition_by,
                partition_names=settings.partition_names,
                max_records_per_file=settings.max_records_per_file,
                parquet_metadata=parquet_metadata(self.schema, settings.partition_by),
                parquet_writer_options=parquet_writer_options(
                    self.schema, settings.partition_by, settings.timestamp_type
                ),
            )
            try:
                if settings.format == "parquet" and settings.timestamp_type == "TIMESTAMP_MILLIS":
                    iterator = floor_to_millis(iterator)
                kill = settings.hooks.kill_first_attempts and attempt_number == 0
                for number, batch in enumerate(iterator, 1):
                    output.add(batch)
                    if kill and number == 2:
                        os._exit(1)  # TEST-ONLY (settings.TestHooks): a killed attempt
                if output.rows == 0 and partition == 0 and not settings.partition_by:
                    output.write_empty(self._arrow_schema())
                files = output.close()
            except BaseException:
                output.abandon()
                raise
            outcome = run_in_task_loop(
                partial(
                    commit_task_files,
                    settings,
                    opened,
                    partition=partition,
                    attempt_number=attempt_number,
                    files=files,
                )
            )
        finally:
            run_in_task_loop(close_task_attempt, opened)
            if os.path.lexists(local_dir):
                shutil.rmtree(local_dir, ignore_errors=True)
        return AiocommitCommitMessage(
            partition=partition,
            attempt_number=attempt_number,
            spark_task_attempt_id=spark_attempt,
            task_id=outcome.task_id,
            task_attempt_id=outcome.task_attempt_id,
            manifest=outcome.manifest,
            files=outcome.files,
            bytes=outcome.bytes,
            rows=outcome.rows,
            partitions=outcome.partitions,
            job_id=self.job_id,
        )

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        if self.skip:
            return
        results: list[AiocommitCommitMessage] = []
        for index, message in enumerate(messages):
            if not isinstance(message, AiocommitCommitMessage):
                raise RuntimeError(
                    f"commit() got {type(message).__name__} for partition {index}, "
                    "not an AiocommitCommitMessage"
                )
            results.append(message)
        asyncio.run(commit_write(self.settings, self.job_id, self.overwrite, results))

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        # the messages are incomplete after a failure: clean up by the job's prefix
        if self.skip:
            return
        asyncio.run(abort_write(self.settings, self.job_id, self.overwrite))


class AiocommitStreamWriter(AiocommitWriter, DataSourceStreamWriter):
    """One micro-batch: the tasks write as a batch write does (``AiocommitWriter``);
    ``commit(messages, batch_id)`` commits the batch's job, named in the messages."""

    def commit(  # type: ignore[override]
        self, messages: list[WriterCommitMessage | None], batchId: int
    ) -> None:
        results = [m for m in messages if isinstance(m, AiocommitCommitMessage)]
        if len(results) != len(messages):
            raise RuntimeError(f"commit() of batch {batchId} got a message that is not aiocommit's")
        jobs = {m.job_id for m in results}
        if jobs == {""} or not jobs:  # replayed after its commit: nothing was written
            return
        if len(jobs) != 1:
            raise RuntimeError(f"batch {batchId}'s tasks wrote into several jobs: {sorted(jobs)}")
        asyncio.run(commit_write(self.settings, jobs.pop(), False, results))

    def abort(  # type: ignore[override]
        self, messages: list[WriterCommitMessage | None], batchId: int
    ) -> None:
        jobs = {m.job_id for m in messages if isinstance(m, AiocommitCommitMessage) and m.job_id}
        for job_id in sorted(jobs):  # the rest is aborted before the batch runs again
            asyncio.run(abort_write(self.settings, job_id, False))
