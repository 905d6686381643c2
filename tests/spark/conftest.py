"""One local Spark session per test process (about 10 s to start, a few more for the
first Python data-source write; each later write takes a fraction of a second). Under
``pytest -n 2 --dist loadgroup`` with ``AIOCOMMIT_TEST_SPARK_SESSIONS=2`` each xdist
worker runs one of the two groups of tests using it (tests/tiers.py ``SPARK_GROUPS``) in
its own JVM, so two sessions run at once on one machine: everything a session writes or
listens on is its own (a warehouse and a Derby home under the worker's temporary
directory, a free Spark Connect port, no UI; Spark picks free driver and block manager
ports and makes unique local dirs itself).

``local[2,3]``: two threads and up to three attempts per task, so retries happen.
Where pyspark is not installed, the modules that import it are not collected
(tests/tiers.py; the ``dev`` extra installs it).
"""

from __future__ import annotations

import importlib.metadata
import os
import socket
import sys
from collections.abc import Generator, Iterator
from typing import TYPE_CHECKING

import pytest

from aiocommit_testing.jvm import SHORT_LIVED_JVM_OPTIONS

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

LOG4J = """\
rootLogger.level = error
rootLogger.appenderRef.stdout.ref = console
appender.console.type = Console
appender.console.name = console
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %d{HH:mm:ss} %p %c{1}: %m%n
"""


def pytest_configure(config: pytest.Config) -> None:
    """Warnings of older pyspark releases themselves, not errors here: before 4.3 it
    leaves a py4j result socket to the garbage collector (a ``ResourceWarning`` pytest
    reports as unraisable); 3.5 checks pandas' version with ``distutils``."""
    try:  # the installed release, read without importing pyspark (the unit tier needs none)
        major, minor = importlib.metadata.version("pyspark").split(".")[:2]
    except importlib.metadata.PackageNotFoundError:
        return
    release = (int(major), int("".join(c for c in minor if c.isdigit()) or 0))
    if release < (4, 3):
        config.addinivalue_line(
            "filterwarnings",
            "ignore:Exception ignored in. <socket.socket:pytest.PytestUnraisableExceptionWarning",
        )
    if release < (4, 0):
        config.addinivalue_line(
            "filterwarnings", "ignore:distutils Version classes are deprecated:DeprecationWarning"
        )


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    """After a failed Spark test, drop this thread's py4j connection to the shared
    session's JVM (the next call opens a new one). py4j pins one connection per thread
    and resets it only when a call raises an ``Exception``; a call stopped by
    pytest-timeout (a ``BaseException``) leaves its answer unread, and the next call reads
    it, and so on: the test fails with a wrong answer ("'p'"), and so would every later
    Spark test of the run ("PythonRDD does not exist in the JVM")."""
    from tests.spark.helpers import drop_thread_connection

    report = yield
    if report.failed:
        drop_thread_connection()
    return report


#: a zone other than UTC, so that timestamp handling is exercised
SESSION_TIME_ZONE = "America/Los_Angeles"
#: the session JVM's options (``SHORT_LIVED_JVM_OPTIONS``): its work is many small
#: queries, each compiling new code that runs a few times
SESSION_JVM_OPTIONS = SHORT_LIVED_JVM_OPTIONS


@pytest.fixture(scope="session")
def spark(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SparkSession]:
    from pyspark.sql import SparkSession

    from aiocommit.integrations.spark import register, seam

    base = tmp_path_factory.mktemp("spark-session")
    # workers must run this interpreter (it has pyarrow and aiocommit); env is read when
    # the JVM starts, never later
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    with socket.socket() as probe:  # a free port for the Spark Connect server
        probe.bind(("127.0.0.1", 0))
        connect_port = probe.getsockname()[1]
    log4j = base / "log4j2.properties"
    log4j.write_text(LOG4J)
    builder = (
        SparkSession.builder.master("local[2,3]")
        .appName("aiocommit-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.default.parallelism", "2")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.driver.memory", "1g")
        .config("spark.sql.warehouse.dir", str(base / "warehouse"))
        .config("spark.sql.session.timeZone", SESSION_TIME_ZONE)
        .config(
            "spark.driver.extraJavaOptions",
            # a metastore, if one starts (Hive), writes under this session's directory
            f"{SESSION_JVM_OPTIONS} -Dlog4j2.configurationFile=file:{log4j} "
            f"-Dderby.system.home={base / 'derby'}",
        )
    )
    if seam.HAS_DATA_SOURCES:  # pyspark 3.5's jars have no Spark Connect server
        # a Spark Connect server in the same driver, for the Connect client tests
        builder = (
            builder.config("spark.plugins", "org.apache.spark.sql.connect.SparkConnectPlugin")
            .config("spark.connect.grpc.binding.address", "127.0.0.1")
            .config("spark.connect.grpc.binding.port", str(connect_port))
        )
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    if seam.HAS_DATA_SOURCES:  # format("aiocommit"): pyspark 4 (3.5 has write() only)
        register(session)
    try:
        yield session
    finally:
        session.stop()


@pytest.fixture(params=["python", "auto"], ids=["python", "jvm"])
def each_engine(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Runs a test once with each engine as the default of ``format("aiocommit")`` and
    ``write()``: the Python writer, then ``auto`` (the JVM engine wherever it can write,
    partitioned writes of few tasks too; a write with an option only the Python writer
    honours still runs that). A write that sets ``engine`` keeps its own."""
    from aiocommit.integrations.spark import jvm_engine

    engine: str = request.param
    monkeypatch.setattr(jvm_engine, "DEFAULT_ENGINE", engine)
    # the tests' partitioned writes are of few tasks, which auto leaves to Python
    monkeypatch.setattr(jvm_engine, "FEW_TASKS_PER_CORE", 0)
    return engine
