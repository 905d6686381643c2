"""The Spark schema a Parquet footer carries, as Spark's own writer stores it."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyspark
from pyspark.sql.types import (
    ArrayType,
    CharType,
    DataType,
    MapType,
    NullType,
    StringType,
    StructField,
    StructType,
    TimestampNTZType,
    VarcharType,
)

from aiocommit.integrations.spark.files import SPARK_ROW_METADATA, SPARK_VERSION_METADATA
from aiocommit.integrations.spark.seam import PYSPARK
from aiocommit.integrations.spark.spark_jvm import SparkCondition, sql_id

#: field metadata key under which Spark keeps a char/varchar column's declared type
CHAR_VARCHAR_KEY = "__CHAR_VARCHAR_TYPE_STRING"


def data_schema(schema: StructType, partition_by: tuple[str, ...]) -> StructType:
    """The columns that go into the files: all but the partition columns; char(n) and
    varchar(n) as strings remembering their declared type, as Spark writes them."""
    fields = []
    for field in schema.fields:
        if field.name in partition_by:
            continue
        if isinstance(field.dataType, CharType | VarcharType):
            metadata = dict(field.metadata or {})
            metadata[CHAR_VARCHAR_KEY] = field.dataType.simpleString()
            field = StructField(field.name, StringType(), field.nullable, metadata)
        fields.append(field)
    return StructType(fields)


def parquet_metadata(schema: StructType, partition_by: tuple[str, ...]) -> dict[str, str]:
    """Footer key/values: Spark's reader takes the schema from the row metadata."""
    return {
        SPARK_ROW_METADATA: data_schema(schema, partition_by).json(),
        SPARK_VERSION_METADATA: pyspark.__version__,
    }


def _has_ntz(data_type: DataType) -> bool:
    if isinstance(data_type, TimestampNTZType):
        return True
    if isinstance(data_type, StructType):
        return any(_has_ntz(f.dataType) for f in data_type.fields)
    if isinstance(data_type, ArrayType):
        return _has_ntz(data_type.elementType)
    if isinstance(data_type, MapType):
        return _has_ntz(data_type.keyType) or _has_ntz(data_type.valueType)
    return False


def parquet_writer_options(
    schema: StructType, partition_by: tuple[str, ...], timestamp_type: str
) -> dict[str, Any]:
    """``pq.ParquetWriter`` arguments that store ``timestamp`` columns as Spark's
    ``outputTimestampType`` does: INT96, INT64 microseconds or INT64 milliseconds (values
    truncated, as Spark truncates them). Spark writes ``timestamp_ntz`` as INT64
    microseconds whatever the setting; pyarrow applies its timestamp setting to every
    timestamp column, so with a ``timestamp_ntz`` column in the files all timestamps stay
    INT64 microseconds (lossless; Spark reads both back the same)."""
    if timestamp_type == "TIMESTAMP_MICROS" or _has_ntz(data_schema(schema, partition_by)):
        return {}
    if timestamp_type == "INT96":
        return {"use_deprecated_int96_timestamps": True}
    return {"coerce_timestamps": "ms", "allow_truncated_timestamps": True}


def floor_to_millis(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """Top-level ``timestamp`` columns floored to milliseconds, as Spark's
    TIMESTAMP_MILLIS floors them (pyarrow's ``coerce_timestamps`` truncates toward zero,
    one millisecond later than Spark before 1970). Nested timestamps keep pyarrow's
    truncation."""
    for batch in batches:
        columns = [
            pc.floor_temporal(column, unit="millisecond")
            if pa.types.is_timestamp(column.type) and column.type.tz
            else column
            for column in batch.columns
        ]
        yield pa.RecordBatch.from_arrays(columns, schema=batch.schema)


def sparks_refusal(
    schema: StructType, fmt: str, partition_by: tuple[str, ...] = (), *, case_sensitive: bool
) -> SparkCondition | None:
    """The error Spark's own ``fmt`` writer raises for ``schema`` before any task, if any:
    two columns of one name (``COLUMN_ALREADY_EXISTS``, names compared as
    ``spark.sql.caseSensitive`` says; Spark's CSV writer takes them), or a NULL-typed
    data column in CSV, and in Parquet before Spark 4.1
    (``UNSUPPORTED_DATA_TYPE_FOR_DATASOURCE``; JSON writes it)."""
    if fmt != "csv":
        names = [n if case_sensitive else n.lower() for n in schema.names]
        repeated = sorted({n for n in names if names.count(n) > 1})
        if repeated:  # Spark names the first in sorted order, lower-cased
            return SparkCondition("COLUMN_ALREADY_EXISTS", {"columnName": sql_id(repeated[0])})
    refuses_void = {"csv": "CSV"}
    if PYSPARK < (4, 1):  # Spark 4.0's Parquet writer refuses a void column too
        refuses_void["parquet"] = "Parquet"
    if fmt in refuses_void:
        for f in schema.fields:
            if isinstance(f.dataType, NullType) and f.name not in partition_by:
                return SparkCondition(
                    "UNSUPPORTED_DATA_TYPE_FOR_DATASOURCE",
                    {
                        "columnName": sql_id(f.name),
                        "columnType": '"VOID"',
                        "format": refuses_void[fmt],
                    },
                )
    return None
