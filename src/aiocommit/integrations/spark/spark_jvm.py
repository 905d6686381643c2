"""What ``register(spark)``'s DataFrameWriter asks Spark's JVM, in the user's process:
Spark's own exceptions (so an error aiocommit raises where Spark's writer would is
Spark's: the same class, condition, message and SQLSTATE) and the Java version (Spark's
text writers print doubles as that Java does).

A classic session is asked through py4j (its JVM view from ``seam.jvm``). A Spark
Connect session has no JVM in the client: its
exceptions are Connect's ``AnalysisException`` with the same condition, message and
SQLSTATE, and the Java version comes from a SQL query (once per session).
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass, field
from typing import Any

from aiocommit.integrations.spark import seam

#: condition -> (SQLSTATE, message template): the conditions aiocommit raises as Spark does
CONDITIONS = {
    "PATH_ALREADY_EXISTS": (
        "42K04",
        'Path {outputPath} already exists. Set mode as "overwrite" to overwrite the existing path.',
    ),
    "COLUMN_ALREADY_EXISTS": (
        "42711",
        "The column {columnName} already exists. Choose another name or rename the existing "
        "column.",
    ),
    "UNSUPPORTED_DATA_TYPE_FOR_DATASOURCE": (
        "0A000",
        "The {format} datasource doesn't support the column {columnName} of the type {columnType}.",
    ),
}


@dataclass(frozen=True)
class SparkCondition:
    """An error Spark's own writer raises: its condition and message parameters."""

    condition: str
    parameters: dict[str, str] = field(default_factory=dict)

    @property
    def sql_state(self) -> str:
        return CONDITIONS[self.condition][0]

    def message(self) -> str:
        """Spark's message: ``[CONDITION] text SQLSTATE: state``."""
        text = CONDITIONS[self.condition][1].format(**self.parameters)
        return f"[{self.condition}] {text} SQLSTATE: {self.sql_state}"


def sql_id(name: str) -> str:
    """A column name as Spark quotes it in messages (``toSQLId``): ```id```."""
    return ".".join("`" + part.replace("`", "``") + "`" for part in name.split("."))


def sparks_exception(spark: Any, found: SparkCondition) -> Exception:
    """pyspark's exception for ``found`` as Spark's own writer raises it: built by the
    JVM of a classic session (pyspark's captured ``AnalysisException``), else Spark
    Connect's ``AnalysisException`` with the same condition, message and SQLSTATE."""
    jvm = seam.jvm(spark)
    if jvm is not None:
        return seam.jvm_analysis_exception(jvm, found.condition, found.parameters)
    try:
        from pyspark.errors.exceptions.connect import AnalysisException
    except ImportError:  # no Connect client either: pyspark's base class
        from pyspark.errors import AnalysisException as BaseAnalysisException

        return BaseAnalysisException(
            message=found.message(),
            errorClass=found.condition,
            messageParameters=found.parameters,
        )
    return AnalysisException(
        message=found.message(),
        errorClass=found.condition,
        messageParameters=found.parameters,
        sql_state=found.sql_state,
    )


_JAVA_VERSIONS: weakref.WeakKeyDictionary[Any, int | None] = weakref.WeakKeyDictionary()


def java_version(spark: Any) -> int | None:
    """The major Java version of the session's JVM (17, 21, ...); None when unknown."""
    jvm = seam.jvm(spark)
    if jvm is not None:
        return _major(jvm.java.lang.System.getProperty("java.specification.version"))
    if spark in _JAVA_VERSIONS:
        return _JAVA_VERSIONS[spark]
    try:  # a Connect server: one small query per session
        row = spark.sql(
            "SELECT java_method('java.lang.System', 'getProperty', "
            "'java.specification.version') AS v"
        ).first()
        version = _major(row[0] if row is not None else None)
    except Exception:  # reflection disabled: Spark's text is then Java 19+'s guess
        version = None
    _JAVA_VERSIONS[spark] = version
    return version


def _major(text: str | None) -> int | None:
    """``17`` from ``"17"``, ``8`` from ``"1.8"``."""
    if not text:
        return None
    parts = str(text).split(".")
    major = parts[1] if parts[0] == "1" and len(parts) > 1 else parts[0]
    return int(major) if major.isdigit() else None
