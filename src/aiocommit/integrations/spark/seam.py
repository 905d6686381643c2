"""Everything aiocommit takes from pyspark beyond its documented API, in one module.

The supported releases (exactly the ones CI tests: pyspark 3.5 and 4.0 to 4.3) differ in
what they have; every difference and every private name is handled here:

* pyspark's private attributes: a ``DataFrameWriter``'s session (``_spark``) and DataFrame
  (``_df``), a captured error's text (``_desc``), and the classic session's JVM handles
  (``_jsparkSession``, ``_get_j_spark_session_class``, ``SparkContext._jvm``);
* the ``DataFrameWriter`` methods ``register(spark)`` wraps (``WRAPPED_METHODS``), on the
  classic writer and on Spark Connect's;
* modules outside the documented API: ``pyspark.sql.pandas.types.to_arrow_schema`` (its
  ``timezone`` argument is new in 4.2; before, it always meant UTC) and
  ``pyspark.sql.variant_utils``;
* what a release lacks: the Python data source API (``pyspark.sql.datasource``),
  ``VariantType`` and ``CalendarIntervalType`` are new in 4.0. On 3.5 plain stand-ins
  take their place, so that ``write()`` (``map_in_arrow``) drives the same writer there;
* what a release does differently: decimal partition names (``PLAIN_DECIMAL_PARTITIONS``).

``problems()`` names every attribute this pyspark lacks; ``register()`` refuses a pyspark
that lacks one, and ``tests/spark/test_seam.py`` checks them on every release CI tests.
"""

from __future__ import annotations

import inspect
import sys
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pyspark
from pyspark.sql.types import StructType

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.readwriter import DataFrameWriter


def _release(text: str) -> tuple[int, int]:
    major, minor = text.split(".")[:2]
    return int(major), int("".join(c for c in minor if c.isdigit()) or 0)


VERSION: str = pyspark.__version__
#: the installed pyspark's (major, minor)
PYSPARK = _release(VERSION)
#: the releases aiocommit supports (pyproject.toml's range; CI tests each)
SUPPORTED = ((3, 5), (4, 0), (4, 1), (4, 2), (4, 3))
#: pyspark has the Python data source API: ``format("aiocommit")`` and the tables
HAS_DATA_SOURCES = PYSPARK >= (4, 0)

#: Spark 4 names decimal partition directories plainly (``p=0.000000100000000000``),
#: Spark 3.5 with ``BigDecimal.toString`` (``p=1.00000000000E-7``)
PLAIN_DECIMAL_PARTITIONS = PYSPARK >= (4, 0)

#: the ``DataFrameWriter`` methods ``register(spark)`` wraps (``dataframe_writer``); the
#: table methods on the classic writer only; ``DataFrameWriterV2.using`` too
WRAPPED_METHODS = (
    "format",
    "mode",
    "partitionBy",
    "bucketBy",
    "sortBy",
    "option",
    "options",
    "save",
)
TABLE_METHODS = ("saveAsTable", "insertInto")
#: the ``DataFrameWriterV2`` (``df.writeTo``) methods that run a write
WRITER_V2_METHODS = (
    "create",
    "replace",
    "createOrReplace",
    "append",
    "overwrite",
    "overwritePartitions",
)


class PysparkChanged(RuntimeError):
    """This pyspark lacks (or changed) a name aiocommit relies on."""


def _missing(owner: str, attribute: str, use: str) -> str:
    return (
        f"pyspark {VERSION}: {owner}.{attribute} is missing, which aiocommit "
        f"uses {use}; aiocommit supports pyspark " + ", ".join(f"{a}.{b}" for a, b in SUPPORTED)
    )


def _get(obj: Any, attribute: str, use: str) -> Any:
    try:
        return getattr(obj, attribute)
    except AttributeError:
        raise PysparkChanged(_missing(type(obj).__qualname__, attribute, use)) from None


if HAS_DATA_SOURCES or TYPE_CHECKING:
    from pyspark.sql.datasource import (
        DataSource,
        DataSourceArrowWriter,
        DataSourceStreamWriter,
        WriterCommitMessage,
    )
    from pyspark.sql.types import CalendarIntervalType, VariantType
else:  # pyspark 3.5: the same constructors, so that write() drives the same writer

    class WriterCommitMessage:
        """Stand-in for pyspark 4's marker class."""

    class DataSource:
        """Stand-in for pyspark 4's ``DataSource``: holds the options."""

        def __init__(self, options: Mapping[str, str]) -> None:
            self.options = options

    class DataSourceArrowWriter:
        """Stand-in for pyspark 4's ``DataSourceArrowWriter``."""

    class DataSourceStreamWriter:
        """Stand-in for pyspark 4's ``DataSourceStreamWriter``."""

    from pyspark.sql.types import DataType

    class VariantType(DataType):
        """Stand-in: pyspark 3.5 has no variant type, so no schema holds one."""

    class CalendarIntervalType(DataType):
        """Stand-in: pyspark 3.5's schemas have no calendar interval type."""


__all__ = [
    "HAS_DATA_SOURCES",
    "PYSPARK",
    "CalendarIntervalType",
    "DataSource",
    "DataSourceArrowWriter",
    "DataSourceStreamWriter",
    "VariantType",
    "WriterCommitMessage",
]


# --- what register() wraps ---------------------------------------------------------


def writer_classes() -> list[tuple[type[DataFrameWriter], bool]]:
    """The ``DataFrameWriter`` classes to wrap, each with whether its table methods are
    wrapped too: the classic one, and Spark Connect's where its client is installed."""
    from pyspark.sql.readwriter import DataFrameWriter

    classes: list[tuple[type[DataFrameWriter], bool]] = [(DataFrameWriter, True)]
    try:
        from pyspark.sql.connect.readwriter import DataFrameWriter as ConnectWriter
    except ImportError:  # the Connect client's dependencies (grpcio, pandas) are optional
        return classes
    # Connect's writer holds a plan, not a DataFrame: saveAsTable/insertInto stay Spark's
    classes.append((ConnectWriter, False))  # type: ignore[arg-type]
    return classes


def wrapped_methods(
    writer_class: type[DataFrameWriter], tables_too: bool
) -> dict[str, Callable[..., Any]]:
    """Name -> the original method, for each method ``register()`` wraps on the class;
    ``PysparkChanged`` naming the first one this pyspark lacks."""
    names = WRAPPED_METHODS + (TABLE_METHODS if tables_too else ())
    found = {}
    for name in names:
        method = getattr(writer_class, name, None)
        if not callable(method):
            raise PysparkChanged(
                _missing(f"{writer_class.__module__}.{writer_class.__qualname__}", name, "")
            )
        found[name] = method
    return found


# --- private attributes ------------------------------------------------------------


def writer_session(writer: DataFrameWriter) -> SparkSession:
    """The session of a ``DataFrameWriter`` (classic or Connect)."""
    session: SparkSession = _get(writer, "_spark", "to read the session's write confs")
    return session


def writer_dataframe(writer: DataFrameWriter) -> DataFrame:
    """The DataFrame a classic ``DataFrameWriter`` writes."""
    df: DataFrame = _get(writer, "_df", "to write saveAsTable/insertInto through save()")
    return df


def writer_v2_classes() -> list[type[Any]]:
    """pyspark's ``DataFrameWriterV2`` classes (``df.writeTo``): classic, and Spark
    Connect's where its client is installed."""
    from pyspark.sql.readwriter import DataFrameWriterV2

    classes: list[type[Any]] = [DataFrameWriterV2]
    try:
        from pyspark.sql.connect.readwriter import DataFrameWriterV2 as ConnectWriterV2
    except ImportError:  # the Connect client's dependencies (grpcio, pandas) are optional
        return classes
    classes.append(ConnectWriterV2)
    return classes


def stream_writer_classes() -> list[type[Any]]:
    """pyspark's ``DataStreamWriter`` classes (``df.writeStream``): classic, and Spark
    Connect's where its client is installed."""
    from pyspark.sql.streaming.readwriter import DataStreamWriter

    classes: list[type[Any]] = [DataStreamWriter]
    try:
        from pyspark.sql.connect.streaming.readwriter import (
            DataStreamWriter as ConnectStreamWriter,
        )
    except ImportError:  # the Connect client's dependencies (grpcio, pandas) are optional
        return classes
    classes.append(ConnectStreamWriter)
    return classes


def classic_dataframe(writer: DataFrameWriter) -> DataFrame | None:
    """The DataFrame a classic ``DataFrameWriter`` writes (``_df``, with a ``_jdf``);
    None for Spark Connect's writer, which holds a plan."""
    df = getattr(writer, "_df", None)
    if df is None or not hasattr(df, "_jdf"):
        return None
    found: DataFrame = df
    return found


def jvm(spark: SparkSession) -> Any:
    """The py4j view of a classic session's JVM (``_jsparkSession``,
    ``SparkContext._jvm``); None for Spark Connect."""
    if not hasattr(spark, "_jsparkSession"):
        return None
    return _get(spark.sparkContext, "_jvm", "to ask Spark's JVM")


def jvm_analysis_exception(view: Any, condition: str, parameters: dict[str, str]) -> Exception:
    """pyspark's captured ``AnalysisException`` for an exception built by the JVM
    (``pyspark.errors.exceptions.captured.convert_exception``)."""
    from pyspark.errors.exceptions.captured import convert_exception

    # PythonUtils.toScalaMap: in Spark 3.5 and 4 (pyspark.sql.utils.to_scala_map: 4 only)
    scala_map = view.org.apache.spark.api.python.PythonUtils.toScalaMap(parameters)
    origin = view.org.apache.spark.sql.AnalysisException(condition, scala_map)
    converted: Exception = convert_exception(origin)
    return converted


def hadoop_version(spark: SparkSession) -> str | None:
    """The Hadoop version of the session's JVM (``3.5.0``); None when unknown."""
    view = jvm(spark)
    if view is not None:
        return str(view.org.apache.hadoop.util.VersionInfo.getVersion())
    try:  # a Connect server
        row = spark.sql(
            "SELECT java_method('org.apache.hadoop.util.VersionInfo', 'getVersion')"
        ).first()
    except Exception:  # reflection disabled
        return None
    return None if row is None else str(row[0])


def task_count(df: DataFrame) -> int | None:
    """How many tasks a classic DataFrame's write runs (its RDD's partitions, planned,
    no job run); None for Spark Connect."""
    if not hasattr(df, "_jdf"):
        return None
    count = _get(df, "_jdf", "to count a write's tasks").rdd().getNumPartitions()
    return int(count)


def default_parallelism(spark: SparkSession) -> int | None:
    """A classic session's ``SparkContext.defaultParallelism`` (its cores); None for
    Spark Connect."""
    if jvm(spark) is None:
        return None
    return int(spark.sparkContext.defaultParallelism)


def hadoop_has_filesystem(spark: SparkSession, scheme: str) -> bool:
    """Whether Hadoop in a classic session's JVM has a filesystem for ``scheme`` (its
    connector on the class path); False for Spark Connect (not asked)."""
    view = jvm(spark)
    if view is None:
        return False
    use = "to ask Hadoop for a filesystem"
    conf = _get(spark.sparkContext, "_jsc", use).hadoopConfiguration()
    try:
        view.org.apache.hadoop.fs.FileSystem.getFileSystemClass(scheme, conf)
    except Exception:
        return False
    return True


def class_loadable(spark: SparkSession, name: str) -> bool:
    """Whether the driver's class loader (a classic session's, or a Connect server's)
    finds the class ``name``."""
    view = jvm(spark)
    if view is None:
        try:
            spark.sql(f"SELECT java_method('java.lang.Class', 'forName', '{name}')").collect()
        except Exception:
            return False
        return True
    loader = view.java.lang.Thread.currentThread().getContextClassLoader()
    try:
        view.java.lang.Class.forName(name, False, loader)
    except Exception:
        return False
    return True


def add_jar(spark: SparkSession, path: str) -> bool:
    """Add a jar to a running classic session: to the driver's class loader (Spark's
    ``MutableURLClassLoader``, which the session's writes load classes through) and to
    the executors (``SparkContext.addJar``). False for Spark Connect (the server's
    ``spark.jars`` must name it)."""
    view = jvm(spark)
    if view is None:
        return False
    use = "to add aiocommit's jar to the session"
    loader = view.java.lang.Thread.currentThread().getContextClassLoader()
    loader.addURL(view.java.io.File(path).toURI().toURL())
    _get(spark.sparkContext, "_jsc", use).addJar(path)
    return True


def _session_class(spark: SparkSession, use: str) -> Any:
    """The JVM's classic ``SparkSession`` class (its static active-session methods), or
    None for a Connect session."""
    if not hasattr(spark, "_jsparkSession"):  # Connect: the server resolves the source
        return None
    jvm = _get(spark.sparkContext, "_jvm", use)
    if jvm is None:
        return None
    return _get(spark, "_get_j_spark_session_class", use)(jvm)


def make_active(spark: SparkSession) -> None:
    """Make a classic session the calling thread's active one in the JVM (which looks a
    Python data source up there); nothing for a Connect session."""
    use = "to make the session active for a write from another thread"
    session_class = _session_class(spark, use)
    if session_class is not None:
        session_class.setActiveSession(_get(spark, "_jsparkSession", use))


@contextmanager
def active(spark: SparkSession) -> Iterator[None]:
    """Make a classic session the calling thread's active one in the JVM for the block,
    then put back the thread's active session as it was (or none); nothing for Connect.

    The JVM looks a Python data source up in the thread's active session, when a write
    runs and when one is registered (``DATA_SOURCE_ALREADY_EXISTS`` if that session has
    one of the name), so both run with their own session active."""
    use = "to make the session active for a write"
    session_class = _session_class(spark, use)
    if session_class is None:
        yield
        return
    before = session_class.getActiveSession()
    session_class.setActiveSession(_get(spark, "_jsparkSession", use))
    try:
        yield
    finally:
        if before.isDefined():
            session_class.setActiveSession(before.get())
        else:
            session_class.clearActiveSession()


def active_jvm_session(spark: SparkSession) -> Any:
    """The calling thread's active session in the JVM (a py4j handle), or None; for
    tests and checks."""
    session_class = _session_class(spark, "to read the thread's active session")
    if session_class is None:
        return None
    found = session_class.getActiveSession()
    return found.get() if found.isDefined() else None


def has_data_source(spark: SparkSession, name: str) -> bool | None:
    """Whether a classic session has a Python data source ``name`` registered (each
    session has its own; ``newSession()`` starts with none); None for Connect."""
    if not hasattr(spark, "_jsparkSession"):
        return None
    use = "to know whether the session has aiocommit registered"
    state = _get(spark, "_jsparkSession", use).sessionState()
    return bool(state.dataSourceManager().dataSourceExists(name))


#: the module of Spark Connect's client errors (not imported here: it needs grpcio)
CONNECT_ERRORS_MODULE = "pyspark.errors.exceptions.connect"


def _is_connect_error(error: BaseException) -> bool:
    """Whether ``error`` is a Spark Connect client's error (its text is ``_message``)."""
    return any(kind.__module__ == CONNECT_ERRORS_MODULE for kind in type(error).__mro__)


def error_text(error: BaseException) -> str | None:
    """The message text of a pyspark captured error (``_desc``) or of a Spark Connect
    client's error (``_message``, as the server sent it), else None."""
    text = getattr(error, "_message" if _is_connect_error(error) else "_desc", None)
    return text if isinstance(text, str) else None


def set_error_text(error: BaseException, text: str) -> None:
    """Replace a pyspark captured or Connect error's message text (``str(error)`` shows
    it)."""
    if _is_connect_error(error):
        error._message = text  # type: ignore[attr-defined]
    else:
        error._desc = text  # type: ignore[attr-defined]


def prepend_error_line(error: BaseException, line: str) -> None:
    """Put ``line`` first in a pyspark captured or Connect error's message (``_desc``,
    ``_message``), or in a py4j ``Py4JJavaError``'s (``errmsg``, which its text starts
    with)."""
    text = error_text(error)
    if text is not None:
        from pyspark.errors.exceptions.captured import CapturedException

        if _is_connect_error(error) or type(error).__str__ is CapturedException.__str__:
            set_error_text(error, f"{line}\n{text}")
        else:  # PythonException (a task's failure) words its text from the JVM's parameters
            _prefix_text(error, line)
        return
    errmsg = getattr(error, "errmsg", None)
    if isinstance(errmsg, str) and hasattr(error, "java_exception"):
        error.errmsg = f"{line}\n{errmsg}"  # type: ignore[attr-defined]


#: error class -> its subclass whose text starts with ``_aiocommit_first_line``
_PREFIXED: dict[type[BaseException], type[BaseException]] = {}


def prefix_first_line(error: BaseException, line: str) -> BaseException:
    """The error to raise for ``error`` (raised in this process, not Spark's), its text
    starting with ``line``, of its class (``except`` still matches): ``error`` itself,
    or for a built-in class (whose instances' class cannot change) a new one of it,
    chained from ``error``."""
    if has_first_line(error):
        return error
    try:
        _prefix_text(error, line)
    except TypeError:
        try:
            fresh = type(error)(f"{line}\n{error}")
        except Exception:  # a constructor of other arguments: left as it is
            return error
        fresh.__cause__ = error
        return fresh
    return error


def _prefix_text(error: BaseException, line: str) -> None:
    """Make ``str(error)`` start with ``line``: the error becomes an instance of a
    subclass of its class (``isinstance`` and ``except`` still match) that prints it."""
    kind = type(error)
    prefixed = _PREFIXED.get(kind)
    if prefixed is None:

        def __str__(self: BaseException) -> str:
            return f"{self._aiocommit_first_line}\n{kind.__str__(self)}"  # type: ignore[attr-defined]

        prefixed = type(kind.__name__, (kind,), {"__str__": __str__, "__module__": kind.__module__})
        _PREFIXED[kind] = prefixed
    error._aiocommit_first_line = line  # type: ignore[attr-defined]
    error.__class__ = prefixed


def has_first_line(error: BaseException) -> bool:
    """Whether ``prepend_error_line`` already gave ``error`` a first line by its class."""
    return hasattr(error, "_aiocommit_first_line")


#: the pyspark worker module that calls a streaming sink's ``streamWriter()`` to commit
STREAM_COMMIT_WORKER = "pyspark.sql.worker.python_streaming_sink_runner"


def in_stream_commit() -> bool:
    """Whether the running ``streamWriter()`` call is the one Spark makes to commit or
    abort a micro-batch (its own worker module is on the stack), not the one before the
    batch's tasks."""
    frame = sys._getframe(1)
    while frame is not None:
        if frame.f_globals.get("__name__") == STREAM_COMMIT_WORKER:
            return True
        frame = frame.f_back  # type: ignore[assignment]
    return False


def classic_session_class() -> type[Any]:
    """pyspark's classic ``SparkSession`` (its ``sql`` is wrapped)."""
    from pyspark.sql.session import SparkSession

    return SparkSession


def session_classes() -> list[type[Any]]:
    """pyspark's ``SparkSession`` classes (their ``sql`` is wrapped): classic, and Spark
    Connect's where its client is installed."""
    classes: list[type[Any]] = [classic_session_class()]
    try:
        from pyspark.sql.connect.session import SparkSession as ConnectSession
    except ImportError:  # the Connect client's dependencies (grpcio, pandas) are optional
        return classes
    classes.append(ConnectSession)
    return classes


# --- modules outside the documented API ---------------------------------------------


def _to_arrow_schema() -> Callable[..., pa.Schema]:
    from pyspark.sql.pandas.types import to_arrow_schema

    return to_arrow_schema


def _takes_timezone() -> bool:
    return "timezone" in inspect.signature(_to_arrow_schema()).parameters


def arrow_schema(schema: StructType) -> pa.Schema:
    """The Arrow schema of Spark's Arrow batches for ``schema``, timestamps in UTC (4.2
    added ``to_arrow_schema``'s ``timezone``; before, timestamps were always UTC)."""
    convert = _to_arrow_schema()
    if _takes_timezone():
        return convert(schema, timezone="UTC")
    return convert(schema)


def variant_to_json(value: bytes, metadata: bytes, zone_id: str) -> str:
    """A variant's JSON text, as Spark's JSON writer writes it (pyspark 4)."""
    from pyspark.sql.variant_utils import VariantUtils

    text: str = VariantUtils.to_json(value, metadata, zone_id)
    return text


# --- the check -------------------------------------------------------------------------


@dataclass(frozen=True)
class Check:
    owner: str
    attribute: str
    use: str
    since: tuple[int, int] = (3, 5)


def _module_checks() -> list[tuple[Check, Any]]:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.pandas import types as pandas_types

    checks: list[tuple[Check, Any]] = [
        (
            Check("pyspark.sql.pandas.types", "to_arrow_schema", "for the files' Arrow schema"),
            pandas_types,
        ),
        (
            Check(
                "SparkSession",
                "_get_j_spark_session_class",
                "to make the session active for a write from another thread",
                since=(4, 0),
            ),
            SparkSession,
        ),
        (
            Check("pyspark.sql.DataFrame", "mapInArrow", "for write()"),
            DataFrame,
        ),
    ]
    from pyspark.errors.exceptions import captured

    use = "to raise Spark's own errors"
    checks.append((Check("pyspark.errors.exceptions.captured", "convert_exception", use), captured))
    if HAS_DATA_SOURCES:
        import pyspark.sql.datasource as datasource
        import pyspark.sql.variant_utils as variant_utils

        for name in ("DataSource", "DataSourceArrowWriter", "WriterCommitMessage"):
            checks.append(
                (Check("pyspark.sql.datasource", name, "for format('aiocommit')"), datasource)
            )
        checks.append(
            (
                Check("pyspark.sql.variant_utils", "VariantUtils", "to write variants as JSON"),
                variant_utils,
            )
        )
    return checks


def problems(spark: SparkSession | None = None) -> list[str]:
    """What this pyspark lacks of the names above, one sentence each naming the
    attribute (empty: all there). With a classic ``spark`` session, also the instance
    attributes of a real writer and a real captured error."""
    found: list[str] = []
    for check, owner in _module_checks():
        if check.since <= PYSPARK and not hasattr(owner, check.attribute):
            found.append(_missing(check.owner, check.attribute, check.use))
    if HAS_DATA_SOURCES:
        for writer_class, tables_too in writer_classes():
            try:
                wrapped_methods(writer_class, tables_too)
            except PysparkChanged as error:
                found.append(str(error))
    if spark is not None and hasattr(spark, "_jsparkSession"):
        found.extend(_instance_problems(spark))
    return found


def _instance_problems(spark: SparkSession) -> list[str]:
    """The private attributes ``register()`` uses (format("aiocommit"), pyspark 4)."""
    found: list[str] = []
    if not HAS_DATA_SOURCES:
        return found
    df = spark.range(1)
    writer = df.write
    for attribute, expected in (("_spark", spark), ("_df", df)):
        if getattr(writer, attribute, None) is not expected:
            found.append(_missing("DataFrameWriter", attribute, "for saveAsTable/insertInto"))
    for attribute in ("_jsparkSession",):
        if not hasattr(spark, attribute):
            found.append(_missing("SparkSession", attribute, "to make the session active"))
    if not hasattr(spark.sparkContext, "_jvm"):
        found.append(_missing("SparkContext", "_jvm", "to make the session active"))
    if not hasattr(spark.sparkContext, "_jsc"):
        found.append(_missing("SparkContext", "_jsc", 'to add the jar of engine="jvm"'))
    from pyspark.errors import AnalysisException

    try:
        spark.sql("SELECT * FROM aiocommit_seam_check_no_such_table").collect()
        found.append("pyspark did not raise AnalysisException for a missing table")
    except AnalysisException as error:
        if error_text(error) is None:
            found.append(_missing(type(error).__qualname__, "_desc", "to put the cause first"))
    return found
