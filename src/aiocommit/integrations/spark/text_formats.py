"""JSON lines and CSV written as Spark's own writers write them, with Spark's writer
options (``text_options``), so the files are byte for byte Spark's and Spark's readers
read them back to the same rows, inferred schemas included:

* JSON (Jackson, as Spark): null fields of rows and structs left out unless
  ``ignoreNullFields=false``, nulls inside arrays and maps kept; maps as objects; decimals
  as bare numbers (``BigDecimal.toString``); NaN and ±Infinity as the strings
  ``"NaN"``/``"Infinity"``; binary as base64; variants as the JSON they hold; dates and
  timestamps in ``dateFormat``/``timestampFormat``.
* CSV (univocity, as Spark configures it; ``CsvQuoting``): no header unless asked; null
  as ``nullValue`` (empty), the empty string as ``emptyValue`` (``""``); whitespace
  trimmed at both ends by default; quoted where univocity quotes; binary as ``[0A FF]``.
  Arrays, maps, structs and variants are refused, as Spark refuses them.

Values go through Python one by one (after a vectorised cast of dates and timestamps to
integers): text formats are for interchange, not for bulk data.
"""

from __future__ import annotations

import base64
import datetime
import json
import re
from collections.abc import Callable
from typing import Any, BinaryIO

import pyarrow as pa

from aiocommit.integrations.spark.datetime_patterns import compile_pattern
from aiocommit.integrations.spark.text_options import (
    DEFAULT_DATE_FORMAT,
    DEFAULT_TIMESTAMP_NTZ_FORMAT,
    TextOptions,
)
from aiocommit.integrations.spark.values import (
    MICROS_PER_DAY,
    date_string,
    day_time_interval_string,
    java_float_string,
    local_time,
    text_timestamp,
    zone,
)

DEFAULTS = TextOptions()

Encoder = Callable[[Any], str]


def integer_type(arrow_type: pa.DataType) -> pa.DataType:
    """``arrow_type`` with dates as int32 days and timestamps as int64 microseconds, at any
    depth: Python's ``datetime`` cannot hold every value Spark can (year 0, year 10000)."""
    if pa.types.is_timestamp(arrow_type) or pa.types.is_duration(arrow_type):
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
    if pa.types.is_duration(array.type) and array.type.unit != "us":
        array = array.cast(pa.duration("us"))
    plain = integer_type(array.type)
    values: list[Any] = (array.cast(plain) if plain != array.type else array).to_pylist()
    return values


def _float(single: bool, quote_special: bool, before_java_19: bool) -> Encoder:
    def encode(value: float) -> str:
        text = java_float_string(value, single=single, before_java_19=before_java_19)
        if quote_special and text[-1] in "Ny":  # NaN, Infinity, -Infinity
            return f'"{text}"'
        return text

    return encode


#: control characters JSON escapes as ``\\u00XX`` (the rest have short escapes)
_HEX_ESCAPED = re.compile("[\x00-\x07\x0b\x0e-\x1f]")
_LOWER_HEX = re.compile(r"(?<!\\)((?:\\\\)*\\u00)([0-9a-f]{2})")


def json_string(value: str) -> str:
    """A JSON string as Jackson (Spark's JSON writer) writes it: non-ASCII as it is,
    control characters as ``\\n``... or ``\\u001F`` (upper-case hex)."""
    text = json.dumps(value, ensure_ascii=False)
    if _HEX_ESCAPED.search(value):
        text = _LOWER_HEX.sub(lambda m: m.group(1) + m.group(2).upper(), text)
    return text


def date_encoder(options: TextOptions) -> Callable[[int], str]:
    """A date (days since the epoch) in ``dateFormat``."""
    if options.date_format == DEFAULT_DATE_FORMAT:
        return date_string
    pattern = compile_pattern(options.date_format)

    def encode(days: int) -> str:
        year, wall, _ = local_time(days * MICROS_PER_DAY, None)
        return pattern(year, wall, None)

    return encode


def timestamp_encoder(arrow_type: pa.DataType, options: TextOptions) -> Callable[[int], str]:
    """A timestamp (microseconds) in ``timestampFormat`` in the write's time zone, or a
    ``timestamp_ntz`` in ``timestampNTZFormat``."""
    if arrow_type.tz:
        tz: datetime.tzinfo | None = zone(options.time_zone or arrow_type.tz)
        text = options.timestamp_format
        default = not text  # Spark's default (not the same text given as the option)
    else:
        tz = None
        text = options.timestamp_ntz_format
        default = text == DEFAULT_TIMESTAMP_NTZ_FORMAT
    if default:
        return lambda v: text_timestamp(v, tz)
    pattern = compile_pattern(text)

    def encode(micros: int) -> str:
        return pattern(*local_time(micros, tz))

    return encode


def _scalar(arrow_type: pa.DataType, options: TextOptions, *, for_json: bool) -> Encoder | None:
    """Encoder of a non-nested type, or None when ``arrow_type`` is nested."""
    types = pa.types
    if types.is_boolean(arrow_type):
        return lambda v: "true" if v else "false"
    if types.is_integer(arrow_type):
        return str
    if types.is_floating(arrow_type):
        return _float(types.is_float32(arrow_type), for_json, options.java_before_19)
    if types.is_decimal(arrow_type):
        return str
    if types.is_string(arrow_type) or types.is_large_string(arrow_type):
        return json_string if for_json else str
    if types.is_binary(arrow_type) or types.is_large_binary(arrow_type):
        if for_json:
            return lambda v: '"' + base64.b64encode(v).decode("ascii") + '"'
        return lambda v: "[" + " ".join(f"{b:02X}" for b in v) + "]"
    if types.is_date32(arrow_type) or types.is_timestamp(arrow_type):
        encode = (
            date_encoder(options)
            if types.is_date32(arrow_type)
            else timestamp_encoder(arrow_type, options)
        )
        if for_json:
            return lambda v: json_string(encode(v))
        return encode
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


def is_variant(field: pa.Field) -> bool:
    """Spark's Arrow form of ``variant``: a struct (value, metadata) whose ``metadata``
    child is marked ``variant: true``."""
    kind = field.type
    return pa.types.is_struct(kind) and any(
        (kind.field(i).metadata or {}).get(b"variant") == b"true" for i in range(kind.num_fields)
    )


def json_field_encoder(
    field: pa.Field, options: TextOptions = DEFAULTS, reference: pa.Field | None = None
) -> Encoder:
    """``json_encoder`` of the field's type; a variant is written as the JSON it holds, as
    Spark's JSON writer writes it. ``reference``: the same field as ``to_arrow_schema``
    makes it from the Spark schema, which marks variants (Spark's Arrow batches do not)."""
    if is_variant(field) or (reference is not None and is_variant(reference)):
        from aiocommit.integrations.spark.seam import variant_to_json

        zone_id = options.time_zone or "UTC"
        return lambda v: variant_to_json(v["value"], v["metadata"], zone_id)
    return json_encoder(field.type, options, None if reference is None else reference.type)


def json_encoder(
    arrow_type: pa.DataType,
    options: TextOptions = DEFAULTS,
    reference: pa.DataType | None = None,
) -> Encoder:
    """JSON text of one non-null value of ``arrow_type`` (as ``python_values`` gives it);
    ``reference`` as in ``json_field_encoder``."""
    scalar = _scalar(arrow_type, options, for_json=True)
    if scalar is not None:
        return scalar
    if pa.types.is_map(arrow_type):
        key = csv_field_encoder(arrow_type.key_type, options)
        item = json_field_encoder(
            arrow_type.item_field, options, _child(reference, "item_field", pa.types.is_map)
        )
        return lambda v: (
            "{"
            + ",".join(json_string(key(k)) + ":" + ("null" if x is None else item(x)) for k, x in v)
            + "}"
        )
    if pa.types.is_list(arrow_type) or pa.types.is_large_list(arrow_type):
        element = json_field_encoder(
            arrow_type.value_field,
            options,
            _child(
                reference, "value_field", lambda t: pa.types.is_list(t) or pa.types.is_large_list(t)
            ),
        )
        return lambda v: "[" + ",".join("null" if x is None else element(x) for x in v) + "]"
    if pa.types.is_struct(arrow_type):
        fields = [arrow_type.field(i) for i in range(arrow_type.num_fields)]
        references: list[pa.Field | None] = [None] * len(fields)
        if reference is not None and pa.types.is_struct(reference):
            references = [reference.field(i) for i in range(len(fields))]
        named = [
            (
                f.name,
                json_string(f.name) + ":",
                json_field_encoder(f, options, r),
            )
            for f, r in zip(fields, references, strict=True)
        ]
        if not options.ignore_null_fields:
            return lambda v: (
                "{"
                + ",".join(
                    prefix + ("null" if v[name] is None else enc(v[name]))
                    for name, prefix, enc in named
                )
                + "}"
            )
        return lambda v: (
            "{"
            + ",".join(prefix + enc(v[name]) for name, prefix, enc in named if v[name] is not None)
            + "}"
        )
    raise TypeError(f"Spark's JSON writer cannot write a column of type {arrow_type}")


def _child(
    reference: pa.DataType | None, attribute: str, kind: Callable[[pa.DataType], bool]
) -> pa.Field | None:
    if reference is None or not kind(reference):
        return None
    child: pa.Field = getattr(reference, attribute)
    return child


def interval_encoders(options: TextOptions) -> dict[str, Encoder]:
    """Column name -> encoder of the write's top-level day-time interval columns (Spark's
    Arrow batches carry them as durations, without their DAY/HOUR/... fields)."""

    def encoder(start: int, end: int) -> Encoder:
        return lambda v: day_time_interval_string(v, start, end)

    return {name: encoder(start, end) for name, start, end in options.intervals}


def _quoted(encode: Encoder) -> Encoder:
    return lambda v: json_string(encode(v))


def csv_field_encoder(arrow_type: pa.DataType, options: TextOptions = DEFAULTS) -> Encoder:
    """Unquoted text of one non-null value; ``TypeError`` for types Spark's CSV refuses."""
    scalar = _scalar(arrow_type, options, for_json=False)
    if scalar is None:
        raise TypeError(f"Spark's CSV writer cannot write a column of type {arrow_type}")
    return scalar


def _whitespace(ch: str) -> bool:
    return ch <= " "


class CsvQuoting:
    """One CSV field as univocity's ``CsvWriter`` (Spark's CSV writer) writes it, with the
    settings Spark gives it: quote when a value holds the delimiter, a line break or (with
    ``escapeQuotes``) the quote, starts with the quote, or (first column) starts with the
    comment character; quotes inside quoted values escaped with ``escape``, ``escape``
    itself with ``charToEscapeQuoteEscaping``; whitespace trimmed at both ends by default;
    null as ``nullValue``, the empty string as ``emptyValue``."""

    def __init__(self, options: TextOptions) -> None:
        self.o = options
        self.q = options.quote
        self.esc = options.escape
        self.new_line = options.line_sep if len(options.line_sep) == 1 else "\n"
        triggers = {"\n", "\r", self.new_line, *options.line_sep}
        if options.escape_quotes:
            triggers.add(options.quote)
        self.triggers = frozenset(triggers)
        self.specials = frozenset({self.q, self.esc, options.sep[0], *triggers})

    def field(self, value: str | None, column: int) -> str:
        o = self.o
        if value is not None and value and not o.quote_all:  # the common case: as it is
            first, last = value[0], value[-1]
            if (
                not (first <= " " and o.ignore_leading)
                and not (last <= " " and o.ignore_trailing)
                and first != self.q
                and not (column == 0 and first == o.comment)
                and self.specials.isdisjoint(value)
            ):
                return value
        using = True
        if value is None:
            element = o.null_value
        elif value == "" or (o.ignore_leading and self._start(value) == len(value)):
            element = o.empty_value
        else:
            element, using = value, False
        text, quoted = self._append(column, o.quote_all, element, using)
        if text == "" and not using:  # trimmed to nothing
            text, _ = self._append(column, quoted, o.empty_value, False)
        return f"{self.q}{text}{self.q}" if quoted else text

    def _start(self, element: str) -> int:
        for i, ch in enumerate(element):
            if not _whitespace(ch):
                return i
        return len(element)

    def _trim_end(self, text: str) -> str:
        if self.o.ignore_trailing:
            end = len(text)
            while end and _whitespace(text[end - 1]):
                end -= 1
            return text[:end]
        return text

    def _is_delimiter(self, element: str, i: int) -> bool:
        return element.startswith(self.o.sep, i)

    def _needs_quotes(self, start: int, element: str) -> bool:
        return any(
            element[i] in self.triggers or self._is_delimiter(element, i)
            for i in range(start, len(element))
        )

    def _append(self, column: int, quoted: bool, element: str, using: bool) -> tuple[str, bool]:
        o = self.o
        start = self._start(element) if o.ignore_leading else 0
        length = len(element)
        if start < length and (
            element[start] == self.q or (column == 0 and element[0] == o.comment)
        ):
            quoted = True
        if quoted:
            if using and length >= 2 and element[0] == self.q and element[-1] == self.q:
                return element, False
            return self._quoted(start, element), True
        for i in range(start, length):
            ch = element[i]
            if ch == self.q or ch == self.esc:
                if self._needs_quotes(i, element):
                    return element[start:i] + self._quoted(i, element), True
                return self._trim_end(element[start:]), False
            if ch in self.triggers or self._is_delimiter(element, i):
                return element[start:i] + self._quoted(i, element), True
        return self._trim_end(element[start:]), False

    def _quoted(self, start: int, element: str) -> str:
        out: list[str] = []
        for ch in element[start:]:
            if ch == self.q:
                out.append(self.esc)
            elif ch == self.esc and self.o.escape_escape != "\0":
                out.append(self.o.escape_escape)
            out.append(self.o.line_sep if ch == self.new_line else ch)
        return self._trim_end("".join(out))


def pretty_json(text: str) -> str:
    """Compact JSON (as the encoders write it) laid out as Jackson's default pretty printer
    lays it out, as Spark's ``pretty`` option writes: objects one field a line, indented
    by two spaces per object level, ``"name" : value``; arrays on one line, ``[ 1, 2 ]``;
    empty ones ``{ }`` and ``[ ]``. Strings are copied as they are."""
    out: list[str] = []
    stack: list[str] = []
    level, i, n = 0, 0, len(text)
    while i < n:
        c = text[i]
        if c == '"':
            j = i + 1
            while text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            out.append(text[i : j + 1])
            i = j + 1
            continue
        if c in "{[" and i + 1 < n and text[i + 1] == ("}" if c == "{" else "]"):
            out.append(f"{c} {text[i + 1]}")
            i += 2
            continue
        if c == "{":
            level += 1
            stack.append(c)
            out.append("{\n" + "  " * level)
        elif c == "[":
            stack.append(c)
            out.append("[ ")
        elif c == "}":
            level -= 1
            stack.pop()
            out.append("\n" + "  " * level + "}")
        elif c == "]":
            stack.pop()
            out.append(" ]")
        elif c == ",":
            out.append(",\n" + "  " * level if stack[-1] == "{" else ", ")
        elif c == ":":
            out.append(" : ")
        else:
            out.append(c)
        i += 1
    return "".join(out)


class _TextSink:
    """Lines of text appended to an open (possibly compressed) file, in ``encoding``."""

    def __init__(self, handle: BinaryIO, options: TextOptions) -> None:
        self.handle = handle
        self.options = options
        self.rows = 0
        self.buffered_bytes = 0
        if options.bom:
            handle.write(options.bom)

    def _lines(self, batch: pa.RecordBatch) -> list[str]:
        raise NotImplementedError

    def _put(self, text: str) -> None:
        self.handle.write(text.encode(self.options.encoding, errors="replace"))

    def add(self, batch: pa.RecordBatch, nbytes: int | None = None) -> None:
        if not batch.num_rows:
            return
        self._put("".join(self._lines(batch)))
        self.rows += batch.num_rows

    def flush(self) -> None:
        return None

    def close(self) -> None:
        self.handle.close()


class JsonSink(_TextSink):
    """JSON lines, one object per row."""

    def __init__(
        self,
        handle: BinaryIO,
        schema: pa.Schema,
        options: TextOptions = DEFAULTS,
        reference: pa.Schema | None = None,
    ) -> None:
        """``reference``: the Spark schema's Arrow form (``json_field_encoder``)."""
        super().__init__(handle, options)
        self.names = [json_string(n) + ":" for n in schema.names]
        references = {f.name: f for f in reference} if reference is not None else {}
        intervals = interval_encoders(options)
        self.encoders = [
            _quoted(intervals[f.name])
            if f.name in intervals
            else json_field_encoder(f, options, references.get(f.name))
            for f in schema
        ]

    def _lines(self, batch: pa.RecordBatch) -> list[str]:
        columns = [python_values(c) for c in batch.columns]
        named = list(zip(self.names, self.encoders, columns, strict=True))
        end = "}" + self.options.line_sep
        if self.options.pretty:
            sep = self.options.line_sep
            lines = self._objects(batch, named, "}")
            return [pretty_json(line) + sep for line in lines]
        return self._objects(batch, named, end)

    def _objects(self, batch: pa.RecordBatch, named: list[Any], end: str) -> list[str]:
        if not self.options.ignore_null_fields:
            return [
                "{"
                + ",".join(
                    name + ("null" if col[i] is None else enc(col[i])) for name, enc, col in named
                )
                + end
                for i in range(batch.num_rows)
            ]
        return [
            "{"
            + ",".join(name + enc(col[i]) for name, enc, col in named if col[i] is not None)
            + end
            for i in range(batch.num_rows)
        ]


class CsvSink(_TextSink):
    """CSV lines as Spark's CSV writer writes them, with an optional header line."""

    def __init__(
        self, handle: BinaryIO, schema: pa.Schema, options: TextOptions = DEFAULTS
    ) -> None:
        super().__init__(handle, options)
        intervals = interval_encoders(options)
        self.encoders = [
            intervals.get(f.name) or csv_field_encoder(f.type, options) for f in schema
        ]
        self.quoting = CsvQuoting(options)
        if options.header:
            self._put("".join(self._line(list(schema.names))))

    def _line(self, values: list[str | None]) -> list[str]:
        """The row's line, or none: univocity skips empty lines (Spark sets skipEmptyLines)."""
        field = self.quoting.field
        line = self.options.sep.join(field(v, i) for i, v in enumerate(values))
        return [line + self.options.line_sep] if line else []

    def _lines(self, batch: pa.RecordBatch) -> list[str]:
        columns = list(zip(self.encoders, (python_values(c) for c in batch.columns), strict=True))
        lines: list[str] = []
        for i in range(batch.num_rows):
            lines += self._line([None if col[i] is None else enc(col[i]) for enc, col in columns])
        return lines
