"""The Spark schema a Parquet footer carries, as Spark's own writer stores it."""

from __future__ import annotations

import pyspark
from pyspark.sql.types import CharType, StringType, StructField, StructType, VarcharType

from aiocommit.integrations.spark.files import SPARK_ROW_METADATA, SPARK_VERSION_METADATA

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
