"""``saveAsTable`` and ``insertInto`` for ``format("aiocommit")`` (installed by
``register(spark)``, see ``dataframe_writer``).

Spark's Python data source API gives the writer neither a path nor options for table
writes, so the table is resolved here, in the user's process: its location, format
and partition columns come from the catalog; the DataFrame is written there with
``save(location)`` (so every commit guarantee holds), and the catalog is told. A new
table uses Spark's own ``parquet``/``csv``/``json`` provider: without a ``path`` option
it is a managed table, created (empty) in the warehouse first and then written (and
dropped again if the write fails), as Spark's ``saveAsTable`` makes one; with a ``path``
it is an external table over the written files. An existing table is refreshed and its
partitions synchronised. Readers use Spark's own file readers.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from aiocommit.integrations.spark import seam
from aiocommit.integrations.spark.settings import FORMATS
from aiocommit.integrations.spark.text_options import COMMON_OPTIONS, CSV_OPTIONS, JSON_OPTIONS

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.readwriter import DataFrameWriter

    from aiocommit.integrations.spark.dataframe_writer import Recorded

ERROR_MODES = ("error", "errorifexists", "default")

#: text writer options a CSV/JSON table keeps, so that its readers read what was written
TABLE_READ_OPTIONS = frozenset(
    k for k in (*COMMON_OPTIONS, *CSV_OPTIONS, *JSON_OPTIONS, "timezone") if k != "codec"
)


def save_as_table(writer: DataFrameWriter, state: Recorded, name: str) -> None:
    """``df.write.format("aiocommit").saveAsTable(name)`` in every save mode."""
    spark: SparkSession = seam.writer_session(writer)
    df: DataFrame = seam.writer_dataframe(writer)
    mode = state.mode or "errorifexists"
    options = {k: v for k, v in state.options.items() if k not in ("path", "partitionby")}
    partition_by = _partition_columns(state)
    if not spark.catalog.tableExists(name):
        fmt = options.pop("format", "parquet").lower()
        path = state.options.get("path")
        if path:  # an external table, as Spark's saveAsTable with a path makes
            _write(df, path, "errorifexists", fmt, partition_by, options)
            spark.sql(_create_table(df, name, fmt, partition_by, path, options))
        else:  # a managed table in the warehouse: the catalog owns (and drops) the files
            spark.sql(_create_table(df, name, fmt, partition_by, None, options))
            try:
                _write(df, describe(spark, name)[0], "append", fmt, partition_by, options)
            except BaseException:
                spark.sql(f"DROP TABLE IF EXISTS {name}")
                raise
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
    if mode == "overwrite":
        # Spark's saveAsTable replaces the whole table in overwrite mode, whatever
        # partitionOverwriteMode says (it drops and recreates the table): static
        options["partitionoverwritemode"] = "static"
    _write(df, location, mode, fmt, partitions, options)
    _refresh(spark, name, partitions)


def insert_into(writer: DataFrameWriter, state: Recorded, name: str) -> None:
    """``df.write.format("aiocommit").insertInto(name[, overwrite])``: columns by
    position, as Spark's ``insertInto``; overwrite follows ``partitionOverwriteMode``."""
    spark: SparkSession = seam.writer_session(writer)
    df: DataFrame = seam.writer_dataframe(writer)
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
    if details.get("Num Buckets"):
        raise ValueError(
            f"table {name} is bucketed ({details['Num Buckets']} buckets by "
            f"{details.get('Bucket Columns', '?')}): aiocommit does not write Spark's bucketed "
            "layout; write it with Spark's own writer"
        )
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


def _literal(text: str) -> str:
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def _quote(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def _create_table(
    df: DataFrame,
    name: str,
    fmt: str,
    partition_by: list[str],
    location: str | None,
    options: dict[str, Any],
) -> str:
    """The DDL of a table with the DataFrame's exact schema: external over ``location``,
    or managed (in the warehouse) without one."""
    columns = ", ".join(f"{_quote(f.name)} {f.dataType.simpleString()}" for f in df.schema)
    sql = f"CREATE TABLE {name} ({columns}) USING {fmt}"
    stored = {k: v for k, v in options.items() if k in TABLE_READ_OPTIONS}
    if str(stored.pop("pretty", "false")).lower() == "true":
        stored["multiline"] = "true"  # pretty JSON spans lines: its reader needs multiLine
    if fmt in ("csv", "json") and stored:  # the table's readers read what was written
        sql += " OPTIONS (" + ", ".join(f"`{k}` {_literal(str(v))}" for k, v in stored.items())
        sql += ")"
    if partition_by:
        sql += f" PARTITIONED BY ({', '.join(_quote(c) for c in partition_by)})"
    if location is None:
        return sql
    return sql + " LOCATION '" + location.replace("'", "\\'") + "'"


def _refresh(spark: SparkSession, name: str, partitions: list[str]) -> None:
    spark.sql(f"REFRESH TABLE {name}")
    if partitions:
        spark.sql(f"MSCK REPAIR TABLE {name} SYNC PARTITIONS")
