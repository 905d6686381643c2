"""The tier rules of tests/tiers.py: a test is ``spark`` by what it imports (read from the
sources, so the rule holds where pyspark is not installed)."""

from __future__ import annotations

import ast
import importlib.machinery
import importlib.util
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from tests import tiers


def test_spark_modules_are_found_through_our_own_modules() -> None:
    assert tiers._needs_spark_module("pyarrow.parquet")
    assert tiers._needs_spark_module("aiocommit.integrations.spark.seam")
    # settings -> text_compression -> pyarrow
    assert tiers._needs_spark_module("aiocommit.integrations.spark.settings")
    assert tiers._needs_spark_module("tests.spark.test_parity")
    # pure modules of the Spark integration load without pyspark (a lazy package)
    assert not tiers._needs_spark_module("aiocommit.integrations.spark.paths")
    assert not tiers._needs_spark_module("aiocommit.integrations.spark.values")
    assert not tiers._needs_spark_module("aiocommit.committers.factory")
    assert not tiers._needs_spark_module("tests.conftest")


def test_engine_modules_are_found_through_our_own_modules() -> None:
    assert tiers._needs_engine_module("aiocommit.integrations.dask")
    assert tiers._needs_engine_module("aiocommit.integrations.ray")
    assert tiers._needs_engine_module("polars")
    # the Arrow view needs pyarrow (the spark extra's), no engine
    assert not tiers._needs_engine_module("aiocommit.integrations.arrow")
    assert tiers._needs_spark_module("aiocommit.integrations.arrow")
    assert not tiers._needs_engine_module("aiocommit.integrations.attempts")
    assert not tiers._needs_spark_module("aiocommit.integrations.attempts")


def test_imports_when_loaded_and_in_functions_apart(tmp_path: Path) -> None:
    source = tmp_path / "test_x.py"
    source.write_text(
        "from typing import TYPE_CHECKING\n"
        "import json\n"
        "if TYPE_CHECKING:\n"
        "    import pyspark\n"
        "try:\n"
        "    import pandas\n"
        "except ImportError:\n"
        "    pass\n"
        "def test_a():\n"
        "    from pyarrow import parquet\n"
        "class TestB:\n"
        "    def test_c(self):\n"
        "        import py4j\n"
    )
    found = tiers._imports(source)
    assert {"json", "pandas"} <= found.loaded and "pyspark" not in found.loaded
    assert "pyarrow.parquet" in found.in_functions["test_a"]
    assert "py4j" in found.in_functions["TestB.test_c"]
    assert tiers._spark_names(found.in_functions["test_a"]) == {"pyarrow", "pyarrow.parquet"}


def test_the_pyspark_free_modules_of_the_integration_import_without_it() -> None:
    """What lets the unit tier import ``paths`` and ``values``: the package loads pyspark
    only when its Spark-facing names are used."""
    package = Path(tiers.ROOT, "src/aiocommit/integrations/spark/__init__.py")
    assert not tiers._spark_names(tiers._imports(package).loaded)


def test_a_module_needing_a_missing_engine_is_not_collected(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Where ray is not installed, the Ray tests are not collected (and the Dask ones are)."""
    real = importlib.util.find_spec
    monkeypatch.setattr(tiers, "_not_collected_engines", [])  # not this run's summary
    monkeypatch.setattr(
        importlib.util,
        "find_spec",
        # ray missing; dask installed (whether it is here or not)
        lambda name, *args: (
            None
            if name == "ray"
            else real(name, *args) or importlib.machinery.ModuleSpec(name, None)
        ),
    )
    ray_tests = Path(tiers.ROOT, "tests/integrations/test_ray_write.py")
    dask_tests = Path(tiers.ROOT, "tests/integrations/test_dask_write.py")
    assert tiers.missing_engines("aiocommit.integrations.ray") == {"ray"}
    every_tier = SimpleNamespace(getoption=lambda name: name == "all_tiers")
    unit_tier = SimpleNamespace(getoption=lambda name: None)
    assert tiers.pytest_ignore_collect(ray_tests, every_tier) is True  # type: ignore[arg-type]
    tiers.pytest_ignore_collect(dask_tests, every_tier)  # type: ignore[arg-type]
    assert tiers._not_collected_engines == [ray_tests]  # not Dask's: its engine is here
    # the unit tier deselects engines tests: it does not load their packages either
    assert tiers.pytest_ignore_collect(dask_tests, unit_tier) is True  # type: ignore[arg-type]
    assert tiers._not_collected_engines == [ray_tests, dask_tests]


#: a run of three modules under two xdist workers: the tests using the ``spark`` fixture
#: are first in each module, so a plain per-test split would give them one worker each;
#: ``test_c.py`` has more tests than either Spark group, so xdist's own order (by number
#: of tests) would hand it out first
GROUPED_SUITE = {
    "conftest.py": (
        "import os, pytest\n"
        "@pytest.fixture(scope='session')\n"
        "def spark(tmp_path_factory):\n"
        "    return os.environ['PYTEST_XDIST_WORKER']\n"
    ),
    "test_a.py": (
        "import os\n"
        "def test_one(spark): assert spark == os.environ['PYTEST_XDIST_WORKER']\n"
        "def test_two(spark): assert spark == os.environ['PYTEST_XDIST_WORKER']\n"
        "def test_plain(): pass\n"
    ),
    "test_b.py": (
        "import os\n"
        "import pytest\n"
        "def test_three(spark): assert spark == os.environ['PYTEST_XDIST_WORKER']\n"
        "def test_plain(): pass\n"
        "@pytest.mark.parametrize('x', [1, 2])\n"
        "def test_param(spark, x): assert spark == os.environ['PYTEST_XDIST_WORKER']\n"
    ),
    "test_c.py": (
        "import pytest\n@pytest.mark.parametrize('x', range(6))\ndef test_many(x): pass\n"
    ),
}


@pytest.mark.slow  # starts a pytest run of two worker processes
def test_each_spark_group_runs_first_on_its_own_xdist_worker(tmp_path: Path) -> None:
    """Under ``-n 2 --dist loadgroup`` (scripts/test.sh) the tests using the session
    fixture ``spark`` are split by module into two groups, each run by one worker (one
    JVM and session per worker), and both groups start before any other test. Before:
    one group (one worker ran every Spark test while the other ran the rest), handed
    out in xdist's order, after any module of more tests."""
    pytest.importorskip("xdist")
    for name, text in GROUPED_SUITE.items():
        (tmp_path / name).write_text(text)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(tiers.ROOT), *sys.path]))
    env[tiers.SPARK_SESSIONS_VARIABLE] = "2"
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "tests.tiers", "-p", "no:cacheprovider",
         "-n", "2", "--dist", "loadgroup", "-v", "-p", "no:randomly", str(tmp_path)],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert run.returncode == 0, run.stdout + run.stderr
    # "[gw0] [ 40%] PASSED test_a.py::test_one@spark-session-a", in the order run
    passed = [
        (line.split()[0], line.split()[-1].split("@")[0])
        for line in run.stdout.splitlines()
        if " PASSED " in line
    ]
    workers = {test: worker for worker, test in passed}
    assert len(workers) == 13, run.stdout
    first_group = {workers["test_a.py::test_one"], workers["test_a.py::test_two"]}
    second_group = {workers[f"test_b.py::{test}"] for test in ("test_three", "test_param[1]")}
    second_group.add(workers["test_b.py::test_param[2]"])
    assert len(first_group) == len(second_group) == 1 and first_group != second_group, run.stdout
    first_run = {
        worker: next(test for w, test in passed if w == worker) for worker in workers.values()
    }
    assert all(
        "test_plain" not in test and "test_many" not in test for test in first_run.values()
    ), run.stdout


def test_the_spark_modules_are_split_by_weight_the_heaviest_first(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(
        tiers, "SPARK_MODULE_WEIGHTS", {"m/x.py": 5.0, "m/y.py": 3.0, "m/z.py": 2.0}
    )
    a, b = tiers.SPARK_GROUPS
    split = tiers.split_spark_modules(["m/z.py", "m/y.py", "m/x.py"])
    assert split == {"m/x.py": a, "m/y.py": b, "m/z.py": b}
    # a module not in the table weighs NEW_SPARK_MODULE_WEIGHT; the same input, the same split
    split = tiers.split_spark_modules(["m/new.py", "m/x.py", "m/y.py"])
    assert split == tiers.split_spark_modules(["m/y.py", "m/x.py", "m/new.py"])
    assert split["m/new.py"] == a and split["m/x.py"] == split["m/y.py"] == b
    # one session (the default; AIOCOMMIT_TEST_SPARK_SESSIONS=1): every module in one group
    monkeypatch.delenv(tiers.SPARK_SESSIONS_VARIABLE, raising=False)
    assert set(tiers.split_spark_modules(split, tiers.spark_groups_in_use()).values()) == {a}
    monkeypatch.setenv(tiers.SPARK_SESSIONS_VARIABLE, "3")
    with pytest.raises(pytest.UsageError, match="give 1 or 2"):
        tiers.spark_groups_in_use()


def test_every_module_using_the_spark_session_has_a_weight() -> None:
    """``SPARK_MODULE_WEIGHTS`` lists the test modules whose tests take the ``spark``
    session fixture (read from the sources), and no other: a new module is weighed, a
    removed one leaves the table; ``FIRST_WORK_UNITS`` names modules that exist."""
    using = set()
    for path in sorted(Path(tiers.ROOT, "tests", "spark").glob("test_*.py")):
        tree = ast.parse(path.read_text())
        functions = (
            node
            for node in ast.walk(tree)
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
        )
        if any(arg.arg == "spark" for node in functions for arg in node.args.args):
            using.add(path.relative_to(tiers.ROOT).as_posix())
    assert using == set(tiers.SPARK_MODULE_WEIGHTS)
    # the modules handed out first after the Spark groups exist
    assert all(Path(tiers.ROOT, unit).is_file() for unit in tiers.FIRST_WORK_UNITS[2:])
    assert tiers.FIRST_WORK_UNITS[:2] == tiers.SPARK_GROUPS


@pytest.mark.slow  # starts a pytest run
def test_a_test_using_the_spark_session_is_timed_from_its_call(tmp_path: Path) -> None:
    """The session's start is not charged to the first test using it: its timeout counts
    from its call. Before: a slow session start plus the first test's call passed the
    timeout, which interrupted a py4j call mid-answer (``KeyError: 'p'``)."""
    (tmp_path / "conftest.py").write_text(
        "import time, pytest\n"
        "@pytest.fixture(scope='session')\n"
        "def spark():\n"
        "    time.sleep(2)\n"
        "    return 'session'\n"
    )
    (tmp_path / "test_session.py").write_text(
        "import time\n"
        "def test_first(spark): time.sleep(0.5)\n"
        "def test_slow_call(spark): time.sleep(3)\n"
    )
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(tiers.ROOT), *sys.path]))
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "tests.tiers", "-p", "no:cacheprovider",
         "-p", "no:randomly", "-v", "--all", "--timeout", "1", str(tmp_path)],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert "test_session.py::test_first PASSED" in run.stdout, run.stdout + run.stderr
    assert "test_session.py::test_slow_call FAILED" in run.stdout, run.stdout + run.stderr


@pytest.mark.slow  # starts pytest runs
def test_plain_pytest_runs_the_unit_tier_on_two_workers(tmp_path: Path) -> None:
    """A whole unit-tier run (no test paths, ``-m``, ``--all`` or ``-n``) gets two
    pytest-xdist workers; a run that names tests, or asks for ``-n 0``, ``--all`` or
    ``-m``, runs as asked. Before: one process."""
    pytest.importorskip("xdist")
    (tmp_path / "pytest.ini").write_text("[pytest]\ntestpaths = tests\n")
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_one.py").write_text(
        "import os\ndef test_where(): print('worker', os.environ.get('PYTEST_XDIST_WORKER'))\n"
    )
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(tiers.ROOT), *sys.path]))

    def run(*args: str) -> str:
        done = subprocess.run(
            [sys.executable, "-m", "pytest", "-p", "tests.tiers", "-p", "no:cacheprovider",
             "-p", "no:randomly", *args],
            cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        assert done.returncode == 0, done.stdout + done.stderr
        return done.stdout

    assert "2 workers [1 item]" in run()
    for asked in (["tests/test_one.py"], ["-n", "0"], ["--all"], ["-m", "not slow"]):
        assert "workers" not in run(*asked), asked
