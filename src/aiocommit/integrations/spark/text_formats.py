"""JSON lines and CSV written as Spark's own writers write them (default options), so
Spark's readers read them back to the same rows, inferred schemas included:

* JSON: null fields of rows and structs left out, nulls inside arrays and maps kept; maps
  as objects; decimals as bare numbers (``BigDecimal.toString``); NaN and ±Infinity as
  the strings ``"NaN"``/``"Infinity"`` (Jackson's default, which Spark's reader accepts);
  binary as base64; dates and timestamps as in ``values``.
* CSV: no header unless asked; null as an empty field, the empty string as ``""``;
  leading and trailing whitespace trimmed (Spark's ``ignore*WhiteSpace`` default on write);
  a field with a comma, quote, backslash or line break quoted, ``"`` escaped as ``\\"``
  (Spark's default ``escape``); binary as ``[0A FF]``. Arrays, maps and structs are
  refused, as Spark refuses them.

Values go through Python one by one (after a vectorised cast of dates and timestamps to
integers): text formats are for interchange, not for bulk data.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable
from typing import Any, BinaryIO

import pyarrow as pa

from aiocommit.integrations.spark.values import (
    date_string,
    java_float_string,
    text_timestamp,
    zone,
)

Encoder = Callable[[Any], str]


def integer_type(arrow_type: pa.DataType) -> pa.DataType:
    """``arrow_type`` with dates as int32 days and timestamps as int64 microseconds, at any
    depth: Python's ``datetime`` cannot hold every value Spark can (year 0, year 10000)."""
    if pa.types.is_timestamp(arrow_type):
        return pa.int64()
    if pa.types.is_date32(arrow_type):
        return pa.int32()
    if pa.types.is_map(arrow_type):
        return pa.map_(integer_type(arrow_type.key_type), integer_type(arrow_type.item_type))
    if pa.types.is_list(arrow_type) or pa.types.is_large_list(arrow_type):
        return pa.list_(integer_type(arrow_type.value_type))
    if pa.types.is_struct(arrow_type):
        return pa.struct(
            [
                f.with_type(integer_type(f.type))
                for f in (arrow_type.field(i) for i in range(arrow_type.num_fields))
            ]
        )
    return arrow_type


def python_values(array: pa.Array) -> list[Any]:
    if pa.types.is_timestamp(array.type) and array.type.unit != "us":
        array = array.cast(pa.timestamp("us", array.type.tz))
    plain = integer_type(array.type)
    values: list[Any] = (array.cast(plain) if plain != array.type else array).to_pylist()
    return values


def _float(single: bool, quote_special: bool) -> Encoder:
    def encode(value: float) -> str:
        text = java_float_string(value, single=single)
        if quote_special and text[-1] in "Ny":  # NaN, Infinity, -Infinity
            return f'"{text}"'
        return text

    return encode


def _scalar(arrow_type: pa.DataType, *, for_json: bool) -> Encoder | None:
    """Encoder of a non-nested type, or None when ``arrow_type`` is nested."""
    types = pa.types
    quoted: Callable[[str], str] = (lambda t: f'"{t}"') if for_json else (lambda t: t)
    if types.is_boolean(arrow_type):
        return lambda v: "true" if v else "false"
    if types.is_integer(arrow_type):
        return str
    if types.is_floating(arrow_type):
        return _float(types.is_float32(arrow_type), for_json)
    if types.is_decimal(arrow_type):
        return str
    if types.is_string(arrow_type) or types.is_large_string(arrow_type):
        if for_json:
            return lambda v: json.dumps(v, ensure_ascii=False)
        return str
    if types.is_binary(arrow_type) or types.is_large_binary(arrow_type):
        if for_json:
            return lambda v: '"' + base64.b64encode(v).decode("ascii") + '"'
        return lambda v: "[" + " ".join(f"{b:02X}" for b in v) + "]"
    if types.is_date32(arrow_type):
        return lambda v: quoted(date_string(v))
    if types.is_timestamp(arrow_type):
        tz = zone(arrow_type.tz) if arrow_type.tz else None
        return lambda v: quoted(text_timestamp(v, tz))
    if types.is_null(arrow_type):
        return lambda v: "null"
    if types.is_duration(arrow_type):  # the Arrow form of day-time intervals
        raise TypeError(
            "aiocommit does not write interval columns as JSON or CSV (Spark writes "
            "INTERVAL '...' DAY TO SECOND strings): cast them to string first, or use Parquet"
        )
    if types.is_nested(arrow_type):
        return None
    raise TypeError(f"Spark's JSON and CSV writers cannot write a column of type {arrow_type}")


def json_encoder(arrow_type: pa.DataType) -> Encoder:
    """JSON text of one non-null value of ``arrow_type`` (as ``python_values`` gives it)."""
    scalar = _scalar(arrow_type, for_json=True)
    if scalar is not None:
        return scalar
    if pa.types.is_map(arrow_type):
        key = csv_field_encoder(arrow_type.key_type)
        item = json_encoder(arrow_type.item_type)
        return lambda v: (
            "{"
            + ",".join(
                json.dumps(key(k), ensure_ascii=False) + ":" + ("null" if x is None else item(x))
                for k, x in v
            )
            + "}"
        )
    if pa.types.is_list(arrow_type) or pa.types.is_large_list(arrow_type):
        element = json_encoder(arrow_type.value_type)
        return lambda v: "[" + ",".join("null" if x is None else element(x) for x in v) + "]"
    if pa.types.is_struct(arrow_type):
        fields = [arrow_type.field(i) for i in range(arrow_type.num_fields)]
        named = [
            (f.name, json.dumps(f.name, ensure_ascii=False) + ":", json_encoder(f.type))
            for f in fields
        ]
        return lambda v: (
            "{"
            + ",".join(prefix + enc(v[name]) for name, prefix, enc in named if v[name] is not None)
            + "}"
        )
    raise TypeError(f"Spark's JSON writer cannot write a column of type {arrow_type}")


def csv_field_encoder(arrow_type: pa.DataType) -> Encoder:
    """Unquoted text of one non-null value; ``TypeError`` for types Spark's CSV refuses."""
    scalar = _scalar(arrow_type, for_json=False)
    if scalar is None:
        raise TypeError(f"Spark's CSV writer cannot write a column of type {arrow_type}")
    return scalar


_NEEDS_QUOTES = frozenset(',"\\\n\r')


def csv_quote(text: str) -> str:
    """Trim whitespace (chars up to U+0020) as Spark does on write; quote where needed."""
    text = _trim(text)
    if text == "":
        return '""'
    if any(c in _NEEDS_QUOTES for c in text):
        return '"' + text.replace('"', '\\"') + '"'
    return text


def _trim(text: str) -> str:
    start, end = 0, len(text)
    while start < end and text[start] <= " ":
        start += 1
    while end > start and text[end - 1] <= " ":
        end -= 1
    return text[start:end]


class _TextSink:
    """Lines of text appended to an open (possibly gzip) file."""

    def __init__(self, handle: BinaryIO) -> None:
        self.handle = handle
        self.rows = 0
        self.buffered_bytes = 0

    def _lines(self, batch: pa.RecordBatch) -> list[str]:
        raise NotImplementedError

    def add(self, batch: pa.RecordBatch, nbytes: int | None = None) -> None:
        if not batch.num_rows:
            return
        self.handle.write("".join(self._lines(batch)).encode("utf-8"))
        self.rows += batch.num_rows

    def flush(self) -> None:
        return None

    def close(self) -> None:
        self.handle.close()


class JsonSink(_TextSink):
    """JSON lines, one object per row."""

    def __init__(self, handle: BinaryIO, schema: pa.Schema) -> None:
        super().__init__(handle)
        self.names = [json.dumps(n, ensure_ascii=False) + ":" for n in schema.names]
        self.encoders = [json_encoder(t) for t in schema.types]

    def _lines(self, batch: pa.RecordBatch) -> list[str]:
        columns = [python_values(c) for c in batch.columns]
        named = list(zip(self.names, self.encoders, columns, strict=True))
        return [
            "{"
            + ",".join(name + enc(col[i]) for name, enc, col in named if col[i] is not None)
            + "}\n"
            for i in range(batch.num_rows)
        ]


class CsvSink(_TextSink):
    """CSV lines as Spark's CSV writer writes them, with an optional header line."""

    def __init__(self, handle: BinaryIO, schema: pa.Schema, header: bool) -> None:
        super().__init__(handle)
        self.encoders = [csv_field_encoder(t) for t in schema.types]
        if header:
            handle.write((",".join(csv_quote(n) for n in schema.names) + "\n").encode("utf-8"))

    def _lines(self, batch: pa.RecordBatch) -> list[str]:
        columns = list(zip(self.encoders, (python_values(c) for c in batch.columns), strict=True))
        return [
            ",".join("" if col[i] is None else csv_quote(enc(col[i])) for enc, col in columns)
            + "\n"
            for i in range(batch.num_rows)
        ]
