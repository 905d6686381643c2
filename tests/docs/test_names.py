"""Every name a page or a docstring gives exists: module paths (``aiocommit.x.y``, and an
attribute after them), files (``src/aiocommit/...``, ``docs/...``, ``stages/x.py``...)
and ``aiocommit <command>`` command lines. Pages: ``docs/**/*.md`` and ``README.md``;
docstrings: every module, class and function of ``src/aiocommit``."""

from __future__ import annotations

import ast
import dataclasses
import importlib
import importlib.util
import re
from collections.abc import Iterator
from functools import cache
from pathlib import Path

import click
import pytest

import aiocommit.integrations.spark as spark_package
from aiocommit.cli import main
from aiocommit.observability import INSTRUMENTS, job_figures
from aiocommit.options import CommitOptions, option_specs
from tests import tiers
from tests.docs.conftest import DOCS, ROOT
from tests.helpers import parsed

SOURCE = ROOT / "src" / "aiocommit"

#: ``aiocommit.X`` that are not modules: option keys (Spark writer options, the
#: ``aiocommit.*`` configuration namespace), OpenTelemetry attributes and metrics, summary keys,
#: the entry-point group of commands, a placeholder, the jar's Java package
NOT_MODULES = frozenset(
    {"NAME", "saveMode", "savemode", "javaVersion", "test", "commands", "job_id", "stage"}
    | {"task_attempt_id"}
    | {"version"}
    # the Java package of aiocommit-spark.jar (aiocommit.spark.DeferredManifestCommitter)
    # and its write option aiocommit.jvm.jobId
    | {"spark", "jvm"}
    # metric names and the figures on a job's span (aiocommit.files.committed, .files)
    | {name.split(".")[1] for name in INSTRUMENTS}
    | set(job_figures({}, {}))
    | {spec.name for spec in option_specs()}
    | {spec.name.replace("_", "-").split("-")[0] for spec in option_specs()}
    | {f.name for f in dataclasses.fields(CommitOptions)}
)

#: files a page or docstring names that are not the repository's: Spark's, and the
#: Hadoop reference harness's that ``aiocommit_stress.hadoop`` drives when it is there
EXTERNAL_FILES = frozenset({"spark-env.sh", "foreign_job.py", "run.sh"})

MODULE_PATH = re.compile(r"(?<![\w./-])aiocommit(?:\.[A-Za-z_]\w*)+")
FILE_NAME = re.compile(
    r"(?<![\w./-])((?:\.\./)*[\w.-]+(?:/[\w.-]+)*\.(?:py|md|sh|toml|yml|yaml|java))(?![\w/])"
)
SOURCE_PATH = re.compile(r"(?<![\w./-])src/aiocommit(?:/[\w.]+)*")
INLINE_CODE = re.compile(r"``?([^`\n]+?)``?")
FENCE = re.compile(r"^```.*?^```", re.MULTILINE | re.DOTALL)
COMMAND_LINE = re.compile(r"^\s*(?:\$\s+)?aiocommit\s+([a-z][\w-]*)", re.MULTILINE)


@dataclasses.dataclass(frozen=True)
class Text:
    """A page, or one docstring, and where it is."""

    where: str
    file: Path
    text: str


def pages() -> Iterator[Text]:
    for path in sorted([*DOCS.rglob("*.md"), ROOT / "README.md"]):
        yield Text(str(path.relative_to(ROOT)), path, path.read_text(encoding="utf-8"))


def docstrings() -> Iterator[Text]:
    for path in sorted(SOURCE.rglob("*.py")):
        tree = parsed(path)
        for node in ast.walk(tree):
            if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
                doc = ast.get_docstring(node, clean=False)
                if doc:
                    line = getattr(node, "lineno", 1)
                    yield Text(f"{path.relative_to(ROOT)}:{line}", path, doc)


@cache
def texts() -> tuple[Text, ...]:
    return (*pages(), *docstrings())


@cache
def module_exists(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except ModuleNotFoundError:
        return False


def resolves(dotted: str) -> bool:
    """A module, or a module and attributes of it."""
    parts = dotted.split(".")
    if len(parts) > 1 and parts[1] in NOT_MODULES and not module_exists(".".join(parts[:2])):
        return True
    for cut in range(len(parts), 0, -1):
        module_name = ".".join(parts[:cut])
        if module_exists(module_name):
            if not tiers.spark_installed() and tiers._needs_spark_module(module_name):
                return True  # its attributes are checked where pyspark is installed
            if tiers.missing_engines(module_name):
                return True  # and an engine's where its packages are
            value: object = importlib.import_module(module_name)
            for attribute in parts[cut:]:
                try:
                    if not hasattr(value, attribute):
                        return False
                except ModuleNotFoundError as error:  # a lazy name of a missing package's
                    missing = (error.name or "").split(".")[0]
                    return missing in tiers.SPARK_PACKAGES | tiers.ENGINE_PACKAGES
                value = getattr(value, attribute)
            return True
    return False


@cache
def repository_file_names() -> frozenset[str]:
    """Names of the files in the repository's own directories (not the venv or builds)."""
    return frozenset(
        path.name
        for top in ("src", "tests", "docs", "scripts", "stress", "examples", ".ci")
        for path in (ROOT / top).rglob("*")
        if "__pycache__" not in path.parts
    ) | frozenset(path.name for path in ROOT.iterdir())


def files_named(name: str) -> bool:
    return name in repository_file_names()


def file_exists(name: str, near: Path) -> bool:
    """Relative to the repository, the package, its source root, the docs, or the naming
    file; a bare file name anywhere in the repository."""
    if name in EXTERNAL_FILES:
        return True
    if "/" not in name:
        return files_named(name)
    bases = (ROOT, SOURCE, SOURCE.parent, DOCS, near.parent)
    return any((base / name).exists() for base in bases)


def commands() -> set[str]:
    return set(main.list_commands(click.Context(main)))


def command_names(text: Text) -> Iterator[str]:
    """Commands of ``aiocommit`` command lines: in inline code that starts with one, and
    in the lines of fenced blocks (pages) that start with one."""
    for code in INLINE_CODE.findall(text.text):
        found = COMMAND_LINE.match(code)
        if found:
            yield found.group(1)
    if text.file.suffix == ".md":
        for block in FENCE.findall(text.text):
            yield from COMMAND_LINE.findall(block)


def loads_spark_or_an_engine(dotted: str) -> bool:
    """Checking ``dotted`` loads a Spark or engine package: a module it names needs one
    (read from the sources: ``find_spec`` would load a parent package), or it is a lazy
    name of the Spark integration's package (``write`` loads pyspark)."""
    parts = dotted.split(".")
    prefixes = [".".join(parts[:cut]) for cut in range(1, len(parts) + 1)]
    if any(tiers._needs_spark_module(p) or tiers._needs_engine_module(p) for p in prefixes):
        return True
    spark_depth = len(spark_package.__name__.split("."))
    return prefixes[spark_depth - 1 : spark_depth] == [spark_package.__name__] and (
        len(parts) > spark_depth and parts[spark_depth] in spark_package._LAZY
    )


def missing_module_paths(*, loading_spark_or_an_engine: bool) -> list[str]:
    return [
        f"{text.where}: {name}"
        for text in texts()
        for name in sorted(set(MODULE_PATH.findall(text.text)))
        if loads_spark_or_an_engine(name) == loading_spark_or_an_engine and not resolves(name)
    ]


def test_module_paths_exist() -> None:
    """The names whose check loads no Spark or engine package (the unit tier loads none;
    the others: the next test)."""
    assert missing_module_paths(loading_spark_or_an_engine=False) == []


@pytest.mark.spark
@pytest.mark.engines
def test_module_paths_exist_in_the_spark_and_engine_integrations() -> None:
    assert missing_module_paths(loading_spark_or_an_engine=True) == []


def test_files_exist() -> None:
    missing = [
        f"{text.where}: {name}"
        for text in texts()
        for name in sorted(set(FILE_NAME.findall(text.text)))
        if not name.startswith(("http", "www.")) and not file_exists(name, text.file)
    ]
    missing += [
        f"{text.where}: {name}"
        for text in texts()
        for name in sorted(set(SOURCE_PATH.findall(text.text)))
        if not (ROOT / name).exists()
    ]
    assert missing == []


def test_commands_exist() -> None:
    known = commands()
    missing = [
        f"{text.where}: aiocommit {name}"
        for text in texts()
        for name in sorted(set(command_names(text)))
        if name not in known
    ]
    assert missing == []


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("see ``aiocommit.client.nowhere``", "module"),
        ("``aiocommit.client.job.no_such_function``", "module"),
        ("in `src/aiocommit/stages/gone.py`", "file"),
        ("the package `src/aiocommit/gone/`", "file"),
        ("the module ``stages/gone.py``", "file"),
        ("run `aiocommit frobnicate DEST`", "command"),
        ("```\n$ aiocommit frobnicate DEST\n```", "command"),
    ],
)
def test_a_wrong_name_is_found(text: str, problem: str) -> None:
    page = Text("example.md", DOCS / "example.md", text)
    wrong = {
        "module": [n for n in MODULE_PATH.findall(text) if not resolves(n)],
        "file": [n for n in FILE_NAME.findall(text) if not file_exists(n, page.file)]
        + [n for n in SOURCE_PATH.findall(text) if not (ROOT / n).exists()],
        "command": [n for n in command_names(page) if n not in commands()],
    }
    assert [kind for kind, names in wrong.items() if names] == [problem]
