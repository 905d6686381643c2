"""``saveAsTable`` and ``insertInto`` for ``format("aiocommit")`` (installed by
``register(spark)``, see ``dataframe_writer``).

Spark's Python data source API gives the writer neither a path nor options for table
writes, so the table is resolved here, in the user's process: its location, format
and partition columns come from the catalog; the DataFrame is written there with
``save(location)`` (so every commit guarantee holds), then the catalog is told: a new
table is created over the location with Spark's own ``parquet``/``csv``/``json``
provider (an external table: ``DROP TABLE`` keeps the files), an existing one is
refreshed and its partitions synchronised. Readers use Spark's own file readers.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from aiocommit.integrations.spark.settings import FORMATS

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.readwriter import DataFrameWriter

    from aiocommit.integrations.spark.dataframe_writer import Recorded

ERROR_MODES = ("error", "errorifexists", "default")


def save_as_table(writer: DataFrameWriter, state: Recorded, name: str) -> None:
    """``df.write.format("aiocommit").saveAsTable(name)`` in every save mode."""
    spark: SparkSession = writer._spark
    df: DataFrame = writer._df
    mode = state.mode or "errorifexists"
    options = {k: v for k, v in state.options.items() if k not in ("path", "partitionby")}
    partition_by = _partition_columns(state)
    if not spark.catalog.tableExists(name):
        fmt = options.pop("format", "parquet").lower()
        location = state.options.get("path") or _warehouse_location(spark, name)
        _write(df, location, "errorifexists", fmt, partition_by, options)
        spark.sql(_create_table(df, name, fmt, partition_by, location, options))
        _refresh(spark, name, partition_by)
        return
    if mode in ERROR_MODES:
        from pyspark.errors import AnalysisException

        raise AnalysisException(  # Spark's own error for saveAsTable of an existing table
            message=f"[TABLE_OR_VIEW_ALREADY_EXISTS] Cannot create table or view {name} "
            'because it already exists: use mode("append"), mode("overwrite") or '
            'mode("ignore"). SQLSTATE: 42P07',
            errorClass="TABLE_OR_VIEW_ALREADY_EXISTS",
            messageParameters={"relationName": name},
        )
    if mode == "ignore":
        return
    location, fmt, columns, partitions = describe(spark, name)
    if partition_by and [c.lower() for c in partition_by] != [c.lower() for c in partitions]:
        raise ValueError(
            f"partitionBy({', '.join(partition_by)}) differs from table {name}'s partition "
            f"columns ({', '.join(partitions) or 'none'})"
        )
    if sorted(c.lower() for c in df.columns) != sorted(c.lower() for c in columns):
        raise ValueError(
            f"the DataFrame's columns ({', '.join(df.columns)}) differ from table {name}'s "
            f"({', '.join(columns)}); aiocommit does not replace a table's schema"
        )
    options.pop("format", None)
    _write(df, location, mode, fmt, partitions, options)
    _refresh(spark, name, partitions)


def insert_into(writer: DataFrameWriter, state: Recorded, name: str) -> None:
    """``df.write.format("aiocommit").insertInto(name[, overwrite])``: columns by
    position, as Spark's ``insertInto``; overwrite follows ``partitionOverwriteMode``."""
    spark: SparkSession = writer._spark
    df: DataFrame = writer._df
    location, fmt, columns, partitions = describe(spark, name)
    if len(df.columns) != len(columns):
        raise ValueError(
            f"table {name} has {len(columns)} columns ({', '.join(columns)}), "
            f"the DataFrame {len(df.columns)}"
        )
    mode = "overwrite" if state.mode == "overwrite" else "append"
    options = {k: v for k, v in state.options.items() if k not in ("path", "format")}
    options.pop("partitionby", None)
    _write(df.toDF(*columns), location, mode, fmt, partitions, options)
    _refresh(spark, name, partitions)


def describe(spark: SparkSession, name: str) -> tuple[str, str, list[str], list[str]]:
    """A table's location, format and columns (data then partition columns) and
    partition columns; ``ValueError`` for a table aiocommit cannot write."""
    details = {
        str(row[0]).strip(): str(row[1] or "").strip()
        for row in spark.sql(f"DESCRIBE TABLE EXTENDED {name}").collect()
        if row[0]
    }
    fmt = details.get("Provider", "").lower()
    location = details.get("Location", "")
    if fmt not in FORMATS or not location:
        raise ValueError(
            f"table {name} is {fmt or 'of unknown format'} at {location or 'no location'}: "
            f"aiocommit writes tables of format {', '.join(FORMATS)} with a location"
        )
    found = spark.catalog.listColumns(name)
    columns = [c.name for c in found]
    return _local(location), fmt, columns, [c.name for c in found if c.isPartition]


def _local(location: str) -> str:
    """``file:/x`` (as the catalog spells local paths) as a plain path; others as given."""
    if location.startswith("file:"):
        return urlsplit(location).path
    return location


def _warehouse_location(spark: SparkSession, name: str) -> str:
    parts = [p.strip("`") for p in name.split(".")]
    table = parts[-1].lower()
    database = parts[-2].lower() if len(parts) > 1 else spark.catalog.currentDatabase()
    warehouse = _local(str(spark.conf.get("spark.sql.warehouse.dir")))
    if database == "default":
        return os.path.join(warehouse, table)
    return os.path.join(warehouse, f"{database}.db", table)


def _partition_columns(state: Recorded) -> list[str]:
    if state.partition_by:
        return list(state.partition_by)
    text = state.options.get("partitionby", "")
    return [c.strip() for c in text.split(",") if c.strip()]


def _write(
    df: DataFrame,
    location: str,
    mode: str,
    fmt: str,
    partition_by: list[str],
    options: dict[str, Any],
) -> None:
    writer = df.write.format("aiocommit").mode(mode).option("format", fmt).options(**options)
    if partition_by:
        writer = writer.option("partitionBy", ",".join(partition_by))
    writer.save(location)


def _quote(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def _create_table(
    df: DataFrame,
    name: str,
    fmt: str,
    partition_by: list[str],
    location: str,
    options: dict[str, Any],
) -> str:
    """The DDL of an external table over ``location`` with the DataFrame's exact schema."""
    columns = ", ".join(f"{_quote(f.name)} {f.dataType.simpleString()}" for f in df.schema)
    sql = f"CREATE TABLE {name} ({columns}) USING {fmt}"
    if fmt == "csv" and "header" in options:
        sql += f" OPTIONS (header '{options['header']}')"
    if partition_by:
        sql += f" PARTITIONED BY ({', '.join(_quote(c) for c in partition_by)})"
    return sql + " LOCATION '" + location.replace("'", "\\'") + "'"


def _refresh(spark: SparkSession, name: str, partitions: list[str]) -> None:
    spark.sql(f"REFRESH TABLE {name}")
    if partitions:
        spark.sql(f"MSCK REPAIR TABLE {name} SYNC PARTITIONS")
