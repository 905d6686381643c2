"""What ``register(spark)`` adds to pyspark's classic ``DataFrameWriter`` so that
``df.write.format("aiocommit")`` behaves like Spark's own writer.

Spark's Python data source API cannot do these things by itself (pyspark 4.3):

* ``writer()`` runs in a Python worker of the driver that sees neither the session nor
  its confs, so ``spark.sql.sources.partitionOverwriteMode``,
  ``spark.sql.files.maxRecordsPerFile``, ``spark.sql.parquet.compression.codec`` and
  ``spark.sql.session.timeZone`` are read here, in the user's process, and passed as the
  matching options (an explicit option wins, as in Spark);
* Spark refuses ``mode("errorifexists")`` (the default) and ``mode("ignore")`` for Python
  data sources: they are sent as ``append`` plus the ``aiocommit.saveMode`` option, and
  ``writer()`` checks the destination;
* Spark refuses ``.partitionBy(...)``: it becomes the ``partitionBy`` option;
* a write from a thread other than the one that created the session fails with
  ``DATA_SOURCE_NOT_FOUND`` (the JVM looks the source up in the thread's active
  session): the DataFrame's session is made active for the calling thread;
* Spark checks every row's Arrow batch size for Python workers, which costs more CPU
  than the rest of the transfer: the check is lifted for the write (``transfer``);
* a failure's useful line is the last of a long Python traceback inside Spark's
  message: it is repeated as the first line;
* ``saveAsTable`` and ``insertInto`` give a Python data source no path: they are
  written to the table's location (a new table's: the ``path`` option, else the
  warehouse), then the table is created over it (``CREATE TABLE ... USING parquet|csv|json
  LOCATION``) or refreshed, so catalog readers use Spark's own file readers.

Every other format goes through the original methods unchanged. Spark Connect's
``DataFrameWriter`` (a different class) gets the same wrapping where pyspark's Connect
client is installed, except ``saveAsTable``/``insertInto``: its writer holds a plan, not a
DataFrame, so table writes there are Spark's (and fail for a Python data source).
"""

from __future__ import annotations

import functools
import re
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from aiocommit.errors import InvalidInput
from aiocommit.integrations.spark import seam, tables
from aiocommit.integrations.spark.schema import sparks_refusal
from aiocommit.integrations.spark.session_conf import (
    ERROR_MODES,
    all_confs,
    hadoop_session_options,
    option_text,
    qualified_path,
    session_conf,
)
from aiocommit.integrations.spark.settings import (
    CONNECT_TABLE_WRITES_REFUSED,
    JAVA_VERSION_OPTION,
    SAVE_MODE_OPTION,
    STREAM_APPEND_ONLY,
    TABLE_WRITES_REFUSED,
    streaming_refused,
)
from aiocommit.integrations.spark.spark_jvm import SparkCondition, java_version, sparks_exception
from aiocommit.integrations.spark.transfer import lifted_arrow_byte_cap

if TYPE_CHECKING:
    from pyspark.sql.readwriter import DataFrameWriter
    from pyspark.sql.types import DataType, StructType

SOURCE_NAME = "aiocommit"

#: session conf -> the option it sets when the write does not set it
SESSION_CONFS = (
    ("spark.sql.sources.partitionOverwriteMode", "partitionoverwritemode"),
    ("spark.sql.files.maxRecordsPerFile", "maxrecordsperfile"),
    ("spark.sql.session.timeZone", "timezone"),
    ("spark.sql.caseSensitive", "casesensitive"),
)
PARQUET_CODEC_CONF = "spark.sql.parquet.compression.codec"
JSON_NULL_FIELDS_CONF = "spark.sql.jsonGenerator.ignoreNullFields"
PARQUET_TIMESTAMP_CONF = "spark.sql.parquet.outputTimestampType"

#: Spark's names for errorifexists

_STATE = "_aiocommit_recorded"
_INSTALLED = "_aiocommit_installed"


class Recorded:
    """What the user asked this DataFrameWriter for, as far as aiocommit cares."""

    def __init__(self) -> None:
        self.format: str | None = None
        self.mode: str | None = None
        self.partition_by: list[str] = []
        self.options: dict[str, str] = {}
        #: ``bucketBy``/``sortBy`` as called, which aiocommit refuses for tables
        self.bucketing: list[str] = []


def _apply_arguments(
    writer: DataFrameWriter,
    mode: str | None,
    partition_by: str | list[str] | None,
    format: str | None,
    values: dict[str, Any],
) -> None:
    """Apply ``save``/``saveAsTable``'s keyword arguments as Spark's own methods do."""
    writer.mode(mode).options(**values)
    if partition_by is not None:
        writer.partitionBy(partition_by)
    if format is not None:
        writer.format(format)


def _recorded(writer: DataFrameWriter) -> Recorded:
    state = writer.__dict__.get(_STATE)
    if state is None:
        state = Recorded()
        writer.__dict__[_STATE] = state
    return state


def install() -> None:
    """Wrap the methods of pyspark's classic ``DataFrameWriter`` and, where pyspark's
    Connect client is installed, of Spark Connect's (once per process; idempotent).
    ``seam.PysparkChanged`` naming the method when this pyspark lacks one."""
    for writer_class, tables_too in seam.writer_classes():
        _install_on(writer_class, tables_too=tables_too)
    for writer_v2 in seam.writer_v2_classes():
        _refuse_using_aiocommit(writer_v2)
        install_cause_first(writer_v2, seam.WRITER_V2_METHODS)
    for stream_writer in seam.stream_writer_classes():
        _refuse_streaming(stream_writer)
    # SQL INSERT/CTAS into a table USING aiocommit fail in writer(): cause first there too
    for session_class in seam.session_classes():
        install_cause_first(session_class, ("sql",))


def _refuse_using_aiocommit(writer_class: type[Any]) -> None:
    """``df.writeTo(table).using("aiocommit")`` fails at once with the cause and the
    pattern to use (Spark would fail in the data source's ``writer()``, its message
    starting with a Python traceback)."""
    if getattr(writer_class, _INSTALLED, False):
        return
    original_using = writer_class.using

    def using(self: Any, provider: str) -> Any:
        if provider.strip().lower() == SOURCE_NAME:
            raise InvalidInput(TABLE_WRITES_REFUSED)
        return original_using(self, provider)

    writer_class.using = using
    setattr(writer_class, _INSTALLED, True)


def _refuse_streaming(writer_class: type[Any]) -> None:
    """``df.writeStream.format("aiocommit")...start()`` (or ``toTable``) fails at once in
    one line naming the release and the ``foreachBatch`` recipe (Spark would fail at
    the first micro-batch, in a long traceback)."""
    if getattr(writer_class, _INSTALLED, False):
        return
    original_format = writer_class.format

    def format(self: Any, source: str) -> Any:
        self.__dict__[_STREAM_FORMAT] = source.strip().lower()
        return original_format(self, source)

    writer_class.format = format
    original_output_mode = writer_class.outputMode

    def outputMode(self: Any, outputMode: str) -> Any:
        self.__dict__[_STREAM_MODE] = outputMode.strip().lower()
        return original_output_mode(self, outputMode)

    writer_class.outputMode = outputMode
    for name in ("start", "toTable"):
        original = getattr(writer_class, name, None)
        if callable(original):
            setattr(writer_class, name, _refusing(original))
    setattr(writer_class, _INSTALLED, True)


_STREAM_FORMAT = "_aiocommit_stream_format"
_STREAM_MODE = "_aiocommit_stream_output_mode"


def _refusing(original: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(original)
    def method(self: Any, *args: Any, **kwargs: Any) -> Any:
        source = kwargs.get("format") or self.__dict__.get(_STREAM_FORMAT)
        mode = str(kwargs.get("outputMode") or self.__dict__.get(_STREAM_MODE) or "append")
        if str(source or "").strip().lower() == SOURCE_NAME:
            if not seam.HAS_DATA_SOURCES:
                raise InvalidInput(streaming_refused(seam.VERSION))
            if mode.strip().lower() != "append":
                raise InvalidInput(STREAM_APPEND_ONLY)
            spark = getattr(self, "_spark", None)  # a classic writer's session
            if spark is not None:
                # the JVM looks the source up in the thread's active session, which a
                # thread's new py4j connection may not have
                ensure_registered(spark, connect=False)
                with seam.active(spark):
                    return original(self, *args, **kwargs)
        return original(self, *args, **kwargs)

    return method


def _refusing_connect_tables(original: Callable[..., Any]) -> Callable[..., Any]:
    """A Connect writer's ``saveAsTable``/``insertInto``: refused in one line when the
    format is aiocommit (Spark would fail in ``writer()``, naming no cause on line 1),
    else Spark's own with an aiocommit error put cause first."""
    spark_table_write = cause_first(original)

    @functools.wraps(original)
    def method(self: Any, *args: Any, **kwargs: Any) -> Any:
        fmt = kwargs.get("format") or _recorded(self).format
        if str(fmt or "").strip().lower() == SOURCE_NAME:
            raise InvalidInput(CONNECT_TABLE_WRITES_REFUSED)
        return spark_table_write(self, *args, **kwargs)

    return method


def _install_on(writer_class: type[DataFrameWriter], *, tables_too: bool) -> None:
    if getattr(writer_class, _INSTALLED, False):
        return
    originals = seam.wrapped_methods(writer_class, tables_too)
    # the chaining methods return the writer
    original_format: Callable[..., DataFrameWriter] = originals["format"]
    original_mode: Callable[..., DataFrameWriter] = originals["mode"]
    original_partition_by: Callable[..., DataFrameWriter] = originals["partitionBy"]
    original_option: Callable[..., DataFrameWriter] = originals["option"]
    original_options: Callable[..., DataFrameWriter] = originals["options"]
    original_save = originals["save"]
    original_save_as_table = originals.get("saveAsTable")
    original_insert_into = originals.get("insertInto")
    original_bucket_by: Callable[..., DataFrameWriter] = originals["bucketBy"]
    original_sort_by: Callable[..., DataFrameWriter] = originals["sortBy"]

    def format(self: DataFrameWriter, source: str) -> DataFrameWriter:
        _recorded(self).format = source.strip().lower()
        return original_format(self, source)

    def mode(self: DataFrameWriter, saveMode: str | None) -> DataFrameWriter:
        if saveMode is not None:
            _recorded(self).mode = saveMode.strip().lower()
        return original_mode(self, saveMode)

    def partitionBy(self: DataFrameWriter, *cols: Any) -> DataFrameWriter:
        names = cols[0] if len(cols) == 1 and isinstance(cols[0], list | tuple) else cols
        _recorded(self).partition_by = [str(c) for c in names]
        return original_partition_by(self, *cols)

    def bucketBy(self: DataFrameWriter, numBuckets: Any, col: Any, *cols: Any) -> DataFrameWriter:
        _recorded(self).bucketing.append(f"bucketBy({numBuckets}, {col!r}, ...)")
        return original_bucket_by(self, numBuckets, col, *cols)

    def sortBy(self: DataFrameWriter, col: Any, *cols: Any) -> DataFrameWriter:
        _recorded(self).bucketing.append(f"sortBy({col!r}, ...)")
        return original_sort_by(self, col, *cols)

    def option(self: DataFrameWriter, key: str, value: Any) -> DataFrameWriter:
        _recorded(self).options[key.lower()] = option_text(value)
        return original_option(self, key, value)

    def options(self: DataFrameWriter, **values: Any) -> DataFrameWriter:
        for key, value in values.items():
            _recorded(self).options[key.lower()] = option_text(value)
        return original_options(self, **values)

    def save(
        self: DataFrameWriter,
        path: str | None = None,
        format: str | None = None,
        mode: str | None = None,
        partitionBy: str | list[str] | None = None,
        **values: Any,
    ) -> None:
        _apply_arguments(self, mode, partitionBy, format, values)
        if _recorded(self).format != SOURCE_NAME:
            original_save(self, path)
            return
        spark = seam.writer_session(self)
        ensure_registered(spark, connect=False)  # a session made after register()
        if _saved_on_the_jvm(self, path):
            return
        _prepare(self, original_partition_by, original_option, original_mode)
        try:
            # the JVM looks the source up in the thread's active session
            with seam.active(spark), lifted_arrow_byte_cap(spark):
                original_save(self, path)
        except Exception as error:
            _put_cause_first(error)
            sparks = as_sparks_error(error, path, seam.writer_session(self))
            if sparks is error:
                raise
            raise sparks from error

    def saveAsTable(
        self: DataFrameWriter,
        name: str,
        format: str | None = None,
        mode: str | None = None,
        partitionBy: str | list[str] | None = None,
        **values: Any,
    ) -> None:
        _apply_arguments(self, mode, partitionBy, format, values)
        if _recorded(self).format != SOURCE_NAME:  # a table USING aiocommit fails inside
            assert original_save_as_table is not None
            cause_first(original_save_as_table)(self, name)
            return
        bucketing = _recorded(self).bucketing
        if bucketing:
            raise ValueError(
                f"aiocommit does not write bucketed tables ({'.'.join(bucketing)}): "
                "Spark's bucketed layout (one file per bucket, rows hashed with Spark's "
                "Murmur3) is not written; use Spark's own writer for them "
                "(df.write.bucketBy(...).saveAsTable(...)) or leave bucketBy/sortBy out"
            )
        tables.save_as_table(self, _recorded(self), name)

    def insertInto(self: DataFrameWriter, tableName: str, overwrite: bool | None = None) -> None:
        if _recorded(self).format != SOURCE_NAME:
            assert original_insert_into is not None
            cause_first(original_insert_into)(self, tableName, overwrite)
            return
        state = _recorded(self)
        if overwrite is not None:
            state.mode = "overwrite" if overwrite else "append"
        tables.insert_into(self, state, tableName)

    if tables_too:
        writer_class.saveAsTable = saveAsTable  # type: ignore[method-assign]
        writer_class.insertInto = insertInto  # type: ignore[method-assign]
        writer_class.bucketBy = bucketBy  # type: ignore[method-assign]
        writer_class.sortBy = sortBy  # type: ignore[method-assign]
    else:  # Spark Connect's: refused at once for aiocommit (the server has no path)
        for name in seam.TABLE_METHODS:
            setattr(writer_class, name, _refusing_connect_tables(getattr(writer_class, name)))
    writer_class.format = format  # type: ignore[method-assign]
    writer_class.mode = mode  # type: ignore[method-assign]
    writer_class.partitionBy = partitionBy  # type: ignore[method-assign]
    writer_class.option = option  # type: ignore[method-assign]
    writer_class.options = options  # type: ignore[method-assign]
    writer_class.save = save  # type: ignore[method-assign]
    setattr(writer_class, _INSTALLED, True)


def _saved_on_the_jvm(writer: DataFrameWriter, path: str | None) -> bool:
    """Write through the JVM engine (``jvm_engine``) when ``chosen_engine`` picks it:
    True when written. A Spark Connect writer holds a plan, not a DataFrame: the
    Python writer writes it (``engine=jvm`` there: ``InvalidInput``)."""
    from aiocommit.integrations.spark.jvm_engine import chosen_engine, requested_engine, write_jvm

    state = _recorded(writer)
    options = dict(state.options)
    df = seam.classic_dataframe(writer)
    if df is None:
        if requested_engine(options) == "jvm":
            raise InvalidInput(
                'engine="jvm" writes through a classic session\'s DataFrameWriter; on Spark '
                'Connect use aiocommit.integrations.spark.write(df, dest, engine="jvm")'
            )
        return False
    dest = path if path is not None else options.get("path")
    spark = seam.writer_session(writer)
    columns = state.partition_by or [
        c.strip() for c in options.get("partitionby", "").split(",") if c.strip()
    ]
    try:
        if chosen_engine(spark, dest, options, df=df, partitioned=bool(columns)) != "jvm":
            return False
        assert dest is not None  # chosen_engine picks the JVM only for a path
        fmt = options.pop("format", "parquet")
        for key in ("path", "partitionby"):
            options.pop(key, None)
        with seam.active(spark):
            write_jvm(
                df,
                dest,
                format=fmt,
                mode=state.mode or "errorifexists",
                partition_by=columns,
                options=options,
            )
    except Exception as error:
        if seam.error_text(error) is None and not hasattr(error, "java_exception"):
            # raised here, by aiocommit's checks or job commit: cause-first as on the
            # Python writer's path
            cause = str(error).splitlines()[0] if str(error) else ""
            line = cause_line(f"{type(error).__name__}: {cause}")
            prefixed = seam.prefix_first_line(error, line)
            if prefixed is not error:
                raise prefixed from error
        else:
            _put_cause_first(error)
        raise
    return True


_registering = threading.Lock()


def ensure_registered(spark: Any, *, connect: bool = True) -> None:
    """Register the ``aiocommit`` data source with ``spark`` unless it has it already:
    each session has its own registry (``newSession()`` starts empty). Spark refuses a
    registration while the thread's active session has the name (it checks there, not
    in the target session), so the target is made active for it and the thread's
    active session put back. A Connect session (the server keeps the registry) is
    registered only with ``connect``."""
    from aiocommit.integrations.spark.source import AiocommitDataSource

    with _registering:
        found = seam.has_data_source(spark, SOURCE_NAME)
        if found or (found is None and not connect):
            return
        with seam.active(spark):
            spark.dataSource.register(AiocommitDataSource)


def _prepare(
    writer: DataFrameWriter,
    original_partition_by: Callable[..., DataFrameWriter],
    original_option: Callable[..., DataFrameWriter],
    original_mode: Callable[..., DataFrameWriter],
) -> None:
    """Turn what Spark refuses for Python data sources into options ``writer()`` reads."""
    state = _recorded(writer)
    spark = seam.writer_session(writer)
    given = dict(state.options)
    fmt = given.get("format", "parquet").lower()
    schema = _schema_of(writer)
    if schema is not None:  # refuse what Spark's own writer refuses, with Spark's error
        sensitive = given.get("casesensitive", session_conf(spark, "spark.sql.caseSensitive") or "")
        partition_by = state.partition_by or given.get("partitionby", "").split(",")
        refusal = sparks_refusal(
            schema,
            fmt,
            tuple(c.strip() for c in partition_by),
            case_sensitive=sensitive.strip().lower() == "true",
        )
        if refusal is not None:
            raise sparks_exception(spark, refusal)
    if JAVA_VERSION_OPTION not in given and (schema is None or _has_floats(schema)):
        version = java_version(spark)
        if version is not None:
            original_option(writer, JAVA_VERSION_OPTION, str(version))
    if state.partition_by:
        columns = ",".join(state.partition_by)
        if given.get("partitionby", columns) != columns:
            raise ValueError(
                f"partitionBy({columns}) and .option('partitionBy', "
                f"{given['partitionby']!r}) disagree"
            )
        original_partition_by(writer)  # Spark refuses partition columns; the option has them
        original_option(writer, "partitionBy", columns)
    for key, value in session_options(spark, given).items():
        original_option(writer, key, value)
    mode = state.mode or "errorifexists"
    if mode in ERROR_MODES or mode == "ignore":
        original_mode(writer, "append")
        original_option(writer, SAVE_MODE_OPTION, "ignore" if mode == "ignore" else "errorifexists")
    else:  # set on every save: a reused writer must not keep an earlier save's mode
        original_option(writer, SAVE_MODE_OPTION, "")


def session_options(spark: Any, given: dict[str, str]) -> dict[str, str]:
    """The options the session's write confs set (lower-cased keys), for those of them
    the write's options (``given``, lower-cased keys) do not set: an explicit option wins."""
    confs = list(SESSION_CONFS)
    fmt = given.get("format", "parquet").lower()
    if fmt == "parquet":
        confs.append((PARQUET_CODEC_CONF, "compression"))
        confs.append((PARQUET_TIMESTAMP_CONF, "outputtimestamptype"))
    elif fmt == "json":
        confs.append((JSON_NULL_FIELDS_CONF, "ignorenullfields"))
    found: dict[str, str] = {}
    for conf, key in confs:
        value = session_conf(spark, conf)
        if key not in given and value:
            found[key] = value
    found.update(hadoop_session_options(all_confs(spark), given))
    return found


def _schema_of(writer: DataFrameWriter) -> StructType | None:
    """The schema of the DataFrame a classic writer writes; None for Spark Connect's
    writer, which holds a plan."""
    df = seam.classic_dataframe(writer)
    if df is None:
        return None
    schema: StructType = df.schema
    return schema


def _has_floats(data_type: DataType) -> bool:
    from pyspark.sql.types import ArrayType, DoubleType, FloatType, MapType, StructType

    if isinstance(data_type, DoubleType | FloatType):
        return True
    if isinstance(data_type, StructType):
        return any(_has_floats(f.dataType) for f in data_type.fields)
    if isinstance(data_type, ArrayType):
        return _has_floats(data_type.elementType)
    if isinstance(data_type, MapType):
        return _has_floats(data_type.keyType) or _has_floats(data_type.valueType)
    return False


def as_sparks_error(error: Exception, path: str | None, spark: Any) -> Exception:
    """Spark's own error for a destination that exists in ``errorifexists`` mode
    (``AnalysisException`` with condition ``PATH_ALREADY_EXISTS`` and SQLSTATE 42K04, as
    ``df.write.parquet`` raises it) instead of the data source's wrapper; else ``error``."""
    desc = seam.error_text(error)
    cause = one_line_cause(desc if desc is not None else str(error)) or ""
    if not cause.startswith("FileExistsError: [PATH_ALREADY_EXISTS]"):
        return error
    found = SparkCondition("PATH_ALREADY_EXISTS", {"outputPath": qualified_path(str(path))})
    return sparks_exception(spark, found)


#: the last ``SomeError: message`` line of a Python traceback inside Spark's message
_CAUSE = re.compile(r"^(?:[A-Za-z_][\w.]*\.)?([A-Z]\w*): (.+)$")
_EXCEPTION_SUFFIXES = ("Error", "Exception", "Failure", "Exit")
#: the most characters of an error's first line (the cause, cut with an ellipsis)
FIRST_LINE_LIMIT = 200


def _aiocommit_error_names() -> frozenset[str]:
    from aiocommit.errors import AiocommitError

    names: set[str] = set()
    pending: list[type[BaseException]] = [AiocommitError]
    while pending:
        kind = pending.pop()
        names.add(kind.__name__)
        pending.extend(kind.__subclasses__())
    return frozenset(names)


def _is_exception_name(name: str) -> bool:
    if name.startswith(("Py4J", "Analysis")):
        return False
    return name.endswith(_EXCEPTION_SUFFIXES) or name in _aiocommit_error_names()


def one_line_cause(text: str) -> str | None:
    """The exception line that ends the innermost Python traceback in ``text``
    (``UnknownOption: ...``, ``ValueError: ...``), or None."""
    found: str | None = None
    for line in text.splitlines():
        match = _CAUSE.match(line.strip())
        if match and _is_exception_name(match.group(1)):
            found = f"{match.group(1)}: {match.group(2)}"
        if line.startswith("JVM stacktrace:"):
            break
    return found


def cause_line(cause: str) -> str:
    """``aiocommit: CAUSE``, cut to ``FIRST_LINE_LIMIT`` characters."""
    line = f"aiocommit: {cause}"
    if len(line) <= FIRST_LINE_LIMIT:
        return line
    return line[: FIRST_LINE_LIMIT - 1] + "\u2026"


def raised_by_aiocommit(text: str) -> bool:
    """Whether a Spark error's text holds a Python traceback through aiocommit's code."""
    return "/aiocommit/" in text or "aiocommit.errors." in text


def _put_cause_first(error: BaseException, *, only_aiocommit: bool = False) -> None:
    """Start the message of Spark's exception with the one-line cause (at most
    ``FIRST_LINE_LIMIT`` characters; the whole cause stays further down); the exception
    keeps its type, so ``except AnalysisException`` still works. ``only_aiocommit``:
    only when the traceback runs through aiocommit (SQL and ``writeTo`` paths, which
    write through other sources too)."""
    desc = seam.error_text(error)
    if desc is None or desc.startswith("aiocommit: ") or seam.has_first_line(error):
        return
    if only_aiocommit and not raised_by_aiocommit(desc):
        return
    cause = one_line_cause(desc)
    if cause:
        seam.prepend_error_line(error, cause_line(cause))


def cause_first(method: Callable[..., Any]) -> Callable[..., Any]:
    """``method`` with an aiocommit error raised inside Spark put cause first."""

    @functools.wraps(method)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return method(*args, **kwargs)
        except Exception as error:
            _put_cause_first(error, only_aiocommit=True)
            raise

    setattr(wrapper, _INSTALLED, True)
    return wrapper


def install_cause_first(owner: type[Any], names: tuple[str, ...]) -> None:
    """Wrap the methods ``names`` of ``owner`` with ``cause_first`` (once)."""
    for name in names:
        method = getattr(owner, name, None)
        if callable(method) and not getattr(method, _INSTALLED, False):
            setattr(owner, name, cause_first(method))
