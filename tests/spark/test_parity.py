"""Parity with Spark's own writer: the same DataFrame written with ``df.write.parquet/csv/
json`` and with ``df.write.format("aiocommit")`` must give identical partition directory
names, identical rows (and inferred schemas) through Spark's readers, and file counts
within 10 %. Cases are combined into few writes to keep this suite short."""

from __future__ import annotations

import datetime
import math
import re
from collections.abc import Callable, Mapping, Sequence
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    BooleanType,
    ByteType,
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
    StructField,
    StructType,
    TimestampNTZType,
    TimestampType,
)

from tests.spark.helpers import data_files

#: every parity test runs with the Python writer and with the JVM engine (conftest.py)
pytestmark = pytest.mark.usefixtures("each_engine")

Row = tuple[Any, ...]
DATETIME_TYPES = (DateType, TimestampType, TimestampNTZType)

NAN, INF = float("nan"), float("inf")
STAMPS = [
    datetime.datetime(2024, 3, 10, 2, 30, 0, 500),  # DST gap in Los Angeles
    datetime.datetime(1850, 1, 1, 0, 0, 0, 123456),  # LMT: offset -07:52:58
    datetime.datetime(1, 1, 1),  # year 0 in Los Angeles
    datetime.datetime(9999, 12, 31, 23, 59, 59, 999999),
    datetime.datetime(2024, 7, 1, 12, 0),
]
DATES = [datetime.date(1, 1, 1), datetime.date(1899, 12, 31), datetime.date(9999, 12, 31)]
STRINGS = ["plain", "", "a/b", " x y ", "é%", "=:?#", "{[]}^", 'q"uo,te', "back\\slash", "l\ni"]

#: every partition column type with its awkward values (None added to each)
PARTITION_COLUMNS: dict[str, tuple[DataType, list[Any]]] = {
    "p_byte": (ByteType(), [1, -128, 127]),
    "p_short": (ShortType(), [-32768, 7]),
    "p_int": (IntegerType(), [0, -1, 2147483647]),
    "p_long": (LongType(), [-9223372036854775808, 42]),
    "p_bool": (BooleanType(), [True, False]),
    "p_float": (FloatType(), [NAN, -0.0, 0.0, 1e20, 1.1, 3.4e38, 1e-5, INF]),
    "p_double": (DoubleType(), [NAN, -0.0, -INF, 1e7, 9999999.0, 0.001, 1e-4, 123456789.125]),
    "p_dec": (DecimalType(38, 18), [Decimal(0), Decimal("1e-7"), Decimal("-12.5")]),
    "p_dec0": (DecimalType(10, 0), [Decimal(0), Decimal(12345)]),
    "p_date": (DateType(), DATES),
    "p_ts": (TimestampType(), STAMPS),
    "p_ntz": (TimestampNTZType(), STAMPS[:2]),
    "p_str": (StringType(), [s for s in STRINGS if "\n" not in s] + ["tab\t", "ünï 日本"]),
}


def frame(
    spark: SparkSession, rows: Sequence[Row], schema: StructType, slices: int = 2
) -> DataFrame:
    return spark.createDataFrame(spark.sparkContext.parallelize(list(rows), slices), schema)


def write_both(
    df: DataFrame,
    base: Path,
    fmt: str,
    *,
    partition_by: Sequence[str] = (),
    mode: str = "append",
    options: Mapping[str, str] | None = None,
) -> tuple[Path, Path]:
    """(ours, native): the same write through aiocommit and through Spark's writer."""
    ours, native = base / "ours", base / "native"
    writer = df.write.mode(mode).format(fmt).options(**(options or {}))
    if partition_by:
        writer = writer.partitionBy(*partition_by)
    writer.save(str(native))
    mine = df.write.format("aiocommit").mode(mode).option("format", fmt)
    mine = mine.options(**(options or {}))
    if partition_by:
        mine = mine.option("partitionBy", ",".join(partition_by))
    mine.save(str(ours))
    return ours, native


def comparable(value: Any) -> Any:
    """NaN equals NaN, -0.0 differs from 0.0; rows compare by this."""
    if isinstance(value, float):
        return "NaN" if math.isnan(value) else repr(value)
    if isinstance(value, list | tuple):
        return [comparable(v) for v in value]
    if isinstance(value, dict):
        return sorted((repr(k), comparable(v)) for k, v in value.items())
    return value


def read_back(spark: SparkSession, path: Path, fmt: str, **options: str) -> tuple[str, list[str]]:
    """(schema as Spark's reader infers it, sorted rows) through Spark's own reader."""
    df = spark.read.format(fmt).options(**options).load(str(path))
    # dates and timestamps as Spark's strings: Python cannot hold year 0 or 10000
    df = df.select(
        *[
            df[f.name].cast("string") if isinstance(f.dataType, DATETIME_TYPES) else df[f.name]
            for f in sorted(df.schema.fields, key=lambda f: f.name)
        ]
    )
    rows = sorted(repr(comparable(tuple(r))) for r in df.collect())
    return df.schema.simpleString(), rows


def leaf_dirs(root: Path) -> set[str]:
    return {str(Path(p).parent) for p in data_files(root)}


def assert_parity(
    spark: SparkSession, ours: Path, native: Path, fmt: str, **read_options: str
) -> None:
    assert leaf_dirs(ours) == leaf_dirs(native)
    assert read_back(spark, ours, fmt, **read_options) == read_back(
        spark, native, fmt, **read_options
    )
    ours_files, native_files = len(data_files(ours)), len(data_files(native))
    assert abs(ours_files - native_files) <= 0.1 * native_files, (ours_files, native_files)


def test_partition_directory_names_of_every_type(spark: SparkSession, tmp_path: Path) -> None:
    names = list(PARTITION_COLUMNS)
    schema = StructType(
        [StructField("id", LongType())]
        + [StructField(n, t) for n, (t, _) in PARTITION_COLUMNS.items()]
    )
    longest = max(len(values) for _, values in PARTITION_COLUMNS.values()) + 1
    rows = [
        (i, *[[*values, None][i % (len(values) + 1)] for _, values in PARTITION_COLUMNS.values()])
        for i in range(longest)
    ]
    df = frame(spark, rows, schema)
    ours, native = write_both(df, tmp_path, "parquet", partition_by=names)
    assert_parity(spark, ours, native, "parquet")
    assert "p_dec=0.000000100000000000" in {d.split("/")[7] for d in leaf_dirs(ours)}
    # and column by column: each type's names alone, in one write each for parquet
    for name in ("p_float", "p_ts"):
        base = tmp_path / name
        ours, native = write_both(df.select("id", name), base, "parquet", partition_by=[name])
        assert leaf_dirs(ours) == leaf_dirs(native)


SCALARS: list[tuple[str, DataType, list[Any]]] = [
    ("c_byte", ByteType(), [1, -128, 127]),
    ("c_short", ShortType(), [-32768, 7]),
    ("c_int", IntegerType(), [0, -1, 2147483647]),
    ("c_long", LongType(), [-9223372036854775808, 42]),
    ("c_bool", BooleanType(), [True, False]),
    ("c_float", FloatType(), [NAN, -0.0, 1e20, 1.1, 1e-5, INF, -INF]),
    ("c_double", DoubleType(), [NAN, -0.0, INF, -INF, 1e7, 0.1, 1e-300, 123456789.125]),
    ("c_dec", DecimalType(38, 18), [Decimal(0), Decimal("1e-7"), Decimal("-12.5")]),
    ("c_dec0", DecimalType(10, 0), [Decimal(0), Decimal(12345)]),
    ("c_date", DateType(), DATES),
    ("c_ts", TimestampType(), STAMPS),
    ("c_ntz", TimestampNTZType(), STAMPS[:2]),
    ("c_str", StringType(), STRINGS),
]
BINARY = ("c_bin", BinaryType(), [b"\x00ab", b"", b"\xff"])
NESTED: list[tuple[str, DataType, list[Any]]] = [
    ("c_map", MapType(StringType(), IntegerType()), [{"k": 1, "z": None}, {}]),
    ("c_arr", ArrayType(DoubleType()), [[1.5, -INF, None], []]),
    (
        "c_struct",
        StructType([StructField("x", LongType()), StructField("y", StringType())]),
        [(5, None), (None, "s")],
    ),
    ("c_nested", ArrayType(MapType(StringType(), DecimalType(10, 2))), [[{"a": Decimal("1.50")}]]),
]
INTERVAL = ("c_interval", DayTimeIntervalType(), [datetime.timedelta(days=1, microseconds=7)])


def typed_frame(
    spark: SparkSession, columns: list[tuple[str, DataType, list[Any]]], rows: int = 24
) -> DataFrame:
    schema = StructType(
        [StructField("id", LongType()), StructField("part", StringType())]
        + [StructField(n, t) for n, t, _ in columns]
    )
    data = [
        (i, "ab"[i % 2], *[[*values, None][i % (len(values) + 1)] for _, _, values in columns])
        for i in range(rows)
    ]
    return frame(spark, data, schema)


@pytest.mark.parametrize(
    ("fmt", "columns", "read_options"),
    [
        ("parquet", [*SCALARS, BINARY, *NESTED, INTERVAL], {}),
        ("json", [*SCALARS, BINARY, *NESTED], {}),
        ("json", [*SCALARS, *NESTED], {"primitivesAsString": "true"}),
        ("csv", [*SCALARS, BINARY], {}),  # every field read back as a string: exact text
        ("csv", SCALARS, {"inferSchema": "true", "header": "true"}),
    ],
    ids=["parquet", "json", "json-as-text", "csv-text", "csv-inferred"],
)
def test_every_type_reads_back_as_from_sparks_writer(
    spark: SparkSession,
    tmp_path: Path,
    fmt: str,
    columns: list[tuple[str, DataType, list[Any]]],
    read_options: dict[str, str],
) -> None:
    options = {"header": "true"} if read_options.get("header") else {}
    df = typed_frame(spark, columns)
    ours, native = write_both(df, tmp_path, fmt, partition_by=["part"], options=options)
    assert_parity(spark, ours, native, fmt, **read_options)


@pytest.mark.parametrize(
    ("fmt", "options"),
    [
        ("parquet", {"compression": "zstd", "maxRecordsPerFile": "7"}),
        ("parquet", {"compression": "gzip"}),
        ("parquet", {"compression": "none"}),
        ("csv", {"compression": "gzip", "maxRecordsPerFile": "5"}),
        ("json", {"compression": "gzip"}),
    ],
)
def test_compression_and_max_records_per_file(
    spark: SparkSession, tmp_path: Path, fmt: str, options: dict[str, str]
) -> None:
    df = typed_frame(spark, SCALARS[:6], rows=60)
    ours, native = write_both(df, tmp_path, fmt, partition_by=["part"], options=options)
    assert_parity(spark, ours, native, fmt)

    def suffixes(root: Path) -> dict[str, int]:
        found: dict[str, int] = {}
        for name in data_files(root):
            match = re.search(r"[-.]c\d{3}(\..+)$", name)  # after c000, c001...
            assert match is not None, name
            suffix = match.group(1)  # ".zstd.parquet"
            found[suffix] = found.get(suffix, 0) + 1
        return found

    assert suffixes(ours) == suffixes(native)  # exact counts with maxRecordsPerFile


def test_save_modes(spark: SparkSession, tmp_path: Path) -> None:
    """append, append, static overwrite, dynamic overwrite: after each, both destinations
    hold the same rows in the same directories."""
    first = typed_frame(spark, SCALARS[:3], rows=20)
    second = typed_frame(spark, SCALARS[:3], rows=6).where("part = 'a'")
    for mode, df, options in [
        ("append", first, {}),
        ("append", second, {}),
        ("overwrite", first, {}),
        ("overwrite", second, {"partitionOverwriteMode": "dynamic"}),
    ]:
        ours, native = write_both(
            df, tmp_path, "parquet", partition_by=["part"], mode=mode, options=options
        )
        assert leaf_dirs(ours) == leaf_dirs(native)
        assert read_back(spark, ours, "parquet") == read_back(spark, native, "parquet")
    assert len(read_back(spark, ours, "parquet")[1]) == 10 + 3  # b's 10 kept, a replaced


def test_many_partitions_match_sparks_file_count(spark: SparkSession, tmp_path: Path) -> None:
    """More partition values per task than the writer keeps open (100): Spark writes one
    file per value per task, and so must we (not one per value per Arrow batch: three
    10,000-row batches here)."""
    df = spark.range(0, 30_000, numPartitions=1).selectExpr(
        "id", "cast(id * 7919 % 120 as int) as k", "cast(id as string) as s"
    )
    ours, native = write_both(df, tmp_path, "parquet", partition_by=["k"])
    assert len(data_files(ours)) == len(data_files(native)) == 120
    assert leaf_dirs(ours) == leaf_dirs(native)
    assert read_back(spark, ours, "parquet") == read_back(spark, native, "parquet")


#: values that exercise every quoting rule of Spark's CSV writer (first column: comment)
TRICKY = ["#hash", 'a"b', "back\\slash", "  sp  ", "", "x,y", "x;y", "l\ni", "q'", "t\tab", "x||y"]


def text_frame(spark: SparkSession) -> DataFrame:
    columns: list[tuple[str, DataType, list[Any]]] = [
        ("c_str", StringType(), TRICKY),
        ("c_other", StringType(), ["'quoted'", "\\", "é日", " ", "c\x01t\x1fl"]),
        ("c_date", DateType(), DATES),
        ("c_ts", TimestampType(), STAMPS),
        ("c_ntz", TimestampNTZType(), STAMPS[:2]),
        ("c_double", DoubleType(), [NAN, -0.0, 1e7, 0.1]),
        ("c_dec", DecimalType(38, 18), [Decimal("1e-7"), Decimal("-12.5")]),
    ]
    schema = StructType([StructField(n, t) for n, t, _ in columns])
    data = [
        tuple([[*values, None][i % (len(values) + 1)] for _, _, values in columns])
        for i in range(24)
    ]
    return frame(spark, data, schema)


def decoded_files(root: Path, codec: str | None, encoding: str) -> list[str]:
    """Every data file's text (decompressed with Hadoop's codec, decoded), sorted."""
    import bz2
    import gzip
    import struct
    import zlib

    import pyarrow as pa

    def hadoop_blocks(data: bytes, name: str) -> bytes:
        out, i = b"", 0
        while i < len(data):
            raw_length, packed_length = struct.unpack(">II", data[i : i + 8])
            packed = data[i + 8 : i + 8 + packed_length]
            out += pa.decompress(packed, raw_length, codec=name, asbytes=True)
            i += 8 + packed_length
        return out

    unpack: Callable[[bytes], bytes] = {
        None: lambda d: d,
        "gzip": gzip.decompress,
        "bzip2": bz2.decompress,
        "deflate": zlib.decompress,
        "lz4": lambda d: hadoop_blocks(d, "lz4_raw"),
        "snappy": lambda d: hadoop_blocks(d, "snappy"),
    }[codec]
    return sorted(unpack((root / name).read_bytes()).decode(encoding) for name in data_files(root))


@pytest.mark.parametrize(
    ("fmt", "options", "encoding"),
    [
        (
            "csv",
            {
                "sep": "||",
                "quote": "'",
                "escape": "'",
                "header": "true",
                "nullValue": "NULL",
                "emptyValue": "EMPTY",
                "compression": "bzip2",
                "dateFormat": "dd/MM/yyyy EEE",
                "timestampFormat": "yyyy-MM-dd HH:mm:ss.SSSSSS XX a hh",
                "timestampNTZFormat": "yyyy/MM/dd HH:mm",
            },
            "utf-8",
        ),
        (
            "csv",
            {
                "quoteAll": "true",
                "escapeQuotes": "false",
                "ignoreLeadingWhiteSpace": "false",
                "ignoreTrailingWhiteSpace": "false",
                "lineSep": "\r\n",
                "encoding": "UTF-16",
                "compression": "deflate",
                "charToEscapeQuoteEscaping": "#",
            },
            "utf-16",
        ),
        (
            "csv",
            {"quote": "", "lineSep": ";", "charset": "ISO-8859-1", "codec": "lz4", "sep": "\\t"},
            "iso-8859-1",
        ),
        (
            "csv",
            {"escape": '"', "compression": "snappy", "comment": "x", "header": "true"},
            "utf-8",
        ),
        (
            "json",
            {
                "ignoreNullFields": "false",
                "lineSep": "\r\n",
                "dateFormat": "yyyyMMdd",
                "timestampFormat": "yyyy-MM-dd'T'HH:mm:ssZ",
                "encoding": "UTF-16LE",
                "compression": "gzip",
            },
            "utf-16-le",
        ),
        (
            "json",
            {
                "compression": "snappy",
                "timestampNTZFormat": "yyyy-MM-dd HH:mm:ss.SSSSSS",
                "timeZone": "Asia/Kolkata",
                "pretty": "true",
            },
            "utf-8",
        ),
    ],
    ids=[
        "csv-sep-quote-null",
        "csv-quoteall-utf16",
        "csv-noquote-latin1",
        "csv-escape",
        "json-nulls",
        "json-zone",
    ],
)
def test_text_writer_options_write_what_sparks_writer_writes(
    spark: SparkSession, tmp_path: Path, fmt: str, options: dict[str, str], encoding: str
) -> None:
    """Spark's CSV/JSON writer options: the same bytes (decompressed and decoded) as
    Spark's own writer, and the same rows through Spark's reader with those options."""
    ours, native = write_both(text_frame(spark), tmp_path, fmt, options=options)
    codec = options.get("compression", options.get("codec"))
    assert decoded_files(ours, codec, encoding) == decoded_files(native, codec, encoding)
    assert sorted(data_files(ours)) and {Path(p).suffixes[-1] for p in data_files(ours)} == {
        Path(p).suffixes[-1] for p in data_files(native)
    }
    read_options = {k: v for k, v in options.items() if k not in ("compression", "codec")}
    if read_options.pop("pretty", None):
        read_options["multiLine"] = "true"  # one object over several lines
    assert read_back(spark, ours, fmt, **read_options) == read_back(
        spark, native, fmt, **read_options
    )


def test_errorifexists_and_ignore_as_sparks_writer(spark: SparkSession, tmp_path: Path) -> None:
    """The default mode (errorifexists) and ignore: on a new path both write what Spark's
    writer writes; on an existing path errorifexists raises Spark's own error
    (``AnalysisException``, condition ``PATH_ALREADY_EXISTS``) and ignore leaves the data."""
    from pyspark.errors import AnalysisException

    first = typed_frame(spark, SCALARS[:3], rows=12)
    second = typed_frame(spark, SCALARS[:3], rows=5)
    for mode in ("errorifexists", "ignore"):
        ours, native = write_both(first, tmp_path / mode, "csv", partition_by=["part"], mode=mode)
        assert_parity(spark, ours, native, "csv")
        before = (data_files(ours), data_files(native))
        if mode == "ignore":
            write_both(second, tmp_path / mode, "csv", partition_by=["part"], mode=mode)
        else:
            conditions = []
            for writer, target in (
                (second.write.format("csv"), native),  # Spark's default mode: errorifexists
                (second.write.format("aiocommit").option("format", "csv"), ours),
            ):
                with pytest.raises(AnalysisException) as raised:
                    writer.save(str(target))
                conditions.append(raised.value.getCondition())
            assert conditions == ["PATH_ALREADY_EXISTS"] * 2
        assert (data_files(ours), data_files(native)) == before
        assert_parity(spark, ours, native, "csv")


def footer_schema(root: Path) -> Any:
    """Spark's schema JSON from the footer of the first data file below ``root``."""
    import json

    import pyarrow.parquet as pq

    first = sorted(data_files(root))[0]
    metadata = pq.read_schema(root / first).metadata
    return json.loads(metadata[b"org.apache.spark.sql.parquet.row.metadata"])


def test_variant_char_varchar_and_intervals(spark: SparkSession, tmp_path: Path) -> None:
    """variant, char(n)/varchar(n) (from a table) and day-time intervals (Parquet, and CSV/
    JSON as ``INTERVAL '...' DAY TO SECOND`` text) as Spark's own writers write them; a
    year-month interval (which pyspark's Arrow transfer cannot carry) and, for text, a
    nested day-time interval are refused before any task, naming the column and the cast."""
    from pyspark.errors import AnalysisException

    table = f"chars_{tmp_path.name}".replace("-", "_")
    spark.sql(
        f"CREATE TABLE {table} (id INT, c CHAR(5), v VARCHAR(8)) USING parquet "
        f"LOCATION '{tmp_path / 'table'}'"
    )
    spark.sql(f"INSERT INTO {table} VALUES (1, 'ab', 'xyz'), (2, NULL, ''), (3, 'abcde', 'é')")
    typed = spark.sql(
        'SELECT id, c, v, parse_json(\'{"a":\' || id || \',"b":[1.5,null,"s"],'
        "\"t\":{\"u\":true}}') AS j, INTERVAL '1' DAY * id + INTERVAL '0.000007' SECOND AS dt "
        f"FROM {table}"
    )
    ours, native = write_both(typed, tmp_path / "parquet", "parquet")
    assert_parity(spark, ours, native, "parquet")
    assert footer_schema(ours) == footer_schema(native)
    assert '"__CHAR_VARCHAR_TYPE_STRING":"char(5)"' in json_text(footer_schema(ours))
    hours = typed.selectExpr("*", "CAST(dt AS INTERVAL HOUR TO MINUTE) AS hm")
    for df, fmt in ((hours, "json"), (hours.drop("j"), "csv")):
        ours, native = write_both(df, tmp_path / fmt, fmt)
        assert decoded_files(ours, None, "utf-8") == decoded_files(native, None, "utf-8")
        assert_parity(spark, ours, native, fmt)

    months = spark.sql("SELECT id, INTERVAL '1-2' YEAR TO MONTH AS ym FROM range(2)")
    nested = typed.selectExpr("id", "array(dt) AS dts")
    for df, fmt, column in ((months, "parquet", "ym"), (nested, "json", "dts[]")):
        target = tmp_path / f"refused-{fmt}"
        pattern = rf"column {re.escape(repr(column))} .*cast\('string'\)"
        with pytest.raises(AnalysisException, match=pattern):  # Arrow cannot carry them
            df.write.format("aiocommit").option("engine", "python").option("format", fmt).save(
                str(target)
            )
        assert not data_files(target)


def json_text(value: Any) -> str:
    import json

    return json.dumps(value, separators=(",", ":"))


def parquet_column_types(root: Path) -> set[tuple[str, str, str]]:
    """(column, physical type, logical type) of every data file's columns."""
    import pyarrow.parquet as pq

    found = set()
    for name in data_files(root):
        schema = pq.ParquetFile(root / name).schema
        for i in range(len(schema)):
            column = schema.column(i)
            found.add((column.name, column.physical_type, str(column.logical_type)))
    return found


def test_parquet_timestamps_follow_sparks_output_timestamp_type(
    spark: SparkSession, tmp_path: Path
) -> None:
    """``spark.sql.parquet.outputTimestampType``: INT96 (Spark's default), TIMESTAMP_MICROS
    and TIMESTAMP_MILLIS (values truncated, as Spark truncates them) stored as Spark stores
    them; with a timestamp_ntz column beside them, timestamps stay INT64 microseconds
    (pyarrow applies one setting to all timestamps) and read back the same."""
    conf = "spark.sql.parquet.outputTimestampType"
    stamps = typed_frame(spark, [SCALARS[10]], rows=12)  # c_ts
    both = typed_frame(spark, SCALARS[10:12], rows=12)  # c_ts and c_ntz
    try:
        for timestamp_type in ("INT96", "TIMESTAMP_MILLIS", "TIMESTAMP_MICROS"):
            spark.conf.set(conf, timestamp_type)
            base = tmp_path / timestamp_type
            ours, native = write_both(stamps, base / "ts", "parquet")
            assert parquet_column_types(ours) == parquet_column_types(native)
            assert read_back(spark, ours, "parquet") == read_back(spark, native, "parquet")
            ours, native = write_both(both, base / "ntz", "parquet")
            assert read_back(spark, ours, "parquet") == read_back(spark, native, "parquet")
        assert ("c_ts", "INT96", "None") in parquet_column_types(tmp_path / "INT96" / "ts" / "ours")
    finally:
        spark.conf.unset(conf)


def table_details(spark: SparkSession, name: str) -> dict[str, str]:
    rows = spark.sql(f"DESCRIBE TABLE EXTENDED {name}").collect()
    return {str(r[0]).strip(): str(r[1] or "").strip() for r in rows if r[0]}


def test_save_as_table_without_a_path_makes_a_managed_table(
    spark: SparkSession, tmp_path: Path
) -> None:
    """As Spark's own ``saveAsTable``: no ``path`` option makes a managed table in the
    warehouse (``DROP TABLE`` deletes its files), with the same rows."""
    df = typed_frame(spark, SCALARS[:3], rows=10)
    names = {"ours": f"managed_ours_{tmp_path.name}", "native": f"managed_native_{tmp_path.name}"}
    names = {k: v.replace("-", "_") for k, v in names.items()}
    try:
        df.write.partitionBy("part").saveAsTable(names["native"])
        df.write.format("aiocommit").partitionBy("part").saveAsTable(names["ours"])
        described = {}
        for who, name in names.items():
            details = table_details(spark, name)
            described[who] = (details["Type"], details["Provider"], Path(details["Location"]))
            assert described[who][2].name == name
        assert described["ours"][:2] == described["native"][:2] == ("MANAGED", "parquet")
        ours = spark.table(names["ours"]).select(*sorted(df.columns))
        native = spark.table(names["native"]).select(*sorted(df.columns))
        assert sorted(map(repr, ours.collect())) == sorted(map(repr, native.collect()))
        # a CSV table keeps its writer options, so its reader reads what was written
        names["csv"] = names["ours"] + "_csv"
        csv_options = {"format": "csv", "sep": ";", "header": "true", "nullValue": "-"}
        df.write.format("aiocommit").options(**csv_options).saveAsTable(names["csv"])
        from_csv = spark.table(names["csv"]).select(*sorted(df.columns))
        assert sorted(map(repr, from_csv.collect())) == sorted(map(repr, native.collect()))
        details = table_details(spark, names["csv"])
        described["csv"] = (details["Type"], details["Provider"], Path(details["Location"]))
    finally:
        for name in names.values():
            spark.sql(f"DROP TABLE IF EXISTS {name}")
    for who in names:
        location = described[who][2]
        assert not location.exists(), location  # managed: the files went with the table


def test_spark_connect_client_writes_with_every_mode_and_partition_by(
    spark: SparkSession, tmp_path: Path
) -> None:
    """Through Spark Connect (a server in the test session's driver, a client in its own
    process): ``register(spark)`` wraps Connect's DataFrameWriter too, so the default save
    mode and ``partitionBy`` work there as on a classic session."""
    import json
    import subprocess
    import sys

    pytest.importorskip("grpc")  # the spark-connect extra (in dev) installs the client
    port = spark.conf.get("spark.connect.grpc.binding.port")
    dest = tmp_path / "connect"
    done = subprocess.run(
        [sys.executable, "-m", "tests.spark.connect_client", str(port), str(dest)],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=Path(__file__).parents[2],
    )
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result == {"session": "pyspark.sql.connect.session", "existing": "PATH_ALREADY_EXISTS"}
    assert leaf_dirs(dest) == {"k=0", "k=1", "k=2"}
    assert sorted(r.id for r in spark.read.parquet(str(dest)).collect()) == list(range(12))
