"""Helpers for the Spark tests."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


@contextmanager
def quiet(spark: SparkSession) -> Iterator[None]:
    """Silence Spark's ERROR stack traces while tasks fail on purpose."""
    spark.sparkContext.setLogLevel("OFF")
    try:
        yield
    finally:
        spark.sparkContext.setLogLevel("ERROR")


def data_files(root: Path) -> dict[str, int]:
    """Relative path -> size of every data file below ``root``: not ``_temporary/``, and
    not hidden (``_SUCCESS``, Hadoop's ``.crc`` files), as Spark's readers see them."""
    found: dict[str, int] = {}
    if not root.exists():
        return found
    for path in root.rglob("*"):
        relative = path.relative_to(root).as_posix()
        hidden = path.name.startswith(("_", "."))
        if path.is_file() and not hidden and not relative.startswith("_temporary"):
            found[relative] = path.stat().st_size
    return found


def temporary_is_clean(root: Path) -> bool:
    """No ``_temporary`` directory, or an empty one."""
    temporary = root / "_temporary"
    return not temporary.exists() or not any(temporary.iterdir())


def drop_thread_connection() -> None:
    """Close this thread's py4j connection to the running Spark driver, if there is one
    (the next call opens a new one); no JVM call, nothing when pyspark is not loaded."""
    pyspark = sys.modules.get("pyspark")
    gateway = getattr(getattr(pyspark, "SparkContext", None), "_gateway", None)
    client = getattr(gateway, "_gateway_client", None)
    get_connection = getattr(client, "get_thread_connection", None)  # py4j's ClientServer
    connection = get_connection() if get_connection is not None else None
    if connection is not None:
        connection.close()
