"""Task side: turn Arrow batches into Parquet, CSV or JSON-lines files on local disk,
split into Hive-style partition directories.

A task writes its files into a private local directory and uploads them once they are
closed (``store.upload_file``). Why local files and not bytes in memory: a task's output
can be far larger than its memory, a local file streams to the store with the store's
own multipart/resumable upload, and on ``file://`` the extra copy is a kernel
``copyfile``. Only closed files are uploaded, so a task that dies leaves nothing
half-written in its attempt directory.

Parquet batches are buffered into row groups of ``rowGroupSize`` rows (Spark hands over
batches of ``spark.sql.execution.arrow.maxRecordsPerBatch`` rows, 10 000 by default;
writing each as its own row group makes files slow to read), capped at
``ROW_GROUP_BYTES`` of Arrow data per buffer and ``TASK_BUFFER_BYTES`` per task.
"""

from __future__ import annotations

import base64
import datetime
import decimal
import gzip
import json
import math
import os
import struct
from collections import OrderedDict
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, BinaryIO, Protocol, cast

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv
import pyarrow.parquet as pq

from aiocommit.integrations.spark.paths import partition_path_string
from aiocommit.integrations.spark.settings import ROW_GROUP_BYTES, TASK_BUFFER_BYTES

#: most files a task keeps open at once; the least recently used is finished beyond it
MAX_OPEN_FILES = 100


@dataclass
class LocalFile:
    """One finished output file of a task, waiting on local disk for its upload."""

    relative: str  # path below the destination, e.g. "k=a/part-00000-...-c000.snappy.parquet"
    partition: str  # its partition directory below the destination ("" when unpartitioned)
    local_path: str
    rows: int = 0
    size: int = 0


class _Sink(Protocol):
    rows: int
    buffered_bytes: int

    def add(self, batch: pa.RecordBatch) -> None: ...

    def flush(self) -> None: ...

    def close(self) -> None: ...


class ParquetSink:
    def __init__(
        self, path: str, schema: pa.Schema, compression: str | None, row_group_size: int
    ) -> None:
        self.schema = schema
        self.row_group_size = row_group_size
        self.writer = pq.ParquetWriter(path, schema, compression=compression or "none")
        self.buffer: list[pa.RecordBatch] = []
        self.buffered_rows = 0
        self.buffered_bytes = 0
        self.rows = 0

    def add(self, batch: pa.RecordBatch) -> None:
        if batch.num_rows == 0:
            return
        self.buffer.append(batch)
        self.buffered_rows += batch.num_rows
        self.buffered_bytes += batch.nbytes
        self.rows += batch.num_rows
        if self.buffered_rows >= self.row_group_size:
            self._write(whole_groups_only=True)
        elif self.buffered_bytes >= ROW_GROUP_BYTES:
            self.flush()

    def _write(self, *, whole_groups_only: bool) -> None:
        if not self.buffer:
            return
        table = pa.Table.from_batches(self.buffer, schema=self.schema)
        size = self.row_group_size
        count = (table.num_rows // size) * size if whole_groups_only else table.num_rows
        self.writer.write_table(table.slice(0, count), row_group_size=size)
        rest = table.slice(count)
        self.buffer = rest.to_batches() if rest.num_rows else []
        self.buffered_rows = rest.num_rows
        self.buffered_bytes = rest.nbytes if rest.num_rows else 0

    def flush(self) -> None:
        self._write(whole_groups_only=False)

    def close(self) -> None:
        self.flush()
        self.writer.close()


def _open_text(path: str, compression: str | None) -> BinaryIO:
    if compression == "gzip":
        return cast(BinaryIO, gzip.open(path, "wb", compresslevel=6))
    return open(path, "wb")


class CsvSink:
    def __init__(self, path: str, schema: pa.Schema, compression: str | None, header: bool):
        self.handle = _open_text(path, compression)
        self.writer = pacsv.CSVWriter(
            self.handle, schema, write_options=pacsv.WriteOptions(include_header=header)
        )
        self.rows = 0
        self.buffered_bytes = 0

    def add(self, batch: pa.RecordBatch) -> None:
        if batch.num_rows:
            self.writer.write_batch(batch)
            self.rows += batch.num_rows

    def flush(self) -> None:
        return None

    def close(self) -> None:
        self.writer.close()
        self.handle.close()


def _json_value(value: Any) -> Any:
    if isinstance(value, datetime.datetime | datetime.date | datetime.time):
        return value.isoformat()
    if isinstance(value, decimal.Decimal):
        return str(value)
    if isinstance(value, bytes):
        return base64.b64encode(value).decode("ascii")
    if isinstance(value, datetime.timedelta):
        return value.total_seconds()
    raise TypeError(f"cannot write {type(value).__name__} as JSON")


class JsonSink:
    """JSON lines, one object per row; null fields are left out, as Spark does."""

    def __init__(self, path: str, compression: str | None):
        self.handle = _open_text(path, compression)
        self.rows = 0
        self.buffered_bytes = 0

    def add(self, batch: pa.RecordBatch) -> None:
        if not batch.num_rows:
            return
        lines = [
            json.dumps(
                {k: v for k, v in row.items() if v is not None},
                default=_json_value,
                ensure_ascii=False,
                separators=(",", ":"),
                allow_nan=True,
            )
            for row in batch.to_pylist()
        ]
        self.handle.write(("\n".join(lines) + "\n").encode("utf-8"))
        self.rows += batch.num_rows

    def flush(self) -> None:
        return None

    def close(self) -> None:
        self.handle.close()


def extension(fmt: str, compression: str | None) -> str:
    if fmt == "parquet":
        return f".{compression}.parquet" if compression else ".parquet"
    suffix = ".gz" if compression == "gzip" else ""
    return f".{fmt}{suffix}"


class TaskOutput:
    """A task's output files: one open file per partition directory, finished on close."""

    def __init__(
        self,
        *,
        fmt: str,
        compression: str | None,
        row_group_size: int,
        header: bool,
        local_dir: str,
        base_name: str,
        partition_by: tuple[str, ...],
    ) -> None:
        self.fmt = fmt
        self.compression = compression
        self.row_group_size = row_group_size
        self.header = header
        self.local_dir = local_dir
        self.base_name = base_name
        self.partition_by = partition_by
        self.open: OrderedDict[str, tuple[_Sink, LocalFile]] = OrderedDict()
        self.finished: list[LocalFile] = []
        self.file_numbers: dict[str, int] = {}
        self.local_count = 0
        self.rows = 0

    def add(self, batch: pa.RecordBatch) -> None:
        if batch.num_rows == 0:
            return
        self.rows += batch.num_rows
        if not self.partition_by:
            self._sink("", batch.schema).add(batch)
        else:
            for partition, part in split_by_partition(batch, self.partition_by):
                self._sink(partition, part.schema).add(part)
        self._bound_memory()

    def write_empty(self, schema: pa.Schema) -> None:
        """An empty file carrying the schema (an empty DataFrame still reads back)."""
        if not self.open and not self.finished:
            self._sink("", schema)

    def _sink(self, partition: str, schema: pa.Schema) -> _Sink:
        found = self.open.get(partition)
        if found is not None:
            self.open.move_to_end(partition)
            return found[0]
        if len(self.open) >= MAX_OPEN_FILES:
            self._finish(next(iter(self.open)))
        number = self.file_numbers.get(partition, 0)
        self.file_numbers[partition] = number + 1
        name = f"{self.base_name}-c{number:03d}{extension(self.fmt, self.compression)}"
        self.local_count += 1
        local_path = os.path.join(self.local_dir, f"{self.local_count:06d}.tmp")
        sink: _Sink
        if self.fmt == "parquet":
            sink = ParquetSink(local_path, schema, self.compression, self.row_group_size)
        elif self.fmt == "csv":
            sink = CsvSink(local_path, schema, self.compression, self.header)
        else:
            sink = JsonSink(local_path, self.compression)
        relative = f"{partition}/{name}" if partition else name
        self.open[partition] = (sink, LocalFile(relative, partition, local_path))
        return sink

    def _bound_memory(self) -> None:
        total = sum(sink.buffered_bytes for sink, _ in self.open.values())
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
        """Finish every file; returns them all."""
        for partition in list(self.open):
            self._finish(partition)
        return self.finished

    def abandon(self) -> None:
        """Close open files after a failure, ignoring errors (the files are discarded)."""
        for sink, _ in self.open.values():
            try:
                sink.close()
            except Exception:
                pass
        self.open.clear()


def split_by_partition(
    batch: pa.RecordBatch, partition_by: tuple[str, ...]
) -> Iterator[tuple[str, pa.RecordBatch]]:
    """(relative partition directory, rows of it without the partition columns)."""
    data_columns = [n for n in batch.schema.names if n not in partition_by]
    paths: pa.Array | None = None
    for column in partition_by:
        array = batch.column(column)
        encoded = pc.dictionary_encode(array, null_encoding="encode")
        fragments = pa.array(
            [
                partition_path_string(column, value_to_string(v, array.type))
                for v in encoded.dictionary.to_pylist()
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


def value_to_string(value: Any, arrow_type: pa.DataType) -> str | None:
    """A partition value as Spark's ``CAST(value AS STRING)`` writes it."""
    if value is None:
        return None
    if pa.types.is_boolean(arrow_type):
        return "true" if value else "false"
    if pa.types.is_floating(arrow_type):
        return java_float_string(float(value), single=pa.types.is_float32(arrow_type))
    if pa.types.is_timestamp(arrow_type):
        return _timestamp_string(value)
    if pa.types.is_date(arrow_type):
        return str(value.isoformat())
    if isinstance(value, decimal.Decimal):
        return str(value)
    if isinstance(value, str | int):
        return str(value)
    raise ValueError(f"cannot partition by a column of type {arrow_type}")


def _timestamp_string(value: datetime.datetime) -> str:
    text = value.strftime("%Y-%m-%d %H:%M:%S")
    if value.microsecond:
        text += f".{value.microsecond:06d}".rstrip("0")
    return text


def java_float_string(value: float, *, single: bool = False) -> str:
    """Java's ``Double.toString`` (``Float.toString`` when ``single``): the shortest digits
    that read back the same value, plain between 1e-3 and 1e7 (``2.5``, ``100.0``), else
    computerised scientific notation (``1.0E20``, ``1.5E-5``)."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    if value == 0:
        return "-0.0" if math.copysign(1.0, value) < 0 else "0.0"
    exact = decimal.Decimal(_shortest(value, single))
    if 1e-3 <= abs(value) < 1e7:
        plain = format(exact, "f")
        return plain if "." in plain else plain + ".0"
    sign, digits, _ = exact.as_tuple()
    significant = "".join(map(str, digits)).rstrip("0") or "0"
    mantissa = significant[0] + "." + (significant[1:] or "0")
    return f"{'-' if sign else ''}{mantissa}E{exact.adjusted()}"


def _shortest(value: float, single: bool) -> str:
    if not single:
        return repr(value)
    packed = struct.pack("f", value)
    for precision in range(1, 10):
        text = f"{value:.{precision}g}"
        if struct.pack("f", float(text)) == packed:
            return text
    return repr(value)
