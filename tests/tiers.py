"""The test tiers (a pytest plugin, loaded by the repository's ``conftest.py``), marked by
what a test imports and starts, not by its folder:

* ``spark``: the test needs the ``spark`` extra or a JVM. Applied here when the test's
  module, the test function or one of its fixtures imports pyspark, pyarrow, py4j or
  pandas, directly or through a module of ours that does (read from the sources, never
  imported, so the rule also works where pyspark is not installed). A test that starts
  a JVM itself (``java`` in a subprocess) carries ``@pytest.mark.spark``.
* ``emulator``: the test uses an emulator server (moto, fake-gcs-server, the ADLS
  emulator): an emulator fixture, or a store fixture parametrized with a cloud store.
  A test that starts an emulator without the marker fails, naming this rule; one that
  starts its own (no fixture) carries ``@pytest.mark.emulator``.
* ``engines``: the test needs an engine extra (``dask``, ``ray``, ``polars``) and most
  start one (a Dask ``LocalCluster``, Ray). Applied like ``spark``: when the test's module,
  function or fixtures import dask, distributed, ray or polars.
* ``slow``: carried by the test (kill sweeps, scale and loop runs, anything of several
  seconds).

Plain ``pytest`` runs the unit tier: every test with none of those marks. ``-m EXPR``
selects by marks instead (``-m emulator``, ``-m "spark or slow"``) and ``--all`` runs
every tier. Where pyspark is not installed, and when only the unit tier runs, the test
modules that import it when loaded are not collected (they are all ``spark``), so the
unit tier needs no Spark; the same for the engines' packages (a module importing one that
is missing, or any, when only the unit tier runs, is not collected).
"""

from __future__ import annotations

import ast
import functools
import importlib.util
import inspect
import os
import textwrap
from collections.abc import Callable, Generator, Iterable
from pathlib import Path
from typing import Any

import pytest

#: the tiers plain ``pytest`` leaves out
TIERS = ("emulator", "spark", "engines", "slow")
#: the packages of the ``spark`` extra (and Spark's own)
SPARK_PACKAGES = frozenset({"pyspark", "pyarrow", "py4j", "pandas"})
#: the packages of the engine extras (``dask``, ``ray``, ``polars``)
ENGINE_PACKAGES = frozenset({"dask", "distributed", "ray", "polars"})
#: our own top-level packages, whose imports are followed through their sources
LOCAL_PACKAGES = ("aiocommit", "aiocommit_stress", "aiocommit_testing", "tests")
#: fixtures that are, or start, an emulator server
EMULATOR_FIXTURES = frozenset({"s3_endpoint", "gcs_endpoint", "emulator", "endpoint", "adls"})
#: the stores behind real HTTP emulators (as a store fixture's parameter)
CLOUD_STORES = ("adls", "gcs", "s3")
ROOT = Path(__file__).resolve().parent.parent


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--all",
        action="store_true",
        dest="all_tiers",
        help="run every tier (unit, emulator, spark, slow); plain pytest runs the unit tier",
    )


#: the workers of a plain ``pytest`` run of the unit tier (``unit_tier_workers``)
UNIT_TIER_WORKERS = 2


@pytest.hookimpl(wrapper=True)  # around pytest-xdist's, which reads ``-n``
def pytest_cmdline_main(config: pytest.Config) -> Generator[None, object, object]:
    """Plain ``pytest`` runs the unit tier on ``UNIT_TIER_WORKERS`` workers (see
    ``unit_tier_workers``)."""
    workers = unit_tier_workers(config)
    if workers:
        config.option.numprocesses = workers
    return (yield)


def unit_tier_workers(config: pytest.Config) -> int:
    """How many pytest-xdist workers a run gets that did not ask: ``UNIT_TIER_WORKERS``
    for a whole unit-tier run (no test paths, ``-m`` or ``--all``; the tests are short
    and independent), when pytest-xdist is installed and ``-n`` was not given; else 0
    (the run is as asked). ``-n 0`` runs in one process."""
    option = config.option
    if (
        not config.pluginmanager.hasplugin("xdist")
        or getattr(option, "numprocesses", 0) is not None
        or hasattr(config, "workerinput")  # a worker: its controller decided
        or config.args_source == pytest.Config.ArgsSource.ARGS  # test paths given
        or option.all_tiers
        or option.markexpr
        or option.collectonly
        or option.usepdb
    ):
        return 0
    return UNIT_TIER_WORKERS


def pytest_configure(config: pytest.Config) -> None:
    """Every emulator start checks that the running test is marked ``emulator``."""
    from aiocommit_testing.adls_emulator import AdlsEmulator
    from aiocommit_testing.child_server import ChildServer

    ChildServer.start = _only_when_marked(ChildServer.start)  # type: ignore[method-assign]
    AdlsEmulator.__init__ = _only_when_marked(AdlsEmulator.__init__)  # type: ignore[method-assign]


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    """A test module that imports a Spark package when loaded (all its tests are
    ``spark``) is not collected without it (a module loading only pyarrow or pandas, as
    the engines' tests do, is collected where those are installed, pyspark or not), nor
    when only the unit tier runs (loading pyspark would slow the unit tier for tests it
    deselects); the same for an engine package."""
    if collection_path.suffix != ".py" or not collection_path.name.startswith("test_"):
        return None
    loaded = _imports(collection_path).loaded
    unit_only = not (config.getoption("all_tiers") or config.getoption("markexpr"))
    if any(missing_engines(name) for name in loaded) or (
        unit_only and any(_needs_engine_module(name) for name in loaded)
    ):
        _not_collected_engines.append(collection_path)
        return True
    if not _spark_names(loaded):
        return None
    if not unit_only and not any(missing_spark(name) for name in loaded):
        return None  # every Spark package it loads is here (pyarrow alone: the engines')
    _not_collected.append(collection_path)
    return True


#: the timeout of a test using the ``spark`` session fixture: the run's (pytest-timeout's
#: ``timeout``), counted from the test's call, not its set-up, so the first test of a
#: worker is not charged the session's start (a JVM, minutes on a loaded machine)
SESSION_TEST_TIMEOUT = pytest.mark.timeout(func_only=True)


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark every test with its tiers, then keep the unit tier unless ``-m`` or ``--all``."""
    for item in items:
        if needs_spark(item):
            item.add_marker(pytest.mark.spark)
        if needs_engines(item):
            item.add_marker(pytest.mark.engines)
        if uses_emulator(item):
            item.add_marker(pytest.mark.emulator)
    for item in items:
        if _uses_session(item) and item.get_closest_marker("timeout") is None:
            item.add_marker(SESSION_TEST_TIMEOUT)
    if distributed_by_group(config):
        group_for_workers(items)
    if config.getoption("all_tiers") or config.getoption("markexpr"):
        return
    unit = [item for item in items if not any(item.get_closest_marker(t) for t in TIERS)]
    if len(unit) < len(items):
        kept = set(map(id, unit))
        config.hook.pytest_deselected(items=[item for item in items if id(item) not in kept])
        items[:] = unit


#: the xdist groups of the tests that use the ``spark`` session fixture, at most one per
#: worker of ``scripts/test.sh`` (``-n 2``): each worker process starts its own JVM and
#: session
SPARK_GROUPS = ("spark-session-a", "spark-session-b")
#: the variable that sets how many of the ``SPARK_GROUPS`` a run uses: ``1`` (the default)
#: runs every test using the session on one worker (one JVM); ``2`` splits them between
#: two workers and two JVMs. Two were slower on a loaded two-core machine (the Spark
#: tests are CPU-bound there); the default stays one until a quiet run shows otherwise
SPARK_SESSIONS_VARIABLE = "AIOCOMMIT_TEST_SPARK_SESSIONS"
#: the relative time of each module's tests that use the ``spark`` session: seconds in a
#: ``pytest --all tests/spark -n 2 --dist loadgroup --durations=0`` run on one session,
#: summed by module (the session's start left out: each group pays it once);
#: ``split_spark_modules`` balances the two groups by it. Re-measure when a module's
#: Spark tests change much (``test_every_module_using_the_spark_session_has_a_weight``
#: fails when a module is added or removed).
SPARK_MODULE_WEIGHTS: dict[str, float] = {
    "tests/spark/test_parity.py": 236,
    "tests/spark/test_cause_first.py": 110,
    "tests/spark/test_drop_in.py": 105,
    "tests/spark/test_engine_choice.py": 96,
    "tests/spark/test_write.py": 64,
    "tests/spark/test_parity_edges.py": 63,
    "tests/spark/test_map_in_arrow.py": 62,
    "tests/spark/test_s3_write.py": 60,
    "tests/spark/test_jvm_engine.py": 59,
    "tests/spark/test_streaming.py": 15,
    "tests/spark/test_examples.py": 10,
    "tests/spark/test_sessions.py": 9,
    "tests/spark/test_hadoop_keys.py": 2,
    "tests/spark/test_speed.py": 1,
    "tests/spark/test_seam.py": 1,
}
#: the weight of a module missing from ``SPARK_MODULE_WEIGHTS`` (a new one)
NEW_SPARK_MODULE_WEIGHT = 20.0
#: modules of few tests that take long (each a minute or less, a few seconds at least):
#: xdist hands its units out by test count, most first, which would leave these for the
#: end, where one of them keeps one worker busy while the other has nothing left
#: (longest first; from a ``--durations=0`` run; one not collected, an engine's where it
#: is not installed, is passed over)
LONG_FEW_TEST_MODULES = (
    "stress/tests/test_streaming_sweep.py",
    "stress/tests/test_kill_anywhere.py",
    "tests/integrations/test_ray_write.py",
    "tests/resilience/test_random_throttles.py",
    "tests/integrations/test_dask_write.py",
    "tests/cli/test_throttled_reads.py",
    "tests/engine/test_concurrent_jobs.py",
    "stress/tests/test_chaos_seeds.py",
    "stress/tests/test_loop_adls.py",
)
#: the work units xdist hands out first, longest first (so the last to finish are short
#: ones): the two Spark groups, then the speculation test's standalone cluster (its own
#: JVMs), then ``LONG_FEW_TEST_MODULES``
FIRST_WORK_UNITS = (*SPARK_GROUPS, "tests/spark/test_speculation.py", *LONG_FEW_TEST_MODULES)


def distributed_by_group(config: pytest.Config) -> bool:
    """This process collects for xdist's ``--dist loadgroup``: a worker (xdist sets its
    ``dist`` to ``no`` and its ``loadgroup`` to true), or the controller."""
    option = config.option
    return bool(getattr(option, "loadgroup", False)) or getattr(option, "dist", "no") == "loadgroup"


def group_for_workers(items: list[pytest.Item]) -> None:
    """Under ``pytest -n N --dist loadgroup`` (pytest-xdist; ``scripts/test.sh``): the
    tests that use the ``spark`` session fixture in one group, or in the two
    ``SPARK_GROUPS`` (``spark_groups_in_use``), a module's all in one
    (``split_spark_modules``), each group run by one worker (one JVM and
    session per worker process; no other test starts a session in-process); every other
    test with the rest of its module (a module-scoped fixture starts once per run, as
    without workers). Runs before xdist's own hook (this one is ``tryfirst``), which
    reads the groups."""
    modules = {_module(item) for item in items if _uses_session(item)}
    spark_groups = split_spark_modules(modules, spark_groups_in_use())
    for item in items:
        module = _module(item)
        group = spark_groups[module] if _uses_session(item) else module
        item.add_marker(pytest.mark.xdist_group(group))


def spark_groups_in_use() -> tuple[str, ...]:
    """The first one or two ``SPARK_GROUPS``, as ``SPARK_SESSIONS_VARIABLE`` says (one
    when unset)."""
    sessions = os.environ.get(SPARK_SESSIONS_VARIABLE, "1")
    if sessions not in ("1", "2"):
        raise pytest.UsageError(f"{SPARK_SESSIONS_VARIABLE}={sessions!r}: give 1 or 2")
    return SPARK_GROUPS[: int(sessions)]


def split_spark_modules(
    modules: Iterable[str], groups: tuple[str, ...] = SPARK_GROUPS
) -> dict[str, str]:
    """The Spark group (of ``groups``) of each module (a node id's path) of tests using
    the session.

    Post: the groups' weights (``SPARK_MODULE_WEIGHTS``) are about equal: the heaviest
    module first, each into the lighter group so far (ties: the first group), modules of
    equal weight by path, so every process of a run (xdist's controller and workers)
    makes the same split."""
    weights = {
        module: SPARK_MODULE_WEIGHTS.get(module, NEW_SPARK_MODULE_WEIGHT) for module in modules
    }
    totals = dict.fromkeys(groups, 0.0)
    split: dict[str, str] = {}
    for module in sorted(weights, key=lambda module: (-weights[module], module)):
        lighter = min(groups, key=lambda group: totals[group])
        split[module] = lighter
        totals[lighter] += weights[module]
    return split


def _uses_session(item: pytest.Item) -> bool:
    return "spark" in getattr(item, "fixturenames", ())


def _module(item: pytest.Item) -> str:
    return item.nodeid.split("::")[0]


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """Under ``--dist loadgroup``: xdist's group scheduler, handing out the
    ``FIRST_WORK_UNITS`` before any other, so the Spark session's group starts first
    (with two sessions, both at once on two workers) and every other test fills in after
    them. xdist orders its units by their number of tests: a module of many short tests
    would come first, and the Spark groups or the speculation test could start late and
    finish last, one worker idle."""
    if getattr(config.option, "dist", "no") != "loadgroup":
        return None
    from xdist.scheduler import LoadGroupScheduling  # type: ignore[import-untyped]

    class SparkFirstScheduling(LoadGroupScheduling):  # type: ignore[misc]
        def _assign_work_unit(self, node: Any) -> None:
            for unit in reversed(FIRST_WORK_UNITS):
                if unit in self.workqueue:
                    self.workqueue.move_to_end(unit, last=False)
            super()._assign_work_unit(node)

    return SparkFirstScheduling(config, log)


@pytest.hookimpl(trylast=True, specname="pytest_collection_modifyitems")
def pytest_collection_modifyitems_group_ids(
    config: pytest.Config, items: list[pytest.Item]
) -> None:
    """xdist's scheduler reads a test's group from its node id (``ID@GROUP``), which xdist
    writes to ``Item._nodeid``; pytest 9.2 keeps the id in ``Item._id``, so xdist's write
    is lost and every test is scheduled alone. Written here where it is missing (after
    xdist's hook: ``trylast``)."""
    if not distributed_by_group(config):
        return
    for item in items:
        mark = item.get_closest_marker("xdist_group")
        node_id = getattr(item, "_id", None)
        if mark is None or node_id is None or item.nodeid.endswith(f"@{mark.args[0]}"):
            continue
        item._id = type(node_id).parse(f"{item.nodeid}@{mark.args[0]}")


def pytest_report_header(config: pytest.Config) -> str:
    if config.getoption("all_tiers"):
        return "tiers: all (unit, emulator, spark, engines, slow)"
    if config.getoption("markexpr"):
        return f"tiers: by marks ({config.getoption('markexpr')})"
    return "tiers: unit (emulator, spark, engines and slow deselected: -m MARK or --all runs them)"


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if _not_collected:
        why = "the unit tier" if spark_installed() else "a Spark package is not installed"
        terminalreporter.write_line(
            f"tiers: {why}: {len(_not_collected)} spark test modules not collected"
        )
    if _not_collected_engines:
        terminalreporter.write_line(
            f"tiers: an engine package is not installed, or the unit tier: "
            f"{len(_not_collected_engines)} engines test modules not collected"
        )


_not_collected: list[Path] = []
_not_collected_engines: list[Path] = []


def needs_spark(item: pytest.Item) -> bool:
    """The test's module, its function or one of its fixtures imports the Spark extra."""
    return bool(_spark_names(_item_imports(item)))


def needs_engines(item: pytest.Item) -> bool:
    """The test's module, its function or one of its fixtures imports an engine extra."""
    return bool(_tier_packages(_item_imports(item)) & ENGINE_PACKAGES)


def _item_imports(item: pytest.Item) -> set[str]:
    """The modules the test's module, its function and its fixtures import."""
    imports = _imports(item.path)
    names = set(imports.loaded)
    function = getattr(item, "function", None)
    if function is not None:
        names |= imports.in_functions.get(function.__qualname__, frozenset())
    for fixture in _fixture_functions(item):
        names |= _function_imports(fixture)
    return names


def uses_emulator(item: pytest.Item) -> bool:
    """An emulator fixture among the test's fixtures, or a cloud store as a parameter."""
    if EMULATOR_FIXTURES & set(getattr(item, "fixturenames", ())):
        return True
    callspec = getattr(item, "callspec", None)
    return callspec is not None and any(
        isinstance(value, str) and value in CLOUD_STORES for value in callspec.params.values()
    )


@functools.cache
def spark_installed() -> bool:
    return importlib.util.find_spec("pyspark") is not None


def _spark_names(names: Iterable[str]) -> set[str]:
    return {name for name in names if _loaded_packages(name) & SPARK_PACKAGES}


def _needs_spark_module(name: str) -> bool:
    """Loading module ``name`` loads a Spark package."""
    return bool(_loaded_packages(name) & SPARK_PACKAGES)


def _needs_engine_module(name: str) -> bool:
    """Loading module ``name`` loads an engine package."""
    return bool(_loaded_packages(name) & ENGINE_PACKAGES)


def missing_spark(name: str) -> set[str]:
    """The Spark packages loading module ``name`` needs that are not installed."""
    needed = _loaded_packages(name) & SPARK_PACKAGES
    return {package for package in needed if importlib.util.find_spec(package) is None}


def missing_engines(name: str) -> set[str]:
    """The engine packages loading module ``name`` needs that are not installed."""
    needed = _loaded_packages(name) & ENGINE_PACKAGES
    return {package for package in needed if importlib.util.find_spec(package) is None}


def _tier_packages(names: Iterable[str]) -> frozenset[str]:
    """The Spark and engine packages loading ``names`` loads."""
    return frozenset().union(*(_loaded_packages(name) for name in names))


@functools.cache
def _loaded_packages(name: str) -> frozenset[str]:
    """The Spark and engine packages loading module ``name`` loads (ours followed through
    their sources, parent packages included, as Python loads them)."""
    top = name.split(".")[0]
    if top in SPARK_PACKAGES | ENGINE_PACKAGES:
        return frozenset({top})
    found: set[str] = set()
    parts = name.split(".")
    for depth in range(1, len(parts) + 1):
        source = _source_of(".".join(parts[:depth]))
        if source is not None:
            found |= _loaded_by(source)
    return frozenset(found)


_visiting: set[Path] = set()


def _loaded_by(source: Path) -> frozenset[str]:
    """The Spark and engine packages ``source`` loads when loaded (import cycles count
    as none)."""
    if source in _visiting:
        return frozenset()
    _visiting.add(source)
    try:
        return _tier_packages(_imports(source).loaded)
    finally:
        _visiting.discard(source)


@functools.cache
def _source_of(name: str) -> Path | None:
    """The source file of one of our modules, found without importing its package."""
    top, _, rest = name.partition(".")
    if top not in LOCAL_PACKAGES:
        return None
    if top == "tests":
        base = ROOT / "tests"
    else:
        spec = importlib.util.find_spec(top)
        if spec is None or spec.origin is None:
            return None
        base = Path(spec.origin).parent
    path = base.joinpath(*rest.split(".")) if rest else base
    for candidate in (path.with_suffix(".py"), path / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


class _Imports:
    """The modules a source file imports: when loaded (``loaded``: outside functions and
    ``TYPE_CHECKING`` blocks) and in each function (by qualified name)."""

    def __init__(self, tree: ast.Module, package: str) -> None:
        self.loaded: frozenset[str] = frozenset(_imported(tree.body, package, nested=False))
        functions: dict[str, frozenset[str]] = {}
        for qualname, node in _functions(tree.body, ""):
            functions[qualname] = frozenset(_imported(node.body, package, nested=True))
        self.in_functions = functions


@functools.cache
def _imports(source: Path) -> _Imports:
    try:
        relative = source.resolve().relative_to(ROOT)
        package = ".".join(relative.parent.parts)
    except ValueError:
        package = ""
    return _Imports(ast.parse(source.read_text(), str(source)), package)


def _functions(
    body: list[ast.stmt], prefix: str
) -> Iterable[tuple[str, ast.FunctionDef | ast.AsyncFunctionDef]]:
    for node in body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            yield prefix + node.name, node
        elif isinstance(node, ast.ClassDef):
            yield from _functions(node.body, f"{prefix}{node.name}.")


def _imported(body: list[ast.stmt], package: str, *, nested: bool) -> Iterable[str]:
    """Module names imported by ``body``; ``nested``: inside functions too."""
    for node in body:
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            yield from _imported(node.orelse, package, nested=nested)
            continue
        if not nested and isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        for child in ast.walk(node) if nested else _statements(node):
            if isinstance(child, ast.If) and _is_type_checking(child.test):
                continue
            if isinstance(child, ast.Import):
                yield from (alias.name for alias in child.names)
            elif isinstance(child, ast.ImportFrom):
                base = _absolute(child, package)
                yield base
                yield from (f"{base}.{alias.name}" for alias in child.names)


def _statements(node: ast.stmt) -> Iterable[ast.AST]:
    """A statement run when its module loads, and the statements it runs (not functions)."""
    yield node
    if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
        return
    for field in ("body", "orelse", "finalbody", "handlers"):
        for child in getattr(node, field, ()):
            if isinstance(child, ast.If) and _is_type_checking(child.test):
                continue
            yield from _statements(child)


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _absolute(node: ast.ImportFrom, package: str) -> str:
    if not node.level:
        return node.module or ""
    parts = package.split(".") if package else []
    base = parts[: len(parts) - (node.level - 1)]
    return ".".join([*base, node.module] if node.module else base)


def _fixture_functions(item: pytest.Item) -> Iterable[Callable[..., Any]]:
    info = getattr(item, "_fixtureinfo", None)
    if info is None:
        return
    for definitions in info.name2fixturedefs.values():
        for definition in definitions:
            yield definition.func


@functools.cache
def _function_imports(function: Callable[..., Any]) -> frozenset[str]:
    try:
        source = textwrap.dedent(inspect.getsource(function))
        module = inspect.getmodule(function)
    except (OSError, TypeError):
        return frozenset()
    package = (module.__package__ or "") if module is not None else ""
    tree = ast.parse(source)
    return frozenset(_imported(tree.body, package, nested=True))


_running: list[pytest.Item] = []


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item) -> Generator[None, object, object]:
    _running.append(item)
    try:
        return (yield)
    finally:
        _running.remove(item)


def _only_when_marked(start: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(start)
    def guarded(self: object, *args: Any, **kwargs: Any) -> Any:
        for item in _running:
            if item.get_closest_marker("emulator") is None:
                raise AssertionError(
                    f"{item.nodeid} starts an emulator ({type(self).__name__}) but is not "
                    "marked 'emulator': use an emulator fixture (tests/tiers.py "
                    "EMULATOR_FIXTURES) or a cloud store parameter, so the unit tier "
                    "leaves it out"
                )
        return start(self, *args, **kwargs)

    return guarded
