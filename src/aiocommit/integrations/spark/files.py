"""Task side: turn Arrow batches into Parquet, CSV or JSON-lines files, split into
Hive-style partition directories, with Spark's file count and names.

File count, as Spark's writer: one file per partition directory per task (Spark sorts a
task's rows by the partition columns and keeps one file open), split after
``maxRecordsPerFile`` rows into ``-c000``, ``-c001``, ... Here up to ``MAX_OPEN_FILES``
partitions are written as their rows arrive; rows of further partitions go to an
uncompressed Arrow spill file on local disk, which ``close`` sorts by partition and writes
out one file at a time. Either way each partition gets exactly one file (per
``maxRecordsPerFile`` rows).

Files are written into ``local_dir``: a private scratch directory whose closed files the
caller uploads (``store.upload_file``), or, for a local destination, the task attempt
directory itself, so nothing is copied (``LocalFile.in_place``). Why local files and not
bytes in memory: a task's output can be far larger than its memory, and a local file
streams to the store with the store's own multipart/resumable upload.

Parquet: Spark's schema JSON in the footer (``org.apache.spark.sql.parquet.row.metadata``,
so Spark reads back exactly the types it wrote: char/varchar, intervals); batches (Spark
hands over ``spark.sql.execution.arrow.maxRecordsPerBatch`` rows, 10 000 by default) are
buffered into row groups of up to ``ROW_GROUP_BYTES`` of Arrow data (Spark's
``parquet.block.size``, 128 MB, counts encoded bytes) or ``rowGroupSize`` rows, and at most
``TASK_BUFFER_BYTES`` per task. A task encodes its row groups on a thread of its own
(``Encoder``; pyarrow releases the GIL), so it keeps reading the next batches from Spark
while a row group is encoded, where Spark's own writer encodes as it goes.
"""

from __future__ import annotations

import decimal
import os
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Protocol

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from aiocommit.integrations.spark import seam
from aiocommit.integrations.spark.paths import partition_path_string
from aiocommit.integrations.spark.settings import ROW_GROUP_BYTES, TASK_BUFFER_BYTES
from aiocommit.integrations.spark.text_compression import open_text, text_extension
from aiocommit.integrations.spark.text_formats import CsvSink, JsonSink, python_values
from aiocommit.integrations.spark.text_options import TextOptions
from aiocommit.integrations.spark.values import (
    date_string,
    java_float_string,
    partition_timestamp,
    plain_decimal,
    zone,
)

#: partitions a task writes as their rows arrive; rows of more are spilled and sorted
MAX_OPEN_FILES = 100

#: buffered batches averaging fewer rows are combined into one chunk before encoding
SMALL_CHUNK_ROWS = 2_000

#: the footer key Spark's Parquet reader takes the schema from
SPARK_ROW_METADATA = "org.apache.spark.sql.parquet.row.metadata"
SPARK_VERSION_METADATA = "org.apache.spark.version"

#: Parquet codec name -> Spark's file name infix (parquet-java's CompressionCodecName)
PARQUET_EXTENSIONS = {
    "snappy": ".snappy",
    "gzip": ".gz",
    "zstd": ".zstd",
    "lz4": ".lz4hadoop",
    "brotli": ".br",
}

_PARTITION_COLUMN = "__aiocommit_partition"


@dataclass
class LocalFile:
    """One finished output file of a task, on local disk."""

    relative: str  # path below the destination, e.g. "k=a/part-00000-...-c000.snappy.parquet"
    partition: str  # its partition directory below the destination ("" when unpartitioned)
    local_path: str
    rows: int = 0
    size: int = 0
    in_place: bool = False  # written straight into the task attempt directory: no upload


class _Sink(Protocol):
    rows: int
    buffered_bytes: int

    def add(self, batch: pa.RecordBatch, nbytes: int | None = None) -> None:
        """``nbytes``: the batch's Arrow size if the caller knows it (slices are slow
        to measure)."""

    def flush(self) -> None: ...

    def close(self) -> None: ...


class Encoder:
    """Runs a task's Parquet encoding jobs on one background thread, in the order
    given, at most one at a time: ``submit`` first waits for the previous job, so a
    task holds at most one row group in encoding besides the batches it buffers. A
    job's failure is raised by the next ``submit`` or ``wait``."""

    def __init__(self) -> None:
        self._pool: ThreadPoolExecutor | None = None
        self._pending: Future[None] | None = None
        #: Arrow bytes of the row group being encoded (counted in the task's buffer bound)
        self.pending_bytes = 0

    def submit(self, job: Callable[[], None], nbytes: int = 0) -> None:
        self.wait()
        if self._pool is None:
            self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="aiocommit-encode")
        self._pending = self._pool.submit(job)
        self.pending_bytes = nbytes

    def wait(self) -> None:
        """Until the submitted job has finished; raises its error."""
        pending, self._pending = self._pending, None
        self.pending_bytes = 0
        if pending is not None:
            pending.result()

    def shutdown(self) -> None:
        """Wait for the job in hand (raising its error) and stop the thread."""
        try:
            self.wait()
        finally:
            if self._pool is not None:
                self._pool.shutdown(wait=True)
                self._pool = None


class ParquetSink:
    def __init__(
        self,
        path: str,
        schema: pa.Schema,
        compression: str | None,
        row_group_size: int,
        metadata: dict[str, str] | None = None,
        encoder: Encoder | None = None,
        writer_options: dict[str, Any] | None = None,
    ) -> None:
        self.path = path
        #: extra ``pq.ParquetWriter`` arguments (timestamps: ``schema.parquet_writer_options``)
        self.writer_options = writer_options or {}
        self.schema = schema
        self.compression = compression
        self.metadata = metadata
        self.row_group_size = row_group_size
        self.encoder = encoder
        self._writer: pq.ParquetWriter | None = None
        self.buffer: list[pa.RecordBatch] = []
        self.buffered_rows = 0
        self.buffered_bytes = 0
        self.rows = 0

    def add(self, batch: pa.RecordBatch, nbytes: int | None = None) -> None:
        if batch.num_rows == 0:
            return
        self.buffer.append(batch)
        self.buffered_rows += batch.num_rows
        self.buffered_bytes += batch.nbytes if nbytes is None else nbytes
        self.rows += batch.num_rows
        if self.buffered_rows >= self.row_group_size:
            self._write(whole_groups_only=True)
        elif self.buffered_bytes >= ROW_GROUP_BYTES:
            self.flush()

    def _write(self, *, whole_groups_only: bool) -> None:
        if not self.buffer:
            return
        table = pa.Table.from_batches(self.buffer, schema=self.schema)
        # many small slices (partitions): one chunk encodes faster; Spark's 10,000-row
        # batches are written as they are (combining them costs a copy of the buffer)
        combine = self.buffered_rows < SMALL_CHUNK_ROWS * len(self.buffer)
        size = self.row_group_size
        count = (table.num_rows // size) * size if whole_groups_only else table.num_rows
        group = table.slice(0, count)
        rest = table.slice(count)
        left = rest.nbytes if rest.num_rows else 0
        nbytes = max(0, self.buffered_bytes - left)
        self.buffer = rest.to_batches() if rest.num_rows else []
        self.buffered_rows = rest.num_rows
        self.buffered_bytes = left

        def encode() -> None:
            rows = group.combine_chunks() if combine else group
            self.writer(rows).write_table(rows, row_group_size=size)

        self._run(encode, nbytes)

    def _run(self, job: Callable[[], None], nbytes: int = 0) -> None:
        if self.encoder is None:
            job()
        else:
            self.encoder.submit(job, nbytes)

    def writer(self, first: pa.Table | None) -> pq.ParquetWriter:
        """The file's writer, opened with the first rows (or none, for an empty file):
        which columns get a dictionary is decided on them."""
        if self._writer is None:
            self._writer = pq.ParquetWriter(
                self.path,
                self.schema,
                compression=self.compression or "none",
                store_schema=not self.metadata,
                use_dictionary=True if first is None else dictionary_columns(first),
                **self.writer_options,
            )
            if self.metadata:
                self._writer.add_key_value_metadata(self.metadata)
        return self._writer

    def flush(self) -> None:
        self._write(whole_groups_only=False)

    def close(self) -> None:
        """Write what is buffered and the footer; returns once the file is complete.
        The last row group and the footer are encoded in the calling thread: it waits
        for them anyway (a small task then starts no encoding thread at all)."""
        if self.encoder is not None:
            self.encoder.wait()
        encoder, self.encoder = self.encoder, None
        try:
            self.flush()
            self.writer(None).close()
        finally:
            self.encoder = encoder


#: rows of the first row group that decide a column's encoding (parquet-java decides on
#: its first page)
DICTIONARY_SAMPLE_ROWS = 20_000


def dictionary_columns(table: pa.Table) -> list[str]:
    """The top-level primitive columns whose values a dictionary makes smaller, judged on
    a sample as parquet-java judges its first page (dictionary plus indices smaller than
    the plain values). pyarrow would dictionary-encode every column until the dictionary
    reaches 1 MiB: near-unique columns of small files then grow by their indices."""
    sample = table.slice(0, DICTIONARY_SAMPLE_ROWS)
    rows = sample.num_rows
    chosen: list[str] = []
    for field, column in zip(sample.schema, sample.columns, strict=True):
        kind = field.type
        if rows == 0 or pa.types.is_nested(kind) or pa.types.is_boolean(kind):
            continue
        if pa.types.is_null(kind):  # no values to encode
            continue
        distinct = pc.count_distinct(column, mode="all").as_py()
        value_bytes = max(1.0, column.nbytes / rows)
        index_bytes = max(1, distinct.bit_length()) / 8
        if distinct * value_bytes + rows * index_bytes < rows * value_bytes:
            chosen.append(field.name)
    return chosen


def extension(fmt: str, compression: str | None) -> str:
    """Spark's file name suffix: ``.snappy.parquet``, ``.gz.parquet``, ``.csv.gz``."""
    if fmt == "parquet":
        return (
            PARQUET_EXTENSIONS.get(compression, f".{compression}") + ".parquet"
            if compression
            else ".parquet"
        )
    return text_extension(fmt, compression)


class TaskOutput:
    """A task's output files: one per partition directory (and ``max_records_per_file``
    rows), finished on close."""

    def __init__(
        self,
        *,
        fmt: str,
        compression: str | None,
        row_group_size: int,
        header: bool = False,
        local_dir: str,
        base_name: str,
        partition_by: tuple[str, ...],
        partition_names: tuple[str, ...] = (),
        max_records_per_file: int = 0,
        parquet_metadata: dict[str, str] | None = None,
        in_place: bool = False,
        scratch_dir: str | None = None,
        text_options: TextOptions | None = None,
        text_schema: pa.Schema | None = None,
        parquet_writer_options: dict[str, Any] | None = None,
    ) -> None:
        self.fmt = fmt
        self.compression = compression
        self.row_group_size = row_group_size
        self.text_options = text_options or TextOptions(header=header)
        self.text_schema = text_schema  # the Spark schema's Arrow form: marks variants
        self.parquet_writer_options = parquet_writer_options
        self.local_dir = local_dir
        self.base_name = base_name
        self.partition_by = partition_by
        #: the partition directories' column names (``partitionBy``'s spelling)
        self.partition_names = partition_names or partition_by
        self.max_records_per_file = max(0, max_records_per_file)
        self.parquet_metadata = parquet_metadata
        self.in_place = in_place
        self.open: dict[str, tuple[_Sink, LocalFile]] = {}
        self.finished: list[LocalFile] = []
        self.file_numbers: dict[str, int] = {}
        self.spill: pa.ipc.RecordBatchFileWriter | None = None
        self.spill_path = os.path.join(scratch_dir or local_dir, "_aiocommit_spill.arrow")
        self.encoder = Encoder()
        self.local_count = 0
        self.rows = 0

    def add(self, batch: pa.RecordBatch) -> None:
        if batch.num_rows == 0:
            return
        self.rows += batch.num_rows
        if not self.partition_by:
            self._write("", batch)
        else:
            row_bytes = batch.nbytes / batch.num_rows
            for partition, part in split_by_partition(
                batch,
                self.partition_by,
                self.partition_names,
                before_java_19=self.text_options.java_before_19,
            ):
                if partition in self.file_numbers or len(self.open) < MAX_OPEN_FILES:
                    self._write(partition, part, row_bytes)
                else:
                    self._spill(partition, part)
        self._bound_memory()

    def write_empty(self, schema: pa.Schema) -> None:
        """An empty file carrying the schema (an empty DataFrame still reads back)."""
        if not self.open and not self.finished:
            self._sink("", schema)

    def _write(self, partition: str, part: pa.RecordBatch, row_bytes: float | None = None) -> None:
        limit = self.max_records_per_file
        while part.num_rows:
            sink = self._sink(partition, part.schema)
            take = min(part.num_rows, limit - sink.rows) if limit else part.num_rows
            nbytes = None if row_bytes is None else int(row_bytes * take)
            sink.add(part.slice(0, take) if take < part.num_rows else part, nbytes)
            part = part.slice(take)
            if limit and sink.rows >= limit:
                self._finish(partition)

    def _spill(self, partition: str, part: pa.RecordBatch) -> None:
        keyed = part.append_column(
            _PARTITION_COLUMN, pa.array([partition] * part.num_rows, pa.string())
        )
        if self.spill is None:
            # the scratch directory may not exist yet (made when first needed)
            os.makedirs(os.path.dirname(self.spill_path), exist_ok=True)
            self.spill = pa.ipc.new_file(self.spill_path, keyed.schema)
        self.spill.write_batch(keyed)

    def _sink(self, partition: str, schema: pa.Schema) -> _Sink:
        found = self.open.get(partition)
        if found is not None:
            return found[0]
        number = self.file_numbers.get(partition, 0)
        self.file_numbers[partition] = number + 1
        # Spark's names: "-c000" unpartitioned, ".c000" in partition directories
        counter = f"{'.' if partition else '-'}c{number:03d}"
        name = f"{self.base_name}{counter}{extension(self.fmt, self.compression)}"
        relative = f"{partition}/{name}" if partition else name
        if self.in_place:
            local_path = os.path.join(self.local_dir, *relative.split("/"))
            os.makedirs(os.path.dirname(local_path), exist_ok=True)
        else:
            self.local_count += 1
            local_path = os.path.join(self.local_dir, f"{self.local_count:06d}.tmp")
        sink: _Sink
        if self.fmt == "parquet":
            sink = ParquetSink(
                local_path,
                schema,
                self.compression,
                self.row_group_size,
                self.parquet_metadata,
                self.encoder,
                self.parquet_writer_options,
            )
        elif self.fmt == "csv":
            sink = CsvSink(open_text(local_path, self.compression), schema, self.text_options)
        else:
            handle = open_text(local_path, self.compression)
            sink = JsonSink(handle, schema, self.text_options, self.text_schema)
        self.open[partition] = (
            sink,
            LocalFile(relative, partition, local_path, in_place=self.in_place),
        )
        return sink

    def _bound_memory(self) -> None:
        total = self.encoder.pending_bytes
        total += sum(sink.buffered_bytes for sink, _ in self.open.values())
        while total > TASK_BUFFER_BYTES:
            sink = max((s for s, _ in self.open.values()), key=lambda s: s.buffered_bytes)
            total -= sink.buffered_bytes
            sink.flush()

    def _finish(self, partition: str) -> None:
        sink, local = self.open.pop(partition)
        sink.close()
        local.rows = sink.rows
        local.size = os.path.getsize(local.local_path)
        self.finished.append(local)

    def close(self) -> list[LocalFile]:
        """Finish every file, then write the spilled partitions one at a time, sorted;
        returns every file."""
        for partition in list(self.open):
            self._finish(partition)
        if self.spill is not None:
            self.spill.close()
            self.spill = None
            self._write_spilled()
        self.encoder.shutdown()
        return self.finished

    def _write_spilled(self) -> None:
        with pa.memory_map(self.spill_path) as source:
            table = pa.ipc.open_file(source).read_all()
            keys = pc.dictionary_encode(table.column(_PARTITION_COLUMN).combine_chunks())
            data = table.drop_columns([_PARTITION_COLUMN])
            names = keys.dictionary.to_pylist()
            order = pc.sort_indices(keys.indices)
            runs = pc.run_end_encode(pc.take(keys.indices, order))
            start = 0
            for end, key in zip(runs.run_ends.to_pylist(), runs.values.to_pylist(), strict=True):
                rows = data.take(order.slice(start, end - start))
                for batch in rows.to_batches():
                    self._write(names[key], batch)
                if names[key] in self.open:
                    self._finish(names[key])
                start = end
            del table, data
        os.unlink(self.spill_path)

    def abandon(self) -> None:
        """Close open files after a failure, ignoring errors (the files are discarded)."""
        for sink, _ in self.open.values():
            try:
                sink.close()
            except Exception:
                pass
        self.open.clear()
        try:
            self.encoder.shutdown()
        except Exception:
            pass
        if self.spill is not None:
            try:
                self.spill.close()
            except Exception:
                pass
            self.spill = None


def split_by_partition(
    batch: pa.RecordBatch,
    partition_by: tuple[str, ...],
    names: tuple[str, ...] = (),
    *,
    before_java_19: bool = False,
) -> Iterator[tuple[str, pa.RecordBatch]]:
    """(relative partition directory, rows of it without the partition columns); the
    directories use ``names`` (default: the columns' names), as Spark uses the names
    given to ``partitionBy``, matched to the columns case-insensitively."""
    data_columns = [n for n in batch.schema.names if n not in partition_by]
    paths: pa.Array | None = None
    for column, name in zip(partition_by, names or partition_by, strict=True):
        array = batch.column(column)
        encoded = pc.dictionary_encode(array, null_encoding="encode")
        fragments = pa.array(
            [
                partition_path_string(name, value_to_string(v, array.type, before_java_19))
                for v in python_values(encoded.dictionary)
            ],
            pa.string(),
        )
        per_row = pc.take(fragments, encoded.indices)
        paths = per_row if paths is None else pc.binary_join_element_wise(paths, per_row, "/")
    assert paths is not None
    data = batch.select(data_columns)
    keys = pc.dictionary_encode(paths)
    names = keys.dictionary.to_pylist()
    if len(names) == 1:
        yield names[0], data
        return
    order = pc.sort_indices(keys.indices)
    runs = pc.run_end_encode(pc.take(keys.indices, order))
    ordered = data.take(order)
    start = 0
    for end, key in zip(runs.run_ends.to_pylist(), runs.values.to_pylist(), strict=True):
        yield names[key], ordered.slice(start, end - start)
        start = end


def value_to_string(
    value: Any, arrow_type: pa.DataType, before_java_19: bool = False
) -> str | None:
    """A partition value as Spark's ``CAST(value AS STRING)`` writes it; dates and
    timestamps arrive as integers (``text_formats.integer_type``)."""
    if value is None:
        return None
    if pa.types.is_boolean(arrow_type):
        return "true" if value else "false"
    if pa.types.is_floating(arrow_type):
        single = pa.types.is_float32(arrow_type)
        return java_float_string(float(value), single=single, before_java_19=before_java_19)
    if pa.types.is_timestamp(arrow_type):
        return partition_timestamp(value, zone(arrow_type.tz) if arrow_type.tz else None)
    if pa.types.is_date32(arrow_type):
        return date_string(value)
    if isinstance(value, decimal.Decimal):
        # Spark 4 names decimal partitions plainly; 3.5 as BigDecimal.toString, which is
        # Python's str(Decimal) (0E-18, 1.00000000000E-7)
        return plain_decimal(value) if seam.PLAIN_DECIMAL_PARTITIONS else str(value)
    if isinstance(value, str | int):
        return str(value)
    raise ValueError(f"cannot partition by a column of type {arrow_type}")
