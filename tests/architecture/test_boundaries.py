"""Boundaries the import contracts (pyproject ``[tool.importlinter]``) cannot state: one
helper for exception groups, the CLI's commands found by entry point, ``cli`` exporting
``main`` only."""

from __future__ import annotations

import ast
import inspect
from importlib.metadata import entry_points
from pathlib import Path

import aiocommit
from aiocommit import cli
from aiocommit.cli.entry_points import GROUP
from tests.helpers import parsed

SOURCE = Path(aiocommit.__file__).resolve().parent


def modules() -> list[tuple[Path, ast.Module]]:
    return [(path, parsed(path)) for path in SOURCE.rglob("*.py")]


def test_one_helper_takes_exception_groups_apart() -> None:
    """``errors.first_error`` is the only code that reads an exception group's leaves."""
    readers = {
        f"{path.relative_to(SOURCE)}:{node.lineno}"
        for path, tree in modules()
        for node in ast.walk(tree)
        if isinstance(node, ast.Attribute)
        and node.attr == "exceptions"
        and ast.unparse(node.value) != "click"  # click.exceptions, a module
    }
    assert readers and all(r.startswith("errors.py:") for r in readers), sorted(readers)


def test_the_cli_imports_no_module_by_name() -> None:
    """Commands outside the CLI are found by entry point, never imported by a string."""
    by_name = [
        f"{path.relative_to(SOURCE)}:{node.lineno}"
        for path, tree in modules()
        if path.relative_to(SOURCE).parts[0] == "cli"
        for node in ast.walk(tree)
        if isinstance(node, ast.Name | ast.Attribute)
        and (node.id if isinstance(node, ast.Name) else node.attr)
        in ("import_module", "__import__")
    ]
    assert by_name == []


def test_stress_is_an_entry_point_command() -> None:
    (stress,) = [e for e in entry_points(group=GROUP) if e.name == "stress"]
    assert (stress.module, stress.attr) == ("aiocommit_stress.cli", "main")
    # the harness's own distribution declares it: installed, the command is there
    assert stress.dist is not None and stress.dist.name == "aiocommit-stress"
    assert stress.extras == []


def test_cli_exports_main_only() -> None:
    public = {
        name
        for name, value in vars(cli).items()
        if not name.startswith("_") and not inspect.ismodule(value)
    }
    assert public == {"main"}
    assert cli.__all__ == ["main"]
